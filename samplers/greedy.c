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

static void *greedy_create(const sd_sampler_value *v, int max_vocab, char *err, size_t errlen) {
    (void)v;
    (void)max_vocab;
    (void)err;
    (void)errlen;
    return &handle;
}

static void greedy_destroy(void *h) {
    (void)h;
}

static int greedy_process(void *h, const float *logits, float *probs, int n_rows, int n_vocab) {
    (void)h;
    for (int r = 0; r < n_rows; r++) {
        size_t off = (size_t)r * (size_t)n_vocab;
        if (sd_su_one_hot_argmax(logits + off, probs + off, n_vocab))
            return -1;
    }
    return 0;
}

static int32_t greedy_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    (void)rng;
    return sd_su_argmax(probs, n_vocab);
}

static const sd_sampler_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION,
    .struct_size = sizeof(sd_sampler_desc),
    .name = "greedy",
    .description = "the argmax of the logits (lowest id on ties); no parameters",
    .flags = SD_SAMPLER_FLAG_ARGMAX,
    .n_params = 0,
    .params = NULL,
    .create = greedy_create,
    .destroy = greedy_destroy,
    .process = greedy_process,
    .sample = greedy_sample,
};

const sd_sampler_desc *sd_logits_processor_v1(void) {
    return &descriptor;
}
