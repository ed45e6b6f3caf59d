/* AMX-INT8 matrix products: the AVX-512 VNNI build of matmul_avx2.c once
 * more, plus SD_AMX: the repacked Q4_K and Q6_K products read k8
 * activations (one scale per 256, cpu.h), every whole 16 activation rows
 * of them (prefill, long verifications) through the tile unit (amx_k8
 * there) and the rest through the VNNI tiles' k8 twins; the other types
 * take the VNNI tiles. Chosen at run time when the CPU has AMX-TILE and
 * AMX-INT8 and the kernel grants this process the tile state (cpu.c). */
#define SD_FN(name) name##_amx
#define SD_QA 8
#define SD_FA 4
#define SD_VNNI 1
#define SD_AMX 1
#include "kernels/cpu/matmul_avx2.c"
