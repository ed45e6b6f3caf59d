/* RMSNorm, one block per row: out = x * (1 / sqrt(mean(x^2) + eps)) * w.
 * The sum of squares is accumulated in double and reduced with CUB, and the
 * scale is formed in double exactly as the CPU does, so it matches the CPU
 * bit for bit in all but rare rounding ties; out may be x (each element is
 * read and written by the same thread, after the reduction). */
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/cuda_int.h"

enum { RN_THREADS = 256 };

__global__ void __launch_bounds__(RN_THREADS)
rmsnorm_kernel(float *out, const float *x, const float *w, int dim, float eps) {
    typedef cub::BlockReduce<double, RN_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float scale;
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *o = out + (size_t)blockIdx.x * dim;
    double ss = 0;
    for (int k = threadIdx.x; k < dim; k += RN_THREADS) ss += (double)xr[k] * xr[k];
    ss = Reduce(tmp).Sum(ss);
    if (threadIdx.x == 0) scale = (float)(1.0 / sqrt(ss / dim + (double)eps));
    __syncthreads();
    const float sc = scale;
    for (int k = threadIdx.x; k < dim; k += RN_THREADS) o[k] = xr[k] * sc * w[k];
}

int cu_rmsnorm(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim, float eps,
               sd_err *e) {
    if (n <= 0) return 0;
    if (dim <= 0) return sd_fail(e, "cuda: rmsnorm: bad dim %d", dim);
    rmsnorm_kernel<<<(unsigned)n, RN_THREADS, 0, c->stream>>>(out, x, w, dim, eps);
    return cu_check_launch(c, e, "rmsnorm %dx%d", n, dim);
}
