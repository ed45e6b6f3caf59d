/* sum_i exp(x_i - m), 8 elements a step: the softmax denominator of a
 * logits row whose maximum m is known (the top_k_rows op's probabilities).
 * Each chunk of 1024 elements sums in float lanes (at most 128 terms of at
 * most 1 a lane) and then adds to a double, so a 152K-entry row keeps the
 * scalar version's accuracy to about 1e-6. exp256 returns 0 below -87 and
 * takes NaN to its clamp, so NaN entries add nothing visible (< 1e-37). */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/vexp.h"

enum { EXP_SUM_CHUNK = 1024 };

double sd_cpu_exp_sum_avx2(const float *x, size_t n, float m) {
    if (!(m > -INFINITY)) return sd_exp_sum_ref(x, n, m); /* every x_i is -inf or NaN */
    const __m256 mv = _mm256_set1_ps(m);
    double sum = 0;
    size_t i = 0;
    while (i + 8 <= n) {
        const size_t end = i + EXP_SUM_CHUNK < n ? i + EXP_SUM_CHUNK : n;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (; i + 16 <= end; i += 16) {
            a0 = _mm256_add_ps(a0, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
            a1 = _mm256_add_ps(a1, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), mv)));
        }
        if (i + 8 <= end) {
            a0 = _mm256_add_ps(a0, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
            i += 8;
        }
        float lane[8];
        _mm256_storeu_ps(lane, _mm256_add_ps(a0, a1));
        for (int l = 0; l < 8; l++) sum += lane[l];
    }
    return sum + sd_exp_sum_ref(x + i, n - i, m);
}
