/* A version-1 sampler that keeps state: each process() call lowers its
 * temperature a little, so the same row gives a different distribution
 * every time. It loads (version 1 cannot say it keeps state), with a
 * warning that under speculative decoding and NASD that state is never
 * rolled back. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct drift {
    double temperature;
} drift;

static void *drift_create(const sd_sampler_value *v, int max_vocab, char *err, size_t errlen) {
    (void)v;
    (void)max_vocab;
    drift *d = malloc(sizeof *d);
    if (!d) {
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    d->temperature = 1.0;
    return d;
}

static void drift_destroy(void *h) {
    free(h);
}

static int drift_process(void *h, const float *logits, float *probs, int n_rows, int n_vocab) {
    drift *d = h;
    for (int r = 0; r < n_rows; r++) {
        size_t off = (size_t)r * (size_t)n_vocab;
        if (sd_su_softmax(logits + off, probs + off, n_vocab, d->temperature))
            return -1;
        d->temperature *= 0.99;
    }
    return 0;
}

static int32_t drift_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static const sd_sampler_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION,
    .struct_size = sizeof(sd_sampler_desc),
    .name = "stateful_v1",
    .description = "softmax with a temperature that drifts down at every call",
    .create = drift_create,
    .destroy = drift_destroy,
    .process = drift_process,
    .sample = drift_sample,
};

const sd_sampler_desc *sd_logits_processor_v1(void) {
    return &descriptor;
}
