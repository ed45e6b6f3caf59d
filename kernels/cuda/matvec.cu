/* out[n][rows] (+)= x[n][cols] . W^T for every weight type: the plain
 * projection (LM head) and, with accumulate, the output and down
 * projections with the residual add folded in (out is the residual stream;
 * each output element is read and written by one lane). The core loop is in
 * mv.cuh, or for quantised, BF16 and F16 weights with SD_CUDA_MMA in
 * mv_mma.cuh. */
#include "kernels/cuda/matvec.cuh"

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) mm_plain_kernel(const MmArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x)
        mm_vblock<T, NT>(p, b, b == blockIdx.x, blockIdx.x < (unsigned)p.ntiles);
}

struct MmLaunch {
    typedef MmArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const MmArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, mm_plain_kernel<T, NT>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, mm_plain_kernel<T, NT>, a);
    }
};

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) mq_plain_kernel(const MmArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x)
        mq_mm_vblock<T, NT>(p, b, b == blockIdx.x, blockIdx.x < (unsigned)p.ntiles);
}

struct MqLaunch {
    typedef MmArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const MmArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, mq_plain_kernel<T, NT>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, mq_plain_kernel<T, NT>, a);
    }
};

int cu_mm_plain(sd_cuda *c, float *out, const sd_weight *w, const MvAct *A, int accumulate,
                sd_err *e) {
    MvPlan pl;
    const int mq = mq_on(c, w->type, *A);
    if (mq ? mq_plan(*A, w->type, (w->rows + MQ_ROWS - 1) / MQ_ROWS, w->cols, c->sms, c->fuse_norm, &pl, e, "matmul")
           : mv_plan(*A, (w->rows + 1) / 2, w->cols / mv_chunk_elems((int)w->type), c->sms,
                     c->fuse_norm, mv_float((int)w->type), &pl, e, "matmul"))
        return -1;
    MmArgs p;
    p.a = *A;
    p.w = mv_mat(w);
    p.out = out;
    p.accumulate = accumulate;
    p.ntiles = pl.ntiles;
    p.ks = pl.ks;
    p.blocks = pl.blocks;
    if (c->step) {
        cu_spans sp = {};
        mv_act_spans(*A, &sp);
        cu_span_add(&sp, out, (size_t)A->n * (size_t)w->rows * sizeof(float), 1);
        return cu_step_add(c, CU_STEP_MM,
                           mq ? mq_step_variant(w->type, pl.nt) : mv_step_variant(w->type, pl.nt),
                           &p, sizeof p, pl.blocks, pl.smem, &sp, e);
    }
    if (mq)
        mq_launch<MqLaunch>(w->type, pl, c, p);
    else
        mv_launch<MmLaunch>(w->type, pl, c, p);
    return cu_check_launch(c, e, "matmul %s %lldx%lld", sd_wtype_name(w->type),
                           (long long)w->rows, (long long)w->cols);
}

int cu_matmul(sd_cuda *c, float *out, const sd_weight *w, const float *x, int n, int accumulate,
              sd_err *e) {
    if (n <= 0) return 0;
    if (cu_check_weight(w, "matmul", e)) return -1;
    MvAct A;
    if (mv_act(c, &A, x, n, w->cols, cu_is_quant(w->type), mv_float((int)w->type), out,
               (size_t)n * (size_t)w->rows * sizeof(float), e))
        return -1;
    return cu_mm_plain(c, out, w, &A, accumulate, e);
}
