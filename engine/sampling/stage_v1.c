/* The version-1 adapter. A version-1 sampler is a sampling stage that
 * keeps no history and processes rows in batches; the adapter's handle
 * holds the plugin's descriptor and handle, so the engine calls every
 * stage through one version-2 table. Only create differs: a version-2
 * create() has no way to learn which version-1 descriptor it serves, so
 * sd_stage_create passes it. */
#include "engine/sampling/stage_v1.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct v1_handle {
    const sd_sampler_desc *d;
    void *h;
} v1_handle;

static void v1_destroy(void *handle) {
    v1_handle *a = handle;
    a->d->destroy(a->h);
    free(a);
}

static int v1_process(void *handle, const float *logits, float *out, int n_vocab) {
    v1_handle *a = handle;
    return a->d->process(a->h, logits, out, 1, n_vocab);
}

static int32_t v1_sample(void *handle, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    v1_handle *a = handle;
    return a->d->sample(a->h, probs, n_vocab, rng);
}

int sd_stage_from_v1(const sd_sampler_desc *d, stage_def *def, char *why, size_t len) {
    if (d->abi_version != SD_SAMPLER_ABI_VERSION) {
        snprintf(why, len,
                 "ABI version %" PRIu32 ", this engine supports 1 through %s() and 2 through %s()",
                 d->abi_version, SD_SAMPLER_ENTRY_SYMBOL, SD_SAMPLER_V2_ENTRY_SYMBOL);
        return -1;
    }
    if (d->struct_size < SD_SAMPLER_V1_SIZE) {
        snprintf(why, len, "descriptor struct_size %" PRIu32 " is smaller than %zu (ABI v1)",
                 d->struct_size, (size_t)SD_SAMPLER_V1_SIZE);
        return -1;
    }
    memset(def, 0, sizeof *def);
    def->d = (sd_stage_desc){.abi_version = SD_SAMPLER_ABI_VERSION_2,
                             .struct_size = sizeof def->d,
                             .name = d->name,
                             .description = d->description,
                             .kind = SD_STAGE_SAMPLE,
                             .flags = d->flags & SD_SAMPLER_FLAG_ARGMAX,
                             .n_params = d->n_params,
                             .params = d->params,
                             .destroy = v1_destroy,
                             .process = v1_process,
                             .sample = v1_sample};
    def->v1 = d;
    def->abi = 1;
    if (sd_stage_check_common(def, why, len))
        return -1;
    const char *missing = !d->create    ? "create"
                          : !d->destroy ? "destroy"
                          : !d->process ? "process"
                          : !d->sample  ? "sample"
                                        : NULL;
    if (missing) {
        snprintf(why, len, "missing %s function", missing);
        return -1;
    }
    return 0;
}

void *sd_stage_create(const stage_def *def, const sd_engine_info *info,
                      const sd_sampler_value *values, char *err, size_t errlen) {
    if (!def->v1 && def->d.struct_size < SD_STAGE_V2_1_SIZE) {
        /* a plugin built against the v2 header: its info ends at
         * piece_ctx, and piece is the vocabulary string */
        sd_engine_info v2 = *info;
        v2.struct_size = SD_ENGINE_INFO_V2_SIZE;
        v2.piece = info->vocab_text;
        return def->d.create(&v2, values, err, errlen);
    }
    if (!def->v1)
        return def->d.create(info, values, err, errlen);
    v1_handle *a = malloc(sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->d = def->v1;
    a->h = def->v1->create(values, info->n_vocab, err, errlen);
    if (!a->h) {
        free(a);
        return NULL;
    }
    return a;
}
