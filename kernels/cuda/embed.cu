/* x[i] = row ids[i] of the embedding matrix, dequantised from the device
 * layout (cuda_int.h) with the CPU's arithmetic (kernels/cpu/quant.c: one
 * multiply, and for Q4_1 a separate add, never fused), so rows match the CPU
 * bit for bit. Grid: (column blocks, n). */
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_int.h"

enum { EM_THREADS = 256 };

__device__ __forceinline__ float em_h2f(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }

__global__ void __launch_bounds__(EM_THREADS)
embed_kernel(float *x, const uint8_t *q, const uint8_t *sc, const int32_t *ids, int64_t cols,
             size_t qrow, size_t srow, int type) {
    const int64_t r = ids[blockIdx.y];
    const uint8_t *rq = q + (size_t)r * qrow, *rs = sc + (size_t)r * srow;
    float *o = x + (size_t)blockIdx.y * cols;
    for (int64_t k = (int64_t)blockIdx.x * EM_THREADS + threadIdx.x; k < cols;
         k += (int64_t)gridDim.x * EM_THREADS) {
        const int64_t b = k / 32, j = k % 32;
        float v;
        switch (type) {
        case SD_F32: v = ((const float *)rq)[k]; break;
        case SD_F16: v = em_h2f(((const unsigned short *)rq)[k]); break;
        case SD_BF16: v = __uint_as_float((unsigned)((const unsigned short *)rq)[k] << 16); break;
        case SD_Q8_0: v = __fmul_rn(em_h2f(((const unsigned short *)rs)[b]), (float)(int8_t)rq[k]); break;
        default: {
            const uint8_t byte = rq[b * 16 + (j & 15)];
            const int nib = j < 16 ? byte & 15 : byte >> 4;
            if (type == SD_Q4_0) {
                v = __fmul_rn(em_h2f(((const unsigned short *)rs)[b]), (float)(nib - 8));
            } else {
                const unsigned dm = ((const unsigned *)rs)[b];
                v = __fadd_rn(__fmul_rn(em_h2f((unsigned short)(dm & 0xffffu)), (float)nib),
                              em_h2f((unsigned short)(dm >> 16)));
            }
        }
        }
        o[k] = v;
    }
}

int cu_embed(sd_cuda *c, float *x, const sd_weight *emb, const int32_t *ids_dev, int n,
             sd_err *e) {
    const uint8_t *base = (const uint8_t *)emb->data;
    const int64_t cols = emb->cols;
    int64_t gx = (cols + EM_THREADS - 1) / EM_THREADS;
    if (gx > 1024) gx = 1024;
    const dim3 grid((unsigned)gx, (unsigned)n);
    embed_kernel<<<grid, EM_THREADS, 0, c->stream>>>(
        x, base, base + cu_scale_offset(emb->type, emb->rows, cols), ids_dev, cols,
        cu_qrow_bytes(emb->type, cols), cu_srow_bytes(emb->type, cols), (int)emb->type);
    return cu_check_launch(c, e, "embed %s %lldx%lld", sd_wtype_name(emb->type),
                           (long long)emb->rows, (long long)cols);
}
