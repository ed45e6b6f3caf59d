/* Top-k ids of a host float row, for the CPU kernels' top_k_rows op and for
 * any host code that ranks a row (the decoding strategies' candidates):
 * indices of the k largest of x[0..n), largest first, the lowest index
 * first among equal values. One pass with an insertion-sorted list of k:
 * O(n k), for the small k of top-k ids. */
#ifndef SD_COMMON_TOP_K_H
#define SD_COMMON_TOP_K_H

#include <stdint.h>

/* Into idx; returns min(k, n). The AVX2 version where the CPU has it (the
 * same ids, see sd_top_k_avx2), else the scalar one. */
int sd_host_top_k(const float *x, int n, int k, int32_t *idx);
/* The reference loop. */
int sd_top_k_scalar(const float *x, int n, int k, int32_t *idx);
/* 32 then 8 elements a step (top_k_avx2.c; only on a CPU with AVX2): a
 * step whose elements are all <= the k-th value kept so far is skipped (the
 * scalar loop would skip each of them, its k-th value only rising), the
 * others go through the scalar step (top_k_push.h) one by one, so the ids
 * are the scalar version's, NaN entries included. */
int sd_top_k_avx2(const float *x, int n, int k, int32_t *idx);

#endif
