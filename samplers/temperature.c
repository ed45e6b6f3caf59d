/* temperature: a logits stage that divides every logit by the temperature
 * (ABI v2, no history). Put it before a sampling stage whose own
 * temperature is 1, or before a filter, as llama.cpp's "temp" sampler. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct temperature {
    float inv;
} temperature;

/* Bounded so that no accepted value can turn a finite logit into an
 * infinity: a value that would fail mid-generation is refused up front. */
static const sd_sampler_param params[] = {
    {"temperature", SD_SAMPLER_FLOAT, 0, 1.0, 1e-3, 1e3,
     "logits are divided by it"},
};

static void *temperature_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                                size_t errlen) {
    (void)info;
    temperature *t = malloc(sizeof *t);
    if (!t) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    t->inv = sd_su_inv_temperature(v[0].f);
    return t;
}

static void temperature_destroy(void *h) {
    free(h);
}

static int temperature_process(void *h, const float *logits, float *out, int n_vocab) {
    const temperature *t = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    for (int i = 0; i < n_vocab; i++)
        out[i] = logits[i] * t->inv;
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "temperature",
    .description = "logits stage: logits / temperature",
    .kind = SD_STAGE_LOGITS,
    .n_params = 1,
    .params = params,
    .create = temperature_create,
    .destroy = temperature_destroy,
    .process = temperature_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
