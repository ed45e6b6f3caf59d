/* min_p: an example of a third-party sampler, built with nothing but
 * samplers/sampler.h and samplers/sampler_util.h:
 *
 *     cc -std=c11 -O2 -fPIC -shared -I. plugins/example/min_p.c -lm \
 *        -o plugins/example/min_p.so
 *
 * Min-p sampling keeps the tokens whose probability is at least min_p times
 * that of the most probable token, then samples from
 * softmax(kept / temperature). As with the built-ins the filter looks at the
 * raw logits: p_i >= min_p * p_max  <=>  logit_i >= max_logit + ln(min_p),
 * so no exponential is needed to decide. min_p = 0 keeps every token,
 * min_p = 1 only the maximum (and its ties). */
#include <math.h>

#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct min_p {
    double temperature;
    double min_p;
    sd_su_work *work; /* scratch for max_vocab tokens, allocated once */
} min_p;

static const sd_sampler_param params[] = {
    {"temperature", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 1.0, 0.0, INFINITY,
     "softmax temperature applied after filtering"},
    {"min_p", SD_SAMPLER_FLOAT, 0, 0.1, 0.0, 1.0,
     "keep tokens with probability >= min_p * (largest probability)"},
};

static void min_p_destroy(void *h) {
    min_p *m = h;
    sd_su_work_destroy(m->work);
    free(m);
}

/* The engine has already checked the values against the table above. */
static void *min_p_create(const sd_sampler_value *v, int max_vocab, char *err, size_t errlen) {
    min_p *m = malloc(sizeof *m);
    if (!m) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    m->temperature = v[0].f;
    m->min_p = v[1].f;
    m->work = sd_su_work_create(max_vocab);
    if (!m->work) {
        min_p_destroy(m);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    return m;
}

static int min_p_process(void *h, const float *logits, float *probs, int n_rows, int n_vocab) {
    min_p *m = h;
    float offset = m->min_p > 0 ? (float)log(m->min_p) : -INFINITY;
    for (int r = 0; r < n_rows; r++) {
        const float *row = logits + (size_t)r * (size_t)n_vocab;
        float *out = probs + (size_t)r * (size_t)n_vocab;
        if (sd_su_begin(m->work, row, n_vocab))
            return -1;
        float threshold = sd_su_max_logit(m->work) + offset;
        if (sd_su_keep_at_least(m->work, row, n_vocab, threshold) ||
            sd_su_finish(m->work, row, out, n_vocab, m->temperature))
            return -1;
    }
    return 0;
}

/* Draw from exactly the distribution given (it may be a speculative
 * decoding residual, not process()'s output). */
static int32_t min_p_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_sampler_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION,
    .struct_size = sizeof(sd_sampler_desc),
    .name = "min_p",
    .description = "min-p sampling: tokens with p >= min_p * p_max (example plugin)",
    .flags = 0,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = min_p_create,
    .destroy = min_p_destroy,
    .process = min_p_process,
    .sample = min_p_sample,
};

const sd_sampler_desc *sd_logits_processor_v1(void) {
    return &descriptor;
}
