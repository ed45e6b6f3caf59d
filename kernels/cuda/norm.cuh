/* RMSNorm's scale, shared by norm.cu (a kernel of its own) and mv.cuh (the
 * norm folded into the product after it, cuda_int.h "pending norm"): both
 * sum in the same order, so a folded norm gives the bits of the launched
 * one, and the CPU's in all but rare rounding ties (the sum and the scale
 * are formed in double, as the CPU forms them).
 *
 * The order: a block of RN_THREADS threads; thread t adds the squares of
 * elements t, t + RN_THREADS, t + 2 RN_THREADS, ... of the row, in that
 * order, into a double; each warp sums its lanes with an xor butterfly
 * (commutative at every level, so every lane ends with the same bits), and
 * every thread then adds the RN_WARPS warp totals in warp order.
 *
 * With dim a multiple of 32, element k = t + j RN_THREADS of warp w is
 * element 32 w + lane of the j-th run of RN_THREADS: the warp holds whole
 * quantisation blocks (qact.cuh), and the test k < dim is warp-uniform. */
#ifndef SD_CUDA_NORM_CUH
#define SD_CUDA_NORM_CUH

#include "kernels/cuda/cuda_int.h"

enum { RN_THREADS = 128, RN_WARPS = RN_THREADS / 32 };

/* 1 / sqrt(ss_total / dim + eps) for this thread's partial ss; every thread
 * of the block calls it (two barriers); red is shared [RN_WARPS]. */
__device__ __forceinline__ float rn_scale(double ss, int dim, float eps, double *red) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    double t = red[0];
#pragma unroll
    for (int w = 1; w < RN_WARPS; w++) t += red[w];
    __syncthreads(); /* red is free for the next row */
    return (float)(1.0 / sqrt(t / dim + (double)eps));
}

#endif
