/* SwiGLU's arguments and one virtual block of it (mv.cuh), shared by
 * ffn.cu's kernels and the persistent step (step.cu). */
#ifndef SD_CUDA_FFN_CUH
#define SD_CUDA_FFN_CUH

#include <math.h>

#include "kernels/cuda/mv.cuh"
#include "kernels/cuda/mv_mma.cuh"
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
 * group's rows i0.. of h; a warp owns per_warp units (1, or MQ_UNITS on
 * tensor cores). Every thread of the block calls it. */
template <int NT>
__device__ __forceinline__ void ffn_quant_group(const FfnArgs &p, unsigned b, int i0, int per_warp) {
    __shared__ int last;
    const int per_block = per_warp * MV_WARPS / p.ks, rows = p.w1.rows;
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

/* Virtual block b of the fused launch; first and writer as mv_accum takes
 * them. Every thread of the block calls it. */
template <int T, int NT, int S = 0>
__device__ __forceinline__ void ffn_vblock(const FfnArgs &p, unsigned b, bool first, bool writer) {
    int i0, r, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, r, slice);
    float acc[2][NT], g, u;
    mv_accum<T, NT>(mv_row<S>(p.w1, r), mv_row<S>(p.w3, r), p.a, i0, slice, p.ks, first, writer, acc);
    mv_reduce<NT>(acc, slice, p.ks, g, u);
    const int lane = threadIdx.x & 31, i = i0 + lane;
    if (slice == 0 && lane < NT && i < p.a.n && r < p.w1.rows)
        p.h[(size_t)i * p.w1.rows + r] = swiglu(g, u);
    if (p.hq) ffn_quant_group<NT>(p, b, i0, 1);
}

/* The same on tensor cores (mv_mma.cuh): a warp takes units 8q + g, gate
 * and up rows in its two slots. */
template <int T, int NT, int S = 0>
__device__ __forceinline__ void mq_ffn_vblock(const FfnArgs &p, unsigned b, bool first, bool writer) {
    int i0, grp, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, grp, slice);
    const int lane = threadIdx.x & 31, t = lane & 3, r = MQ_UNITS * grp + (lane >> 2);
    float acc[2][NT], v[2][(NT + 3) / 4];
    mq_accum<T, NT>(mv_row<S>(p.w1, r), mv_row<S>(p.w3, r), p.a, i0, slice, p.ks, first, writer, acc);
    mq_reduce<NT>(acc, slice, p.ks, v);
    if (slice == 0 && r < p.w1.rows)
#pragma unroll
        for (int k = 0; k < (NT + 3) / 4; k++) {
            const int i = i0 + t + 4 * k;
            if (t + 4 * k >= NT || i >= p.a.n) break;
            p.h[(size_t)i * p.w1.rows + r] = swiglu(v[0][k], v[1][k]);
        }
    if (p.hq) ffn_quant_group<NT>(p, b, i0, MQ_UNITS);
}

/* h = swiglu(h, up) over count elements: the elementwise pass of two
 * launches of different types, `threads` threads a block, block b of
 * `blocks`. */
__device__ __forceinline__ void swiglu_vblock(float *h, const float *up, size_t count, unsigned b,
                                              unsigned blocks, unsigned threads) {
    for (size_t k = (size_t)b * threads + threadIdx.x; k < count; k += (size_t)blocks * threads)
        h[k] = swiglu(cu_ld_act(h + k), cu_ld_act(up + k));
}

struct SwigluArgs {
    float *h;
    const float *up;
    size_t count;
    unsigned blocks;
};

#endif
