#include "engine/model/kvcache.h"

#include <stdlib.h>

#include "kernels/common/wtype.h"

sd_kv *sd_kv_create(sd_backend *be, int n_layers, int kv_dim, int n_ctx, uint32_t type,
                    sd_err *e) {
    if (type != SD_F32 && type != SD_F16) {
        sd_fail(e, "kv cache: element type %s (f32 or f16)", sd_wtype_name(type));
        return NULL;
    }
    sd_kv *kv = calloc(1, sizeof *kv);
    if (!kv) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    kv->be = be;
    kv->n_layers = n_layers;
    kv->kv_dim = kv_dim;
    kv->n_ctx = n_ctx;
    kv->type = type;
    kv->row_bytes = (size_t)kv_dim * (type == SD_F16 ? 2 : 4);
    kv->k = calloc((size_t)n_layers, sizeof *kv->k);
    kv->v = calloc((size_t)n_layers, sizeof *kv->v);
    if (!kv->k || !kv->v) {
        sd_fail(e, "out of memory");
        sd_kv_free(kv);
        return NULL;
    }
    size_t bytes = (size_t)n_ctx * kv->row_bytes;
    for (int l = 0; l < n_layers; l++) {
        kv->k[l] = be->alloc(be, bytes, e);
        kv->v[l] = kv->k[l] ? be->alloc(be, bytes, e) : NULL;
        if (!kv->v[l]) {
            sd_kv_free(kv);
            return NULL;
        }
    }
    return kv;
}

void sd_kv_free(sd_kv *kv) {
    if (!kv) return;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->k && kv->k[l]) kv->be->release(kv->be, kv->k[l]);
        if (kv->v && kv->v[l]) kv->be->release(kv->be, kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv);
}

int sd_kv_truncate(sd_kv *kv, int n_keep, sd_err *e) {
    if (n_keep < 0 || n_keep > kv->n)
        return sd_fail(e, "kv cache: cannot keep %d positions, it holds %d", n_keep, kv->n);
    kv->n = n_keep;
    return 0;
}

int sd_kv_copy(sd_kv *dst, const sd_kv *src, sd_err *e) {
    if (dst->n_layers != src->n_layers || dst->kv_dim != src->kv_dim || dst->n_ctx < src->n ||
        dst->type != src->type)
        return sd_fail(e, "kv cache: copy between caches of different shapes");
    size_t bytes = (size_t)src->n * src->row_bytes;
    for (int l = 0; l < src->n_layers; l++) {
        if (dst->be->copy(dst->be, dst->k[l], src->k[l], bytes, e)) return -1;
        if (dst->be->copy(dst->be, dst->v[l], src->v[l], bytes, e)) return -1;
    }
    dst->n = src->n;
    return 0;
}
