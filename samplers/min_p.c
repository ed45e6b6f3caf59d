/* min_p: a logits stage keeping the tokens whose probability is at least
 * min_p times the largest (ABI v2, no history); the others get -inf.
 * p_i >= min_p * p_max  <=>  logit_i >= max_logit + ln(min_p), so no
 * exponential is needed. min_p = 0 keeps every token. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct min_p {
    double log_min_p;
} min_p;

static const sd_sampler_param params[] = {
    {"min_p", SD_SAMPLER_FLOAT, 0, 0.05, 0.0, 1.0,
     "keep tokens with probability >= min_p * (largest probability)"},
};

static void *min_p_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                          size_t errlen) {
    (void)info;
    min_p *m = malloc(sizeof *m);
    if (!m) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    m->log_min_p = log(v[0].f);
    return m;
}

static void min_p_destroy(void *h) {
    free(h);
}

static int min_p_process(void *h, const float *logits, float *out, int n_vocab) {
    const min_p *m = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    double cut = (double)max + m->log_min_p;
    for (int i = 0; i < n_vocab; i++)
        out[i] = (double)logits[i] >= cut ? logits[i] : -INFINITY;
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "min_p",
    .description = "logits stage: drop tokens below min_p times the top probability",
    .kind = SD_STAGE_LOGITS,
    .n_params = 1,
    .params = params,
    .create = min_p_create,
    .destroy = min_p_destroy,
    .process = min_p_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
