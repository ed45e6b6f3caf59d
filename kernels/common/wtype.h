/* Weight types the kernels implement: the ggml type ids (as GGUF stores
 * them in each tensor's header) and their block layouts. This header is the
 * kernels' own description of the data; the file-format reader above uses it
 * to refuse what no kernel can run.
 *
 * Quantized block layouts (32 elements a block, d/m as IEEE half), packed
 * with no padding:
 *   Q8_0: { f16 d; int8 q[32]; }            x = d*q            34 bytes
 *   Q4_0: { f16 d; u8 q[16]; }              x = d*(nibble-8)   18 bytes
 *   Q4_1: { f16 d; f16 m; u8 q[16]; }       x = d*nibble + m   20 bytes
 * In the 4-bit types byte j holds element j in its low nibble and element
 * j+16 in its high nibble. A row of n elements is n/32 consecutive blocks. */
#ifndef SD_WTYPE_H
#define SD_WTYPE_H

#include <stdint.h>

enum sd_wtype {
    SD_F32 = 0, SD_F16 = 1, SD_Q4_0 = 2, SD_Q4_1 = 3, SD_Q8_0 = 8, SD_BF16 = 30
};

#define SD_QK 32

typedef struct sd_block_q8_0 {
    uint16_t d;
    int8_t q[SD_QK];
} sd_block_q8_0;

typedef struct sd_block_q4_0 {
    uint16_t d;
    uint8_t q[SD_QK / 2];
} sd_block_q4_0;

typedef struct sd_block_q4_1 {
    uint16_t d, m;
    uint8_t q[SD_QK / 2];
} sd_block_q4_1;

#ifdef __cplusplus
static_assert(sizeof(sd_block_q8_0) == 34, "Q8_0 block");
static_assert(sizeof(sd_block_q4_0) == 18, "Q4_0 block");
static_assert(sizeof(sd_block_q4_1) == 20, "Q4_1 block");
extern "C" {
#else
_Static_assert(sizeof(sd_block_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(sd_block_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(sd_block_q4_1) == 20, "Q4_1 block");
#endif

/* "F32, F16, BF16, Q8_0, Q4_0, Q4_1", for messages that list them. */
#define SD_WTYPE_LIST "F32, F16, BF16, Q8_0, Q4_0, Q4_1"

/* 1 when a kernel exists for the type. */
int sd_wtype_supported(uint32_t type);
/* Elements and bytes per block (0 for an unsupported type). */
uint32_t sd_wtype_block(uint32_t type);
uint32_t sd_wtype_block_bytes(uint32_t type);
/* "Q4_1", or "unknown". */
const char *sd_wtype_name(uint32_t type);
/* Bytes of one row of n elements (n must be a multiple of the block). */
uint64_t sd_row_bytes(uint32_t type, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
