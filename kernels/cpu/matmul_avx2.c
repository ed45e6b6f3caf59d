/* AVX2 + FMA + F16C matrix products and activation quantizer.
 * matmul_avx512.c includes this file with SD_FN/SD_QA/SD_FA redefined, so
 * the same tiles are compiled again with EVEX encodings and 32 registers
 * (wider activation tiles); matmul_avx512vnni.c once more with SD_VNNI,
 * which turns each vpmaddubsw + vpmaddwd(ones) pair into one vpdpbusd
 * (exact int32 sums either way, so the results are the same bits).
 *
 * Tiles. A tile is 4 weight rows x A activation rows, looped over the whole
 * row length: each weight block is loaded and unpacked once and used for A
 * activation rows (A = 1 for decode, up to SD_QA / SD_FA for prefill), and
 * each activation block is used for 4 weight rows.
 *
 * 4-bit types (tile_q4p, the hot path of a Q4_1 model): two consecutive
 * blocks of a row are unpacked together (one 256-bit register of 32 bytes
 * of nibbles: and/shift/and gives elements 0..15 and 16..31 of both
 * blocks), against activations stored in the matching "pair" layout
 * (cpu.h). vpmaddubsw multiplies unsigned nibbles by signed int8
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
 * bits and shifting left 16; 4 x A accumulators of 8 lanes each.
 *
 * The first activation group over a tile's rows streams the weights from
 * DRAM (decode, and the few rows of a speculative verification): its 4 row
 * streams prefetch SD_PF bytes ahead of the reads (prefetch4), into L2
 * (prefetcht1), not L1: a core has far fewer L1 miss buffers than lines in
 * flight at DRAM latency, so L1-directed prefetches kept one core near
 * 10 GB/s. Measured with weights cold, 1 thread, AMD EPYC (Zen 4): Q4_K
 * 8960x1536 8.6 -> 13.5-18 GB/s, Q6_K 1536x8960 9.0 -> 17.1, Q8_0
 * 49152x576 7.8 -> 20.8 (T0 at 4096 bytes -> T1 at 12288). Tails: a group of fewer than 4 rows repeats its last row (the
 * extra results are dropped), so every tile has the same shape. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/common/wtype.h"

#ifndef SD_FN
#define SD_FN(name) name##_avx2
#define SD_QA 4 /* activation rows per quantized tile */
#define SD_FA 2 /* activation rows per float tile */
#endif

#define AI static inline __attribute__((always_inline))
#ifndef SD_PF
#define SD_PF 12288
#endif
#ifndef SD_PFH
#define SD_PFH _MM_HINT_T1
#endif
/* The repacked tiles' second prefetch, into L1, SD_PF0 bytes ahead (x16_pf;
 * 0: none). Measured only on the AVX-512 Xeon, so only its builds take it. */
#ifndef SD_PF0
#ifdef __AVX512F__
#define SD_PF0 1024
#else
#define SD_PF0 0
#endif
#endif

AI uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
AI short ld16s(const uint8_t *p) {
    short v;
    memcpy(&v, p, 2);
    return v;
}

/* 16 bytes of nibbles -> 32 bytes: elements 0..15 (low nibbles) in the
 * low 128 bits, 16..31 (high nibbles) in the high 128 bits. */
AI __m256i nib32(const uint8_t *p) {
    const __m128i v = _mm_loadu_si128((const __m128i *)p);
    const __m256i t = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(t, _mm256_set1_epi8(0x0f));
}

/* int32 sums of 4 rows, lanes [r0 r1 r2 r3 | r0 r1 r2 r3] (8 partials each
 * folded to 2: the two 128-bit halves still need adding). */
AI __m256i fold4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
}
/* int32 lanes of sums of 4 products u8 * s8 (wu unsigned, x signed). */
AI __m256i mdot_u(__m256i wu, __m256i x) {
#ifdef SD_VNNI
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), wu, x);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wu, x), _mm256_set1_epi16(1));
#endif
}
/* mdot_u(l, xl) + mdot_u(h, xh); without VNNI the two int16 results are
 * added before widening (codes <= 31: 4*31*127 < 32767). */
AI __m256i dot2(__m256i l, __m256i xl, __m256i h, __m256i xh) {
#ifdef SD_VNNI
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), l, xl), h, xh);
#else
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(l, xl), _mm256_maddubs_epi16(h, xh)),
                             _mm256_set1_epi16(1));
#endif
}
/* 0x10 in byte i for each set bit i of m (Q5_0's fifth bits). */
AI __m256i hbit32(uint32_t m) {
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                         2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)m), sel), bits);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bits), _mm256_set1_epi8(0x10));
}

AI __m128 sum_halves(__m256 v) {
    return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
}

/* ---- quantized tiles ------------------------------------------------------- */
typedef struct qx {
    const int8_t *q; /* activation row 0 of the tile */
    const float *d, *s;
    int64_t cols, nb;
} qx;

/* Pair-layout kinds: 32-element blocks of bs bytes with the nibbles at qo. */
enum { K_Q40 = 0, K_Q41 = 1, K_Q50 = 2 };
#define KIND_BS(kind) (18 + 2 * (kind)) /* Q4_0 18, Q4_1 20, Q5_0 22 */
#define KIND_QO(kind) (2 + 2 * (kind))

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
 * and s_x of the pair, see cpu.h). */
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
 * the row's last PF_ROW bytes, then the next group's row starts arriving).
 * Measured before this scheme: 4096 bytes ahead of each stream's own
 * pointer left a wide row's next group (Q6_K, 8960 columns) to demand
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
 * the pair layout of the activations (cpu.h), so one and + one shift + one
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

/* One non-inlined entry per type, each with the tile widths unrolled. */
#define CASES_Q(CALL)                                                                      \
    switch (A) {                                                                           \
    case 1: CALL(1); break;                                                                \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    default: CALL(SD_QA_MAXCASE); break;                                                   \
    }

#if SD_QA == 4
#define SD_QA_MAXCASE 4
#define QCASES(CALL) CASES_Q(CALL)
#else
#define SD_QA_MAXCASE SD_QA
#define QCASES(CALL)                                                                       \
    switch (A) {                                                                           \
    case 1: CALL(1); break;                                                                \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    case 4: CALL(4); break;                                                                \
    case 5: CALL(5); break;                                                                \
    case 6: CALL(6); break;                                                                \
    case 7: CALL(7); break;                                                                \
    default: CALL(8); break;                                                               \
    }
#endif

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

/* ---- repacked Q4_K (SD_Q4_K_X16, cpu.h) ----------------------------------------
 * One 32-bit lane per weight row, so a sub-block's integer sums need no
 * fold: per 64-byte piece of codes, the low nibbles are 4 consecutive
 * codes of each row and the high nibbles the next 4, each multiplied with
 * 4 activation bytes broadcast to every lane. Half h of a group is 8 rows
 * (bytes 32h.. of each piece, lanes 8h.. of the scale bytes); the AVX-512
 * builds take tile_q4kx512 and the other 512-bit x16 tiles below, so the
 * 256-bit ones are AVX2 code (no VNNI). The 8 vpmaddubsw of a sub-block
 * add in int16 (8 * 2 * 15 * 127 = 30480 < 32767) before one vpmaddwd.
 * The scale and min apply per sub-block: two FMAs an activation row for 8
 * rows x 32 elements. A group is one contiguous stream: prefetch runs
 * SD_PF bytes ahead of it, never past lim (the end of the thread's rows):
 * each 64-byte load of codes, and each header line (scales, d) once,
 * prefetches the line SD_PF bytes after its own, right where it loads, so
 * prefetches and loads interleave one to one. A half tile (8 rows of a
 * 64-byte piece) prefetches the piece's line, so its first pass covers the
 * bytes the second pass reads. History, AVX-512 VNNI Xeon, cold weights,
 * 1 thread: all of a super-block's 36-53 prefetches at its start (before
 * 71f43c7) -> spread over its steps, 4-5 a step (Q4_K 8960 x 1536 1 row
 * 627-629 -> 580-581 us, Q6_K 1536 x 8960 934-940 -> 858-863, Q5_0 4864 x
 * 896 266-277 -> 244) -> one a load (this layout; see the note of its
 * commit for the figures). A copy of the 1-row Q4_K tile over 1 GiB on
 * huge pages streamed 14.4-14.8 GB/s with 4-5 a step and 16.7-17.1 with
 * one a load, against 15.9-16.4 for a plain 512-bit read loop and
 * 20.2-20.9 for the prefetched scalar loop of bench_model (one run, five
 * interleaved rounds). Then a second prefetch a load, into L1, SD_PF0 =
 * 1024 bytes ahead (the L2 one alone leaves each load an L2 hit to wait
 * for): 64 weights of the 1.5B's shapes in a row on huge pages, 1 thread,
 * mean of 8 rounds interleaved with a prefetched 8-byte read loop over the
 * same bytes, as a share of that loop: Q4_K 8960 x 1536 78.4% -> 83.8%
 * (15.3 -> 17.0 GB/s), Q6_K 1536 x 8960 75.8% -> 80.6% (15.4 -> 15.9).
 * 512, 2048 and 3072 bytes ahead were no better than 1024; a T0 prefetch
 * 12 KiB ahead in place of the L2 one took the 1.5B's 1-thread decode
 * from 14.7-15.0 to 12.4-12.7 tok/s. */
AI void x16_pf(const uint8_t *p, const uint8_t *lim) {
    if (lim && p + SD_PF < lim) _mm_prefetch((const char *)p + SD_PF, SD_PFH);
    if (SD_PF0 && lim && p + SD_PF0 < lim) _mm_prefetch((const char *)p + SD_PF0, _MM_HINT_T0);
}
/* sc and mn bytes of sub-block s (16 rows) from its 16 + 16 scale bytes */
AI void x16_scales(const uint8_t *G, const int s, __m128i *sc, __m128i *mn) {
    const __m128i m4 = _mm_set1_epi8(0x0f), m30 = _mm_set1_epi8(0x30);
    const __m128i v = _mm_loadu_si128((const __m128i *)(G + 64 + 16 * s));
    const __m128i h = _mm_loadu_si128((const __m128i *)(G + 192 + 16 * (s >> 1)));
    const __m128i hs = s & 1 ? h : _mm_slli_epi16(h, 4), hm = s & 1 ? _mm_srli_epi16(h, 2) : _mm_slli_epi16(h, 2);
    *sc = _mm_or_si128(_mm_and_si128(v, m4), _mm_and_si128(hs, m30));
    *mn = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(hm, m30));
}
/* Pins v to a register at this point of the code: keeps GCC from
 * computing all of a tile's products first and spilling them. */
#define KEEP(v) __asm__("" : "+x"(v))
AI __m256i bc4(const int8_t *p) { return _mm256_set1_epi32((int)ld32((const uint8_t *)p)); }

/* the 4-bit SD_*_X16 types: bytes of a block group, offset of its codes */
enum { NX_Q40 = 0, NX_Q41 = 1, NX_Q50 = 2 };
#define NX_BYTES(T) ((T) == NX_Q40 ? 288 : (T) == NX_Q41 ? 320 : 352)
#define NX_CODES(T) ((T) == NX_Q40 ? 32 : (T) == NX_Q41 ? 64 : 96)
#if !(defined(__AVX512F__) && defined(__AVX512BW__)) /* the AVX-512 builds use tile_q4kx512 */
/* Activation rows a pass of the 256-bit x16 tiles: 5, one more than the
 * other AVX2 tiles. A verification of gamma 4 (5 rows) then streams each
 * group once instead of in passes of 3 + 2, each of which unpacks the
 * codes and scales again. GCC spills some accumulators at 5 rows (16
 * registers); a spilled accumulator costs a load and a store per
 * sub-block, less than a second unpack. Measured on an AVX2-only Zen 3,
 * bench_cpu_kernels, previous pass width 4 -> 5, 1 thread, us: Q4Kx
 * 8960x1536 n = 5 1464 -> 1253-1285, n = 9 (3+3+3 -> 5+4) 2329-2344 ->
 * 2136-2163; Q41x 1536x576 n = 5 98-114 -> 80, n = 128 1902-1906 ->
 * 1756; Q50x 4864x896 n = 5 602-605 -> 473-474. Single passes of up to 8
 * rows were slower again at 7 and 8 rows (more spills). */
#define SD_XA 5
#define XCASES(CALL)                                                                       \
    switch (A) {                                                                           \
    case 1: CALL(1); break;                                                                \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    case 4: CALL(4); break;                                                                \
    default: CALL(5); break;                                                               \
    }
/* XCASES for tiles that see 2 or more rows (one row has its own tile) */
#define XCASES2(CALL)                                                                      \
    switch (A) {                                                                           \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    case 4: CALL(4); break;                                                                \
    default: CALL(5); break;                                                               \
    }
AI __m256 x16_step(__m256 acc, __m256i t, __m256 D, float dx) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(D, _mm256_set1_ps(dx)), acc);
}
AI __m256 x16_min(__m256 acc, __m256 M, float sx) { return _mm256_fnmadd_ps(M, _mm256_set1_ps(sx), acc); }

/* Both halves of a group in one pass, for 1-5 activation rows: each
 * activation broadcast feeds the codes of all 16 rows (two vpmaddubsw)
 * and the scale bytes are unpacked once. Per piece of codes every row's
 * two sums stay live (2A + 7 registers; at 5 rows GCC spills a few, which
 * costs less than a second broadcast of everything). Measured on an
 * AVX2-only Zen 3 against the previous tile (one half a pass, the two
 * halves one after the other), 8960 x 1536, cold weights, us, 1 / 2
 * threads: 1 row 682-692 / 374-400 -> 571-593 / 340-363; 3 rows 893-897 /
 * 441-456 -> 663-680 / 338-339; 4 rows 948-983 / 489-499 -> 859-869 /
 * 428-432; 5 rows 1160-1185 / 590-594 -> 953-965 / 493-498. */
AI void tile_q4kx(const int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
    __m256 acc[SD_XA][2];
    for (int a = 0; a < A; a++) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 2304 * sb;
        __m256 d8[2], m8[2];
        for (int h = 0; h < 2; h++) {
            d8[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * h)));
            m8[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * h)));
        }
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            if (s < 4) x16_pf(G + 64 * s, lim);
            __m128i sc, mn;
            x16_scales(G, s, &sc, &mn);
            __m256 D[2], M[2];
            for (int h = 0; h < 2; h++, sc = _mm_srli_si128(sc, 8), mn = _mm_srli_si128(mn, 8)) {
                D[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)), d8[h]);
                M[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)), m8[h]);
            }
            const int8_t *xs = x->q + 256 * sb + 32 * s;
            __m256i t[SD_XA][2];
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m256i lo[2], hi[2];
                x16_pf(G + 256 + 256 * s + 64 * q, lim);
                for (int h = 0; h < 2; h++) {
                    const __m256i c = _mm256_loadu_si256((const __m256i *)(G + 256 + 256 * s + 64 * q + 32 * h));
                    lo[h] = _mm256_and_si256(c, m4);
                    hi[h] = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
                }
                for (int a = 0; a < A; a++) {
                    const __m256i bl = bc4(xs + a * cols + 8 * q), bh = bc4(xs + a * cols + 8 * q + 4);
                    for (int h = 0; h < 2; h++) {
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], bl), _mm256_maddubs_epi16(hi[h], bh));
                        t[a][h] = q ? _mm256_add_epi16(t[a][h], p) : p;
                    }
                }
            }
            for (int a = 0; a < A; a++) {
                const int64_t b = a * nb + 8 * sb + s;
                for (int h = 0; h < 2; h++)
                    acc[a][h] = x16_min(x16_step(acc[a][h], _mm256_madd_epi16(t[a][h], one), D[h], x->d[b]), M[h], x->s[b]);
            }
        }
    }
    for (int a = 0; a < A; a++) _mm256_storeu_ps(res[a], acc[a][0]), _mm256_storeu_ps(res[a] + 8, acc[a][1]);
}
static void run_q4kx(int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q4kx(k, g, x, res, lim)
    XCASES(C)
#undef C
}

/* SD_Q6_K_X16, 8 rows (half hf of a group): per sub-block of 16, two
 * pieces of low nibbles and one of top bits give 4 code vectors (elements
 * 4k..4k+3 of each row); sum(code*x) + xo16 (-32*sum(x)) is the sub-block's
 * integer sum, which the row's scale times d times the activation block's
 * d turns into float. Two vpmaddubsw add in int16 (2 * 2 *
 * 63 * 127 < 32767) before each vpmaddwd. */
AI void tile_q6kx(const int A, const int hf, const uint8_t *g, const qx *x, const int32_t *xo,
                  float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb, no = cols / 16;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[SD_XA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 3360 * sb;
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * hf)));
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            if (j < 5) x16_pf(G + 64 * j, lim);
            for (int l = 0; l < 3; l++) x16_pf(G + 288 + 192 * j + 64 * l, lim);
            const uint8_t *P = G + 288 + 192 * j + 32 * hf;
            const __m256i S = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(G + 32 + 16 * j + 8 * hf)));
            const __m256 D = _mm256_mul_ps(_mm256_cvtepi32_ps(S), d8);
            const __m256i A0 = _mm256_loadu_si256((const __m256i *)P), A1 = _mm256_loadu_si256((const __m256i *)(P + 64));
            const __m256i H = _mm256_loadu_si256((const __m256i *)(P + 128));
            const __m256i c0 = _mm256_or_si256(_mm256_and_si256(A0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
            const __m256i c1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A0, 4), m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
            const __m256i c2 = _mm256_or_si256(_mm256_and_si256(A1, m4), _mm256_and_si256(H, m30));
            const __m256i c3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
#pragma GCC unroll 8
            for (int a = 0; a < A; a++) {
                const int8_t *xp = x->q + a * cols + 256 * sb + 16 * j;
                const __m256i one = _mm256_set1_epi16(1);
                const __m256i t = _mm256_add_epi32(
                    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(c0, bc4(xp)), _mm256_maddubs_epi16(c1, bc4(xp + 4))), one),
                    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(c2, bc4(xp + 8)), _mm256_maddubs_epi16(c3, bc4(xp + 12))), one));
                const __m256i i32 = _mm256_add_epi32(t, _mm256_set1_epi32(xo[a * no + 16 * sb + j]));
                acc[a] = x16_step(acc[a], i32, D, x->d[a * nb + 8 * sb + j / 2]);
            }
        }
    }
    for (int a = 0; a < A; a++) _mm256_storeu_ps(res[a] + 8 * hf, acc[a]);
}
static void run_q6kx(int A, const uint8_t *g, const qx *x, const int32_t *xo, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q6kx(k, 0, g, x, xo, res, lim), tile_q6kx(k, 1, g, x, xo, res, NULL)
    XCASES(C)
#undef C
}

/* Q5_0's fifth bits for piece q of 4 (see tile_nibx16), or'ed into its low
 * and high nibbles as 0x10 */
AI void q50_fifth(const __m256i H, const int q, const __m256i m10, __m256i *lo, __m256i *hi) {
    const __m256i hl = q < 2 ? _mm256_slli_epi16(H, 4 - 2 * q) : _mm256_srli_epi16(H, 2 * q - 4);
    const __m256i hh = q < 2 ? _mm256_slli_epi16(H, 3 - 2 * q) : _mm256_srli_epi16(H, 2 * q - 3);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(hl, m10));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(hh, m10));
}
/* SD_Q4_0_X16, SD_Q4_1_X16 and SD_Q5_0_X16 (T = NX_Q40, NX_Q41, NX_Q50),
 * 1-5 activation rows, both halves of a group in one pass (as tile_q4kx):
 * each broadcast feeds the codes of all 16 rows. Per block 4 pieces of low
 * and high nibbles; Q5_0 adds the fifth bits of all 32 elements of a half
 * from one register (bit j of byte 4r+e is element 4j+e: piece q's low
 * nibbles take bit 2q, its high ones bit 2q+1, each moved to 0x10 by a
 * shift). The offset term of a block is one FMA with the activation
 * block's sum (s): -8 d_w (Q4_0), +m (Q4_1), -16 d_w (Q5_0). Q4_0 and Q4_1
 * codes are at most 15, so a row's 8 vpmaddubsw of a block add in int16
 * (8 * 2 * 15 * 127 < 32767) before one vpmaddwd; Q5_0's (at most 31) take
 * one vpmaddwd a pair of pieces (4 * 2 * 31 * 127 < 32767). The integer
 * sums are exact, so the bits are those of the one-half-a-pass tile this
 * replaces. Measured on an AVX2-only Zen 3 against it, bench_cpu_kernels,
 * the faster of two interleaved runs (medians), us, 1 / 2 threads: Q50x
 * 4864 x 896, 5 rows 483 / 244 -> 371 / 193, 128 rows 10127 / 5186 ->
 * 7918 / 4043; Q40x 576 x 1536, 5 rows 80.5 / 47.9 -> 66.1 / 43.6; Q41x
 * 576 x 1536, 4 rows 77.7 / 45.4 -> 60.8 / 36.5, 5 rows 84.3 / 49.2 ->
 * 77.6 / 45.6. */
AI void tile_nibx16(const int T, const int A, const uint8_t *g, const qx *x, float (*res)[16],
                    const uint8_t *lim) {
    const int64_t nb = x->nb, cols = x->cols;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10), one = _mm256_set1_epi16(1);
    __m256 acc[SD_XA][2];
    for (int a = 0; a < A; a++) acc[a][0] = acc[a][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + NX_BYTES(T) * b;
        x16_pf(G, lim);
        if (T == NX_Q50) x16_pf(G + 32, lim); /* qh ends in the next line when G is 32 past one */
        const int8_t *xp = x->q + 32 * b;
        __m256i u[SD_XA][2], t[SD_XA][2];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256i lo[2], hi[2];
            x16_pf(G + NX_CODES(T) + 64 * q, lim);
            for (int h = 0; h < 2; h++) {
                const __m256i c = _mm256_loadu_si256((const __m256i *)(G + NX_CODES(T) + 64 * q + 32 * h));
                lo[h] = _mm256_and_si256(c, m4), hi[h] = _mm256_and_si256(_mm256_srli_epi16(c, 4), m4);
                if (T == NX_Q50)
                    q50_fifth(_mm256_loadu_si256((const __m256i *)(G + 32 + 32 * h)), q, m10, &lo[h], &hi[h]);
            }
            for (int a = 0; a < A; a++) {
                const __m256i bl = bc4(xp + a * cols + 8 * q), bh = bc4(xp + a * cols + 8 * q + 4);
                for (int h = 0; h < 2; h++) {
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], bl), _mm256_maddubs_epi16(hi[h], bh));
                    u[a][h] = q == 0 || (T == NX_Q50 && q == 2) ? p : _mm256_add_epi16(u[a][h], p);
                    if (T == NX_Q50 && q == 1) t[a][h] = _mm256_madd_epi16(u[a][h], one);
                }
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * h)));
            const __m256 M = T == NX_Q41 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * h)))
                                         : _mm256_mul_ps(D, _mm256_set1_ps(T == NX_Q40 ? -8.0f : -16.0f));
            for (int a = 0; a < A; a++) {
                const __m256i ti = T == NX_Q50 ? _mm256_add_epi32(t[a][h], _mm256_madd_epi16(u[a][h], one))
                                               : _mm256_madd_epi16(u[a][h], one);
                acc[a][h] = _mm256_fmadd_ps(M, _mm256_set1_ps(x->s[a * nb + b]), x16_step(acc[a][h], ti, D, x->d[a * nb + b]));
            }
        }
    }
    for (int a = 0; a < A; a++) _mm256_storeu_ps(res[a], acc[a][0]), _mm256_storeu_ps(res[a] + 8, acc[a][1]);
}
static void run_nibx(int T, int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C0(k) tile_nibx16(NX_Q40, k, g, x, res, lim)
#define C1(k) tile_nibx16(NX_Q41, k, g, x, res, lim)
#define C2(k) tile_nibx16(NX_Q50, k, g, x, res, lim)
    if (T == NX_Q40) {
        XCASES(C0)
    } else if (T == NX_Q41) {
        XCASES(C1)
    } else {
        XCASES(C2)
    }
#undef C0
#undef C1
#undef C2
}

/* SD_Q8_0_X16, 8 rows (half hf): signed codes against signed activations
 * by the sign trick, |w| (unsigned) times x with w's sign, one vpmaddwd a
 * piece (2 * 127 * 127 fits int16, two do not). The AVX-512 builds take
 * tile_q8x512 instead (VNNI there needs no sign trick, see it). */
AI void tile_q80x(const int A, const int hf, const uint8_t *g, const qx *x, float (*res)[16],
                  const uint8_t *lim) {
    const int64_t nb = x->nb, cols = x->cols;
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[SD_XA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + 544 * b;
        x16_pf(G, lim);
        const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * hf)));
        __m256i t[SD_XA];
        for (int a = 0; a < A; a++) t[a] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            x16_pf(G + 32 + 64 * q, lim);
            const __m256i w = _mm256_loadu_si256((const __m256i *)(G + 32 + 64 * q + 32 * hf));
            const __m256i aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
            for (int a = 0; a < A; a++) {
                const __m256i xs = _mm256_sign_epi8(bc4(x->q + a * cols + 32 * b + 4 * q), w);
                t[a] = _mm256_add_epi32(t[a], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), one));
            }
        }
#pragma GCC unroll 8
        for (int a = 0; a < A; a++)
            acc[a] = x16_step(acc[a], t[a], D, x->d[a * nb + b]);
    }
    for (int a = 0; a < A; a++) _mm256_storeu_ps(res[a] + 8 * hf, acc[a]);
}
/* One activation row, both halves in one pass (as tile_q4kx): the
 * same bits as tile_q80x. */
AI void tile_q80x16(const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nb = x->nb;
    const __m256i one = _mm256_set1_epi16(1);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + 544 * b;
        x16_pf(G, lim);
        __m256i t[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
            x16_pf(G + 32 + 64 * q, lim);
            const __m256i xb = bc4(x->q + 32 * b + 4 * q);
            for (int h = 0; h < 2; h++) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(G + 32 + 64 * q + 32 * h));
                const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xb, w));
                t[h] = _mm256_add_epi32(t[h], _mm256_madd_epi16(p, one));
            }
        }
        for (int h = 0; h < 2; h++)
            acc[h] = x16_step(acc[h], t[h], _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * h))), x->d[b]);
    }
    _mm256_storeu_ps(res[0], acc[0]);
    _mm256_storeu_ps(res[0] + 8, acc[1]);
}
static void run_q80x(int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q80x(k, 0, g, x, res, lim), tile_q80x(k, 1, g, x, res, NULL)
    if (A == 1) tile_q80x16(g, x, res, lim);
    else XCASES2(C)
#undef C
}
#endif


#if defined(__AVX512F__) && defined(__AVX512BW__)
/* ---- 512-bit K-quant tiles (the AVX-512 builds only) -------------------------
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
 * its lanes r summed over q at the end (store_fold). Measured against one
 * 16-lane float accumulator per (row, activation row) with a cvt, mul and
 * fma each (the multiply pipes were the limit): 20-30% faster at every n.
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
/* int32 lanes of sums of 4 products u8 * s8 */
AI __m512i mdot512(__m512i u, __m512i s) {
#ifdef SD_VNNI
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}

/* [r0 r1 r2 r3] of each 128-bit lane q: row r's int32 lanes 4q..4q+3 summed */
AI __m512i fold4_512(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
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
/* dot2 on 512 bits (codes <= 31: the non-VNNI int16 sums stay exact) */
AI __m512i dot2_512(__m512i lo, __m512i hi, __m512i xl, __m512i xh) {
#ifdef SD_VNNI
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), hi, xh);
#else
    return _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(lo, xl), _mm512_maddubs_epi16(hi, xh)),
                             _mm512_set1_epi16(1));
#endif
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
 * n = 1 the folds and the correction cost more than the 256-bit tile
 * (1024 x 576 in cache, one thread: 21.4 us here against 17.7 us), while
 * at n = 9 and 128 this tile is 13-17% faster. */
AI __m512i q8_dots(const __m512i *wv, const __m512i *wa, const __mmask64 *neg, __m512i xv,
                   const __m512i csum) {
#ifdef SD_VNNI
    (void)wa, (void)neg;
    const __m512i xu = _mm512_xor_si512(xv, _mm512_set1_epi8((char)0x80));
    const __m512i z = _mm512_setzero_si512();
    return _mm512_sub_epi32(fold4_512(_mm512_dpbusd_epi32(z, xu, wv[0]), _mm512_dpbusd_epi32(z, xu, wv[1]),
                                      _mm512_dpbusd_epi32(z, xu, wv[2]), _mm512_dpbusd_epi32(z, xu, wv[3])),
                            csum);
#else
    (void)wv, (void)csum;
    const __m512i z = _mm512_setzero_si512();
#define S8(k) mdot512(wa[k], _mm512_mask_sub_epi8(xv, neg[k], z, xv))
    return fold4_512(S8(0), S8(1), S8(2), S8(3));
#undef S8
#endif
}
AI void tile_q8_512(const int A, const uint8_t *const *w, const qx *x, float (*res)[4], const int pf) {
    const int64_t nb = x->nb, cols = x->cols;
    const __m512i sel = sel_idx(0, 1);
    __m512 acc[SD_QA];
#pragma GCC unroll 8
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb;
        __m512i wv[4], wa[4], csum = _mm512_setzero_si512();
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
#ifdef SD_VNNI
        {
            const __m512i c80 = _mm512_set1_epi8((char)0x80), z = _mm512_setzero_si512();
            csum = fold4_512(_mm512_dpbusd_epi32(z, c80, wv[0]), _mm512_dpbusd_epi32(z, c80, wv[1]),
                             _mm512_dpbusd_epi32(z, c80, wv[2]), _mm512_dpbusd_epi32(z, c80, wv[3]));
        }
#endif
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
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q8_dots(wv, wa, neg, xv, csum)), _mm512_mul_ps(dw, dx), acc[a]);
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

/* The repacked 512-bit tiles take up to 9 activation rows a pass (2 x 9
 * accumulators and the unpacked codes fit the 32 registers), so a
 * verification of 8 drafted tokens streams each group once. */
#define SD_XA512 9
#define X512CASES(CALL)                                                                    \
    if (A >= 9) {                                                                          \
        CALL(9);                                                                           \
    } else {                                                                               \
        QCASES(CALL)                                                                       \
    }

/* The repacked tiles' per-block float step: acc += t * (D * d_x), then
 * (when M is given) acc -= M * s_x; and their final store of 16 rows. */
AI __m512 x16_step512(__m512 acc, __m512i t, __m512 D, float dx) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(D, _mm512_set1_ps(dx)), acc);
}
AI __m512 x16_min512(__m512 acc, __m512 M, float sx) { return _mm512_fnmadd_ps(M, _mm512_set1_ps(sx), acc); }
AI void x16_store512(const int A, const __m512 *acc, float (*res)[16]) {
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) _mm512_storeu_ps(res[a], acc[a]);
}

/* SD_Q4_K_X16 with all 16 rows of a group in one register (see tile_q4kx) */
AI __m512i bc4z(const int8_t *p) { return _mm512_set1_epi32((int)ld32((const uint8_t *)p)); }
/* One sub-block's int sums for A activation rows: is[a] = sum of q x code
 * over its 256 code bytes at C (VNNI: int32; else int16 pairs), the rows'
 * codes at xq + a*cols. */
AI void q4kx_sub512(const int A, const uint8_t *C, const int8_t *xq, const int64_t cols, const uint8_t *lim,
                    __m512i *is) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) is[a] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        x16_pf(C + 64 * q, lim);
        const __m512i c = _mm512_loadu_si512((const void *)(C + 64 * q));
        const __m512i lo = _mm512_and_si512(c, m4), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            const int8_t *xp = xq + a * cols + 8 * q;
#ifdef SD_VNNI
            is[a] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(is[a], lo, bc4z(xp)), hi, bc4z(xp + 4));
#else
            is[a] = _mm512_add_epi16(is[a], _mm512_add_epi16(_mm512_maddubs_epi16(lo, bc4z(xp)),
                                                             _mm512_maddubs_epi16(hi, bc4z(xp + 4))));
#endif
        }
    }
}
AI void tile_q4kx512(const int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 2304 * sb;
        const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        const __m512 m16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
#pragma GCC unroll 9
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
#ifdef SD_VNNI
                const __m512i i32 = is[a];
#else
                const __m512i i32 = _mm512_madd_epi16(is[a], _mm512_set1_epi16(1));
#endif
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

/* The 6-bit codes of one SD_Q6_K_X16 sub-block (its 192 bytes: low nibbles
 * A0, A1, top bit pairs H): c[k] = elements 4k..4k+3 of the 16 rows. */
AI void q6x16_codes512(__m512i A0, __m512i A1, __m512i H, __m512i *c) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    c[0] = _mm512_or_si512(_mm512_and_si512(A0, m4), _mm512_and_si512(_mm512_slli_epi16(H, 4), m30));
    c[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A0, 4), m4), _mm512_and_si512(_mm512_slli_epi16(H, 2), m30));
    c[2] = _mm512_or_si512(_mm512_and_si512(A1, m4), _mm512_and_si512(H, m30));
    c[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A1, 4), m4), _mm512_and_si512(_mm512_srli_epi16(H, 2), m30));
}
/* The same from the sub-block's bytes at P, each piece prefetched PF ahead
 * of its load when lim is given (x16_pf). */
AI void q6x16_load512(const uint8_t *P, const uint8_t *lim, __m512i *c) {
    x16_pf(P, lim);
    const __m512i A0 = _mm512_loadu_si512((const void *)P);
    x16_pf(P + 64, lim);
    const __m512i A1 = _mm512_loadu_si512((const void *)(P + 64));
    x16_pf(P + 128, lim);
    const __m512i H = _mm512_loadu_si512((const void *)(P + 128));
    q6x16_codes512(A0, A1, H, c);
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
#pragma GCC unroll 16
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
#ifdef SD_VNNI
                __m512i t = _mm512_dpbusd_epi32(o, c0, bc4z(xp));
                t = _mm512_dpbusd_epi32(t, c1, bc4z(xp + 4));
                t = _mm512_dpbusd_epi32(t, c2, bc4z(xp + 8));
                t = _mm512_dpbusd_epi32(t, c3, bc4z(xp + 12));
#else
                const __m512i one = _mm512_set1_epi16(1);
                const __m512i t = _mm512_add_epi32(_mm512_add_epi32(
                    _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(c0, bc4z(xp)), _mm512_maddubs_epi16(c1, bc4z(xp + 4))), one),
                    _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(c2, bc4z(xp + 8)), _mm512_maddubs_epi16(c3, bc4z(xp + 12))), one)), o);
#endif
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
#ifdef SD_VNNI
            __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++)
                t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(t, lo[q], bc4z(xp + 8 * q)), hi[q], bc4z(xp + 8 * q + 4));
#else
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
#endif
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
#ifdef SD_VNNI
        (void)cols;
        const __m512i c80 = _mm512_set1_epi8((char)0x80);
        __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 9
        for (int q = 0; q < 8; q++) corr = _mm512_dpbusd_epi32(corr, c80, w[q]);
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            const uint8_t *up = xu + a * cols + 32 * b;
            __m512i t = _mm512_sub_epi32(_mm512_setzero_si512(), corr);
#pragma GCC unroll 9
            for (int q = 0; q < 8; q++) t = _mm512_dpbusd_epi32(t, _mm512_set1_epi32((int)ld32(up + 4 * q)), w[q]);
            acc[a] = x16_step512(acc[a], t, D, x->d[a * nb + b]);
        }
#else
        (void)xu;
        const __m512i one = _mm512_set1_epi16(1);
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            __m512i t = _mm512_setzero_si512();
#pragma GCC unroll 9
            for (int q = 0; q < 8; q++) {
                const __m512i xv = bc4z(x->q + a * cols + 32 * b + 4 * q);
                const __mmask64 neg = _mm512_movepi8_mask(w[q]);
                const __m512i xs = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
                t = _mm512_add_epi32(t, _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w[q]), xs), one));
            }
            acc[a] = x16_step512(acc[a], t, D, x->d[a * nb + b]);
        }
#endif
    }
    x16_store512(A, acc, res);
}
static void run_q80x512(int A, const uint8_t *g, const qx *x, const uint8_t *xu, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q80x512(k, g, x, xu, res, lim)
    X512CASES(C)
#undef C
}
#define SD_HAVE512 1
#endif

/* Rows i..i+n-1 of a job's output, weight rows r..r+15, from res. */
static void x16_put(const sd_mm_job *j, int64_t i, int64_t n, int64_t r, float (*res)[16]) {
    for (int64_t a = 0; a < n; a++) {
        float *o = j->out + (size_t)(i + a) * j->ldo + r;
        if (j->accumulate)
            for (int k = 0; k < 16; k++) o[k] += res[a][k];
        else
            memcpy(o, res[a], sizeof res[a]);
    }
}

#ifdef SD_AMX
/* ---- the AMX level's K-quant products (SD_Q4_K_X16, SD_Q6_K_X16) -----------
 * Activations with one scale a super-block (cpu.h, "k8"): every integer
 * sum of a super-block then shares one float factor per weight row, so a
 * super-block's whole product stays an integer and takes one float step
 * per activation row, not one per sub-block (8 Q4_K, 16 Q6_K).
 *   Q4_K: y += (d dk) I1 - (dmin dk) I2, I1 = sum_s sc_s (sum over the
 *         sub-block of q x code), I2 = sum_s mn_s (sum of the sub-block's q);
 *   Q6_K: y += (d dk) I,  I = sum_s sc_s (sum of q x (code - 32)).
 * The float steps run in this order on both tile kinds below, so a row
 * has the same bits in an n-row call as alone.
 * VNNI tiles (any row count): each sub-block's int32 sum is multiplied
 * by its scale (vpmulld) and added up; I2 takes four vpdpwssd from the
 * sub-blocks' code sums, paired. AMX tiles (whole 16 activation rows):
 * the scales go into the B tiles instead. sc x code does not fit a byte,
 * so it is split: v = 2^sh h + l (Q4_K: sh = 3, h = (sc >> 3) x code,
 * l = (sc & 7) x code, both <= 105; Q6_K: v = sc x (code - 32) in
 * [-4064, 4096], sh = 6, h = v >> 6 in [-64, 64], l = v & 63). Two C
 * tiles take A . Bh and A . Bl over the whole super-block (K = 64 bytes a
 * step, four steps), and I = 2^sh Ch + Cl + c0, where c0 = -128 x
 * (2^sh sum(h) + sum(l)) removes the unsigned activations' +128. Largest
 * value: Q6_K 2^6 x 256 x 255 x 64 < 2^28. */
typedef struct k8x {
    const int8_t *q; /* activation row 0 of the tile: codes */
    const float *d;  /* [cols/256] a row */
    const int16_t *s; /* [cols/32] a row: sums of 32 codes */
    const int32_t *o; /* [cols/16] a row: -32 x sums of 16 codes */
    int64_t cols;
} k8x;

/* The mins of sub-blocks 2p, 2p+1 of the 16 rows as int16 pairs (the
 * vpdpwssd operand against two code sums). */
AI void q4k_min_pairs(const uint8_t *G, __m512i *mp) {
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        __m128i sc, m0, m1;
        x16_scales(G, 2 * p, &sc, &m0);
        x16_scales(G, 2 * p + 1, &sc, &m1);
        mp[p] = _mm512_or_si512(_mm512_cvtepu8_epi32(m0), _mm512_slli_epi32(_mm512_cvtepu8_epi32(m1), 16));
    }
}
AI __m512i q4k_min_sum(const __m512i *mp, const int16_t *s) {
    __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) m = _mm512_dpwssd_epi32(m, mp[p], _mm512_set1_epi32((int)ld32((const uint8_t *)(s + 2 * p))));
    return m;
}

AI void tile_q4kx_k8(const int A, const uint8_t *g, const k8x *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 2304 * sb;
        __m512i I1[SD_XA512];
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) I1[a] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            if (s < 4) x16_pf(G + 64 * s, lim);
            __m128i sc, mn;
            x16_scales(G, s, &sc, &mn);
            const __m512i SC = _mm512_cvtepu8_epi32(sc);
            __m512i is[SD_XA512];
            q4kx_sub512(A, G + 256 + 256 * s, x->q + 256 * sb + 32 * s, cols, lim, is);
#pragma GCC unroll 9
            for (int a = 0; a < A; a++) I1[a] = _mm512_add_epi32(I1[a], _mm512_mullo_epi32(is[a], SC));
        }
        const __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
        const __m512 M = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
        __m512i mp[4];
        q4k_min_pairs(G, mp);
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) {
            const __m512 dx = _mm512_set1_ps(x->d[a * nsb + sb]);
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I1[a]), _mm512_mul_ps(D, dx), acc[a]);
            const __m512i I2 = q4k_min_sum(mp, x->s + a * (cols / 32) + 8 * sb);
            acc[a] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(I2), _mm512_mul_ps(M, dx), acc[a]);
        }
    }
    x16_store512(A, acc, res);
}
static void run_q4kx_k8(int A, const uint8_t *g, const k8x *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q4kx_k8(k, g, x, res, lim)
    X512CASES(C)
#undef C
}

AI void tile_q6kx_k8(const int A, const uint8_t *g, const k8x *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, no = cols / 16;
    __m512 acc[SD_XA512];
#pragma GCC unroll 9
    for (int a = 0; a < A; a++) acc[a] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 3360 * sb;
        __m512i I[SD_XA512];
#pragma GCC unroll 9
        for (int a = 0; a < A; a++) I[a] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            const uint8_t *P = G + 288 + 192 * j;
            if (j < 5) x16_pf(G + 64 * j, lim);
            const __m512i S = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * j)));
            __m512i cq[4];
            q6x16_load512(P, lim, cq);
            const __m512i c0 = cq[0], c1 = cq[1], c2 = cq[2], c3 = cq[3];
#pragma GCC unroll 9
            for (int a = 0; a < A; a++) {
                const int8_t *xp = x->q + a * cols + 256 * sb + 16 * j;
                __m512i t = _mm512_dpbusd_epi32(_mm512_set1_epi32(x->o[a * no + 16 * sb + j]), c0, bc4z(xp));
                t = _mm512_dpbusd_epi32(t, c1, bc4z(xp + 4));
                t = _mm512_dpbusd_epi32(t, c2, bc4z(xp + 8));
                t = _mm512_dpbusd_epi32(t, c3, bc4z(xp + 12));
                I[a] = _mm512_add_epi32(I[a], _mm512_mullo_epi32(t, S));
            }
        }
        const __m512 D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
#pragma GCC unroll 9
        for (int a = 0; a < A; a++)
            acc[a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[a]), _mm512_mul_ps(D, _mm512_set1_ps(x->d[a * nsb + sb])), acc[a]);
    }
    x16_store512(A, acc, res);
}
static void run_q6kx_k8(int A, const uint8_t *g, const k8x *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q6kx_k8(k, g, x, res, lim)
    X512CASES(C)
#undef C
}

/* tdpbusd C += A . B over tiles: A is 16 activation rows x 64 bytes taken
 * as unsigned (k8 codes + 128), B 16 rows of 16 x 4 signed bytes (4
 * consecutive elements of each of 16 weight rows), C 16 x 16 int32
 * (activation row x weight row). B is the repacked groups' layout: a
 * 64-byte piece of Q4_K codes gives two B rows (low nibbles: elements
 * 8q..8q+3 of the sub-block, high: 8q+4..8q+7), Q6_K's four code
 * registers of a sub-block four rows; the unpacking multiplies in the
 * scales and splits (above). Loop: per group of 16 weight rows and batch
 * of up to AMX_ROWS activation rows, each super-block is unpacked once
 * and serves every 16-row tile of the batch; the batch's float sums wait
 * in amx_acc between super-blocks. Tiles: C 0 (h), 1 (l); A 2, 3 and B
 * 4/5, 6/7 alternate by step. */
enum { AMX_ROWS = 256 };
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;
/* A static table: GCC 12 drops the stores into a local configuration as
 * dead before ldtilecfg reads it. */
static const amx_tilecfg amx_cfg __attribute__((aligned(64))) = {
    .palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

/* One super-block of 16 weight rows unpacked: the B rows of h and l, c0,
 * d (D) and Q4_K's dmin (M) and min pairs. */
typedef struct {
    uint8_t h[4096] __attribute__((aligned(64)));
    uint8_t l[4096] __attribute__((aligned(64)));
    __m512i c0, mp[4];
    __m512 D, M;
} amx_sb;

/* v in both 16-bit halves of each lane (codes of one weight row share a
 * lane's 4 bytes, so one vpmullw scales two byte codes at once while
 * every product stays below 256) */
AI __m512i amx_dup16(__m512i v) { return _mm512_or_si512(v, _mm512_slli_epi32(v, 16)); }

static void amx_unpack_q4k(const uint8_t *G, amx_sb *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1), s7 = _mm512_set1_epi32(7);
    __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
    for (int s = 0; s < 8; s++) {
        __m128i sc, mn;
        x16_scales(G, s, &sc, &mn);
        const __m512i sc32 = _mm512_cvtepu8_epi32(sc);
        const __m512i H = amx_dup16(_mm512_srli_epi32(sc32, 3)), L = amx_dup16(_mm512_and_si512(sc32, s7));
        for (int q = 0; q < 4; q++) {
            const __m512i c = _mm512_loadu_si512((const void *)(G + 256 + 256 * s + 64 * q));
            const __m512i lo = _mm512_and_si512(c, m4), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
            const __m512i hl = _mm512_mullo_epi16(lo, H), hh = _mm512_mullo_epi16(hi, H);
            const __m512i ll = _mm512_mullo_epi16(lo, L), lh = _mm512_mullo_epi16(hi, L);
            uint8_t *bh = u->h + 512 * s + 128 * q, *bl = u->l + 512 * s + 128 * q;
            _mm512_store_si512((void *)bh, hl);
            _mm512_store_si512((void *)(bh + 64), hh);
            _mm512_store_si512((void *)bl, ll);
            _mm512_store_si512((void *)(bl + 64), lh);
            sh = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sh, ones, hl), ones, hh);
            sl = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sl, ones, ll), ones, lh);
        }
    }
    u->c0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(sh, 3), sl), 7));
    q4k_min_pairs(G, u->mp);
    u->D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
    u->M = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
}

static void amx_unpack_q6k(const uint8_t *G, amx_sb *u) {
    const __m512i ones = _mm512_set1_epi8(1), b32 = _mm512_set1_epi8(32);
    const __m512i lo8 = _mm512_set1_epi16(0xff), m63 = _mm512_set1_epi16(63), w16 = _mm512_set1_epi32(0xffff);
    __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
    for (int j = 0; j < 16; j++) {
        const uint8_t *P = G + 288 + 192 * j;
        const __m512i S = amx_dup16(_mm512_and_si512(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * j))), w16));
        __m512i c[4];
        q6x16_codes512(_mm512_loadu_si512((const void *)P), _mm512_loadu_si512((const void *)(P + 64)),
                       _mm512_loadu_si512((const void *)(P + 128)), c);
        for (int k = 0; k < 4; k++) {
            /* even and odd bytes as int16, scaled, split, put back */
            const __m512i cs = _mm512_sub_epi8(c[k], b32);
            const __m512i ve = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(cs, 8), 8), S);
            const __m512i vo = _mm512_mullo_epi16(_mm512_srai_epi16(cs, 8), S);
            const __m512i h = _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(ve, 6), lo8),
                                              _mm512_slli_epi16(_mm512_srai_epi16(vo, 6), 8));
            const __m512i l = _mm512_or_si512(_mm512_and_si512(ve, m63), _mm512_slli_epi16(_mm512_and_si512(vo, m63), 8));
            _mm512_store_si512((void *)(u->h + 256 * j + 64 * k), h);
            _mm512_store_si512((void *)(u->l + 256 * j + 64 * k), l);
            sh = _mm512_dpbusd_epi32(sh, ones, h);
            sl = _mm512_dpbusd_epi32(sl, ones, l);
        }
    }
    u->c0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(sh, 6), sl), 7));
    u->D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
}

/* Step s (64 bytes) of a super-block for the 16 activation rows at row i
 * of the call (tile numbers are literals: the intrinsics paste them into
 * the instruction). */
#define AMX_STEP(A, BH, BL, s)                                                                     \
    do {                                                                                           \
        _tile_loadd(A, xu + (size_t)i * cols + 256 * sb + 64 * (s), cols);                         \
        _tile_loadd(BH, u.h + 1024 * (s), 64);                                                     \
        _tile_loadd(BL, u.l + 1024 * (s), 64);                                                     \
        _tile_dpbusd(0, A, BH);                                                                    \
        _tile_dpbusd(1, A, BL);                                                                    \
    } while (0)

/* Activation rows [0, n16) of job j (n16 a multiple of 16) over the
 * groups of rows [r0, r1). */
AI void amx_k8_type(const sd_mm_job *j, int64_t r0, int64_t r1, int64_t n16, const int q6) {
    const sd_weight *w = j->w;
    const int64_t cols = w->cols, nsb = cols / 256, ns = cols / 32;
    const size_t sbytes = q6 ? 3360 : 2304;
    const int shift = q6 ? 6 : 3;
    const uint8_t *xu = j->xku;
    float amx_acc[AMX_ROWS][16] __attribute__((aligned(64)));
    amx_sb u;
    int32_t cbuf[2][16][16] __attribute__((aligned(64)));
    _tile_loadconfig(&amx_cfg);
    for (int64_t b0 = 0; b0 < n16; b0 += AMX_ROWS) {
        const int64_t nr = n16 - b0 < AMX_ROWS ? n16 - b0 : AMX_ROWS;
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *g = w->data + (size_t)r * w->row_bytes;
            for (int64_t sb = 0; sb < nsb; sb++) {
                if (q6) amx_unpack_q6k(g + sbytes * sb, &u);
                else amx_unpack_q4k(g + sbytes * sb, &u);
                for (int64_t t = 0; t < nr; t += 16) {
                    const int64_t i = b0 + t;
                    _tile_zero(0);
                    _tile_zero(1);
                    AMX_STEP(2, 4, 5, 0);
                    AMX_STEP(3, 6, 7, 1);
                    AMX_STEP(2, 4, 5, 2);
                    AMX_STEP(3, 6, 7, 3);
                    _tile_stored(0, cbuf[0], 64);
                    _tile_stored(1, cbuf[1], 64);
#pragma GCC unroll 16
                    for (int a = 0; a < 16; a++) {
                        const __m512i ch = _mm512_load_si512((const void *)cbuf[0][a]);
                        const __m512i cl = _mm512_load_si512((const void *)cbuf[1][a]);
                        const __m512i I = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(ch, shift), cl), u.c0);
                        const __m512 dx = _mm512_set1_ps(j->xkd[(i + a) * nsb + sb]);
                        __m512 acc = sb ? _mm512_load_ps(amx_acc[t + a]) : _mm512_setzero_ps();
                        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(u.D, dx), acc);
                        if (!q6) {
                            const __m512i I2 = q4k_min_sum(u.mp, j->xks + (i + a) * ns + 8 * sb);
                            acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(I2), _mm512_mul_ps(u.M, dx), acc);
                        }
                        _mm512_store_ps(amx_acc[t + a], acc);
                    }
                }
            }
            x16_put(j, b0, nr, r, amx_acc);
        }
    }
    _tile_release();
}
static void amx_k8(const sd_mm_job *j, int64_t r0, int64_t r1, int64_t n16) {
    if (j->w->type == SD_Q6_K_X16) amx_k8_type(j, r0, r1, n16, 1);
    else amx_k8_type(j, r0, r1, n16, 0);
}
#undef AMX_STEP

/* k8 activations of one row (cpu.h): per super-block max |x| -> d,
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
#endif

#if SD_FA == 2
#define FCASES(CALL) if (A == 1) CALL(1); else CALL(2);
#else
#define FCASES(CALL)                                                                       \
    switch (A) {                                                                           \
    case 1: CALL(1); break;                                                                \
    case 2: CALL(2); break;                                                                \
    case 3: CALL(3); break;                                                                \
    default: CALL(4); break;                                                               \
    }
#endif
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

/* The SD_*_X16 types: groups of 16 rows (r0, r1 multiples of
 * 16), passes of balanced width over the activation rows (at most
 * SD_XA512 rows with 512-bit tiles, SD_XA with 256-bit ones); the first streams
 * the group. */
static void mm_x16(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const sd_weight *w = j->w;
    const uint32_t t = w->type;
    const int q6 = t == SD_Q6_K_X16;
    const int nx = t == SD_Q4_0_X16 ? NX_Q40 : t == SD_Q4_1_X16 ? NX_Q41 : t == SD_Q5_0_X16 ? NX_Q50 : -1;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint8_t *base = w->data, *lim = base + (size_t)r1 * w->row_bytes;
#ifdef SD_HAVE512
    enum { XA = SD_XA512 };
#else
    enum { XA = SD_XA };
#endif
    float res[XA][16];
    for (int64_t v = 0; v < SD_PF && (size_t)r0 * w->row_bytes + v < (size_t)r1 * w->row_bytes; v += 64)
        _mm_prefetch((const char *)base + (size_t)r0 * w->row_bytes + v, SD_PFH);
    int i0 = 0;
#ifdef SD_AMX
    /* k8 activations (the AMX level's K-quants): whole 16 rows through
     * the tile unit, the rest through the VNNI tiles */
    const int k8 = (q6 || t == SD_Q4_K_X16) && j->xk;
    if (k8 && j->n >= 16) {
        i0 = j->n / 16 * 16;
        amx_k8(j, r0, r1, i0);
    }
#endif
    for (int64_t r = r0; r < r1 && i0 < j->n; r += 16) {
        const uint8_t *g = base + (size_t)r * w->row_bytes;
        for (int i = i0; i < j->n;) {
            const int left = j->n - i, passes = (left + XA - 1) / XA, A = (left + passes - 1) / passes;
            const uint8_t *pl = i == i0 ? lim : NULL;
#ifdef SD_AMX
            if (k8) {
                const k8x xk = {j->xk + (size_t)i * cols, j->xkd + (size_t)i * (cols / 256),
                                j->xks + (size_t)i * nb, j->xko + (size_t)i * (cols / 16), cols};
                if (q6) run_q6kx_k8(A, g, &xk, res, pl);
                else run_q4kx_k8(A, g, &xk, res, pl);
                x16_put(j, i, A, r, res);
                i += A;
                continue;
            }
#endif
            const qx xq = {j->xq + (size_t)i * cols, j->xd + (size_t)i * nb, j->xs + (size_t)i * nb, cols, nb};
            const int32_t *xo = q6 ? j->xo16 + (size_t)i * (cols / 16) : NULL;
#ifdef SD_HAVE512
            if (q6) run_q6kx512(A, g, &xq, xo, res, pl);
            else if (t == SD_Q4_K_X16) run_q4kx512(A, g, &xq, res, pl);
            else if (nx >= 0) run_nibx512(nx, A, g, &xq, res, pl);
            else run_q80x512(A, g, &xq, j->xu8 ? j->xu8 + (size_t)i * cols : NULL, res, pl);
#else
            if (q6) run_q6kx(A, g, &xq, xo, res, pl);
            else if (t == SD_Q4_K_X16) run_q4kx(A, g, &xq, res, pl);
            else if (nx >= 0) run_nibx(nx, A, g, &xq, res, pl);
            else run_q80x(A, g, &xq, res, pl);
#endif
            x16_put(j, i, A, r, res);
            i += A;
        }
    }
}

void SD_FN(sd_cpu_mm)(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const sd_weight *w = j->w;
    if (sd_cpu_file_type(w->type) != w->type) {
        mm_x16(j, r0, r1);
        return;
    }
    const uint8_t *base = w->data;
    const size_t rb = w->row_bytes;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint32_t type = w->type;
    const int quant = type == SD_Q8_0 || type == SD_Q4_0 || type == SD_Q4_1 || type == SD_Q5_0 ||
                      type == SD_Q4_K || type == SD_Q6_K;
    const int kind = type == SD_Q4_1 ? K_Q41 : type == SD_Q4_0 ? K_Q40 : type == SD_Q5_0 ? K_Q50 : 3;
    /* the paired layout exists only when such a weight is in the job (xqp
     * is NULL otherwise, and NULL + offset is undefined) */
    const int paired = type == SD_Q4_1 || type == SD_Q4_0 || type == SD_Q5_0 || type == SD_Q4_K;
    const int amax = quant ? SD_QA : SD_FA;
    float res[SD_QA > SD_FA ? SD_QA : SD_FA][4];
    if (SD_PF) {
        /* The tiles prefetch PF_ROW bytes ahead in each row stream (see
         * prefetch4); start that window here, or the range's first bytes
         * (a large share of a small matrix's slice) arrive one demand miss
         * at a time: the first PF_ROW bytes of each stream, rows within the
         * range only. */
        for (int k = 0; k < 4 && r0 + k < r1; k++)
            for (int64_t v = 0, m = 0; v < PF_ROW; v += 64) {
                while (v - m * (int64_t)rb >= (int64_t)rb) m++;
                if (r0 + k + 4 * m >= r1) break;
                _mm_prefetch((const char *)base + (size_t)(r0 + k + 4 * m) * rb + (v - m * (int64_t)rb), SD_PFH);
            }
    }
    for (int64_t r = r0; r < r1; r += 4) {
        const int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
        const uint8_t *wp[4];
        for (int k = 0; k < 4; k++) wp[k] = base + (size_t)(r + (k < nr ? k : nr - 1)) * rb;
        for (int i = 0; i < j->n;) {
            int A = j->n - i < amax ? j->n - i : amax;
#ifdef SD_HAVE512
            if (type == SD_Q4_K || type == SD_Q6_K || type == SD_Q8_0 || type == SD_Q5_0) { /* passes of balanced width */
                const int left = j->n - i, passes = (left + SD_QA - 1) / SD_QA;
                A = (left + passes - 1) / passes;
            }
#endif
            /* pf: the row stride when this pass streams the rows (later
             * activation groups find them in cache). Groups within SD_PF
             * plus one group of the range's end do not prefetch: the ones
             * before brought in all but the last group, and reaching past
             * the end would pull rows another thread reads. */
            const int pf = SD_PF && i == 0 && (size_t)(r1 - r) * rb > SD_PF + 4 * rb ? (int)rb : 0;
            if (quant) {
                const qx xq = {j->xq + (size_t)i * cols, j->xd + (size_t)i * nb,
                               j->xs + (size_t)i * nb, cols, nb};
                const int8_t *qp = paired ? j->xqp + (size_t)i * cols : NULL;
                const float *ds8 = paired ? j->xds8 + (size_t)i * (cols / 64) * 16 : NULL;
#ifdef SD_HAVE512
                if (type == SD_Q4_K) run_q4k512(A, wp, &xq, res, pf);
                else if (type == SD_Q5_0) run_q50_512(A, wp, &xq, qp, ds8, res, pf);
                else if (type == SD_Q6_K) run_q6k512(A, wp, &xq, res, pf);
                else if (type == SD_Q8_0 && A > 1) run_q80_512(A, wp, &xq, res, pf); /* n = 1: the 256-bit tile is cheaper */
                else
#endif
                if (paired) run_pairs(A, kind, wp, &xq, qp, ds8, res, pf);
                else if (type == SD_Q6_K) run_q6k(A, wp, &xq, res, pf);
                else run_q80(A, wp, &xq, res, pf);
            } else {
                const float *xa = j->x + (size_t)i * cols;
                if (type == SD_F32) run_f32(A, wp, xa, cols, res, pf);
                else if (type == SD_F16) run_f16(A, wp, xa, cols, res, pf);
                else run_bf16(A, wp, xa, cols, res, pf);
            }
            for (int a = 0; a < A; a++) {
                float *o = j->out + (size_t)(i + a) * j->ldo + r;
                if (j->accumulate)
                    for (int k = 0; k < nr; k++) o[k] += res[a][k];
                else
                    for (int k = 0; k < nr; k++) o[k] = res[a][k];
            }
            i += A;
        }
    }
}

/* The VNNI build shares the AVX-512 activation quantizer (same bits). */
#ifndef SD_VNNI
/* ---- activation quantizer ------------------------------------------------------
 * 4 vectors a block: max |x| -> d, x*(1/d) rounded to nearest even, packed
 * int32 -> int16 -> int8 (the packs interleave 128-bit lanes; one vpermd
 * restores element order), exact int32 block sum for s. */
void SD_FN(sd_cpu_qact)(const float *x, int64_t cols, int8_t *q, float *d, float *s) {
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

/* Pair layout (cpu.h): vperm2i128 picks the 16-byte halves of two blocks. */
void SD_FN(sd_cpu_qact_pair)(const int8_t *q, const float *d, const float *s, int64_t cols,
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
#endif
