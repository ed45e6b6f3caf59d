/* The CUDA op table (engine/backend.h): device selection, memory, weight
 * upload, error reporting, and thin adapters onto the kernel launchers.
 *
 * Memory: alloc is cudaMalloc + a zero fill queued on the backend's stream;
 * weights get one allocation each in the layout of cuda_int.h; scratch (int8
 * activations, attention partials, token ids) grows on demand and is reused,
 * so a steady decode loop allocates nothing. Every op first makes the
 * backend's device current (two models may live on two devices). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_int.h"

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

static int cu_enter(sd_cuda *c, const char *op, sd_err *e) {
    cudaError_t err = cudaSetDevice(c->device);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "%s: select device %d", op, c->device);
}

/* ---- scratch ----------------------------------------------------------------- */
void *cu_scratch(sd_cuda *c, int slot, size_t bytes, sd_err *e) {
    if (bytes <= c->scratch_size[slot] && c->scratch[slot]) return c->scratch[slot];
    if (c->capturing) {
        sd_fail(e, "cuda: scratch %d must grow to %zu bytes while a graph is recorded", slot, bytes);
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
    if (cudaSetDevice(cu_ctx(b)->device) == cudaSuccess) cu_free((void *)w->data);
    else cudaGetLastError();
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
    if (cudaSetDevice(cu_ctx(b)->device) == cudaSuccess) cu_free(p);
    else cudaGetLastError();
}

static int cuda_to_host(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "to_host", e)) return -1;
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess)
        return cu_fail(e, err, "to_host %zu bytes (a fault of an earlier kernel also shows here; "
                       "SD_CUDA_SYNC=1 names it)", bytes);
    return 0;
}

static int cuda_copy(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "copy", e)) return -1;
    const char *d = (const char *)dst, *s = (const char *)src;
    if (dst != src && d < s + bytes && s < d + bytes)
        return sd_fail(e, "cuda: copy: %zu bytes between overlapping regions", bytes);
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "copy %zu bytes", bytes);
}

/* ---- ops -------------------------------------------------------------------------- */
static int cuda_embed(sd_backend *b, float *x, const sd_weight *emb, const int32_t *ids, int n,
                      sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (n <= 0) return 0;
    if (cu_enter(c, "embed", e) || cu_check_weight(emb, "embed", e)) return -1;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= emb->rows)
            return sd_fail(e, "embed: token id %d out of range [0, %lld)", (int)ids[i],
                           (long long)emb->rows);
    int32_t *dev = (int32_t *)cu_scratch(c, CU_SCRATCH_IDS, (size_t)n * sizeof *ids, e);
    if (!dev) return -1;
    /* the ids go through pinned staging (one DMA, no pageable copy); the
     * previous copy out of it must be done before it is written again
     * (graph_begin waits for it before recording starts) */
    cudaError_t err = c->capturing ? cudaSuccess : cudaEventSynchronize(c->ids_copied);
    if (err != cudaSuccess) return cu_fail(e, err, "embed: wait for the last ids copy");
    if (n > c->ids_cap && c->capturing)
        return sd_fail(e, "cuda: embed: %d ids need more pinned staging while a graph is recorded", n);
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
    err = cudaMemcpyAsync(dev, c->ids_host, (size_t)n * sizeof *ids, cudaMemcpyHostToDevice,
                          c->stream);
    /* recorded: graph_end marks the copy's end after the graph's launch */
    if (err == cudaSuccess && !c->capturing) err = cudaEventRecord(c->ids_copied, c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "embed: copy %d token ids", n);
    return cu_embed(c, x, emb, dev, n, e);
}

static int cuda_rmsnorm(sd_backend *b, float *out, const float *x, const sd_weight *w, int n,
                        int dim, float eps, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "rmsnorm", e)) return -1;
    if (!w || !w->data || w->type != SD_F32 || w->cols != dim)
        return sd_fail(e, "cuda: rmsnorm: the weight must be F32 of %d elements", dim);
    return cu_rmsnorm(c, out, x, (const float *)w->data, n, dim, eps, e);
}

/* The cache stays F32 here: an F16 cache (the CPU backend's --kv-type f16)
 * is refused by name. */
static int cu_kv_f32(const sd_attn_shape *s, const char *op, sd_err *e) {
    if (s->kv_type == SD_F32) return 0;
    return sd_fail(e, "cuda: %s: the CUDA backend keeps the KV cache in F32 (--kv-type %s is "
                      "CPU-only)", op, sd_wtype_name(s->kv_type));
}

static int cuda_qkv_rope(sd_backend *b, const sd_attn_shape *s, float *q, void *k_rows,
                         void *v_rows, const sd_weight *wq, const sd_weight *wk,
                         const sd_weight *wv, const float *x, int n, int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "qkv_rope", e) || cu_kv_f32(s, "qkv_rope", e)) return -1;
    return cu_qkv_rope(c, s, q, (float *)k_rows, (float *)v_rows, wq, wk, wv, x, n, pos, e);
}

static int cuda_qkv_rope_same_pos(sd_backend *b, const sd_attn_shape *s, float *q,
                                  void *const *k_dst, void *const *v_dst, const sd_weight *wq,
                                  const sd_weight *wk, const sd_weight *wv, const float *x, int n,
                                  int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "qkv_rope_same_pos", e) || cu_kv_f32(s, "qkv_rope_same_pos", e)) return -1;
    return cu_qkv_rope_same_pos(c, s, q, (float *const *)k_dst, (float *const *)v_dst, wq, wk, wv,
                                x, n, pos, e);
}

static int cuda_attention(sd_backend *b, const sd_attn_shape *s, float *out, const float *q,
                          const void *kc, const void *vc, int n, int pos, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "attention", e) || cu_kv_f32(s, "attention", e)) return -1;
    return cu_attention(c, s, out, q, (const float *)kc, (const float *)vc, n, pos, e);
}

static int cuda_matmul(sd_backend *b, float *out, const sd_weight *w, const float *x, int n,
                       int accumulate, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "matmul", e)) return -1;
    return cu_matmul(c, out, w, x, n, accumulate, e);
}

static int cuda_ffn_swiglu(sd_backend *b, float *h, float *tmp, const sd_weight *w1,
                           const sd_weight *w3, const float *x, int n, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (cu_enter(c, "ffn_swiglu", e)) return -1;
    return cu_ffn_swiglu(c, h, tmp, w1, w3, x, n, e);
}

/* The ids of one top_k_rows call: [n_rows][k] int32, at most this many bytes. */
#define TOP_K_BYTES ((size_t)SD_MAX_ROWS * SD_TOP_K_MAX * sizeof(int32_t))

static int cuda_top_k_rows(sd_backend *b, const float *x, int n_rows, int cols, int k,
                           int32_t *ids_host, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (n_rows < 1 || n_rows > SD_MAX_ROWS || k < 1 || k > cols || k > SD_TOP_K_MAX)
        return sd_fail(e, "cuda: top_k_rows: %d rows of %d, k %d (1 to %d rows, k 1 to min(cols, %d))",
                       n_rows, cols, k, SD_MAX_ROWS, SD_TOP_K_MAX);
    if (cu_enter(c, "top_k_rows", e) || cu_top_k_rows(c, c->top_k_dev, x, n_rows, cols, k, e))
        return -1;
    const size_t bytes = (size_t)n_rows * (size_t)k * sizeof *ids_host;
    cudaError_t err =
        cudaMemcpyAsync(c->top_k_host, c->top_k_dev, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "top_k_rows %dx%d k %d: copy the ids", n_rows, cols, k);
    memcpy(ids_host, c->top_k_host, bytes);
    return 0;
}

/* ---- graphs ----------------------------------------------------------------------
 * A decode step is recorded with stream capture and run as one graph
 * launch. Its kernels' arguments (position, cache rows) change every step,
 * so each step is captured anew, but the executable graph is kept and
 * updated in place (cudaGraphExecUpdate: new parameters, same topology),
 * which costs far less than an instantiation; when the update is refused
 * (another kernel variant or split, say a longer context), the step is
 * instantiated anew. The token id is read by the graph's copy node from
 * the pinned staging at launch, which embed filled before recording. */
static int cuda_graph_begin(sd_backend *b, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (!c->graph_on || c->sync_each || c->capturing) return 0;
    if (cu_enter(c, "graph", e)) return -1;
    cudaError_t err = cudaEventSynchronize(c->ids_copied);
    if (err == cudaSuccess && c->ids_cap == 0) {
        err = cudaMallocHost(&c->ids_host, (size_t)SD_MAX_ROWS * sizeof(int32_t));
        if (err == cudaSuccess) c->ids_cap = SD_MAX_ROWS;
    }
    if (err != cudaSuccess) return cu_fail(e, err, "graph: ids staging");
    if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError(); /* no recording: the step runs plainly */
        c->gstats.fallbacks++;
        return 0;
    }
    c->capturing = 1;
    return 1;
}

static int cuda_graph_end(sd_backend *b, int ok, sd_err *e) {
    sd_cuda *c = cu_ctx(b);
    if (!c->capturing) return 0;
    cudaGraph_t g = NULL;
    cudaError_t err = cudaStreamEndCapture(c->stream, &g);
    c->capturing = 0;
    if (!ok || err != cudaSuccess) {
        if (g) cudaGraphDestroy(g);
        cudaGetLastError();
        c->gstats.fallbacks++;
        return ok ? cu_fail(e, err, "graph: end recording") : 0;
    }
    int fresh = 1;
    if (c->exec) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->exec, g, &info) == cudaSuccess) {
            fresh = 0;
        } else {
            cudaGetLastError();
            cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
        }
    }
    if (fresh) err = cudaGraphInstantiate(&c->exec, g, 0);
    cudaGraphDestroy(g);
    if (err != cudaSuccess) {
        c->exec = NULL;
        return cu_fail(e, err, "graph: instantiate");
    }
    err = cudaGraphLaunch(c->exec, c->stream);
    if (err == cudaSuccess) err = cudaEventRecord(c->ids_copied, c->stream);
    if (err != cudaSuccess) return cu_fail(e, err, "graph: launch");
    c->gstats.launched++;
    if (fresh) c->gstats.instantiated++;
    else c->gstats.updated++;
    return 0;
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
            if (c->top_k_host && cudaFreeHost(c->top_k_host) != cudaSuccess) cudaGetLastError();
            if (c->ids_host && cudaFreeHost(c->ids_host) != cudaSuccess) cudaGetLastError();
            if (c->ids_copied && cudaEventDestroy(c->ids_copied) != cudaSuccess) cudaGetLastError();
            if (c->exec && cudaGraphExecDestroy(c->exec) != cudaSuccess) cudaGetLastError();
            if (c->stream) cudaStreamDestroy(c->stream);
        }
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
            snprintf(buf, sizeof buf, "device %d: %s (sm_%d%d, %d SMs, %.0f GiB)", d, p.name,
                     p.major, p.minor, p.multiProcessorCount,
                     (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
            ok = 1;
        }
    }
    if (why && cap) snprintf(why, cap, "%s", buf);
    return ok;
}

extern "C" sd_backend *sd_backend_cuda(int device, sd_err *e) {
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
    const char *sync = getenv("SD_CUDA_SYNC");
    c->sync_each = sync && strcmp(sync, "0") != 0;
    const char *graph = getenv("SD_CUDA_GRAPH");
    c->graph_on = graph && strcmp(graph, "1") == 0;
    if ((err = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (err = cudaMalloc(&c->top_k_dev, TOP_K_BYTES)) != cudaSuccess ||
        (err = cudaMallocHost(&c->top_k_host, TOP_K_BYTES)) != cudaSuccess ||
        (err = cudaMalloc(&c->top_k_part, cu_top_k_part_bytes())) != cudaSuccess ||
        (err = cudaMalloc(&c->attn_ctr, CU_ATTN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
        (err = cudaMemset(c->attn_ctr, 0, CU_ATTN_COUNTERS * sizeof(unsigned))) != cudaSuccess ||
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

extern "C" int sd_cuda_graph_stats_get(sd_backend *b, sd_cuda_graph_stats *out) {
    if (!is_cuda(b)) return -1;
    *out = cu_ctx(b)->gstats;
    return 0;
}
