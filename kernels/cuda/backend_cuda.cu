/* The CUDA op table (engine/backend.h): device selection, memory, weight
 * upload, error reporting, and thin adapters onto the kernel launchers.
 *
 * Memory: alloc is cudaMalloc + a zero fill queued on the backend's stream;
 * weights get one allocation each in the layout of cuda_int.h; scratch (int8
 * activations, attention partials, token ids) grows on demand and is reused,
 * so a steady decode loop allocates nothing. Every op first makes the
 * backend's device current (two models may live on two devices). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/plan.h"

/* ---- errors -----------------------------------------------------------------
 * The runtime keeps the last failed call's error until cudaGetLastError reads
 * it, and cu_check_launch reads it to judge a launch. So an error is taken
 * out where it happens: cu_vfail consumes the one it reports, and the void
 * release paths (cu_free) consume theirs, so no later kernel is blamed for an
 * earlier call. Errors of a faulted context are sticky and still show
 * everywhere, as they should. */
static int cu_vfail(sd_err *e, cudaError_t err, const char *suffix, const char *fmt, va_list ap) {
    char what[256];
    vsnprintf(what, sizeof what, fmt, ap);
    cudaGetLastError();
    return sd_fail(e, "cuda: %s%s: %s", what, suffix, cudaGetErrorString(err));
}

int cu_fail(sd_err *e, cudaError_t err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cu_vfail(e, err, "", fmt, ap);
    va_end(ap);
    return -1;
}

int cu_check_launch(sd_cuda *c, sd_err *e, const char *fmt, ...) {
    cudaError_t err = cudaGetLastError();
    const char *suffix = " launch";
    if (err == cudaSuccess && c->sync_each) {
        err = cudaStreamSynchronize(c->stream);
        suffix = " execution";
    }
    if (err == cudaSuccess) return 0;
    va_list ap;
    va_start(ap, fmt);
    cu_vfail(e, err, suffix, fmt, ap);
    va_end(ap);
    return -1;
}

/* Frees device memory where nobody can be told of a failure (release and
 * clean-up paths), leaving no error behind for the next launch check. */
static void cu_free(void *p) {
    if (p && cudaFree(p) != cudaSuccess) cudaGetLastError();
}

/* The start of an op. A matrix-vector op (mv: qkv_rope, matmul, ffn_swiglu)
 * may fold the norm pending before it (cuda_int.h) and launches it itself
 * when it cannot; every other op launches it first. */
static int cu_enter_op(sd_cuda *c, const char *op, int mv, sd_err *e) {
    c->op_seq++;
    cudaError_t err = cudaSetDevice(c->device);
    if (err != cudaSuccess) return cu_fail(e, err, "%s: select device %d", op, c->device);
    return mv ? 0 : cu_norm_flush(c, e);
}
static int cu_enter(sd_cuda *c, const char *op, sd_err *e) { return cu_enter_op(c, op, 0, e); }

/* Before memory is freed: a pending norm that reads it runs first (release
 * paths report nothing; a failed launch leaves its error for the next op). */
static void cu_flush_quiet(sd_cuda *c) {
    sd_err e;
    if (c->norm.out) cu_norm_flush(c, &e);
}

/* Ops that wait for the device or copy outside the stream's order cannot
 * sit inside a recorded step. */
static int cu_unrecordable(const sd_cuda *c, const char *op, sd_err *e) {
    return c->recording ? sd_fail(e, "cuda: %s cannot be recorded in a graph step", op) : 0;
}

/* ---- scratch ----------------------------------------------------------------- */
void *cu_scratch(sd_cuda *c, int slot, size_t bytes, sd_err *e) {
    if (bytes <= c->scratch_size[slot] && c->scratch[slot]) return c->scratch[slot];
    if (c->capturing || c->step) {
        sd_fail(e, "cuda: scratch %d must grow to %zu bytes while a graph is captured or a "
                   "persistent step built", slot, bytes);
        return NULL;
    }
    /* 1.5x growth: a context that grows one position a step reallocates rarely */
    const size_t want = ((bytes + bytes / 2) + 255) & ~(size_t)255;
    cudaError_t err = cudaStreamSynchronize(c->stream); /* queued kernels may use the old one */
    if (err != cudaSuccess) {
        cu_fail(e, err, "scratch: wait for queued work");
        return NULL;
    }
    cu_free(c->scratch[slot]);
    c->scratch[slot] = NULL;
    c->scratch_size[slot] = 0;
    err = cudaMalloc(&c->scratch[slot], want);
    if (err != cudaSuccess) {
        c->scratch[slot] = NULL;
        cu_fail(e, err, "scratch: allocate %zu bytes", want);
        return NULL;
    }
    c->scratch_size[slot] = want;
    return c->scratch[slot];
}

/* ---- weights ------------------------------------------------------------------ */
int cu_check_weight(const sd_weight *w, const char *op, sd_err *e) {
    if (!w || !w->data) return sd_fail(e, "cuda: %s: missing weight", op);
    const uint32_t t = w->type;
    if (t != SD_F32 && t != SD_F16 && t != SD_BF16 && !cu_is_quant(t))
        return sd_fail(e, "cuda: %s: weight type %s (%u) is not supported", op, sd_wtype_name(t), t);
    /* quantised rows are whole blocks: 32 elements, 256 for the K-quants */
    if (w->rows <= 0 || w->cols <= 0 || w->rows > 0x7fffffff || w->cols > 0x7fffffff ||
        (cu_is_quant(t) && w->cols % 32) || (cu_is_kquant(t) && w->cols % 256))
        return sd_fail(e, "cuda: %s: bad %s weight shape %lldx%lld", op, sd_wtype_name(t),
                       (long long)w->rows, (long long)w->cols);
    if (w->row_bytes < (size_t)sd_row_bytes(t, (uint64_t)w->cols))
        return sd_fail(e, "cuda: %s: row_bytes %zu too small for %lld %s elements", op,
                       w->row_bytes, (long long)w->cols, sd_wtype_name(t));
    return 0;
}

static int cuda_upload_weight(sd_backend *b, sd_weight *w, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "upload", e) || cu_check_weight(w, "upload", e)) return -1;
    const char *tn = sd_wtype_name(w->type);
    const long long R = (long long)w->rows, C = (long long)w->cols;
    const size_t bytes = cu_weight_bytes(w->type, w->rows, w->cols);
    void *dst = NULL, *raw = NULL;
    cudaError_t err = cudaMalloc(&dst, bytes);
    if (err != cudaSuccess) return cu_fail(e, err, "upload %s %lldx%lld: allocate %zu bytes", tn, R, C, bytes);
    if (!cu_is_quant(w->type)) {
        const size_t qrow = cu_qrow_bytes(w->type, w->cols);
        err = cudaMemcpy2DAsync(dst, qrow, w->data, w->row_bytes, qrow, (size_t)w->rows,
                                cudaMemcpyHostToDevice, c->stream);
        if (err != cudaSuccess) goto fail_copy;
    } else {
        const size_t raw_bytes = w->row_bytes * (size_t)w->rows;
        err = cudaMalloc(&raw, raw_bytes);
        if (err != cudaSuccess) {
            cu_free(dst);
            return cu_fail(e, err, "upload %s %lldx%lld: allocate %zu staging bytes", tn, R, C,
                           raw_bytes);
        }
        err = cudaMemcpyAsync(raw, w->data, raw_bytes, cudaMemcpyHostToDevice, c->stream);
        if (err != cudaSuccess) goto fail_copy;
        if (cu_repack(c, dst, raw, w, e)) goto fail;
    }
    err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess) goto fail_copy;
    cu_free(raw);
    w->data = dst;
    return 0;
fail_copy:
    cu_fail(e, err, "upload %s %lldx%lld: copy", tn, R, C);
fail:
    cudaStreamSynchronize(c->stream);
    cu_free(raw);
    cu_free(dst);
    return -1;
}

static void cuda_release_weight(sd_backend *b, sd_weight *w) {
    if (cudaSetDevice(cu_ctx(b)->device) == cudaSuccess) {
        cu_flush_quiet(cu_ctx(b));
        cu_free((void *)w->data);
    } else {
        cudaGetLastError();
    }
    w->data = NULL;
}

/* ---- memory -------------------------------------------------------------------- */
static void *cuda_alloc(sd_backend *b, size_t bytes, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "alloc", e)) return NULL;
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cu_fail(e, err, "alloc %zu bytes", bytes);
        return NULL;
    }
    err = cudaMemsetAsync(p, 0, bytes, c->stream);
    if (err != cudaSuccess) {
        cu_free(p);
        cu_fail(e, err, "alloc %zu bytes: zero fill", bytes);
        return NULL;
    }
    return p;
}

static void cuda_release(sd_backend *b, void *p) {
    if (cudaSetDevice(cu_ctx(b)->device) == cudaSuccess) {
        cu_flush_quiet(cu_ctx(b));
        cu_free(p);
    } else {
        cudaGetLastError();
    }
}

static int cuda_to_host(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "to_host", e) || cu_unrecordable(c, "to_host", e)) return -1;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess)
        return cu_fail(e, err, "to_host %zu bytes (a fault of an earlier kernel also shows here; "
                       "SD_CUDA_SYNC=1 names it)", bytes);
    return 0;
}

static int cuda_copy(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "copy", e) || cu_unrecordable(c, "copy", e)) return -1;
    const char *d = (const char *)dst, *s = (const char *)src;
    if (dst != src && d < s + bytes && s < d + bytes)
        return sd_fail(e, "cuda: copy: %zu bytes between overlapping regions", bytes);
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "copy %zu bytes", bytes);
}

/* ---- graph recording ---------------------------------------------------------------
 * Between graph_begin and graph_end (see "graphs" below) the ops launch
 * nothing: each appends one cu_rec to c->cur, its arguments by value, and
 * notes the scratch it will take. A record is the op's signature as well as
 * what re-issues it: everything but the position, which sits last (pos),
 * and with the position taken out of the cache pointers: qkv_rope's K/V
 * rows are stored as the rows of position 0 of the same cache (k_rows -
 * pos * row bytes), qkv_rope_same_pos's per-beam rows likewise in c->cur.ptr.
 * Records are zero-filled and filled field by field, so the padding is
 * zero and two steps that make the same calls at different positions give
 * byte-equal records up to pos. */
enum { CU_OP_EMBED, CU_OP_RMSNORM, CU_OP_QKV, CU_OP_QKV_BEAMS, CU_OP_ATTENTION, CU_OP_MATMUL, CU_OP_FFN,
       CU_OP_TOPK };

struct cu_rec {
    int op, n;
    float *out;    /* embed x, rmsnorm/matmul out, qkv q, attention out, ffn h */
    const float *x; /* rmsnorm/qkv/matmul/ffn x, attention q */
    float *tmp;    /* ffn */
    char *kc, *vc; /* qkv: rows of position 0; attention: the layer caches */
    int ptr0;      /* beams: their n K then n V rows of position 0 at cur.ptr[ptr0];
                      embed: its ids at ids_host[ptr0] */
    int kps, splits; /* attention: the key split planned for the position's length bucket,
                        which a replay keeps (so a new bucket captures anew) */
    int accumulate, dim; /* top_k: dim its columns */
    int k;               /* top_k */
    int32_t *ids;        /* top_k: its ids and (NULL: none) probabilities in top_k_dev */
    float *probs;
    float eps;
    sd_weight w[3];
    sd_attn_shape s;
    int pos; /* last: compared up to here (offsetof) */
};

static void rec_weight(sd_weight *d, const sd_weight *w) {
    d->type = w->type;
    d->rows = w->rows;
    d->cols = w->cols;
    d->row_bytes = w->row_bytes;
    d->data = w->data;
}

static void rec_shape(sd_attn_shape *d, const sd_attn_shape *s) {
    d->n_head = s->n_head;
    d->n_kv = s->n_kv;
    d->head_dim = s->head_dim;
    d->rope_dim = s->rope_dim;
    d->rope_base = s->rope_base;
    d->neox = s->neox;
    d->bq = s->bq;
    d->bk = s->bk;
    d->bv = s->bv;
    d->kv_type = s->kv_type;
}

/* Bytes of one F32 cache row of shape s. */
static size_t rec_row_bytes(const sd_attn_shape *s) {
    return (size_t)s->n_kv * (size_t)s->head_dim * sizeof(float);
}

/* A zeroed record appended to c->cur; NULL with e filled when out of memory. */
static cu_rec *rec_add(sd_cuda *c, int op, int n, sd_err *e) {
    cu_graph *g = &c->cur;
    if (g->nrec == g->rec_cap) {
        const int cap = g->rec_cap ? 2 * g->rec_cap : 256;
        cu_rec *r = (cu_rec *)realloc(g->rec, (size_t)cap * sizeof *r);
        if (!r) {
            sd_fail(e, "cuda: graph: out of memory for %d op records", cap);
            return NULL;
        }
        g->rec = r;
        g->rec_cap = cap;
    }
    cu_rec *r = &g->rec[g->nrec++];
    memset(r, 0, sizeof *r);
    r->op = op;
    r->n = n;
    return r;
}

/* The call's position: the step's, or the step mixes positions. */
static void rec_pos(sd_cuda *c, cu_rec *r, int pos) {
    r->pos = pos;
    if (c->rec_pos < 0) c->rec_pos = pos;
    else if (c->rec_pos != pos) c->rec_mixed = 1;
}

static void rec_need(sd_cuda *c, int slot, size_t bytes) {
    if (bytes > c->rec_need[slot]) c->rec_need[slot] = bytes;
}

/* The int8 activations of n rows of w's input, when a weight is quantised. */
static void rec_qact(sd_cuda *c, int n, const sd_weight *w, int quant) {
    if (quant) rec_need(c, CU_SCRATCH_QACT, cu_qact_bytes(n, w->cols));
}

/* ---- ops -------------------------------------------------------------------------- */
/* Embeds the n ids already in the pinned staging at ids_host[i0]: one copy
 * of them to the device (the same offset of the ids scratch), then the
 * kernel. Outside a capture the copy's end is marked (ids_copied) for the
 * next writer of the staging. */
static int cu_embed_staged(sd_cuda *c, float *x, const sd_weight *emb, int i0, int n, sd_err *e) {
    int32_t *dev = (int32_t *)cu_scratch(c, CU_SCRATCH_IDS, (size_t)(i0 + n) * sizeof *dev, e);
    if (!dev) return -1;
    dev += i0;
    cudaError_t err = cudaMemcpyAsync(dev, c->ids_host + i0, (size_t)n * sizeof *dev,
                                      cudaMemcpyHostToDevice, c->stream);
    if (err == cudaSuccess && !c->capturing) err = cudaEventRecord(c->ids_copied, c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "embed: copy %d token ids", n);
    return cu_embed(c, x, emb, dev, n, e);
}

static int cuda_embed(sd_backend *b, float *x, const sd_weight *emb, const int32_t *ids, int n,
                      sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (n <= 0) return 0;
    if (cu_enter(c, "embed", e) || cu_check_weight(emb, "embed", e)) return -1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= emb->rows)
            return sd_fail(e, "embed: token id %d out of range [0, %lld)", (int)ids[i],
                           (long long)emb->rows);
    /* recorded: graph_begin has waited for the last copy out of the staging */
    if (c->recording) {
        const int i0 = c->rec_ids;
        if (n > c->ids_cap - i0)
            return sd_fail(e, "cuda: embed: %d ids are more than a graph step stages (%d of %d)",
                           n, c->ids_cap - i0, c->ids_cap);
        memcpy(c->ids_host + i0, ids, (size_t)n * sizeof *ids);
        cu_rec *r = rec_add(c, CU_OP_EMBED, n, e);
        if (!r) return -1;
        r->out = x;
        r->ptr0 = i0;
        rec_weight(&r->w[0], emb);
        c->rec_ids = i0 + n;
        rec_need(c, CU_SCRATCH_IDS, (size_t)c->rec_ids * sizeof *ids);
        return 0;
    }
    /* the ids go through pinned staging (one DMA, no pageable copy); the
     * previous copy out of it must be done before it is written again */
    cudaError_t err = cudaEventSynchronize(c->ids_copied);
    if (err != cudaSuccess) return cu_fail(e, err, "embed: wait for the last ids copy");
    if (n > c->ids_cap) {
        if (c->ids_host && cudaFreeHost(c->ids_host) != cudaSuccess) cudaGetLastError();
        c->ids_host = NULL;
        c->ids_cap = 0;
        const int cap = n < SD_MAX_ROWS ? SD_MAX_ROWS : n;
        err = cudaMallocHost(&c->ids_host, (size_t)cap * sizeof *ids);
        if (err != cudaSuccess) return cu_fail(e, err, "embed: pinned staging for %d ids", cap);
        c->ids_cap = cap;
    }
    memcpy(c->ids_host, ids, (size_t)n * sizeof *ids);
    return cu_embed_staged(c, x, emb, 0, n, e);
}

static int cuda_rmsnorm(sd_backend *b, float *out, const float *x, const sd_weight *w, int n,
                        int dim, float eps, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "rmsnorm", e)) return -1;
    if (!w || !w->data || w->type != SD_F32 || w->cols != dim)
        return sd_fail(e, "cuda: rmsnorm: the weight must be F32 of %d elements", dim);
    if (c->recording) {
        cu_rec *r = rec_add(c, CU_OP_RMSNORM, n, e);
        if (!r) return -1;
        r->out = out;
        r->x = x;
        rec_weight(&r->w[0], w);
        r->dim = dim;
        r->eps = eps;
        if (dim % 32 == 0) rec_need(c, CU_SCRATCH_QACT, cu_qact_bytes(n, dim));
        return 0;
    }
    return cu_rmsnorm(c, out, x, (const float *)w->data, n, dim, eps, e);
}

/* The cache stays F32 here: an F16 cache (the CPU backend's --kv-type f16)
 * is refused by name. */
static int cu_kv_f32(const sd_attn_shape *s, const char *op, sd_err *e) {
    if (s->kv_type == SD_F32) return 0;
    return sd_fail(e, "cuda: %s: the CUDA backend keeps the KV cache in F32 (--kv-type %s is "
                      "CPU-only)", op, sd_wtype_name(s->kv_type));
}

/* The arguments both Q/K/V ops record besides their cache rows. */
static void rec_qkv(sd_cuda *c, cu_rec *r, const sd_attn_shape *s, float *q, const sd_weight *wq,
                    const sd_weight *wk, const sd_weight *wv, const float *x, int n, int pos) {
    r->out = q;
    r->x = x;
    rec_weight(&r->w[0], wq);
    rec_weight(&r->w[1], wk);
    rec_weight(&r->w[2], wv);
    rec_shape(&r->s, s);
    rec_pos(c, r, pos);
    rec_qact(c, n, wq, cu_is_quant(wq->type) || cu_is_quant(wk->type) || cu_is_quant(wv->type));
}

static int cuda_qkv_rope(sd_backend *b, const sd_attn_shape *s, float *q, void *k_rows,
                         void *v_rows, const sd_weight *wq, const sd_weight *wk,
                         const sd_weight *wv, const float *x, int n, int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter_op(c, "qkv_rope", 1, e) || cu_kv_f32(s, "qkv_rope", e)) return -1;
    if (c->recording) {
        if (cu_check_weight(wq, "qkv_rope", e) || cu_check_weight(wk, "qkv_rope", e) ||
            cu_check_weight(wv, "qkv_rope", e))
            return -1;
        cu_rec *r = rec_add(c, CU_OP_QKV, n, e);
        if (!r) return -1;
        const size_t off = (size_t)pos * rec_row_bytes(s);
        r->kc = (char *)k_rows - off;
        r->vc = (char *)v_rows - off;
        rec_qkv(c, r, s, q, wq, wk, wv, x, n, pos);
        return 0;
    }
    return cu_qkv_rope(c, s, q, (float *)k_rows, (float *)v_rows, wq, wk, wv, x, n, pos, e);
}

static int cuda_qkv_rope_same_pos(sd_backend *b, const sd_attn_shape *s, float *q,
                                  void *const *k_dst, void *const *v_dst, const sd_weight *wq,
                                  const sd_weight *wk, const sd_weight *wv, const float *x, int n,
                                  int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter_op(c, "qkv_rope_same_pos", 1, e) || cu_kv_f32(s, "qkv_rope_same_pos", e)) return -1;
    if (c->recording) {
        if (n < 1 || n > SD_MAX_ROWS)
            return sd_fail(e, "cuda: qkv_rope_same_pos: %d rows (1 to %d)", n, SD_MAX_ROWS);
        if (cu_check_weight(wq, "qkv_rope_same_pos", e) ||
            cu_check_weight(wk, "qkv_rope_same_pos", e) ||
            cu_check_weight(wv, "qkv_rope_same_pos", e))
            return -1;
        cu_graph *g = &c->cur;
        if (g->nptr + 2 * n > g->ptr_cap) {
            const int cap = g->ptr_cap ? 2 * g->ptr_cap + 2 * n : 4 * SD_MAX_ROWS;
            void **p = (void **)realloc(g->ptr, (size_t)cap * sizeof *p);
            if (!p) return sd_fail(e, "cuda: graph: out of memory for %d cache rows", cap);
            g->ptr = p;
            g->ptr_cap = cap;
        }
        cu_rec *r = rec_add(c, CU_OP_QKV_BEAMS, n, e);
        if (!r) return -1;
        const size_t off = (size_t)pos * rec_row_bytes(s);
        r->ptr0 = g->nptr;
        for (int i = 0; i < n; i++) {
            g->ptr[g->nptr + i] = (char *)k_dst[i] - off;
            g->ptr[g->nptr + n + i] = (char *)v_dst[i] - off;
        }
        g->nptr += 2 * n;
        rec_qkv(c, r, s, q, wq, wk, wv, x, n, pos);
        return 0;
    }
    return cu_qkv_rope_same_pos(c, s, q, (float *const *)k_dst, (float *const *)v_dst, wq, wk, wv,
                                x, n, pos, e);
}

static int cuda_attention(sd_backend *b, const sd_attn_shape *s, float *out, const float *q,
                          const void *kc, const void *vc, int n, int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "attention", e) || cu_kv_f32(s, "attention", e)) return -1;
    if (c->recording) {
        cu_rec *r = rec_add(c, CU_OP_ATTENTION, n, e);
        if (!r) return -1;
        r->out = out;
        r->x = q;
        r->kc = (char *)kc;
        r->vc = (char *)vc;
        rec_shape(&r->s, s);
        rec_pos(c, r, pos);
        sd_attn_plan pl;
        if (s->n_kv > 0 && s->n_head % s->n_kv == 0 &&
            sd_attn_plan_bucket(n, pos, s->n_kv, s->n_head / s->n_kv, c->sms, &pl) == 0) {
            r->kps = pl.kps;
            r->splits = pl.n_splits;
        }
        rec_need(c, CU_SCRATCH_ATTN, cu_attention_scratch(c, s, n, pos));
        if (s->head_dim % 32 == 0)
            rec_need(c, CU_SCRATCH_QOUT, cu_qact_bytes(n, (int64_t)s->n_head * s->head_dim));
        return 0;
    }
    return cu_attention(c, s, out, q, (const float *)kc, (const float *)vc, n, pos, e);
}

static int cuda_matmul(sd_backend *b, float *out, const sd_weight *w, const float *x, int n,
                       int accumulate, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter_op(c, "matmul", 1, e)) return -1;
    if (c->recording) {
        if (cu_check_weight(w, "matmul", e)) return -1;
        cu_rec *r = rec_add(c, CU_OP_MATMUL, n, e);
        if (!r) return -1;
        r->out = out;
        r->x = x;
        rec_weight(&r->w[0], w);
        r->accumulate = accumulate;
        rec_qact(c, n, w, cu_is_quant(w->type));
        return 0;
    }
    return cu_matmul(c, out, w, x, n, accumulate, e);
}

static int cuda_ffn_swiglu(sd_backend *b, float *h, float *tmp, const sd_weight *w1,
                           const sd_weight *w3, const float *x, int n, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter_op(c, "ffn_swiglu", 1, e)) return -1;
    if (c->recording) {
        if (cu_check_weight(w1, "ffn_swiglu", e) || cu_check_weight(w3, "ffn_swiglu", e)) return -1;
        cu_rec *r = rec_add(c, CU_OP_FFN, n, e);
        if (!r) return -1;
        r->out = h;
        r->tmp = tmp;
        r->x = x;
        rec_weight(&r->w[0], w1);
        rec_weight(&r->w[1], w3);
        rec_qact(c, n, w1, cu_is_quant(w1->type) || cu_is_quant(w3->type));
        if (cu_ffn_fuses_qact(w1, w3))
            rec_need(c, CU_SCRATCH_QOUT, cu_qact_bytes(n, w1->rows));
        return 0;
    }
    return cu_ffn_swiglu(c, h, tmp, w1, w3, x, n, e);
}

/* One top_k_rows call's results: [n_rows][k] int32 ids, then (when asked
 * for) [n_rows][k] float probabilities right after them, so one copy
 * brings both back; at most this many bytes. The calls of a recorded step
 * stage their ids end to end in the first TOP_K_IDS ints and their
 * probabilities at the same offsets in the floats after them. */
#define TOP_K_IDS ((size_t)SD_MAX_ROWS * SD_TOP_K_MAX)
#define TOP_K_BYTES (TOP_K_IDS * (sizeof(int32_t) + sizeof(float)))

/* Records a top_k_rows call: its results land on the host when graph_end
 * has run the step (cu_top_k_results). */
static int rec_top_k(sd_cuda *c, const float *x, int n_rows, int cols, int k, int32_t *ids_host,
                     float *probs_host, sd_err *e) {
    const int n = n_rows * k;
    if (c->rec_ntk == SD_MAX_ROWS || (size_t)(c->rec_tk_used + n) > TOP_K_IDS)
        return sd_fail(e, "cuda: top_k_rows: a recorded step's calls stage more than %zu ids",
                       TOP_K_IDS);
    cu_rec *r = rec_add(c, CU_OP_TOPK, n_rows, e);
    if (!r) return -1;
    r->x = x;
    r->dim = cols;
    r->k = k;
    r->ids = c->top_k_dev + c->rec_tk_used;
    r->probs = probs_host ? (float *)(c->top_k_dev + TOP_K_IDS) + c->rec_tk_used : NULL;
    c->rec_tk[c->rec_ntk].ids = ids_host;
    c->rec_tk[c->rec_ntk].probs = probs_host;
    c->rec_tk[c->rec_ntk].off = c->rec_tk_used;
    c->rec_tk[c->rec_ntk].n = n;
    c->rec_ntk++;
    c->rec_tk_used += n;
    return 0;
}

/* The recorded top_k_rows calls' results, once the step is queued: one
 * copy of the staged ids (and one of the probabilities), a wait, then each
 * call's share to its host arrays. */
static int cu_top_k_results(sd_cuda *c, sd_err *e) {
    const int n = c->rec_tk_used, calls = c->rec_ntk;
    c->rec_ntk = c->rec_tk_used = 0;
    if (!calls) return 0;
    int probs = 0;
    for (int i = 0; i < calls; i++) probs |= c->rec_tk[i].probs != NULL;
    cudaError_t err = cudaMemcpyAsync(c->top_k_host, c->top_k_dev, (size_t)n * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess && probs)
        err = cudaMemcpyAsync(c->top_k_host + TOP_K_IDS, c->top_k_dev + TOP_K_IDS,
                              (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "graph: copy the ids of %d top_k_rows calls", calls);
    for (int i = 0; i < calls; i++) {
        const size_t off = (size_t)c->rec_tk[i].off, cnt = (size_t)c->rec_tk[i].n;
        memcpy(c->rec_tk[i].ids, c->top_k_host + off, cnt * sizeof(int32_t));
        if (c->rec_tk[i].probs)
            memcpy(c->rec_tk[i].probs, (const float *)(c->top_k_host + TOP_K_IDS) + off, cnt * sizeof(float));
    }
    return 0;
}

static int cuda_top_k_rows(sd_backend *b, const float *x, int n_rows, int cols, int k,
                           int32_t *ids_host, float *probs_host, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (n_rows < 1 || n_rows > SD_MAX_ROWS || k < 1 || k > cols || k > SD_TOP_K_MAX)
        return sd_fail(e, "cuda: top_k_rows: %d rows of %d, k %d (1 to %d rows, k 1 to min(cols, %d))",
                       n_rows, cols, k, SD_MAX_ROWS, SD_TOP_K_MAX);
    const size_t n = (size_t)n_rows * (size_t)k;
    const size_t bytes = n * (sizeof *ids_host + (probs_host ? sizeof *probs_host : 0));
    float *probs_dev = probs_host ? (float *)(c->top_k_dev + n) : NULL;
    if (cu_enter(c, "top_k_rows", e)) return -1;
    if (c->recording) return rec_top_k(c, x, n_rows, cols, k, ids_host, probs_host, e);
    if (cu_top_k_rows(c, c->top_k_dev, probs_dev, x, n_rows, cols, k, e)) return -1;
    cudaError_t err =
        cudaMemcpyAsync(c->top_k_host, c->top_k_dev, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "top_k_rows %dx%d k %d: copy the ids", n_rows, cols, k);
    memcpy(ids_host, c->top_k_host, n * sizeof *ids_host);
    if (probs_host) memcpy(probs_host, c->top_k_host + n, n * sizeof *probs_host);
    return 0;
}

/* ---- graphs ----------------------------------------------------------------------
 * A decode step is one graph launch, captured once and replayed. Capturing
 * a step (stream capture of its 100-365 launches) costs the host about as
 * much as launching them, so it must not happen every step; what changes
 * between steps is only the position, the token id and the K/V rows of the
 * position. So:
 *   - the token ids and the position are read by the graph from pinned
 *     staging (ids_host, pos_host) by its copy nodes; the position's copy
 *     is the graph's first node, into pos_word, which qkv_rope,
 *     qkv_rope_same_pos and attention read while they are captured
 *     (c->pos_dev), writing K/V rows at the cache bases plus pos rows;
 *   - attention plans its key split for the length bucket of the position
 *     (plan.h sd_attn_plan_bucket), so the launch shapes hold across it;
 *     the split is part of the attention record, so the first step of a
 *     new bucket captures anew;
 *   - while recording, the ops only append records (see "graph recording"),
 *     which hold every argument but the position; graph_end looks for a
 *     kept graph whose records are byte-equal and that was captured against
 *     the same scratch buffers, and replays it: the position into the
 *     staging, one cudaGraphLaunch, nothing captured.
 * Otherwise (first step, other rows, other layers or weights, a new length
 * bucket, scratch that grew) graph_end captures the records, re-issuing
 * them through the launchers with c->pos_dev set, into the least recently
 * used of CU_GRAPHS slots (updating that slot's executable graph in place
 * when the topology allows, else instantiating), and launches it. Scratch
 * the records need is grown before the capture (growing waits for the
 * stream, which a capture forbids). Work is never lost: when a capture
 * fails, or the records disagree on the position, they are issued as plain
 * launches (a fallback). Several slots keep a decode step, a verification
 * step and a drafter's shallow step from evicting each other. */
/* Whether g holds the records being ended, up to their positions, made
 * against the same scratch buffers. */
static int graph_same(const sd_cuda *c, const cu_graph *g) {
    const cu_graph *r = &c->cur;
    if (g->nrec != r->nrec || g->nptr != r->nptr || memcmp(g->scratch, c->scratch, sizeof g->scratch) ||
        (r->nptr && memcmp(g->ptr, r->ptr, (size_t)r->nptr * sizeof *r->ptr)))
        return 0;
    int i = 0;
    while (i < r->nrec && !memcmp(&g->rec[i], &r->rec[i], offsetof(cu_rec, pos))) i++;
    return i == r->nrec;
}

/* The slot keeps the records being ended as its signature; cur takes its
 * old arrays. */
static void graph_keep_records(sd_cuda *c, cu_graph *g) {
    const cu_graph mine = c->cur;
    c->cur.rec = g->rec, c->cur.rec_cap = g->rec_cap, c->cur.nrec = 0;
    c->cur.ptr = g->ptr, c->cur.ptr_cap = g->ptr_cap, c->cur.nptr = 0;
    g->rec = mine.rec, g->rec_cap = mine.rec_cap, g->nrec = mine.nrec;
    g->ptr = mine.ptr, g->ptr_cap = mine.ptr_cap, g->nptr = mine.nptr;
    memcpy(g->scratch, c->scratch, sizeof g->scratch);
}

/* Launches record r: at its own position, or while captured at the
 * position the kernels read from pos_word (the cache bases as they are). */
static int cu_issue(sd_cuda *c, const cu_rec *r, void *const *ptr, sd_err *e) {
    const size_t off = c->pos_dev ? 0 : (size_t)r->pos * rec_row_bytes(&r->s);
    c->op_seq++;
    const int mv = r->op == CU_OP_QKV || r->op == CU_OP_QKV_BEAMS || r->op == CU_OP_MATMUL ||
                   r->op == CU_OP_FFN;
    if (!mv && cu_norm_flush(c, e)) return -1;
    switch (r->op) {
    case CU_OP_EMBED: return cu_embed_staged(c, r->out, &r->w[0], r->ptr0, r->n, e);
    case CU_OP_RMSNORM:
        return cu_rmsnorm(c, r->out, r->x, (const float *)r->w[0].data, r->n, r->dim, r->eps, e);
    case CU_OP_QKV:
        return cu_qkv_rope(c, &r->s, r->out, (float *)(r->kc + off), (float *)(r->vc + off),
                           &r->w[0], &r->w[1], &r->w[2], r->x, r->n, r->pos, e);
    case CU_OP_QKV_BEAMS: {
        float *k[SD_MAX_ROWS], *v[SD_MAX_ROWS];
        for (int i = 0; i < r->n; i++) {
            k[i] = (float *)((char *)ptr[r->ptr0 + i] + off);
            v[i] = (float *)((char *)ptr[r->ptr0 + r->n + i] + off);
        }
        return cu_qkv_rope_same_pos(c, &r->s, r->out, k, v, &r->w[0], &r->w[1], &r->w[2], r->x,
                                    r->n, r->pos, e);
    }
    case CU_OP_ATTENTION:
        return cu_attention(c, &r->s, r->out, r->x, (const float *)r->kc, (const float *)r->vc,
                            r->n, r->pos, e);
    case CU_OP_MATMUL: return cu_matmul(c, r->out, &r->w[0], r->x, r->n, r->accumulate, e);
    case CU_OP_TOPK: return cu_top_k_rows(c, r->ids, r->probs, r->x, r->n, r->dim, r->k, e);
    default: return cu_ffn_swiglu(c, r->out, r->tmp, &r->w[0], &r->w[1], r->x, r->n, e);
    }
}

/* The recorded step as plain launches. */
static int graph_plain(sd_cuda *c, sd_err *e) {
    c->gstats.fallbacks++;
    for (int i = 0; i < c->cur.nrec; i++)
        if (cu_issue(c, &c->cur.rec[i], c->cur.ptr, e)) return -1;
    return 0;
}

static int graph_launch(sd_cuda *c, cu_graph *g, sd_err *e) {
    *c->pos_host = c->rec_pos < 0 ? 0 : c->rec_pos;
    cudaError_t err = cudaGraphLaunch(g->exec, c->stream);
    if (err == cudaSuccess) err = cudaEventRecord(c->ids_copied, c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "graph: launch");
    g->used = ++c->clock;
    c->gstats.launched++;
    return 0;
}

/* The recorded step as one persistent launch (step.cu). When all records
 * stand at one position the work list is built with the position read from
 * pos_word (as a captured graph reads it) and kept with the records in the
 * least recently used of c->pkept's slots; a later step with the same
 * records (up to the position) and scratch launches the kept list again:
 * the position and the token ids copied in, the flags' targets, nothing
 * built. Otherwise the records are issued each at its own position and the
 * list is not kept. 0, or -1 when the step cannot run so (the reason kept
 * in gstats): nothing was launched but the embeds' id copies and the
 * position's, which the graph path issues again. */
static int graph_persist(sd_cuda *c) {
    sd_err why;
    const int keep = !c->rec_mixed;
    int slot = -1, rc = 0;
    cudaError_t err = cudaSuccess;
    if (keep) {
        *c->pos_host = c->rec_pos < 0 ? 0 : c->rec_pos;
        err = cudaMemcpyAsync(c->pos_word, c->pos_host, sizeof *c->pos_word, cudaMemcpyHostToDevice,
                              c->stream);
        slot = 0; /* the kept list of these records, else the least recently used */
        for (int k = 0; k < CU_GRAPHS; k++) {
            if (c->pkept[k].used && graph_same(c, &c->pkept[k])) {
                slot = k;
                break;
            }
            if (c->pkept[k].used < c->pkept[slot].used) slot = k;
        }
    }
    cu_graph *g = slot >= 0 ? &c->pkept[slot] : NULL;
    if (err != cudaSuccess) {
        rc = cu_fail(&why, err, "persistent step: copy the position");
    } else if (g && g->used && graph_same(c, g)) {
        if (c->rec_ids)
            err = cudaMemcpyAsync(c->scratch[CU_SCRATCH_IDS], c->ids_host,
                                  (size_t)c->rec_ids * sizeof *c->ids_host, cudaMemcpyHostToDevice,
                                  c->stream);
        rc = err == cudaSuccess ? cu_step_replay(c, slot, &why)
                                : cu_fail(&why, err, "persistent step: copy %d token ids", c->rec_ids);
        if (rc == 0) c->gstats.persist_replays++;
    } else {
        if (g) g->used = 0; /* nothing kept there until the new list is */
        c->pos_dev = keep ? c->pos_word : NULL;
        rc = cu_step_begin(c, &why);
        for (int i = 0; i < c->cur.nrec && rc == 0; i++) rc = cu_issue(c, &c->cur.rec[i], c->cur.ptr, &why);
        if (rc == 0) rc = cu_norm_flush(c, &why); /* a step that ends with a norm */
        c->norm.out = NULL; /* a failed build's norm: the graph path issues it again */
        rc = cu_step_end(c, rc == 0, slot, &why);
        c->pos_dev = NULL;
        if (rc == 0 && g) graph_keep_records(c, g);
    }
    if (rc == 0 && keep && (err = cudaEventRecord(c->ids_copied, c->stream)) != cudaSuccess)
        rc = cu_fail(&why, err, "persistent step: mark the staging copied");
    if (rc) {
        c->gstats.persist_fallbacks++;
        snprintf(c->gstats.persist_why, sizeof c->gstats.persist_why, "%s", why.msg);
        return -1;
    }
    if (g) g->used = ++c->clock;
    c->gstats.persistent++;
    return 0;
}

/* Captures the records into the least recently used slot and launches it. */
static int graph_capture(sd_cuda *c, sd_err *e) {
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        return graph_plain(c, e);
    }
    c->capturing = 1;
    c->pos_dev = c->pos_word;
    cudaError_t err = cudaMemcpyAsync(c->pos_word, c->pos_host, sizeof *c->pos_word,
                                      cudaMemcpyHostToDevice, c->stream);
    int rc = err == cudaSuccess ? 0 : -1;
    for (int i = 0; i < c->cur.nrec && rc == 0; i++) rc = cu_issue(c, &c->cur.rec[i], c->cur.ptr, e);
    if (rc == 0) rc = cu_norm_flush(c, e); /* a step that ends with a norm */
    c->norm.out = NULL; /* a failed capture's norm: graph_plain issues it again */
    cudaGraph_t gr = NULL;
    err = cudaStreamEndCapture(c->stream, &gr);
    c->capturing = 0;
    c->pos_dev = NULL;
    if (rc || err != cudaSuccess) {
        if (gr) cudaGraphDestroy(gr);
        cudaGetLastError();
        return graph_plain(c, e);
    }
    size_t nodes = 0;
    if (cudaGraphGetNodes(gr, NULL, &nodes) != cudaSuccess) cudaGetLastError();
    cu_graph *g = &c->graphs[0];
    for (int k = 1; k < CU_GRAPHS; k++)
        if (c->graphs[k].used < g->used) g = &c->graphs[k];
    int fresh = 1;
    if (g->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(g->exec, gr, &info) == cudaSuccess) {
            fresh = 0;
        } else {
            cudaGetLastError();
            cudaGraphExecDestroy(g->exec);
            g->exec = NULL;
        }
    }
    err = fresh ? cudaGraphInstantiate(&g->exec, gr, 0) : cudaSuccess;
    cudaGraphDestroy(gr);
    if (err != cudaSuccess) {
        g->exec = NULL;
        g->used = 0;
        cudaGetLastError();
        return graph_plain(c, e);
    }
    graph_keep_records(c, g);
    c->gstats.captures++;
    if (fresh) c->gstats.instantiated++;
    else c->gstats.updated++;
    c->gstats.nodes = (long)nodes;
    return graph_launch(c, g, e);
}

static int cuda_graph_begin(sd_backend *b, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (!c->graph_on || c->sync_each || c->recording) return 0;
    if (cu_enter(c, "graph", e)) return -1;
    /* the recorded ops write the staging: the last copies out of it are done */
    cudaError_t err = cudaEventSynchronize(c->ids_copied);
    if (err == cudaSuccess && c->ids_cap == 0) {
        err = cudaMallocHost(&c->ids_host, (size_t)SD_MAX_ROWS * sizeof(int32_t));
        if (err == cudaSuccess) c->ids_cap = SD_MAX_ROWS;
    }
    if (err != cudaSuccess) return cu_fail(e, err, "graph: ids staging");
    c->recording = 1;
    c->cur.nrec = c->cur.nptr = 0;
    c->rec_pos = -1;
    c->rec_mixed = 0;
    c->rec_ids = 0;
    c->rec_ntk = c->rec_tk_used = 0;
    memset(c->rec_need, 0, sizeof c->rec_need);
    return 1;
}

/* The recorded step, queued: as one persistent launch, as plain launches,
 * or as a kept or newly captured graph. */
static int graph_run(sd_cuda *c, sd_err *e) {
    for (int k = 0; k < CU_SCRATCH_N; k++)
        if (c->rec_need[k] && !cu_scratch(c, k, c->rec_need[k], e)) return -1;
    if (c->persist_on && graph_persist(c) == 0) return 0;
    if (c->rec_mixed) return graph_plain(c, e);
    cu_graph *g = NULL;
    for (int k = 0; k < CU_GRAPHS && !g; k++)
        if (c->graphs[k].exec && graph_same(c, &c->graphs[k])) g = &c->graphs[k];
    if (!g) return graph_capture(c, e);
    c->gstats.replays++;
    return graph_launch(c, g, e);
}

static int cuda_graph_end(sd_backend *b, int ok, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (!c->recording) return 0;
    c->recording = 0;
    if (!ok || c->cur.nrec == 0) {
        if (!ok) c->gstats.fallbacks++;
        c->rec_ntk = c->rec_tk_used = 0;
        return 0;
    }
    if (cu_enter(c, "graph", e) || graph_run(c, e)) {
        c->rec_ntk = c->rec_tk_used = 0;
        return -1;
    }
    return cu_top_k_results(c, e);
}

/* ---- backend lifetime ------------------------------------------------------------ */
static void cuda_destroy(sd_backend *b) {
    sd_cuda *c = cu_ctx(b);
    if (c) {
        if (cudaSetDevice(c->device) == cudaSuccess) {
            if (c->stream) cudaStreamSynchronize(c->stream);
            for (int i = 0; i < CU_SCRATCH_N; i++)
                cu_free(c->scratch[i]);
            cu_free(c->top_k_dev);
            cu_free(c->top_k_part);
            cu_free(c->attn_ctr);
            cu_free(c->ffn_ctr);
            if (c->top_k_host && cudaFreeHost(c->top_k_host) != cudaSuccess) cudaGetLastError();
            if (c->ids_host && cudaFreeHost(c->ids_host) != cudaSuccess) cudaGetLastError();
            if (c->ids_copied && cudaEventDestroy(c->ids_copied) != cudaSuccess) cudaGetLastError();
            for (int k = 0; k < CU_GRAPHS; k++)
                if (c->graphs[k].exec && cudaGraphExecDestroy(c->graphs[k].exec) != cudaSuccess)
                    cudaGetLastError();
            cu_free(c->pos_word);
            if (c->pos_host && cudaFreeHost(c->pos_host) != cudaSuccess) cudaGetLastError();
            if (c->stream) cudaStreamDestroy(c->stream);
        }
        cu_step_free(c);
        for (int k = 0; k < CU_GRAPHS; k++) {
            free(c->graphs[k].rec), free(c->graphs[k].ptr);
            free(c->pkept[k].rec), free(c->pkept[k].ptr);
        }
        free(c->cur.rec);
        free(c->cur.ptr);
        free(c);
    }
    free(b);
}

extern "C" int sd_cuda_available(char *why, size_t cap) {
    char buf[256];
    int n = 0, ok = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaErrorInsufficientDriver) {
        snprintf(buf, sizeof buf, "no CUDA device: no NVIDIA driver, or one older than CUDA %d.%d",
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    } else if (err != cudaSuccess) {
        snprintf(buf, sizeof buf, "no CUDA device: %s", cudaGetErrorString(err));
    } else if (n == 0) {
        snprintf(buf, sizeof buf, "no CUDA device: none found");
    } else {
        snprintf(buf, sizeof buf, "no CUDA device: no device of compute capability 8.0 or newer");
        for (int d = 0; d < n && !ok; d++) {
            cudaDeviceProp p;
            if (cudaGetDeviceProperties(&p, d) != cudaSuccess || p.major < 8) continue;
            snprintf(buf, sizeof buf, "device %d: %.160s (sm_%d%d, %d SMs, %.0f GiB)", d, p.name,
                     p.major, p.minor, p.multiProcessorCount,
                     (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
            ok = 1;
        }
    }
    if (why && cap) snprintf(why, cap, "%s", buf);
    return ok;
}

extern "C" sd_backend *sd_backend_cuda(int device, const sd_backend_opts *o, sd_err *e) {
    const sd_backend_opts d = o ? *o : sd_backend_opts_default();
    if (d.cuda_fuse_norm < 0 || d.cuda_fuse_norm > SD_CUDA_FUSE_NORM_MAX) {
        sd_fail(e, "cuda backend: fuse_norm %d: expected 0 (norms launched on their own) or 1-%d "
                   "(folded, resident blocks a multiprocessor)", d.cuda_fuse_norm, SD_CUDA_FUSE_NORM_MAX);
        return NULL;
    }
    char why[256];
    if (!sd_cuda_available(why, sizeof why)) {
        sd_fail(e, "cuda backend: %s", why);
        return NULL;
    }
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || device < 0 || device >= count) {
        sd_fail(e, "cuda backend: device %d does not exist (%d devices)", device, count);
        return NULL;
    }
    cudaDeviceProp prop;
    if ((err = cudaSetDevice(device)) != cudaSuccess ||
        (err = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        cu_fail(e, err, "backend: open device %d", device);
        return NULL;
    }
    if (prop.major < 8) {
        sd_fail(e, "cuda backend: device %d (%s) is sm_%d%d; this build needs sm_80 or newer",
                device, prop.name, prop.major, prop.minor);
        return NULL;
    }
    sd_backend *b = (sd_backend *)calloc(1, sizeof *b);
    sd_cuda *c = (sd_cuda *)calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        sd_fail(e, "cuda backend: out of memory");
        return NULL;
    }
    b->ctx = c;
    b->destroy = cuda_destroy;
    c->device = device;
    c->sms = prop.multiProcessorCount;
    c->sync_each = d.cuda_sync != 0;
    c->graph_on = d.cuda_graph != 0;
    c->attn_merge_launch = d.cuda_attn_merge_launch != 0;
    c->pdl = prop.major >= 9 && d.cuda_pdl;
    c->fuse_norm = d.cuda_fuse_norm;
    c->persist_on = prop.major >= 9 && d.cuda_persistent;
    c->stage = d.cuda_stage != 0;
    c->mma = d.cuda_mma != 0;
    if ((err = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (err = cudaMalloc(&c->top_k_dev, TOP_K_BYTES)) != cudaSuccess ||
        (err = cudaMallocHost(&c->top_k_host, TOP_K_BYTES)) != cudaSuccess ||
        (err = cudaMalloc(&c->top_k_part, cu_top_k_part_bytes())) != cudaSuccess ||
        (err = cudaMalloc(&c->attn_ctr, CU_ATTN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
        (err = cudaMalloc(&c->ffn_ctr, CU_FFN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
        (err = cudaMalloc(&c->pos_word, sizeof *c->pos_word)) != cudaSuccess ||
        (err = cudaMallocHost(&c->pos_host, sizeof *c->pos_host)) != cudaSuccess ||
        (err = cudaMemset(c->attn_ctr, 0, CU_ATTN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
        (err = cudaMemset(c->ffn_ctr, 0, CU_FFN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
        (err = cudaEventCreateWithFlags(&c->ids_copied, cudaEventDisableTiming)) != cudaSuccess) {
        cu_fail(e, err, "backend: set up device %d", device);
        cuda_destroy(b);
        return NULL;
    }
    b->name = "cuda";
    b->alloc = cuda_alloc;
    b->release = cuda_release;
    b->upload_weight = cuda_upload_weight;
    b->release_weight = cuda_release_weight;
    b->to_host = cuda_to_host;
    b->copy = cuda_copy;
    b->embed = cuda_embed;
    b->rmsnorm = cuda_rmsnorm;
    b->qkv_rope = cuda_qkv_rope;
    b->qkv_rope_same_pos = cuda_qkv_rope_same_pos;
    b->attention = cuda_attention;
    b->matmul = cuda_matmul;
    b->ffn_swiglu = cuda_ffn_swiglu;
    b->top_k_rows = cuda_top_k_rows;
    b->graph_begin = cuda_graph_begin;
    b->graph_end = cuda_graph_end;
    return b;
}

static int is_cuda(const sd_backend *b) { return b && b->destroy == cuda_destroy; }

extern "C" int sd_cuda_from_host(sd_backend *b, void *dst_dev, const void *src_host, size_t bytes,
                                 sd_err *e) {
    if (!is_cuda(b)) return sd_fail(e, "cuda: from_host: not a CUDA backend");
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "from_host", e)) return -1;
    cudaError_t err = cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "from_host %zu bytes", bytes);
}

cudaStream_t sd_cuda_stream(sd_backend *b) { return is_cuda(b) ? cu_ctx(b)->stream : NULL; }

extern "C" int sd_cuda_set_graph(sd_backend *b, int on) {
    if (!is_cuda(b)) return -1;
    cu_ctx(b)->graph_on = on != 0;
    return 0;
}

extern "C" int sd_cuda_set_persist_waits(sd_backend *b, int how) {
    if (!is_cuda(b) || how < SD_CUDA_WAITS_FINE || how > SD_CUDA_WAITS_PLANTED) return -1;
    sd_cuda *c = cu_ctx(b);
    if (c->persist_waits != how)
        for (int k = 0; k < CU_GRAPHS; k++) c->pkept[k].used = 0; /* built with the old waits */
    c->persist_waits = how;
    return 0;
}

extern "C" int sd_cuda_set_fuse_norm(sd_backend *b, int per_sm) {
    if (!is_cuda(b) || per_sm < 0 || per_sm > SD_CUDA_FUSE_NORM_MAX) return -1;
    sd_cuda *c = cu_ctx(b);
    sd_err e;
    if (cu_norm_flush(c, &e)) return -1;
    c->fuse_norm = per_sm;
    return 0;
}

extern "C" int sd_cuda_set_mma(sd_backend *b, int on) {
    if (!is_cuda(b)) return -1;
    sd_cuda *c = cu_ctx(b);
    if (c->mma != (on != 0))
        for (int k = 0; k < CU_GRAPHS; k++) c->pkept[k].used = 0; /* stages of the other kernels */
    c->mma = on != 0;
    return 0;
}

extern "C" long sd_cuda_norms_folded(sd_backend *b) { return is_cuda(b) ? cu_ctx(b)->folded : -1; }

extern "C" int sd_cuda_graph_stats_get(sd_backend *b, sd_cuda_graph_stats *out) {
    if (!is_cuda(b)) return -1;
    *out = cu_ctx(b)->gstats;
    return 0;
}
