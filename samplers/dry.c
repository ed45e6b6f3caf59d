/* dry: "don't repeat yourself", a logits stage (ABI v2.1, keeps history).
 * A token that would extend a repetition of what the history already holds
 * is penalised, the more the longer the repetition: if the last k tokens
 * of the history also occur earlier followed by token t, and k >=
 * allowed_length, then
 *     logit[t] -= multiplier * base^(k - allowed_length)
 * (the largest k over t's earlier occurrences). Only the last `window`
 * tokens are searched, and a match never reaches back across a sequence
 * breaker: a token whose piece contains one of the `breakers` strings
 * (comma-separated; "\n", "\t", "\," and "\\" escape a newline, a tab, a
 * comma and a backslash). A piece is the token's bytes as the engine
 * gives them (info->piece): a newline token is "\n" whatever form the
 * model file stores it in. Without pieces there are no breakers.
 *
 * State: the history, one token per position, so rollback only steps back
 * and the stage gives the same row as one told the shorter history. */
#include "samplers/sampler.h"
#include "samplers/sampler_util.h"

#define MAX_BREAKERS 32
#define MAX_BREAKER_LEN 32

typedef struct dry {
    double multiplier, base;
    int64_t allowed, window;
    int max_history;
    int32_t *hist;
    int n;
    uint8_t *breaker; /* [n_vocab]: the token's piece holds a breaker */
    int n_vocab;
} dry;

static const sd_sampler_param params[] = {
    {"multiplier", SD_SAMPLER_FLOAT, 0, 0.8, 0.0, 1e3, "penalty scale (0: off)"},
    {"base", SD_SAMPLER_FLOAT, 0, 1.75, 1.0, 16.0, "growth of the penalty per extra token"},
    {"allowed_length", SD_SAMPLER_INT, 0, 2, 1, 1024, "repetitions up to this long are free"},
    {"window", SD_SAMPLER_INT, 0, 1024, 1, 2147483647, "last tokens of the history searched"},
    {"breakers", SD_SAMPLER_STRING, 0, 0, 0, 0, "sequence breakers, comma-separated"},
};

static const char *const str_defaults[] = {NULL, NULL, NULL, NULL, "\\n,:,\",*"};

static void dry_destroy(void *h) {
    dry *d = h;
    free(d->hist);
    free(d->breaker);
    free(d);
}

/* Splits text at unescaped commas into b[][MAX_BREAKER_LEN + 1]; returns
 * the count, or -1 when there are too many or one is too long. */
static int split_breakers(const char *text, char (*b)[MAX_BREAKER_LEN + 1]) {
    int n = 0;
    size_t len = 0;
    for (const char *p = text;; p++) {
        if (*p == ',' || !*p) {
            if (len) {
                if (n == MAX_BREAKERS)
                    return -1;
                b[n++][len] = '\0';
            }
            len = 0;
            if (!*p)
                return n;
            continue;
        }
        char c = *p;
        if (c == '\\' && p[1]) {
            c = *++p;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (len == MAX_BREAKER_LEN)
            return -1;
        b[n][len++] = c;
    }
}

static int holds(const char *piece, size_t len, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= len; i++)
        if (!memcmp(piece + i, needle, k))
            return 1;
    return 0;
}

static void *dry_create(const sd_engine_info *info, const sd_sampler_value *v, char *err,
                        size_t errlen) {
    char b[MAX_BREAKERS][MAX_BREAKER_LEN + 1];
    int nb = split_breakers(v[4].s, b);
    if (nb < 0) {
        sd_su_set_error(err, errlen, "breakers: at most 32 strings of at most 32 bytes");
        return NULL;
    }
    dry *d = calloc(1, sizeof *d);
    if (d) {
        d->multiplier = v[0].f;
        d->base = v[1].f;
        d->allowed = v[2].i;
        d->window = v[3].i;
        d->max_history = info->max_history;
        d->n_vocab = info->n_vocab;
        d->hist = malloc((size_t)info->max_history * sizeof *d->hist);
        d->breaker = calloc((size_t)info->n_vocab, 1);
    }
    if (!d || !d->hist || !d->breaker) {
        if (d)
            dry_destroy(d);
        sd_su_set_error(err, errlen, "out of memory");
        return NULL;
    }
    for (int32_t t = 0; info->piece && t < info->n_vocab; t++) {
        size_t len = 0;
        const char *piece = info->piece(info->piece_ctx, t, &len);
        for (int k = 0; piece && k < nb && !d->breaker[t]; k++)
            d->breaker[t] = (uint8_t)holds(piece, len, b[k]);
    }
    return d;
}

static int dry_reset(void *h, const int32_t *prompt, int n) {
    dry *d = h;
    if (n > d->max_history)
        return -1;
    memcpy(d->hist, prompt, (size_t)n * sizeof *prompt);
    d->n = n;
    return 0;
}

static int dry_accept(void *h, int32_t token) {
    dry *d = h;
    if (d->n >= d->max_history || token < 0 || token >= d->n_vocab)
        return -1;
    d->hist[d->n++] = token;
    return 0;
}

static int dry_rollback(void *h, int n) {
    dry *d = h;
    if (n < 0 || n > d->n)
        return -1;
    d->n -= n;
    return 0;
}

/* The length of the match between the history ending at j - 1 and the
 * history's end, stopping at a breaker and at `from`. */
static int match_length(const dry *d, int j, int from) {
    const int32_t *t = d->hist;
    int k = 0;
    while (j - 1 - k >= from && t[j - 1 - k] == t[d->n - 1 - k] && !d->breaker[t[d->n - 1 - k]])
        k++;
    return k;
}

static int dry_process(void *h, const float *logits, float *out, int n_vocab) {
    const dry *d = h;
    float max;
    if (sd_su_row_max(logits, n_vocab, &max))
        return -1;
    memcpy(out, logits, (size_t)n_vocab * sizeof *out);
    if (d->multiplier == 0 || d->n < 2 || d->breaker[d->hist[d->n - 1]])
        return 0;
    int from = d->n > d->window ? d->n - (int)d->window : 0;
    /* each token gets the largest penalty over its occurrences: a
     * candidate replaces the output only when lower */
    for (int j = from + 1; j < d->n; j++) {
        int32_t t = d->hist[j];
        if (t >= n_vocab)
            continue;
        int k = match_length(d, j, from);
        if (k < d->allowed)
            continue;
        float pen = (float)(d->multiplier * pow(d->base, (double)(k - d->allowed)));
        float cand = logits[t] - pen;
        if (cand < out[t])
            out[t] = cand;
    }
    return 0;
}

static const sd_stage_desc descriptor = {
    .abi_version = SD_SAMPLER_ABI_VERSION_2,
    .struct_size = sizeof(sd_stage_desc),
    .name = "dry",
    .description = "logits stage: penalise tokens that extend a repetition (DRY)",
    .kind = SD_STAGE_LOGITS,
    .n_params = (int32_t)(sizeof params / sizeof params[0]),
    .params = params,
    .create = dry_create,
    .destroy = dry_destroy,
    .reset = dry_reset,
    .process = dry_process,
    .accept = dry_accept,
    .rollback = dry_rollback,
    .str_defaults = str_defaults,
};

const sd_stage_desc *sd_sampler_v2(void) {
    return &descriptor;
}
