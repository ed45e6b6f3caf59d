/* h = silu(W1 x) * (W3 x) in one launch: a warp's two row slots are row r of
 * the gate matrix W1 and row r of the up matrix W3, so the gate and up values
 * of one hidden unit meet in registers and only h is written. When W1 and W3
 * differ in type, two plain launches fill h and tmp and an elementwise
 * kernel combines them. The down projection is matmul with accumulate
 * (matvec.cu).
 *
 * With quantised weights and a hidden size that is a multiple of 32 the
 * launch also quantises h for the down projection (qact.cu, slot QOUT):
 * the 32 units of a quantisation block are spread over 32 / (units per
 * block) blocks, so each block counts itself in c->ffn_ctr once its h
 * values are visible (__threadfence, then one atomicAdd), and the last
 * block of a (tile, group of 32 units) quantises the group's rows of the
 * tile from L2, one warp a row, and sets the counter back to 0.
 *
 * With SD_CUDA_MMA and a quantised type, BF16 or F16 the same launch runs
 * on tensor cores (mv_mma.cuh): a warp owns 8 hidden units, gate and up
 * rows in its two row slots. */
#include "kernels/cuda/ffn.cuh"

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) ffn_swiglu_kernel(const FfnArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x)
        ffn_vblock<T, NT>(p, b, b == blockIdx.x, blockIdx.x < (unsigned)p.ntiles);
}

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) mq_ffn_kernel(const FfnArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x)
        mq_ffn_vblock<T, NT>(p, b, b == blockIdx.x, blockIdx.x < (unsigned)p.ntiles);
}

struct MqFfnLaunch {
    typedef FfnArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const FfnArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, mq_ffn_kernel<T, NT>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, mq_ffn_kernel<T, NT>, a);
    }
};

struct FfnLaunch {
    typedef FfnArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const FfnArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, ffn_swiglu_kernel<T, NT>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, ffn_swiglu_kernel<T, NT>, a);
    }
};

enum { SW_THREADS = 256 };

__global__ void __launch_bounds__(SW_THREADS) swiglu_kernel(const SwigluArgs a) {
    swiglu_vblock(a.h, a.up, a.count, blockIdx.x, gridDim.x, SW_THREADS);
}

int cu_ffn_fuses_qact(const sd_weight *w1, const sd_weight *w3) {
    return w1->type == w3->type && cu_is_quant(w1->type) && w1->rows % 32 == 0;
}

int cu_ffn_swiglu(sd_cuda *c, float *h, float *tmp, const sd_weight *w1, const sd_weight *w3,
                  const float *x, int n, sd_err *e) {
    if (n <= 0) return 0;
    if (cu_check_weight(w1, "ffn_swiglu", e) || cu_check_weight(w3, "ffn_swiglu", e)) return -1;
    if (w1->rows != w3->rows || w1->cols != w3->cols)
        return sd_fail(e, "cuda: ffn_swiglu: gate %lldx%lld and up %lldx%lld differ",
                       (long long)w1->rows, (long long)w1->cols, (long long)w3->rows,
                       (long long)w3->cols);
    MvAct A;
    if (mv_act(c, &A, x, n, w1->cols, cu_is_quant(w1->type) || cu_is_quant(w3->type),
               mv_float((int)w1->type) || mv_float((int)w3->type), h,
               (size_t)n * (size_t)w1->rows * sizeof(float), e))
        return -1;
    if (w1->type != w3->type) {
        if (cu_mm_plain(c, h, w1, &A, 0, e) || cu_mm_plain(c, tmp, w3, &A, 0, e)) return -1;
        SwigluArgs sw;
        sw.h = h;
        sw.up = tmp;
        sw.count = (size_t)n * (size_t)w1->rows;
        const size_t want = (sw.count + SW_THREADS - 1) / SW_THREADS;
        sw.blocks = (unsigned)(want < 4096 ? want : 4096);
        if (c->step) {
            cu_spans sp = {};
            cu_span_add(&sp, h, sw.count * sizeof(float), 1);
            cu_span_add(&sp, tmp, sw.count * sizeof(float), 0);
            return cu_step_add(c, CU_STEP_SWIGLU, 0, &sw, sizeof sw, sw.blocks, 0, &sp, e);
        }
        swiglu_kernel<<<sw.blocks, SW_THREADS, 0, c->stream>>>(sw);
        return cu_check_launch(c, e, "ffn_swiglu elementwise %zu", sw.count);
    }
    MvPlan pl;
    const int mq = mq_on(c, w1->type, A);
    if (mq ? mq_plan(A, w1->type, (w1->rows + MQ_UNITS - 1) / MQ_UNITS, w1->cols, c->sms, c->fuse_norm,
                     &pl, e, "ffn_swiglu")
           : mv_plan(A, w1->rows, w1->cols / mv_chunk_elems((int)w1->type), c->sms, c->fuse_norm,
                     mv_float((int)w1->type), &pl, e, "ffn_swiglu"))
        return -1;
    FfnArgs p;
    p.a = A;
    p.w1 = mv_mat(w1);
    p.w3 = mv_mat(w3);
    p.h = h;
    p.ntiles = pl.ntiles;
    p.ks = pl.ks;
    p.blocks = pl.blocks;
    p.hq = NULL;
    p.hd = p.hs = NULL;
    p.ctr = c->ffn_ctr;
    if (cu_ffn_fuses_qact(w1, w3) && (int64_t)pl.ntiles * (w1->rows / 32) <= CU_FFN_COUNTERS &&
        cu_qact_buffers(c, CU_SCRATCH_QOUT, n, w1->rows, &p.hq, &p.hd, &p.hs, e))
        return -1;
    if (c->step) {
        cu_spans sp = {};
        mv_act_spans(A, &sp);
        cu_span_add(&sp, h, (size_t)n * (size_t)w1->rows * sizeof(float), 1);
        if (p.hq) {
            cu_qact_spans(p.hq, p.hd, p.hs, n, w1->rows, &sp);
            cu_span_add(&sp, p.ctr, (size_t)pl.ntiles * (size_t)(w1->rows / 32) * sizeof(unsigned), 1);
        }
        if (cu_step_add(c, CU_STEP_FFN,
                        mq ? mq_step_variant(w1->type, pl.nt) : mv_step_variant(w1->type, pl.nt),
                        &p, sizeof p, pl.blocks, pl.smem, &sp, e))
            return -1;
    } else if (mq) {
        mq_launch<MqFfnLaunch>(w1->type, pl, c, p);
    } else {
        mv_launch<FfnLaunch>(w1->type, pl, c, p);
    }
    if (cu_check_launch(c, e, "ffn_swiglu %s %lldx%lld", sd_wtype_name(w1->type),
                        (long long)w1->rows, (long long)w1->cols))
        return -1;
    if (p.hq) cu_qtag_set(c, h, n, w1->rows, CU_SCRATCH_QOUT);
    return 0;
}
