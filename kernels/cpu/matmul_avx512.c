/* AVX-512 matrix products (F, BW, VL, DQ; no VNNI): the integer dot
 * products of the 512-bit tiles (mm_tiles512.h) as vpmaddubsw, which
 * multiplies unsigned by signed bytes and adds pairs into int16, then
 * vpmaddwd against ones to widen to int32. Sums that fit int16 add there
 * before the one widening step. With 32 vector registers the activation
 * tiles grow to 8 rows (quantized) and 4 rows (float), so each unpacked
 * weight block serves twice as many activation rows in prefill; decode
 * (n = 1) is bound by memory bandwidth and gains nothing from wider
 * vectors. */
#include "kernels/cpu/mm_simd.h"

AI __m512i mdot512(__m512i u, __m512i s) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
}
/* codes <= 31: 4*31*127 < 32767, so the two int16 sums add before widening */
AI __m512i dot2_512(__m512i lo, __m512i hi, __m512i xl, __m512i xh) {
    return _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(lo, xl), _mm512_maddubs_epi16(hi, xh)),
                             _mm512_set1_epi16(1));
}

/* Q8_0 codes are signed: the sign trick, |w| against x negated where w < 0
 * (a masked subtract), makes the unsigned operand; nothing to correct. */
AI __m512i q8_csum512(const __m512i *wv) {
    (void)wv;
    return _mm512_setzero_si512();
}
AI __m512i q8_dots512(const __m512i *wv, const __m512i *wa, const __mmask64 *neg, __m512i xv,
                      const __m512i csum) {
    (void)wv, (void)csum;
    const __m512i z = _mm512_setzero_si512();
#define S8(k) mdot512(wa[k], _mm512_mask_sub_epi8(xv, neg[k], z, xv))
    return fold4_512(S8(0), S8(1), S8(2), S8(3));
#undef S8
}

AI __m512i q6x_dot512(__m512i o, __m512i c0, __m512i c1, __m512i c2, __m512i c3, const int8_t *xp) {
    const __m512i one = _mm512_set1_epi16(1);
    return _mm512_add_epi32(
        _mm512_add_epi32(
            _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(c0, bc4z(xp)), _mm512_maddubs_epi16(c1, bc4z(xp + 4))), one),
            _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(c2, bc4z(xp + 8)), _mm512_maddubs_epi16(c3, bc4z(xp + 12))), one)),
        o);
}

/* four pieces in two int16 rounds of 4 products each (codes <= 31) */
AI __m512i nib_dot512(const __m512i *lo, const __m512i *hi, const int8_t *xp) {
    const __m512i one = _mm512_set1_epi16(1);
    __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h2 = 0; h2 < 2; h2++) {
        const int q0 = 2 * h2, q1 = q0 + 1;
        const __m512i u = _mm512_add_epi16(
            _mm512_add_epi16(_mm512_maddubs_epi16(lo[q0], bc4z(xp + 8 * q0)), _mm512_maddubs_epi16(hi[q0], bc4z(xp + 8 * q0 + 4))),
            _mm512_add_epi16(_mm512_maddubs_epi16(lo[q1], bc4z(xp + 8 * q1)), _mm512_maddubs_epi16(hi[q1], bc4z(xp + 8 * q1 + 4))));
        t = _mm512_add_epi32(t, _mm512_madd_epi16(u, one));
    }
    return t;
}

/* SD_Q8_0_X16: the sign trick per piece; the +128 activations go unused */
AI __m512i q80x_corr512(const __m512i *w) {
    (void)w;
    return _mm512_setzero_si512();
}
AI __m512i q80x_dot512(const __m512i *w, __m512i corr, const int8_t *xq, const uint8_t *xu, int64_t off) {
    (void)corr, (void)xu;
    const __m512i one = _mm512_set1_epi16(1);
    __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 9
    for (int q = 0; q < 8; q++) {
        const __m512i xv = bc4z(xq + off + 4 * q);
        const __mmask64 neg = _mm512_movepi8_mask(w[q]);
        const __m512i xs = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
        t = _mm512_add_epi32(t, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w[q]), xs), one));
    }
    return t;
}

#include "kernels/cpu/mm_tiles512.h"
#include "kernels/cpu/mm_rows.h"

void sd_cpu_mm_avx512(const sd_mm_job *j, int64_t r0, int64_t r1) { mm_rows(j, r0, r1); }
