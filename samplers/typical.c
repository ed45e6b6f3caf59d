/* typical: locally typical sampling's filter (Meister et al. 2022) as a
 * logits stage (ABI v2, no history). With p = softmax(logits) and H its
 * entropy, tokens are ranked by |-ln p_i - H| (ties: lower id first) and the
 * smallest prefix of that ranking whose mass reaches p is kept; the others
 * get -inf. p = 1 keeps every token. No full sort: the deviations are
 * bucketed (bucket order agrees with deviation order), the bucket where
 * the mass reaches p is found from the buckets' masses, and only that
 * bucket's tokens are sorted. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct typ_cand {
    float dev;
    int32_t id;
} typ_cand;

#define N_BUCKETS 4096

typedef struct typical {
    double p;
    float *probs;    /* [n_vocab] */
    float *dev;      /* [n_vocab]: |-ln p - H|, or -1 for p = 0 */
    typ_cand *cand;  /* [n_vocab] */
    double mass[N_BUCKETS];
} typical;

static const sd_sampler_param params[] = {
    {"p", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 0.95, 0.0, 1.0,
     "mass of the most typical tokens kept"},
};

static void typical_destroy(void *h) {
    typical *t = h;
    free(t->probs);
    free(t->dev);
    free(t->cand);
    free(t);
}

static void *typical_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                            size_t errlen) {
    typical *t = calloc(1, sizeof *t);
    if (t) {
        t->p = v[0].f;
        t->probs = malloc((size_t)info->n_vocab * sizeof *t->probs);
        t->dev = malloc((size_t)info->n_vocab * sizeof *t->dev);
        t->cand = malloc((size_t)info->n_vocab * sizeof *t->cand);
    }
    if (!t || !t->probs || !t->dev || !t->cand) {
        if (t)
            typical_destroy(t);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    return t;
}

static int by_dev(const void *a, const void *b) {
    const typ_cand *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int typical_process(void *h, const float *logits, float *out, int n_vocab) {
    typical *t = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    /* p_i = exp(x_i - lse), so -ln p_i = lse - x_i: no logarithm per token */
    sd_su_exp(logits, t->probs, n_vocab, max, 1.0f);
    double z = sd_su_sum(t->probs, n_vocab);
    float inv = (float)(1.0 / z), lse = (float)(max + log(z));
    double ent = 0;
    for (int i = 0; i < n_vocab; i++) {
        t->probs[i] *= inv;
        if (t->probs[i] > 0)
            ent += t->probs[i] * (lse - logits[i]);
    }
    float dmax = 0;
    for (int i = 0; i < n_vocab; i++) {
        t->dev[i] = t->probs[i] > 0 ? fabsf(lse - logits[i] - (float)ent) : -1.0f;
        dmax = t->dev[i] > dmax ? t->dev[i] : dmax;
    }
    float scale = dmax > 0 ? (N_BUCKETS - 1) / dmax : 0;
    memset(t->mass, 0, sizeof t->mass);
    for (int i = 0; i < n_vocab; i++)
        if (t->dev[i] >= 0)
            t->mass[(int)(t->dev[i] * scale)] += t->probs[i];
    /* b: the bucket where the mass reaches p; every token before it is kept */
    double before = 0;
    int b = 0;
    while (b < N_BUCKETS - 1 && before + t->mass[b] < t->p)
        before += t->mass[b++];
    int n = 0;
    for (int i = 0; i < n_vocab; i++) {
        int k = t->dev[i] < 0 ? N_BUCKETS : (int)(t->dev[i] * scale);
        out[i] = k < b ? logits[i] : -INFINITY;
        if (k == b)
            t->cand[n++] = (typ_cand){t->dev[i], i};
    }
    qsort(t->cand, (size_t)n, sizeof *t->cand, by_dev);
    for (int k = 0; k < n && (before == 0 || before < t->p); k++) {
        int32_t id = t->cand[k].id;
        out[id] = logits[id];
        before += t->probs[id];
    }
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "typical",
    .description = "logits stage: locally typical filter (keeps mass p of the most typical tokens)",
    .kind = SD_STAGE_LOGITS,
    .n_params = 1,
    .params = params,
    .create = typical_create,
    .destroy = typical_destroy,
    .process = typical_process,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
