/* The embedding lookup's arguments and one virtual block of it, shared by
 * embed.cu's kernel and the persistent step (step.cu). */
#ifndef SD_CUDA_EMBED_CUH
#define SD_CUDA_EMBED_CUH

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

struct EmArgs {
    float *x;
    const uint8_t *q, *hb, *sc; /* values, high bits, scales (cuda_int.h) */
    const int32_t *ids;
    int64_t cols;
    size_t qrow, hrow, srow;
    int type;
    unsigned gx; /* column blocks: the grid is (gx, n) */
};

/* Element k of the row at rq, rh, rs. */
__device__ __forceinline__ float em_elem(const EmArgs &a, const uint8_t *rq, const uint8_t *rh,
                                         const uint8_t *rs, int64_t k) {
    const int type = a.type;
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
    return v;
}

/* Virtual block b: column block b % gx of row b / gx, EM_THREADS columns
 * apart, taken by the block's `threads` threads in turn. */
__device__ __forceinline__ void em_vblock(const EmArgs &a, unsigned b, int threads) {
    const unsigned bx = b % a.gx, by = b / a.gx;
    const int64_t r = cu_ld_act(a.ids + by);
    const uint8_t *rq = a.q + (size_t)r * a.qrow, *rh = a.hb + (size_t)r * a.hrow,
                  *rs = a.sc + (size_t)r * a.srow;
    float *o = a.x + (size_t)by * a.cols;
    for (int t = threadIdx.x; t < EM_THREADS; t += threads)
        for (int64_t k = (int64_t)bx * EM_THREADS + t; k < a.cols; k += (int64_t)a.gx * EM_THREADS)
            o[k] = em_elem(a, rq, rh, rs, k);
}

#endif
