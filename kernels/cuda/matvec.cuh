/* The matrix-vector product's arguments and one virtual block of it, on
 * the __dp4a tiles (mv.cuh) or on tensor cores (mv_mma.cuh), shared by
 * matvec.cu's kernels and the persistent step (step.cu). */
#ifndef SD_CUDA_MATVEC_CUH
#define SD_CUDA_MATVEC_CUH

#include "kernels/cuda/mv.cuh"
#include "kernels/cuda/mv_mma.cuh"

struct MmArgs {
    MvAct a;
    MvMat w;
    float *out; /* [n][rows] */
    int accumulate;
    int ntiles, ks;
    unsigned blocks; /* virtual blocks (mv.cuh) */
};

/* Virtual block b; first and writer as mv_accum takes them. Every thread of
 * the block calls it. */
template <int T, int NT, int S = 0>
__device__ __forceinline__ void mm_vblock(const MmArgs &p, unsigned b, bool first, bool writer) {
    int i0, pair, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, pair, slice);
    const int r0 = 2 * pair, r1 = r0 + 1;
    float acc[2][NT], v0, v1;
    mv_accum<T, NT>(mv_row<S>(p.w, r0), mv_row<S>(p.w, r1), p.a, i0, slice, p.ks, first, writer, acc);
    mv_reduce<NT>(acc, slice, p.ks, v0, v1);
    const int lane = threadIdx.x & 31, i = i0 + lane;
    if (slice != 0 || lane >= NT || i >= p.a.n) return;
    float *o = p.out + (size_t)i * p.w.rows;
    if (r0 < p.w.rows) o[r0] = p.accumulate ? o[r0] + v0 : v0;
    if (r1 < p.w.rows) o[r1] = p.accumulate ? o[r1] + v1 : v1;
}

/* The same on tensor cores: virtual block b's warps each take a row group
 * (mv_mma.cuh; rows 16q + g and 16q + g + 8 in lane group g, activation
 * rows i0 + t + 4k in lane t). */
template <int T, int NT, int S = 0>
__device__ __forceinline__ void mq_mm_vblock(const MmArgs &p, unsigned b, bool first, bool writer) {
    int i0, grp, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, grp, slice);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int r0 = MQ_ROWS * grp + g, r1 = r0 + 8;
    float acc[2][NT], v[2][(NT + 3) / 4];
    mq_accum<T, NT>(mv_row<S>(p.w, r0), mv_row<S>(p.w, r1), p.a, i0, slice, p.ks, first, writer, acc);
    mq_reduce<NT>(acc, slice, p.ks, v);
    if (slice != 0) return;
#pragma unroll
    for (int k = 0; k < (NT + 3) / 4; k++) {
        const int i = i0 + t + 4 * k;
        if (t + 4 * k >= NT || i >= p.a.n) break;
        float *o = p.out + (size_t)i * p.w.rows;
        if (r0 < p.w.rows) o[r0] = p.accumulate ? o[r0] + v[0][k] : v[0][k];
        if (r1 < p.w.rows) o[r1] = p.accumulate ? o[r1] + v[1][k] : v[1][k];
    }
}

#endif
