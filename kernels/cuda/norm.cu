/* RMSNorm, one block per row: out = x * (1 / sqrt(mean(x^2) + eps)) * w.
 * The scale is norm.cuh's (double sum in a fixed order, formed in double as
 * the CPU forms it), so it matches the CPU bit for bit in all but rare
 * rounding ties; out may be x (each element is read and written by the
 * same thread, after the reduction).
 *
 * Thread t holds elements t + j RN_THREADS of the row and of w in registers
 * (PER of each; rows longer than RN_THREADS * RN_MAX_PER take the loop
 * without them). The gain w is a weight, so it is loaded before the
 * kernel's wait (cuda_int.h): under programmatic dependent launch its
 * device-memory latency passes while the kernel before still runs, and x,
 * which that kernel writes, is one load per element from L2 after it.
 *
 * When dim is a multiple of 32 the kernel also quantises the rows it writes
 * for the integer matrix products (qact.cu: the same bits as cu_qact of
 * out, into the same scratch), so the quantised projection that follows
 * needs no launch of its own.
 *
 * Folded norms (cuda_int.h "pending norm"): with c->fuse_norm, cu_rmsnorm
 * launches nothing and leaves the norm pending; the matrix-vector op right
 * after it that reads exactly its output computes the norm in each block
 * (mv.cuh) and writes out itself, and any other op first launches it here
 * (cu_norm_flush). A decode step then has no RMSNorm launch before its
 * attention and FFN products: two launches a layer fewer. */
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/qact.cuh"

enum { RN_MAX_PER = 32 };

/* q, d, s: the quantised rows ([n][dim] int8, [n][dim/32] d and s), or NULL.
 * PER: elements a thread holds, ceil(dim / RN_THREADS) rounded up to a
 * power of two; 0 for rows longer than RN_THREADS * RN_MAX_PER. */
template <int PER>
__global__ void __launch_bounds__(RN_THREADS)
rmsnorm_kernel(float *out, const float *x, const float *w, int dim, float eps, int8_t *q,
               float *d, float *s) {
    __shared__ double red[RN_WARPS];
    cu_grid_trigger();
    constexpr int P = PER > 0 ? PER : 1;
    float wv[P], xv[P];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int k = (int)threadIdx.x + j * RN_THREADS;
        wv[j] = k < dim ? __ldg(w + k) : 0.f;
    }
    cu_grid_wait();
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *o = out + (size_t)blockIdx.x * dim;
    double ss = 0;
    if (PER > 0) {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int k = (int)threadIdx.x + j * RN_THREADS;
            xv[j] = k < dim ? xr[k] : 0.f;
        }
#pragma unroll
        for (int j = 0; j < PER; j++)
            if ((int)threadIdx.x + j * RN_THREADS < dim) ss += (double)xv[j] * xv[j];
    } else {
        for (int k = threadIdx.x; k < dim; k += RN_THREADS) ss += (double)xr[k] * xr[k];
    }
    const float sc = rn_scale(ss, dim, eps, red);
    if (PER > 0) {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int k = (int)threadIdx.x + j * RN_THREADS;
            if (k >= dim) break;
            const float v = xv[j] * sc * wv[j];
            o[k] = v;
            if (q) qa_block(v, ((int64_t)blockIdx.x * dim + k) / 32, q, d, s);
        }
    } else {
        for (int k = threadIdx.x; k < dim; k += RN_THREADS) {
            const float v = xr[k] * sc * w[k];
            o[k] = v;
            if (q) qa_block(v, ((int64_t)blockIdx.x * dim + k) / 32, q, d, s);
        }
    }
}

template <int PER>
static void rn_launch(const sd_cuda *c, int n, float *out, const float *x, const float *w, int dim,
                      float eps, int8_t *q, float *d, float *s) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, (unsigned)n, RN_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, rmsnorm_kernel<PER>, out, x, w, dim, eps, q, d, s);
}

/* Launches the norm; its quantised rows are tagged as made by op seq. */
static int rn_run(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim,
                  float eps, long seq, sd_err *e) {
    int8_t *q = NULL;
    float *d = NULL, *s = NULL;
    if (dim % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QACT, n, dim, &q, &d, &s, e)) return -1;
    const int per = (dim + RN_THREADS - 1) / RN_THREADS;
    if (per <= 1) rn_launch<1>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 2) rn_launch<2>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 4) rn_launch<4>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 8) rn_launch<8>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 16) rn_launch<16>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= RN_MAX_PER) rn_launch<RN_MAX_PER>(c, n, out, x, w, dim, eps, q, d, s);
    else rn_launch<0>(c, n, out, x, w, dim, eps, q, d, s);
    if (cu_check_launch(c, e, "rmsnorm %dx%d", n, dim)) return -1;
    if (q) {
        cu_qtag_set(c, out, n, dim, CU_SCRATCH_QACT);
        c->qtag.seq = seq;
    }
    return 0;
}

int cu_rmsnorm(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim, float eps,
               sd_err *e) {
    if (n <= 0) return 0;
    if (dim <= 0) return sd_fail(e, "cuda: rmsnorm: bad dim %d", dim);
    if (cu_norm_flush(c, e)) return -1;
    if (c->fuse_norm && dim % 32 == 0) {
        cu_norm *p = &c->norm;
        p->out = out, p->x = x, p->w = w, p->n = n, p->dim = dim, p->eps = eps;
        p->seq = c->op_seq;
        return 0;
    }
    return rn_run(c, out, x, w, n, dim, eps, c->op_seq, e);
}

int cu_norm_flush(sd_cuda *c, sd_err *e) {
    cu_norm *p = &c->norm;
    if (!p->out) return 0;
    float *out = p->out;
    p->out = NULL;
    return rn_run(c, out, p->x, p->w, p->n, p->dim, p->eps, p->seq, e);
}
