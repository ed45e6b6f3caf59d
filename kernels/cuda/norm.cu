/* RMSNorm, one block per row: out = x * (1 / sqrt(mean(x^2) + eps)) * w.
 * The sum of squares is accumulated in double and reduced with CUB, and the
 * scale is formed in double exactly as the CPU does, so it matches the CPU
 * bit for bit in all but rare rounding ties; out may be x (each element is
 * read and written by the same thread, after the reduction).
 *
 * Thread t holds elements t, t + RN_THREADS, ... of the row and of w in
 * registers (PER of each; rows longer than RN_THREADS * RN_MAX_PER take
 * the loop without them). The gain w is a weight, so it is loaded before the
 * kernel's wait (cuda_int.h): under programmatic dependent launch its
 * device-memory latency passes while the kernel before still runs, and x,
 * which that kernel writes, is one load per element from L2 after it.
 *
 * When dim is a multiple of 32 the kernel also quantises the rows it writes
 * for the integer matrix products (qact.cu: the same bits as cu_qact of
 * out, into the same scratch), so the quantised projection that follows
 * needs no launch of its own: one launch fewer per norm, two per layer.
 * Block b of 32 elements of a row is elements [32b, 32b+32), which the
 * stride gives to one warp (RN_THREADS and dim multiples of 32), lane l
 * element 32b+l; the test k < dim is then warp-uniform, so the warp
 * collectives of the quantisation see all 32 lanes. */
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/qact.cuh"

enum { RN_THREADS = 256, RN_MAX_PER = 16 };

/* q, d, s: the quantised rows ([n][dim] int8, [n][dim/32] d and s), or NULL.
 * PER: elements a thread holds, ceil(dim / RN_THREADS) rounded up to a
 * power of two; 0 for rows longer than RN_THREADS * RN_MAX_PER. */
template <int PER>
__global__ void __launch_bounds__(RN_THREADS)
rmsnorm_kernel(float *out, const float *x, const float *w, int dim, float eps, int8_t *q,
               float *d, float *s) {
    typedef cub::BlockReduce<double, RN_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    __shared__ float scale;
    cu_grid_trigger();
    constexpr int P = PER > 0 ? PER : 1;
    float wv[P], xv[P];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int k = (int)threadIdx.x + j * RN_THREADS;
        wv[j] = k < dim ? __ldg(w + k) : 0.f;
    }
    cu_grid_wait();
    const float *xr = x + (size_t)blockIdx.x * dim;
    float *o = out + (size_t)blockIdx.x * dim;
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
    ss = Reduce(tmp).Sum(ss);
    if (threadIdx.x == 0) scale = (float)(1.0 / sqrt(ss / dim + (double)eps));
    __syncthreads();
    const float sc = scale;
    if (PER > 0) {
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int k = (int)threadIdx.x + j * RN_THREADS;
            if (k >= dim) break;
            const float v = xv[j] * sc * wv[j];
            o[k] = v;
            if (q) qa_block(v, ((int64_t)blockIdx.x * dim + k) / 32, q, d, s);
        }
    } else {
        for (int k = threadIdx.x; k < dim; k += RN_THREADS) {
            const float v = xr[k] * sc * w[k];
            o[k] = v;
            if (q) qa_block(v, ((int64_t)blockIdx.x * dim + k) / 32, q, d, s);
        }
    }
}

template <int PER>
static void rn_launch(const sd_cuda *c, int n, float *out, const float *x, const float *w, int dim,
                      float eps, int8_t *q, float *d, float *s) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, (unsigned)n, RN_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, rmsnorm_kernel<PER>, out, x, w, dim, eps, q, d, s);
}

int cu_rmsnorm(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim, float eps,
               sd_err *e) {
    if (n <= 0) return 0;
    if (dim <= 0) return sd_fail(e, "cuda: rmsnorm: bad dim %d", dim);
    int8_t *q = NULL;
    float *d = NULL, *s = NULL;
    if (dim % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QACT, n, dim, &q, &d, &s, e)) return -1;
    const int per = (dim + RN_THREADS - 1) / RN_THREADS;
    if (per <= 1) rn_launch<1>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 2) rn_launch<2>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 4) rn_launch<4>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= 8) rn_launch<8>(c, n, out, x, w, dim, eps, q, d, s);
    else if (per <= RN_MAX_PER) rn_launch<RN_MAX_PER>(c, n, out, x, w, dim, eps, q, d, s);
    else rn_launch<0>(c, n, out, x, w, dim, eps, q, d, s);
    if (cu_check_launch(c, e, "rmsnorm %dx%d", n, dim)) return -1;
    if (q) cu_qtag_set(c, out, n, dim, CU_SCRATCH_QACT);
    return 0;
}
