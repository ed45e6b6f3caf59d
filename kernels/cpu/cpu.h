/* CPU kernels: the correctness oracle and the fallback backend.
 *
 * Activations are F32, row-major [n][dim]. Matrix products compute
 *   out[i][r] (+)= sum_c W[r][c] * x[i][c]      i < n, r < rows
 * Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K) are multiplied
 * with integer dot products against x quantized to 8 bits in blocks of 32
 * (scale max|x|/127, plus the block sum for the offset types: Q4_1's m, the
 * -8 / -16 of Q4_0 / Q5_0, Q4_K's min term); F16/BF16 convert in registers.
 * SIMD level (AMX-INT8, AVX-512 with VNNI, AVX-512, AVX2, scalar) is detected
 * at run time; the environment variable SD_ISA=scalar|avx2|avx512|avx512vnni|amx caps
 * it for the whole process (every context, and sd_cpu_isa_detect), so any
 * narrower path can be run and tested on a wider machine. Threads come
 * from the context's worker pool (pool.h), n_threads of them counting the
 * caller. A context owns all scratch memory, so the
 * kernels never allocate on the hot path once it has grown to the largest
 * shape; one context must not be used from two threads at once. */
#ifndef SD_CPU_H
#define SD_CPU_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/error.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"
#include "kernels/common/weight.h"

typedef struct sd_cpu sd_cpu;

/* Levels in order: each implies the ones below it. AVX512_VNNI is the
 * AVX-512 path with vpdpbusd in place of vpmaddubsw + vpmaddwd; AMX is the
 * VNNI path plus tile-unit Q4_K / Q6_K products for 16 or more activation
 * rows (needs the kernel's permission for the tile state, asked for once
 * at detection). On the AMX level the Q4_K / Q6_K products, tiles of
 * either kind, read activations with one scale per 256 elements (k8, see
 * sd_mm_job), the other levels and types one per 32. */
enum sd_isa { SD_ISA_SCALAR = 0, SD_ISA_AVX2 = 1, SD_ISA_AVX512 = 2, SD_ISA_AVX512_VNNI = 3, SD_ISA_AMX = 4 };

/* n_threads <= 0: the physical cores this process may run on. */
sd_cpu *sd_cpu_create(int n_threads, sd_err *e);
int sd_cpu_physical_cores(void);
void sd_cpu_destroy(sd_cpu *c);
int sd_cpu_threads(const sd_cpu *c);
/* Best level this CPU supports (capped by SD_ISA, see above; an unknown
 * SD_ISA value is ignored), and the one in use (tests force lower ones). */
int sd_cpu_isa_detect(void);
int sd_cpu_isa(const sd_cpu *c);
void sd_cpu_set_isa(sd_cpu *c, int isa); /* clamped to what the CPU supports */
const char *sd_isa_name(int isa);

/* out[n][rows] (+)= x[n][cols] . W^T. */
int sd_cpu_matmul(sd_cpu *c, float *out, const sd_weight *w, const float *x, int n,
                  int accumulate, sd_err *e);
/* Several weights with the same cols over the same x (Q/K/V, gate/up):
 * x is quantized once. outs[j] is [n][ws[j]->rows]; no accumulate. */
int sd_cpu_matmul_multi(sd_cpu *c, int n_w, float *const *outs, const sd_weight *const *ws,
                        const float *x, int n, sd_err *e);

/* out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * w, rows of dim. out may be x. */
void sd_cpu_rmsnorm(sd_cpu *c, float *out, const float *x, const float *w, int n, int dim,
                    float eps);
/* In place on x[n][n_heads*head_dim]; row i is at position pos+i. Pair j
 * (j < rope_dim/2) of each head, elements (2j, 2j+1) or with neox
 * (j, j + rope_dim/2), rotates by angle (pos+i) * freq_base^(-2j/rope_dim);
 * dims >= rope_dim are left alone. */
void sd_cpu_rope(sd_cpu *c, float *x, int n, int pos, int n_heads, int head_dim, int rope_dim,
                 float freq_base, int neox);
/* x[i][r] += b[r] for each of the n rows of dim. */
void sd_cpu_add_bias(float *x, const float *b, int n, int dim);
/* Causal grouped-query attention. q: [n][n_head*head_dim] for positions
 * pos..pos+n-1; kc, vc: [pos+n][n_kv*head_dim] (the layer's cache, rows for
 * every position up to pos+n-1 already written). Query head h reads kv head
 * h / (n_head/n_kv). Scale 1/sqrt(head_dim). out: [n][n_head*head_dim]. */
int sd_cpu_attention(sd_cpu *c, float *out, const float *q, const float *kc, const float *vc,
                     int n, int pos, int n_head, int n_kv, int head_dim, sd_err *e);
/* The same over a cache of kv_type elements (SD_F32 or SD_F16). */
int sd_cpu_attention_kv(sd_cpu *c, float *out, const float *q, const void *kc, const void *vc,
                        uint32_t kv_type, int n, int pos, int n_head, int n_kv, int head_dim,
                        sd_err *e);
/* out[i] = silu(gate[i]) * up[i]; out may alias gate. */
void sd_cpu_swiglu(sd_cpu *c, float *out, const float *gate, const float *up, size_t count);
/* Indices of the k largest of x[0..n), largest first, the lowest index
 * first among equal values, into idx; returns min(k, n). One pass with an
 * insertion-sorted list of k: O(n k), for the small k of top-k ids. */
int sd_cpu_top_k(const float *x, int n, int k, int32_t *idx);
/* The same, 32 then 8 elements a step (topk_avx2.c, every SIMD level): a
 * step whose elements are all <= the k-th value kept so far is skipped (the
 * scalar loop would skip each of them, its k-th value only rising), the
 * others go through sd_top_k_push one by one, so the ids are the scalar
 * version's, NaN entries included. */
int sd_cpu_top_k_avx2(const float *x, int n, int k, int32_t *idx);
/* One step of sd_cpu_top_k: element i against the m ids kept so far
 * (m <= k); returns the new m. */
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
/* sd_cpu_top_k of each row of x[n_rows][cols] into ids[n_rows][k]
 * (k <= cols), rows in parallel. probs (NULL: not wanted) gets the softmax
 * probability of each id over its row, exp(x_id - max) / sum_i exp(x_i -
 * max), NaN entries left out of the sum. */
void sd_cpu_top_k_rows(sd_cpu *c, const float *x, int n_rows, int cols, int k, int32_t *ids,
                       float *probs);
/* x[i] = dequantized row ids[i] of the embedding matrix (rows = vocab). */
int sd_cpu_embed(sd_cpu *c, float *x, const sd_weight *emb, const int32_t *ids, int n,
                 sd_err *e);

/* ---- profile: where one context's time goes (the benchmark's breakdown) ----
 * Off by default; when on, each op adds its wall time (clock_gettime around
 * the call, so ~50 ns per op) to its slot. A matrix product's time is split
 * over its weights' types in proportion to their bytes; SD_OP_QACT is the
 * activation quantization inside the products. wait_ns: time the calling
 * thread spent at the end of a parallel region waiting for tasks other
 * threads had taken (included in the ops' times). */
enum sd_cpu_op {
    SD_OP_MATMUL,
    SD_OP_QACT,
    SD_OP_ATTENTION,
    SD_OP_RMSNORM,
    SD_OP_ROPE,
    SD_OP_SWIGLU,
    SD_OP_EMBED,
    SD_OP_TOP_K,
    SD_OP_N
};
enum { SD_PROF_TYPES = 32 }; /* weight type ids (kernels/common/wtype.h) below this */
typedef struct sd_cpu_profile {
    double op_ns[SD_OP_N];
    double matmul_type_ns[SD_PROF_TYPES];
    double wait_ns;
} sd_cpu_profile;
/* on: zero the counters and start counting; off: stop. */
void sd_cpu_profile_enable(sd_cpu *c, int on);
void sd_cpu_profile_read(const sd_cpu *c, sd_cpu_profile *out);
const char *sd_cpu_op_name(int op);

/* Row conversion between F32 and a weight type (round to nearest; the
 * 32-element types use ggml's reference rounding: Q8_0 d = max|x|/127,
 * Q4_0 d = signed-max/-8, Q5_0 d = signed-max/-16, Q4_1 d = (max-min)/15,
 * m = min). The K-quants are not ggml's make_qkx/make_qx search but a
 * direct min/max fit (quant.c), a valid round trip within the type's
 * precision: Q4_K within half a step of each sub-block's scale plus one
 * step of the 6-bit super-block scales, Q6_K within one step of each
 * sub-block's scale. n must be a multiple of the type's block. Used for
 * activations, tests and tools. */
int sd_quantize_row(uint32_t type, const float *x, void *out, int64_t n);
int sd_dequantize_row(uint32_t type, const void *in, float *out, int64_t n);

/* ---- Internal to the kernels/cpu sources (not for callers) ----------------------
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
    const uint8_t *xu8;  /* SD_Q8_0_X16 with VNNI: [n][cols], xq + 128 */
    /* k8: SD_Q4_K_X16 and SD_Q6_K_X16 on the amx level read these instead
     * of the 32-element blocks: one scale per 256 elements (d = max|x|/127
     * of the super-block, codes by the same formula), so a super-block's
     * integer sums need no float step each (matmul_avx2.c, SD_AMX). */
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
/* Quantizes one activation row of cols (multiple of 32) as described above. */
void sd_cpu_qact_scalar(const float *x, int64_t cols, int8_t *q, float *d, float *s);
/* SwiGLU over count elements (sd_cpu_swiglu's chunks), per ISA. */
void sd_cpu_swiglu_range_scalar(float *out, const float *gate, const float *up, size_t count);
void sd_cpu_swiglu_range_avx2(float *out, const float *gate, const float *up, size_t count);
/* sum_i exp(x_i - m) over x[0..n) with m >= every x_i (the row's maximum),
 * NaN entries left out; an x_i equal to m adds exactly 1 (also when both
 * are -inf), per ISA. */
double sd_cpu_exp_sum_scalar(const float *x, size_t n, float m);
double sd_cpu_exp_sum_avx2(const float *x, size_t n, float m);
void sd_cpu_qact_avx2(const float *x, int64_t cols, int8_t *q, float *d, float *s);
void sd_cpu_qact_avx512(const float *x, int64_t cols, int8_t *q, float *d, float *s);
/* One row's k8 activations (sd_mm_job.xk...; cols a multiple of 256; u
 * may be NULL), on the amx level. */
void sd_cpu_qact_k8_amx(const float *x, int64_t cols, int8_t *q, uint8_t *u, float *d, int16_t *s32,
                        int32_t *o16);
/* Pair layout of one quantized row (see above). */
void sd_cpu_qact_pair_avx2(const int8_t *q, const float *d, const float *s, int64_t cols,
                           int8_t *qp, float *ds8);
void sd_cpu_qact_pair_avx512(const int8_t *q, const float *d, const float *s, int64_t cols,
                             int8_t *qp, float *ds8);
/* Elements and bytes per block of a supported type (0 if unsupported). */
int sd_cpu_type_block(uint32_t type, int *elems, int *bytes);

/* Block decoding shared by the scalar kernels and the row conversions
 * (layouts in kernels/common/wtype.h). The code of element i of a block:
 * Q5_0 0..31 (x = d*(code-16)), Q4_K 0..15 of a 256 super-block
 * (x = d*sc*code - dmin*mn), Q6_K 0..63 (x = d*scale*(code-32)). */
static inline int sd_q5_0_code(const uint8_t *blk, int i) {
    const uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 |
                        (uint32_t)blk[5] << 24;
    const int nib = i < 16 ? blk[6 + i] & 15 : blk[6 + i - 16] >> 4;
    return nib | (int)((qh >> i) & 1) << 4;
}
static inline int sd_q4_k_code(const uint8_t *blk, int i) {
    const uint8_t b = blk[16 + 32 * (i / 64) + i % 32];
    return i % 64 < 32 ? b & 15 : b >> 4;
}
static inline int sd_q6_k_code(const uint8_t *blk, int i) {
    const int h = i / 128, k = i % 128 / 32, l = i % 32;
    const uint8_t ql = blk[64 * h + 32 * (k & 1) + l], qh = blk[128 + 32 * h + l];
    return (k < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
}
/* Q4_K's 12 scale bytes to out[0..8) = sc[0..8), out[8..16) = mn[0..8):
 * four little-endian words, the 6-bit fields moved with masks (the low 6
 * bits of bytes 0..7 as they are, the high 4 of sub-blocks 4..7 from bytes
 * 8..11, their top 2 bits from the top 2 of bytes 0..7). */
static inline void sd_q4_k_scales(const uint8_t *s12, uint8_t out[16]) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t mn03 = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = mn03;
    u[0] &= 0x3f3f3f3fu;
    memcpy(out, u, 16);
}
/* ---- Q4_K repacked for the CPU (repack.c) ----------------------------------
 * SD_Q4_K_X16 is a kernels-internal type: a Q4_K weight whose rows (a
 * multiple of 16) are interleaved in groups of 16 by the CPU backend's
 * upload_weight. The GGUF layout makes a multi-row product fold: one
 * integer dot product covers one row, and 4 rows' partial sums must be
 * transposed and added (vphaddd, unpacks) before a scale can apply, which
 * cost more than the multiplies themselves at n > 1. Here one 32-bit lane
 * is one row: a 64-byte load unpacks to 16 rows x 4 consecutive codes
 * (low nibbles) and 16 rows x the next 4 (high nibbles), and vpdpbusd
 * against 4 activation bytes broadcast to all lanes accumulates the 16
 * rows' sub-block sums in place, so a sub-block of 16 rows is 8 vpdpbusd
 * an activation row, then one convert and two FMAs. Same size as the 16
 * rows it replaces (2304 = 16 x 144 bytes a super-block), so decode reads
 * no more; group g (rows 16g..16g+15) starts at data + 16*g*row_bytes and
 * holds its super-blocks in order, each:
 *   [0, 32)      d of rows 0..15 (f16)
 *   [32, 64)     dmin of rows 0..15 (f16)
 *   [64, 192)    sub-block s (0..7) at 64 + 16s, byte r: low 4 bits of sc
 *                | low 4 bits of mn << 4 (row r)
 *   [192, 256)   sub-blocks (2k, 2k+1) at 192 + 16k, byte r: the top 2 bits
 *                of sc(2k), mn(2k), sc(2k+1), mn(2k+1) from bit 0 up
 *   [256, 2304)  sub-block s at 256 + 256s, 4 pieces of 64 bytes: piece q,
 *                byte 4r + e (e < 4) = code of element 8q+e of row r in its
 *                low nibble, of element 8q+4+e in its high nibble.
 * Values are Q4_K's: x = d*sc*code - dmin*mn.
 *
 * SD_Q6_K_X16 is Q6_K the same way: 16 sub-blocks of 16 elements, one
 * 32-bit lane per row, 3360 = 16 x 210 bytes a super-block:
 *   [0, 32)      d of rows 0..15 (f16)
 *   [32, 288)    sub-block j (0..15) at 32 + 16j, byte r: its int8 scale
 *   [288, 3360)  sub-block j at 288 + 192j: two pieces of 64 bytes of low
 *                4 bits of the codes (piece p, byte 4r + e: element 8p+e in
 *                the low nibble, 8p+4+e in the high one), then 64 bytes of
 *                top 2 bits (byte 4r + e: elements e, 4+e, 8+e, 12+e from
 *                bit 0 up).
 * Values are Q6_K's: x = d*scale*(code-32), codes 0..63; the kernels take
 * sum((code-32)*x) as sum(code*x) - 32*sum(x), the second term per
 * activation row and 16 elements (sd_mm_job.xo16, stored negated so that
 * a VNNI sum can start from it).
 *
 * SD_Q4_0_X16, SD_Q4_1_X16, SD_Q5_0_X16 and SD_Q8_0_X16 are Q4_0, Q4_1,
 * Q5_0 and Q8_0 the same way, per block of 32 elements (288 = 16 x 18,
 * 320 = 16 x 20, 352 = 16 x 22 and 544 = 16 x 34 bytes):
 *   [0, 32)      d of rows 0..15 (f16)
 *   The 4-bit codes, at 32 (Q4_0), 64 (Q4_1) or 96 (Q5_0): 4 pieces of 64
 *         bytes as Q4_K's (piece q, byte 4r + e: element 8q+e low nibble,
 *         8q+4+e high).
 *   Q4_0: x = d*(code-8), taken as sum(code*x) - 8*sum(x) with the
 *         activation block's sum (s).
 *   Q4_1: [32, 64) m of rows 0..15 (f16); x = d*code + m.
 *   Q5_0: [32, 96) fifth bits: byte 4r + e holds elements 4j+e at bit j
 *         (j = 0..7); x = d*(code-16), taken as sum(code*x) - 16*sum(x).
 *   Q8_0: [32, 544) 8 pieces of 64 bytes: piece q, byte 4r + e = the int8
 *         code of element 4q+e. With VNNI the activations enter as
 *         unsigned x+128 (sd_mm_job.xu8) and 128*sum(code) comes off.
 *
 * SD_REPACK=0 in the environment keeps the GGUF layout (for comparisons). */
enum {
    SD_Q4_K_X16 = 0x100 + SD_Q4_K, SD_Q6_K_X16 = 0x100 + SD_Q6_K, SD_Q5_0_X16 = 0x100 + SD_Q5_0,
    SD_Q8_0_X16 = 0x100 + SD_Q8_0, SD_Q4_0_X16 = 0x100 + SD_Q4_0, SD_Q4_1_X16 = 0x100 + SD_Q4_1
};
/* The file's type of a weight the CPU backend may have repacked. */
static inline uint32_t sd_cpu_file_type(uint32_t t) { return t > 0xff ? t - 0x100 : t; }
/* Repacks w in place when it is a Q4_K, Q6_K, Q4_0, Q4_1, Q5_0 or Q8_0 weight of 16k rows (w->data
 * then owned by the CPU backend, freed by sd_cpu_repack_free); other
 * weights are left alone. -1 with e filled when out of memory. */
int sd_cpu_repack(sd_cpu *c, sd_weight *w, sd_err *e);
void sd_cpu_repack_free(sd_weight *w);
/* Memory for data read as a stream (repacked weights; the benches'
 * bandwidth buffer, so the bound is measured on the same pages): 64-byte
 * aligned, huge pages asked for from 2 MiB up; free() releases it. NULL
 * when out of memory. */
void *sd_cpu_stream_alloc(size_t bytes);
/* Row r of a repacked weight as F32 (cols values); -1 if w is not one or
 * r is out of range. */
int sd_repacked_row(const sd_weight *w, int64_t r, float *out);
/* Fields of super-block G (its first byte) for lane r. */
static inline float sd_q4_kx_d(const uint8_t *G, int r) {
    uint16_t h;
    memcpy(&h, G + 2 * r, 2);
    return sd_f16_to_f32(h);
}
static inline float sd_q4_kx_dmin(const uint8_t *G, int r) {
    uint16_t h;
    memcpy(&h, G + 32 + 2 * r, 2);
    return sd_f16_to_f32(h);
}
static inline int sd_q4_kx_sc(const uint8_t *G, int r, int s) {
    return (G[64 + 16 * s + r] & 15) | ((G[192 + 16 * (s >> 1) + r] >> (4 * (s & 1))) & 3) << 4;
}
static inline int sd_q4_kx_mn(const uint8_t *G, int r, int s) {
    return (G[64 + 16 * s + r] >> 4) | ((G[192 + 16 * (s >> 1) + r] >> (4 * (s & 1) + 2)) & 3) << 4;
}
static inline int sd_q4_kx_code(const uint8_t *G, int r, int i) {
    const int s = i / 32, t = i % 32, e = t & 7;
    const uint8_t b = G[256 + 256 * s + 64 * (t >> 3) + 4 * r + (e & 3)];
    return e < 4 ? b & 15 : b >> 4;
}
static inline float sd_q6_kx_d(const uint8_t *G, int r) { return sd_q4_kx_d(G, r); }
/* 4-bit code of element i (0..31) of lane r, pieces at G + off */
static inline int sd_nib_x_code(const uint8_t *G, int off, int r, int i) {
    return (G[off + 64 * (i >> 3) + 4 * r + (i & 3)] >> ((i & 7) < 4 ? 0 : 4)) & 15;
}
static inline int sd_q5_0x_code(const uint8_t *G, int r, int i) {
    return sd_nib_x_code(G, 96, r, i) | ((G[32 + 4 * r + (i & 3)] >> (i >> 2)) & 1) << 4;
}
static inline int sd_q8_0x_code(const uint8_t *G, int r, int i) { return (int8_t)G[32 + 64 * (i >> 2) + 4 * r + (i & 3)]; }
static inline int sd_q6_kx_scale(const uint8_t *G, int r, int j) { return (int8_t)G[32 + 16 * j + r]; }
static inline int sd_q6_kx_code(const uint8_t *G, int r, int i) {
    const int j = i / 16, t = i % 16, k = t >> 2, e = t & 3;
    const uint8_t *P = G + 288 + 192 * j;
    return ((P[64 * (k >> 1) + 4 * r + e] >> (4 * (k & 1))) & 15) | ((P[128 + 4 * r + e] >> (2 * k)) & 3) << 4;
}

/* Context scratch slot `slot` grown to at least bytes (64-byte aligned);
 * NULL with e filled when the allocation fails. */
enum { SD_SCRATCH_QACT = 0, SD_SCRATCH_ATTN = 1, SD_SCRATCH_KV = 2, SD_SCRATCH_ATTN_PART = 3, SD_SCRATCH_N = 4 };
void *sd_cpu_scratch(sd_cpu *c, int slot, size_t bytes, sd_err *e);
/* The context's worker pool. */
struct sd_pool *sd_cpu_pool(sd_cpu *c);
/* Profile clock: 0 when profiling is off, else now in ns; sd_cpu_prof_add
 * adds now - t0 to op (no-op when t0 is 0) and returns the elapsed ns. */
uint64_t sd_cpu_prof_start(const sd_cpu *c);
double sd_cpu_prof_add(sd_cpu *c, int op, uint64_t t0);
void sd_cpu_prof_matmul_type(sd_cpu *c, uint32_t type, double ns);

#endif
