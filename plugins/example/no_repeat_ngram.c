/* no_repeat_ngram: an example of a stateful stage (ABI v2), built with
 * nothing but samplers/sampler.h and samplers/sampler_util.h:
 *
 *     cc -std=c11 -O2 -fPIC -shared -I. plugins/example/no_repeat_ngram.c -lm \
 *        -o plugins/example/no_repeat_ngram.so
 *
 * Hugging Face's no_repeat_ngram_size as a logits stage: a token that would
 * complete an n-gram already present in the history (prompt included) gets
 * -inf. It needs the token history, so it keeps a copy: reset() copies the
 * prompt, accept() appends, rollback() drops the last tokens. Its whole
 * state is that copy, so rollback(k) restores it exactly. plugins/README.md
 * walks through it. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

typedef struct no_repeat {
    int64_t n;      /* n-gram length */
    int32_t *hist;  /* [max_history], allocated in create */
    int len, cap;   /* tokens in hist, max_history */
} no_repeat;

static const sd_sampler_param params[] = {
    {"n", SD_SAMPLER_INT, 0, 3, 1, 64, "length of the n-grams that may not repeat"},
};

static void no_repeat_destroy(void *h) {
    no_repeat *s = h;
    free(s->hist);
    free(s);
}

static void *no_repeat_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                              size_t errlen) {
    no_repeat *s = malloc(sizeof *s);
    if (s)
        s->hist = malloc((size_t)info->max_history * sizeof *s->hist);
    if (!s || !s->hist) {
        free(s);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    s->n = v[0].i;
    s->len = 0;
    s->cap = info->max_history;
    return s;
}

static int no_repeat_reset(void *h, const int32_t *prompt, int n_prompt) {
    no_repeat *s = h;
    if (n_prompt > s->cap)
        return -1;
    memcpy(s->hist, prompt, (size_t)n_prompt * sizeof *prompt);
    s->len = n_prompt;
    return 0;
}

static int no_repeat_accept(void *h, int32_t token) {
    no_repeat *s = h;
    if (s->len == s->cap)
        return -1;
    s->hist[s->len++] = token;
    return 0;
}

static int no_repeat_rollback(void *h, int k) {
    no_repeat *s = h;
    if (k > s->len)
        return -1;
    s->len -= k;
    return 0;
}

/* Bans hist[i + n - 1] wherever hist[i .. i+n-1) equals the last n-1
 * tokens. At least one token stays finite: a row the ban would empty is
 * returned unchanged. */
static int no_repeat_process(void *h, const float *logits, float *out, int n_vocab) {
    const no_repeat *s = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    int m = (int)s->n - 1, finite = 0;
    const int32_t *tail = s->hist + s->len - m;
    for (int i = 0; s->len >= m && i + m < s->len; i++)
        if (!memcmp(s->hist + i, tail, (size_t)m * sizeof *tail) && s->hist[i + m] < n_vocab)
            out[s->hist[i + m]] = -INFINITY;
    for (int i = 0; i < n_vocab && !finite; i++)
        finite = out[i] != -INFINITY;
    if (!finite)
        memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "no_repeat_ngram",
    .description = "logits stage: bans tokens that would repeat an n-gram of the history",
    .kind = SD_STAGE_LOGITS,
    .n_params = 1,
    .params = params,
    .create = no_repeat_create,
    .destroy = no_repeat_destroy,
    .reset = no_repeat_reset,
    .process = no_repeat_process,
    .accept = no_repeat_accept,
    .rollback = no_repeat_rollback,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
