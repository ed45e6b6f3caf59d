/* The CPU op table: thin adapters from kernels/backend.h onto the kernels in cpu.h.
 * Host memory is backend memory: uploads leave weights in place (the
 * quantized types are repacked, see cpu_upload_weight) and to_host is a
 * memcpy. Q/K/V and gate/up share one activation quantization through
 * sd_cpu_matmul_multi. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/common/wtype.h"

/* The backend's context: the kernel context and the settings it was made
 * with that the ops read (the isa went to the kernel context). */
typedef struct {
    sd_cpu *cpu;
    int repack;
} cpu_backend;

static sd_cpu *cpu(sd_backend *b) { return ((cpu_backend *)b->ctx)->cpu; }

static void cpu_destroy(sd_backend *b);

sd_cpu *sd_backend_cpu_context(sd_backend *b) {
    return b && b->destroy == cpu_destroy ? cpu(b) : NULL;
}

sd_pool *sd_backend_cpu_pool(sd_backend *b) {
    sd_cpu *c = sd_backend_cpu_context(b);
    return c ? sd_cpu_pool(c) : NULL;
}

static void cpu_destroy(sd_backend *b) {
    sd_cpu_destroy(cpu(b));
    free(b->ctx);
    free(b);
}

static void *cpu_alloc(sd_backend *b, size_t bytes, sd_err *e) {
    (void)b;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) sd_fail(e, "out of memory allocating %zu bytes", bytes);
    return p;
}

static void cpu_release(sd_backend *b, void *p) {
    (void)b;
    free(p);
}

/* Weights stay in the mapped file except Q4_K, Q6_K, Q5_0, Q8_0, Q4_0 and
 * Q4_1 with a multiple of 16 rows, which are repacked into groups of 16
 * interleaved rows (cpu.h, the SD_*_X16 types), unless the backend was made
 * with repack = 0. */
static int cpu_upload_weight(sd_backend *b, sd_weight *w, sd_err *e) {
    return ((cpu_backend *)b->ctx)->repack ? sd_cpu_repack(cpu(b), w, e) : 0;
}

static void cpu_release_weight(sd_backend *b, sd_weight *w) {
    (void)b;
    sd_cpu_repack_free(w);
}

static int cpu_copy(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    (void)b, (void)e;
    memmove(dst, src, bytes);
    return 0;
}

static int cpu_embed(sd_backend *b, float *x, const sd_weight *emb, const int32_t *ids, int n,
                     sd_err *e) {
    return sd_cpu_embed(cpu(b), x, emb, ids, n, e);
}

static int cpu_rmsnorm(sd_backend *b, float *out, const float *x, const sd_weight *w, int n,
                       int dim, float eps, sd_err *e) {
    (void)e;
    sd_cpu_rmsnorm(cpu(b), out, x, (const float *)w->data, n, dim, eps);
    return 0;
}

static void add_biases(const sd_attn_shape *s, float *q, float *k, float *v, int n) {
    int qd = s->n_head * s->head_dim, kd = s->n_kv * s->head_dim;
    if (s->bq) sd_cpu_add_bias(q, s->bq, n, qd);
    if (s->bk) sd_cpu_add_bias(k, s->bk, n, kd);
    if (s->bv) sd_cpu_add_bias(v, s->bv, n, kd);
}

/* Q/K/V of n rows: one batched product (the activations quantized once),
 * biases, rotation, all in F32; k and v are [n][kv_dim] F32 rows. */
static int qkv_f32(sd_backend *b, const sd_attn_shape *s, float *q, float *k, float *v,
                   const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                   int n, int pos, int same_pos, sd_err *e) {
    float *outs[3] = {q, k, v};
    const sd_weight *ws[3] = {wq, wk, wv};
    if (sd_cpu_matmul_multi(cpu(b), 3, outs, ws, x, n, e)) return -1;
    add_biases(s, q, k, v, n);
    size_t qd = (size_t)s->n_head * s->head_dim, kd = (size_t)s->n_kv * s->head_dim;
    for (int i = 0; i < (same_pos ? n : 1); i++) {
        int rows = same_pos ? 1 : n;
        sd_cpu_rope(cpu(b), q + i * qd, rows, pos, s->n_head, s->head_dim, s->rope_dim,
                    s->rope_base, s->neox);
        sd_cpu_rope(cpu(b), k + i * kd, rows, pos, s->n_kv, s->head_dim, s->rope_dim,
                    s->rope_base, s->neox);
    }
    return 0;
}

static int check_kv_type(const sd_attn_shape *s, sd_err *e) {
    if (s->kv_type == SD_F32 || s->kv_type == SD_F16) return 0;
    return sd_fail(e, "cpu: KV cache type %s (F32 or F16)", sd_wtype_name(s->kv_type));
}

/* An F32 row of the cache's width into a cache row of kv_type. */
static void store_row(const sd_attn_shape *s, void *dst, const float *src, size_t kd) {
    if (s->kv_type == SD_F16) sd_quantize_row(SD_F16, src, dst, (int64_t)kd);
    else memcpy(dst, src, kd * sizeof(float));
}

/* An F32 cache takes the new rows straight from the product; an F16 one
 * through staging rows (the context's scratch), converted after rope. */
static int cpu_qkv_rope(sd_backend *b, const sd_attn_shape *s, float *q, void *k_rows,
                        void *v_rows, const sd_weight *wq, const sd_weight *wk,
                        const sd_weight *wv, const float *x, int n, int pos, sd_err *e) {
    if (check_kv_type(s, e)) return -1;
    if (s->kv_type == SD_F32)
        return qkv_f32(b, s, q, k_rows, v_rows, wq, wk, wv, x, n, pos, 0, e);
    size_t kd = (size_t)s->n_kv * s->head_dim;
    float *k = sd_cpu_scratch(cpu(b), SD_SCRATCH_KV, 2 * (size_t)n * kd * sizeof(float), e);
    if (!k) return -1;
    float *v = k + (size_t)n * kd;
    if (qkv_f32(b, s, q, k, v, wq, wk, wv, x, n, pos, 0, e)) return -1;
    sd_quantize_row(SD_F16, k, k_rows, (int64_t)(n * kd));
    sd_quantize_row(SD_F16, v, v_rows, (int64_t)(n * kd));
    return 0;
}

/* Beams: one batched product reads each weight once for all n rows; the
 * n key/value rows land in the context's staging rows ([n][kv_dim] each,
 * host memory like every CPU buffer) and each is stored to its sequence's
 * cache, a few hundred bytes a row. */
static int cpu_qkv_rope_same_pos(sd_backend *b, const sd_attn_shape *s, float *q,
                                 void *const *k_dst, void *const *v_dst, const sd_weight *wq,
                                 const sd_weight *wk, const sd_weight *wv, const float *x, int n,
                                 int pos, sd_err *e) {
    if (check_kv_type(s, e)) return -1;
    size_t kd = (size_t)s->n_kv * s->head_dim;
    float *k_rows = sd_cpu_scratch(cpu(b), SD_SCRATCH_KV, 2 * (size_t)n * kd * sizeof(float), e);
    if (!k_rows) return -1;
    float *v_rows = k_rows + (size_t)n * kd;
    if (qkv_f32(b, s, q, k_rows, v_rows, wq, wk, wv, x, n, pos, 1, e)) return -1;
    for (int i = 0; i < n; i++) {
        store_row(s, k_dst[i], k_rows + i * kd, kd);
        store_row(s, v_dst[i], v_rows + i * kd, kd);
    }
    return 0;
}

static int cpu_attention(sd_backend *b, const sd_attn_shape *s, float *out, const float *q,
                         const void *kc, const void *vc, int n, int pos, sd_err *e) {
    return sd_cpu_attention_kv(cpu(b), out, q, kc, vc, s->kv_type, n, pos, s->n_head, s->n_kv,
                               s->head_dim, e);
}

static int cpu_matmul(sd_backend *b, float *out, const sd_weight *w, const float *x, int n,
                      int accumulate, sd_err *e) {
    return sd_cpu_matmul(cpu(b), out, w, x, n, accumulate, e);
}

static int cpu_ffn_swiglu(sd_backend *b, float *h, float *tmp, const sd_weight *w1,
                          const sd_weight *w3, const float *x, int n, sd_err *e) {
    float *outs[2] = {h, tmp};
    const sd_weight *ws[2] = {w1, w3};
    if (sd_cpu_matmul_multi(cpu(b), 2, outs, ws, x, n, e)) return -1;
    sd_cpu_swiglu(cpu(b), h, h, tmp, (size_t)n * (size_t)w1->rows);
    return 0;
}

static int cpu_top_k_rows(sd_backend *b, const float *x, int n_rows, int cols, int k,
                          int32_t *ids_host, float *probs_host, sd_err *e) {
    if (n_rows < 1 || n_rows > SD_MAX_ROWS || k < 1 || k > cols || k > SD_TOP_K_MAX)
        return sd_fail(e, "top_k_rows: %d rows of %d, k %d (1 to %d rows, k 1 to min(cols, %d))",
                       n_rows, cols, k, SD_MAX_ROWS, SD_TOP_K_MAX);
    sd_cpu_top_k_rows(cpu(b), x, n_rows, cols, k, ids_host, probs_host);
    return 0;
}

sd_backend *sd_backend_cpu(int n_threads, const sd_backend_opts *o, sd_err *e) {
    const sd_backend_opts d = o ? *o : sd_backend_opts_default();
    if (d.isa < -1 || d.isa > SD_ISA_AMX) {
        sd_fail(e, "cpu backend: isa %d: expected -1 (the best) or a level %d-%d", d.isa,
                SD_ISA_SCALAR, SD_ISA_AMX);
        return NULL;
    }
    sd_backend *b = calloc(1, sizeof *b);
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!b || !cb) {
        free(b);
        free(cb);
        sd_fail(e, "out of memory");
        return NULL;
    }
    cb->cpu = d.cpu_pool ? sd_cpu_create_on(d.cpu_pool, e) : sd_cpu_create(n_threads, e);
    if (!cb->cpu) {
        free(cb);
        free(b);
        return NULL;
    }
    if (d.isa >= 0) sd_cpu_set_isa(cb->cpu, d.isa);
    cb->repack = d.repack != 0;
    b->ctx = cb;
    b->name = "cpu";
    b->row_prefix_views = 1;
    b->destroy = cpu_destroy;
    b->alloc = cpu_alloc;
    b->release = cpu_release;
    b->upload_weight = cpu_upload_weight;
    b->release_weight = cpu_release_weight;
    b->to_host = cpu_copy;
    b->copy = cpu_copy;
    b->embed = cpu_embed;
    b->rmsnorm = cpu_rmsnorm;
    b->qkv_rope = cpu_qkv_rope;
    b->qkv_rope_same_pos = cpu_qkv_rope_same_pos;
    b->attention = cpu_attention;
    b->matmul = cpu_matmul;
    b->top_k_rows = cpu_top_k_rows;
    b->ffn_swiglu = cpu_ffn_swiglu;
    return b;
}
