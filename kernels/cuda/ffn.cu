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
 * tile from L2, one warp a row, and sets the counter back to 0. */
#include <math.h>

#include "kernels/cuda/mv.cuh"
#include "kernels/cuda/qact.cuh"

/* silu(g) * u with the CPU's operation order and no fused multiply-adds. */
__device__ __forceinline__ float swiglu(float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

struct FfnArgs {
    MvAct a;
    MvMat w1, w3;
    float *h; /* [n][rows] */
    int ntiles, ks;
    unsigned blocks; /* virtual blocks (mv.cuh) */
    int8_t *hq;    /* non-NULL: h's int8 blocks too (slot QOUT) */
    float *hd, *hs;
    unsigned *ctr; /* [ntiles][rows / 32] blocks done */
};

/* The last virtual block b of its (tile, group of 32 units) quantises the
 * group's rows i0.. of h. Every thread of the block calls it. */
template <int NT>
__device__ __forceinline__ void ffn_quant_group(const FfnArgs &p, unsigned b, int i0) {
    __shared__ int last;
    const int per_block = MV_WARPS / p.ks, rows = p.w1.rows;
    const int group = (int)(b / p.ntiles) * per_block / 32, tile = b % p.ntiles;
    __threadfence(); /* this block's h, visible before it is counted */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *ctr = p.ctr + (size_t)tile * (rows / 32) + group;
        last = atomicAdd(ctr, 1u) == (unsigned)(32 / per_block - 1);
        if (last) *ctr = 0; /* every block of the group has counted */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int k = warp; k < NT && i0 + k < p.a.n; k += MV_WARPS) {
        const size_t e0 = (size_t)(i0 + k) * rows + (size_t)group * 32;
        qa_block(__ldcg(p.h + e0 + lane), (int64_t)(e0 / 32), p.hq, p.hd, p.hs);
    }
}

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) ffn_swiglu_kernel(const FfnArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        int i0, r, slice;
        mv_place(b, p.ntiles, p.ks, NT, i0, r, slice);
        float acc[2][NT], g, u;
        mv_accum<T, NT>(mv_row(p.w1, r), mv_row(p.w3, r), p.a, i0, slice, p.ks, b == blockIdx.x,
                        blockIdx.x < (unsigned)p.ntiles, acc);
        mv_reduce<NT>(acc, slice, p.ks, g, u);
        const int lane = threadIdx.x & 31, i = i0 + lane;
        if (slice == 0 && lane < NT && i < p.a.n && r < p.w1.rows)
            p.h[(size_t)i * p.w1.rows + r] = swiglu(g, u);
        if (p.hq) ffn_quant_group<NT>(p, b, i0);
    }
}

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

__global__ void swiglu_kernel(float *h, const float *up, size_t count) {
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < count;
         k += (size_t)gridDim.x * blockDim.x)
        h[k] = swiglu(h[k], up[k]);
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
        const size_t count = (size_t)n * (size_t)w1->rows;
        const unsigned blocks = (unsigned)((count + 255) / 256 < 4096 ? (count + 255) / 256 : 4096);
        swiglu_kernel<<<blocks, 256, 0, c->stream>>>(h, tmp, count);
        return cu_check_launch(c, e, "ffn_swiglu elementwise %zu", count);
    }
    MvPlan pl;
    if (mv_plan(A, w1->rows, w1->cols / mv_chunk_elems((int)w1->type), c->sms, c->fuse_norm,
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
    mv_launch<FfnLaunch>(w1->type, pl, c, p);
    if (cu_check_launch(c, e, "ffn_swiglu %s %lldx%lld", sd_wtype_name(w1->type),
                        (long long)w1->rows, (long long)w1->cols))
        return -1;
    if (p.hq) cu_qtag_set(c, h, n, w1->rows, CU_SCRATCH_QOUT);
    return 0;
}
