/* AVX2 matrix products: the 256-bit tiles of the 16-row interleaved types
 * (SD_*_X16, blocks.h), this level's own; the file layouts' tiles come from
 * mm_tiles256.h and the row walk from mm_rows.h. The AVX-512 levels take
 * the 512-bit x16 tiles of mm_tiles512.h instead.
 *
 * One 32-bit lane per weight row, so a sub-block's integer sums need no
 * fold: per 64-byte piece of codes, the low nibbles are 4 consecutive
 * codes of each row and the high nibbles the next 4, each multiplied with
 * 4 activation bytes broadcast to every lane. Half h of a group is 8 rows
 * (bytes 32h.. of each piece, lanes 8h.. of the scale bytes). The 8
 * vpmaddubsw of a sub-block add in int16 (8 * 2 * 15 * 127 = 30480 <
 * 32767) before one vpmaddwd. The scale and min apply per sub-block: two
 * FMAs an activation row for 8 rows x 32 elements. A group is one
 * contiguous stream, prefetched as x16_pf (mm_simd.h) describes: each
 * 64-byte load of codes, and each header line (scales, d) once, prefetches
 * the line SD_PF bytes after its own, right where it loads. A half tile (8
 * rows of a 64-byte piece) prefetches the piece's line, so its first pass
 * covers the bytes the second pass reads. */
#include "kernels/cpu/mm_tiles256.h"

/* Activation rows a pass of the 256-bit x16 tiles: 5, one more than the
 * other AVX2 tiles. A verification of gamma 4 (5 rows) then streams each
 * group once instead of in passes of 3 + 2, each of which unpacks the
 * codes and scales again. GCC spills some accumulators at 5 rows (16
 * registers); a spilled accumulator costs a load and a store per
 * sub-block, less than a second unpack; passes of 7 or 8 rows spill more
 * than they save. */
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

/* Both halves of a group in one pass, for 1-5 activation rows: each
 * activation broadcast feeds the codes of all 16 rows (two vpmaddubsw)
 * and the scale bytes are unpacked once. Per piece of codes every row's
 * two int16 sums stay in registers (2A + 6 of the 16, KEEP holding each
 * where it is formed: left alone, GCC computes all products of a
 * sub-block first and spills them); the float accumulators live in res,
 * one load and store a sub-block, row and half, instead of spilling. An
 * activation block's d and s are broadcast once for both halves: each
 * broadcast takes a vector unit slot, and two of them per half and row
 * cost more than a sixth of the tile's time. */
AI void tile_q4kx(const int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
    for (int a = 0; a < A; a++) memset(res[a], 0, sizeof res[a]);
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 2304 * sb;
        __m256 d8[2], m8[2];
        for (int h = 0; h < 2; h++) {
            d8[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * h)));
            m8[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * h)));
        }
#pragma GCC unroll 2
        for (int s = 0; s < 8; s++) {
            if (s < 4) x16_pf(G + 64 * s, lim);
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
#pragma GCC unroll 5
                for (int a = 0; a < A; a++) {
                    const __m256i bl = bc4(xs + a * cols + 8 * q), bh = bc4(xs + a * cols + 8 * q + 4);
                    for (int h = 0; h < 2; h++) {
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], bl), _mm256_maddubs_epi16(hi[h], bh));
                        t[a][h] = q ? _mm256_add_epi16(t[a][h], p) : p;
                        KEEP(t[a][h]);
                    }
                }
            }
            __m128i sc, mn;
            x16_scales(G, s, &sc, &mn);
            __m256 D[2], M[2];
            for (int h = 0; h < 2; h++, sc = _mm_srli_si128(sc, 8), mn = _mm_srli_si128(mn, 8)) {
                D[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)), d8[h]);
                M[h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)), m8[h]);
            }
#pragma GCC unroll 5
            for (int a = 0; a < A; a++) {
                const int64_t b = a * nb + 8 * sb + s;
                const __m256 dx = _mm256_set1_ps(x->d[b]), sx = _mm256_set1_ps(x->s[b]);
                for (int h = 0; h < 2; h++) {
                    float *r = res[a] + 8 * h;
                    const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(t[a][h], one)),
                                                     _mm256_mul_ps(D[h], dx), _mm256_loadu_ps(r));
                    _mm256_storeu_ps(r, _mm256_fnmadd_ps(M[h], sx, f));
                }
            }
        }
    }
}
static void run_q4kx(int A, const uint8_t *g, const qx *x, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q4kx(k, g, x, res, lim)
    XCASES(C)
#undef C
}

/* SD_Q6_K_X16, 8 rows (half hf of a group): per sub-block of 16, two
 * pieces of low nibbles and one of top bits give 4 code vectors (elements
 * 4k..4k+3 of each row). A row's 4 vpmaddubsw add in int16 with its
 * offset xoh (-32 x the sums of the 8 elements that meet in each int16
 * lane, sd_mm_job.xo16h): a lane's own sum is sum((code-32)*x) over 8
 * elements, at most 8 * 32 * 127 = 32512 in size, so the wrapping int16
 * adds give it exactly even where the partial sums leave int16, and one
 * vpmaddwd makes the sub-block's int32 sum. The row's scale times d times
 * the activation block's d turns it into float. The sub-block loop
 * unrolls by 2: all 16 unrolled, the 5-row tile is some 12 KiB of code,
 * more than the op cache holds, and it ran at up to 2.3 times the time
 * depending on where the link put it. */
AI void tile_q6kx(const int A, const int hf, const uint8_t *g, const qx *x, const int32_t *xoh,
                  float (*res)[16], const uint8_t *lim) {
    const int64_t nsb = x->cols / 256, cols = x->cols, nb = x->nb, no = cols / 16;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30), one = _mm256_set1_epi16(1);
    __m256 acc[SD_XA];
    for (int a = 0; a < A; a++) acc[a] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *G = g + 3360 * sb;
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * hf)));
#pragma GCC unroll 2
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
                const __m256i t = _mm256_add_epi16(
                    _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(c0, bc4(xp)), _mm256_maddubs_epi16(c1, bc4(xp + 4))),
                                     _mm256_set1_epi32(xoh[a * no + 16 * sb + j])),
                    _mm256_add_epi16(_mm256_maddubs_epi16(c2, bc4(xp + 8)), _mm256_maddubs_epi16(c3, bc4(xp + 12))));
                acc[a] = x16_step(acc[a], _mm256_madd_epi16(t, one), D, x->d[a * nb + 8 * sb + j / 2]);
            }
        }
    }
    for (int a = 0; a < A; a++) _mm256_storeu_ps(res[a] + 8 * hf, acc[a]);
}
static void run_q6kx(int A, const uint8_t *g, const qx *x, const int32_t *xoh, float (*res)[16], const uint8_t *lim) {
#define C(k) tile_q6kx(k, 0, g, x, xoh, res, lim), tile_q6kx(k, 1, g, x, xoh, res, NULL)
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
 * sums are exact, so the bits do not depend on how a group is split. */
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
        __m256 D[2], M[2];
        for (int h = 0; h < 2; h++) {
            D[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 16 * h)));
            M[h] = T == NX_Q41 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * h)))
                               : _mm256_mul_ps(D[h], _mm256_set1_ps(T == NX_Q40 ? -8.0f : -16.0f));
        }
        for (int a = 0; a < A; a++) {
            const __m256 dx = _mm256_set1_ps(x->d[a * nb + b]), sx = _mm256_set1_ps(x->s[a * nb + b]);
            for (int h = 0; h < 2; h++) {
                const __m256i ti = T == NX_Q50 ? _mm256_add_epi32(t[a][h], _mm256_madd_epi16(u[a][h], one))
                                               : _mm256_madd_epi16(u[a][h], one);
                acc[a][h] = _mm256_fmadd_ps(M[h], sx, _mm256_fmadd_ps(_mm256_cvtepi32_ps(ti), _mm256_mul_ps(D[h], dx), acc[a][h]));
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

/* The SD_*_X16 types: groups of 16 rows (r0, r1 multiples of 16), passes
 * of balanced width over the activation rows (at most SD_XA); the first
 * streams the group. */
static void mm_x16(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const sd_weight *w = j->w;
    const uint32_t t = w->type;
    const int q6 = t == SD_Q6_K_X16;
    const int nx = t == SD_Q4_0_X16 ? NX_Q40 : t == SD_Q4_1_X16 ? NX_Q41 : t == SD_Q5_0_X16 ? NX_Q50 : -1;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint8_t *base = w->data, *lim = base + (size_t)r1 * w->row_bytes;
    enum { XA = SD_XA };
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
            const int32_t *xo = q6 ? j->xo16h + (size_t)i * (cols / 16) : NULL;
            if (q6) run_q6kx(A, g, &xq, xo, res, pl);
            else if (t == SD_Q4_K_X16) run_q4kx(A, g, &xq, res, pl);
            else if (nx >= 0) run_nibx(nx, A, g, &xq, res, pl);
            else run_q80x(A, g, &xq, res, pl);
            x16_put(j, i, A, r, res);
            i += A;
        }
    }
}

#include "kernels/cpu/mm_rows.h"

void sd_cpu_mm_avx2(const sd_mm_job *j, int64_t r0, int64_t r1) { mm_rows(j, r0, r1); }
