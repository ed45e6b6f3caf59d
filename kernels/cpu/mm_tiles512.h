/* The 512-bit tiles (the AVX-512 files: matmul_avx512.c and
 * matmul_avx512vnni.c): the file layouts' Q4_K, Q6_K, Q5_0 and Q8_0, and
 * every SD_*_X16 type, with mm_x16 their row walk. Inline bodies over the
 * integer dot products the including file defines first, with or without
 * VNNI (the same int32 sums either way):
 *   mdot512(u, s)                 int32 lanes of sums of 4 products u8 * s8
 *   dot2_512(lo, hi, xl, xh)      mdot512(lo, xl) + mdot512(hi, xh), codes <= 31
 *   q8_csum512(wv), q8_dots512    the Q8_0 tile's 4 rows of signed codes
 *                                 against a step of activations (see
 *                                 tile_q8_512), with the correction the
 *                                 unsigned form needs computed once a step
 *   q6x_dot512(o, c0..c3, xp)     16 SD_Q6_K_X16 codes of each row against
 *                                 16 activation bytes, plus o
 *   nib_dot512(lo, hi, xp)        a 4-bit SD_*_X16 block of each row
 *   q80x_corr512(w), q80x_dot512  an SD_Q8_0_X16 block of each row, with
 *                                 its once-a-block correction */
#ifndef SD_CPU_MM_TILES512_H
#define SD_CPU_MM_TILES512_H

#include "kernels/cpu/mm_tiles256.h"

/* ---- 512-bit tiles of the file layouts' K-quants, Q5_0 and Q8_0 ----------------
 * The 256-bit tiles above fold 4 weight rows with vphaddd and gather their
 * scales through scalar loads and a store/reload of the unpacked Q4_K
 * scales (a store-forwarding stall a super-block); at n = 1 that kept Q4_K
 * near 8 GB/s and Q6_K near 13 GB/s even with the weights in cache.
 *
 * Step: 64 elements = two activation blocks. For each of the 4 weight
 * rows k, one integer dot product gives 16 int32 lanes, 4 per 16 elements
 * (lanes 0..7 the first block, 8..15 the second). fold4_512 transposes
 * and adds the 4 rows' vectors so that 128-bit lane q holds
 * [r0 r1 r2 r3], each row's sum of its lanes 4q..4q+3: two 128-bit lanes
 * per block, every lane one row, so one cvt + one FMA (factor: the rows'
 * weight scales in lanes (q, r) times the activation block's d in lanes
 * (q, .), one vpermps + one mul) serve 4 rows x 64 elements. The float
 * accumulator of activation row a collects all 4 rows; the 4 results are
 * its lanes r summed over q at the end (store_fold): one 16-lane float
 * accumulator per (row, activation row) would need a cvt, mul and fma
 * each, and the multiply pipes are the limit.
 * A tile is 4 weight rows x A <= SD_QA (8) activation rows, A registers
 * of accumulators; the driver balances the passes over n rows.
 *
 * Q4_K: one 64-byte load is chunks (2z, 2z+1) of a super-block: its low
 * nibbles are sub-blocks (4z, 4z+2), its high nibbles (4z+1, 4z+3), 32
 * bytes each, element order, so the activations for them are blocks
 * [4z | 4z+2] and [4z+1 | 4z+3] of the natural layout (two 32-byte loads
 * each). Sums of 4 products of codes <= 15 fit int16, so the fold packs
 * (vpackssdw) and adds pairs with vpmaddwd(ones) (fold4_512s). The 12
 * scale bytes unpack in registers (the masks of sd_q4_k_scales on 32-bit
 * lanes: vpshufd, vpsrlvd, and, or) and are interleaved by row with
 * vpunpck, so sc and mn arrive as float lanes (s, r). The min term
 * -dmin*mn[s]*s_x[b] is two FMAs an activation row a super-block (lanes
 * (s, r) against s_x of block s, for all 4 rows at once).
 *
 * Q6_K: 64 bytes of ql are the low nibbles of elements 0..63 of a half
 * (128 elements) and the high nibbles of 64..127; the 32 qh bytes,
 * broadcast to both halves of a register and shifted per 256-bit half by
 * vpsllvw/vpsrlvw (4|2 and 0|2 bits), give the two top bits in place
 * (one vpternlogd merges them). The codes are 0..63 and the offset -32
 * is maddubs(32, x), shared by the 4 rows; vpmaddwd applies the
 * 16-element int8 scales (int16 lanes, one vpermw a step) while widening,
 * as in the 256-bit tile, so each 128-bit lane of a row's vector is one
 * sub-block of 16; d of the 4 rows is one factor vector a super-block.
 * VNNI does not change this path (the scales must multiply int16 lanes). */

AI __m512i ld2x256(const void *p0, const void *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}
/* lanes 0..7 = v[i0], 8..15 = v[i1] */
AI __m512i lane_idx(int i0, int i1) {
    return _mm512_inserti64x4(_mm512_set1_epi32(i0), _mm256_set1_epi32(i1), 1);
}

/* fold4_512 for sums that fit int16 (|p| < 8192: two rounds of pairwise
 * adds stay below 32768): vpackssdw + vpmaddwd(ones) instead of two
 * unpacks + an add a round */
AI __m512i fold4_512s(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i one = _mm512_set1_epi16(1);
    const __m512i a = _mm512_madd_epi16(_mm512_packs_epi32(p0, p1), one);
    const __m512i b = _mm512_madd_epi16(_mm512_packs_epi32(p2, p3), one);
    return _mm512_madd_epi16(_mm512_packs_epi32(a, b), one);
}
/* lanes (q, r) summed over q -> res[r] */
AI void store_fold(__m512 acc, float *res) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    _mm_storeu_ps(res, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}
/* 4 lanes of v, each repeated 4 times: lanes (s, r) -> v[s0 + s] */
AI __m512i rep4_idx(int s0) {
    return _mm512_setr_epi32(s0, s0, s0, s0, s0 + 1, s0 + 1, s0 + 1, s0 + 1, s0 + 2, s0 + 2, s0 + 2, s0 + 2,
                             s0 + 3, s0 + 3, s0 + 3, s0 + 3);
}
/* lanes (q, r) -> v[4*sq + r]: 128-bit lanes (s0, s0, s1, s1) of v */
AI __m512i sel_idx(int s0, int s1) {
    return _mm512_setr_epi32(4 * s0, 4 * s0 + 1, 4 * s0 + 2, 4 * s0 + 3, 4 * s0, 4 * s0 + 1, 4 * s0 + 2, 4 * s0 + 3,
                             4 * s1, 4 * s1 + 1, 4 * s1 + 2, 4 * s1 + 3, 4 * s1, 4 * s1 + 1, 4 * s1 + 2, 4 * s1 + 3);
}

AI void tile_q4k512(const int A, const uint8_t *const *w, const qx *x, float (*res)[4],
                     const int pf) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i iL[2] = {lane_idx(0, 2), lane_idx(4, 6)}, iH[2] = {lane_idx(1, 3), lane_idx(5, 7)};
    const __m512i gL = sel_idx(0, 2), gH = sel_idx(1, 3), sxi[2] = {rep4_idx(0), rep4_idx(4)};
    __m512 acc[SD_QA];
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    const uint8_t *wp[4] = {w[0], w[1], w[2], w[3]};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const __m128i sm[4] = {q4k_scales_v(wp[0]), q4k_scales_v(wp[1]), q4k_scales_v(wp[2]),
                               q4k_scales_v(wp[3])};
        /* bytes (s, r) at 4s + r: sc of s < 4 | s >= 4, mn likewise */
        const __m128i t01 = _mm_unpacklo_epi8(sm[0], sm[1]), t23 = _mm_unpacklo_epi8(sm[2], sm[3]);
        const __m128i u01 = _mm_unpackhi_epi8(sm[0], sm[1]), u23 = _mm_unpackhi_epi8(sm[2], sm[3]);
        const __m256 dm = _mm256_cvtph_ps(_mm_setr_epi32((int)ld32(wp[0]), (int)ld32(wp[1]), (int)ld32(wp[2]),
                                                         (int)ld32(wp[3]))); /* d0 m0 d1 m1 .. */
        const __m128 lo4 = _mm256_castps256_ps128(dm), hi4 = _mm256_extractf128_ps(dm, 1);
        const __m512 dd = _mm512_broadcast_f32x4(_mm_shuffle_ps(lo4, hi4, _MM_SHUFFLE(2, 0, 2, 0)));
        const __m512 mm = _mm512_broadcast_f32x4(
            _mm_sub_ps(_mm_setzero_ps(), _mm_shuffle_ps(lo4, hi4, _MM_SHUFFLE(3, 1, 3, 1))));
        const __m512 D[2] = {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi16(t01, t23))), dd),
                             _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi16(t01, t23))), dd)};
        const __m512 M[2] = {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi16(u01, u23))), mm),
                             _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi16(u01, u23))), mm)};
        if (pf) prefetch4(w, wp[0] - w[0], pf, 3);
#pragma GCC unroll 8
        for (int a = 0; a < A; a++) { /* min terms: lanes (s, r) against s_x of block s */
            const __m512 sx = _mm512_castps256_ps512(_mm256_loadu_ps(x->s + a * nb + 8 * sb));
            acc[a] = _mm512_fmadd_ps(M[0], _mm512_permutexvar_ps(sxi[0], sx), acc[a]);
            acc[a] = _mm512_fmadd_ps(M[1], _mm512_permutexvar_ps(sxi[1], sx), acc[a]);
        }
#pragma GCC unroll 2
        for (int z = 0; z < 2; z++) {
            __m512i lo[4], hi[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_loadu_si512((const void *)(wp[k] + 16 + 64 * z));
                lo[k] = _mm512_and_si512(v, m4);
                hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
            const __m512 GL = _mm512_permutexvar_ps(gL, D[z]), GH = _mm512_permutexvar_ps(gH, D[z]);
#pragma GCC unroll 8
            for (int a = 0; a < A; a++) {
                const int8_t *xp = x->q + a * cols + 256 * sb + 128 * z;
                const __m512i xl = ld2x256(xp, xp + 64), xh = ld2x256(xp + 32, xp + 96);
                const __m512 dv = _mm512_castps256_ps512(_mm256_loadu_ps(x->d + a * nb + 8 * sb));
                const __m512 dl = _mm512_permutexvar_ps(iL[z], dv), dh = _mm512_permutexvar_ps(iH[z], dv);
                const __m512i fl = fold4_512s(mdot512(lo[0], xl), mdot512(lo[1], xl), mdot512(lo[2], xl), mdot512(lo[3], xl));
                const __m512i fh = fold4_512s(mdot512(hi[0], xh), mdot512(hi[1], xh), mdot512(hi[2], xh), mdot512(hi[3], xh));
                acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fl), _mm512_mul_ps(GL, dl), acc[a]);
                acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fh), _mm512_mul_ps(GH, dh), acc[a]);
            }
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) wp[k] += 144;
    }
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) store_fold(acc[a], res[a]);
}

AI void tile_q6k512(const int A, const uint8_t *const *w, const qx *x, float (*res)[4],
                     const int pf) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), c32 = _mm512_set1_epi8(32);
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    __m512i isc[4]; /* int16 lane L of step z: scale 4z + L/8 */
#pragma GCC unroll 4
    for (int z = 0; z < 4; z++) {
        const __m256i q01 = _mm256_inserti128_si256(_mm256_set1_epi16((short)(4 * z)), _mm_set1_epi16((short)(4 * z + 1)), 1);
        const __m256i q23 = _mm256_inserti128_si256(_mm256_set1_epi16((short)(4 * z + 2)), _mm_set1_epi16((short)(4 * z + 3)), 1);
        isc[z] = _mm512_inserti64x4(_mm512_castsi256_si512(q01), q23, 1);
    }
    __m512 acc[SD_QA];
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    const uint8_t *wp[4] = {w[0], w[1], w[2], w[3]};
    for (int64_t sb = 0; sb < nsb; sb++) {
        __m512i S[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            S[k] = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wp[k] + 192))));
        const __m512 dw = _mm512_broadcast_f32x4(_mm_cvtph_ps(_mm_setr_epi16(
            ld16s(wp[0] + 208), ld16s(wp[1] + 208), ld16s(wp[2] + 208), ld16s(wp[3] + 208), 0, 0, 0, 0)));
        if (pf) prefetch4(w, wp[0] - w[0], pf, 4);
#pragma GCC unroll 4
        for (int z = 0; z < 4; z++) {
            const int hf = z >> 1;
            const __m512i ix = lane_idx(2 * z, 2 * z + 1);
            __m512i q[4], sc[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i ql = _mm512_loadu_si512((const void *)(wp[k] + 64 * hf));
                const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wp[k] + 128 + 32 * hf)));
                const __m512i lo = (z & 1) ? _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4) : _mm512_and_si512(ql, m4);
                const __m512i top = (z & 1) ? _mm512_srlv_epi16(qh, shr) : _mm512_sllv_epi16(qh, shl);
                q[k] = _mm512_ternarylogic_epi32(lo, top, m30, 0xf8); /* lo | (top & m30) */
                sc[k] = _mm512_permutexvar_epi16(isc[z], S[k]);
            }
#pragma GCC unroll 8
            for (int a = 0; a < A; a++) {
                const __m512i xv = _mm512_loadu_si512((const void *)(x->q + a * cols + 256 * sb + 64 * z));
                const __m512i m32 = _mm512_maddubs_epi16(c32, xv);
                const __m512 dx = _mm512_permutexvar_ps(ix, _mm512_castps256_ps512(_mm256_loadu_ps(x->d + a * nb + 8 * sb)));
#define P6(k) _mm512_madd_epi16(_mm512_sub_epi16(_mm512_maddubs_epi16(q[k], xv), m32), sc[k])
                const __m512i f = fold4_512(P6(0), P6(1), P6(2), P6(3));
#undef P6
                acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(f), _mm512_mul_ps(dw, dx), acc[a]);
            }
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) wp[k] += 210;
    }
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) store_fold(acc[a], res[a]);
}
static void run_q4k512(int A, const uint8_t *const *w, const qx *x, float (*res)[4], int pf) {
#define C(k) tile_q4k512(k, w, x, res, pf)
    QCASES(C)
#undef C
}
static void run_q6k512(int A, const uint8_t *const *w, const qx *x, float (*res)[4], int pf) {
#define C(k) tile_q6k512(k, w, x, res, pf)
    QCASES(C)
#undef C
}
/* One step of four blocks for 4 weight rows (lo[k], hi[k]: row k's codes,
 * lane j = block 4q+j) against activation pairs 2q and 2q+1: the fold gives
 * lanes (j, r), scaled by D*d_x and offset by M*s_x. */
AI void quad_acc(const int A, const __m512i *lo, const __m512i *hi, const __m512 D, const __m512 M,
                 const int8_t *xqp, const float *xds8, const int64_t cols, const int64_t np,
                 const int64_t q, __m512 *acc) {
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) {
        const int8_t *xp = xqp + a * cols + 128 * q;
        const __m512i xl = ld2x256(xp, xp + 64), xh = ld2x256(xp + 32, xp + 96);
        const float *ds = xds8 + (a * np + 2 * q) * 16;
        const __m512 dx = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps(ds)), _mm256_load_ps(ds + 16), 1);
        const __m512 sx = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_load_ps(ds + 8)), _mm256_load_ps(ds + 24), 1);
        const __m512i fs = fold4_512(dot2_512(lo[0], hi[0], xl, xh), dot2_512(lo[1], hi[1], xl, xh),
                                     dot2_512(lo[2], hi[2], xl, xh), dot2_512(lo[3], hi[3], xl, xh));
        acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fs), _mm512_mul_ps(D, dx), acc[a]);
        acc[a] = _mm512_fmadd_ps(M, sx, acc[a]);
    }
}
/* The 4 rows' sums into res, plus the pairs after the last step of four
 * and an odd last block through the 256-bit tile. */
AI void quad_finish(const int A, const int kind, const __m512 *acc, const uint8_t *const *w, const qx *x,
                    const int8_t *xqp, const float *xds8, float (*res)[4]) {
    const int64_t nb = x->nb, nq = nb / 4;
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) store_fold(acc[a], res[a]);
    if (2 * nq < nb / 2 || (nb & 1)) {
        float tail[SD_QA][4];
        tile_q4p(A, kind, w, x, xqp, xds8, tail, 0, 2 * nq);
        for (int a = 0; a < A; a++)
            for (int k = 0; k < 4; k++) res[a][k] += tail[a][k];
    }
}
/* Q5_0 (most of the Qwen 0.5B drafter): blocks of 22 bytes = 11 words (d,
 * the 32 fifth bits qh, 16 bytes of nibbles), four a step (88 bytes: a
 * 64-byte load and a masked 24-byte one, so the last row never reads past
 * its end). vpermt2w gathers the nibble words (11j+3..11j+10) into lane j,
 * and a second one puts d (11j) in words 0..3 and the low and high 16 fifth
 * bits (11j+1, 11j+2) in words 4..7 and 8..11: those are the 64-bit masks
 * of elements 0..15 and 16..31 of the four blocks, lane order, so a masked
 * byte add of 0x10 sets the fifth bits (codes 0..31: 2*31*127*2 < 32767
 * keeps the non-VNNI sums exact). The 4 rows' d words interleave with
 * vpunpck into lanes (j, r); the offset is M = -16 D. */
static const uint16_t q50_nib_idx[32] = {3,  4,  5,  6,  7,  8,  9,  10, 14, 15, 16, 17, 18, 19, 20, 21,
                                         25, 26, 27, 28, 29, 30, 31, 32, 36, 37, 38, 39, 40, 41, 42, 43};
static const uint16_t q50_meta_idx[32] = {0, 11, 22, 33, 1, 12, 23, 34, 2, 13, 24, 35};
AI void tile_q50_512(const int A, const uint8_t *const *w, const qx *x, const int8_t *xqp,
                     const float *xds8, float (*res)[4], const int pf) {
    const int64_t nb = x->nb, np = nb / 2, nq = nb / 4, cols = x->cols;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b5 = _mm512_set1_epi8(0x10);
    const __m512i inib = _mm512_loadu_si512((const void *)q50_nib_idx);
    const __m512i imeta = _mm512_loadu_si512((const void *)q50_meta_idx);
    __m512 acc[SD_QA];
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    const uint8_t *wp[4] = {w[0], w[1], w[2], w[3]};
    for (int64_t q = 0; q < nq; q++) {
        __m512i lo[4], hi[4];
        __m128i dw[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m512i f0 = _mm512_loadu_si512((const void *)wp[k]);
            const __m512i f1 = _mm512_maskz_loadu_epi16((__mmask32)0xfff, wp[k] + 64);
            const __m512i v = _mm512_permutex2var_epi16(f0, inib, f1);
            const __m512i meta = _mm512_permutex2var_epi16(f0, imeta, f1);
            const __m128i m0 = _mm512_castsi512_si128(meta);
            const __mmask64 hl = _cvtu64_mask64((uint64_t)_mm_extract_epi64(m0, 1));
            const __mmask64 hh = _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(_mm512_extracti32x4_epi32(meta, 1)));
            lo[k] = _mm512_and_si512(v, m4);
            hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            lo[k] = _mm512_mask_add_epi8(lo[k], hl, lo[k], b5);
            hi[k] = _mm512_mask_add_epi8(hi[k], hh, hi[k], b5);
            dw[k] = m0;
        }
        /* words (j, r) at 4j + r: d of block j of row r */
        const __m128i t01 = _mm_unpacklo_epi16(dw[0], dw[1]), t23 = _mm_unpacklo_epi16(dw[2], dw[3]);
        const __m512 D = _mm512_cvtph_ps(_mm256_set_m128i(_mm_unpackhi_epi32(t01, t23), _mm_unpacklo_epi32(t01, t23)));
        const __m512 M = _mm512_mul_ps(D, _mm512_set1_ps(-16.0f));
        if (pf) prefetch4(w, wp[0] - w[0], pf, 2);
        quad_acc(A, lo, hi, D, M, xqp, xds8, cols, np, q, acc);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) wp[k] += 88;
    }
    quad_finish(A, K_Q50, acc, w, x, xqp, xds8, res);
}
static void run_q50_512(int A, const uint8_t *const *w, const qx *x, const int8_t *xqp,
                        const float *xds8, float (*res)[4], int pf) {
#define C(k) tile_q50_512(k, w, x, xqp, xds8, res, pf)
    QCASES(C)
#undef C
}
/* Q8_0 (the LM head of SmolLM2): blocks (2z, 2z+1) of a row are one
 * register (two 32-byte loads, their d two f16 of the 8 converted a step
 * for the 4 rows). With VNNI, vpdpbusd takes the activations as
 * x ^ 0x80 = x + 128 (unsigned) against the signed weights, and the
 * 128 * sum(w) this adds is one more vpdpbusd a row and step, folded
 * once and subtracted once per activation row; without VNNI, the sign
 * trick of the 256-bit tile (|w| against x negated where w < 0, a masked
 * subtract). An odd last block is a half step with the upper 256 bits
 * zero (weights, activations and their scales). Used for A >= 2 only: at
 * n = 1 the folds and the correction cost more than the 256-bit tile,
 * while at 9 rows and more this tile is faster. */
AI void tile_q8_512(const int A, const uint8_t *const *w, const qx *x, float (*res)[4], const int pf) {
    const int64_t nb = x->nb, cols = x->cols;
    const __m512i sel = sel_idx(0, 1);
    __m512 acc[SD_QA];
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i wv[4], wa[4];
        __mmask64 neg[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint8_t *p = w[k] + 34 * b + 2;
            const __m256i lo = _mm256_loadu_si256((const __m256i *)p);
            wv[k] = two ? _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)(p + 34)), 1)
                        : _mm512_inserti64x4(_mm512_setzero_si512(), lo, 0);
            wa[k] = _mm512_abs_epi8(wv[k]);
            neg[k] = _mm512_movepi8_mask(wv[k]);
        }
        if (pf) prefetch4(w, 34 * b, pf, 2);
        const __m512i csum = q8_csum512(wv);
        /* d of the 4 rows: lanes (q, r) = d_r of block b (q < 2) or b+1 */
        const uint8_t *w0 = w[0] + 34 * b, *w1 = w[1] + 34 * b, *w2 = w[2] + 34 * b, *w3 = w[3] + 34 * b;
        const __m128i h = two ? _mm_setr_epi16(ld16s(w0), ld16s(w1), ld16s(w2), ld16s(w3), ld16s(w0 + 34),
                                               ld16s(w1 + 34), ld16s(w2 + 34), ld16s(w3 + 34))
                              : _mm_setr_epi16(ld16s(w0), ld16s(w1), ld16s(w2), ld16s(w3), 0, 0, 0, 0);
        const __m512 dw = _mm512_permutexvar_ps(sel, _mm512_castps256_ps512(_mm256_cvtph_ps(h)));
#pragma GCC unroll 8
        for (int a = 0; a < A; a++) {
            const int8_t *xp = x->q + a * cols + 32 * b;
            const float *xd = x->d + a * nb + b;
            const __m256i xlo = _mm256_load_si256((const __m256i *)xp);
            const __m512i xv = two ? _mm512_inserti64x4(_mm512_castsi256_si512(xlo), _mm256_load_si256((const __m256i *)(xp + 32)), 1)
                                   : _mm512_inserti64x4(_mm512_setzero_si512(), xlo, 0);
            const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(xd[0]), _mm256_set1_ps(two ? xd[1] : 0.0f), 1);
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q8_dots512(wv, wa, neg, xv, csum)), _mm512_mul_ps(dw, dx), acc[a]);
        }
    }
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) store_fold(acc[a], res[a]);
}
static void run_q80_512(int A, const uint8_t *const *w, const qx *x, float (*res)[4], int pf) {
#define C(k) tile_q8_512(k, w, x, res, pf)
    QCASES(C)
#undef C
}

/* SD_Q4_K_X16 with all 16 rows of a group in one register (see tile_q4kx) */
AI void tile_q4kx512(const int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 2304 * sb;
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
        /* by 2, not 8: unrolled whole (2,000 instructions at 9 rows) the
         * tile ran near its in-cache speed with the weights in L2 but took
         * 1.5x to 2x that with them streamed from L3 or DRAM (Zen 5) */
#pragma GCC unroll 2
        for (int s = 0; s < 8; s++) {
            if (s < 4) x16_pf(G + 64 * s, lim);
            __m128i sc, mn;
            x16_scales(G, s, &sc, &mn);
            const __m512 D = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)), d16);
            const __m512 M = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn)), m16);
            __m512i is[SD_XA512];
            q4kx_sub512(A, G + 256 + 256 * s, x->q + 256 * sb + 32 * s, cols, lim, is);
#pragma GCC unroll 9
            for (int a = 0; a < A; a++) {
                const int64_t b = a * nb + 8 * sb + s;
                const __m512i i32 = q4kx_i32_512(is[a]);
                acc[a] = x16_min512(x16_step512(acc[a], i32, D, x->d[b]), M, x->s[b]);
            }
        }
    }
    x16_store512(A, acc, res);
}
static void run_q4kx512(int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q4kx512(k, g, x, res, lim)
    X512CASES(C)
#undef C
}

/* SD_Q6_K_X16 with all 16 rows of a group in one register (see tile_q6kx) */
AI void tile_q6kx512(const int A, const uint8_t *g, const qx *x, const int32_t *xo, float (*res)[16],
                     const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb, no = cols / 16;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 3360 * sb;
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        /* by 2, not 16: unrolled whole, the tile outgrows the op cache */
#pragma GCC unroll 2
        for (int j = 0; j < 16; j++) {
            const uint8_t *P = G + 288 + 192 * j;
            if (j < 5) x16_pf(G + 64 * j, lim);
            const __m512i S = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * j)));
            const __m512 D = _mm512_mul_ps(_mm512_cvtepi32_ps(S), d16);
            __m512i cq[4];
            q6x16_load512(P, lim, cq);
            const __m512i c0 = cq[0], c1 = cq[1], c2 = cq[2], c3 = cq[3];
#pragma GCC unroll 9
            for (int a = 0; a < A; a++) {
                const int8_t *xp = x->q + a * cols + 256 * sb + 16 * j;
                const __m512i o = _mm512_set1_epi32(xo[a * no + 16 * sb + j]);
                const __m512i t = q6x_dot512(o, c0, c1, c2, c3, xp);
                acc[a] = x16_step512(acc[a], t, D, x->d[a * nb + 8 * sb + j / 2]);
            }
        }
    }
    x16_store512(A, acc, res);
}
static void run_q6kx512(int A, const uint8_t *g, const qx *x, const int32_t *xo, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q6kx512(k, g, x, xo, res, lim)
    X512CASES(C)
#undef C
}

/* SD_Q4_0_X16, SD_Q4_1_X16 and SD_Q5_0_X16 with all 16 rows of a group in
 * one register (see tile_nibx16) */
AI void tile_nibx512(const int T, const int A, const uint8_t *g, const qx *x, float (*res)[16],
                     const uint8_t *lim) {
    const int64_t nb = x->nb, cols = x->cols;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + NX_BYTES(T) * b;
        x16_pf(G, lim);
        if (T == NX_Q50) x16_pf(G + 32, lim); /* qh ends in the next line when G is 32 past one */
        const __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        const __m512 M = T == NX_Q41 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)))
                                     : _mm512_mul_ps(D, _mm512_set1_ps(T == NX_Q40 ? -8.0f : -16.0f));
        const __m512i H = T == NX_Q50 ? _mm512_loadu_si512((const void *)(G + 32)) : m4;
        __m512i lo[4], hi[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            x16_pf(G + NX_CODES(T) + 64 * q, lim);
            const __m512i c = _mm512_loadu_si512((const void *)(G + NX_CODES(T) + 64 * q));
            if (T == NX_Q50) {
                const __m512i hl = q < 2 ? _mm512_slli_epi16(H, 4 - 2 * q) : _mm512_srli_epi16(H, 2 * q - 4);
                const __m512i hh = q < 2 ? _mm512_slli_epi16(H, 3 - 2 * q) : _mm512_srli_epi16(H, 2 * q - 3);
                lo[q] = _mm512_ternarylogic_epi32(_mm512_and_si512(c, m4), hl, m10, 0xf8);
                hi[q] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(c, 4), m4), hh, m10, 0xf8);
            } else {
                lo[q] = _mm512_and_si512(c, m4);
                hi[q] = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
            }
        }
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            const int8_t *xp = x->q + a * cols + 32 * b;
            const __m512i t = nib_dot512(lo, hi, xp);
            acc[a] = _mm512_fmadd_ps(M, _mm512_set1_ps(x->s[a * nb + b]), x16_step512(acc[a], t, D, x->d[a * nb + b]));
        }
    }
    x16_store512(A, acc, res);
}
static void run_nibx512(int T, int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C0(k) tile_nibx512(NX_Q40, k, g, x, res, lim)
#define C1(k) tile_nibx512(NX_Q41, k, g, x, res, lim)
#define C2(k) tile_nibx512(NX_Q50, k, g, x, res, lim)
    if (T == NX_Q40) {
        X512CASES(C0)
    } else if (T == NX_Q41) {
        X512CASES(C1)
    } else {
        X512CASES(C2)
    }
#undef C0
#undef C1
#undef C2
}

/* SD_Q8_0_X16 with all 16 rows in one register. VNNI: the activations as
 * unsigned x+128 (xu8, one copy a call) against the signed codes, and
 * 128 * sum(code) per row and block (8 vpdpbusd with 0x80 bytes, once per
 * block for all activation rows) subtracted. Without VNNI the sign trick
 * of tile_q80x. */
AI void tile_q80x512(const int A, const uint8_t *g, const qx *x, const uint8_t *xu, float (*res)[16],
                     const uint8_t *lim) {
    const int64_t nb = x->nb, cols = x->cols;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + 544 * b;
        x16_pf(G, lim);
        const __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        __m512i w[8];
#pragma GCC unroll 9
        for (int q = 0; q < 8; q++) {
            x16_pf(G + 32 + 64 * q, lim);
            w[q] = _mm512_loadu_si512((const void *)(G + 32 + 64 * q));
        }
        const __m512i corr = q80x_corr512(w);
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            const int64_t off = a * cols + 32 * b;
            acc[a] = x16_step512(acc[a], q80x_dot512(w, corr, x->q, xu, off), D, x->d[a * nb + b]);
        }
    }
    x16_store512(A, acc, res);
}
static void run_q80x512(int A, const uint8_t *g, const qx *x, const uint8_t *xu, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q80x512(k, g, x, xu, res, lim)
    X512CASES(C)
#undef C
}

/* The SD_*_X16 types: groups of 16 rows (r0, r1 multiples of 16), passes
 * of balanced width over the activation rows (at most SD_XA512); the first
 * streams the group. */
static void mm_x16(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const sd_weight *w = j->w;
    const uint32_t t = w->type;
    const int q6 = t == SD_Q6_K_X16;
    const int nx = t == SD_Q4_0_X16 ? NX_Q40 : t == SD_Q4_1_X16 ? NX_Q41 : t == SD_Q5_0_X16 ? NX_Q50 : -1;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint8_t *base = w->data, *lim = base + (size_t)r1 * w->row_bytes;
    enum { XA = SD_XA512 };
    float res[XA][16];
    for (int64_t v = 0; v < SD_PF && (size_t)r0 * w->row_bytes + v < (size_t)r1 * w->row_bytes; v += 64)
        _mm_prefetch((const char *)base + (size_t)r0 * w->row_bytes + v, SD_PFH);
    int i0 = 0;
    for (int64_t r = r0; r < r1 && i0 < j->n; r += 16) {
        const uint8_t *g = base + (size_t)r * w->row_bytes;
        for (int i = i0; i < j->n;) {
            const int left = j->n - i, passes = (left + XA - 1) / XA, A = (left + passes - 1) / passes;
            const uint8_t *pl = i == i0 ? lim : NULL;
            const qx xq = {j->xq + (size_t)i * cols, j->xd + (size_t)i * nb, j->xs + (size_t)i * nb, cols, nb};
            const int32_t *xo = q6 ? j->xo16 + (size_t)i * (cols / 16) : NULL;
            if (q6) run_q6kx512(A, g, &xq, xo, res, pl);
            else if (t == SD_Q4_K_X16) run_q4kx512(A, g, &xq, res, pl);
            else if (nx >= 0) run_nibx512(nx, A, g, &xq, res, pl);
            else run_q80x512(A, g, &xq, j->xu8 ? j->xu8 + (size_t)i * cols : NULL, res, pl);
            x16_put(j, i, A, r, res);
            i += A;
        }
    }
}

#endif
