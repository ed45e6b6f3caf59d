/* CPU kernels, the public side: the context (threads, SIMD level, scratch,
 * profile) and the ops the CPU backend (backend_cpu.c), tests, tools and
 * benchmarks call. What the kernel files share among themselves is in
 * cpu_int.h (jobs, per-ISA entry points) and blocks.h (block layouts).
 *
 * Activations are F32, row-major [n][dim]. Matrix products compute
 *   out[i][r] (+)= sum_c W[r][c] * x[i][c]      i < n, r < rows
 * Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K) are multiplied
 * with integer dot products against x quantized to 8 bits in blocks of 32
 * (scale max|x|/127, plus the block sum for the offset types: Q4_1's m, the
 * -8 / -16 of Q4_0 / Q5_0, Q4_K's min term); F16/BF16 convert in registers.
 * SIMD level (AMX-INT8, AVX-512 with VNNI, AVX-512, AVX2, scalar) is detected
 * at run time; a context starts at the best one and sd_cpu_set_isa lowers
 * it (the backend's isa option, kernels/common/backend_opts.h), so any
 * narrower path can be run and tested on a wider machine. Threads come
 * from the context's worker pool (pool.h), n_threads of them counting the
 * caller; contexts may share one pool. A context owns all scratch memory,
 * so the kernels never allocate on the hot path once it has grown to the
 * largest shape; one context must not be used from two threads at once. */
#ifndef SD_CPU_H
#define SD_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/error.h"
#include "kernels/common/wtype.h"
#include "kernels/common/weight.h"
#include "kernels/cpu/pool.h"

typedef struct sd_cpu sd_cpu;

/* Levels in order: each implies the ones below it. AVX512_VNNI is the
 * AVX-512 path with vpdpbusd in place of vpmaddubsw + vpmaddwd; AMX is the
 * VNNI path plus tile-unit Q4_K / Q6_K products for 16 or more activation
 * rows (needs the kernel's permission for the tile state, asked for once
 * at detection). On the VNNI and AMX levels the Q4_K / Q6_K products,
 * tiles of either kind, read activations with one scale per 256 elements
 * (k8, cpu_int.h), the other levels and types one per 32. */
enum sd_isa { SD_ISA_SCALAR = 0, SD_ISA_AVX2 = 1, SD_ISA_AVX512 = 2, SD_ISA_AVX512_VNNI = 3, SD_ISA_AMX = 4 };

/* A context with a worker pool of its own; n_threads <= 0: the physical
 * cores this process may run on. */
sd_cpu *sd_cpu_create(int n_threads, sd_err *e);
/* A context on pool (it takes a reference; the pool's thread count is the
 * context's), sharing its workers with the other contexts on it: see
 * pool.h for how they take turns. */
sd_cpu *sd_cpu_create_on(sd_pool *pool, sd_err *e);
int sd_cpu_physical_cores(void);
void sd_cpu_destroy(sd_cpu *c);
int sd_cpu_threads(const sd_cpu *c);
/* Best level this CPU supports, and the one a context uses. */
int sd_cpu_isa_detect(void);
int sd_cpu_isa(const sd_cpu *c);
void sd_cpu_set_isa(sd_cpu *c, int isa); /* clamped to what the CPU supports */
/* "scalar", "avx2", "avx512", "avx512vnni", "amx"; sd_isa_from_name is its
 * inverse, -1 for any other string. */
const char *sd_isa_name(int isa);
int sd_isa_from_name(const char *name);

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
/* sd_top_k (kernels/common/top_k.h) of each row of x[n_rows][cols] into ids[n_rows][k]
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
 * threads had taken (included in the ops' times; on a shared pool, the
 * waits of every context on it). */
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

/* ---- weights repacked for the CPU (repack.c, layouts in blocks.h) ----------
 * The CPU backend's upload_weight interleaves Q4_K, Q6_K, Q4_0, Q4_1, Q5_0
 * and Q8_0 weights of 16k rows in groups of 16 rows (one 32-bit lane a row),
 * giving them these kernels-internal type ids. */
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
/* Elements and bytes per block of a supported type (0 if unsupported). */
int sd_cpu_type_block(uint32_t type, int *elems, int *bytes);

#endif
