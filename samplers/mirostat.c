/* mirostat: Mirostat 2.0 (Basu et al. 2021) as a sampling stage (ABI v2,
 * keeps history). With p = softmax(logits / temperature), the tokens whose
 * surprise -log2 p exceeds mu are dropped (the most probable one is always
 * kept) and the rest renormalised; after each token x is chosen,
 *     mu <- mu - eta * (-log2 q(x) - tau)
 * with q the renormalised distribution it was chosen from. mu starts at
 * 2 tau at every reset. The state is mu, one value per accepted token, so
 * rollback just steps back; process() keeps the row it returned, which
 * accept() reads q(x) from. A token of probability 0 (a drafter told the
 * target's correction) counts as a surprise of 150 bits. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

#define MAX_SURPRISE 150.0

typedef struct mirostat {
    double tau, eta, temperature;
    int n_vocab;
    double *mu; /* [max_history + 1]: mu[k] after k accepts */
    int k, cap;
    float *last; /* [n_vocab]: the distribution last returned */
    int n_last;  /* its length: a token past it had probability 0 there */
} mirostat;

/* Bounded so that no accepted value can turn a finite logit into an
 * infinity: a value that would fail mid-generation is refused up front. */
static const sd_sampler_param params[] = {
    {"tau", SD_SAMPLER_FLOAT, 0, 5.0, 0.0, 1e3, "target surprise in bits"},
    {"eta", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 0.1, 0.0, 1.0, "learning rate of mu"},
    {"temperature", SD_SAMPLER_FLOAT, 0, 1.0, 1e-3, 1e3,
     "softmax temperature before the cut"},
};

static void mirostat_destroy(void *h) {
    mirostat *m = h;
    free(m->mu);
    free(m->last);
    free(m);
}

static void *mirostat_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                             size_t errlen) {
    mirostat *m = calloc(1, sizeof *m);
    if (m) {
        m->tau = v[0].f;
        m->eta = v[1].f;
        m->temperature = v[2].f;
        m->n_vocab = info->n_vocab;
        m->cap = info->max_history + 1;
        m->mu = malloc((size_t)m->cap * sizeof *m->mu);
        m->last = calloc((size_t)info->n_vocab, sizeof *m->last);
    }
    if (!m || !m->mu || !m->last) {
        if (m)
            mirostat_destroy(m);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    m->mu[0] = 2 * m->tau;
    return m;
}

static int mirostat_reset(void *h, const int32_t *prompt, int n_prompt) {
    mirostat *m = h;
    (void)prompt;
    (void)n_prompt;
    m->k = 0;
    m->mu[0] = 2 * m->tau;
    return 0;
}

static int mirostat_process(void *h, const float *logits, float *out, int n_vocab) {
    mirostat *m = h;
    if (sd_su_softmax(logits, out, n_vocab, m->temperature))
        return -1;
    float cut = (float)exp2(-m->mu[m->k]);
    int32_t best = sd_su_argmax(out, n_vocab);
    double z = 0;
    for (int i = 0; i < n_vocab; i++) {
        if (out[i] < cut && i != best)
            out[i] = 0;
        z += out[i];
    }
    float s = (float)(1.0 / z);
    for (int i = 0; i < n_vocab; i++)
        out[i] *= s;
    memcpy(m->last, out, (size_t)n_vocab * sizeof *out);
    m->n_last = n_vocab;
    return 0;
}

static int32_t mirostat_sample(void *h, const float *probs, int n_vocab, sd_sampler_rng *rng) {
    (void)h;
    return sd_su_sample_cdf(probs, n_vocab, rng);
}

static int mirostat_accept(void *h, int32_t token) {
    mirostat *m = h;
    if (token < 0 || token >= m->n_vocab || m->k + 1 >= m->cap)
        return -1;
    double q = token < m->n_last ? m->last[token] : 0.0;
    double surprise = q > 0 ? -log2(q) : MAX_SURPRISE;
    m->mu[m->k + 1] = m->mu[m->k] - m->eta * (surprise - m->tau);
    m->k++;
    return 0;
}

static int mirostat_rollback(void *h, int n) {
    mirostat *m = h;
    if (n < 0 || n > m->k)
        return -1;
    m->k -= n;
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "mirostat",
    .description = "Mirostat 2.0: adaptive surprise cut towards tau bits per token",
    .kind = SD_STAGE_SAMPLE,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = mirostat_create,
    .destroy = mirostat_destroy,
    .reset = mirostat_reset,
    .process = mirostat_process,
    .sample = mirostat_sample,
    .accept = mirostat_accept,
    .rollback = mirostat_rollback,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
