/* multinomial: a token drawn from softmax(logits / temperature), no
 * filtering. Sampling is an inverse CDF over the row with one uniform draw
 * from the engine's rng, so a seed reproduces the sequence. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct multinomial {
    double temperature;
} multinomial;

static const sd_sampler_param params[] = {
    {"temperature", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 1.0, 0.0, INFINITY,
     "softmax temperature: < 1 sharpens, > 1 flattens the distribution"},
};

static void *multinomial_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                                size_t errlen) {
    (void)info;
    multinomial *m = malloc(sizeof *m);
    if (!m) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    m->temperature = v[0].f;
    return m;
}

static void multinomial_destroy(void *h) {
    free(h);
}

static int multinomial_process(void *h, const float *row, float *out, int n_vocab) {
    const multinomial *m = h;
    return sd_su_softmax(row, out, n_vocab, m->temperature);
}

static int32_t multinomial_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "multinomial",
    .description = "random sampling from softmax(logits / temperature)",
    .kind = SD_STAGE_SAMPLE,
    .flags = 0,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = multinomial_create,
    .destroy = multinomial_destroy,
    .process = multinomial_process,
    .sample = multinomial_sample,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
