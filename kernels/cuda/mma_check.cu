/* sd_cuda_mma_check, sd_cuda_mma_check_h (backend_cuda.h): one warp runs
 * an mma.cuh primitive on whole matrices, forming the fragments by the layouts documented there,
 * so that a test compares the result with a scalar product: on a GPU this
 * checks those layouts against the instruction, under the emulator the
 * portable form against them. */
#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/mma.cuh"

/* Four int8 at p as one register, the first in the lowest byte. */
__device__ __forceinline__ unsigned mc_word(const int8_t *p) {
    return (unsigned)(uint8_t)p[0] | (unsigned)(uint8_t)p[1] << 8 | (unsigned)(uint8_t)p[2] << 16 |
           (unsigned)(uint8_t)p[3] << 24;
}

/* a [16][k] row-major, b [8][k] (B column-major), c [16][8] += a . b^T. */
__global__ void mma_check_kernel(const int8_t *a, const int8_t *b, int32_t *c, int k) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                  c[(g + 8) * 8 + 2 * t + 1]};
    if (k == 32) {
        const unsigned ar[4] = {mc_word(a + g * 32 + 4 * t), mc_word(a + (g + 8) * 32 + 4 * t),
                                mc_word(a + g * 32 + 16 + 4 * t),
                                mc_word(a + (g + 8) * 32 + 16 + 4 * t)};
        const unsigned br[2] = {mc_word(b + g * 32 + 4 * t), mc_word(b + g * 32 + 16 + 4 * t)};
        mma_s8_k32(acc, ar, br);
    } else {
        const unsigned ar[2] = {mc_word(a + g * 16 + 4 * t), mc_word(a + (g + 8) * 16 + 4 * t)};
        mma_s8_k16(acc, ar, mc_word(b + g * 16 + 4 * t));
    }
    c[g * 8 + 2 * t] = acc[0];
    c[g * 8 + 2 * t + 1] = acc[1];
    c[(g + 8) * 8 + 2 * t] = acc[2];
    c[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

/* Two 16-bit elements at p as one register, the first in the low half. */
__device__ __forceinline__ unsigned mc_pair(const uint16_t *p) {
    return (unsigned)p[0] | (unsigned)p[1] << 16;
}

/* 16-bit floats (bf16 or f16): a [16][16] row-major, b [8][16] (B
 * column-major), c [16][8] += a . b^T. */
template <int BF>
__global__ void mma_check_h_kernel(const uint16_t *a, const uint16_t *b, float *c) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                    c[(g + 8) * 8 + 2 * t + 1]};
    const unsigned ar[4] = {mc_pair(a + g * 16 + 2 * t), mc_pair(a + (g + 8) * 16 + 2 * t),
                            mc_pair(a + g * 16 + 8 + 2 * t), mc_pair(a + (g + 8) * 16 + 8 + 2 * t)};
    const unsigned br[2] = {mc_pair(b + g * 16 + 2 * t), mc_pair(b + g * 16 + 8 + 2 * t)};
    if (BF)
        mma_bf16_k16(acc, ar, br);
    else
        mma_f16_k16(acc, ar, br);
    c[g * 8 + 2 * t] = acc[0];
    c[g * 8 + 2 * t + 1] = acc[1];
    c[(g + 8) * 8 + 2 * t] = acc[2];
    c[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

extern "C" int sd_cuda_mma_check_h(sd_backend *be, int bf16, const uint16_t *a, const uint16_t *b,
                                   float *c, sd_err *e) {
    cudaStream_t s = sd_cuda_stream(be);
    if (!s) return sd_fail(e, "cuda: mma_check_h: not a CUDA backend");
    if (bf16)
        mma_check_h_kernel<1><<<1, 32, 0, s>>>(a, b, c);
    else
        mma_check_h_kernel<0><<<1, 32, 0, s>>>(a, b, c);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "mma_check_h %s", bf16 ? "bf16" : "f16");
}

extern "C" int sd_cuda_mma_check(sd_backend *be, const int8_t *a, const int8_t *b, int32_t *c,
                                 int k, sd_err *e) {
    cudaStream_t s = sd_cuda_stream(be);
    if (!s) return sd_fail(e, "cuda: mma_check: not a CUDA backend");
    if (k != 16 && k != 32) return sd_fail(e, "cuda: mma_check: k %d: expected 16 or 32", k);
    mma_check_kernel<<<1, 32, 0, s>>>(a, b, c, k);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "mma_check k %d", k);
}
