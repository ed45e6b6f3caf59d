/* Tokenizer loading from tokenizer.* metadata, vocabulary lookup, special
 * token splitting and the encode entry point. The two algorithms live in
 * tokenizer_spm.c and tokenizer_bpe.c, decoding in detok.c, chat templates
 * in chat.c.
 *
 * Special tokens follow llama.cpp: before any encoding the text is split on
 * occurrences of special token strings, longest token first, leftmost
 * occurrences first. Control and unknown tokens take part only with
 * parse_special; user-defined tokens always do (as in llama.cpp and
 * HuggingFace tokenizers, where added non-special tokens always match). */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

#define ID_ABSENT 0xFFFFFFFFull

int sd_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int sd_ids_push(sd_ids *ids, int32_t id) {
    if (ids->n == ids->cap && sd_grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v))
        return -1;
    ids->v[ids->n++] = id;
    return 0;
}

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

int32_t sd_tokenizer_find(const sd_tokenizer *t, const char *s, size_t len) {
    if (!t || (!s && len)) return -1;
    for (uint32_t i = hash_bytes(s, len) & t->tok_mask;; i = (i + 1) & t->tok_mask) {
        int32_t id = t->tok_hash[i];
        if (id < 0) return -1;
        if (t->tokens[id].len == len && !memcmp(t->tokens[id].s, s, len)) return id;
    }
}

/* Later duplicates replace earlier ones, as llama.cpp's token_to_id does. */
static void hash_insert(sd_tokenizer *t, int32_t id) {
    gguf_str s = t->tokens[id];
    for (uint32_t i = hash_bytes(s.s, s.len) & t->tok_mask;; i = (i + 1) & t->tok_mask) {
        int32_t cur = t->tok_hash[i];
        if (cur < 0 || (t->tokens[cur].len == s.len && !memcmp(t->tokens[cur].s, s.s, s.len))) {
            t->tok_hash[i] = id;
            return;
        }
    }
}

static uint32_t table_size(uint64_t n) {
    uint32_t size = 16;
    while (size < 2 * n) size *= 2;
    return size;
}

/* Reads an optional token id: absent or 0xFFFFFFFF / -1 give -1. */
static int read_id(const gguf_file *f, const char *key, int n_vocab, int *out, sd_err *e) {
    int64_t v;
    *out = -1;
    int rc = gguf_get_int(f, key, &v, e);
    if (rc < 0) return -1;
    if (rc == 1 || v == -1 || (uint64_t)v == ID_ABSENT) return 0;
    if (v < 0 || v >= n_vocab)
        return sd_fail(e, "%s = %lld is out of range (vocabulary of %d)", key, (long long)v,
                       n_vocab);
    *out = (int)v;
    return 0;
}

static int read_bool(const gguf_file *f, const char *key, int dflt, int *out, sd_err *e) {
    int v;
    int rc = gguf_get_bool(f, key, &v, e);
    if (rc < 0) return -1;
    *out = rc == 1 ? dflt : v;
    return 0;
}

static int load_vocab(sd_tokenizer *t, const gguf_file *f, sd_err *e) {
    const gguf_value *v;
    int rc = gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &v, e);
    if (rc < 0) return -1;
    if (rc == 1) return sd_fail(e, "tokenizer.ggml.tokens is missing");
    if (v->v.arr.n == 0) return sd_fail(e, "tokenizer.ggml.tokens is empty");
    if (v->v.arr.n > INT32_MAX / 2)
        return sd_fail(e, "tokenizer.ggml.tokens has %llu entries, too many",
                       (unsigned long long)v->v.arr.n);
    t->n_vocab = (int)v->v.arr.n;
    t->tokens = v->v.arr.strs;

    t->types = malloc((size_t)t->n_vocab);
    if (!t->types) return sd_fail(e, "out of memory");
    rc = gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_INT32, &v, e);
    if (rc < 0) return -1;
    if (rc == 1) {
        memset(t->types, SD_TT_NORMAL, (size_t)t->n_vocab);
    } else {
        if (v->v.arr.n != (uint64_t)t->n_vocab)
            return sd_fail(e, "tokenizer.ggml.token_type has %llu entries, tokens has %d",
                           (unsigned long long)v->v.arr.n, t->n_vocab);
        const unsigned char *d = v->v.arr.data;
        for (int i = 0; i < t->n_vocab; i++) {
            int32_t tt;
            memcpy(&tt, d + 4 * (size_t)i, 4);
            if (tt < 0 || tt >= SD_TT_COUNT)
                return sd_fail(e, "tokenizer.ggml.token_type[%d] = %d is not a token type", i,
                               (int)tt);
            t->types[i] = (uint8_t)tt;
        }
    }

    t->scores = calloc((size_t)t->n_vocab, sizeof *t->scores);
    if (!t->scores) return sd_fail(e, "out of memory");
    rc = gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_FLOAT32, &v, e);
    if (rc < 0) return -1;
    if (rc == 0) {
        if (v->v.arr.n != (uint64_t)t->n_vocab)
            return sd_fail(e, "tokenizer.ggml.scores has %llu entries, tokens has %d",
                           (unsigned long long)v->v.arr.n, t->n_vocab);
        memcpy(t->scores, v->v.arr.data, (size_t)t->n_vocab * sizeof *t->scores);
    }

    t->tok_mask = table_size((uint64_t)t->n_vocab) - 1;
    t->tok_hash = malloc(((size_t)t->tok_mask + 1) * sizeof *t->tok_hash);
    if (!t->tok_hash) return sd_fail(e, "out of memory");
    memset(t->tok_hash, 0xFF, ((size_t)t->tok_mask + 1) * sizeof *t->tok_hash);
    for (int i = 0; i < t->n_vocab; i++)
        if (t->tokens[i].len) hash_insert(t, i);
    return 0;
}

static int cmp_special(const void *a, const void *b, void *arg) {
    const sd_tokenizer *t = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint64_t lx = t->tokens[x].len, ly = t->tokens[y].len;
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}

static int collect_specials(sd_tokenizer *t, sd_err *e) {
    int n = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        int tt = t->types[i];
        n += (tt == SD_TT_CONTROL || tt == SD_TT_USER_DEFINED || tt == SD_TT_UNKNOWN) &&
             t->tokens[i].len > 0;
    }
    t->specials = malloc((size_t)(n ? n : 1) * sizeof *t->specials);
    if (!t->specials) return sd_fail(e, "out of memory");
    for (int i = 0; i < t->n_vocab; i++) {
        int tt = t->types[i];
        if ((tt == SD_TT_CONTROL || tt == SD_TT_USER_DEFINED || tt == SD_TT_UNKNOWN) &&
            t->tokens[i].len > 0)
            t->specials[t->n_specials++] = i;
    }
    qsort_r(t->specials, (size_t)t->n_specials, sizeof *t->specials, cmp_special, t);
    return 0;
}

static void spm_byte_tokens(sd_tokenizer *t) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
        char raw = (char)b;
        int32_t id = sd_tokenizer_find(t, buf, sizeof buf);
        t->byte_tok[b] = id >= 0 ? id : sd_tokenizer_find(t, &raw, 1);
    }
}

sd_tokenizer *sd_tokenizer_load(const gguf_file *f, sd_err *e) {
    gguf_str model;
    int rc = gguf_get_str(f, "tokenizer.ggml.model", &model, e);
    if (rc < 0) return NULL;
    if (rc == 1) {
        sd_fail(e, "tokenizer.ggml.model is missing");
        return NULL;
    }
    int kind;
    if (gguf_str_eq(model, "llama")) kind = SD_TOK_LLAMA;
    else if (gguf_str_eq(model, "gpt2")) kind = SD_TOK_GPT2;
    else {
        sd_fail(e, "unsupported tokenizer.ggml.model \"%.*s\" (supported: llama, gpt2)",
                (int)(model.len > 64 ? 64 : model.len), model.s);
        return NULL;
    }

    sd_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    t->kind = kind;
    if (load_vocab(t, f, e) || collect_specials(t, e)) goto fail;
    if (read_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, e) ||
        read_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, e) ||
        read_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, e) ||
        read_id(f, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, e) ||
        read_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot, e))
        goto fail;

    rc = gguf_get_str(f, "tokenizer.chat_template", &t->chat_template, e);
    if (rc < 0) goto fail;
    if (rc == 1) t->chat_template.s = NULL;

    int dflt_bos = kind == SD_TOK_LLAMA;
    if (kind == SD_TOK_LLAMA) {
        spm_byte_tokens(t);
    } else {
        if (sd_bpe_init(t, f, e)) goto fail;
        dflt_bos = t->ignore_merges; /* llama3 pre-tokenizer: llama.cpp defaults to BOS */
    }
    if (read_bool(f, "tokenizer.ggml.add_bos_token", dflt_bos, &t->add_bos, e) ||
        read_bool(f, "tokenizer.ggml.add_space_prefix", kind == SD_TOK_LLAMA,
                  &t->add_space_prefix, e))
        goto fail;
    return t;
fail:
    sd_tokenizer_free(t);
    return NULL;
}

void sd_tokenizer_free(sd_tokenizer *t) {
    if (!t) return;
    sd_bpe_release(t);
    free(t->scores);
    free(t->types);
    free(t->tok_hash);
    free(t->specials);
    free(t);
}

int sd_tokenizer_kind(const sd_tokenizer *t) { return t->kind; }
int sd_tokenizer_n_vocab(const sd_tokenizer *t) { return t->n_vocab; }
int sd_tokenizer_bos(const sd_tokenizer *t) { return t->bos; }
int sd_tokenizer_eos(const sd_tokenizer *t) { return t->eos; }
int sd_tokenizer_pad(const sd_tokenizer *t) { return t->pad; }
int sd_tokenizer_add_bos(const sd_tokenizer *t) { return t->add_bos; }

gguf_str sd_tokenizer_piece(const sd_tokenizer *t, int32_t id) {
    gguf_str none = {NULL, 0};
    if (!t || id < 0 || id >= t->n_vocab) return none;
    return t->tokens[id];
}

static int add_stop(int32_t *ids, int n, int cap, int32_t id) {
    if (id < 0 || n >= cap) return n;
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return n;
    ids[n] = id;
    return n + 1;
}

int sd_tokenizer_stop_ids(const sd_tokenizer *t, int32_t *ids, int cap) {
    static const char *const names[] = {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>",
                                        "<end_of_turn>", "<|endoftext|>"};
    int n = add_stop(ids, 0, cap, t->eos);
    n = add_stop(ids, n, cap, t->eot);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        n = add_stop(ids, n, cap, sd_tokenizer_find(t, names[i], strlen(names[i])));
    return n;
}

/* A piece of the input: raw text (tok < 0) or one special token. */
typedef struct frag {
    size_t off, len;
    int32_t tok;
} frag;

static int push_frag(frag **v, size_t *n, size_t *cap, size_t off, size_t len, int32_t tok) {
    if (sd_grow((void **)v, cap, *n + 1, sizeof **v)) return -1;
    (*v)[(*n)++] = (frag){off, len, tok};
    return 0;
}

/* Splits text on special tokens; *out gets the fragments in order. */
static int split_specials(const sd_tokenizer *t, const char *text, size_t len,
                          int parse_special, frag **out, size_t *n_out, sd_err *e) {
    frag *cur = NULL, *next = NULL;
    size_t n_cur = 0, cap_cur = 0, cap_next = 0;
    if (push_frag(&cur, &n_cur, &cap_cur, 0, len, -1)) goto oom;
    for (int s = 0; s < t->n_specials; s++) {
        int32_t id = t->specials[s];
        if (!parse_special && t->types[id] != SD_TT_USER_DEFINED) continue;
        gguf_str sp = t->tokens[id];
        if (sp.len > len || !memmem(text, len, sp.s, sp.len)) continue;
        size_t n_next = 0;
        for (size_t i = 0; i < n_cur; i++) {
            frag fr = cur[i];
            if (fr.tok >= 0) {
                if (push_frag(&next, &n_next, &cap_next, fr.off, fr.len, fr.tok)) goto oom;
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len;
            while (pos < end) {
                const char *m = memmem(text + pos, end - pos, sp.s, sp.len);
                size_t at = m ? (size_t)(m - text) : end;
                if (at > pos && push_frag(&next, &n_next, &cap_next, pos, at - pos, -1)) goto oom;
                if (!m) break;
                if (push_frag(&next, &n_next, &cap_next, at, sp.len, id)) goto oom;
                pos = at + sp.len;
            }
        }
        frag *tmp = cur;
        size_t tcap = cap_cur;
        cur = next;
        cap_cur = cap_next;
        n_cur = n_next;
        next = tmp;
        cap_next = tcap;
    }
    free(next);
    *out = cur;
    *n_out = n_cur;
    return 0;
oom:
    free(cur);
    free(next);
    return sd_fail(e, "out of memory");
}

int sd_tokenize(const sd_tokenizer *t, const char *text, size_t len, int add_bos,
                int parse_special, int32_t **ids, int *n, sd_err *e) {
    *ids = NULL;
    *n = 0;
    if (!text && len) return sd_fail(e, "tokenize: text is NULL");
    if (len > INT32_MAX / 4) return sd_fail(e, "tokenize: text of %zu bytes is too long", len);
    sd_ids out = {NULL, 0, 0};
    frag *frags = NULL;
    size_t n_frags = 0;
    if (sd_grow((void **)&out.v, &out.cap, len + 2, sizeof *out.v)) {
        sd_fail(e, "out of memory");
        goto fail;
    }
    if (add_bos && t->bos >= 0) out.v[out.n++] = t->bos;
    if (len && split_specials(t, text, len, parse_special, &frags, &n_frags, e)) goto fail;
    int prev_special = 1; /* llama: a fragment after a special token gets the dummy prefix */
    for (size_t i = 0; i < n_frags; i++) {
        frag fr = frags[i];
        if (fr.tok >= 0) {
            if (sd_ids_push(&out, fr.tok)) {
                sd_fail(e, "out of memory");
                goto fail;
            }
            prev_special = 1;
            continue;
        }
        int rc = t->kind == SD_TOK_LLAMA
                     ? sd_spm_encode(t, text + fr.off, fr.len,
                                     t->add_space_prefix && prev_special, &out, e)
                     : sd_bpe_encode(t, text + fr.off, fr.len, &out, e);
        if (rc) goto fail;
        prev_special = 0;
    }
    free(frags);
    *ids = out.v;
    *n = (int)out.n;
    return 0;
fail:
    free(frags);
    free(out.v);
    return -1;
}
