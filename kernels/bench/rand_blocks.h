/* Random valid blocks of the quantised weight types (kernels/common/wtype.h),
 * written directly rather than by quantising floats: the benchmarks fill
 * gigabytes this way, and the tests get every bit of each encoding
 * exercised (all 16 nibbles, all high bits, the 6-bit Q4_K scales and mins
 * with their top bits, negative Q6_K scales) without needing a quantiser
 * for the type. Values are of the order of amp: each block's scale (and
 * Q4_1's and Q4_K's offset) is drawn between v/2 and v, with v the value
 * that maps the quants' range onto about +-amp, so |x| <= 2 amp for every
 * type. Header-only, for C and C++ (kernels/bench/bench_kernels_cuda.cu,
 * tests/util/synth_model.c, tests/test_cuda.c). */
#ifndef SD_RAND_BLOCKS_H
#define SD_RAND_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"

/* splitmix64 */
static inline uint64_t sd_rb_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A half between v/2 and v, stored little-endian at p. */
static inline void sd_rb_scale(uint64_t *s, uint8_t *p, float v) {
    const float u = (float)(sd_rb_next(s) >> 40) / 16777216.0f;
    const uint16_t h = sd_f32_to_f16(v * (0.5f + 0.5f * u));
    memcpy(p, &h, 2);
}

static inline void sd_rb_bytes(uint64_t *s, uint8_t *p, size_t n) {
    for (size_t k = 0; k < n; k += 8) {
        const uint64_t z = sd_rb_next(s);
        memcpy(p + k, &z, n - k < 8 ? n - k : 8);
    }
}

/* n blocks of type at dst (n * sd_wtype_block_bytes(type) bytes). 0, or -1
 * for a type that is not quantised. Every byte pattern of the quants is
 * valid, so they are random bytes; only the scales are drawn to size. */
static inline int sd_rand_blocks(uint32_t type, void *dst, size_t n, float amp, uint64_t *s) {
    uint8_t *p = (uint8_t *)dst;
    const size_t bb = sd_wtype_block_bytes(type);
    for (size_t b = 0; b < n; b++, p += bb) {
        switch (type) {
        case SD_Q8_0: /* d * q, q in [-128, 127] */
            sd_rb_scale(s, p, amp / 128.0f);
            sd_rb_bytes(s, p + 2, 32);
            break;
        case SD_Q4_0: /* d * (nibble - 8) */
            sd_rb_scale(s, p, amp / 8.0f);
            sd_rb_bytes(s, p + 2, 16);
            break;
        case SD_Q4_1: /* d * nibble + m, m <= 0 */
            sd_rb_scale(s, p, amp / 8.0f);
            sd_rb_scale(s, p + 2, -amp);
            sd_rb_bytes(s, p + 4, 16);
            break;
        case SD_Q5_0: /* d * (q5 - 16): qh and the nibbles */
            sd_rb_scale(s, p, amp / 16.0f);
            sd_rb_bytes(s, p + 2, 20);
            break;
        case SD_Q4_K: /* d * sc * nibble - dmin * mn, sc and mn in [0, 63] */
            sd_rb_scale(s, p, 2.0f * amp / (63.0f * 15.0f));
            sd_rb_scale(s, p + 2, amp / 63.0f);
            sd_rb_bytes(s, p + 4, 12 + 128);
            break;
        case SD_Q6_K: /* d * scale * (q6 - 32), scale in [-128, 127] */
            sd_rb_bytes(s, p, 128 + 64 + 16);
            sd_rb_scale(s, p + 208, amp / (128.0f * 32.0f));
            break;
        default: return -1;
        }
    }
    return 0;
}

#endif
