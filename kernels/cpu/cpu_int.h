/* What the CPU kernel files share and callers do not see: the matrix
 * product job and its per-ISA entry points, the activation quantizers, the
 * per-ISA attention / SwiGLU / exp-sum kernels, and the context's scratch,
 * pool and profile clock. */
#ifndef SD_CPU_INT_H
#define SD_CPU_INT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"

/* ---- matrix product jobs ----------------------------------------------------
 * Activations for the integer paths, quantized once per matmul call: row i
 * of x[n][cols] becomes q[i*cols + c] (int8, the row is a whole number of
 * 32-byte blocks so block b of row i starts at q + i*cols + 32*b), and per
 * block b (nb = cols/32 of them) d[i*nb + b] = max|x|/127 and
 * s[i*nb + b] = d * sum(q of the block) (the offset terms: Q4_1's m,
 * Q4_0's -8, Q5_0's -16, Q4_K's -dmin*mn of the sub-block that is block b).
 * Quantization: id = 1/d, q = round-to-nearest-even(x*id), the same bits on
 * every ISA path so results do not depend on the SIMD level.
 * The SIMD kernels of Q4_0, Q4_1, Q5_0 and Q4_K read a second copy in
 * "pair" layout: blocks
 * (2p, 2p+1) of a row become 64 bytes qp[64p ..] = { q_2p[0..15],
 * q_2p+1[0..15], q_2p[16..31], q_2p+1[16..31] } (an odd last block stays
 * as it is), matching two blocks' nibbles loaded into one register (low
 * nibbles = elements 0..15 of both, high nibbles = 16..31), with per pair
 * ds8[16p ..] = { d_2p x4, d_2p+1 x4, s_2p x4, s_2p+1 x4 }. */
typedef struct sd_mm_job {
    float *out;         /* [n][ldo], this weight's rows start at out */
    int64_t ldo;        /* out row stride in floats */
    int accumulate;
    int n;
    const sd_weight *w;
    const float *x;     /* F32/F16/BF16 weights: activations [n][cols] */
    const int8_t *xq;   /* quantized weights: see above */
    const float *xd, *xs;
    const int8_t *xqp;  /* pair layout (SIMD, see above), row stride cols */
    const float *xds8;  /* [n][cols/64][16] */
    const int32_t *xo16; /* SD_Q6_K_X16: [n][cols/16], -32 x the sum of each 16 codes of xq */
    /* SD_Q6_K_X16 on the avx2 level: [n][cols/16], each 16 codes' xo16 in
     * two int16 halves, -32 x the sum of codes 4k and 4k+1 (low) and of
     * codes 4k+2 and 4k+3 (high), k = 0..3: what vpmaddubsw puts in the
     * two int16 lanes of a 32-bit lane */
    const int32_t *xo16h;
    const uint8_t *xu8;  /* SD_Q8_0_X16 with VNNI: [n][cols], xq + 128 */
    /* k8: SD_Q4_K_X16 and SD_Q6_K_X16 on the VNNI and amx levels read
     * these instead of the 32-element blocks: one scale per 256 elements
     * (d = max|x|/127 of the super-block, codes by the same formula), so a
     * super-block's integer sums need no float step each
     * (matmul_avx512vnni.c). */
    const int8_t *xk;    /* [n][cols] codes */
    const uint8_t *xku;  /* [n / 16 * 16][cols] codes + 128 (the AMX tiles' rows) */
    const float *xkd;    /* [n][cols/256] */
    const int16_t *xks;  /* [n][cols/32] sums of 32 codes */
    const int32_t *xko;  /* [n][cols/16] -32 x sums of 16 codes */
} sd_mm_job;

/* Rows [r0, r1) of one job; each ISA file provides one. */
void sd_cpu_mm_scalar(const sd_mm_job *j, int64_t r0, int64_t r1);
void sd_cpu_mm_avx2(const sd_mm_job *j, int64_t r0, int64_t r1);
void sd_cpu_mm_avx512(const sd_mm_job *j, int64_t r0, int64_t r1);
void sd_cpu_mm_avx512vnni(const sd_mm_job *j, int64_t r0, int64_t r1);
void sd_cpu_mm_amx(const sd_mm_job *j, int64_t r0, int64_t r1);
/* The VNNI level's k8 products (SD_Q4_K_X16, SD_Q6_K_X16 with j->xk) over
 * activation rows [i0, j->n) only: the amx level's rows after its whole
 * 16s. */
void sd_cpu_mm_k8_vnni(const sd_mm_job *j, int64_t r0, int64_t r1, int i0);
/* Quantizes one activation row of cols (multiple of 32) as described above. */
void sd_cpu_qact_scalar(const float *x, int64_t cols, int8_t *q, float *d, float *s);
/* SwiGLU over count elements (sd_cpu_swiglu's chunks), per ISA. */
void sd_cpu_swiglu_range_avx2(float *out, const float *gate, const float *up, size_t count);
/* sum_i exp(x_i - m) over x[0..n) with m >= every x_i (the row's maximum),
 * NaN entries left out; an x_i equal to m adds exactly 1 (also when both
 * are -inf), per ISA. */
double sd_cpu_exp_sum_avx2(const float *x, size_t n, float m);
void sd_cpu_qact_avx2(const float *x, int64_t cols, int8_t *q, float *d, float *s);
void sd_cpu_qact_avx512(const float *x, int64_t cols, int8_t *q, float *d, float *s);
/* One row's k8 activations (sd_mm_job.xk...; cols a multiple of 256; u
 * may be NULL), for the VNNI and amx levels. */
void sd_cpu_qact_k8_avx512(const float *x, int64_t cols, int8_t *q, uint8_t *u, float *d,
                           int16_t *s32, int32_t *o16);
/* Pair layout of one quantized row (see above). */
void sd_cpu_qact_pair_avx2(const int8_t *q, const float *d, const float *s, int64_t cols,
                           int8_t *qp, float *ds8);
void sd_cpu_qact_pair_avx512(const int8_t *q, const float *d, const float *s, int64_t cols,
                             int8_t *qp, float *ds8);

/* Per-ISA grouped attention kernel (attn_*.c): one query row, the G query
 * heads q[G][hd] of one kv head, out[G][hd]; sc: G rows of scores, ldsc
 * floats apart; lse (NULL: not wanted): each head's log sum_t e^(s_t), the
 * weight of this key range when ranges are merged. */
typedef void sd_attn_group_fn(float *out, const float *q, const void *k, const void *v, int f16,
                              int len, int64_t stride, int hd, int G, float scale, float *sc,
                              int64_t ldsc, float *lse);
sd_attn_group_fn sd_cpu_attn_group_scalar, sd_cpu_attn_group_avx2, sd_cpu_attn_group_avx512;

/* The scalar references the SIMD versions finish their tails with. */
static inline void sd_swiglu_ref(float *out, const float *gate, const float *up, size_t count) {
    for (size_t i = 0; i < count; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
static inline double sd_exp_sum_ref(const float *x, size_t n, float m) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] == m) sum += 1;
        else if (!isnan(x[i])) sum += expf(x[i] - m);
    return sum;
}

/* Context scratch slot `slot` grown to at least bytes (64-byte aligned);
 * NULL with e filled when the allocation fails. */
enum { SD_SCRATCH_QACT = 0, SD_SCRATCH_ATTN = 1, SD_SCRATCH_KV = 2, SD_SCRATCH_ATTN_PART = 3, SD_SCRATCH_N = 4 };
void *sd_cpu_scratch(sd_cpu *c, int slot, size_t bytes, sd_err *e);
/* The context's worker pool. */
sd_pool *sd_cpu_pool(sd_cpu *c);
/* Profile clock: 0 when profiling is off, else now in ns; sd_cpu_prof_add
 * adds now - t0 to op (no-op when t0 is 0) and returns the elapsed ns. */
uint64_t sd_cpu_prof_start(const sd_cpu *c);
double sd_cpu_prof_add(sd_cpu *c, int op, uint64_t t0);
void sd_cpu_prof_matmul_type(sd_cpu *c, uint32_t type, double ns);

#endif
