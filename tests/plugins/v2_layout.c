/* A version-2 stage (the identity) as plugins built against an older
 * header see the descriptor: with -DOLD_SIZE its struct_size stops after
 * rollback (ABI v2 before str_defaults) and it must still load; with
 * -DSTRING_PARAM as well it declares a string parameter, which needs the
 * v2.1 layout, and must be rejected saying so. With -DREPORT_INFO its
 * create() refuses the target role, writing into the reason what it was
 * told: struct_size and token 1's piece (and vocab_text when the info is
 * long enough to hold it). */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

#include <stdio.h>

static char handle;

#ifdef STRING_PARAM
static const sd_sampler_param params[] = {
    {"words", SD_SAMPLER_STRING, 0, 0, 0, 0, "a list"},
};
#endif

static void *vl_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                       size_t errlen) {
#ifdef REPORT_INFO
    if (info->role == SD_ROLE_TARGET && info->piece) {
        size_t n = 0, m = 0;
        const char *p = info->piece(info->piece_ctx, 1, &n), *t = "-";
        if (info->struct_size >= SD_ENGINE_INFO_V2_1_SIZE && info->vocab_text)
            t = info->vocab_text(info->piece_ctx, 1, &m);
        else
            m = 1;
        snprintf(err, errlen, "struct_size %u piece '%.*s' vocab_text '%.*s'",
                 (unsigned)info->struct_size, (int)n, p, (int)m, t);
        return NULL;
    }
#endif
    (void)info;
    (void)v;
    (void)err;
    (void)errlen;
    return &handle;
}

static void vl_destroy(void *h) {
    (void)h;
}

static int vl_process(void *h, const float *logits, float *out, int n_vocab) {
    (void)h;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
#ifdef OLD_SIZE
    .struct_size = SD_STAGE_V2_SIZE,
#else
    .struct_size = sizeof(sd_stage_desc),
#endif
    .name = "v2_layout",
    .kind = SD_STAGE_LOGITS,
#ifdef STRING_PARAM
    .n_params = 1,
    .params = params,
#endif
    .create = vl_create,
    .destroy = vl_destroy,
    .process = vl_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
