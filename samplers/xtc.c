/* xtc: "exclude top choices", a logits stage (ABI v2, no history). With
 * probability `probability`, XTC removes every token whose probability is
 * at least `threshold`, except the least likely of them (nothing when
 * fewer than two reach it), and the next stage draws from the rest.
 *
 * That coin must not be flipped at draw time: speculative decoding reads
 * the distribution from process() and is exact only if the draw follows
 * it. So the stage returns the exact mixture of the two cases,
 *     q = (1 - probability) * p + probability * p_filtered
 * (p = softmax(logits), p_filtered = p on the kept tokens, renormalised),
 * as logits log(q): a following multinomial stage (temperature 1) draws
 * from q exactly, and a draw from q is the draw XTC makes, coin included. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct xtc {
    double threshold, probability;
} xtc;

static const sd_sampler_param params[] = {
    {"threshold", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 0.1, 0.0, 0.5,
     "tokens at least this probable are the top choices"},
    {"probability", SD_SAMPLER_FLOAT, 0, 0.5, 0.0, 1.0,
     "chance that the top choices but the least likely are removed"},
};

static void *xtc_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                        size_t errlen) {
    (void)info;
    xtc *x = malloc(sizeof *x);
    if (!x) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    x->threshold = v[0].f;
    x->probability = v[1].f;
    return x;
}

static void xtc_destroy(void *h) {
    free(h);
}

static int xtc_process(void *h, const float *logits, float *out, int n_vocab) {
    const xtc *x = h;
    if (sd_su_softmax(logits, out, n_vocab, 1.0))
        return -1;
    /* the top choices: count, their mass, and the least likely of them */
    const float t = (float)x->threshold;
    int n_top = 0, least = -1;
    double top_mass = 0;
    for (int i = 0; i < n_vocab; i++)
        if (out[i] >= t) {
            n_top++;
            top_mass += out[i];
            if (least < 0 || out[i] < out[least])
                least = i;
        }
    double keep_scale = 0;
    if (n_top >= 2) {
        double removed = top_mass - out[least], kept = 1.0 - removed;
        keep_scale = kept > 0 ? x->probability / kept : 0;
    }
    for (int i = 0; i < n_vocab; i++) {
        double p = out[i];
        double q = n_top >= 2 ? (1.0 - x->probability) * p +
                                    ((p >= t && i != least) ? 0.0 : keep_scale * p)
                              : p;
        out[i] = q > 0 ? (float)log(q) : -INFINITY;
    }
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "xtc",
    .description = "logits stage: exclude top choices, as the exact mixture of its two cases",
    .kind = SD_STAGE_LOGITS,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = xtc_create,
    .destroy = xtc_destroy,
    .process = xtc_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
