/* The activation quantizer of the AVX-512 levels (cpu_int.h): a 32-element
 * block is two 512-bit vectors. The same bits as the scalar and AVX2
 * versions: d = max|x| / 127, codes round to nearest even of x * (1/d)
 * (vcvtps2dq with the rounding given), narrowed with signed saturation
 * (no code leaves -127..127), the block sum exact in int32. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/cpu_int.h"

void sd_cpu_qact_avx512(const float *x, int64_t cols, int8_t *q, float *d, float *s) {
    enum { rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC };
    for (int64_t b = 0; b < cols / 32; b++, x += 32, q += 32) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float dd = amax / 127.0f, id = dd ? 1.0f / dd : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), rnd);
        const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), rnd);
        _mm_storeu_si128((__m128i *)q, _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + 16), _mm512_cvtsepi32_epi8(i1));
        d[b] = dd;
        s[b] = dd * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    }
}

/* Pair layout (cpu_int.h): one load holds blocks 2p and 2p+1, whose
 * 16-byte halves go out in the order (2p low, 2p+1 low, 2p high, 2p+1
 * high), one qword permute; d and s of the pair, each four times, one
 * permute of a 4-float vector. */
void sd_cpu_qact_pair_avx512(const int8_t *q, const float *d, const float *s, int64_t cols,
                             int8_t *qp, float *ds8) {
    const int64_t nb = cols / 32, np = nb / 2;
    const __m512i halves = _mm512_setr_epi64(0, 1, 4, 5, 2, 3, 6, 7);
    const __m512i rep4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for (int64_t p = 0; p < np; p++) {
        const __m512i b = _mm512_loadu_si512((const void *)(q + 64 * p));
        _mm512_storeu_si512((void *)(qp + 64 * p), _mm512_permutexvar_epi64(halves, b));
        const __m128 ds = _mm_setr_ps(d[2 * p], d[2 * p + 1], s[2 * p], s[2 * p + 1]);
        _mm512_storeu_ps(ds8 + 16 * p, _mm512_permutexvar_ps(rep4, _mm512_castps128_ps512(ds)));
    }
    if (nb & 1) memcpy(qp + 64 * np, q + 64 * np, 32);
}

/* k8 activations of one row: per super-block max |x| -> d,
 * x*(1/d) rounded to nearest even (the bits of the 32-element quantizer's
 * formula), the codes, optionally codes + 128 (u), the sums. */
void sd_cpu_qact_k8_avx512(const float *x, int64_t cols, int8_t *q, uint8_t *u, float *d, int16_t *s32, int32_t *o16) {
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
