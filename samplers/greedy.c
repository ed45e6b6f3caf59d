/* greedy: always the most probable token (lowest id on ties).
 *
 * process() returns the one-hot distribution at the argmax of the logits,
 * which is what the engine uses for greedy decoding, speculative decoding
 * included: a draft token is accepted exactly when it is the target's
 * argmax. The descriptor carries SD_SAMPLER_FLAG_ARGMAX, so during
 * generation the engine computes that distribution and the argmax itself
 * (on the device where it can) and calls neither process() nor sample();
 * they are what the load-time self-test and direct callers of the plugin
 * see, and they agree with the engine. No parameters: a temperature would
 * change nothing. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

/* The handle is never read; a non-NULL pointer tells the engine create()
 * succeeded. */
static char handle;

static void *greedy_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                           size_t errlen) {
    (void)v;
    (void)info;
    (void)err;
    (void)errlen;
    return &handle;
}

static void greedy_destroy(void *h) {
    (void)h;
}

static int greedy_process(void *h, const float *row, float *out, int n_vocab) {
    (void)h;
    return sd_su_one_hot_argmax(row, out, n_vocab);
}

static int32_t greedy_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    (void)rng;
    return sd_su_argmax(probs, n_vocab);
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "greedy",
    .description = "the argmax of the logits (lowest id on ties); no parameters",
    .kind = SD_STAGE_SAMPLE,
    .flags = SD_SAMPLER_FLAG_ARGMAX,
    .n_params = 0,
    .params = NULL,
    .create = greedy_create,
    .destroy = greedy_destroy,
    .process = greedy_process,
    .sample = greedy_sample,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
