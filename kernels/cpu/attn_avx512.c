/* The AVX2 attention kernel recompiled for AVX-512 machines (EVEX
 * encodings, 32 vector registers); attention is a small share of a forward
 * pass, so the 256-bit code is kept rather than a second implementation. */
#define SD_FN(name) name##_avx512
#include "kernels/cpu/attn_avx2.c"
