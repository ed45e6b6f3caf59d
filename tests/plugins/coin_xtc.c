/* A mistake: XTC ("exclude top choices") with its coin flipped in sample().
 * process() returns softmax(logits); sample() then, with probability 1/2,
 * removes every token of probability >= 0.1 except the least likely of
 * them before drawing. What it draws is not the distribution process()
 * returned, which speculative decoding's rejection sampling relies on.
 * Built with -DCORRECT, sample() draws from the row as given, and the
 * plugin loads. (The exact form mixes the two cases in process(); see
 * plugins/README.md.) */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

#define THRESHOLD 0.1f

static char handle;

static void *xtc_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                        size_t errlen) {
    (void)info;
    (void)v;
    (void)err;
    (void)errlen;
    return &handle;
}

static void xtc_destroy(void *h) {
    (void)h;
}

static int xtc_process(void *h, const float *logits, float *out, int n_vocab) {
    (void)h;
    return sd_su_softmax(logits, out, n_vocab, 1.0);
}

static int32_t xtc_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
#ifndef CORRECT
    if (sd_sampler_uniform(rng) < 0.5) {
        int keep = -1;
        for (int i = 0; i < n_vocab; i++)
            if (probs[i] >= THRESHOLD && (keep < 0 || probs[i] < probs[keep]))
                keep = i;
        double total = 0;
        for (int i = 0; i < n_vocab; i++)
            total += (probs[i] >= THRESHOLD && i != keep) ? 0.0 : probs[i];
        double u = sd_sampler_uniform(rng) * total, acc = 0;
        int32_t last = -1;
        for (int i = 0; i < n_vocab; i++) {
            if ((probs[i] >= THRESHOLD && i != keep) || !(probs[i] > 0))
                continue;
            acc += probs[i];
            last = i;
            if (u < acc)
                return i;
        }
        return last;
    }
#endif
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "coin_xtc",
    .description = "XTC with its coin flipped in sample()",
    .kind = SD_STAGE_SAMPLE,
    .create = xtc_create,
    .destroy = xtc_destroy,
    .process = xtc_process,
    .sample = xtc_sample,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
