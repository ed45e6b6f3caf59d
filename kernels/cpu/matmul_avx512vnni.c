/* AVX-512 matrix products with VNNI: the integer dot products of the
 * 512-bit tiles (mm_tiles512.h) as vpdpbusd, one instruction for four
 * unsigned x signed byte products added into each int32 lane (exact, the
 * same sums as vpmaddubsw + vpmaddwd). Where the weight codes are signed
 * (Q8_0), the activations enter unsigned as x + 128 and 128 * sum(code)
 * comes off once a block. The 256-bit tiles of mm_tiles256.h take
 * vpdpbusd here too (mm_simd.h). Chosen at run time when the CPU has
 * AVX512_VNNI (ctx.c); the amx level runs these products for everything
 * but its k8 K-quants (amx/matmul_amx.c). */
#include "kernels/cpu/mm_simd.h"

AI __m512i mdot512(__m512i u, __m512i s) { return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s); }
AI __m512i dot2_512(__m512i lo, __m512i hi, __m512i xl, __m512i xh) {
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
}

/* 128 * sum(w) of the 4 rows, folded as the products are */
AI __m512i q8_csum512(const __m512i *wv) {
    const __m512i c80 = _mm512_set1_epi8((char)0x80), z = _mm512_setzero_si512();
    return fold4_512(_mm512_dpbusd_epi32(z, c80, wv[0]), _mm512_dpbusd_epi32(z, c80, wv[1]),
                     _mm512_dpbusd_epi32(z, c80, wv[2]), _mm512_dpbusd_epi32(z, c80, wv[3]));
}
/* x ^ 0x80 = x + 128 (unsigned) against the signed weights */
AI __m512i q8_dots512(const __m512i *wv, const __m512i *wa, const __mmask64 *neg, __m512i xv,
                      const __m512i csum) {
    (void)wa, (void)neg;
    const __m512i xu = _mm512_xor_si512(xv, _mm512_set1_epi8((char)0x80));
    const __m512i z = _mm512_setzero_si512();
    return _mm512_sub_epi32(fold4_512(_mm512_dpbusd_epi32(z, xu, wv[0]), _mm512_dpbusd_epi32(z, xu, wv[1]),
                                      _mm512_dpbusd_epi32(z, xu, wv[2]), _mm512_dpbusd_epi32(z, xu, wv[3])),
                            csum);
}

AI __m512i q6x_dot512(__m512i o, __m512i c0, __m512i c1, __m512i c2, __m512i c3, const int8_t *xp) {
    __m512i t = _mm512_dpbusd_epi32(o, c0, bc4z(xp));
    t = _mm512_dpbusd_epi32(t, c1, bc4z(xp + 4));
    t = _mm512_dpbusd_epi32(t, c2, bc4z(xp + 8));
    return _mm512_dpbusd_epi32(t, c3, bc4z(xp + 12));
}

AI __m512i nib_dot512(const __m512i *lo, const __m512i *hi, const int8_t *xp) {
    __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
        t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(t, lo[q], bc4z(xp + 8 * q)), hi[q], bc4z(xp + 8 * q + 4));
    return t;
}

/* SD_Q8_0_X16: the activations as unsigned x + 128 (sd_mm_job.xu8, one copy
 * a call) against the signed codes, 128 * sum(code) of each row (8
 * vpdpbusd with 0x80 bytes a block, for all activation rows) subtracted */
AI __m512i q80x_corr512(const __m512i *w) {
    const __m512i c80 = _mm512_set1_epi8((char)0x80);
    __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 9
    for (int q = 0; q < 8; q++) corr = _mm512_dpbusd_epi32(corr, c80, w[q]);
    return corr;
}
AI __m512i q80x_dot512(const __m512i *w, __m512i corr, const int8_t *xq, const uint8_t *xu, int64_t off) {
    (void)xq;
    const uint8_t *up = xu + off;
    __m512i t = _mm512_sub_epi32(_mm512_setzero_si512(), corr);
#pragma GCC unroll 9
    for (int q = 0; q < 8; q++) t = _mm512_dpbusd_epi32(t, _mm512_set1_epi32((int)ld32(up + 4 * q)), w[q]);
    return t;
}

#include "kernels/cpu/mm_tiles512.h"
#include "kernels/cpu/mm_rows.h"

void sd_cpu_mm_avx512vnni(const sd_mm_job *j, int64_t r0, int64_t r1) { mm_rows(j, r0, r1); }
