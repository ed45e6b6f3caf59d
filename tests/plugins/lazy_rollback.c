/* A mistake: a DRY-like logits stage whose rollback does nothing. For the
 * last two tokens of the history, every token that followed an earlier
 * occurrence of that pair is penalised (it would extend a repeat). rollback()
 * returns success and leaves the history as it was, so after a rejected
 * draft the stage still counts the rejected tokens. Built with -DCORRECT
 * the rollback steps back, and the plugin loads. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct lazy {
    int32_t *hist;
    int n, max;
} lazy;

static void *lazy_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                         size_t errlen) {
    (void)v;
    lazy *l = calloc(1, sizeof *l);
    if (l)
        l->hist = malloc((size_t)info->max_history * sizeof *l->hist);
    if (!l || !l->hist) {
        free(l);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    l->max = info->max_history;
    return l;
}

static void lazy_destroy(void *h) {
    lazy *l = h;
    free(l->hist);
    free(l);
}

static int lazy_reset(void *h, const int32_t *prompt, int n) {
    lazy *l = h;
    memcpy(l->hist, prompt, (size_t)n * sizeof *prompt);
    l->n = n;
    return 0;
}

static int lazy_process(void *h, const float *logits, float *out, int n_vocab) {
    const lazy *l = h;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    const int32_t *t = l->hist;
    for (int i = 1; i + 1 < l->n; i++)
        if (t[i - 1] == t[l->n - 2] && t[i] == t[l->n - 1] && t[i + 1] < n_vocab)
            out[t[i + 1]] -= 1.0f;
    return 0;
}

static int lazy_accept(void *h, int32_t token) {
    lazy *l = h;
    if (l->n >= l->max)
        return -1;
    l->hist[l->n++] = token;
    return 0;
}

static int lazy_rollback(void *h, int n) {
#ifdef CORRECT
    ((lazy *)h)->n -= n;
#else
    (void)h;
    (void)n;
#endif
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "lazy_rollback",
    .description = "penalises tokens that extend a repeat; its rollback does nothing",
    .kind = SD_STAGE_LOGITS,
    .create = lazy_create,
    .destroy = lazy_destroy,
    .reset = lazy_reset,
    .process = lazy_process,
    .accept = lazy_accept,
    .rollback = lazy_rollback,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
