/* AVX2 attention for one (query row, head): scores = K.q * scale, max-
 * subtracted softmax, out = sum p_t V_t. attn_avx512.c recompiles this file
 * with the wider ISA. K and V rows are `stride` floats apart (all kv heads
 * of a position are adjacent in the cache). Head dims that are not a
 * multiple of 8 go to the scalar version. The output is built 32 floats at
 * a time in 4 registers, streaming V once per 32 columns (L1/L2 resident). */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/cpu.h"

#ifndef SD_FN
#define SD_FN(name) name##_avx2
#endif

void sd_cpu_attn_head_scalar(float *out, const float *q, const float *k, const float *v,
                             int len, int64_t stride, int hd, float scale, float *sc);

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x) for x <= 0 (softmax after max subtraction): 2^(x*log2 e) split
 * into integer and fraction, degree-6 polynomial for 2^f on [-0.5, 0.5]
 * (relative error ~2e-7); below -87 it returns 0. */
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f));
    const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(t, n);
    __m256 p = _mm256_set1_ps(1.535336188319500e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.339887440266574e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.618437357674640e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.550332471162809e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.402264791363012e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.931472028550421e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void SD_FN(sd_cpu_attn_head)(float *out, const float *q, const float *k, const float *v,
                             int len, int64_t stride, int hd, float scale, float *sc) {
    if (hd % 8) {
        sd_cpu_attn_head_scalar(out, q, k, v, len, stride, hd, scale, sc);
        return;
    }
    /* scores */
    float mx = -INFINITY;
    for (int t = 0; t < len; t++) {
        const float *kr = k + (size_t)t * stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        int d = 0;
        for (; d + 16 <= hd; d += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kr + d), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), _mm256_loadu_ps(kr + d + 8), a1);
        }
        if (d < hd) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kr + d), a0);
        const float s = hsum(_mm256_add_ps(a0, a1)) * scale;
        sc[t] = s;
        mx = s > mx ? s : mx;
    }
    /* softmax numerators */
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
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    /* weighted sum of V */
    int d0 = 0;
    for (; d0 + 32 <= hd; d0 += 32) {
        __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
        for (int u = 0; u < len; u++) {
            const float *vr = v + (size_t)u * stride + d0;
            const __m256 p = _mm256_broadcast_ss(sc + u);
            o0 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr), o0);
            o1 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8), o1);
            o2 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 16), o2);
            o3 = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 24), o3);
        }
        _mm256_storeu_ps(out + d0, _mm256_mul_ps(o0, inv));
        _mm256_storeu_ps(out + d0 + 8, _mm256_mul_ps(o1, inv));
        _mm256_storeu_ps(out + d0 + 16, _mm256_mul_ps(o2, inv));
        _mm256_storeu_ps(out + d0 + 24, _mm256_mul_ps(o3, inv));
    }
    for (; d0 < hd; d0 += 8) {
        __m256 o0 = _mm256_setzero_ps();
        for (int u = 0; u < len; u++)
            o0 = _mm256_fmadd_ps(_mm256_broadcast_ss(sc + u),
                                 _mm256_loadu_ps(v + (size_t)u * stride + d0), o0);
        _mm256_storeu_ps(out + d0, _mm256_mul_ps(o0, inv));
    }
}
