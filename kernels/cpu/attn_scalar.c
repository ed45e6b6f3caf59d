/* The reference attention kernel: one head of a group at a time, in the
 * order of the definition (scores, max-subtracted softmax, weighted sum of
 * V rows); also the SIMD files' path for head dims they do not take. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/common/fp16.h"
static inline float kv_at(const void *p, int f16, size_t i) {
    return f16 ? sd_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

void sd_cpu_attn_group_scalar(float *out, const float *q, const void *k, const void *v, int f16,
                              int len, int64_t stride, int hd, int G, float scale, float *sc,
                              int64_t ldsc, float *lse) {
    (void)ldsc;
    for (int g = 0; g < G; g++) {
        const float *qg = q + (size_t)g * hd;
        float *og = out + (size_t)g * hd;
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
            const size_t kr = (size_t)t * stride;
            float s = 0;
            for (int d = 0; d < hd; d++) s += qg[d] * kv_at(k, f16, kr + d);
            s *= scale;
            sc[t] = s;
            if (s > mx) mx = s;
        }
        float sum = 0;
        for (int t = 0; t < len; t++) {
            float p = expf(sc[t] - mx);
            sc[t] = p;
            sum += p;
        }
        float inv = 1.0f / sum;
        if (lse) lse[g] = mx + logf(sum);
        for (int d = 0; d < hd; d++) og[d] = 0;
        for (int t = 0; t < len; t++) {
            const size_t vr = (size_t)t * stride;
            float p = sc[t] * inv;
            for (int d = 0; d < hd; d++) og[d] += p * kv_at(v, f16, vr + d);
        }
    }
}

