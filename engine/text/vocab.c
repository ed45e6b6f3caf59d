/* The vocabulary tables every tokenizer algorithm reads: token strings
 * from tokenizer.ggml.tokens (pointing into the mapping), scores and token
 * types, an open-addressing hash from string to id (power-of-two table,
 * -1 = empty), and the special tokens sorted longest first for the splitter
 * in tokenizer.c. Nothing here knows an algorithm, so tokenizer_spm.c and
 * tokenizer_bpe.c can use it without calling back into tokenizer.c. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

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
static int load_tokens(sd_tokenizer *t, const gguf_file *f, sd_err *e) {
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


int sd_vocab_load(sd_tokenizer *t, const gguf_file *f, sd_err *e) {
    return load_tokens(t, f, e) || collect_specials(t, e) ? -1 : 0;
}

void sd_vocab_release(sd_tokenizer *t) {
    free(t->scores);
    free(t->types);
    free(t->tok_hash);
    free(t->specials);
}
