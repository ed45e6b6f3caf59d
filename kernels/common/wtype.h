/* Weight types the kernels implement: the ggml type ids (as GGUF stores
 * them in each tensor's header) and their block layouts. This header is the
 * kernels' own description of the data; the file-format reader above uses it
 * to refuse what no kernel can run.
 *
 * Quantized block layouts (d, m, dmin as IEEE half), packed with no
 * padding; a row of n elements is n/block consecutive blocks.
 *
 * 32-element blocks:
 *   Q8_0: { f16 d; int8 q[32]; }            x = d*q                 34 bytes
 *   Q4_0: { f16 d; u8 q[16]; }              x = d*(nibble-8)        18 bytes
 *   Q4_1: { f16 d; f16 m; u8 q[16]; }       x = d*nibble + m        20 bytes
 *   Q5_0: { f16 d; u8 qh[4]; u8 q[16]; }    x = d*(nibble|h<<4 - 16) 22 bytes
 * In the 4- and 5-bit types byte j holds element j in its low nibble and
 * element j+16 in its high nibble; Q5_0's fifth bit of element i is bit i
 * of qh read as a little-endian u32.
 *
 * 256-element super-blocks (the K-quants):
 *   Q4_K: { f16 d; f16 dmin; u8 scales[12]; u8 q[128]; }            144 bytes
 *     8 sub-blocks of 32, x = d*sc[s]*nibble - dmin*mn[s], with 6-bit sc
 *     and mn packed in scales: for s < 4, sc = scales[s] & 63 and
 *     mn = scales[s+4] & 63; for s >= 4, sc = (scales[s+4] & 15) |
 *     (scales[s-4] >> 6) << 4 and mn = (scales[s+4] >> 4) |
 *     (scales[s] >> 6) << 4. The 128 bytes are 4 chunks of 32: chunk c
 *     holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles,
 *     element i of the sub-block at byte i.
 *   Q6_K: { u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d; }         210 bytes
 *     16 sub-blocks of 16, x = d*scales[i/16]*(q-32) with 6-bit q. Two
 *     halves of 128 elements, each with 64 bytes of ql and 32 of qh: for
 *     l < 32 in half h, elements l, l+32, l+64, l+96 take the low nibble
 *     of ql[l], ql[l+32], the high nibble of ql[l], ql[l+32], and bits
 *     0-1, 2-3, 4-5, 6-7 of qh[l] as their top two bits. */
#ifndef SD_WTYPE_H
#define SD_WTYPE_H

#include <stdint.h>

enum sd_wtype {
    SD_F32 = 0, SD_F16 = 1, SD_Q4_0 = 2, SD_Q4_1 = 3, SD_Q5_0 = 6, SD_Q8_0 = 8,
    SD_Q4_K = 12, SD_Q6_K = 14, SD_BF16 = 30
};

#define SD_QK 32
#define SD_QK_K 256

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

typedef struct sd_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t q[SD_QK / 2];
} sd_block_q5_0;

typedef struct sd_block_q4_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t q[SD_QK_K / 2];
} sd_block_q4_k;

typedef struct sd_block_q6_k {
    uint8_t ql[SD_QK_K / 2];
    uint8_t qh[SD_QK_K / 4];
    int8_t scales[SD_QK_K / 16];
    uint16_t d;
} sd_block_q6_k;

#ifdef __cplusplus
#define SD_WTYPE_ASSERT static_assert
extern "C" {
#else
#define SD_WTYPE_ASSERT _Static_assert
#endif
SD_WTYPE_ASSERT(sizeof(sd_block_q8_0) == 34, "Q8_0 block");
SD_WTYPE_ASSERT(sizeof(sd_block_q4_0) == 18, "Q4_0 block");
SD_WTYPE_ASSERT(sizeof(sd_block_q4_1) == 20, "Q4_1 block");
SD_WTYPE_ASSERT(sizeof(sd_block_q5_0) == 22, "Q5_0 block");
SD_WTYPE_ASSERT(sizeof(sd_block_q4_k) == 144, "Q4_K block");
SD_WTYPE_ASSERT(sizeof(sd_block_q6_k) == 210, "Q6_K block");

/* "F32, F16, BF16, Q8_0, Q4_0, Q4_1", for messages that list them. */
#define SD_WTYPE_LIST "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K"

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
