/* Mistakes that only show at run time: a logits stage (the identity) that
 * behaves on the self-test's 64-token rows and, on longer rows, does one
 * of these, chosen at build time:
 *   -DSEGV           writes through a null pointer in process()
 *   -DHANG           never returns from process()
 *   -DOVERRUN=N      writes N floats past the end of its row
 * The engine must name the stage, its file and the call each time. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

static char handle;

static void *rf_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                       size_t errlen) {
    (void)info;
    (void)v;
    (void)err;
    (void)errlen;
    return &handle;
}

static void rf_destroy(void *h) {
    (void)h;
}

static int rf_process(void *h, const float *logits, float *out, int n_vocab) {
    (void)h;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    if (n_vocab <= 64)
        return 0;
#if defined(SEGV)
    *(volatile float *)(uintptr_t)(n_vocab - n_vocab) = 1.0f;
#elif defined(HANG)
    for (volatile int spin = 1; spin;)
        ;
#elif defined(OVERRUN)
    for (int i = 0; i < OVERRUN; i++)
        out[n_vocab + i] = 0.0f;
#endif
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "run_fault",
    .description = "the identity on short rows; a fault on long ones",
    .kind = SD_STAGE_LOGITS,
    .create = rf_create,
    .destroy = rf_destroy,
    .process = rf_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
