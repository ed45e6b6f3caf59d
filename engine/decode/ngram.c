#include "engine/decode/ngram.h"

#include <stdlib.h>
#include <string.h>

/* A context key: L tokens inline (L <= N-1 <= 15), so entries live in one
 * flat array with no per-entry allocation. Pair entries add the token. */
typedef struct ctx_entry {
    uint64_t hash; /* 0: empty slot */
    int32_t len;
    int32_t toks[SD_NGRAM_MAX_N - 1];
    int32_t best;
    uint32_t best_count;
    uint64_t best_seen;
} ctx_entry;

typedef struct pair_entry {
    uint64_t hash;
    int32_t len;
    int32_t toks[SD_NGRAM_MAX_N - 1];
    int32_t tok;
    uint32_t count;
    uint64_t seen;
} pair_entry;

struct sd_ngram {
    int kind, n;
    uint64_t clock; /* observation counter: "seen first" order */
    ctx_entry *ctx;
    size_t ctx_cap, ctx_used;
    pair_entry *pair;
    size_t pair_cap, pair_used;
};

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

static uint64_t key_hash(const int32_t *toks, int len, int64_t tok) {
    uint64_t h = mix(0x243f6a8885a308d3ull, (uint64_t)len);
    for (int i = 0; i < len; i++) h = mix(h, (uint32_t)toks[i]);
    h = mix(h, (uint64_t)tok);
    return h ? h : 1;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 64;
    while (c < n) c <<= 1;
    return c;
}

sd_ngram *sd_ngram_create(int kind, int n, int expected, sd_err *e) {
    if (n < 2 || n > SD_NGRAM_MAX_N) {
        sd_fail(e, "n-gram N must be in [2, %d], got %d", SD_NGRAM_MAX_N, n);
        return NULL;
    }
    if (kind != SD_NGRAM_MULTI && kind != SD_NGRAM_ONE) {
        sd_fail(e, "unknown n-gram store kind %d", kind);
        return NULL;
    }
    sd_ngram *s = calloc(1, sizeof *s);
    if (!s) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    s->kind = kind;
    s->n = n;
    size_t levels = kind == SD_NGRAM_MULTI ? (size_t)n : 2;
    size_t want = (size_t)(expected > 0 ? expected : 256) * levels * 2;
    s->ctx_cap = s->pair_cap = pow2_at_least(want);
    s->ctx = calloc(s->ctx_cap, sizeof *s->ctx);
    s->pair = calloc(s->pair_cap, sizeof *s->pair);
    if (!s->ctx || !s->pair) {
        sd_ngram_free(s);
        sd_fail(e, "out of memory for the n-gram store");
        return NULL;
    }
    return s;
}

void sd_ngram_free(sd_ngram *s) {
    if (!s) return;
    free(s->ctx);
    free(s->pair);
    free(s);
}

void sd_ngram_reset(sd_ngram *s) {
    memset(s->ctx, 0, s->ctx_cap * sizeof *s->ctx);
    memset(s->pair, 0, s->pair_cap * sizeof *s->pair);
    s->ctx_used = s->pair_used = 0;
    s->clock = 0;
}

/* ---- probing ---------------------------------------------------------------- */
static ctx_entry *ctx_slot(ctx_entry *t, size_t cap, uint64_t h, const int32_t *toks, int len) {
    size_t i = h & (cap - 1);
    while (t[i].hash) {
        if (t[i].hash == h && t[i].len == len && !memcmp(t[i].toks, toks, (size_t)len * 4))
            return &t[i];
        i = (i + 1) & (cap - 1);
    }
    return &t[i];
}

static pair_entry *pair_slot(pair_entry *t, size_t cap, uint64_t h, const int32_t *toks, int len,
                             int32_t tok) {
    size_t i = h & (cap - 1);
    while (t[i].hash) {
        if (t[i].hash == h && t[i].len == len && t[i].tok == tok &&
            !memcmp(t[i].toks, toks, (size_t)len * 4))
            return &t[i];
        i = (i + 1) & (cap - 1);
    }
    return &t[i];
}

/* Doubles a table when it is 70% full; entries keep their hashes. */
static int grow_ctx(sd_ngram *s, sd_err *e) {
    size_t cap = s->ctx_cap * 2;
    ctx_entry *t = calloc(cap, sizeof *t);
    if (!t) return sd_fail(e, "out of memory growing the n-gram store");
    for (size_t i = 0; i < s->ctx_cap; i++)
        if (s->ctx[i].hash) *ctx_slot(t, cap, s->ctx[i].hash, s->ctx[i].toks, s->ctx[i].len) = s->ctx[i];
    free(s->ctx);
    s->ctx = t;
    s->ctx_cap = cap;
    return 0;
}

static int grow_pair(sd_ngram *s, sd_err *e) {
    size_t cap = s->pair_cap * 2;
    pair_entry *t = calloc(cap, sizeof *t);
    if (!t) return sd_fail(e, "out of memory growing the n-gram store");
    for (size_t i = 0; i < s->pair_cap; i++) {
        pair_entry *p = &s->pair[i];
        if (p->hash) *pair_slot(t, cap, p->hash, p->toks, p->len, p->tok) = *p;
    }
    free(s->pair);
    s->pair = t;
    s->pair_cap = cap;
    return 0;
}

static int observe_level(sd_ngram *s, const int32_t *ctx, int len, int32_t tok, sd_err *e) {
    if ((s->pair_used + 1) * 10 > s->pair_cap * 7 && grow_pair(s, e)) return -1;
    if ((s->ctx_used + 1) * 10 > s->ctx_cap * 7 && grow_ctx(s, e)) return -1;
    uint64_t ph = key_hash(ctx, len, tok);
    pair_entry *p = pair_slot(s->pair, s->pair_cap, ph, ctx, len, tok);
    if (!p->hash) {
        p->hash = ph;
        p->len = len;
        memcpy(p->toks, ctx, (size_t)len * 4);
        p->tok = tok;
        p->seen = s->clock;
        s->pair_used++;
    }
    p->count++;
    uint64_t ch = key_hash(ctx, len, -1);
    ctx_entry *c = ctx_slot(s->ctx, s->ctx_cap, ch, ctx, len);
    if (!c->hash) {
        c->hash = ch;
        c->len = len;
        memcpy(c->toks, ctx, (size_t)len * 4);
        c->best = tok;
        c->best_count = 0;
        c->best_seen = p->seen;
        s->ctx_used++;
    }
    /* counts only grow, so only the token just counted can become the best */
    if (p->count > c->best_count || (p->count == c->best_count && p->seen < c->best_seen)) {
        c->best = tok;
        c->best_count = p->count;
        c->best_seen = p->seen;
    }
    return 0;
}

int sd_ngram_observe(sd_ngram *s, const int32_t *hist, int len, int32_t tok, sd_err *e) {
    s->clock++;
    int top = s->n - 1;
    int lo = s->kind == SD_NGRAM_MULTI ? 1 : top;
    for (int L = lo; L <= top && L <= len; L++)
        if (observe_level(s, hist + len - L, L, tok, e)) return -1;
    return observe_level(s, hist, 0, tok, e);
}

int sd_ngram_observe_seq(sd_ngram *s, const int32_t *seq, int from, int to, sd_err *e) {
    for (int i = from; i < to; i++)
        if (sd_ngram_observe(s, seq, i, seq[i], e)) return -1;
    return 0;
}

int sd_ngram_predict(const sd_ngram *s, const int32_t *hist, int len, int fallback, int32_t *tok,
                     int *level) {
    int top = s->n - 1;
    int lo = s->kind == SD_NGRAM_MULTI ? 1 : top;
    for (int L = top; L >= lo; L--) {
        if (L > len) continue;
        const int32_t *ctx = hist + len - L;
        const ctx_entry *c = ctx_slot(s->ctx, s->ctx_cap, key_hash(ctx, L, -1), ctx, L);
        if (c->hash) {
            *tok = c->best;
            if (level) *level = L;
            return 1;
        }
    }
    if (!fallback) return 0;
    const ctx_entry *c = ctx_slot(s->ctx, s->ctx_cap, key_hash(hist, 0, -1), hist, 0);
    if (!c->hash) return 0;
    *tok = c->best;
    if (level) *level = 0;
    return 1;
}

int sd_ngram_seen(const sd_ngram *s, const int32_t *hist, int len, int min_level, int32_t tok) {
    const int lo = s->kind == SD_NGRAM_MULTI ? 1 : s->n - 1;
    for (int L = min_level > lo ? min_level : lo; L <= s->n - 1 && L <= len; L++) {
        const int32_t *ctx = hist + len - L;
        if (pair_slot(s->pair, s->pair_cap, key_hash(ctx, L, tok), ctx, L, tok)->hash) return 1;
    }
    return 0;
}
