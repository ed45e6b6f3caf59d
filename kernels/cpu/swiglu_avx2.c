/* SwiGLU, 8 elements a step: out = silu(g) * u with silu(g) = g * sigmoid(g)
 * and sigmoid from e = exp(-|g|) (always <= 1, so no overflow): 1/(1+e)
 * for g >= 0, e/(1+e) below. exp256's relative error (~2e-7) and one
 * division keep the result within a few ulp of the scalar expf version.
 * AVX-512 machines run it as it is: SwiGLU is a small share of a step. */
#include <immintrin.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/vexp.h"

void sd_cpu_swiglu_range_avx2(float *out, const float *gate, const float *up, size_t count) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = exp256(_mm256_or_ps(g, sign)); /* exp(-|g|) */
        const __m256 num = _mm256_blendv_ps(one, e, g); /* sign bit of g picks e */
        const __m256 sg = _mm256_div_ps(num, _mm256_add_ps(one, e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, sg), _mm256_loadu_ps(up + i)));
    }
    sd_swiglu_ref(out + i, gate + i, up + i, count - i);
}
