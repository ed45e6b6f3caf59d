/* Activation quantisation for the integer matrix products, bit for bit the
 * CPU's (kernels/cpu/cpu.h): per block of 32, d = max|x| / 127, id = 1/d
 * (0 when d is 0), q = round-to-nearest-even(x * id), s = d * sum(q). One
 * warp per block, one element per lane.
 *
 * Scratch layout (CU_SCRATCH_QACT): q [n][cols] int8 | pad to 256 |
 * d [n][cols/32] | s [n][cols/32]; since cols is a multiple of 32, block b of
 * the flattened [n*cols] is block b % (cols/32) of row b / (cols/32). */
#include "kernels/cuda/cuda_int.h"

enum { QA_WARPS = 8 };

__global__ void __launch_bounds__(32 * QA_WARPS)
qact_kernel(const float *x, int8_t *q, float *d, float *s, int64_t blocks) {
    const int64_t b = (int64_t)blockIdx.x * QA_WARPS + (threadIdx.x >> 5);
    if (b >= blocks) return;
    const int lane = threadIdx.x & 31;
    const float v = x[b * 32 + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
    const int qi = __float2int_rn(v * id);
    q[b * 32 + lane] = (int8_t)qi;
    const int sum = __reduce_add_sync(0xffffffffu, qi);
    if (lane == 0) {
        d[b] = dd;
        s[b] = dd * (float)sum;
    }
}

size_t cu_qact_bytes(int n, int64_t cols) {
    return cu_align256((size_t)n * (size_t)cols) + 2 * (size_t)n * (size_t)(cols / 32) * 4;
}

int cu_qact(sd_cuda *c, const float *x, int n, int64_t cols, int8_t **q, float **d, float **s,
            sd_err *e) {
    const int64_t blocks = (int64_t)n * (cols / 32);
    const size_t qbytes = cu_align256((size_t)n * (size_t)cols);
    uint8_t *buf = (uint8_t *)cu_scratch(c, CU_SCRATCH_QACT, cu_qact_bytes(n, cols), e);
    if (!buf) return -1;
    *q = (int8_t *)buf;
    *d = (float *)(buf + qbytes);
    *s = *d + blocks;
    const int64_t grid = (blocks + QA_WARPS - 1) / QA_WARPS;
    qact_kernel<<<(unsigned)grid, 32 * QA_WARPS, 0, c->stream>>>(x, *q, *d, *s, blocks);
    return cu_check_launch(c, e, "quantize activations %dx%lld", n, (long long)cols);
}
