/* Naive scalar double-precision references for the CPU kernels, written
 * from the format spec (kernels/common/wtype.h) independently of
 * kernels/cpu: their own half/bfloat16 decoding and block unpacking, no
 * SIMD, no threads. */
#ifndef REF_KERNELS_H
#define REF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/weight.h"

double ref_half(uint16_t h);
double ref_bf16(uint16_t b);
/* One row of cols elements of `type` (SD_F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/
 * Q4_K/Q6_K, decoded from the layouts in kernels/common/wtype.h) to double.
 * Returns 0, or -1 for an unknown type. */
int ref_dequant_row(uint32_t type, const void *row, double *out, int64_t cols);
/* Activation quantization as cpu.h defines it: d = max|x|/127 (float),
 * id = 1/d (float), q = nearest-even(x*id). Writes the dequantized values
 * d*q (double) to xq, and per block d into dblk (may be NULL). */
void ref_quant_act(const float *x, int64_t cols, double *xq, float *dblk);
/* The same per block of 256 (the amx level's K-quant activations, cpu.h's
 * k8). */
void ref_quant_act_k8(const float *x, int64_t cols, double *xq, float *dblk);
/* out[i][r] = sum_c W[r][c] * x[i][c] in double; x given as double. */
void ref_matmul(double *out, const sd_weight *w, const double *x, int n);
/* out[i][r] = sum_c |W[r][c]| * |x[i][c]| (the scale of rounding errors). */
void ref_matmul_abs(double *out, const sd_weight *w, const double *x, int n);
void ref_rmsnorm(double *out, const float *x, const float *w, int n, int dim, double eps);
/* Angles in double: (pos+i) * base^(-2j/rope_dim); pair j is (2j, 2j+1),
 * or (j, j + rope_dim/2) with neox. */
void ref_rope(double *out, const float *x, int n, int pos, int n_heads, int head_dim,
              int rope_dim, double base, int neox);
void ref_attention(double *out, const float *q, const float *kc, const float *vc, int n,
                   int pos, int n_head, int n_kv, int head_dim);
void ref_swiglu(double *out, const float *gate, const float *up, size_t count);
/* Top-k by selection: pick j is the best element strictly after pick j-1 in
 * the order (value desc, index asc). ids[0..k), k <= n. */
void ref_top_k(const float *x, int n, int k, int32_t *ids);

#endif
