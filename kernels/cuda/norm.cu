/* RMSNorm, one block per row: out = x * (1 / sqrt(mean(x^2) + eps)) * w.
 * The sum of squares is accumulated in double and reduced with CUB, and the
 * scale is formed in double exactly as the CPU does, so it matches the CPU
 * bit for bit in all but rare rounding ties; out may be x (each element is
 * read and written by the same thread, after the reduction).
 *
 * When dim is a multiple of 32 the kernel also quantises the rows it writes
 * for the integer matrix products (qact.cu: the same bits as cu_qact of
 * out, into the same scratch), so the quantised projection that follows
 * needs no launch of its own: one launch fewer per norm, two per layer.
 * Block b of 32 elements of a row is elements [32b, 32b+32), which the
 * stride loop gives to one warp (RN_THREADS and dim multiples of 32), lane
 * l element 32b+l; the loop is warp-uniform, so the warp collectives of the
 * quantisation see all 32 lanes. */
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/qact.cuh"

enum { RN_THREADS = 256 };

/* q, d, s: the quantised rows ([n][dim] int8, [n][dim/32] d and s), or NULL. */
__global__ void __launch_bounds__(RN_THREADS)
rmsnorm_kernel(float *out, const float *x, const float *w, int dim, float eps, int8_t *q,
               float *d, float *s) {
    typedef cub::BlockReduce<double, RN_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float scale;
    cu_grid_wait();
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *o = out + (size_t)blockIdx.x * dim;
    double ss = 0;
    for (int k = threadIdx.x; k < dim; k += RN_THREADS) ss += (double)xr[k] * xr[k];
    ss = Reduce(tmp).Sum(ss);
    if (threadIdx.x == 0) scale = (float)(1.0 / sqrt(ss / dim + (double)eps));
    __syncthreads();
    const float sc = scale;
    for (int k = threadIdx.x; k < dim; k += RN_THREADS) {
        const float v = xr[k] * sc * w[k];
        o[k] = v;
        if (q) qa_block(v, ((int64_t)blockIdx.x * dim + k) / 32, q, d, s);
    }
}

int cu_rmsnorm(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim, float eps,
               sd_err *e) {
    if (n <= 0) return 0;
    if (dim <= 0) return sd_fail(e, "cuda: rmsnorm: bad dim %d", dim);
    int8_t *q = NULL;
    float *d = NULL, *s = NULL;
    if (dim % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QACT, n, dim, &q, &d, &s, e)) return -1;
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, (unsigned)n, RN_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, rmsnorm_kernel, out, x, w, dim, eps, q, d, s);
    if (cu_check_launch(c, e, "rmsnorm %dx%d", n, dim)) return -1;
    if (q) cu_qtag_set(c, out, n, dim, CU_SCRATCH_QACT);
    return 0;
}
