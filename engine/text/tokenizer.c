/* Tokenizer loading from tokenizer.* metadata, special token splitting and
 * the encode entry point: the top of engine/text. Below it, the vocabulary
 * tables (vocab.c) and growable buffers (buf.c), which the two algorithms
 * (tokenizer_spm.c, tokenizer_bpe.c) use too; decoding is in detok.c, chat
 * templates in chat.c. Calls go only downwards: nothing below calls back
 * into this file.
 *
 * Special tokens follow llama.cpp: before any encoding the text is split on
 * occurrences of special token strings, longest token first, leftmost
 * occurrences first. Control and unknown tokens take part only with
 * parse_special; user-defined tokens always do (as in llama.cpp and
 * HuggingFace tokenizers, where added non-special tokens always match).
 * sd_tokenize_ex also keeps control tokens out of the caller's plain spans
 * (chat messages), so only a template's own markers become control ids. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

#define ID_ABSENT 0xFFFFFFFFull

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
    if (sd_vocab_load(t, f, e)) goto fail;
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
                  &t->add_space_prefix, e) ||
        sd_detok_table_build(t, e))
        goto fail;
    return t;
fail:
    sd_tokenizer_free(t);
    return NULL;
}

void sd_tokenizer_free(sd_tokenizer *t) {
    if (!t) return;
    sd_bpe_release(t);
    sd_vocab_release(t);
    free(t->bytes);
    free(t->bytes_off);
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

const char *sd_tokenizer_text(const void *tok, int32_t id, size_t *len) {
    gguf_str p = sd_tokenizer_piece(tok, id);
    *len = p.len;
    return p.s;
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
    static const char *const fim[] = {"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"};
    int n = add_stop(ids, 0, cap, t->eos);
    n = add_stop(ids, n, cap, t->eot);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        n = add_stop(ids, n, cap, sd_tokenizer_find(t, names[i], strlen(names[i])));
    for (size_t i = 0; i < sizeof fim / sizeof fim[0]; i++) {
        int32_t id = sd_tokenizer_find(t, fim[i], strlen(fim[i]));
        if (id >= 0 && t->types[id] == SD_TT_CONTROL) n = add_stop(ids, n, cap, id);
    }
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

/* Whether [at, at + len) overlaps one of the plain spans. */
static int in_plain(const sd_span *plain, int n_plain, size_t at, size_t len) {
    for (int i = 0; i < n_plain; i++)
        if (at < plain[i].off + plain[i].len && plain[i].off < at + len) return 1;
    return 0;
}

/* Splits text on special tokens; *out gets the fragments in order. A
 * control or unknown token overlapping a plain span is not a match there:
 * the search goes on from its next byte. */
static int split_specials(const sd_tokenizer *t, const char *text, size_t len,
                          int parse_special, const sd_span *plain, int n_plain, frag **out,
                          size_t *n_out, sd_err *e) {
    frag *cur = NULL, *next = NULL;
    size_t n_cur = 0, cap_cur = 0, cap_next = 0;
    if (push_frag(&cur, &n_cur, &cap_cur, 0, len, -1)) goto oom;
    for (int s = 0; s < t->n_specials; s++) {
        int32_t id = t->specials[s];
        int user_defined = t->types[id] == SD_TT_USER_DEFINED;
        if (!parse_special && !user_defined) continue;
        gguf_str sp = t->tokens[id];
        if (sp.len > len || !memmem(text, len, sp.s, sp.len)) continue;
        size_t n_next = 0;
        for (size_t i = 0; i < n_cur; i++) {
            frag fr = cur[i];
            if (fr.tok >= 0) {
                if (push_frag(&next, &n_next, &cap_next, fr.off, fr.len, fr.tok)) goto oom;
                continue;
            }
            size_t pos = fr.off, from = fr.off, end = fr.off + fr.len;
            while (from < end) {
                const char *m = memmem(text + from, end - from, sp.s, sp.len);
                if (!m) break;
                size_t at = (size_t)(m - text);
                if (!user_defined && in_plain(plain, n_plain, at, sp.len)) {
                    from = at + 1;
                    continue;
                }
                if (at > pos && push_frag(&next, &n_next, &cap_next, pos, at - pos, -1)) goto oom;
                if (push_frag(&next, &n_next, &cap_next, at, sp.len, id)) goto oom;
                pos = from = at + sp.len;
            }
            if (pos < end && push_frag(&next, &n_next, &cap_next, pos, end - pos, -1)) goto oom;
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
    return sd_tokenize_ex(t, text, len, add_bos, parse_special, NULL, 0, ids, n, e);
}

int sd_tokenize_ex(const sd_tokenizer *t, const char *text, size_t len, int add_bos,
                   int parse_special, const sd_span *plain, int n_plain, int32_t **ids,
                   int *n, sd_err *e) {
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
    if (len &&
        split_specials(t, text, len, parse_special, plain, n_plain, &frags, &n_frags, e))
        goto fail;
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
