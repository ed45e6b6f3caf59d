/* Byte-level BPE ("gpt2"), as llama.cpp does it:
 *  1. the pre-tokenizer regexes named by tokenizer.ggml.pre split the text,
 *     one after another: each regex splits every chunk the previous ones
 *     made into its matches and the text between them;
 *  2. every chunk's bytes become GPT-2 byte-level characters (one token id
 *     each: the vocabulary holds all 256);
 *  3. the adjacent pair with the lowest merge rank (leftmost on ties) merges
 *     until no pair has a rank. With llama3 a chunk that already is a token
 *     is taken whole ("ignore_merges").
 * Merges are validated at load as HuggingFace does: both halves and their
 * concatenation must be vocabulary tokens, so BPE runs on ids. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68
 * (0-32, 127-160, 173) to U+0100.. in byte order. */
static uint32_t byte_cp(unsigned b) {
    if (b <= 32) return 256 + b;
    if (b >= 127 && b <= 160) return 289 + (b - 127);
    if (b == 173) return 323;
    return b;
}

int sd_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return cp <= 32 || (cp >= 127 && cp <= 160) || cp == 173 ? -1 : (int)cp;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

int sd_bpe_byte_utf8(unsigned b, char out[2]) {
    uint32_t cp = byte_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Pre-tokenizer regexes, as llama.cpp defines them per tokenizer.ggml.pre. */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const pre_default[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+",
                                          "[0-9][0-9][0-9]", NULL};
static const char *const pre_gpt2[] = {RE_GPT2, NULL};
static const char *const pre_smollm[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const pre_llama3[] = {RE_LLAMA3_HEAD "\\p{N}{1,3}" RE_LLAMA3_TAIL, NULL};
static const char *const pre_qwen2[] = {RE_LLAMA3_HEAD "\\p{N}" RE_LLAMA3_TAIL, NULL};
static const char *const pre_deepseek_llm[] = {
    "[\r\n]",
    "\\s?["
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}-\\x{377}"
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}"
    "\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}"
    "\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}"
    "\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}"
    "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}"
    "\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
    "\\x{2183}-\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
    "\\x{2CF2}-\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
    "\\p{N}+",
    NULL};

static const struct pre_def {
    const char *name;
    const char *const *re;
    int ignore_merges;
} pre_defs[] = {
    {"default", pre_default, 0},     {"gpt2", pre_gpt2, 0},
    {"gpt-2", pre_gpt2, 0},          {"mpt", pre_gpt2, 0},
    {"olmo", pre_gpt2, 0},           {"llama3", pre_llama3, 1},
    {"llama-v3", pre_llama3, 1},     {"llama-bpe", pre_llama3, 1},
    {"falcon3", pre_llama3, 1},      {"dbrx", pre_llama3, 0},
    {"smaug-bpe", pre_llama3, 0},    {"smollm", pre_smollm, 0},
    {"starcoder", pre_smollm, 0},    {"refact", pre_smollm, 0},
    {"command-r", pre_smollm, 0},    {"codeshell", pre_smollm, 0},
    {"qwen2", pre_qwen2, 0},         {"deepseek-r1-qwen", pre_qwen2, 0},
    {"stablelm2", pre_qwen2, 0},     {"deepseek-llm", pre_deepseek_llm, 0},
};

static int compile_pre(sd_tokenizer *t, const struct pre_def *d, sd_err *e) {
    for (const char *const *p = d->re; *p; p++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)*p, PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF |
                                           PCRE2_DOLLAR_ENDONLY,
                                       &err, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(err, msg, sizeof msg);
            return sd_fail(e, "tokenizer.ggml.pre \"%s\": regex %d does not compile at %zu: %s",
                           d->name, t->n_re, (size_t)at, (const char *)msg);
        }
        /* JIT is an optimisation: without it pcre2_match interprets. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        t->re[t->n_re++] = re;
    }
    t->ignore_merges = d->ignore_merges;
    t->pre = d->name;
    return 0;
}

static uint64_t merge_key(int32_t l, int32_t r) {
    return (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
}

static int32_t merge_find(const sd_tokenizer *t, int32_t l, int32_t r, int32_t *result) {
    uint64_t key = merge_key(l, r);
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
    for (uint32_t i = h & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const sd_merge_slot *s = &t->merges[i];
        if (s->rank < 0) return -1;
        if (s->key == key) {
            *result = s->result;
            return s->rank;
        }
    }
}

/* The first of duplicate merges keeps its rank, as in llama.cpp. */
static void merge_insert(sd_tokenizer *t, int32_t l, int32_t r, int32_t rank, int32_t result) {
    uint64_t key = merge_key(l, r);
    uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32);
    for (uint32_t i = h & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        sd_merge_slot *s = &t->merges[i];
        if (s->rank >= 0 && s->key == key) return;
        if (s->rank < 0) {
            *s = (sd_merge_slot){key, rank, result};
            return;
        }
    }
}

static int load_merges(sd_tokenizer *t, const gguf_file *f, sd_err *e) {
    const gguf_value *v;
    int rc = gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_STRING, &v, e);
    if (rc < 0) return -1;
    if (rc == 1) return sd_fail(e, "tokenizer.ggml.merges is missing (needed by gpt2)");
    if (v->v.arr.n > INT32_MAX / 4)
        return sd_fail(e, "tokenizer.ggml.merges has %llu entries, too many",
                       (unsigned long long)v->v.arr.n);
    int n = (int)v->v.arr.n;
    uint32_t size = 16;
    while (size < 2 * (uint64_t)n) size *= 2;
    t->merge_mask = size - 1;
    t->merges = malloc((size_t)size * sizeof *t->merges);
    if (!t->merges) return sd_fail(e, "out of memory");
    for (uint32_t i = 0; i < size; i++) t->merges[i] = (sd_merge_slot){0, -1, -1};
    char *cat = NULL;
    size_t cat_cap = 0;
    for (int i = 0; i < n; i++) {
        gguf_str m = v->v.arr.strs[i];
        const char *sp = m.len > 1 ? memchr(m.s + 1, ' ', m.len - 1) : NULL;
        if (!sp || sp + 1 == m.s + m.len) {
            free(cat);
            return sd_fail(e, "tokenizer.ggml.merges[%d] \"%.*s\" is not two tokens separated "
                              "by a space", i, (int)(m.len > 64 ? 64 : m.len), m.s);
        }
        size_t ll = (size_t)(sp - m.s), rl = m.len - ll - 1;
        if (sd_grow((void **)&cat, &cat_cap, ll + rl, 1)) {
            free(cat);
            return sd_fail(e, "out of memory");
        }
        memcpy(cat, m.s, ll);
        memcpy(cat + ll, sp + 1, rl);
        int32_t l = sd_tokenizer_find(t, m.s, ll), r = sd_tokenizer_find(t, sp + 1, rl);
        int32_t res = sd_tokenizer_find(t, cat, ll + rl);
        if (l < 0 || r < 0 || res < 0) {
            free(cat);
            return sd_fail(e, "tokenizer.ggml.merges[%d] \"%.*s\": %s is not in the vocabulary",
                           i, (int)(m.len > 64 ? 64 : m.len), m.s,
                           l < 0 ? "the left part" : r < 0 ? "the right part" : "the merged token");
        }
        merge_insert(t, l, r, i, res);
    }
    free(cat);
    return 0;
}

int sd_bpe_init(sd_tokenizer *t, const gguf_file *f, sd_err *e) {
    gguf_str pre;
    int rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, e);
    if (rc < 0) return -1;
    const struct pre_def *d = rc == 1 ? &pre_defs[0] : NULL;
    for (size_t i = 0; !d && i < sizeof pre_defs / sizeof pre_defs[0]; i++)
        if (gguf_str_eq(pre, pre_defs[i].name)) d = &pre_defs[i];
    if (!d)
        return sd_fail(e, "unsupported tokenizer.ggml.pre \"%.*s\" (supported: default, gpt2, "
                          "llama3/llama-bpe, smollm, qwen2, deepseek-llm and their aliases)",
                       (int)(pre.len > 64 ? 64 : pre.len), pre.s);
    if (compile_pre(t, d, e) || load_merges(t, f, e)) return -1;
    for (unsigned b = 0; b < 256; b++) {
        char u[2];
        int n = sd_bpe_byte_utf8(b, u);
        t->byte_tok[b] = sd_tokenizer_find(t, u, (size_t)n);
    }
    return 0;
}

void sd_bpe_release(sd_tokenizer *t) {
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    t->n_re = 0;
    free(t->merges);
    t->merges = NULL;
}

typedef struct chunk {
    size_t off, len;
} chunk;

typedef struct bpe_sym {
    int32_t id; /* -1 once merged into its left neighbour */
    int prev, next;
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank, left, right, lid, rid, result;
} bpe_pair;

/* Per-call scratch, grown to the longest chunk. */
typedef struct bpe_work {
    chunk *a, *b;
    size_t cap_a, cap_b;
    bpe_sym *sym;
    size_t cap_sym;
    bpe_pair *heap;
    size_t cap_heap, n_heap;
    char *mapped;
    size_t cap_mapped;
} bpe_work;

static int pair_before(const bpe_pair *x, const bpe_pair *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

static void pair_push(bpe_work *w, bpe_pair p) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
}

static bpe_pair pair_pop(bpe_work *w) {
    bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->n_heap) break;
        if (c + 1 < w->n_heap && pair_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->n_heap) w->heap[i] = last;
    return top;
}

static void try_pair(const sd_tokenizer *t, bpe_work *w, int left, int right) {
    if (left < 0 || right < 0) return;
    int32_t lid = w->sym[left].id, rid = w->sym[right].id, result;
    if (lid < 0 || rid < 0) return;
    int32_t rank = merge_find(t, lid, rid, &result);
    if (rank >= 0) pair_push(w, (bpe_pair){rank, left, right, lid, rid, result});
}

static int push_or_unknown(const sd_tokenizer *t, int32_t id, unsigned char byte, sd_ids *out,
                           sd_err *e) {
    if (id < 0) id = t->unk;
    if (id < 0)
        return sd_fail(e, "the vocabulary has no byte-level token for byte 0x%02X", byte);
    if (sd_ids_push(out, id)) return sd_fail(e, "out of memory");
    return 0;
}

static int bpe_word(const sd_tokenizer *t, bpe_work *w, const unsigned char *s, size_t n,
                    sd_ids *out, sd_err *e) {
    if (t->ignore_merges) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)sd_bpe_byte_utf8(s[i], w->mapped + m);
        int32_t id = sd_tokenizer_find(t, w->mapped, m);
        if (id >= 0) return sd_ids_push(out, id) ? sd_fail(e, "out of memory") : 0;
    }
    for (size_t i = 0; i < n; i++)
        w->sym[i] = (bpe_sym){t->byte_tok[s[i]], (int)i - 1, i + 1 == n ? -1 : (int)i + 1};
    w->n_heap = 0;
    for (size_t i = 1; i < n; i++) try_pair(t, w, (int)i - 1, (int)i);
    while (w->n_heap) {
        bpe_pair p = pair_pop(w);
        bpe_sym *l = &w->sym[p.left], *r = &w->sym[p.right];
        if (l->id != p.lid || r->id != p.rid || l->next != p.right) continue;
        l->id = p.result;
        r->id = -1;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = p.left;
        try_pair(t, w, l->prev, p.left);
        try_pair(t, w, p.left, l->next);
    }
    for (int i = 0; i >= 0; i = w->sym[i].next)
        if (push_or_unknown(t, w->sym[i].id, s[i], out, e)) return -1;
    return 0;
}

/* Splits every chunk of w->a by re into w->b (matches and the gaps between
 * them), then swaps the two lists. */
static int split_by(const pcre2_code *re, const char *text, bpe_work *w, size_t *n_chunks,
                    pcre2_match_data *md, sd_err *e) {
    size_t nb = 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    for (size_t c = 0; c < *n_chunks; c++) {
        const char *sub = text + w->a[c].off;
        size_t len = w->a[c].len, last = 0, pos = 0;
        while (pos < len) {
            int rc = pcre2_match(re, (PCRE2_SPTR)sub, len, pos, 0, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[128];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return sd_fail(e, "pre-tokenizer regex failed: %s", (const char *)msg);
            }
            size_t ms = ov[0], me = ov[1];
            if (me == ms) { /* an empty match: step over one character */
                pos = ms + 1;
                while (pos < len && ((unsigned char)sub[pos] & 0xC0) == 0x80) pos++;
                continue;
            }
            if (ms > last) w->b[nb++] = (chunk){w->a[c].off + last, ms - last};
            w->b[nb++] = (chunk){w->a[c].off + ms, me - ms};
            last = pos = me;
        }
        if (last < len) w->b[nb++] = (chunk){w->a[c].off + last, len - last};
    }
    chunk *tmp = w->a;
    size_t tcap = w->cap_a;
    w->a = w->b;
    w->cap_a = w->cap_b;
    w->b = tmp;
    w->cap_b = tcap;
    *n_chunks = nb;
    return 0;
}

int sd_bpe_encode(const sd_tokenizer *t, const char *text, size_t len, sd_ids *out,
                  sd_err *e) {
    if (len == 0) return 0;
    bpe_work w = {0};
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = -1;
    if (!md || sd_grow((void **)&w.a, &w.cap_a, len, sizeof *w.a) ||
        sd_grow((void **)&w.b, &w.cap_b, len, sizeof *w.b)) {
        sd_fail(e, "out of memory");
        goto done;
    }
    size_t n_chunks = 1;
    w.a[0] = (chunk){0, len};
    for (int i = 0; i < t->n_re; i++)
        if (split_by(t->re[i], text, &w, &n_chunks, md, e)) goto done;
    size_t longest = 0;
    for (size_t c = 0; c < n_chunks; c++)
        if (w.a[c].len > longest) longest = w.a[c].len;
    if (sd_grow((void **)&w.sym, &w.cap_sym, longest, sizeof *w.sym) ||
        sd_grow((void **)&w.heap, &w.cap_heap, 3 * longest, sizeof *w.heap) ||
        sd_grow((void **)&w.mapped, &w.cap_mapped, 2 * longest, 1)) {
        sd_fail(e, "out of memory");
        goto done;
    }
    for (size_t c = 0; c < n_chunks; c++)
        if (bpe_word(t, &w, (const unsigned char *)text + w.a[c].off, w.a[c].len, out, e))
            goto done;
    rc = 0;
done:
    pcre2_match_data_free(md);
    free(w.a);
    free(w.b);
    free(w.sym);
    free(w.heap);
    free(w.mapped);
    return rc;
}
