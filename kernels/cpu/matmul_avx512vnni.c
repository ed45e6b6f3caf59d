/* AVX-512 matrix products with VNNI: the integer dot products of the
 * 512-bit tiles (mm_tiles512.h) as vpdpbusd, one instruction for four
 * unsigned x signed byte products added into each int32 lane (exact, the
 * same sums as vpmaddubsw + vpmaddwd). Where the weight codes are signed
 * (Q8_0), the activations enter unsigned as x + 128 and 128 * sum(code)
 * comes off once a block. The 256-bit tiles of mm_tiles256.h take
 * vpdpbusd here too (mm_simd.h). Chosen at run time when the CPU has
 * AVX512_VNNI (ctx.c); the amx level runs these products for everything
 * but its k8 K-quants' whole 16 activation rows (amx/matmul_amx.c).
 *
 * The repacked Q4_K and Q6_K (SD_Q4_K_X16, SD_Q6_K_X16) take activations
 * with one scale a super-block (cpu_int.h, "k8"): every integer sum of a
 * super-block then shares one float factor per weight row, so a
 * super-block's whole product stays an integer and takes one float step
 * per activation row, not one per sub-block (8 Q4_K, 16 Q6_K):
 *   Q4_K: y += (d dk) I1 - (dmin dk) I2, I1 = sum_s sc_s (sum over the
 *         sub-block of q x code), I2 = sum_s mn_s (sum of the sub-block's q);
 *   Q6_K: y += (d dk) I,  I = sum_s sc_s (sum of q x (code - 32)).
 * Each sub-block's int32 sum is multiplied by its scale (vpmulld) and
 * added up; I2 takes four vpdpwssd from the sub-blocks' code sums, paired.
 * With 32-element activation blocks each sub-block's sum takes its own
 * float step (a convert and two FMAs an activation row), the part of a
 * multi-row tile that grows with its rows beside the integer products. */
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

typedef struct k8x {
    const int8_t *q; /* activation row 0 of the tile: codes */
    const float *d;  /* [cols/256] a row */
    const int16_t *s; /* [cols/32] a row: sums of 32 codes */
    const int32_t *o; /* [cols/16] a row: -32 x sums of 16 codes */
    int64_t cols;
} k8x;

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
        /* by 2, as the 32-block tile (mm_tiles512.h): unrolled whole, the
         * tile stalls on weights streamed from L3 or DRAM */
#pragma GCC unroll 2
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
        /* by 2, not 16: unrolled whole, the tile outgrows the op cache */
#pragma GCC unroll 2
        for (int j = 0; j < 16; j++) {
            const uint8_t *P = G + 288 + 192 * j;
            if (j < 5) x16_pf(G + 64 * j, lim);
            const __m512i S = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * j)));
            __m512i cq[4];
            q6x16_load512(P, lim, cq);
#pragma GCC unroll 9
            for (int a = 0; a < A; a++) {
                const __m512i t = q6x_dot512(_mm512_set1_epi32(x->o[a * no + 16 * sb + j]), cq[0], cq[1],
                                             cq[2], cq[3], x->q + a * cols + 256 * sb + 16 * j);
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

/* The k8 products' row walk over activation rows [i0, n): groups of 16
 * weight rows (r0, r1 multiples of 16), the activation rows in passes of
 * balanced width (at most SD_XA512), the first of which streams the
 * group. */
void sd_cpu_mm_k8_vnni(const sd_mm_job *j, int64_t r0, int64_t r1, int i0) {
    const sd_weight *w = j->w;
    const int q6 = w->type == SD_Q6_K_X16;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint8_t *base = w->data, *lim = base + (size_t)r1 * w->row_bytes;
    float res[SD_XA512][16];
    for (int64_t v = 0; v < SD_PF && (size_t)r0 * w->row_bytes + v < (size_t)r1 * w->row_bytes; v += 64)
        _mm_prefetch((const char *)base + (size_t)r0 * w->row_bytes + v, SD_PFH);
    for (int64_t r = r0; r < r1; r += 16) {
        const uint8_t *g = base + (size_t)r * w->row_bytes;
        for (int i = i0; i < j->n;) {
            const int left = j->n - i, passes = (left + SD_XA512 - 1) / SD_XA512, A = (left + passes - 1) / passes;
            const uint8_t *pl = i == i0 ? lim : NULL;
            const k8x xk = {j->xk + (size_t)i * cols, j->xkd + (size_t)i * (cols / 256),
                            j->xks + (size_t)i * nb, j->xko + (size_t)i * (cols / 16), cols};
            if (q6) run_q6kx_k8(A, g, &xk, res, pl);
            else run_q4kx_k8(A, g, &xk, res, pl);
            x16_put(j, i, A, r, res);
            i += A;
        }
    }
}

void sd_cpu_mm_avx512vnni(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const uint32_t t = j->w->type;
    if ((t == SD_Q4_K_X16 || t == SD_Q6_K_X16) && j->xk) sd_cpu_mm_k8_vnni(j, r0, r1, 0);
    else mm_rows(j, r0, r1);
}
