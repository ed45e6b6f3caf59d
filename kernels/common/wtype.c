#include "kernels/common/wtype.h"

#include <stddef.h>

static const struct {
    uint32_t type, block, bytes;
    const char *name;
} wtypes[] = {
    {SD_F32, 1, 4, "F32"},
    {SD_F16, 1, 2, "F16"},
    {SD_BF16, 1, 2, "BF16"},
    {SD_Q8_0, SD_QK, sizeof(sd_block_q8_0), "Q8_0"},
    {SD_Q4_0, SD_QK, sizeof(sd_block_q4_0), "Q4_0"},
    {SD_Q4_1, SD_QK, sizeof(sd_block_q4_1), "Q4_1"},
    {SD_Q5_0, SD_QK, sizeof(sd_block_q5_0), "Q5_0"},
    {SD_Q4_K, SD_QK_K, sizeof(sd_block_q4_k), "Q4_K"},
    {SD_Q6_K, SD_QK_K, sizeof(sd_block_q6_k), "Q6_K"},
};
#define N_WTYPES (sizeof wtypes / sizeof wtypes[0])

static int wtype_index(uint32_t type) {
    for (size_t i = 0; i < N_WTYPES; i++)
        if (wtypes[i].type == type) return (int)i;
    return -1;
}

int sd_wtype_supported(uint32_t type) { return wtype_index(type) >= 0; }

uint32_t sd_wtype_block(uint32_t type) {
    int i = wtype_index(type);
    return i < 0 ? 0 : wtypes[i].block;
}

uint32_t sd_wtype_block_bytes(uint32_t type) {
    int i = wtype_index(type);
    return i < 0 ? 0 : wtypes[i].bytes;
}

const char *sd_wtype_name(uint32_t type) {
    int i = wtype_index(type);
    return i < 0 ? "unknown" : wtypes[i].name;
}

uint64_t sd_row_bytes(uint32_t type, uint64_t n) {
    int i = wtype_index(type);
    return i < 0 ? 0 : n / wtypes[i].block * wtypes[i].bytes;
}
