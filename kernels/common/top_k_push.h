/* The step of the host top-k loop (top_k.h), shared by its scalar and
 * SIMD versions. */
#ifndef SD_COMMON_TOP_K_PUSH_H
#define SD_COMMON_TOP_K_PUSH_H

#include <stdint.h>

/* One step of the scalar loop: element i against the m ids kept so far
 * (m <= k); returns the new m. idx[0..m) stays sorted (value desc, index
 * asc): a new value enters only when it beats the last kept one strictly,
 * and moves up only past strictly smaller values, so among equal values
 * the earlier index stays first. */
static inline int sd_top_k_push(const float *x, int i, int k, int32_t *idx, int m) {
    if (m == k && x[i] <= x[idx[m - 1]]) return m;
    int j = m < k ? m++ : m - 1;
    while (j > 0 && x[idx[j - 1]] < x[i]) {
        idx[j] = idx[j - 1];
        j--;
    }
    idx[j] = i;
    return m;
}

#endif
