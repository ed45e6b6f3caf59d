/* Row conversions F32 <-> weight types, and the scalar activation quantizer.
 *
 * Block layouts: kernels/common/wtype.h. The 32-element quantizers (Q8_0,
 * Q4_0, Q4_1, Q5_0) follow ggml's *_ref functions exactly, so a row
 * quantized here is byte-identical to one from llama.cpp's tools. The
 * K-quant quantizers fit each sub-block directly (see quant_q4_k and
 * quant_q6_k) instead of ggml's iterative scale search: their rows are
 * valid blocks that any GGUF reader decodes, not ggml's bytes. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
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
    case SD_Q5_0: el = 32; by = 22; break;
    case SD_Q4_K: el = 256; by = 144; break;
    case SD_Q6_K: el = 256; by = 210; break;
    default: return 0;
    }
    if (elems) *elems = el;
    if (bytes) *bytes = by;
    return 1;
}

static inline void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* The element of largest magnitude, the first of equal ones (ggml's max). */
static float signed_max(const float *x, int n) {
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static inline float f16r(float v) { return sd_f16_to_f32(sd_f32_to_f16(v)); }

/* Q4_K, one super-block. Each sub-block of 32 gets the range [lo, hi] with
 * lo = min(0, min x) (ggml's min term only subtracts): its min is -lo and
 * its ideal scale (hi-lo)/15. The super-block scales d and dmin are the
 * largest of those over 63 (f16); mn = round(-lo/dmin) and then
 * sc = ceil((hi + dmin*mn) / 15 / d), so the grid reaches hi. A value is
 * off by at most half a step of its sub-block scale, or (below the grid's
 * bottom) by the rounding of mn, half a step of dmin. */
static void quant_q4_k(const float *x, uint8_t *o) {
    float lo[8], hi[8], maxr = 0, maxm = 0;
    for (int s = 0; s < 8; s++) {
        lo[s] = 0, hi[s] = -FLT_MAX;
        for (int k = 0; k < 32; k++) {
            lo[s] = fminf(lo[s], x[32 * s + k]);
            hi[s] = fmaxf(hi[s], x[32 * s + k]);
        }
        maxr = fmaxf(maxr, (hi[s] - lo[s]) / 15.0f);
        maxm = fmaxf(maxm, -lo[s]);
    }
    const float d = f16r(maxr / 63.0f), dmin = f16r(maxm / 63.0f);
    uint8_t sc[8], mn[8];
    float ds[8], dm[8];
    for (int s = 0; s < 8; s++) {
        int m = dmin > 0 ? (int)lrintf(-lo[s] / dmin) : 0;
        mn[s] = (uint8_t)(m > 63 ? 63 : m);
        dm[s] = dmin * mn[s];
        int c = d > 0 ? (int)ceilf((hi[s] + dm[s]) / 15.0f / d) : 0;
        sc[s] = (uint8_t)(c > 63 ? 63 : c < 0 ? 0 : c);
        ds[s] = d * sc[s];
    }
    st16(o, sd_f32_to_f16(d));
    st16(o + 2, sd_f32_to_f16(dmin));
    uint8_t *sb = o + 4; /* inverse of sd_q4_k_scales */
    for (int s = 0; s < 4; s++) {
        sb[s] = (uint8_t)(sc[s] | (sc[s + 4] >> 4) << 6);
        sb[s + 4] = (uint8_t)(mn[s] | (mn[s + 4] >> 4) << 6);
        sb[s + 8] = (uint8_t)((sc[s + 4] & 15) | (mn[s + 4] & 15) << 4);
    }
    uint8_t *q = o + 16;
    memset(q, 0, 128);
    for (int i = 0; i < 256; i++) {
        const int s = i / 32;
        int v = ds[s] > 0 ? (int)lrintf((x[i] + dm[s]) / ds[s]) : 0;
        v = v < 0 ? 0 : v > 15 ? 15 : v;
        q[32 * (i / 64) + i % 32] |= (uint8_t)(i % 64 < 32 ? v : v << 4);
    }
}

/* Q6_K, one super-block. Each sub-block of 16 gets ggml's 6-bit grid
 * around its signed max m (scale m/-32, so m lands on code 0); the int8
 * scales are those over d = max|scale|/127 (f16), rounded away from zero so
 * the grid never shrinks below the sub-block: a value is off by at most
 * one step (the side opposite m clips at code 63, one step short). */
static void quant_q6_k(const float *x, uint8_t *o) {
    float scale[16], amaxs = 0;
    for (int s = 0; s < 16; s++) {
        scale[s] = signed_max(x + 16 * s, 16) / -32.0f;
        amaxs = fmaxf(amaxs, fabsf(scale[s]));
    }
    const float d = f16r(amaxs / 127.0f);
    float ds[16];
    for (int s = 0; s < 16; s++) {
        int c = d > 0 ? (int)copysignf(ceilf(fabsf(scale[s]) / d), scale[s]) : 0;
        c = c > 127 ? 127 : c < -127 ? -127 : c;
        o[192 + s] = (uint8_t)(int8_t)c;
        ds[s] = d * (float)c;
    }
    st16(o + 208, sd_f32_to_f16(d));
    memset(o, 0, 192);
    for (int i = 0; i < 256; i++) {
        const int s = i / 16, h = i / 128, k = i % 128 / 32, l = i % 32;
        int v = ds[s] != 0 ? (int)lrintf(x[i] / ds[s]) + 32 : 32;
        v = v < 0 ? 0 : v > 63 ? 63 : v;
        o[64 * h + 32 * (k & 1) + l] |= (uint8_t)(k < 2 ? v & 15 : (v & 15) << 4);
        o[128 + 32 * h + l] |= (uint8_t)((v >> 4) << (2 * k));
    }
}

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
    case SD_Q4_K:
    case SD_Q6_K:
        for (int64_t b = 0; b < n / 256; b++, x += 256, o += by)
            (type == SD_Q4_K ? quant_q4_k : quant_q6_k)(x, o);
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
            const float max = signed_max(x, 32);
            const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
            st16(o, sd_f32_to_f16(d));
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)(x[j] * id + 8.5f), c = (int8_t)(x[j + 16] * id + 8.5f);
                a = a < 15 ? a : 15;
                c = c < 15 ? c : 15;
                o[2 + j] = (uint8_t)(a | (c << 4));
            }
        } else if (type == SD_Q5_0) {
            const float max = signed_max(x, 32);
            const float d = max / -16.0f, id = d ? 1.0f / d : 0.0f;
            st16(o, sd_f32_to_f16(d));
            uint32_t qh = 0;
            for (int j = 0; j < 16; j++) {
                int a = (int8_t)(x[j] * id + 16.5f), c = (int8_t)(x[j + 16] * id + 16.5f);
                a = a < 31 ? a : 31;
                c = c < 31 ? c : 31;
                o[6 + j] = (uint8_t)((a & 15) | (c & 15) << 4);
                qh |= (uint32_t)(a >> 4) << j | (uint32_t)(c >> 4) << (j + 16);
            }
            memcpy(o + 2, &qh, 4);
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
        for (int64_t i = 0; i < n; i++) out[i] = sd_f16_to_f32(sd_ld16(p + 2 * i));
        return 0;
    case SD_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = sd_bf16_to_f32(sd_ld16(p + 2 * i));
        return 0;
    case SD_Q4_K:
        /* (d*sc)*code and dmin*mn are exact in float: one rounding each element */
        for (int64_t b = 0; b < n / 256; b++, out += 256, p += by) {
            const float d = sd_f16_to_f32(sd_ld16(p)), dmin = sd_f16_to_f32(sd_ld16(p + 2));
            uint8_t sm[16];
            sd_q4_k_scales(p + 4, sm);
            for (int i = 0; i < 256; i++)
                out[i] = d * (float)sm[i / 32] * (float)sd_q4_k_code(p, i) -
                         dmin * (float)sm[8 + i / 32];
        }
        return 0;
    case SD_Q6_K:
        for (int64_t b = 0; b < n / 256; b++, out += 256, p += by) {
            const float d = sd_f16_to_f32(sd_ld16(p + 208));
            for (int i = 0; i < 256; i++)
                out[i] = d * (float)(int8_t)p[192 + i / 16] * (float)(sd_q6_k_code(p, i) - 32);
        }
        return 0;
    default: break;
    }
    for (int64_t b = 0; b < n / 32; b++, out += 32, p += by) {
        const float d = sd_f16_to_f32(sd_ld16(p));
        if (type == SD_Q8_0) {
            for (int j = 0; j < 32; j++) out[j] = d * (float)(int8_t)p[2 + j];
        } else if (type == SD_Q4_0) {
            for (int j = 0; j < 16; j++) {
                out[j] = d * (float)((p[2 + j] & 15) - 8);
                out[j + 16] = d * (float)((p[2 + j] >> 4) - 8);
            }
        } else if (type == SD_Q5_0) {
            for (int j = 0; j < 32; j++) out[j] = d * (float)(sd_q5_0_code(p, j) - 16);
        } else {
            const float m = sd_f16_to_f32(sd_ld16(p + 2));
            for (int j = 0; j < 16; j++) {
                out[j] = d * (float)(p[4 + j] & 15) + m;
                out[j + 16] = d * (float)(p[4 + j] >> 4) + m;
            }
        }
    }
    return 0;
}

/* Activation quantizer (see cpu_int.h): rintf rounds to nearest even in the
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
