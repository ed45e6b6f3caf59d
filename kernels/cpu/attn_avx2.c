/* AVX2 attention (attn_simd.h): scores four positions a step with the
 * query in registers, and the weighted sum of V in column slices. */
#include "kernels/cpu/attn_simd.h"

/* 8 cache elements at element index i as floats. */
AI __m256 ld8(const int f16, const void *p, size_t i) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}
/* Scores of GS heads against K rows 0..len, and each head's max, four
 * positions a step. A head's query stays in NC = hd/8 registers (NC = 0:
 * hd read at run time and the query from L1) while it takes the step's 4
 * K rows; the heads of the sub-group take them in turn, so the rows come
 * from memory once and from L1 after. Each position's partial products are
 * one register, and three vhaddps and one 128-bit add turn the 4 registers
 * into the 4 scores in position order (a one-position loop would pay a
 * 6-op horizontal sum per position and head, and reload the query). A last
 * 1-3 positions take the one-position form. */
AI __m256 dot_row(const int NC, const int f16, const float *q, const __m256 *qv, const void *k,
                  size_t kr, int hd) {
    __m256 p = _mm256_setzero_ps();
    if (NC) {
#pragma GCC unroll 16
        for (int c = 0; c < NC; c++) p = _mm256_fmadd_ps(qv[c], ld8(f16, k, kr + 8 * c), p);
    } else {
        for (int d = 0; d < hd; d += 8) p = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), ld8(f16, k, kr + d), p);
    }
    return p;
}
/* The 4 scores whose partial products are p[0..3], scaled, stored at sc
 * in position order; returns the running max vm with them. */
AI __m128 store4(const __m256 *p, __m128 vs, float *sc, __m128 vm) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(p[0], p[1]), _mm256_hadd_ps(p[2], p[3]));
    const __m128 s4 = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), vs);
    _mm_storeu_ps(sc, s4);
    return _mm_max_ps(vm, s4);
}
AI void scores(const int NC, const int GS, const int f16, const float *q, const void *k, int len,
               int64_t stride, int hd, float scale, float *sc, int64_t ldsc, float *mx) {
    const __m128 vs = _mm_set1_ps(scale);
    __m128 vmx[GS_MAX];
    for (int g = 0; g < GS; g++) vmx[g] = _mm_set1_ps(-INFINITY);
    int t0 = 0;
    for (; t0 + 4 <= len; t0 += 4) {
        /* rows are strided (the other kv heads sit between them): fetch
         * PF_ROWS ahead, into L2 (an L1 miss buffer per line in flight
         * would cap the stream, as in the matrix products) */
        for (int r = 0; r < 4; r++) prefetch_row(f16, k, (size_t)(t0 + PF_ROWS + r) * stride, hd);
        if (NC) {
            for (int g = 0; g < GS; g++) {
                __m256 qv[NC ? NC : 1], p[4];
#pragma GCC unroll 16
                for (int c = 0; c < NC; c++) qv[c] = _mm256_loadu_ps(q + g * hd + 8 * c);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) p[r] = dot_row(NC, f16, q + g * hd, qv, k, (size_t)(t0 + r) * stride, hd);
                vmx[g] = store4(p, vs, sc + g * ldsc + t0, vmx[g]);
            }
            continue;
        }
        /* hd read at run time: two heads take each 8 columns of the 4 K
         * rows together, 6 loads for 8 FMAs (the one-row loop loaded the
         * query again for every FMA); each score's products are summed
         * in the same order as before, so the bits are the same */
#pragma GCC unroll 2
        for (int g = 0; g < GS; g += 2) {
            const int two = g + 1 < GS;
            __m256 p[2][4];
            for (int r = 0; r < 4; r++) p[0][r] = p[1][r] = _mm256_setzero_ps();
            for (int d = 0; d < hd; d += 8) {
                const __m256 q0 = _mm256_loadu_ps(q + g * hd + d), q1 = two ? _mm256_loadu_ps(q + (g + 1) * hd + d) : q0;
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const __m256 kv = ld8(f16, k, (size_t)(t0 + r) * stride + d);
                    p[0][r] = _mm256_fmadd_ps(q0, kv, p[0][r]);
                    if (two) p[1][r] = _mm256_fmadd_ps(q1, kv, p[1][r]);
                }
            }
            vmx[g] = store4(p[0], vs, sc + g * ldsc + t0, vmx[g]);
            if (two) vmx[g + 1] = store4(p[1], vs, sc + (g + 1) * ldsc + t0, vmx[g + 1]);
        }
    }
    for (int g = 0; g < GS; g++) {
        __m128 m = _mm_max_ps(vmx[g], _mm_movehl_ps(vmx[g], vmx[g]));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        mx[g] = _mm_cvtss_f32(m);
    }
    for (int t = t0; t < len; t++)
        for (int g = 0; g < GS; g++) {
            __m256 qv[NC ? NC : 1];
#pragma GCC unroll 16
            for (int c = 0; c < NC; c++) qv[c] = _mm256_loadu_ps(q + g * hd + 8 * c);
            const float s = hsum(dot_row(NC, f16, q + g * hd, qv, k, (size_t)t * stride, hd)) * scale;
            sc[g * ldsc + t] = s;
            mx[g] = s > mx[g] ? s : mx[g];
        }
}

/* out_g = sum_u p_gu V_u / sum_g for GS heads. Blocks of VB positions
 * (VB rows of V, 32 KiB at head dim 128, stay in L1/L2) are swept SW x 8
 * columns at a time with the accumulators in registers, carried across
 * blocks in out; so V is read from memory once, however wide the head.
 * Each accumulator gains one FMA a position, a chain as long as the block:
 * the GS x SW chains are what hides the FMA latency, so SW is 4 (12
 * chains for SmolLM2's group of 3) where the registers allow, 2 for a
 * sub-group of 4; a last slice of 16 columns takes 2 of the SW. */
/* SW registers a head of columns d0.. over positions u0..u1 */
AI void weighted_v_slice(const int GS, const int SW, const int f16, float *out, const void *v, int u0,
                         int u1, int len, int d0, int64_t stride, int hd, const float *sc, int64_t ldsc,
                         const float *inv) {
    __m256 o[GS_MAX][4];
#pragma GCC unroll 4
    for (int g = 0; g < GS; g++)
#pragma GCC unroll 4
        for (int c = 0; c < SW; c++) o[g][c] = u0 ? _mm256_loadu_ps(out + g * hd + d0 + 8 * c) : _mm256_setzero_ps();
    for (int u = u0; u < u1; u++) {
        const size_t vr = (size_t)u * stride + d0;
        if (d0 == 0) prefetch_row(f16, v, vr + PF_ROWS * stride, hd);
#pragma GCC unroll 4
        for (int g = 0; g < GS; g++) {
            const __m256 p = _mm256_broadcast_ss(sc + g * ldsc + u);
#pragma GCC unroll 4
            for (int c = 0; c < SW; c++) o[g][c] = _mm256_fmadd_ps(p, ld8(f16, v, vr + 8 * c), o[g][c]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < GS; g++) {
        const __m256 iv = _mm256_set1_ps(u1 == len ? inv[g] : 1.0f);
#pragma GCC unroll 4
        for (int c = 0; c < SW; c++) _mm256_storeu_ps(out + g * hd + d0 + 8 * c, _mm256_mul_ps(o[g][c], iv));
    }
}
AI void weighted_v(const int GS, const int f16, float *out, const void *v, int len,
                   int64_t stride, int hd, const float *sc, int64_t ldsc, const float *inv) {
    const int SW = GS <= 3 ? 4 : 2;
    for (int u0 = 0; u0 < len; u0 += VB) {
        const int u1 = u0 + VB < len ? u0 + VB : len;
        int d0 = 0;
        for (; d0 + 8 * SW <= hd; d0 += 8 * SW)
            weighted_v_slice(GS, SW, f16, out, v, u0, u1, len, d0, stride, hd, sc, ldsc, inv);
        if (d0 < hd) weighted_v_slice(GS, 2, f16, out, v, u0, u1, len, d0, stride, hd, sc, ldsc, inv);
    }
}

AI void group_scores(const int GS, const int f16, const float *q, const void *k, int len, int64_t stride,
                     int hd, float scale, float *sc, int64_t ldsc, float *mx) {
    if (hd == 64) scores(8, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else scores(0, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
}
AI void group_wsum(const int GS, const int f16, float *out, const void *v, int len, int64_t stride, int hd,
                   const float *sc, int64_t ldsc, const float *inv) {
    weighted_v(GS, f16, out, v, len, stride, hd, sc, ldsc, inv);
}

void sd_cpu_attn_group_avx2(float *out, const float *q, const void *k, const void *v, int f16, int len,
                            int64_t stride, int hd, int G, float scale, float *sc, int64_t ldsc, float *lse) {
    attn_group(out, q, k, v, f16, len, stride, hd, G, scale, sc, ldsc, lse);
}
