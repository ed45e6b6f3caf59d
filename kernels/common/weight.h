/* A weight matrix as the kernels see it: `rows` output features, each a row
 * of `cols` input elements stored in `type` (row-major, rows contiguous,
 * row_bytes apart). GGUF calls cols ne[0] and rows ne[1]. For the CUDA
 * backend `data` is a device pointer after upload. */
#ifndef SD_WEIGHT_H
#define SD_WEIGHT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sd_weight {
    uint32_t type; /* enum sd_wtype */
    int64_t rows;
    int64_t cols;
    size_t row_bytes;
    const void *data;
} sd_weight;

#endif
