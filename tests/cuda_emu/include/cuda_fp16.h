/* cuda-emu: the half type and the conversions the kernels use (bit exact,
 * round to nearest even). */
#ifndef CUDA_EMU_FP16_H
#define CUDA_EMU_FP16_H

#include "cuda_runtime.h"

struct __half {
    unsigned short x;
};
typedef __half half;

static inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
static inline unsigned short __half_as_ushort(__half h) { return h.x; }

static inline float __half2float(__half h) {
    const unsigned s = (h.x >> 15) & 1u, e = (h.x >> 10) & 31u, m = h.x & 1023u;
    unsigned bits;
    if (e == 31) {
        bits = s << 31 | 0x7f800000u | m << 13;
    } else if (e == 0) {
        if (m == 0) return s ? -0.0f : 0.0f;
        const float v = ldexpf((float)m, -24); /* exact */
        return s ? -v : v;
    } else {
        bits = s << 31 | (e + 112) << 23 | m << 13;
    }
    return emu_from_bits<float>(bits);
}

static inline __half __float2half(float f) {
    const uint32_t b = (uint32_t)emu_bits(f);
    const uint32_t s = (b >> 16) & 0x8000u;
    const uint32_t a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) return __half{(unsigned short)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0))};
    if (a >= 0x477ff000u) return __half{(unsigned short)(s | 0x7c00u)}; /* rounds to inf */
    if (a < 0x38800000u) { /* subnormal or zero in half */
        const float v = emu_from_bits<float>(a) * 16777216.0f; /* units of 2^-24, exact */
        return __half{(unsigned short)(s | (unsigned)nearbyintf(v))};
    }
    const uint32_t r = a - 0x38000000u; /* rebias 127 -> 15, in place */
    const uint32_t q = r >> 13, rem = r & 0x1fffu;
    const uint32_t out = q + (rem > 0x1000u || (rem == 0x1000u && (q & 1)));
    return __half{(unsigned short)(s | out)};
}

#endif
