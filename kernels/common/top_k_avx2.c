/* Top-k ids of a logits row (sd_top_k_scalar's order and ties), 8 lanes a
 * compare: once k ids are kept, almost every element of a 152K-entry
 * vocabulary is at most the k-th value, and one compare of 32 elements
 * against it replaces 32 scalar compares and branches. The compare is
 * "not less or equal, unordered", the negation of the scalar loop's skip
 * test, so NaN elements reach sd_top_k_push as they would there. */
#include <immintrin.h>

#include "kernels/common/top_k.h"
#include "kernels/common/top_k_push.h"

/* lanes of x[0..8) that would not be skipped against threshold t */
static inline __m256 kept8(const float *x, __m256 t) {
    return _mm256_cmp_ps(_mm256_loadu_ps(x), t, _CMP_NLE_UQ);
}

/* Elements i..i+7 through the scalar step, those the threshold at the
 * start lets through; returns the index of a NaN among them (left for the
 * scalar loop), or -1. */
static inline int step8(const float *x, int i, int k, int32_t *idx, int *m) {
    for (int b = _mm256_movemask_ps(kept8(x + i, _mm256_set1_ps(x[idx[k - 1]]))); b; b &= b - 1) {
        const int at = i + __builtin_ctz((unsigned)b);
        if (x[at] != x[at]) return at;
        *m = sd_top_k_push(x, at, k, idx, *m);
    }
    return -1;
}

int sd_top_k_avx2(const float *x, int n, int k, int32_t *idx) {
    int m = 0, i = 0;
    if (k < 1) return 0;
    for (; i < n && m < k; i++) m = sd_top_k_push(x, i, k, idx, m);
    if (m < k) return m;
    /* Skipping by the threshold at a step's start is exact while the k-th
     * value only rises, which holds until a NaN is kept: from there on the
     * scalar loop (every later element then enters). */
    int nan = x[idx[k - 1]] != x[idx[k - 1]] ? i : -1;
    for (; nan < 0 && i + 32 <= n; i += 32) {
        const __m256 t = _mm256_set1_ps(x[idx[k - 1]]);
        const __m256 any = _mm256_or_ps(_mm256_or_ps(kept8(x + i, t), kept8(x + i + 8, t)),
                                        _mm256_or_ps(kept8(x + i + 16, t), kept8(x + i + 24, t)));
        for (int s = 0; _mm256_movemask_ps(any) && nan < 0 && s < 32; s += 8) nan = step8(x, i + s, k, idx, &m);
    }
    for (; nan < 0 && i + 8 <= n; i += 8) nan = step8(x, i, k, idx, &m);
    for (i = nan >= 0 ? nan : i; i < n; i++) m = sd_top_k_push(x, i, k, idx, m);
    return m;
}
