/* The activation quantizer of the AVX2 level (cpu_int.h): 32-element
 * blocks to int8 codes, their scales and sums, and the pair layout the
 * 4-bit tiles read. The same bits as the scalar version (quant.c) on every
 * level: round to nearest even of x * (1/d). */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/cpu_int.h"

/* 4 vectors a block: max |x| -> d, x*(1/d) rounded to nearest even, packed
 * int32 -> int16 -> int8 (the packs interleave 128-bit lanes; one vpermd
 * restores element order), exact int32 block sum for s. */
void sd_cpu_qact_avx2(const float *x, int64_t cols, int8_t *q, float *d, float *s) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < cols / 32; b++, x += 32, q += 32) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16),
               v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, absmask), _mm256_and_ps(v1, absmask)),
                                 _mm256_max_ps(_mm256_and_ps(v2, absmask), _mm256_and_ps(v3, absmask)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float dd = amax / 127.0f, id = dd ? 1.0f / dd : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        enum { rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* a constant for clang */
        const __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), rnd));
        const __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), rnd));
        const __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), rnd));
        const __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), rnd));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, perm));
        d[b] = dd;
        s[b] = dd * (float)_mm_cvtsi128_si32(s4);
    }
}

/* Pair layout (cpu_int.h): vperm2i128 picks the 16-byte halves of two blocks. */
void sd_cpu_qact_pair_avx2(const int8_t *q, const float *d, const float *s, int64_t cols,
                           int8_t *qp, float *ds8) {
    const int64_t nb = cols / 32, np = nb / 2;
    for (int64_t p = 0; p < np; p++) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(q + 64 * p));
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(q + 64 * p + 32));
        _mm256_storeu_si256((__m256i *)(qp + 64 * p), _mm256_permute2x128_si256(b0, b1, 0x20));
        _mm256_storeu_si256((__m256i *)(qp + 64 * p + 32), _mm256_permute2x128_si256(b0, b1, 0x31));
        const __m128 dd = _mm_setr_ps(d[2 * p], d[2 * p], d[2 * p], d[2 * p]);
        const __m128 d1 = _mm_set1_ps(d[2 * p + 1]);
        _mm256_storeu_ps(ds8 + 16 * p, _mm256_set_m128(d1, dd));
        _mm256_storeu_ps(ds8 + 16 * p + 8, _mm256_set_m128(_mm_set1_ps(s[2 * p + 1]), _mm_set1_ps(s[2 * p])));
    }
    if (nb & 1) memcpy(qp + 64 * np, q + 64 * np, 32);
}
