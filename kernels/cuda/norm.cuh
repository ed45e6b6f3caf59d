/* RMSNorm's device code. Its scale is shared by norm.cu (a kernel of its
 * own, whose row is rn_row, also the persistent step's, step.cu) and mv.cuh
 * (the norm folded into the product after it, cuda_int.h "pending norm"): both
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
#include "kernels/cuda/qact.cuh"

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

enum { RN_MAX_PER = 32 };

struct RnArgs {
    float *out;
    const float *x, *w;
    int dim;
    float eps;
    int8_t *q;
    float *d, *s;
};

/* Row `row` (wait: the kernel's wait, cuda_int.h; the persistent step has
 * none). q, d, s: the quantised rows ([n][dim] int8, [n][dim/32] d and s), or NULL.
 * PER: elements a thread holds, ceil(dim / RN_THREADS) rounded up to a
 * power of two; 0 for rows longer than RN_THREADS * RN_MAX_PER. */
template <int PER>
__device__ __forceinline__ void rn_row(const RnArgs &a, unsigned row, bool wait) {
    __shared__ double red[RN_WARPS];
    const float *w = a.w;
    const int dim = a.dim;
    constexpr int P = PER > 0 ? PER : 1;
    float wv[P], xv[P];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int k = (int)threadIdx.x + j * RN_THREADS;
        wv[j] = k < dim ? __ldg(w + k) : 0.f;
    }
    if (wait) cu_grid_wait();
    const float *xr = a.x + (size_t)row * dim;
    float *o = a.out + (size_t)row * dim;
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
    const float sc = rn_scale(ss, dim, a.eps, red);
    if (PER > 0) {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int k = (int)threadIdx.x + j * RN_THREADS;
            if (k >= dim) break;
            const float v = xv[j] * sc * wv[j];
            o[k] = v;
            if (a.q) qa_block(v, ((int64_t)row * dim + k) / 32, a.q, a.d, a.s);
        }
    } else {
        for (int k = threadIdx.x; k < dim; k += RN_THREADS) {
            const float v = xr[k] * sc * w[k];
            o[k] = v;
            if (a.q) qa_block(v, ((int64_t)row * dim + k) / 32, a.q, a.d, a.s);
        }
    }
}

#endif
