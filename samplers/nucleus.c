/* nucleus (top-p): ranks the tokens by raw logit (ties: lower id first),
 * keeps a token while the cumulative softmax(raw logits) of the tokens
 * ranked before it is <= top_p (so the top token is always kept and the one
 * that crosses top_p is kept too, as the original's shifted mask does), then
 * samples from softmax(kept / temperature). top_p = 1 keeps every token.
 *
 * The boundary is found from a histogram of the probability mass by
 * distance from the maximum plus a selection inside one bucket, so a row
 * costs a few linear passes instead of a sort of the vocabulary. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct nucleus {
    double temperature;
    double top_p;
    sd_su_work *work;
} nucleus;

static const sd_sampler_param params[] = {
    {"temperature", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 1.0, 0.0, INFINITY,
     "softmax temperature applied after filtering"},
    {"top_p", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 0.9, 0.0, 1.0,
     "cumulative probability (of the raw logits) the kept tokens cover"},
};

static void nucleus_destroy(void *h) {
    nucleus *t = h;
    sd_su_work_destroy(t->work);
    free(t);
}

static void *nucleus_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                            size_t errlen) {
    nucleus *t = malloc(sizeof *t);
    if (!t) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    t->temperature = v[0].f;
    t->top_p = v[1].f;
    t->work = sd_su_work_create(info->n_vocab);
    if (!t->work) {
        nucleus_destroy(t);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    return t;
}

static int nucleus_process(void *h, const float *row, float *out, int n_vocab) {
    nucleus *t = h;
    return (sd_su_begin(t->work, row, n_vocab) || sd_su_top_p(t->work, row, n_vocab, t->top_p) ||
            sd_su_finish(t->work, row, out, n_vocab, t->temperature)) ? -1 : 0;
}

static int32_t nucleus_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "nucleus",
    .description = "top-p sampling: the smallest set of top tokens covering top_p",
    .kind = SD_STAGE_SAMPLE,
    .flags = 0,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = nucleus_create,
    .destroy = nucleus_destroy,
    .process = nucleus_process,
    .sample = nucleus_sample,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
