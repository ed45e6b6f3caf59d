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

template <int PER>
__global__ void __launch_bounds__(RN_THREADS) rmsnorm_kernel(const RnArgs a) {
    cu_grid_trigger();
    rn_row<PER>(a, blockIdx.x, true);
}

template <int PER>
static void rn_launch(const sd_cuda *c, int n, const RnArgs &a) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, (unsigned)n, RN_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, rmsnorm_kernel<PER>, a);
}

/* Launches the norm; its quantised rows are tagged as made by op seq. A
 * persistent step's norm (step.cu) takes rn_row<0>: the same order of sums
 * and products, without the registers. */
static int rn_run(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim,
                  float eps, long seq, sd_err *e) {
    RnArgs a;
    a.out = out;
    a.x = x;
    a.w = w;
    a.dim = dim;
    a.eps = eps;
    a.q = NULL;
    a.d = a.s = NULL;
    if (dim % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QACT, n, dim, &a.q, &a.d, &a.s, e)) return -1;
    const int per = (dim + RN_THREADS - 1) / RN_THREADS;
    if (c->step) {
        cu_spans sp = {};
        const size_t bytes = (size_t)n * (size_t)dim * sizeof(float);
        cu_span_add(&sp, x, bytes, 0);
        cu_span_add(&sp, out, bytes, 1);
        if (a.q) cu_qact_spans(a.q, a.d, a.s, n, dim, &sp);
        if (cu_step_add(c, CU_STEP_NORM, 0, &a, sizeof a, (unsigned)n, 0, &sp, e)) return -1;
    } else if (per <= 1) rn_launch<1>(c, n, a);
    else if (per <= 2) rn_launch<2>(c, n, a);
    else if (per <= 4) rn_launch<4>(c, n, a);
    else if (per <= 8) rn_launch<8>(c, n, a);
    else if (per <= 16) rn_launch<16>(c, n, a);
    else if (per <= RN_MAX_PER) rn_launch<RN_MAX_PER>(c, n, a);
    else rn_launch<0>(c, n, a);
    if (cu_check_launch(c, e, "rmsnorm %dx%d", n, dim)) return -1;
    if (a.q) {
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
