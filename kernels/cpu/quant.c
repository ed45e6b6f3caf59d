/* Row conversions F32 <-> weight types, and the scalar activation quantizer.
 *
 * Block layouts (gguf.h): 32 elements a block, scales as IEEE half.
 *   Q8_0 { f16 d; int8 q[32]; }       34 bytes, x = d*q
 *   Q4_0 { f16 d; u8 q[16]; }         18 bytes, x = d*(nib-8)
 *   Q4_1 { f16 d; f16 m; u8 q[16]; }  20 bytes, x = d*nib + m
 * Byte j of a 4-bit block holds element j (low nibble) and j+16 (high).
 * The weight quantizers follow ggml's *_ref functions exactly, so a row
 * quantized here is byte-identical to one from llama.cpp's tools. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"

int sd_cpu_type_block(uint32_t type, int *elems, int *bytes) {
    int el, by;
    switch (type) {
    case SD_F32: el = 1; by = 4; break;
    case SD_F16: el = 1; by = 2; break;
    case SD_BF16: el = 1; by = 2; break;
    case SD_Q8_0: el = 32; by = 34; break;
    case SD_Q4_0: el = 32; by = 18; break;
    case SD_Q4_1: el = 32; by = 20; break;
    default: return 0;
    }
    if (elems) *elems = el;
    if (bytes) *bytes = by;
    return 1;
}

static inline uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

int sd_quantize_row(uint32_t type, const float *x, void *out, int64_t n) {
    int el, by;
    if (!sd_cpu_type_block(type, &el, &by) || n < 0 || n % el) return -1;
    uint8_t *o = out;
    switch (type) {
    case SD_F32: memcpy(out, x, (size_t)n * 4); return 0;
    case SD_F16:
        for (int64_t i = 0; i < n; i++) st16(o + 2 * i, sd_f32_to_f16(x[i]));
        return 0;
    case SD_BF16:
        for (int64_t i = 0; i < n; i++) st16(o + 2 * i, sd_f32_to_bf16(x[i]));
        return 0;
    default: break;
    }
    for (int64_t b = 0; b < n / 32; b++, x += 32, o += by) {
        if (type == SD_Q8_0) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            st16(o, sd_f32_to_f16(d));
            for (int j = 0; j < 32; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
        } else if (type == SD_Q4_0) {
            float amax = 0, max = 0;
            for (int j = 0; j < 32; j++)
                if (amax < fabsf(x[j])) {
                    amax = fabsf(x[j]);
                    max = x[j];
                }
            const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
            st16(o, sd_f32_to_f16(d));
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)(x[j] * id + 8.5f), c = (int8_t)(x[j + 16] * id + 8.5f);
                a = a < 15 ? a : 15;
                c = c < 15 ? c : 15;
                o[2 + j] = (uint8_t)(a | (c << 4));
            }
        } else { /* Q4_1 */
            float mn = FLT_MAX, mx = -FLT_MAX;
            for (int j = 0; j < 32; j++) {
                mn = fminf(mn, x[j]);
                mx = fmaxf(mx, x[j]);
            }
            const float d = (mx - mn) / 15.0f, id = d ? 1.0f / d : 0.0f;
            st16(o, sd_f32_to_f16(d));
            st16(o + 2, sd_f32_to_f16(mn));
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)((x[j] - mn) * id + 0.5f), c = (int8_t)((x[j + 16] - mn) * id + 0.5f);
                a = a < 15 ? a : 15;
                c = c < 15 ? c : 15;
                o[4 + j] = (uint8_t)(a | (c << 4));
            }
        }
    }
    return 0;
}

int sd_dequantize_row(uint32_t type, const void *in, float *out, int64_t n) {
    int el, by;
    if (!sd_cpu_type_block(type, &el, &by) || n < 0 || n % el) return -1;
    const uint8_t *p = in;
    switch (type) {
    case SD_F32: memcpy(out, in, (size_t)n * 4); return 0;
    case SD_F16:
        for (int64_t i = 0; i < n; i++) out[i] = sd_f16_to_f32(ld16(p + 2 * i));
        return 0;
    case SD_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = sd_bf16_to_f32(ld16(p + 2 * i));
        return 0;
    default: break;
    }
    for (int64_t b = 0; b < n / 32; b++, out += 32, p += by) {
        const float d = sd_f16_to_f32(ld16(p));
        if (type == SD_Q8_0) {
            for (int j = 0; j < 32; j++) out[j] = d * (float)(int8_t)p[2 + j];
        } else if (type == SD_Q4_0) {
            for (int j = 0; j < 16; j++) {
                out[j] = d * (float)((p[2 + j] & 15) - 8);
                out[j + 16] = d * (float)((p[2 + j] >> 4) - 8);
            }
        } else {
            const float m = sd_f16_to_f32(ld16(p + 2));
            for (int j = 0; j < 16; j++) {
                out[j] = d * (float)(p[4 + j] & 15) + m;
                out[j + 16] = d * (float)(p[4 + j] >> 4) + m;
            }
        }
    }
    return 0;
}

/* Activation quantizer (see cpu.h): rintf rounds to nearest even in the
 * default rounding mode, like _mm256_round_ps(_MM_FROUND_TO_NEAREST_INT). */
void sd_cpu_qact_scalar(const float *x, int64_t cols, int8_t *q, float *d, float *s) {
    for (int64_t b = 0; b < cols / 32; b++, x += 32, q += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float dd = amax / 127.0f, id = dd ? 1.0f / dd : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = (int)rintf(x[j] * id);
            q[j] = (int8_t)v;
            sum += v;
        }
        d[b] = dd;
        s[b] = dd * (float)sum;
    }
}
