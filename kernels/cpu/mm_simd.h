/* Inline pieces every SIMD matrix product file shares (matmul_avx2.c,
 * matmul_avx512.c, matmul_avx512vnni.c, amx/matmul_amx.c). Each file
 * compiles them with its own ISA flags, so the same source is VEX code with
 * 16 vector registers in one and EVEX code with 32 in another, and the
 * 256-bit dot products below take vpdpbusd where the file is compiled with
 * AVX512-VNNI (__AVX512VNNI__) in place of vpmaddubsw + vpmaddwd(ones):
 * exact int32 sums either way, so every level gives the same bits.
 *
 * Tiles. A tile is 4 weight rows x A activation rows, looped over the whole
 * row length: each weight block is loaded and unpacked once and used for A
 * activation rows (A = 1 for decode, up to SD_QA / SD_FA for prefill), and
 * each activation block is used for 4 weight rows.
 * With 32 registers (the AVX-512 files) a quantized tile takes SD_QA = 8
 * activation rows and a float tile SD_FA = 4, else 4 and 2.
 *
 * The first activation group over a tile's rows streams the weights from
 * DRAM (decode, and the few rows of a speculative verification): its 4 row
 * streams prefetch SD_PF bytes ahead of the reads (prefetch4), into L2
 * (prefetcht1), not L1: a core has far fewer L1 miss buffers than lines in
 * flight at DRAM latency, so L1-directed prefetches kept one core near
 * 10 GB/s where L2-directed ones take it past 17 (Zen 4, cold Q4_K, Q6_K
 * and Q8_0 weights). Tails: a group of fewer than 4 rows repeats its last
 * row (the extra results are dropped), so every tile has the same shape. */

#ifndef SD_CPU_MM_SIMD_H
#define SD_CPU_MM_SIMD_H

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/common/wtype.h"

#ifdef __AVX512F__
#define SD_QA 8 /* activation rows per quantized tile */
#define SD_FA 4 /* activation rows per float tile */
#else
#define SD_QA 4
#define SD_FA 2
#endif

#define AI static inline __attribute__((always_inline))
#ifndef SD_PF
#define SD_PF 12288
#endif
#ifndef SD_PFH
#define SD_PFH _MM_HINT_T1
#endif
/* The repacked tiles' second prefetch, into L1, SD_PF0 bytes ahead (x16_pf;
 * 0: none): the AVX-512 builds take it. */
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
#ifdef __AVX512VNNI__
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), wu, x);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wu, x), _mm256_set1_epi16(1));
#endif
}
/* mdot_u(l, xl) + mdot_u(h, xh); without VNNI the two int16 results are
 * added before widening (codes <= 31: 4*31*127 < 32767). */
AI __m256i dot2(__m256i l, __m256i xl, __m256i h, __m256i xh) {
#ifdef __AVX512VNNI__
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

/* ---- activation tiles, tile widths -------------------------------------------- */
typedef struct qx {
    const int8_t *q; /* activation row 0 of the tile */
    const float *d, *s;
    int64_t cols, nb;
} qx;

/* Pair-layout kinds: 32-element blocks of bs bytes with the nibbles at qo. */
enum { K_Q40 = 0, K_Q41 = 1, K_Q50 = 2 };
#define KIND_BS(kind) (18 + 2 * (kind)) /* Q4_0 18, Q4_1 20, Q5_0 22 */
#define KIND_QO(kind) (2 + 2 * (kind))

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

/* ---- the 16-row interleaved types (SD_*_X16, blocks.h) ------------------------ */
/* The repacked tiles' prefetch: a group (16 rows, one contiguous stream)
 * prefetches SD_PF bytes ahead of each 64-byte load, into L2, and SD_PF0
 * bytes ahead into L1, never past lim (the end of the thread's rows), so
 * prefetches and loads interleave one to one. */
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

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* ---- 512-bit pieces (the AVX-512 files) ----------------------------------------- */
/* [r0 r1 r2 r3] of each 128-bit lane q: row r's int32 lanes 4q..4q+3 summed */
AI __m512i fold4_512(__m512i p0, __m512i p1, __m512i p2, __m512i p3) {
    const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(p0, p1), _mm512_unpackhi_epi32(p0, p1));
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(p2, p3), _mm512_unpackhi_epi32(p2, p3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
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

/* 4 activation bytes at p broadcast to every 32-bit lane */
AI __m512i bc4z(const int8_t *p) { return _mm512_set1_epi32((int)ld32((const uint8_t *)p)); }

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
/* One sub-block's int sums for A activation rows: is[a] = sum of q x code
 * over its 256 code bytes at C (VNNI: int32; else int16 pairs), the rows'
 * codes at xq + a*cols. */
/* (VNNI where the file is compiled with it, as the 256-bit dot products) */
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
#ifdef __AVX512VNNI__
            is[a] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(is[a], lo, bc4z(xp)), hi, bc4z(xp + 4));
#else
            is[a] = _mm512_add_epi16(is[a], _mm512_add_epi16(_mm512_maddubs_epi16(lo, bc4z(xp)),
                                                             _mm512_maddubs_epi16(hi, bc4z(xp + 4))));
#endif
        }
    }
}
#ifdef __AVX512VNNI__
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
#endif
/* is of q4kx_sub512 as int32 lanes */
AI __m512i q4kx_i32_512(__m512i is) {
#ifdef __AVX512VNNI__
    return is;
#else
    return _mm512_madd_epi16(is, _mm512_set1_epi16(1));
#endif
}
#endif

#endif
