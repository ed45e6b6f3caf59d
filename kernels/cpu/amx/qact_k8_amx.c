/* The amx level's k8 activation quantizer (sd_mm_job.xk..., cpu_int.h): one
 * scale a super-block of 256, so the repacked K-quants' integer sums need
 * one float step a super-block (amx/matmul_amx.c). 512-bit code, compiled
 * with the amx level's flags like the products that read it. */
#include <immintrin.h>

#include "kernels/cpu/cpu_int.h"

/* k8 activations of one row: per super-block max |x| -> d,
 * x*(1/d) rounded to nearest even (the bits of the 32-element quantizer's
 * formula), the codes, optionally codes + 128 (u), the sums. */
void sd_cpu_qact_k8_amx(const float *x, int64_t cols, int8_t *q, uint8_t *u, float *d, int16_t *s32, int32_t *o16) {
    const __m128i flip = _mm_set1_epi8((char)0x80);
    for (int64_t sb = 0; sb < cols / 256; sb++, x += 256, q += 256) {
        __m512 v[16], m = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
            v[k] = _mm512_loadu_ps(x + 16 * k);
            m = _mm512_max_ps(m, _mm512_abs_ps(v[k]));
        }
        const float amax = _mm512_reduce_max_ps(m);
        const float dd = amax / 127.0f, id = dd ? 1.0f / dd : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        int32_t prev = 0;
#pragma GCC unroll 16
        for (int k = 0; k < 16; k++) {
            const __m512i iv = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m128i b = _mm512_cvtepi32_epi8(iv);
            _mm_storeu_si128((__m128i *)(q + 16 * k), b);
            if (u) _mm_storeu_si128((__m128i *)(u + 256 * sb + 16 * k), _mm_xor_si128(b, flip));
            const int32_t s = _mm512_reduce_add_epi32(iv);
            o16[16 * sb + k] = -32 * s;
            if (k & 1) s32[8 * sb + k / 2] = (int16_t)(prev + s);
            prev = s;
        }
        d[sb] = dd;
    }
}
