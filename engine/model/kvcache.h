/* Per-model key/value cache: for each layer one K and one V buffer of
 * [n_ctx][kv_dim] elements of `type` (SD_F32, or SD_F16 on a backend that
 * takes it) in backend memory (kv_dim = n_kv_heads*head_dim),
 * position-major so one forward call's new rows are contiguous. `n` counts
 * the positions that hold valid entries; rejected drafts are dropped with
 * sd_kv_truncate, never recomputed. */
#ifndef SD_KVCACHE_H
#define SD_KVCACHE_H

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/common/error.h"

typedef struct sd_kv {
    sd_backend *be;
    int n_layers, kv_dim, n_ctx;
    int n;
    uint32_t type;    /* SD_F32 or SD_F16 */
    size_t row_bytes; /* one position of one layer */
    void **k, **v;
} sd_kv;

/* type: SD_F32 or SD_F16 (anything else is an error naming it). */
sd_kv *sd_kv_create(sd_backend *be, int n_layers, int kv_dim, int n_ctx, uint32_t type,
                    sd_err *e);
/* Position pos of a layer buffer (kv->k[l] or kv->v[l]). */
static inline void *sd_kv_at(const sd_kv *kv, void *layer_buf, int pos) {
    return (char *)layer_buf + (size_t)pos * kv->row_bytes;
}
void sd_kv_free(sd_kv *kv);
/* Keeps the first n_keep positions (n_keep > n is an error). */
int sd_kv_truncate(sd_kv *kv, int n_keep, sd_err *e);
/* dst := src (same shapes), copying only the valid positions. */
int sd_kv_copy(sd_kv *dst, const sd_kv *src, sd_err *e);

#endif
