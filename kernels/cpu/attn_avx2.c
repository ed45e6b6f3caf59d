/* AVX2 attention for one query row and the G query heads that share one
 * kv head (grouped-query attention): scores = K.q_g * scale, max-subtracted
 * softmax, out_g = sum_t p_gt V_t. attn_avx512.c recompiles this file with
 * the wider ISA. K and V rows are `stride` floats apart (all kv heads of a
 * position are adjacent in the cache).
 *
 * Why grouped: at long contexts a layer's K and V outgrow the core's L2
 * (Qwen2.5-1.5B: 2 MiB each at 2048 positions), and a head-at-a-time loop
 * streams them once per query head (6 times for that model). Here the
 * heads go in sub-groups of at most GS_MAX = 4 (their accumulators stay in
 * registers); each K row and each 16-column slice of a V row is loaded
 * once per sub-group. Head dims that are not a multiple of 16 go to the
 * scalar version. sc holds G rows of len scores, ldsc floats apart. The
 * cache is F32 or F16 (vcvtph2ps on load: half the bytes, same math). */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/vexp.h"

#ifndef SD_FN
#define SD_FN(name) name##_avx2
#endif

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define AI static inline __attribute__((always_inline))
enum { GS_MAX = 4, PF_ROWS = 32 };

/* 8 cache elements at element index i as floats. */
AI __m256 ld8(const int f16, const void *p, size_t i) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_loadu_ps((const float *)p + i);
}
AI void prefetch_row(const int f16, const void *p, size_t i, int hd) {
    const char *b = (const char *)p + i * (f16 ? 2 : 4);
    for (int d = 0; d < hd * (f16 ? 2 : 4); d += 64) _mm_prefetch(b + d, _MM_HINT_T1);
}

/* Scores of GS heads against K rows 0..len, and each head's max, four
 * positions a step. A head's query stays in NC = hd/8 registers (NC = 0:
 * hd read at run time and the query from L1) while it takes the step's 4
 * K rows; the heads of the sub-group take them in turn, so the rows come
 * from memory once and from L1 after. Each position's partial products are
 * one register, and three vhaddps and one 128-bit add turn the 4 registers
 * into the 4 scores in position order (the one-position loop this replaces
 * paid a 6-op horizontal sum per position and head, and reloaded the query:
 * measured in the commit that brought it). A last 1-3 positions take the
 * one-position form. */
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
enum { VB = 64 };
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

#if defined(__AVX512F__) && defined(__AVX512DQ__)
/* ---- AVX-512 (attn_avx512.c): 16 positions a step --------------------------
 * The 256-bit loops above pay a horizontal sum per (position, head) and
 * reload the query every position. Here a head's query stays in NC = hd/16
 * registers while a block of 16 K rows is scored: each position's partial
 * products are one register, and two transposing folds (fold4ps, fold16ps)
 * turn 16 such registers into the 16 scores in position order at about two
 * ops a position. Heads of the sub-group take the block in turn, so the
 * block (16 rows, 4-8 KiB) comes from memory once and from L1 after. The
 * weighted sum of V keeps the sub-group's outputs for 64 columns in
 * registers (GS x 4) and sweeps VB-row blocks as the 256-bit version does.
 * Measured, one query row, 1 thread: SmolLM2's shape (9/3 heads, hd 64) at
 * 256 positions 21.6 us against 39.0 for the 256-bit loops. */
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
/* out_g = sum_u p_gu V_u * inv_g, 64 columns (4 registers a head) at a time
 * over blocks of VB positions; a last slice of 16 or 32 columns takes
 * fewer registers. */
AI void weighted_v512(const int GS, const int f16, float *out, const void *v, int len, int64_t stride,
                      int hd, const float *sc, int64_t ldsc, const float *inv) {
    for (int u0 = 0; u0 < len; u0 += VB) {
        const int u1 = u0 + VB < len ? u0 + VB : len;
        for (int d0 = 0; d0 < hd; d0 += 64) {
            const int nc = hd - d0 >= 64 ? 4 : (hd - d0) / 16;
            __m512 o[GS_MAX][4];
            for (int g = 0; g < GS; g++)
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++)
                    o[g][c] = u0 && c < nc ? _mm512_loadu_ps(out + g * hd + d0 + 16 * c) : _mm512_setzero_ps();
            for (int u = u0; u < u1; u++) {
                const size_t vr = (size_t)u * stride + d0;
                if (d0 == 0) prefetch_row(f16, v, vr + PF_ROWS * stride, hd);
                __m512 vv[4];
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) vv[c] = c < nc ? ld16(f16, v, vr + 16 * c) : _mm512_setzero_ps();
                for (int g = 0; g < GS; g++) {
                    const __m512 p = _mm512_set1_ps(sc[g * ldsc + u]);
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) o[g][c] = _mm512_fmadd_ps(p, vv[c], o[g][c]);
                }
            }
            for (int g = 0; g < GS; g++) {
                const __m512 iv = _mm512_set1_ps(u1 == len ? inv[g] : 1.0f);
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++)
                    if (c < nc) _mm512_storeu_ps(out + g * hd + d0 + 16 * c, _mm512_mul_ps(o[g][c], iv));
            }
        }
    }
}
#endif

/* exp(s - max) in place over one head's scores; returns 1/sum. */
static float softmax_row(float *sc, int len, float mx) {
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    int t = 0;
    for (; t + 8 <= len; t += 8) {
        const __m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(sc + t), vmx));
        _mm256_storeu_ps(sc + t, p);
        vs = _mm256_add_ps(vs, p);
    }
    float sum = hsum(vs);
    for (; t < len; t++) {
        const float p = expf(sc[t] - mx);
        sc[t] = p;
        sum += p;
    }
    return 1.0f / sum;
}

AI void group(const int GS, const int f16, float *out, const float *q, const void *k,
              const void *v, int len, int64_t stride, int hd, float scale, float *sc,
              int64_t ldsc, float *lse) {
    float mx[GS_MAX], inv[GS_MAX];
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    if (hd == 64) scores512(4, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else if (hd == 128) scores512(8, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else scores512(0, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    for (int g = 0; g < GS; g++) inv[g] = softmax_row(sc + g * ldsc, len, mx[g]);
    weighted_v512(GS, f16, out, v, len, stride, hd, sc, ldsc, inv);
#else
    if (hd == 64) scores(8, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    else scores(0, GS, f16, q, k, len, stride, hd, scale, sc, ldsc, mx);
    for (int g = 0; g < GS; g++) inv[g] = softmax_row(sc + g * ldsc, len, mx[g]);
    weighted_v(GS, f16, out, v, len, stride, hd, sc, ldsc, inv);
#endif
    if (lse)
        for (int g = 0; g < GS; g++) lse[g] = mx[g] - logf(inv[g]);
}

/* One sub-group of gs heads, f16 and gs as compile-time constants. */
static void sub_group(int gs, int f16, float *out, const float *q, const void *k, const void *v,
                      int len, int64_t stride, int hd, float scale, float *sc, int64_t ldsc,
                      float *lse) {
#define G_CASE(n)                                                                                \
    case n:                                                                                      \
        if (f16) group(n, 1, out, q, k, v, len, stride, hd, scale, sc, ldsc, lse);               \
        else group(n, 0, out, q, k, v, len, stride, hd, scale, sc, ldsc, lse);                   \
        break;
    switch (gs) {
        G_CASE(1)
        G_CASE(2)
        G_CASE(3)
    default:
        G_CASE(4)
    }
#undef G_CASE
}

void SD_FN(sd_cpu_attn_group)(float *out, const float *q, const void *k, const void *v, int f16,
                              int len, int64_t stride, int hd, int G, float scale, float *sc,
                              int64_t ldsc, float *lse) {
    if (hd % 16) {
        sd_cpu_attn_group_scalar(out, q, k, v, f16, len, stride, hd, G, scale, sc, ldsc, lse);
        return;
    }
    /* sub-groups of at most GS_MAX, sizes as even as possible (6 -> 3+3) */
    const int nsub = (G + GS_MAX - 1) / GS_MAX;
    for (int s = 0, g0 = 0; s < nsub; s++) {
        const int gs = (G - g0) / (nsub - s);
        sub_group(gs, f16, out + (size_t)g0 * hd, q + (size_t)g0 * hd, k, v, len, stride, hd, scale,
                  sc, ldsc, lse ? lse + g0 : NULL);
        g0 += gs;
    }
}
