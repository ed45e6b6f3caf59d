/* The 256-bit tiles over the file's block layouts (GGUF Q4_0, Q4_1, Q5_0,
 * Q4_K, Q6_K, Q8_0, and F32 / F16 / BF16): inline bodies that each SIMD
 * matrix product file compiles with its own ISA flags (mm_simd.h), plus
 * one non-inlined entry per type (run_*) with the tile widths unrolled.
 *
 * 4-bit types (tile_q4p, the hot path of a Q4_1 model): two consecutive
 * blocks of a row are unpacked together (one 256-bit register of 32 bytes
 * of nibbles: and/shift/and gives elements 0..15 and 16..31 of both
 * blocks), against activations stored in the matching "pair" layout
 * (cpu_int.h). vpmaddubsw multiplies unsigned nibbles by signed int8
 * activations (no saturation: 4*15*127 < 32767 after adding the two
 * halves), vpmaddwd with ones widens to int32, and two rounds of vphaddd
 * fold the 4 rows into one vector [r0..r3 of block 0 | r0..r3 of block 1]
 * that one FMA scales by d_w*d_x and another offsets by m_w*s_x (Q4_0:
 * m = -8 d). So per 8 (row, block) pairs: 4 loads + 12 ops to unpack, 16
 * multiply ops, 3 folds, 3 float ops, plus the scale gather.
 *
 * Q5_0 takes the same path: the fifth bits are expanded from qh to 0x10
 * in their bytes (vpshufb of the broadcast word, compare with the bit
 * masks) and or'ed into the nibbles; codes 0..31 keep maddubs exact
 * (2*31*127*2 < 32767), the -16 offset is m = -16 d.
 *
 * Q4_K (tile_q4k): a 32-byte chunk of a super-block holds sub-block 2c in
 * its low nibbles and 2c+1 in its high ones, element i at byte i. Loading
 * its two 16-byte halves as the two halves of nib32 gives exactly the
 * pair layout again ([2c: 0..15 | 2c+1: 0..15] and [2c: 16..31 | 2c+1:
 * 16..31]), and sub-block s is activation block 8*sb + s, so the pair
 * step above runs unchanged with D = d*sc and M = -dmin*mn per lane. The
 * 6-bit scales of the 4 rows are unpacked once per super-block and
 * interleaved with vpunpck so that chunk c's 8 lanes are 8 bytes apart.
 *
 * Q6_K (tile_q6k): each activation block j of a super-block is one 32-byte
 * register of codes (ql nibbles | qh bit pairs << 4, in element order).
 * maddubs(code, x) - maddubs(32, x) is the int16 sum of (code-32)*x
 * pairs (|.| <= 2*32*127), the second term shared by the 4 rows; vpmaddwd
 * with the two sub-blocks' int8 scales ([s_2j x8 | s_2j+1 x8]) applies
 * the 16-element scales in the widening step. VNNI keeps this form: the
 * scales must multiply int16 lanes.
 *
 * Q8_0 (tile_q8, the LM head): blocks one at a time in natural layout;
 * weights are signed, so the sign trick maddubs(|w|, sign(x, w)) makes the
 * unsigned operand (2*128*127 < 32767).
 *
 * Float types: F32 loads, F16 by vcvtph2ps, BF16 by zero-extending to 32
 * bits and shifting left 16; 4 x A accumulators of 8 lanes each. */
#ifndef SD_CPU_MM_TILES256_H
#define SD_CPU_MM_TILES256_H

#include "kernels/cpu/mm_simd.h"

/* Blocks one at a time (natural activation layout); used for the odd last
 * block of tile_q4p, so x points at that block. */
AI void tile_q4_one(const int A, const int kind, const uint8_t *const *w, const qx *x,
                    float (*res)[4]) {
    const int qo = KIND_QO(kind);
    __m256 acc[SD_QA];
    const uint8_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    __m128 d4, m4;
    if (kind == K_Q41) {
        /* (d, m) pairs of the 4 rows -> [d0 m0 d1 m1 d2 m2 d3 m3] */
        const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32((int)ld32(w0), (int)ld32(w1),
                                                        (int)ld32(w2), (int)ld32(w3)));
        const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
        d4 = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        m4 = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        m4 = _mm_mul_ps(m4, _mm_set1_ps(0.5f));
    } else {
        d4 = _mm_cvtph_ps(_mm_setr_epi16(ld16s(w0), ld16s(w1), ld16s(w2), ld16s(w3), 0, 0, 0, 0));
        m4 = _mm_mul_ps(d4, _mm_set1_ps(kind == K_Q50 ? -8.0f : -4.0f)); /* offset*d, halved */
    }
    const __m256 d8 = _mm256_set_m128(d4, d4), mh8 = _mm256_set_m128(m4, m4);
    __m256i u[4];
    for (int k = 0; k < 4; k++) {
        u[k] = nib32(w[k] + qo);
        if (kind == K_Q50) u[k] = _mm256_or_si256(u[k], hbit32(ld32(w[k] + 2)));
    }
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) {
        const __m256i xv = _mm256_load_si256((const __m256i *)(x->q + a * x->cols));
        const __m256i h = fold4(mdot_u(u[0], xv), mdot_u(u[1], xv), mdot_u(u[2], xv), mdot_u(u[3], xv));
        const __m256 sc = _mm256_mul_ps(d8, _mm256_broadcast_ss(x->d + a * x->nb));
        acc[a] = _mm256_mul_ps(_mm256_cvtepi32_ps(h), sc);
        acc[a] = _mm256_fmadd_ps(mh8, _mm256_broadcast_ss(x->s + a * x->nb), acc[a]);
    }
    for (int a = 0; a < A; a++) _mm_storeu_ps(res[a], sum_halves(acc[a]));
}

/* One step of the pair layout for 4 weight rows: l[k], h[k] hold row k's
 * codes of two blocks ([b0: 0..15 | b1: 0..15] and [b0: 16..31 | b1:
 * 16..31]) against activation pair p; the vphaddd fold gives [r0..r3 of
 * b0 | r0..r3 of b1], every lane one complete (row, block) sum, scaled by
 * D*d_x and offset by M*s_x (D, M in the same lane order; ds8 holds d_x
 * and s_x of the pair, see cpu_int.h). */
AI void pair_acc(const int A, const __m256i *l, const __m256i *h, const __m256 D, const __m256 M,
                 const int8_t *xqp, const float *xds8, const int64_t cols, const int64_t np,
                 const int64_t p, __m256 *acc) {
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) {
        const int8_t *xp = xqp + a * cols + 64 * p;
        const __m256i xl = _mm256_load_si256((const __m256i *)xp);
        const __m256i xh = _mm256_load_si256((const __m256i *)(xp + 32));
        const __m256i hsum = fold4(dot2(l[0], xl, h[0], xh), dot2(l[1], xl, h[1], xh),
                                   dot2(l[2], xl, h[2], xh), dot2(l[3], xl, h[3], xh));
        const float *ds = xds8 + (a * np + p) * 16;
        acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum), _mm256_mul_ps(D, _mm256_load_ps(ds)), acc[a]);
        acc[a] = _mm256_fmadd_ps(M, _mm256_load_ps(ds + 8), acc[a]);
    }
}

/* Prefetch for a tile's 4 row streams at byte pos of their rows (w: the
 * rows' starts, rb: their stride; a tile's pf is rb when it streams, else
 * 0). The rows of a group and the groups follow each other in memory, so
 * stream k goes on in row k+4 of the next group once row k ends; `lines`
 * lines are fetched PF_ROW = SD_PF/4 bytes ahead in that sequence: row
 * k + 4m at pos + PF_ROW - m*rb, m = (pos + PF_ROW) / rb. The 4 streams
 * together then run SD_PF bytes ahead of the reads whether the rows are
 * narrower than PF_ROW (m counts whole groups ahead) or wider (m = 0 until
 * the row's last PF_ROW bytes, then the next group's row starts arriving),
 * so a wide row's next group (Q6_K, 8960 columns) is not left to demand
 * misses. */
enum { PF_ROW = SD_PF / 4 };
AI void prefetch4(const uint8_t *const *w, int64_t pos, int rb, int lines) {
    const uint32_t m = (uint32_t)(pos + PF_ROW) / (uint32_t)rb;
    const int64_t off = pos + PF_ROW + (int64_t)3 * rb * m;
    for (int l = 0; l < lines; l++)
        for (int k = 0; k < 4; k++) _mm_prefetch((const char *)w[k] + off + 64 * l, SD_PFH);
}

/* 32-element blocks over block pairs (the main path; tile_q4_one above is
 * its odd-tail step). Two blocks of one row load as one register: low
 * nibbles are elements 0..15 of both blocks, high nibbles 16..31, matching
 * the pair layout of the activations (cpu_int.h), so one and + one shift + one
 * and unpack 64 weights (Q5_0: plus the fifth bits). */
AI void tile_q4p(const int A, const int kind, const uint8_t *const *w, const qx *x,
                 const int8_t *xqp, const float *xds8, float (*res)[4], const int pf,
                 const int64_t p0) {
    const int bs = KIND_BS(kind), qo = KIND_QO(kind);
    const int64_t nb = x->nb, np = nb / 2, cols = x->cols;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[SD_QA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    const uint8_t *wp[4] = {w[0] + 2 * bs * p0, w[1] + 2 * bs * p0, w[2] + 2 * bs * p0, w[3] + 2 * bs * p0};
    for (int64_t p = p0; p < np; p++) {
        const uint8_t *w0 = wp[0], *w1 = wp[1], *w2 = wp[2], *w3 = wp[3];
        __m256 D, M;
        if (kind == K_Q41) {
            const __m256 f01 = _mm256_cvtph_ps(_mm_setr_epi32((int)ld32(w0), (int)ld32(w1),
                                                              (int)ld32(w0 + bs), (int)ld32(w1 + bs)));
            const __m256 f23 = _mm256_cvtph_ps(_mm_setr_epi32((int)ld32(w2), (int)ld32(w3),
                                                              (int)ld32(w2 + bs), (int)ld32(w3 + bs)));
            D = _mm256_shuffle_ps(f01, f23, _MM_SHUFFLE(2, 0, 2, 0));
            M = _mm256_shuffle_ps(f01, f23, _MM_SHUFFLE(3, 1, 3, 1));
        } else {
            D = _mm256_cvtph_ps(_mm_setr_epi16(ld16s(w0), ld16s(w1), ld16s(w2), ld16s(w3),
                                               ld16s(w0 + bs), ld16s(w1 + bs), ld16s(w2 + bs),
                                               ld16s(w3 + bs)));
            M = _mm256_mul_ps(D, _mm256_set1_ps(kind == K_Q50 ? -16.0f : -8.0f));
        }
        __m256i l[4], h[4];
        for (int k = 0; k < 4; k++) {
            const __m256i v = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(wp[k] + qo))),
                _mm_loadu_si128((const __m128i *)(wp[k] + bs + qo)), 1);
            l[k] = _mm256_and_si256(v, m4);
            h[k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (kind == K_Q50) {
                const uint32_t q0 = ld32(wp[k] + 2), q1 = ld32(wp[k] + bs + 2);
                l[k] = _mm256_or_si256(l[k], hbit32((q0 & 0xffffu) | q1 << 16));
                h[k] = _mm256_or_si256(h[k], hbit32(q0 >> 16 | (q1 & 0xffff0000u)));
            }
        }
        if (pf) prefetch4(w, wp[0] - w[0], pf, 1); /* the first pass over these rows streams them from DRAM */
        pair_acc(A, l, h, D, M, xqp, xds8, cols, np, p, acc);
        for (int k = 0; k < 4; k++) wp[k] += 2 * bs;
    }
    for (int a = 0; a < A; a++) _mm_storeu_ps(res[a], sum_halves(acc[a]));
    if (nb & 1) { /* odd last block: one natural-layout step */
        const qx xt = {xqp + 64 * np, x->d + 2 * np, x->s + 2 * np, cols, nb};
        float tail[SD_QA][4];
        tile_q4_one(A, kind, wp, &xt, tail);
        for (int a = 0; a < A; a++)
            for (int k = 0; k < 4; k++) res[a][k] += tail[a][k];
    }
}

/* sd_q4_k_scales of one super-block in a register (bytes sc0..7 mn0..7),
 * its masks on 32-bit lanes: [u0 u2 u1 u2] >> (0 0 0 4) and [u0 u0 u1 u1]
 * >> 2 of the 12 bytes u0..u2 (the 16-byte load reads 4 bytes of the
 * nibbles after them). Through memory instead (4 word stores, one 16-byte
 * load) every super-block paid a store-forwarding stall. */
AI __m128i q4k_scales_v(const uint8_t *blk) {
    const __m128i U = _mm_loadu_si128((const __m128i *)(blk + 4));
    const __m128i P = _mm_shuffle_epi32(U, _MM_SHUFFLE(2, 1, 2, 0));
    const __m128i Q = _mm_shuffle_epi32(U, _MM_SHUFFLE(1, 1, 0, 0));
    return _mm_or_si128(
        _mm_and_si128(_mm_srlv_epi32(P, _mm_setr_epi32(0, 0, 0, 4)),
                      _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)),
        _mm_and_si128(_mm_srli_epi32(Q, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

/* Q4_K over super-blocks: per chunk c, D = d*sc and M = -dmin*mn of
 * sub-blocks (2c, 2c+1) in the fold's lane order [r0..r3 | r0..r3]. */
AI void tile_q4k(const int A, const uint8_t *const *w, const qx *x, const int8_t *xqp,
                 const float *xds8, float (*res)[4], const int pf) {
    const int64_t np = x->nb / 2, cols = x->cols, nsb = cols / 256;
    __m256 acc[SD_QA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    const uint8_t *wp[4] = {w[0], w[1], w[2], w[3]};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const __m256 f = _mm256_cvtph_ps(_mm_setr_epi32((int)ld32(wp[0]), (int)ld32(wp[1]),
                                                        (int)ld32(wp[2]), (int)ld32(wp[3])));
        const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
        const __m128 d4 = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        const __m128 m4 = _mm_sub_ps(_mm_setzero_ps(), _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
        const __m256 dd = _mm256_set_m128(d4, d4), mm = _mm256_set_m128(m4, m4);
        /* rows' [sc0..7 mn0..7] -> SC[0] = bytes (s, r) at 4s+r for s < 4,
         * SC[1] for s >= 4, MN likewise */
        const __m128i R0 = q4k_scales_v(wp[0]), R1 = q4k_scales_v(wp[1]), R2 = q4k_scales_v(wp[2]),
                      R3 = q4k_scales_v(wp[3]);
        const __m128i t01 = _mm_unpacklo_epi8(R0, R1), t23 = _mm_unpacklo_epi8(R2, R3);
        const __m128i u01 = _mm_unpackhi_epi8(R0, R1), u23 = _mm_unpackhi_epi8(R2, R3);
        const __m128i SC[2] = {_mm_unpacklo_epi16(t01, t23), _mm_unpackhi_epi16(t01, t23)};
        const __m128i MN[2] = {_mm_unpacklo_epi16(u01, u23), _mm_unpackhi_epi16(u01, u23)};
        if (pf) prefetch4(w, wp[0] - w[0], pf, 3);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m128i scb = c & 1 ? _mm_srli_si128(SC[c >> 1], 8) : SC[c >> 1];
            const __m128i mnb = c & 1 ? _mm_srli_si128(MN[c >> 1], 8) : MN[c >> 1];
            const __m256 D = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(scb)), dd);
            const __m256 M = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mnb)), mm);
            __m256i l[4], h[4];
            for (int k = 0; k < 4; k++) {
                l[k] = nib32(wp[k] + 16 + 32 * c);
                h[k] = nib32(wp[k] + 32 + 32 * c);
            }
            pair_acc(A, l, h, D, M, xqp, xds8, cols, np, 4 * sb + c, acc);
        }
        for (int k = 0; k < 4; k++) wp[k] += 144;
    }
    for (int a = 0; a < A; a++) _mm_storeu_ps(res[a], sum_halves(acc[a]));
}

/* Q6_K over super-blocks, one activation block j (two sub-blocks) a step. */
AI void tile_q6k(const int A, const uint8_t *const *w, const qx *x, float (*res)[4], const int pf) {
    const int64_t nsb = x->cols / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), c32 = _mm256_set1_epi8(32);
    const __m256i scsel = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3,
                                           2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    __m256 acc[SD_QA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    const uint8_t *wp[4] = {w[0], w[1], w[2], w[3]};
    for (int64_t sb = 0; sb < nsb; sb++) {
        const __m128 d4 = _mm_cvtph_ps(_mm_setr_epi16(ld16s(wp[0] + 208), ld16s(wp[1] + 208),
                                                      ld16s(wp[2] + 208), ld16s(wp[3] + 208), 0, 0, 0, 0));
        const __m256 d8 = _mm256_set_m128(d4, d4);
        __m256i S[4]; /* the 16 int8 scales of each row as int16 */
        for (int k = 0; k < 4; k++)
            S[k] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wp[k] + 192)));
        if (pf) prefetch4(w, wp[0] - w[0], pf, 4);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const int hf = j >> 2, kk = j & 3;
            __m256i q[4], sc[4];
            for (int k = 0; k < 4; k++) {
                const __m256i ql = _mm256_loadu_si256((const __m256i *)(wp[k] + 64 * hf + 32 * (kk & 1)));
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(wp[k] + 128 + 32 * hf));
                const __m256i lo = _mm256_and_si256(kk < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
                const __m256i top = kk == 0 ? _mm256_slli_epi16(qh, 4)
                                    : kk == 1 ? _mm256_slli_epi16(qh, 2)
                                    : kk == 2 ? qh : _mm256_srli_epi16(qh, 2);
                q[k] = _mm256_or_si256(lo, _mm256_and_si256(top, m30));
                sc[k] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(S[k], _mm256_set1_epi32(j)), scsel);
            }
#pragma GCC unroll 8
            for (int a = 0; a < A; a++) {
                const __m256i xv = _mm256_load_si256((const __m256i *)(x->q + a * x->cols + 256 * sb + 32 * j));
                const __m256i m16 = _mm256_maddubs_epi16(c32, xv);
#define P6(k) _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q[k], xv), m16), sc[k])
                const __m256i hsum = fold4(P6(0), P6(1), P6(2), P6(3));
#undef P6
                const __m256 s = _mm256_mul_ps(d8, _mm256_broadcast_ss(x->d + a * x->nb + 8 * sb + j));
                acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum), s, acc[a]);
            }
        }
        for (int k = 0; k < 4; k++) wp[k] += 210;
    }
    for (int a = 0; a < A; a++) _mm_storeu_ps(res[a], sum_halves(acc[a]));
}

AI void tile_q8(const int A, const uint8_t *const *w, const qx *x, float (*res)[4], const int pf) {
    const int64_t nb = x->nb;
    __m256 acc[SD_QA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    const uint8_t *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3];
    for (int64_t b = 0; b < nb; b++, w0 += 34, w1 += 34, w2 += 34, w3 += 34) {
        const __m128 d4 =
            _mm_cvtph_ps(_mm_setr_epi16(ld16s(w0), ld16s(w1), ld16s(w2), ld16s(w3), 0, 0, 0, 0));
        const __m256 d8 = _mm256_set_m128(d4, d4);
        const __m256i s0 = _mm256_loadu_si256((const __m256i *)(w0 + 2)),
                      s1 = _mm256_loadu_si256((const __m256i *)(w1 + 2)),
                      s2 = _mm256_loadu_si256((const __m256i *)(w2 + 2)),
                      s3 = _mm256_loadu_si256((const __m256i *)(w3 + 2));
        if (pf) prefetch4(w, 34 * b, pf, 1);
        const __m256i a0 = _mm256_sign_epi8(s0, s0), a1 = _mm256_sign_epi8(s1, s1),
                      a2 = _mm256_sign_epi8(s2, s2), a3 = _mm256_sign_epi8(s3, s3);
#pragma GCC unroll 8
        for (int a = 0; a < A; a++) {
            const __m256i xv = _mm256_load_si256((const __m256i *)(x->q + a * x->cols + 32 * b));
            const __m256i h = fold4(mdot_u(a0, _mm256_sign_epi8(xv, s0)),
                                    mdot_u(a1, _mm256_sign_epi8(xv, s1)),
                                    mdot_u(a2, _mm256_sign_epi8(xv, s2)),
                                    mdot_u(a3, _mm256_sign_epi8(xv, s3)));
            const __m256 sc = _mm256_mul_ps(d8, _mm256_broadcast_ss(x->d + a * nb + b));
            acc[a] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), sc, acc[a]);
        }
    }
    for (int a = 0; a < A; a++) _mm_storeu_ps(res[a], sum_halves(acc[a]));
}

/* ---- float tiles ------------------------------------------------------------- */
AI __m256 ldw8(const int type, const uint8_t *row, int64_t c) {
    if (type == SD_F32) return _mm256_loadu_ps((const float *)row + c);
    const __m128i h = _mm_loadu_si128((const __m128i *)(row + 2 * c));
    if (type == SD_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
AI float ldw1(const int type, const uint8_t *row, int64_t c) {
    if (type == SD_F32) {
        float v;
        memcpy(&v, row + 4 * c, 4);
        return v;
    }
    unsigned short h;
    memcpy(&h, row + 2 * c, 2);
    if (type == SD_F16) return _cvtsh_ss(h);
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, 4);
    return v;
}

/* hsum of 4 vectors -> [s0 s1 s2 s3] */
AI __m128 hsum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
    return sum_halves(t);
}

AI void tile_f(const int A, const int type, const uint8_t *const *w, const float *x,
               int64_t cols, float (*res)[4], const int pf) {
    __m256 acc[SD_FA][4];
    for (int a = 0; a < A; a++)
        for (int k = 0; k < 4; k++) acc[a][k] = _mm256_setzero_ps();
    const int64_t c8 = cols & ~(int64_t)7;
    for (int64_t c = 0; c < c8; c += 8) {
        const __m256 v0 = ldw8(type, w[0], c), v1 = ldw8(type, w[1], c),
                     v2 = ldw8(type, w[2], c), v3 = ldw8(type, w[3], c);
        if (pf && (c & 15) == 0) /* one line per row every 64 bytes of F16 */
            prefetch4(w, (type == SD_F32 ? 4 : 2) * c, pf, 1);
#pragma GCC unroll 8
        for (int a = 0; a < A; a++) {
            const __m256 xv = _mm256_loadu_ps(x + a * cols + c);
            acc[a][0] = _mm256_fmadd_ps(v0, xv, acc[a][0]);
            acc[a][1] = _mm256_fmadd_ps(v1, xv, acc[a][1]);
            acc[a][2] = _mm256_fmadd_ps(v2, xv, acc[a][2]);
            acc[a][3] = _mm256_fmadd_ps(v3, xv, acc[a][3]);
        }
    }
    for (int a = 0; a < A; a++) {
        _mm_storeu_ps(res[a], hsum4(acc[a][0], acc[a][1], acc[a][2], acc[a][3]));
        for (int64_t c = c8; c < cols; c++) {
            const float xv = x[a * cols + c];
            for (int k = 0; k < 4; k++) res[a][k] += ldw1(type, w[k], c) * xv;
        }
    }
}

/* kind: K_Q40, K_Q41 or K_Q50 (pair layout), 3 for Q4_K */
static void run_pairs(int A, int kind, const uint8_t *const *w, const qx *x, const int8_t *xqp,
                      const float *xds8, float (*res)[4], int pf) {
#define C41(k) tile_q4p(k, K_Q41, w, x, xqp, xds8, res, pf, 0)
#define C40(k) tile_q4p(k, K_Q40, w, x, xqp, xds8, res, pf, 0)
#define C50(k) tile_q4p(k, K_Q50, w, x, xqp, xds8, res, pf, 0)
#define C4K(k) tile_q4k(k, w, x, xqp, xds8, res, pf)
    switch (kind) {
    case K_Q41: QCASES(C41) break;
    case K_Q40: QCASES(C40) break;
    case K_Q50: QCASES(C50) break;
    default: QCASES(C4K) break;
    }
#undef C41
#undef C40
#undef C50
#undef C4K
}
static void run_q6k(int A, const uint8_t *const *w, const qx *x, float (*res)[4], int pf) {
#define C(k) tile_q6k(k, w, x, res, pf)
    QCASES(C)
#undef C
}
static void run_q80(int A, const uint8_t *const *w, const qx *x, float (*res)[4], int pf) {
#define C(k) tile_q8(k, w, x, res, pf)
    QCASES(C)
#undef C
}
static void run_f32(int A, const uint8_t *const *w, const float *x, int64_t cols, float (*res)[4],
                    int pf) {
#define C(k) tile_f(k, SD_F32, w, x, cols, res, pf)
    FCASES(C)
#undef C
}
static void run_f16(int A, const uint8_t *const *w, const float *x, int64_t cols, float (*res)[4],
                    int pf) {
#define C(k) tile_f(k, SD_F16, w, x, cols, res, pf)
    FCASES(C)
#undef C
}
static void run_bf16(int A, const uint8_t *const *w, const float *x, int64_t cols, float (*res)[4],
                    int pf) {
#define C(k) tile_f(k, SD_BF16, w, x, cols, res, pf)
    FCASES(C)
#undef C
}

#endif
