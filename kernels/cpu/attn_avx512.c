/* AVX-512 attention (attn_simd.h): 16 positions a step.
 * The 256-bit loops of attn_avx2.c pay a horizontal sum per (position, head) and
 * reload the query every position. Here a head's query stays in NC = hd/16
 * registers while a block of 16 K rows is scored: each position's partial
 * products are one register, and two transposing folds (fold4ps, fold16ps)
 * turn 16 such registers into the 16 scores in position order at about two
 * ops a position. Heads of the sub-group take the block in turn, so the
 * block (16 rows, 4-8 KiB) comes from memory once and from L1 after. The
 * weighted sum of V keeps the sub-group's outputs for 64 columns in
 * registers (GS x 4) and sweeps VB-row blocks as the 256-bit version does;
 * about half the 256-bit loops' time at SmolLM2's shape (9/3 heads, hd 64). */
#include "kernels/cpu/attn_simd.h"

AI __m512 ld16(const int f16, const void *p, size_t i) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_loadu_ps((const float *)p + i);
}
/* 128-bit lane j = [lane j of p0 summed, of p1, of p2, of p3] */
AI __m512 fold4ps(__m512 p0, __m512 p1, __m512 p2, __m512 p3) {
    const __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(p0, p1), _mm512_unpackhi_ps(p0, p1));
    const __m512 b = _mm512_add_ps(_mm512_unpacklo_ps(p2, p3), _mm512_unpackhi_ps(p2, p3));
    const __m512d ad = _mm512_castps_pd(a), bd = _mm512_castps_pd(b);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ad, bd)), _mm512_castpd_ps(_mm512_unpackhi_pd(ad, bd)));
}
/* F_i from fold4ps of positions 4i..4i+3: their 4 lanes summed, lanes in
 * position order 0..15 */
AI __m512 fold16ps(__m512 F0, __m512 F1, __m512 F2, __m512 F3) {
    const __m512 a = _mm512_add_ps(_mm512_shuffle_f32x4(F0, F1, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(F0, F1, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 b = _mm512_add_ps(_mm512_shuffle_f32x4(F2, F3, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(F2, F3, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}
/* NC: hd/16 as a constant (4 or 8), 0 = read hd at run time */
AI void scores512(const int NC, const int GS, const int f16, const float *q, const void *k, int len,
                  int64_t stride, int hd, float scale, float *sc, int64_t ldsc, float *mx) {
    const int nc = NC ? NC : hd / 16;
    __m512 vmx[GS_MAX];
    for (int g = 0; g < GS; g++) vmx[g] = _mm512_set1_ps(-INFINITY);
    for (int t0 = 0; t0 < len; t0 += 16) {
        const int nt = len - t0 < 16 ? len - t0 : 16;
        for (int r = 0; r < nt; r++) prefetch_row(f16, k, (size_t)(t0 + PF_ROWS + 16 + r) * stride, hd);
        const __mmask16 mask = (__mmask16)(nt == 16 ? 0xffffu : (1u << nt) - 1);
        for (int g = 0; g < GS; g++) {
            __m512 qv[8];
            if (NC)
#pragma GCC unroll 8
                for (int c = 0; c < NC; c++) qv[c] = _mm512_loadu_ps(q + g * hd + 16 * c);
            __m512 F[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                __m512 p[4];
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    p[r] = _mm512_setzero_ps();
                    if (4 * i + r >= nt) continue;
                    const size_t kr = (size_t)(t0 + 4 * i + r) * stride;
                    if (NC) {
#pragma GCC unroll 8
                        for (int c = 0; c < NC; c++) p[r] = _mm512_fmadd_ps(qv[c], ld16(f16, k, kr + 16 * c), p[r]);
                    } else {
                        for (int c = 0; c < nc; c++)
                            p[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * hd + 16 * c), ld16(f16, k, kr + 16 * c), p[r]);
                    }
                }
                F[i] = fold4ps(p[0], p[1], p[2], p[3]);
            }
            const __m512 sv = _mm512_mul_ps(fold16ps(F[0], F[1], F[2], F[3]), _mm512_set1_ps(scale));
            _mm512_mask_storeu_ps(sc + g * ldsc + t0, mask, sv);
            vmx[g] = _mm512_mask_max_ps(vmx[g], mask, vmx[g], sv);
        }
    }
    for (int g = 0; g < GS; g++) mx[g] = _mm512_reduce_max_ps(vmx[g]);
}
/* out_g = sum_u p_gu V_u * inv_g over the 16*NW columns from d0 (NW
 * registers a head, all GS x NW accumulators in registers: with the column
 * count read at run time GCC kept them on the stack, a load and a store
 * around every FMA) and positions u0..u1 of a VB block. */
AI void wv_slice512(const int GS, const int NW, const int f16, float *out, const void *v, int u0, int u1,
                    int len, int d0, int64_t stride, int hd, const float *sc, int64_t ldsc,
                    const float *inv) {
    __m512 o[GS_MAX][4];
#pragma GCC unroll 4
    for (int g = 0; g < GS; g++)
#pragma GCC unroll 4
        for (int c = 0; c < NW; c++) o[g][c] = u0 ? _mm512_loadu_ps(out + g * hd + d0 + 16 * c) : _mm512_setzero_ps();
    for (int u = u0; u < u1; u++) {
        const size_t vr = (size_t)u * stride + d0;
        if (d0 == 0) prefetch_row(f16, v, vr + PF_ROWS * stride, hd);
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < NW; c++) vv[c] = ld16(f16, v, vr + 16 * c);
#pragma GCC unroll 4
        for (int g = 0; g < GS; g++) {
            const __m512 p = _mm512_set1_ps(sc[g * ldsc + u]);
#pragma GCC unroll 4
            for (int c = 0; c < NW; c++) o[g][c] = _mm512_fmadd_ps(p, vv[c], o[g][c]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GS; g++) {
        const __m512 iv = _mm512_set1_ps(u1 == len ? inv[g] : 1.0f);
#pragma GCC unroll 4
        for (int c = 0; c < NW; c++) _mm512_storeu_ps(out + g * hd + d0 + 16 * c, _mm512_mul_ps(o[g][c], iv));
    }
}
/* The weighted sum over blocks of VB positions, 64 columns a slice (a last
 * slice of 32 and/or 16 columns where hd is not a multiple of 64). */
AI void weighted_v512(const int GS, const int f16, float *out, const void *v, int len, int64_t stride,
                      int hd, const float *sc, int64_t ldsc, const float *inv) {
    for (int u0 = 0; u0 < len; u0 += VB) {
        const int u1 = u0 + VB < len ? u0 + VB : len;
        int d0 = 0;
        for (; d0 + 64 <= hd; d0 += 64)
            wv_slice512(GS, 4, f16, out, v, u0, u1, len, d0, stride, hd, sc, ldsc, inv);
        if (hd - d0 >= 32) {
            wv_slice512(GS, 2, f16, out, v, u0, u1, len, d0, stride, hd, sc, ldsc, inv);
            d0 += 32;
        }
        if (d0 < hd) wv_slice512(GS, 1, f16, out, v, u0, u1, len, d0, stride, hd, sc, ldsc, inv);
    }
}

AI void group_scores(const int GS, const int f16, const float *q, const void *k, int len, int64_t stride,
                     int hd, float scale, float *sc, int64_t ldsc, float *mx) {
    if (hd == 64) scores512(4, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else if (hd == 128) scores512(8, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else scores512(0, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
}
AI void group_wsum(const int GS, const int f16, float *out, const void *v, int len, int64_t stride, int hd,
                   const float *sc, int64_t ldsc, const float *inv) {
    weighted_v512(GS, f16, out, v, len, stride, hd, sc, ldsc, inv);
}

void sd_cpu_attn_group_avx512(float *out, const float *q, const void *k, const void *v, int f16, int len,
                              int64_t stride, int hd, int G, float scale, float *sc, int64_t ldsc, float *lse) {
    attn_group(out, q, k, v, f16, len, stride, hd, G, scale, sc, ldsc, lse);
}
