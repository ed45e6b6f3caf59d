/* Perplexity of a model over a text, measured the way llama.cpp's
 * llama-perplexity measures it (protocol: /work/shared/golden/README.md,
 * "Perplexity reference values"):
 *   - one trailing newline is dropped, the whole text is tokenized once with
 *     the model's own BOS rule (add_special) and control-token text kept as
 *     plain text (no parse_special);
 *   - the tokens are cut into n_chunk = floor(n_tokens / ctx) windows of ctx
 *     tokens (the rest is dropped; max_chunks keeps only the first ones);
 *   - each window is evaluated alone from an empty cache at positions
 *     0..ctx-1 (its first token becomes BOS when the model adds BOS);
 *   - the logits at positions ctx/2 .. ctx-2 score the next token, so a
 *     window scores ctx/2 - 1 tokens (255 for 512);
 *   - nll = log(sum over the whole vocabulary of exp(logit)) - logit[target],
 *     PPL = exp(mean nll), error = PPL * sqrt(var(nll) / (N - 1)).
 * The library never prints: the running value after each window reaches the
 * caller through a callback, the totals through sd_ppl_result. */
#ifndef SD_PERPLEXITY_H
#define SD_PERPLEXITY_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model/model.h"
#include "kernels/common/error.h"

/* The smallest window that scores a token (ctx/2 - 1 >= 1). */
#define SD_PPL_MIN_CTX 4
/* llama-perplexity's window. */
#define SD_PPL_DEFAULT_CTX 512

/* ---- the arithmetic ------------------------------------------------------
 * Exposed so that tests can check it on hand-made logits. */

/* log(sum_i exp(logits[i])) - logits[target] over vocab entries: the
 * maximum is subtracted first and the exponentials are summed in double. */
double sd_ppl_nll(const float *logits, int vocab, int32_t target);

/* Running sums of nll and nll^2 over n scored tokens. */
typedef struct sd_ppl_acc {
    double nll, nll2;
    long n;
} sd_ppl_acc;

void sd_ppl_acc_add(sd_ppl_acc *a, double nll);
/* exp(mean nll); NAN with no token. */
double sd_ppl_value(const sd_ppl_acc *a);
/* PPL * sqrt((mean(nll^2) - mean(nll)^2) / (n - 1)); 0 with fewer than two
 * tokens or no spread (where llama-perplexity prints no error). */
double sd_ppl_error(const sd_ppl_acc *a);

/* ---- the evaluation ------------------------------------------------------ */

/* After window k (1-based) of n_chunks. */
typedef struct sd_ppl_chunk {
    int k, n_chunks;
    double ppl;        /* over windows 1..k: llama-perplexity's "[k]" */
    double chunk_ppl;  /* over window k alone */
    long n_scored;     /* tokens scored so far */
    double seconds;    /* evaluation time so far */
} sd_ppl_chunk;

typedef void (*sd_ppl_chunk_cb)(void *ud, const sd_ppl_chunk *c);

typedef struct sd_ppl_opts {
    int ctx;                  /* window size: even, >= SD_PPL_MIN_CTX */
    int max_chunks;           /* <= 0: every whole window of the text */
    sd_ppl_chunk_cb on_chunk; /* may be NULL */
    void *ud;
} sd_ppl_opts;

typedef struct sd_ppl_result {
    double ppl, err;
    double mean_nll;
    int n_tokens;      /* tokens of the whole text */
    int n_chunks;      /* windows evaluated */
    int ctx;
    long n_scored;     /* n_chunks * (ctx/2 - 1) */
    long n_evaluated;  /* n_chunks * ctx: positions run through the model */
    double seconds;    /* evaluation time (tokenization excluded) */
} sd_ppl_result;

/* Fails, saying why, unless ctx is even, at least SD_PPL_MIN_CTX and at
 * most the model's context_length. */
int sd_ppl_check_ctx(const sd_model *m, int ctx, sd_err *e);

/* Windows a text of n_tokens gives: floor(n_tokens / ctx), at most
 * max_chunks when that is > 0; fails when the text is shorter than one
 * window. */
int sd_ppl_n_chunks(int n_tokens, int ctx, int max_chunks, sd_err *e);

/* The ids of text[0..len) as the protocol tokenizes them (one trailing
 * newline dropped, the model's BOS rule, no special-token parsing). *ids is
 * malloc'd (caller frees). Fails on an empty text. */
int sd_ppl_tokenize(const sd_model *m, const char *text, size_t len, int32_t **ids, int *n,
                    sd_err *e);

/* Evaluates ids[0..n) on m (its backend, a cache of ctx positions of the
 * evaluation's own; the model's cache is left alone). Fails as
 * sd_ppl_check_ctx and sd_ppl_n_chunks do. */
int sd_ppl_eval(sd_model *m, const int32_t *ids, int n, const sd_ppl_opts *o, sd_ppl_result *r,
                sd_err *e);

#endif
