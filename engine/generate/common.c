#include <time.h>

#include "generate.h"

double sd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sd_is_eos(const sd_gen_cfg *cfg, int32_t id) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == id) return 1;
    return 0;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int sd_pick_token(const sd_gen_cfg *cfg, const float *logits, float *probs, int vocab,
                  int32_t *id, sd_err *e) {
    if (!cfg->proc) {
        *id = argmax(logits, vocab);
        return 0;
    }
    if (sd_processor_probs(cfg->proc, logits, probs, 1, vocab, e)) return -1;
    return sd_processor_sample(cfg->proc, probs, vocab, cfg->rng, id, e);
}
