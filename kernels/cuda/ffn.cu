/* h = silu(W1 x) * (W3 x) in one launch: a warp's two row slots are row r of
 * the gate matrix W1 and row r of the up matrix W3, so the gate and up values
 * of one hidden unit meet in registers and only h is written. When W1 and W3
 * differ in type, two plain launches fill h and tmp and an elementwise
 * kernel combines them. The down projection is matmul with accumulate
 * (matvec.cu). */
#include <math.h>

#include "kernels/cuda/mv.cuh"

/* silu(g) * u with the CPU's operation order and no fused multiply-adds. */
__device__ __forceinline__ float swiglu(float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

struct FfnArgs {
    MvAct a;
    MvMat w1, w3;
    float *h; /* [n][rows] */
    int ntiles, ks;
};

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) ffn_swiglu_kernel(const FfnArgs p) {
    cu_grid_wait();
    int i0, r, slice;
    mv_place(p.ntiles, p.ks, NT, i0, r, slice);
    float acc[2][NT], g, u;
    mv_accum<T, NT>(mv_row(p.w1, r), mv_row(p.w3, r), p.a, i0, slice, p.ks, acc);
    mv_reduce<NT>(acc, slice, p.ks, g, u);
    const int lane = threadIdx.x & 31, i = i0 + lane;
    if (slice != 0 || lane >= NT || i >= p.a.n || r >= p.w1.rows) return;
    p.h[(size_t)i * p.w1.rows + r] = swiglu(g, u);
}

struct FfnLaunch {
    typedef FfnArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const FfnArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg = cu_launch_cfg(c, pl.blocks, MV_THREADS, 0, &at);
        cudaLaunchKernelEx(&cfg, ffn_swiglu_kernel<T, NT>, a);
    }
};

__global__ void swiglu_kernel(float *h, const float *up, size_t count) {
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (size_t)gridDim.x * blockDim.x)
        h[k] = swiglu(h[k], up[k]);
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
    if (mv_act(c, &A, x, n, w1->cols, cu_is_quant(w1->type) || cu_is_quant(w3->type), e))
        return -1;
    if (w1->type != w3->type) {
        if (cu_mm_plain(c, h, w1, &A, 0, e) || cu_mm_plain(c, tmp, w3, &A, 0, e)) return -1;
        const size_t count = (size_t)n * (size_t)w1->rows;
        const unsigned blocks = (unsigned)((count + 255) / 256 < 4096 ? (count + 255) / 256 : 4096);
        swiglu_kernel<<<blocks, 256, 0, c->stream>>>(h, tmp, count);
        return cu_check_launch(c, e, "ffn_swiglu elementwise %zu", count);
    }
    MvPlan pl;
    if (mv_plan(n, w1->rows, w1->cols / mv_chunk_elems((int)w1->type), c->sms, &pl, e,
                "ffn_swiglu"))
        return -1;
    FfnArgs p;
    p.a = A;
    p.w1 = mv_mat(w1);
    p.w3 = mv_mat(w3);
    p.h = h;
    p.ntiles = pl.ntiles;
    p.ks = pl.ks;
    mv_launch<FfnLaunch>(w1->type, pl, c, p);
    return cu_check_launch(c, e, "ffn_swiglu %s %lldx%lld", sd_wtype_name(w1->type),
                           (long long)w1->rows, (long long)w1->cols);
}
