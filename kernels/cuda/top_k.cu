/* Top-k ids of each row on the device: one block of 1024 threads per row,
 * k passes over the row. Pass j picks the best element strictly after pick
 * j-1 in the order (value desc, index asc): each thread scans a strided
 * subset keeping its best candidate, a CUB block reduction picks the best
 * of those, thread 0 writes it out and to shared memory for the next pass.
 * That order is the engine's host top-k (kernels/cpu sd_cpu_top_k): the
 * lowest index first among equal values, so k = 1 is the first maximum.
 * -inf values are ordinary values (a row of -inf gives 0, 1, ..., k-1);
 * NaN compares false both ways and is never picked.
 *
 * Cost: k reads of the row (a 128K-entry row is 512 KB, in L2 after the
 * first pass); the ids that cross to the host are n_rows*k ints instead of
 * the rows. */
#include <cub/block/block_reduce.cuh>
#include <limits.h>
#include <math.h>

#include "kernels/cuda/cuda_int.h"

enum { TK_THREADS = 1024 };

struct TkPair {
    float v;
    int i; /* INT_MAX: no candidate */
};

/* a comes before b in (value desc, index asc); no candidate comes last */
__device__ __forceinline__ bool tk_before(const TkPair &a, const TkPair &b) {
    if (b.i == INT_MAX) return a.i != INT_MAX;
    if (a.i == INT_MAX) return false;
    return a.v > b.v || (a.v == b.v && a.i < b.i);
}

struct TkBest {
    __device__ __forceinline__ TkPair operator()(const TkPair &a, const TkPair &b) const {
        return tk_before(b, a) ? b : a;
    }
};

__global__ void __launch_bounds__(TK_THREADS)
    top_k_kernel(int32_t *out, const float *x, int cols, int k) {
    typedef cub::BlockReduce<TkPair, TK_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ TkPair prev;
    const float *row = x + (size_t)blockIdx.x * cols;
    int32_t *ids = out + (size_t)blockIdx.x * k;
    for (int j = 0; j < k; j++) {
        TkPair best = {-INFINITY, INT_MAX};
        for (int c = threadIdx.x; c < cols; c += TK_THREADS) {
            const TkPair cand = {row[c], c};
            const bool fresh = !isnan(cand.v) && (j == 0 || tk_before(prev, cand));
            if (fresh && tk_before(cand, best)) best = cand;
        }
        best = Reduce(tmp).Reduce(best, TkBest());
        if (threadIdx.x == 0) {
            ids[j] = best.i == INT_MAX ? 0 : best.i;
            prev = best;
        }
        __syncthreads(); /* prev for the next pass; tmp reused */
    }
}

int cu_top_k_rows(sd_cuda *c, int32_t *out_dev, const float *x, int n_rows, int cols, int k,
                  sd_err *e) {
    top_k_kernel<<<n_rows, TK_THREADS, 0, c->stream>>>(out_dev, x, cols, k);
    return cu_check_launch(c, e, "top_k_rows %dx%d k %d", n_rows, cols, k);
}
