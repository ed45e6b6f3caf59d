/* AVX-512 matrix products with VNNI: the tiles of matmul_avx2.c compiled
 * like matmul_avx512.c, plus SD_VNNI, so the unsigned x signed byte dot
 * products are single vpdpbusd instructions (exact int32 sums, the same
 * results as vpmaddubsw + vpmaddwd). Chosen at run time when the CPU has
 * AVX512_VNNI (cpu.c). */
#define SD_FN(name) name##_avx512vnni
#define SD_QA 8
#define SD_FA 4
#define SD_VNNI 1
#include "kernels/cpu/matmul_avx2.c"
