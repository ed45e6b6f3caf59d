/* A logits stage (the identity) that refuses to serve a drafter: a chain
 * with it must still run autoregressively; only strategies that draft with
 * the chain refuse, naming it. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

static char handle;

static void *nd_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                       size_t errlen) {
    (void)v;
    if (info->role == SD_ROLE_DRAFTER) {
        sd_su_set_error(err, errlen, "serves the target only");
        return NULL;
    }
    return &handle;
}

static void nd_destroy(void *h) {
    (void)h;
}

static int nd_process(void *h, const float *logits, float *out, int n_vocab) {
    (void)h;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "no_drafter",
    .description = "the identity, for the target only",
    .kind = SD_STAGE_LOGITS,
    .create = nd_create,
    .destroy = nd_destroy,
    .process = nd_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
