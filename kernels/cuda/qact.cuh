/* The activation quantisation of one block of 32 (qact.cu), as a warp
 * function so that a kernel which produces the activations (norm.cu's
 * RMSNorm) quantises them where they are made: lane l holds element l of
 * block b, all 32 lanes call it together. Bit for bit the CPU's
 * (kernels/cpu/cpu_int.h): d = max|x| / 127, id = 1/d (0 when d is 0),
 * q = round-to-nearest-even(x * id), s = d * sum(q). */
#ifndef SD_CUDA_QACT_CUH
#define SD_CUDA_QACT_CUH

#include "kernels/cuda/cuda_int.h"

__device__ __forceinline__ void qa_block(float v, int64_t b, int8_t *q, float *d, float *s) {
    const int lane = threadIdx.x & 31;
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

/* Blocks vb * QA_WARPS .. + QA_WARPS - 1 of the flattened x, one warp each,
 * taken by the block's `warps` warps in turn (the kernel has QA_WARPS, the
 * persistent step fewer, step.cu). */
enum { QA_WARPS = 8 };
struct QaArgs {
    const float *x;
    int8_t *q;
    float *d, *s;
    int64_t blocks;
};

__device__ __forceinline__ void qa_vblock(const QaArgs &a, unsigned vb, int warps) {
    for (int w = threadIdx.x >> 5; w < QA_WARPS; w += warps) {
        const int64_t b = (int64_t)vb * QA_WARPS + w;
        if (b < a.blocks) qa_block(cu_ld_act(a.x + b * 32 + (threadIdx.x & 31)), b, a.q, a.d, a.s);
    }
}

#endif
