#include "engine/cli/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/json_out.h"
#include "engine/cli/progress.h"
#include "engine/eval/perplexity.h"
#include "engine/session/session.h"

/* What the chunk callback needs: whether to print (on stderr) and where
 * to keep the running values for the JSON object. */
typedef struct view {
    int json;
    double *running; /* [n_chunks] */
} view;

/* llama-perplexity's progress line: "[1]16.2605,[2]17.7025,..." */
static void on_chunk(void *ud, const sd_ppl_chunk *c) {
    view *v = ud;
    v->running[c->k - 1] = c->ppl;
    if (v->json) return;
    fprintf(stderr, "%s[%d]%.4f", c->k > 1 ? "," : "", c->k, c->ppl);
    if (c->k == c->n_chunks) fputc('\n', stderr);
}

static double rate(long n, double s) { return s > 0 ? (double)n / s : 0; }

static void print_json(const sd_args *a, const sd_ppl_result *r, const double *running, FILE *out) {
    sd_json_obj j;
    sd_json_begin(&j, out);
    sd_json_str(&j, "model", a->c.model);
    sd_json_str(&j, "file", a->perplexity);
    sd_json_int(&j, "ctx", r->ctx);
    sd_json_int(&j, "chunks", r->n_chunks);
    sd_json_int(&j, "text_tokens", r->n_tokens);
    sd_json_int(&j, "tokens_scored", r->n_scored);
    sd_json_int(&j, "tokens_evaluated", r->n_evaluated);
    sd_json_num(&j, "ppl", r->ppl);
    sd_json_num(&j, "ppl_error", r->err);
    sd_json_num(&j, "mean_nll", r->mean_nll);
    sd_json_nums(&j, "running_ppl", running, r->n_chunks);
    sd_json_num(&j, "seconds", r->seconds);
    sd_json_num(&j, "tokens_per_s", rate(r->n_evaluated, r->seconds));
    sd_json_end(&j);
    fputs("\n", out);
    fflush(out);
}

/* The model is loaded with the smallest cache: the evaluation brings one of
 * its own, as long as the window. --ctx is checked against the model's
 * context_length once the file is read, and is still a flag error. */
int sd_cli_perplexity(const sd_args *a, const char *text, FILE *out, sd_err *e) {
    const char *path = a->perplexity;
    int ctx = a->c.n_ctx > 0 ? a->c.n_ctx : SD_PPL_DEFAULT_CTX;
    char notice[256];
    sd_cli_progress shown = {0, 0};
    sd_model_opts o = {.n_ctx = 1, .kv_type = a->c.kv_type, .progress = sd_cli_progress_cb(),
                       .progress_ud = &shown};
    sd_model *m =
        sd_load_model(a->c.model, a->c.device, a->c.threads, NULL, &o, notice, sizeof notice, e);
    if (!m) return 1;
    if (notice[0]) fprintf(stderr, "specdec: note: %s\n", notice);
    int32_t *ids = NULL;
    double *running = NULL;
    int n = 0, rc = 1;
    if (sd_ppl_check_ctx(m, ctx, e)) {
        sd_wrap(e, "--ctx");
        rc = 2;
        goto out;
    }
    if (sd_ppl_tokenize(m, text, strlen(text), &ids, &n, e)) {
        sd_wrap(e, path);
        goto out;
    }
    int n_chunks = sd_ppl_n_chunks(n, ctx, a->chunks, e);
    if (n_chunks < 0) {
        sd_wrap(e, path);
        goto out;
    }
    running = calloc((size_t)n_chunks, sizeof *running);
    if (!running) {
        sd_fail(e, "out of memory");
        goto out;
    }
    if (!a->json)
        fprintf(stderr, "perplexity: %s, %d %s, %d %s of %d (%d scored each)\n", path, n,
                n == 1 ? "token" : "tokens", n_chunks, n_chunks == 1 ? "chunk" : "chunks", ctx,
                ctx / 2 - 1);
    view v = {a->json, running};
    sd_ppl_opts po = {ctx, a->chunks, on_chunk, &v};
    sd_ppl_result r;
    if (sd_ppl_eval(m, ids, n, &po, &r, e)) {
        sd_wrap(e, path);
        goto out;
    }
    if (a->json)
        print_json(a, &r, running, out);
    else
        fprintf(stderr,
                "PPL = %.4f +/- %.5f over %ld tokens scored in %d %s of %d; %ld tokens "
                "evaluated in %.2f s (%.1f tokens/s)\n",
                r.ppl, r.err, r.n_scored, r.n_chunks, r.n_chunks == 1 ? "chunk" : "chunks", r.ctx,
                r.n_evaluated, r.seconds, rate(r.n_evaluated, r.seconds));
    /* a NaN or an infinity is no measurement: the model's weights or the
     * backend produced non-finite logits */
    if (!isfinite(r.ppl)) {
        sd_fail(e, "%s: the perplexity is %s: %s gave non-finite log-probabilities (NaN or inf "
                   "in its weights or its logits)",
                path, isnan(r.ppl) ? "NaN" : "infinite", a->c.model);
        goto out;
    }
    rc = 0;
out:
    free(running);
    free(ids);
    sd_model_free(m);
    return rc;
}
