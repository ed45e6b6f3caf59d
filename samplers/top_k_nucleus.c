/* top_k_nucleus: top-k first (ties at the k-th kept), then the nucleus rule
 * on what remains: the cumulative softmax is that of the raw logits of the
 * top-k tokens only (the original masks the others to -1e20 before its
 * softmax), then samples from softmax(kept / temperature). */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct top_k_nucleus {
    double temperature;
    int64_t k;
    double top_p;
    sd_su_work *work;
} top_k_nucleus;

static const sd_sampler_param params[] = {
    {"temperature", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 1.0, 0.0, INFINITY,
     "softmax temperature applied after filtering"},
    {"top_k", SD_SAMPLER_INT, 0, 40, 1, 2147483647, "number of highest logits kept (ties kept)"},
    {"top_p", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 0.9, 0.0, 1.0,
     "cumulative probability the kept tokens cover, among the top_k"},
};

static void top_k_nucleus_destroy(void *h) {
    top_k_nucleus *t = h;
    sd_su_work_destroy(t->work);
    free(t);
}

static void *top_k_nucleus_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                                  size_t errlen) {
    top_k_nucleus *t = malloc(sizeof *t);
    if (!t) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    t->temperature = v[0].f;
    t->k = v[1].i;
    t->top_p = v[2].f;
    t->work = sd_su_work_create(info->n_vocab);
    if (!t->work) {
        top_k_nucleus_destroy(t);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    return t;
}

static int top_k_nucleus_process(void *h, const float *row, float *out, int n_vocab) {
    top_k_nucleus *t = h;
    return (sd_su_begin(t->work, row, n_vocab) || sd_su_top_k(t->work, row, n_vocab, t->k) ||
            sd_su_top_p(t->work, row, n_vocab, t->top_p) ||
            sd_su_finish(t->work, row, out, n_vocab, t->temperature)) ? -1 : 0;
}

static int32_t top_k_nucleus_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "top_k_nucleus",
    .description = "top-k filtering, then top-p on the remaining tokens",
    .kind = SD_STAGE_SAMPLE,
    .flags = 0,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = top_k_nucleus_create,
    .destroy = top_k_nucleus_destroy,
    .process = top_k_nucleus_process,
    .sample = top_k_nucleus_sample,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
