/* x[i] = row ids[i] of the embedding matrix, dequantised from the device
 * layout (cuda_int.h) with the CPU's arithmetic (kernels/cpu/quant.c: one
 * multiply, and for Q4_1 a separate add, never fused), so rows match the CPU
 * bit for bit. For the new types the partial products (d * (q - 16),
 * d * sc, dmin * mn, d * sc * nibble) are exact in float, so each element
 * is one rounding of its exact value whatever order a CPU dequantiser
 * multiplies in: Q5_0 d * (q - 16), Q4_K (d * sc) * nibble - dmin * mn
 * (the subtraction unfused), Q6_K (d * sc) * (q - 32). One thread per
 * element: a row is read once per token, so plain byte and word loads do.
 * Grid: (column blocks, n). */
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_int.h"

enum { EM_THREADS = 256 };

__device__ __forceinline__ float em_h2f(unsigned short bits) { return __half2float(__ushort_as_half(bits)); }

/* The value nibble (0..15) of element j of chunk b in the 4- to 6-bit
 * types' Q4_0 order. */
__device__ __forceinline__ int em_nibble(const uint8_t *rq, int64_t b, int64_t j) {
    const uint8_t byte = rq[b * 16 + (j & 15)];
    return j < 16 ? byte & 15 : byte >> 4;
}

__global__ void __launch_bounds__(EM_THREADS)
embed_kernel(float *x, const uint8_t *q, const uint8_t *hb, const uint8_t *sc, const int32_t *ids,
             int64_t cols, size_t qrow, size_t hrow, size_t srow, int type) {
    cu_grid_trigger();
    cu_grid_wait();
    const int64_t r = ids[blockIdx.y];
    const uint8_t *rq = q + (size_t)r * qrow, *rh = hb + (size_t)r * hrow, *rs = sc + (size_t)r * srow;
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
        case SD_Q5_0: { /* fifth bit of element j = 4g + e at bit 8e + g */
            const int h = (((const unsigned *)rh)[b] >> (8 * (j % 4) + j / 4)) & 1;
            v = __fmul_rn(em_h2f(((const unsigned short *)rs)[b]), (float)((em_nibble(rq, b, j) | h << 4) - 16));
            break;
        }
        case SD_Q4_K: { /* sub-block b % 8 of super-block b / 8, record {d, dmin, scales[12]} */
            const uint8_t *rec = rs + (size_t)(b / 8) * 16, *s6 = rec + 4;
            const int s = (int)(b % 8);
            const int scv = s < 4 ? s6[s] & 63 : (s6[s + 4] & 15) | (s6[s - 4] >> 6) << 4;
            const int mnv = s < 4 ? s6[s + 4] & 63 : (s6[s + 4] >> 4) | (s6[s] >> 6) << 4;
            const float d = em_h2f((unsigned short)(rec[0] | rec[1] << 8)),
                        dmin = em_h2f((unsigned short)(rec[2] | rec[3] << 8));
            v = __fsub_rn(__fmul_rn(__fmul_rn(d, (float)scv), (float)em_nibble(rq, b, j)),
                          __fmul_rn(dmin, (float)mnv));
            break;
        }
        case SD_Q6_K: { /* bits 4-5 of element j at bits 8(j%4) + 2((j%16)/4) of word j/16;
                           record {int8 scales[16], d}, chunk b % 8 has scales 2(b%8), +1 */
            const int h = (((const unsigned *)rh)[2 * b + j / 16] >> (8 * (j % 4) + 2 * ((j % 16) / 4))) & 3;
            const uint8_t *rec = rs + (size_t)(b / 8) * 20;
            const float d = em_h2f((unsigned short)(rec[16] | rec[17] << 8));
            const int scv = (int8_t)rec[2 * (b % 8) + j / 16];
            v = __fmul_rn(__fmul_rn(d, (float)scv), (float)((em_nibble(rq, b, j) | h << 4) - 32));
            break;
        }
        default: {
            const int nib = em_nibble(rq, b, j);
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
    const uint32_t t = emb->type;
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, grid, EM_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, embed_kernel,
        x, base, base + cu_high_offset(t, emb->rows, cols), base + cu_scale_offset(t, emb->rows, cols),
        ids_dev, cols, cu_qrow_bytes(t, cols), cu_hrow_bytes(t, cols), cu_srow_bytes(t, cols), (int)t);
    return cu_check_launch(c, e, "embed %s %lldx%lld", sd_wtype_name(emb->type),
                           (long long)emb->rows, (long long)cols);
}
