/* SIMD attention for one query row and the G query heads that share one
 * kv head (grouped-query attention): scores = K.q_g * scale, max-subtracted
 * softmax, out_g = sum_t p_gt V_t: what attn_avx2.c and attn_avx512.c
 * share, each file supplying the scores (group_scores) and the weighted
 * sum of V (group_wsum) in its vector width, defined after this header.
 * K and V rows are `stride` floats apart (all kv heads of a position are
 * adjacent in the cache).
 *
 * Why grouped: at long contexts a layer's K and V outgrow the core's L2
 * (Qwen2.5-1.5B: 2 MiB each at 2048 positions), and a head-at-a-time loop
 * streams them once per query head (6 times for that model). Here the
 * heads go in sub-groups of at most GS_MAX = 4 (their accumulators stay in
 * registers); each K row and each 16-column slice of a V row is loaded
 * once per sub-group. Head dims that are not a multiple of 16 go to the
 * scalar version. sc holds G rows of len scores, ldsc floats apart. The
 * cache is F32 or F16 (vcvtph2ps on load: half the bytes, same math). */
#ifndef SD_CPU_ATTN_SIMD_H
#define SD_CPU_ATTN_SIMD_H

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/vexp.h"

#define AI static inline __attribute__((always_inline))
/* heads a sub-group; K rows prefetched ahead; positions a V block */
enum { GS_MAX = 4, PF_ROWS = 32, VB = 64 };

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}


AI void prefetch_row(const int f16, const void *p, size_t i, int hd) {
    const char *b = (const char *)p + i * (f16 ? 2 : 4);
    for (int d = 0; d < hd * (f16 ? 2 : 4); d += 64) _mm_prefetch(b + d, _MM_HINT_T1);
}

/* The including file's scores of GS heads against K rows 0..len (sc, ldsc
 * floats apart, each head's max in mx) and weighted sums of V rows
 * (out_g = sum_u sc_gu V_u * inv_g). */
static inline void group_scores(const int GS, const int f16, const float *q, const void *k, int len,
                                int64_t stride, int hd, float scale, float *sc, int64_t ldsc, float *mx);
static inline void group_wsum(const int GS, const int f16, float *out, const void *v, int len,
                              int64_t stride, int hd, const float *sc, int64_t ldsc, const float *inv);

/* exp(s - max) in place over one head's scores; returns 1/sum. */
static float softmax_row(float *sc, int len, float mx) {
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    int t = 0;
    for (; t + 8 <= len; t += 8) {
        const __m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + t), vmx));
        _mm256_storeu_ps(sc + t, p);
        vs = _mm256_add_ps(vs, p);
    }
    float sum = hsum(vs);
    for (; t < len; t++) {
        const float p = expf(sc[t] - mx);
        sc[t] = p;
        sum += p;
    }
    return 1.0f / sum;
}

AI void group(const int GS, const int f16, float *out, const float *q, const void *k,
              const void *v, int len, int64_t stride, int hd, float scale, float *sc,
              int64_t ldsc, float *lse) {
    float mx[GS_MAX], inv[GS_MAX];
    group_scores(GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    for (int g = 0; g < GS; g++) inv[g] = softmax_row(sc + g * ldsc, len, mx[g]);
    group_wsum(GS, f16, out, v, len, stride, hd, sc, ldsc, inv);
    if (lse)
        for (int g = 0; g < GS; g++) lse[g] = mx[g] - logf(inv[g]);
}

/* One sub-group of gs heads, f16 and gs as compile-time constants. */
static void sub_group(int gs, int f16, float *out, const float *q, const void *k, const void *v,
                      int len, int64_t stride, int hd, float scale, float *sc, int64_t ldsc,
                      float *lse) {
#define G_CASE(n)                                                                                \
    case n:                                                                                      \
        if (f16) group(n, 1, out, q, k, v, len, stride, hd, scale, sc, ldsc, lse);               \
        else group(n, 0, out, q, k, v, len, stride, hd, scale, sc, ldsc, lse);                   \
        break;
    switch (gs) {
        G_CASE(1)
        G_CASE(2)
        G_CASE(3)
    default:
        G_CASE(4)
    }
#undef G_CASE
}

/* The per-ISA entry (sd_attn_group_fn, cpu_int.h) over the file's scores
 * and weighted sums. */
static inline void attn_group(float *out, const float *q, const void *k, const void *v, int f16,
                              int len, int64_t stride, int hd, int G, float scale, float *sc,
                              int64_t ldsc, float *lse) {
    if (hd % 16) {
        sd_cpu_attn_group_scalar(out, q, k, v, f16, len, stride, hd, G, scale, sc, ldsc, lse);
        return;
    }
    /* sub-groups of at most GS_MAX, sizes as even as possible (6 -> 3+3) */
    const int nsub = (G + GS_MAX - 1) / GS_MAX;
    for (int s = 0, g0 = 0; s < nsub; s++) {
        const int gs = (G - g0) / (nsub - s);
        sub_group(gs, f16, out + (size_t)g0 * hd, q + (size_t)g0 * hd, k, v, len, stride, hd, scale,
                  sc, ldsc, lse ? lse + g0 : NULL);
        g0 += gs;
    }
}

#endif
