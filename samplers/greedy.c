/* greedy: always the most probable token (lowest id on ties).
 *
 * process() still returns the full softmax(logits / temperature): speculative
 * decoding compares draft and target probabilities, and the original gives
 * greedy the same distribution as multinomial sampling. The temperature
 * changes those probabilities, never the argmax, which is why the descriptor
 * carries SD_LP_FLAG_ARGMAX and a backend may take the argmax on device. */
#include "samplers/sampler.h"

typedef struct greedy {
    double temperature;
} greedy;

static const sd_lp_param params[] = {
    {"temperature", SD_LP_FLOAT, SD_LP_MIN_EXCLUSIVE, 1.0, 0.0, INFINITY,
     "softmax temperature of the probabilities (the chosen token does not depend on it)"},
};

static void *greedy_create(const sd_lp_value *v, int max_vocab, char *err, size_t errlen) {
    (void)max_vocab;
    greedy *g = malloc(sizeof *g);
    if (!g) {
        sd_lp_set_error(err, errlen, "out of memory");
        return NULL;
    }
    g->temperature = v[0].f;
    return g;
}

static void greedy_destroy(void *h) {
    free(h);
}

static int greedy_process(void *h, const float *logits, float *probs, int n_rows, int n_vocab) {
    const greedy *g = h;
    for (int r = 0; r < n_rows; r++) {
        size_t off = (size_t)r * (size_t)n_vocab;
        if (sd_lp_softmax(logits + off, probs + off, n_vocab, g->temperature))
            return -1;
    }
    return 0;
}

static int32_t greedy_sample(void *h, const float *probs, int n_vocab, sd_lp_rng *rng) {
    (void)h;
    (void)rng;
    return sd_lp_argmax(probs, n_vocab);
}

static const sd_logits_processor descriptor = {
    .abi_version = SD_LP_ABI_VERSION,
    .struct_size = sizeof(sd_logits_processor),
    .name = "greedy",
    .description = "argmax of the distribution; probabilities are softmax(logits / temperature)",
    .flags = SD_LP_FLAG_ARGMAX,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = greedy_create,
    .destroy = greedy_destroy,
    .process = greedy_process,
    .sample = greedy_sample,
};

const sd_logits_processor *sd_logits_processor_v1(void) {
    return &descriptor;
}
