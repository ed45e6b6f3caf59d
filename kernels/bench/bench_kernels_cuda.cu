/* CUDA kernel benchmark: one row per op and shape of SmolLM2-135M,
 * Llama-3.2-1B and Llama-3.2-3B (random weights in BF16, Q8_0, Q4_1) and of
 * Qwen2.5-Coder 1.5B and 0.5B (Q4_K, Q6_K, Q5_0: the types of their
 * Q4_K_M files; the 0.5B's K-quant rows are only its 896x4864 ffn_down), with
 * the time per call, the bytes the op must move (each weight, cache and
 * activation byte once), the bandwidth that makes, its share of the
 * measured device-to-device copy bandwidth, and the largest error against
 * the CPU backend on the same inputs. The matrix products run for 1 to 16
 * rows, those with quantised weights on the __dp4a tiles (the default)
 * and again on tensor cores (SD_CUDA_MMA=1; "mma" after the shape), so the
 * rows show what a verification of n rows costs against a one-row step
 * either way.
 *   usage: bench_kernels_cuda [CSV]   (default $OUT/bench_kernels_cuda.csv
 *                                      when OUT is set; else no CSV)
 * Without a usable GPU it prints one line and exits 0.
 *
 * Timing: each op is run through the backend's op table three times (warm-
 * up, scratch growth), then `reps` calls are captured into a CUDA graph on
 * the backend's stream with an event before each call, the graph is
 * launched three times, and the row reports the median of the per-call
 * event intervals: GPU time without host launch overhead. Ops that cannot
 * be captured (embed copies host ids) are timed the same way without the
 * graph ("direct"). Inputs rotate among enough device copies of the
 * weights (and KV caches, logits) that one graph launch streams more than
 * 240 MB, four times the H200's 60 MB L2, so rows measure device memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/bench/rand_blocks.h"
#include "kernels/cuda/cuda_int.h"

extern "C" {
#include "kernels/cpu/backend_cpu.h"
}

enum { MAX_REPS = 2048, MIN_REPS = 32, LAUNCHES = 3 };
static const size_t ROTATE_BYTES = (size_t)240 << 20;

struct Bench {
    sd_backend *gpu, *cpu;
    cudaStream_t st;
    double copy_gbs;
    FILE *csv;
};

static void die(const char *what, const char *msg) {
    fprintf(stderr, "bench_kernels_cuda: %s: %s\n", what, msg);
    exit(1);
}

static void ck(cudaError_t err, const char *what) {
    if (err != cudaSuccess) die(what, cudaGetErrorString(err));
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("host memory", "out of memory");
    return p;
}

/* ---- random data ------------------------------------------------------------- */
static uint64_t rng = 0x243f6a8885a308d3ull;
static inline uint64_t rnd(void) { return sd_rb_next(&rng); }
static float frand(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static float *hrand(size_t n, float scale) {
    float *p = (float *)xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}

/* GGUF rows of random values of moderate size, written directly (quantising
 * gigabytes of floats would dominate the run): BF16 of magnitude 2^-10 to
 * 2^-7, quantised types as random valid blocks of values up to ~0.5. */
static void fill_rows(uint32_t type, uint8_t *dst, size_t rows, size_t cols) {
    if (type != SD_BF16) {
        if (sd_rand_blocks(type, dst, rows * cols / sd_wtype_block(type), 0.25f, &rng))
            die("fill_rows", sd_wtype_name(type));
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        uint16_t *h = (uint16_t *)(dst + r * sd_row_bytes(type, cols));
        for (size_t c = 0; c < cols; c += 4) {
            const uint64_t z = rnd();
            for (int k = 0; k < 4; k++) {
                const unsigned b = (unsigned)(z >> (16 * k));
                h[c + k] = (uint16_t)((b & 0x807f) | ((117u + ((b >> 7) & 3)) << 7));
            }
        }
    }
}

/* ---- device data ------------------------------------------------------------- */
static float *dev_from(Bench *B, const float *h, size_t n) {
    sd_err e;
    float *d = (float *)B->gpu->alloc(B->gpu, n * sizeof *d, &e);
    if (!d || sd_cuda_from_host(B->gpu, d, h, n * sizeof *d, &e)) die("device data", e.msg);
    return d;
}

static float *dev_rand(Bench *B, size_t n, float scale) {
    float *h = hrand(n, scale), *d = dev_from(B, h, n);
    free(h);
    return d;
}

/* A weight: host GGUF rows (the CPU reference's) and ncopies device copies. */
struct Wset {
    sd_weight host;
    sd_weight *dev;
    int ncopies;
    uint8_t *arena; /* copies 1.. */
};

static int copies_for(size_t bytes) {
    size_t k = ROTATE_BYTES / (bytes ? bytes : 1) + 2;
    return (int)(k < MAX_REPS ? k : MAX_REPS);
}

static void wset_make(Bench *B, Wset *w, uint32_t type, int64_t rows, int64_t cols) {
    const size_t rb = sd_row_bytes(type, (uint64_t)cols);
    uint8_t *h = (uint8_t *)xmalloc(rb * (size_t)rows);
    fill_rows(type, h, (size_t)rows, (size_t)cols);
    w->host = sd_weight{type, rows, cols, rb, h};
    const size_t dbytes = (cu_weight_bytes(type, rows, cols) + 255) & ~(size_t)255;
    w->ncopies = copies_for(dbytes);
    w->dev = (sd_weight *)xmalloc(sizeof *w->dev * (size_t)w->ncopies);
    w->dev[0] = w->host;
    sd_err e;
    if (B->gpu->upload_weight(B->gpu, &w->dev[0], &e)) die("upload", e.msg);
    ck(cudaMalloc(&w->arena, dbytes * (size_t)(w->ncopies - 1)), "weight copies");
    for (int k = 1; k < w->ncopies; k++) {
        w->dev[k] = w->dev[0];
        w->dev[k].data = w->arena + dbytes * (size_t)(k - 1);
        ck(cudaMemcpyAsync((void *)w->dev[k].data, w->dev[0].data, dbytes, cudaMemcpyDeviceToDevice,
                           B->st),
           "weight copies");
    }
    ck(cudaStreamSynchronize(B->st), "weight copies");
}

static void wset_free(Bench *B, Wset *w) {
    B->gpu->release_weight(B->gpu, &w->dev[0]);
    cudaFree(w->arena);
    free(w->dev);
    free((void *)w->host.data);
}

/* ---- timing --------------------------------------------------------------------- */
typedef int (*op_fn)(Bench *B, void *arg, int k, sd_err *e);

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median microseconds per call of fn over reps calls (call i uses copy
 * i % ncopies); *graphed says whether a graph carried them. */
static double time_op(Bench *B, op_fn fn, void *arg, int ncopies, int reps, int *graphed) {
    sd_err e;
    for (int w = 0; w < 3; w++)
        if (fn(B, arg, w % ncopies, &e)) die("warm-up", e.msg);
    ck(cudaStreamSynchronize(B->st), "warm-up");
    cudaEvent_t *ev = (cudaEvent_t *)xmalloc(sizeof *ev * (size_t)(reps + 1));
    for (int i = 0; i <= reps; i++) ck(cudaEventCreate(&ev[i]), "event");
    float *samples = (float *)xmalloc(sizeof *samples * (size_t)reps * LAUNCHES);
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    /* Inside a capture a plain cudaEventRecord becomes no timing node (the
     * elapsed time then fails with "invalid argument"); External makes the
     * graph record the event each time it runs. */
    int ok = cudaStreamBeginCapture(B->st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        for (int i = 0; i < reps && ok; i++)
            ok = cudaEventRecordWithFlags(ev[i], B->st, cudaEventRecordExternal) == cudaSuccess &&
                 fn(B, arg, i % ncopies, &e) == 0;
        ok = ok && cudaEventRecordWithFlags(ev[reps], B->st, cudaEventRecordExternal) == cudaSuccess;
        ok = cudaStreamEndCapture(B->st, &g) == cudaSuccess && ok;
        ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
    }
    cudaGetLastError(); /* a refused capture leaves its error behind */
    *graphed = ok;
    int ns = 0;
    for (int l = 0; l <= LAUNCHES; l++) { /* launch 0 warms the graph up */
        if (ok) {
            ck(cudaGraphLaunch(ge, B->st), "graph launch");
        } else {
            for (int i = 0; i < reps; i++) {
                ck(cudaEventRecord(ev[i], B->st), "event");
                if (fn(B, arg, i % ncopies, &e)) die("direct run", e.msg);
            }
            ck(cudaEventRecord(ev[reps], B->st), "event");
        }
        ck(cudaStreamSynchronize(B->st), "timed run");
        if (l == 0) continue;
        for (int i = 0; i < reps; i++) ck(cudaEventElapsedTime(&samples[ns++], ev[i], ev[i + 1]), "elapsed");
    }
    qsort(samples, (size_t)ns, sizeof *samples, cmp_float);
    const double us = 1000.0 * samples[ns / 2];
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    for (int i = 0; i <= reps; i++) cudaEventDestroy(ev[i]);
    free(ev);
    free(samples);
    return us;
}

static int reps_for(size_t bytes) {
    size_t r = ROTATE_BYTES / (bytes ? bytes : 1) + 1;
    return (int)(r < MIN_REPS ? MIN_REPS : r > MAX_REPS ? MAX_REPS : r);
}

static double rel_err(const float *got, const float *ref, size_t n) {
    double mx = 0, rm = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        const double d = fabs((double)got[i] - ref[i]);
        if (d > mx) mx = d;
        if (fabs(ref[i]) > rm) rm = fabs(ref[i]);
    }
    return mx / (rm > 0 ? rm : 1.0);
}

/* max error of device output dev[n] against the CPU's ref[n] */
static double err_vs(Bench *B, const float *dev, const float *ref, size_t n) {
    float *h = (float *)xmalloc(n * sizeof *h);
    sd_err e;
    if (B->gpu->to_host(B->gpu, h, dev, n * sizeof *h, &e)) die("fetch", e.msg);
    const double r = rel_err(h, ref, n);
    free(h);
    return r;
}

static void row(Bench *B, const char *kernel, const char *model, const char *type, int n,
                const char *shape, double us, double bytes, double err, int graphed) {
    const double gbs = bytes / (us * 1e3);
    printf("%-12s %-13s %-5s %3d %-22s %9.2f %10.3f %8.1f %6.1f %9.2e %s\n", kernel, model, type, n,
           shape, us, bytes / 1e6, gbs, 100.0 * gbs / B->copy_gbs, err, graphed ? "graph" : "direct");
    fflush(stdout);
    if (B->csv)
        fprintf(B->csv, "%s,%s,%s,%d,%s,%.3f,%.0f,%.1f,%.1f,%.3e,%s\n", kernel, model, type, n, shape,
                us, bytes, gbs, 100.0 * gbs / B->copy_gbs, err, graphed ? "graph" : "direct");
}

/* ---- ops ------------------------------------------------------------------------------ */
struct MmOp {
    Wset *w;
    float *x, *out;
    int n, acc;
};
static int mm_fn(Bench *B, void *a, int k, sd_err *e) {
    MmOp *o = (MmOp *)a;
    return B->gpu->matmul(B->gpu, o->out, &o->w->dev[k], o->x, o->n, o->acc, e);
}

struct QkvOp {
    Wset *wq, *wk, *wv;
    sd_attn_shape s;
    float *x, *q, *k, *v;
    int n, pos;
};
static int qkv_fn(Bench *B, void *a, int k, sd_err *e) {
    QkvOp *o = (QkvOp *)a;
    return B->gpu->qkv_rope(B->gpu, &o->s, o->q, o->k, o->v, &o->wq->dev[k], &o->wk->dev[k],
                            &o->wv->dev[k], o->x, o->n, o->pos, e);
}

struct FfnOp {
    Wset *w1, *w3;
    float *x, *h, *tmp;
    int n;
};
static int ffn_fn(Bench *B, void *a, int k, sd_err *e) {
    FfnOp *o = (FfnOp *)a;
    return B->gpu->ffn_swiglu(B->gpu, o->h, o->tmp, &o->w1->dev[k], &o->w3->dev[k], o->x, o->n, e);
}

struct EmbOp {
    Wset *w;
    float *x;
    const int32_t *ids;
    int n;
};
static int emb_fn(Bench *B, void *a, int k, sd_err *e) {
    EmbOp *o = (EmbOp *)a;
    return B->gpu->embed(B->gpu, o->x, &o->w->dev[k], o->ids, o->n, e);
}

struct NormOp {
    sd_weight *w;
    float *x, *out;
    int n, dim;
};
static int norm_fn(Bench *B, void *a, int k, sd_err *e) {
    (void)k;
    NormOp *o = (NormOp *)a;
    return B->gpu->rmsnorm(B->gpu, o->out, o->x, o->w, o->n, o->dim, 1e-5f, e);
}

struct AttnOp {
    sd_attn_shape s;
    float *q, *out, **kc, **vc;
    int n, pos;
};
static int attn_fn(Bench *B, void *a, int k, sd_err *e) {
    AttnOp *o = (AttnOp *)a;
    return B->gpu->attention(B->gpu, &o->s, o->out, o->q, o->kc[k], o->vc[k], o->n, o->pos, e);
}

struct TopKOp {
    float **x;
    int32_t *out;
    float *probs; /* NULL: ids only */
    int rows, cols, k;
};
static int top_k_fn(Bench *B, void *a, int k, sd_err *e) {
    TopKOp *o = (TopKOp *)a;
    return cu_top_k_rows(cu_ctx(B->gpu), o->out, o->probs, o->x[k], o->rows, o->cols, o->k, e);
}

/* ---- rows --------------------------------------------------------------------------- */
struct Shape {
    const char *name;
    int dim, n_head, n_kv, hd, ffn, vocab;
};

static const int NS[2] = {1, 9};

/* The row counts of the matrix-product rows. */
static const int MM_NS[6] = {1, 2, 5, 8, 9, 16};

static void bench_matmul(Bench *B, const Shape *m, const char *kernel, Wset *w, int acc) {
    const int rows = (int)w->host.rows, cols = (int)w->host.cols;
    for (int t = 0; t < 12; t++) {
        const int n = MM_NS[t % 6], mma = t >= 6;
        if (mma && !cu_is_quant(w->host.type)) break;
        if (sd_cuda_set_mma(B->gpu, mma)) die("matmul", "not a CUDA backend");
        float *xh = hrand((size_t)n * cols, 1.0f), *init = hrand((size_t)n * rows, 1.0f);
        float *ref = (float *)xmalloc((size_t)n * rows * sizeof *ref);
        memcpy(ref, init, (size_t)n * rows * sizeof *ref);
        sd_err e;
        if (B->cpu->matmul(B->cpu, ref, &w->host, xh, n, acc, &e)) die("cpu matmul", e.msg);
        MmOp o = {w, dev_from(B, xh, (size_t)n * cols), dev_from(B, init, (size_t)n * rows), n, acc};
        const double wbytes = (double)w->host.row_bytes * rows;
        int graphed;
        const double us = time_op(B, mm_fn, &o, w->ncopies, reps_for((size_t)wbytes), &graphed);
        if (sd_cuda_from_host(B->gpu, o.out, init, (size_t)n * rows * sizeof *init, &e) ||
            mm_fn(B, &o, 0, &e))
            die("matmul check", e.msg);
        const double err = err_vs(B, o.out, ref, (size_t)n * rows);
        char shape[48];
        snprintf(shape, sizeof shape, "%dx%d%s%s", rows, cols, acc ? " +=" : "", mma ? " mma" : "");
        row(B, kernel, m->name, sd_wtype_name(w->host.type), n, shape, us,
            wbytes + 4.0 * n * cols + 4.0 * n * rows * (acc ? 2 : 1), err, graphed);
        B->gpu->release(B->gpu, o.x);
        B->gpu->release(B->gpu, o.out);
        free(xh), free(init), free(ref);
    }
    if (sd_cuda_set_mma(B->gpu, 0)) die("matmul", "not a CUDA backend");
}

static void bench_qkv(Bench *B, const Shape *m, uint32_t type) {
    const int kv = m->n_kv * m->hd, pos = 1000;
    Wset wq, wk, wv;
    wset_make(B, &wq, type, m->dim, m->dim);
    wset_make(B, &wk, type, kv, m->dim);
    wset_make(B, &wv, type, kv, m->dim);
    const int nc = wq.ncopies < wk.ncopies ? wq.ncopies : wk.ncopies;
    const double wbytes = (double)wq.host.row_bytes * (m->dim + 2 * kv);
    for (int t = 0; t < 2; t++) {
        const int n = NS[t];
        QkvOp o;
        o.wq = &wq, o.wk = &wk, o.wv = &wv;
        o.s = sd_attn_shape{m->n_head, m->n_kv, m->hd, m->hd, 500000.0f};
        o.n = n, o.pos = pos;
        float *xh = hrand((size_t)n * m->dim, 1.0f);
        float *qr = (float *)xmalloc((size_t)n * (m->dim + 2 * kv) * sizeof(float));
        float *kr = qr + (size_t)n * m->dim, *vr = kr + (size_t)n * kv;
        sd_err e;
        if (B->cpu->qkv_rope(B->cpu, &o.s, qr, kr, vr, &wq.host, &wk.host, &wv.host, xh, n, pos, &e))
            die("cpu qkv_rope", e.msg);
        o.x = dev_from(B, xh, (size_t)n * m->dim);
        o.q = dev_rand(B, (size_t)n * (m->dim + 2 * kv), 1.0f);
        o.k = o.q + (size_t)n * m->dim;
        o.v = o.k + (size_t)n * kv;
        int graphed;
        const double us = time_op(B, qkv_fn, &o, nc, reps_for((size_t)wbytes), &graphed);
        if (qkv_fn(B, &o, 0, &e)) die("qkv_rope check", e.msg);
        const double err = err_vs(B, o.q, qr, (size_t)n * (m->dim + 2 * kv));
        char shape[48];
        snprintf(shape, sizeof shape, "%d+2x%d x%d", m->dim, kv, m->dim);
        row(B, "qkv_rope", m->name, sd_wtype_name(type), n, shape, us,
            wbytes + 4.0 * n * m->dim + 4.0 * n * (m->dim + 2 * kv), err, graphed);
        B->gpu->release(B->gpu, o.x);
        B->gpu->release(B->gpu, o.q);
        free(xh), free(qr);
    }
    wset_free(B, &wq), wset_free(B, &wk), wset_free(B, &wv);
}

static void bench_ffn(Bench *B, const Shape *m, uint32_t type) {
    Wset w1, w3;
    wset_make(B, &w1, type, m->ffn, m->dim);
    wset_make(B, &w3, type, m->ffn, m->dim);
    const double wbytes = 2.0 * w1.host.row_bytes * m->ffn;
    for (int t = 0; t < 2; t++) {
        const int n = NS[t];
        float *xh = hrand((size_t)n * m->dim, 1.0f);
        float *ref = (float *)xmalloc((size_t)2 * n * m->ffn * sizeof *ref);
        sd_err e;
        if (B->cpu->ffn_swiglu(B->cpu, ref, ref + (size_t)n * m->ffn, &w1.host, &w3.host, xh, n, &e))
            die("cpu ffn", e.msg);
        FfnOp o = {&w1, &w3, dev_from(B, xh, (size_t)n * m->dim), NULL, NULL, n};
        o.h = dev_rand(B, (size_t)2 * n * m->ffn, 1.0f);
        o.tmp = o.h + (size_t)n * m->ffn;
        int graphed;
        const double us = time_op(B, ffn_fn, &o, w1.ncopies, reps_for((size_t)wbytes), &graphed);
        if (ffn_fn(B, &o, 0, &e)) die("ffn check", e.msg);
        const double err = err_vs(B, o.h, ref, (size_t)n * m->ffn);
        char shape[48];
        snprintf(shape, sizeof shape, "2x%dx%d", m->ffn, m->dim);
        row(B, "ffn_swiglu", m->name, sd_wtype_name(type), n, shape, us,
            wbytes + 4.0 * n * m->dim + 4.0 * n * m->ffn, err, graphed);
        B->gpu->release(B->gpu, o.x);
        B->gpu->release(B->gpu, o.h);
        free(xh), free(ref);
    }
    wset_free(B, &w1), wset_free(B, &w3);
}

static void bench_embed(Bench *B, const Shape *m, Wset *w) {
    const int32_t ids[1] = {(int32_t)(m->vocab / 3)};
    float *ref = (float *)xmalloc((size_t)m->dim * sizeof *ref);
    sd_err e;
    if (B->cpu->embed(B->cpu, ref, &w->host, ids, 1, &e)) die("cpu embed", e.msg);
    EmbOp o = {w, dev_rand(B, (size_t)m->dim, 1.0f), ids, 1};
    int graphed;
    const double us = time_op(B, emb_fn, &o, w->ncopies, MIN_REPS, &graphed);
    if (emb_fn(B, &o, 0, &e)) die("embed check", e.msg);
    const double err = err_vs(B, o.x, ref, (size_t)m->dim);
    char shape[48];
    snprintf(shape, sizeof shape, "row of %dx%d", m->vocab, m->dim);
    row(B, "embed", m->name, sd_wtype_name(w->host.type), 1, shape, us,
        (double)w->host.row_bytes + 4.0 * m->dim, err, graphed);
    B->gpu->release(B->gpu, o.x);
    free(ref);
}

static void bench_down(Bench *B, const Shape *m, uint32_t type) {
    Wset wd;
    wset_make(B, &wd, type, m->dim, m->ffn);
    bench_matmul(B, m, "matmul down", &wd, 1);
    wset_free(B, &wd);
}

static void bench_type(Bench *B, const Shape *m, uint32_t type) {
    bench_qkv(B, m, type);
    Wset wo;
    wset_make(B, &wo, type, m->dim, m->dim);
    bench_matmul(B, m, "matmul wo", &wo, 1);
    wset_free(B, &wo);
    bench_ffn(B, m, type);
    bench_down(B, m, type);
    Wset head;
    wset_make(B, &head, type, m->vocab, m->dim);
    bench_matmul(B, m, "matmul head", &head, 0);
    bench_embed(B, m, &head);
    wset_free(B, &head);
}

static void bench_norm(Bench *B, const Shape *m) {
    float *wh = hrand((size_t)m->dim, 0.2f);
    for (int i = 0; i < m->dim; i++) wh[i] += 1.0f;
    sd_weight wc = {SD_F32, 1, m->dim, (size_t)m->dim * 4, wh}, wg = wc;
    sd_err e;
    if (B->gpu->upload_weight(B->gpu, &wg, &e)) die("upload", e.msg);
    for (int t = 0; t < 2; t++) {
        const int n = NS[t];
        float *xh = hrand((size_t)n * m->dim, 2.0f), *ref = (float *)xmalloc((size_t)n * m->dim * 4);
        if (B->cpu->rmsnorm(B->cpu, ref, xh, &wc, n, m->dim, 1e-5f, &e)) die("cpu rmsnorm", e.msg);
        NormOp o = {&wg, dev_from(B, xh, (size_t)n * m->dim), NULL, n, m->dim};
        o.out = dev_rand(B, (size_t)n * m->dim, 1.0f);
        int graphed;
        const double us = time_op(B, norm_fn, &o, 1, MIN_REPS, &graphed);
        const double err = err_vs(B, o.out, ref, (size_t)n * m->dim);
        char shape[48];
        snprintf(shape, sizeof shape, "%d", m->dim);
        row(B, "rmsnorm", m->name, "F32", n, shape, us, 8.0 * n * m->dim + 4.0 * m->dim, err, graphed);
        B->gpu->release(B->gpu, o.x);
        B->gpu->release(B->gpu, o.out);
        free(xh), free(ref);
    }
    B->gpu->release_weight(B->gpu, &wg);
    free(wh);
}

static void bench_attention(Bench *B, const Shape *m) {
    static const int poss[2] = {1000, 4000};
    const int qd = m->n_head * m->hd, kv = m->n_kv * m->hd;
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < 2; t++) {
            const int n = NS[t], pos = poss[p], len = pos + n;
            const size_t kvn = (size_t)len * kv;
            AttnOp o;
            o.s = sd_attn_shape{m->n_head, m->n_kv, m->hd, m->hd, 500000.0f};
            o.n = n, o.pos = pos;
            float *qh = hrand((size_t)n * qd, 1.0f), *kh = hrand(kvn, 1.0f), *vh = hrand(kvn, 1.0f);
            float *ref = (float *)xmalloc((size_t)n * qd * sizeof *ref);
            sd_err e;
            if (B->cpu->attention(B->cpu, &o.s, ref, qh, kh, vh, n, pos, &e)) die("cpu attention", e.msg);
            const int nc = copies_for(2 * kvn * 4);
            o.kc = (float **)xmalloc(sizeof(float *) * (size_t)nc);
            o.vc = (float **)xmalloc(sizeof(float *) * (size_t)nc);
            for (int k = 0; k < nc; k++) {
                o.kc[k] = k ? (float *)B->gpu->alloc(B->gpu, kvn * 4, &e) : dev_from(B, kh, kvn);
                o.vc[k] = k ? (float *)B->gpu->alloc(B->gpu, kvn * 4, &e) : dev_from(B, vh, kvn);
                if (!o.kc[k] || !o.vc[k]) die("kv copies", e.msg);
                if (k && (B->gpu->copy(B->gpu, o.kc[k], o.kc[0], kvn * 4, &e) ||
                          B->gpu->copy(B->gpu, o.vc[k], o.vc[0], kvn * 4, &e)))
                    die("kv copies", e.msg);
            }
            o.q = dev_from(B, qh, (size_t)n * qd);
            o.out = dev_rand(B, (size_t)n * qd, 1.0f);
            int graphed;
            const double us = time_op(B, attn_fn, &o, nc, reps_for(2 * kvn * 4), &graphed);
            if (attn_fn(B, &o, 0, &e)) die("attention check", e.msg);
            const double err = err_vs(B, o.out, ref, (size_t)n * qd);
            char shape[48];
            snprintf(shape, sizeof shape, "%d/%dx%d pos %d", m->n_head, m->n_kv, m->hd, pos);
            row(B, "attention", m->name, "F32", n, shape, us, 8.0 * kvn + 8.0 * n * qd, err, graphed);
            for (int k = 0; k < nc; k++) B->gpu->release(B->gpu, o.kc[k]), B->gpu->release(B->gpu, o.vc[k]);
            B->gpu->release(B->gpu, o.q);
            B->gpu->release(B->gpu, o.out);
            free(o.kc), free(o.vc), free(qh), free(kh), free(vh), free(ref);
        }
}

/* Top-k ids of logits rows: greedy decoding (1 row, k 1), verifying 4
 * drafts (5 rows, k 1), NASD with 8 fillers (5 rows, k 8), and a greedy
 * draft with --draft-p-min (1 row, k 1 and its probability). The timed part
 * is the kernels; the check runs the op (results copied back) against the
 * CPU's: err is 1 when an id differs, else the largest relative difference
 * of a probability. */
static void bench_top_k(Bench *B, const Shape *m) {
    static const int cfg[4][3] = {{1, 1, 0}, {5, 1, 0}, {5, 8, 0}, {1, 1, 1}};
    for (int ci = 0; ci < 4; ci++) {
        const int rows = cfg[ci][0], k = cfg[ci][1], with_p = cfg[ci][2];
        const size_t n = (size_t)rows * m->vocab;
        float *xh = hrand(n, 10.0f);
        const int nc = copies_for(n * 4);
        TopKOp o;
        o.rows = rows;
        o.cols = m->vocab;
        o.k = k;
        o.x = (float **)xmalloc(sizeof(float *) * (size_t)nc);
        for (int c = 0; c < nc; c++) o.x[c] = dev_from(B, xh, n);
        sd_err e;
        void *out = B->gpu->alloc(B->gpu, (size_t)rows * k * (sizeof(int32_t) + sizeof(float)), &e);
        if (!out) die("top_k_rows", e.msg);
        o.out = (int32_t *)out;
        o.probs = with_p ? (float *)(o.out + rows * k) : NULL;
        int graphed;
        const double us = time_op(B, top_k_fn, &o, nc, reps_for(n * 4), &graphed);
        int32_t got[5 * 8], ref[5 * 8];
        float pg[5 * 8], pr[5 * 8];
        if (B->gpu->top_k_rows(B->gpu, o.x[0], rows, m->vocab, k, got, with_p ? pg : NULL, &e) ||
            B->cpu->top_k_rows(B->cpu, xh, rows, m->vocab, k, ref, with_p ? pr : NULL, &e))
            die("top_k_rows check", e.msg);
        double err = memcmp(got, ref, (size_t)rows * k * sizeof *got) ? 1.0 : 0.0;
        for (int i = 0; with_p && err < 1 && i < rows * k; i++)
            err = fmax(err, fabs((double)pg[i] - pr[i]) / pr[i]);
        char shape[48];
        snprintf(shape, sizeof shape, "%dx%d k%d%s", rows, m->vocab, k, with_p ? " p" : "");
        row(B, "top_k_rows", m->name, "F32", rows, shape, us, 4.0 * (double)n, err, graphed);
        for (int c = 0; c < nc; c++) B->gpu->release(B->gpu, o.x[c]);
        B->gpu->release(B->gpu, out);
        free(o.x), free(xh);
    }
}

/* Device-to-device copy of 1 GiB, bytes read plus written, median of 10. */
static double copy_bandwidth(Bench *B) {
    const size_t n = (size_t)1 << 30;
    void *a, *b;
    ck(cudaMalloc(&a, n), "copy bandwidth");
    ck(cudaMalloc(&b, n), "copy bandwidth");
    ck(cudaMemsetAsync(a, 1, n, B->st), "copy bandwidth");
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event");
    ck(cudaEventCreate(&e1), "event");
    float ms[10];
    for (int r = -2; r < 10; r++) {
        ck(cudaEventRecord(e0, B->st), "event");
        ck(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, B->st), "copy bandwidth");
        ck(cudaEventRecord(e1, B->st), "event");
        ck(cudaEventSynchronize(e1), "event");
        if (r >= 0) ck(cudaEventElapsedTime(&ms[r], e0, e1), "elapsed");
    }
    qsort(ms, 10, sizeof *ms, cmp_float);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaFree(a), cudaFree(b);
    return 2.0 * (double)n / (ms[5] * 1e6);
}

int main(int argc, char **argv) {
    char why[256];
    if (!sd_cuda_available(why, sizeof why)) {
        printf("bench_kernels_cuda: skipped: %s\n", why);
        return 0;
    }
    Bench B;
    sd_err e;
    B.gpu = sd_backend_cuda(0, NULL, &e);
    if (!B.gpu) die("cuda backend", e.msg);
    B.cpu = sd_backend_cpu(0, NULL, &e);
    if (!B.cpu) die("cpu backend", e.msg);
    B.st = sd_cuda_stream(B.gpu);
    /* each row times its op's own launches: a norm left pending would run
     * inside the op timed after it */
    if (sd_cuda_set_fuse_norm(B.gpu, 0)) die("cuda backend", "cannot switch folded norms off");
    char path[1024] = "";
    if (argc > 1)
        snprintf(path, sizeof path, "%s", argv[1]);
    else if (getenv("OUT"))
        snprintf(path, sizeof path, "%s/bench_kernels_cuda.csv", getenv("OUT"));
    B.csv = path[0] ? fopen(path, "w") : NULL;
    if (path[0] && !B.csv) die(path, "cannot write");
    B.copy_gbs = copy_bandwidth(&B);
    printf("%s\ndevice-to-device copy: %.0f GB/s (read + write)\n", why, B.copy_gbs);
    printf("%-12s %-13s %-5s %3s %-22s %9s %10s %8s %6s %9s %s\n", "kernel", "model", "type", "n",
           "shape", "us", "MB", "GB/s", "%copy", "max_err", "timing");
    if (B.csv)
        fprintf(B.csv, "kernel,model,type,n,shape,us,bytes,gbps,pct_copy,max_rel_err,timing\n");
    static const Shape models[3] = {
        {"SmolLM2-135M", 576, 9, 3, 64, 1536, 49152},
        {"Llama-3.2-1B", 2048, 32, 8, 64, 8192, 128256},
        {"Llama-3.2-3B", 3072, 24, 8, 128, 8192, 128256},
    };
    static const uint32_t types[3] = {SD_BF16, SD_Q8_0, SD_Q4_1};
    for (int mi = 0; mi < 3; mi++) {
        for (int t = 0; t < 3; t++) bench_type(&B, &models[mi], types[t]);
        bench_norm(&B, &models[mi]);
        bench_attention(&B, &models[mi]);
        bench_top_k(&B, &models[mi]);
    }
    static const Shape qwen15 = {"Qwen2.5-1.5B", 1536, 12, 2, 128, 8960, 151936},
                       qwen05 = {"Qwen2.5-0.5B", 896, 14, 2, 64, 4864, 151936};
    static const uint32_t qtypes[3] = {SD_Q4_K, SD_Q6_K, SD_Q5_0};
    for (int t = 0; t < 3; t++) bench_type(&B, &qwen15, qtypes[t]);
    bench_type(&B, &qwen05, SD_Q5_0);
    bench_down(&B, &qwen05, SD_Q4_K);
    bench_down(&B, &qwen05, SD_Q6_K);
    if (B.csv) {
        fclose(B.csv);
        printf("wrote %s\n", path);
    }
    B.cpu->destroy(B.cpu);
    B.gpu->destroy(B.gpu);
    return 0;
}
