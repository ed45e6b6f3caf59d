/* Greedy argmax on the device: one block of 1024 threads scans the row
 * (each thread a strided subset, keeping its first maximum), then a CUB
 * block reduction picks the largest value, the lowest index among equals.
 * Same answer as the engine's host argmax (engine/generate/common.c: first
 * index i with x[i] > x[best], best starting at 0): NaNs never win, and a
 * NaN at index 0 or a row with no value above -inf gives 0. A 128K-entry
 * row is 512 KB, a few microseconds for one multiprocessor, and the result
 * that crosses to the host is one int instead of the row. */
#include <cub/block/block_reduce.cuh>
#include <limits.h>
#include <math.h>

#include "kernels/cuda/cuda_int.h"

enum { AM_THREADS = 1024 };

struct AmPair {
    float v;
    int i;
};

struct AmMax {
    __device__ __forceinline__ AmPair operator()(const AmPair &a, const AmPair &b) const {
        return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
    }
};

__global__ void __launch_bounds__(AM_THREADS) argmax_kernel(int32_t *out, const float *x, int n) {
    typedef cub::BlockReduce<AmPair, AM_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    AmPair best = {-INFINITY, INT_MAX};
    for (int k = threadIdx.x; k < n; k += AM_THREADS) {
        const float v = x[k];
        if (v > best.v) best.v = v, best.i = k;
    }
    best = Reduce(tmp).Reduce(best, AmMax());
    if (threadIdx.x == 0) *out = (best.i == INT_MAX || isnan(x[0])) ? 0 : best.i;
}

int cu_argmax(sd_cuda *c, int32_t *out_dev, const float *x, int n, sd_err *e) {
    argmax_kernel<<<1, AM_THREADS, 0, c->stream>>>(out_dev, x, n);
    return cu_check_launch(c, e, "argmax %d", n);
}
