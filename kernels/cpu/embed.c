/* Embedding lookup: token ids to their dequantized rows (repacked
 * weights through sd_repacked_row). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"

int sd_cpu_embed(sd_cpu *c, float *x, const sd_weight *emb, const int32_t *ids, int n,
                 sd_err *e) {
    uint64_t t0 = sd_cpu_prof_start(c);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= emb->rows)
            return sd_fail(e, "embed: token id %d out of range [0, %lld)", (int)ids[i],
                           (long long)emb->rows);
        const uint8_t *row = (const uint8_t *)emb->data + (size_t)ids[i] * emb->row_bytes;
        if (sd_cpu_file_type(emb->type) != emb->type) {
            sd_repacked_row(emb, ids[i], x + (size_t)i * emb->cols);
            continue;
        }
        if (sd_dequantize_row(emb->type, row, x + (size_t)i * emb->cols, emb->cols) != 0)
            return sd_fail(e, "embed: unsupported weight type %u or bad row length %lld",
                           emb->type, (long long)emb->cols);
    }
    sd_cpu_prof_add(c, SD_OP_EMBED, t0);
    return 0;
}
