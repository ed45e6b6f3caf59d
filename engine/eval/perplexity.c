#include "engine/eval/perplexity.h"

#include <math.h>
#include <stdlib.h>

#include "engine/decode/decode.h"

/* ---- the arithmetic ------------------------------------------------------
 * As llama-perplexity's log_softmax: float maximum, float differences
 * through expf, the sum in double. */
double sd_ppl_nll(const float *logits, int vocab, int32_t target) {
    float max = logits[0];
    for (int i = 1; i < vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int i = 0; i < vocab; i++) sum += expf(logits[i] - max);
    return log(sum) - (double)(logits[target] - max);
}

void sd_ppl_acc_add(sd_ppl_acc *a, double nll) {
    a->nll += nll;
    a->nll2 += nll * nll;
    a->n++;
}

double sd_ppl_value(const sd_ppl_acc *a) {
    return a->n > 0 ? exp(a->nll / (double)a->n) : NAN;
}

double sd_ppl_error(const sd_ppl_acc *a) {
    if (a->n < 2) return 0.0;
    double mean = a->nll / (double)a->n, var = a->nll2 / (double)a->n - mean * mean;
    return var > 0 ? sd_ppl_value(a) * sqrt(var / (double)(a->n - 1)) : 0.0;
}

/* ---- tokens -------------------------------------------------------------- */
int sd_ppl_check_ctx(const sd_model *m, int ctx, sd_err *e) {
    if (ctx < SD_PPL_MIN_CTX || ctx % 2)
        return sd_fail(e, "a window of %d tokens: perplexity needs an even window of at least %d",
                       ctx, SD_PPL_MIN_CTX);
    if (ctx > m->hp.ctx_train)
        return sd_fail(e, "a window of %d tokens is larger than the model's context_length %d", ctx,
                       m->hp.ctx_train);
    return 0;
}

int sd_ppl_n_chunks(int n_tokens, int ctx, int max_chunks, sd_err *e) {
    if (n_tokens < ctx)
        return sd_fail(e, "the text has %d tokens, fewer than one window of %d", n_tokens, ctx);
    int n = n_tokens / ctx;
    return max_chunks > 0 && max_chunks < n ? max_chunks : n;
}

int sd_ppl_tokenize(const sd_model *m, const char *text, size_t len, int32_t **ids, int *n,
                    sd_err *e) {
    if (len && text[len - 1] == '\n') len--;
    if (!len) return sd_fail(e, "the text is empty");
    return sd_tokenize(m->tok, text, len, sd_tokenizer_add_bos(m->tok), 0, ids, n, e);
}

/* ---- one window ------------------------------------------------------------
 * The window runs as pieces of at most max_batch positions, the chunks the
 * forward pass cuts a long call into anyway, so the result is the same as
 * one call over the window; per piece only the logits of its scored rows
 * come back, which bounds the host buffer at max_batch rows. The scored
 * rows [first, ctx-1) are a suffix of the window (plus its last row, whose
 * logits come back unused), so they are a suffix of every piece. */
static int eval_window(sd_model *m, sd_kv *kv, const int32_t *win, const int32_t *next, int ctx,
                       float *logits, sd_ppl_acc *total, sd_ppl_acc *chunk, sd_err *e) {
    int vocab = m->hp.vocab, first = ctx / 2;
    for (int p = 0; p < ctx; p += m->max_batch) {
        int nb = ctx - p < m->max_batch ? ctx - p : m->max_batch;
        int lo = first > p ? first : p, hi = p + nb < ctx - 1 ? p + nb : ctx - 1;
        int n_out = lo < p + nb ? p + nb - lo : 0;
        if (sd_forward_ex(m, kv, win + p, nb, p, 0, logits, n_out, e)) return -1;
        for (int j = lo; j < hi; j++) {
            double nll = sd_ppl_nll(logits + (size_t)(j - lo) * vocab, vocab, next[j]);
            sd_ppl_acc_add(total, nll);
            sd_ppl_acc_add(chunk, nll);
        }
    }
    return 0;
}

int sd_ppl_eval(sd_model *m, const int32_t *ids, int n, const sd_ppl_opts *o, sd_ppl_result *r,
                sd_err *e) {
    int ctx = o->ctx;
    if (sd_ppl_check_ctx(m, ctx, e)) return -1;
    int n_chunks = sd_ppl_n_chunks(n, ctx, o->max_chunks, e);
    if (n_chunks < 0) return -1;
    int bos = sd_tokenizer_add_bos(m->tok) ? sd_tokenizer_bos(m->tok) : -1;

    sd_kv *kv = sd_kv_create(m->be, m->hp.n_layers, m->hp.n_kv_heads * m->hp.head_dim, ctx,
                             m->kv_type, e);
    if (!kv) return -1;
    int32_t *win = malloc((size_t)ctx * sizeof *win);
    float *logits = malloc((size_t)m->max_batch * (size_t)m->hp.vocab * sizeof *logits);
    int rc = -1;
    if (!win || !logits) {
        sd_fail(e, "out of memory");
        goto out;
    }
    sd_ppl_acc total = {0};
    double t0 = sd_now();
    for (int k = 0; k < n_chunks; k++) {
        const int32_t *chunk_ids = ids + (size_t)k * ctx;
        for (int i = 0; i < ctx; i++) win[i] = chunk_ids[i];
        if (bos >= 0) win[0] = bos;
        sd_ppl_acc chunk = {0};
        if (eval_window(m, kv, win, chunk_ids + 1, ctx, logits, &total, &chunk, e)) goto out;
        if (o->on_chunk) {
            sd_ppl_chunk c = {k + 1, n_chunks, sd_ppl_value(&total), sd_ppl_value(&chunk),
                              total.n, sd_now() - t0};
            o->on_chunk(o->ud, &c);
        }
    }
    *r = (sd_ppl_result){.ppl = sd_ppl_value(&total),
                         .err = sd_ppl_error(&total),
                         .mean_nll = total.nll / (double)total.n,
                         .n_tokens = n,
                         .n_chunks = n_chunks,
                         .ctx = ctx,
                         .n_scored = total.n,
                         .n_evaluated = (long)n_chunks * ctx,
                         .seconds = sd_now() - t0};
    rc = 0;
out:
    free(logits);
    free(win);
    sd_kv_free(kv);
    return rc;
}
