/* AVX-512 matrix products: the AVX2 tiles of matmul_avx2.c recompiled with
 * AVX-512 F/BW/VL/DQ enabled. With 32 vector registers the activation tiles
 * grow to 8 rows (quantized) and 4 rows (float), so each unpacked weight
 * block serves twice as many activation rows in prefill; decode (n = 1) is
 * bound by memory bandwidth and gains nothing from wider vectors. */
#define SD_FN(name) name##_avx512
#define SD_QA 8
#define SD_FA 4
#include "kernels/cpu/matmul_avx2.c"
