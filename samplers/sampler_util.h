/* Helpers for writing a sampler (see samplers/sampler.h for the ABI).
 *
 * Everything here is static inline and compiled into the plugin that
 * includes it: none of it is part of the ABI, the engine never calls it, and
 * a plugin may use any subset or none. The built-in samplers are written
 * with these helpers. Names start with sd_su_ ("sampler util"); those with
 * sd_su__ are internal.
 *
 * A filter pipeline over one row, the shape of every built-in:
 *
 *     sd_su_work *w = sd_su_work_create(max_vocab);       in create()
 *     ...
 *     if (sd_su_begin(w, row, n) ||                        in process(), per row
 *         sd_su_top_k(w, row, n, k) ||
 *         sd_su_top_p(w, row, n, p) ||
 *         sd_su_finish(w, row, probs_row, n, temperature))
 *         return -1;
 *     ...
 *     sd_su_work_destroy(w);                               in destroy()
 *
 * sd_su_begin() makes every token a candidate; each filter removes
 * candidates (on the raw logits, as the PyTorch original does); finish()
 * writes softmax(candidate logits / temperature) and 0 elsewhere.
 *
 * Why no sort: a row has 32k-256k entries and process() runs on every
 * decoding step, so the filters first bucket the tokens by distance from the
 * row maximum (32 buckets per logit unit), find the one bucket where the
 * k-th token or the top-p mass boundary falls, and run a selection
 * (quickselect) on that bucket only. Bucket order agrees with logit order,
 * so the result equals that of a full sort.
 *
 * Ordering: tokens are ranked by logit, descending, ties by lower id first
 * (a stable sort); top-k keeps every token tied with the k-th.
 *
 * Precision: weights are float exponentials (relative error < 3e-7) summed
 * in double, and the top-p comparison against p * sum is exact, so a flat
 * row whose cumulative mass equals p exactly is decided as in real
 * arithmetic; only boundaries closer than ~1e-6 (relative) to p can differ
 * from a double-precision computation.
 *
 * Filters run on the row last given to sd_su_begin(), any number of them, in
 * any order; each sees only the candidates the previous ones kept.
 */
#ifndef SD_SAMPLER_UTIL_H
#define SD_SAMPLER_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "samplers/sampler.h"

#ifdef __cplusplus
#define SD_SU_RESTRICT __restrict
extern "C" {
#else
#define SD_SU_RESTRICT restrict
#endif

#define SD_SU_BUCKETS 2048          /* histogram size */
#define SD_SU_BUCKETS_PER_UNIT 32.0f /* buckets per logit unit: range 64 */

/* A candidate token: its raw logit, a weight (exp of the logit minus the
 * maximum, filled in by the filters that need it) and its id. */
typedef struct sd_su_cand {
    float logit;
    float w;
    int32_t id;
} sd_su_cand;

/* Scratch for one handle, sized for max_vocab tokens. Fields are internal to
 * the helpers. */
typedef struct sd_su_work {
    int cap;            /* max_vocab */
    int all;            /* 1: every token of the row is a candidate */
    int n_cand;         /* candidates in cand[] when all == 0 */
    float max;          /* maximum logit of the row */
    sd_su_cand *cand;   /* cap entries */
    float *tmp;         /* cap floats */
    double mass[SD_SU_BUCKETS];
    int32_t count[SD_SU_BUCKETS];
} sd_su_work;

static inline void sd_su_work_destroy(sd_su_work *w) {
    if (!w)
        return;
    free(w->cand);
    free(w->tmp);
    free(w);
}

/* Returns NULL when out of memory or max_vocab < 1. */
static inline sd_su_work *sd_su_work_create(int max_vocab) {
    if (max_vocab < 1)
        return NULL;
    sd_su_work *w = (sd_su_work *)calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->cap = max_vocab;
    w->cand = (sd_su_cand *)malloc((size_t)max_vocab * sizeof *w->cand);
    w->tmp = (float *)malloc((size_t)max_vocab * sizeof *w->tmp);
    if (!w->cand || !w->tmp) {
        sd_su_work_destroy(w);
        return NULL;
    }
    return w;
}

/* Writes a message into a create() error buffer. */
static inline void sd_su_set_error(char *err, size_t errlen, const char *msg) {
    if (!err || errlen == 0)
        return;
    size_t n = strlen(msg);
    if (n >= errlen)
        n = errlen - 1;
    memcpy(err, msg, n);
    err[n] = '\0';
}

/* --- exp ------------------------------------------------------------------
 * exp(a) for a <= 0 (also -inf: 0), relative error < 3e-7. Written without
 * branches or float comparisons so the loop in sd_su_exp() vectorizes at
 * plain -O2 (SSE2): the libm call costs ~3x more per token. Arguments below
 * -87 give 0 (the float result would be subnormal). */
static inline float sd_su_exp_le0(float a) {
    uint32_t ab;
    memcpy(&ab, &a, sizeof ab);
    /* As unsigned bits, -87 <= a <= +-0 is exactly ab <= bits(-87.0f) or a
     * non-negative bit pattern: a <= 0 by contract, -inf is above. */
    uint32_t keep = 0u - (uint32_t)(ab <= 0xc2ae0000u);
    uint32_t cb = (ab & keep) | (0xc2ae0000u & ~keep);
    float x;
    memcpy(&x, &cb, sizeof x);
    /* x = k ln2 + r, |r| <= ln2/2; k is read from the low mantissa bits
     * of the rounding constant's sum. */
    float kf = x * 1.44269504f + 12582912.0f;
    uint32_t kb;
    memcpy(&kb, &kf, sizeof kb);
    float k = kf - 12582912.0f;
    float r = x - k * 0.693145752f - k * 1.42860677e-06f;
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 +
              r * (1.0f / 120 + r * (1.0f / 720))))));
    uint32_t sb = ((kb + 127u) << 23) & keep;
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    return p * scale;
}

/* out[i] = exp((x[i] - shift) * scale) for x[i] <= shift, scale > 0. */
static inline void sd_su_exp(const float *SD_SU_RESTRICT x, float *SD_SU_RESTRICT out, int n,
                             float shift, float scale) {
    int i = 0;
    /* Blocks of 8 with a fixed trip count: GCC's -O2 cost model only
     * vectorizes loops it can cover without a scalar epilogue. */
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            out[i + j] = sd_su_exp_le0((x[i + j] - shift) * scale);
    for (; i < n; i++)
        out[i] = sd_su_exp_le0((x[i] - shift) * scale);
}

/* Sum in double with four accumulators (the dependency chain of one
 * accumulator would dominate). */
static inline double sd_su_sum(const float *x, int n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++)
        s0 += x[i];
    return (s0 + s1) + (s2 + s3);
}

/* 1/temperature as a float, clamped to [1e-30, 1e30] so that 0 * inv and
 * -inf * inv stay defined: below/above those bounds the distribution is
 * already one-hot/uniform to float precision. */
static inline float sd_su_inv_temperature(double temperature) {
    double inv = 1.0 / temperature;
    if (!(inv <= 1e30))
        inv = 1e30;
    if (inv < 1e-30)
        inv = 1e-30;
    return (float)inv;
}

/* --- row entry points ------------------------------------------------------ */

/* Float bits mapped to integers with the same order (-0 just below +0). */
static inline int32_t sd_su__order_key(float v) {
    int32_t b;
    memcpy(&b, &v, sizeof b);
    return b ^ (int32_t)((uint32_t)(b >> 31) >> 1);
}

/* Maximum of a row into *max. Returns -1 for NaN or +inf entries, or when
 * every entry is -inf. Integer keys keep the loop free of float compares, so
 * it vectorizes: NaNs map above +inf (positive) or below -inf (negative). */
static inline int sd_su_row_max(const float *x, int n, float *max) {
    int32_t hi[8], lo[8];
    for (int j = 0; j < 8; j++)
        hi[j] = lo[j] = sd_su__order_key(x[0]);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            int32_t k = sd_su__order_key(x[i + j]);
            hi[j] = k > hi[j] ? k : hi[j];
            lo[j] = k < lo[j] ? k : lo[j];
        }
    for (; i < n; i++) {
        int32_t k = sd_su__order_key(x[i]);
        hi[0] = k > hi[0] ? k : hi[0];
        lo[0] = k < lo[0] ? k : lo[0];
    }
    for (int j = 1; j < 8; j++) {
        hi[0] = hi[j] > hi[0] ? hi[j] : hi[0];
        lo[0] = lo[j] < lo[0] ? lo[j] : lo[0];
    }
    if (hi[0] >= sd_su__order_key(INFINITY) || lo[0] < sd_su__order_key(-INFINITY) ||
        hi[0] == sd_su__order_key(-INFINITY))
        return -1;
    int32_t b = hi[0] ^ (int32_t)((uint32_t)(hi[0] >> 31) >> 1);
    memcpy(max, &b, sizeof *max);
    return 0;
}

/* Starts a pipeline on one row: every token is a candidate. Returns -1 when
 * n is outside [1, cap] or the row is invalid (see sd_su_row_max). */
static inline int sd_su_begin(sd_su_work *w, const float *logits, int n) {
    if (n < 1 || n > w->cap)
        return -1;
    if (sd_su_row_max(logits, n, &w->max))
        return -1;
    w->all = 1;
    w->n_cand = n;
    return 0;
}

/* The maximum logit of the row given to sd_su_begin(). */
static inline float sd_su_max_logit(const sd_su_work *w) {
    return w->max;
}

/* --- selection on candidate arrays ---------------------------------------- */

/* Rank order: a before b when a has the larger logit, or the same logit and
 * the lower id. Every key is distinct, so selection never meets ties. */
static inline int sd_su__before(const sd_su_cand *a, const sd_su_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void sd_su__swap(sd_su_cand *a, sd_su_cand *b) {
    sd_su_cand t = *a;
    *a = *b;
    *b = t;
}

/* Partitions c[lo, hi) (hi - lo >= 3) around a median-of-three pivot:
 * entries ranked before it go first, then the pivot, whose index is
 * returned. *mass gets the sum of w over the entries before the pivot. */
static inline int sd_su__partition(sd_su_cand *c, int lo, int hi, double *mass) {
    int mid = lo + (hi - lo) / 2, last = hi - 1;
    if (sd_su__before(&c[mid], &c[lo]))
        sd_su__swap(&c[mid], &c[lo]);
    if (sd_su__before(&c[last], &c[lo]))
        sd_su__swap(&c[last], &c[lo]);
    if (sd_su__before(&c[mid], &c[last]))
        sd_su__swap(&c[mid], &c[last]);
    /* c[last] now holds the median. */
    sd_su_cand pivot = c[last];
    double s = 0;
    int store = lo;
    for (int i = lo; i < last; i++) {
        if (sd_su__before(&c[i], &pivot)) {
            s += c[i].w;
            sd_su__swap(&c[i], &c[store]);
            store++;
        }
    }
    sd_su__swap(&c[store], &c[last]);
    *mass = s;
    return store;
}

/* Insertion sort of c[lo, hi) in rank order (for short ranges). */
static inline void sd_su__sort_small(sd_su_cand *c, int lo, int hi) {
    for (int i = lo + 1; i < hi; i++) {
        sd_su_cand v = c[i];
        int j = i;
        while (j > lo && sd_su__before(&v, &c[j - 1])) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = v;
    }
}

/* Reorders c[0, n) so that c[r] is the entry of rank r and the entries
 * before it are those ranked before it (0 <= r < n). */
static inline void sd_su__select_rank(sd_su_cand *c, int n, int r) {
    int lo = 0, hi = n;
    while (hi - lo > 16) {
        double unused;
        int p = sd_su__partition(c, lo, hi, &unused);
        if (p == r)
            return;
        if (r < p)
            hi = p;
        else
            lo = p + 1;
    }
    sd_su__sort_small(c, lo, hi);
}

/* The nucleus threshold p * z held exactly as hi + lo: on flat rows the
 * cumulative mass lands exactly on p * z in real arithmetic (four equal
 * tokens, p = 0.5), and a rounded product would flip the decision. */
typedef struct sd_su__exact {
    double hi, lo;
} sd_su__exact;

static inline sd_su__exact sd_su__product(double a, double b) {
    sd_su__exact t;
    t.hi = a * b;
#if defined(FP_FAST_FMA)
    t.lo = fma(a, b, -t.hi);
#else
    /* Dekker's product with Veltkamp's split (no contraction without FMA). */
    double ca = 134217729.0 * a, cb = 134217729.0 * b;
    double ah = ca - (ca - a), al = a - ah, bh = cb - (cb - b), bl = b - bh;
    t.lo = ((ah * bh - t.hi) + ah * bl + al * bh) + al * bl;
#endif
    return t;
}

/* acc > t.hi + t.lo, decided exactly: acc - t.hi is exact when the two are
 * close, and when they are not its sign cannot be changed by t.lo. */
static inline int sd_su__exceeds(double acc, sd_su__exact t) {
    return acc - t.hi > t.lo;
}

/* The nucleus rule on c[0, n) with acc = the mass ranked before all of them
 * (acc <= target): returns K, the smallest k >= 1 with acc + (mass of the k
 * highest-ranked) > target, or n when there is none, and moves those K
 * entries to c[0, K). Expected linear time: each step keeps one side. */
static inline int sd_su__select_mass(sd_su_cand *c, int n, double acc, sd_su__exact target) {
    int lo = 0, hi = n;
    /* Invariant: c[0, lo) are kept, with acc their mass plus the mass before;
     * the boundary lies in c[lo, hi); c[hi, n) rank after it. */
    while (hi - lo > 16) {
        double m;
        int p = sd_su__partition(c, lo, hi, &m);
        if (sd_su__exceeds(acc + m, target)) {
            hi = p;
        } else {
            acc += m + c[p].w;
            if (sd_su__exceeds(acc, target))
                return p + 1;
            lo = p + 1;
        }
    }
    sd_su__sort_small(c, lo, hi);
    for (int i = lo; i < hi; i++) {
        acc += c[i].w;
        if (sd_su__exceeds(acc, target))
            return i + 1;
    }
    return hi;
}

/* Bucket of a token: min(trunc((max - logit) * 32), SD_SU_BUCKETS - 1). It
 * never decreases as the logit decreases, so bucket order is rank order. */
static inline int sd_su__bucket(float max, float logit) {
    float d = (max - logit) * SD_SU_BUCKETS_PER_UNIT;
    return d < (float)(SD_SU_BUCKETS - 1) ? (int)d : SD_SU_BUCKETS - 1;
}

/* Copies the tokens of buckets < b to the front of cand[] and those of
 * bucket b after them, with weights from w->tmp when with_w. *before gets
 * the number in buckets < b; returns the total. Membership is decided on
 * (max - logit) * 32 against b and b + 1, which is the same as comparing
 * sd_su__bucket() without the conversion. Bucket b entries are first
 * written from the end of cand[] (the two regions cannot meet: together
 * they hold at most n <= cap entries), then moved behind the front. */
static inline int sd_su__gather(sd_su_work *w, const float *logits, int n, int b, int with_w,
                                int *before) {
    int last = b == SD_SU_BUCKETS - 1, front = 0, back = w->cap;
    float lo = (float)b, hi = (float)(b + 1);
    /* A cheaper test first: it passes every token of buckets <= b (one
     * bucket of slack, plus a few ulps of max for rows of huge logits,
     * covers the rounding of d) and rejects most others. */
    float pre = last ? -INFINITY
                     : w->max - (hi + 1.0f) / SD_SU_BUCKETS_PER_UNIT - fabsf(w->max) * 2.4e-7f;
    for (int i = 0; i < n; i++) {
        if (logits[i] < pre)
            continue;
        float d = (w->max - logits[i]) * SD_SU_BUCKETS_PER_UNIT;
        if (!last && !(d < hi))
            continue;
        sd_su_cand e = {logits[i], with_w ? w->tmp[i] : 0.0f, i};
        if (d < lo)
            w->cand[front++] = e;
        else
            w->cand[--back] = e;
    }
    int nb = w->cap - back;
    memmove(w->cand + front, w->cand + back, (size_t)nb * sizeof *w->cand);
    *before = front;
    return front + nb;
}

/* --- filters ---------------------------------------------------------------- */

/* Keeps the tokens whose logit is >= the k-th largest (ties at the boundary
 * kept). k >= the number of candidates keeps all. k >= 1. */
static inline int sd_su_top_k(sd_su_work *w, const float *logits, int n, int64_t k) {
    if (k < 1)
        return -1;
    if (k >= w->n_cand)
        return 0;
    int kk = (int)k, first = 0, len = w->n_cand;
    if (w->all) {
        /* Count per bucket, find the bucket holding the k-th token, and
         * select only inside it. With at most k finite logits every finite
         * token is kept and the masked (-inf) ones have weight 0 whether
         * kept or not: nothing to filter (a masked row would otherwise put
         * the k-th token in a last bucket of mostly -inf entries). */
        memset(w->count, 0, sizeof w->count);
        int n_masked = 0;
        for (int i = 0; i < n; i++) {
            w->count[sd_su__bucket(w->max, logits[i])]++;
            n_masked += logits[i] == -INFINITY;
        }
        if (n - n_masked <= kk)
            return 0;
        int b = 0, before = 0;
        while (before + w->count[b] < kk)
            before += w->count[b++];
        len = sd_su__gather(w, logits, n, b, 0, &first);
    }
    int r = kk - 1 - first;
    sd_su__select_rank(w->cand + first, len - first, r);
    float t = w->cand[first + r].logit;
    int j = first;
    for (int i = first; i < len; i++)
        if (w->cand[i].logit >= t)
            w->cand[j++] = w->cand[i];
    w->n_cand = j;
    w->all = 0;
    return 0;
}

/* Nucleus: ranks the candidates, computes the softmax of their raw logits
 * and keeps a token while the cumulative probability of the tokens ranked
 * before it is <= p; the top token is always kept (PyTorch: remove where
 * cumsum > p, shifted right by one). p >= 1 keeps all. 0 < p. Masses are
 * summed in double from float weights. */
static inline int sd_su_top_p(sd_su_work *w, const float *logits, int n, double p) {
    if (!(p > 0))
        return -1;
    if (p >= 1)
        return 0;
    if (w->all) {
        /* Weights, mass per bucket, the bucket where the cumulative mass
         * passes p, then selection by mass inside that bucket only. */
        sd_su_exp(logits, w->tmp, n, w->max, 1.0f);
        memset(w->mass, 0, sizeof w->mass);
        for (int i = 0; i < n; i++)
            w->mass[sd_su__bucket(w->max, logits[i])] += w->tmp[i];
        double z = 0;
        for (int b = 0; b < SD_SU_BUCKETS; b++)
            z += w->mass[b];
        sd_su__exact target = sd_su__product(p, z);
        double acc = 0;
        int b = 0, before;
        while (b < SD_SU_BUCKETS && !sd_su__exceeds(acc + w->mass[b], target))
            acc += w->mass[b++];
        if (b == SD_SU_BUCKETS)
            return 0;
        int len = sd_su__gather(w, logits, n, b, 1, &before);
        w->n_cand = before + sd_su__select_mass(w->cand + before, len - before, acc, target);
        w->all = 0;
        return 0;
    }
    float m = -INFINITY;
    for (int i = 0; i < w->n_cand; i++)
        if (w->cand[i].logit > m)
            m = w->cand[i].logit;
    double z = 0;
    for (int i = 0; i < w->n_cand; i++) {
        w->cand[i].w = sd_su_exp_le0(w->cand[i].logit - m);
        z += w->cand[i].w;
    }
    w->n_cand = sd_su__select_mass(w->cand, w->n_cand, 0.0, sd_su__product(p, z));
    return 0;
}

/* Keeps the tokens whose logit is >= threshold (at least the top token, which
 * is >= any threshold <= max). */
static inline int sd_su_keep_at_least(sd_su_work *w, const float *logits, int n,
                                      float threshold) {
    if (threshold > w->max)
        threshold = w->max;
    int j = 0;
    if (w->all) {
        for (int i = 0; i < n; i++)
            if (logits[i] >= threshold) {
                sd_su_cand e = {logits[i], 0.0f, i};
                w->cand[j++] = e;
            }
    } else {
        for (int i = 0; i < w->n_cand; i++)
            if (w->cand[i].logit >= threshold)
                w->cand[j++] = w->cand[i];
    }
    w->n_cand = j;
    w->all = 0;
    return 0;
}

/* --- output ----------------------------------------------------------------- */

/* probs = softmax(logits / temperature) over the whole row; -inf gives 0.
 * Returns -1 for an invalid row (see sd_su_row_max). */
static inline int sd_su_softmax(const float *logits, float *probs, int n, double temperature) {
    float m;
    if (n < 1 || sd_su_row_max(logits, n, &m))
        return -1;
    sd_su_exp(logits, probs, n, m, sd_su_inv_temperature(temperature));
    float s = (float)(1.0 / sd_su_sum(probs, n));
    for (int i = 0; i < n; i++)
        probs[i] *= s;
    return 0;
}

/* probs = 1 at the argmax of logits (the lowest id on ties), 0 elsewhere:
 * the distribution of greedy decoding. Returns -1 for an invalid row (see
 * sd_su_row_max). */
static inline int sd_su_one_hot_argmax(const float *logits, float *probs, int n) {
    float m;
    if (n < 1 || sd_su_row_max(logits, n, &m))
        return -1;
    int best = 0;
    while (logits[best] != m)
        best++;
    memset(probs, 0, (size_t)n * sizeof *probs);
    probs[best] = 1.0f;
    return 0;
}

/* Ends a pipeline: probs = softmax(candidate logits / temperature), 0 for
 * every other token. */
static inline int sd_su_finish(sd_su_work *w, const float *logits, float *probs, int n,
                               double temperature) {
    if (w->all)
        return sd_su_softmax(logits, probs, n, temperature);
    float inv = sd_su_inv_temperature(temperature), m = -INFINITY;
    for (int i = 0; i < w->n_cand; i++)
        if (w->cand[i].logit > m)
            m = w->cand[i].logit;
    double z = 0;
    for (int i = 0; i < w->n_cand; i++) {
        w->cand[i].w = sd_su_exp_le0((w->cand[i].logit - m) * inv);
        z += w->cand[i].w;
    }
    memset(probs, 0, (size_t)n * sizeof *probs);
    double s = 1.0 / z;
    for (int i = 0; i < w->n_cand; i++)
        probs[w->cand[i].id] = (float)(w->cand[i].w * s);
    return 0;
}

/* --- sampling ---------------------------------------------------------------- */

/* The lowest id with the largest value; -1 when no value is > 0. */
static inline int32_t sd_su_argmax(const float *probs, int n) {
    int32_t best = -1;
    float v = 0.0f;
    for (int i = 0; i < n; i++)
        if (probs[i] > v) {
            v = probs[i];
            best = i;
        }
    return best;
}

/* Inverse CDF: draws u in [0,1) and returns the first id at which the
 * running sum of the values exceeds u * sum. Tokens with value 0 are never
 * returned. -1 when no value is > 0. The walk goes by blocks of 64 (block
 * sums need no branch per token) and scans one block token by token. */
static inline int32_t sd_su_sample_cdf(const float *probs, int n, sd_sampler_rng *rng) {
    double total = sd_su_sum(probs, n);
    if (!(total > 0) || total == INFINITY)
        return -1;
    double target = sd_sampler_uniform(rng) * total, cum = 0;
    for (int start = 0; start < n; start += 64) {
        int len = n - start < 64 ? n - start : 64;
        double s = sd_su_sum(probs + start, len);
        if (cum + s <= target) {
            cum += s;
            continue;
        }
        /* s > 0 here, so the block has a positive token. */
        int32_t last = -1;
        for (int i = start; i < start + len; i++) {
            if (probs[i] > 0) {
                cum += probs[i];
                last = i;
                if (cum > target)
                    return i;
            }
        }
        /* Rounding: the block sum put the boundary here, the running sum
         * fell just short; the block's last positive token is the answer. */
        return last;
    }
    /* Rounding left the sum of the blocks <= target: the last positive
     * token is the answer. */
    for (int i = n - 1; i >= 0; i--)
        if (probs[i] > 0)
            return i;
    return -1;
}

#ifdef __cplusplus
}
#endif

#endif
