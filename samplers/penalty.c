/* penalty: repetition, frequency and presence penalties over the last
 * `window` tokens of the history (prompt included), as a logits stage
 * (ABI v2, keeps history). For a token seen c > 0 times in the window:
 *     logit > 0:  logit / repeat      logit <= 0:  logit * repeat
 *     then        logit - c * frequency - presence
 * (llama.cpp's penalties). The handle keeps the whole history and the
 * count of each token in the window, so accept and rollback cost O(1). */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct penalty {
    double repeat, frequency, presence;
    int64_t window;
    int n_vocab, max_history;
    int32_t *hist;   /* [max_history] */
    int n;           /* tokens in hist */
    int32_t *count;  /* [n_vocab]: occurrences in the window */
    uint32_t *stamp; /* [n_vocab]: last process() call that penalised the token */
    uint32_t call;
} penalty;

/* Bounded so that no accepted value can turn a finite logit into an
 * infinity: a value that would fail mid-generation is refused up front. */
static const sd_sampler_param params[] = {
    {"repeat", SD_SAMPLER_FLOAT, 0, 1.1, 1e-3, 1e3,
     "repetition penalty (1: none); positive logits divided, negative multiplied"},
    {"frequency", SD_SAMPLER_FLOAT, 0, 0.0, -1e3, 1e3,
     "subtracted once per occurrence in the window"},
    {"presence", SD_SAMPLER_FLOAT, 0, 0.0, -1e3, 1e3,
     "subtracted once from every token in the window"},
    {"window", SD_SAMPLER_INT, 0, 64, 1, 2147483647, "last tokens of the history looked at"},
};

static void penalty_destroy(void *h) {
    penalty *p = h;
    free(p->hist);
    free(p->count);
    free(p->stamp);
    free(p);
}

static void *penalty_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                            size_t errlen) {
    penalty *p = calloc(1, sizeof *p);
    if (p) {
        p->repeat = v[0].f;
        p->frequency = v[1].f;
        p->presence = v[2].f;
        p->window = v[3].i;
        p->n_vocab = info->n_vocab;
        p->max_history = info->max_history;
        p->hist = malloc((size_t)info->max_history * sizeof *p->hist);
        p->count = calloc((size_t)info->n_vocab, sizeof *p->count);
        p->stamp = calloc((size_t)info->n_vocab, sizeof *p->stamp);
    }
    if (!p || !p->hist || !p->count || !p->stamp) {
        if (p)
            penalty_destroy(p);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    return p;
}

static int penalty_accept(void *h, int32_t token) {
    penalty *p = h;
    if (token < 0 || token >= p->n_vocab || p->n >= p->max_history)
        return -1;
    p->hist[p->n++] = token;
    p->count[token]++;
    if (p->n > p->window)
        p->count[p->hist[p->n - 1 - p->window]]--;
    return 0;
}

static int penalty_rollback(void *h, int k) {
    penalty *p = h;
    if (k < 0 || k > p->n)
        return -1;
    while (k-- > 0) {
        p->count[p->hist[--p->n]]--;
        if (p->n >= p->window) /* the token that falls back into the window */
            p->count[p->hist[p->n - p->window]]++;
    }
    return 0;
}

static int penalty_reset(void *h, const int32_t *prompt, int n_prompt) {
    penalty *p = h;
    memset(p->count, 0, (size_t)p->n_vocab * sizeof *p->count);
    p->n = 0;
    for (int i = 0; i < n_prompt; i++)
        if (penalty_accept(p, prompt[i]))
            return -1;
    return 0;
}

static int penalty_process(void *h, const float *logits, float *out, int n_vocab) {
    penalty *p = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    p->call++;
    int from = p->n > p->window ? p->n - (int)p->window : 0;
    for (int i = from; i < p->n; i++) {
        int32_t t = p->hist[i];
        if (t >= n_vocab || p->stamp[t] == p->call)
            continue;
        p->stamp[t] = p->call;
        float l = out[t];
        l = l > 0 ? (float)(l / p->repeat) : (float)(l * p->repeat);
        out[t] = (float)(l - p->count[t] * p->frequency - p->presence);
    }
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "penalty",
    .description = "logits stage: repetition / frequency / presence penalty over a window",
    .kind = SD_STAGE_LOGITS,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = penalty_create,
    .destroy = penalty_destroy,
    .reset = penalty_reset,
    .process = penalty_process,
    .accept = penalty_accept,
    .rollback = penalty_rollback,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
