/* engine/eval/perplexity: the nll / PPL / error arithmetic on hand-made
 * logits, the window protocol on a synthetic model against a plain
 * re-implementation in this file, the input checks, and the accuracy gate
 * on SmolLM2-135M-Instruct Q4_1 against llama.cpp's llama-perplexity
 * (/work/shared/golden/README.md, "Perplexity reference values"; the text is
 * tests/data/text/GPL-3.txt).
 *
 * The gate: llama.cpp with an F32 cache (ours is F32) gives the running
 * values [1..14] below, 18.3336 over all 14 windows; ours must be within 1%
 * of it. We measure 18.3516 (+0.10%); per window the two differ by up to
 * +-1.3% either way (both round activations to 8 bits, not identically), so
 * a running value over few windows moves more than the total: [1] +0.83%,
 * [2] +0.39%, [4] -0.07%. The 14 windows take 28 s on two idle cores of the
 * development machine (74 s when others share them). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/eval/perplexity.h"
#include "engine/session/device.h"
#include "tests/util/synth_model.h"
#include "tests/util/test_util.h"

/* ---- the arithmetic ------------------------------------------------------ */
Test(perplexity, nll_is_logsumexp_minus_the_target_logit) {
    const float l[3] = {1.0f, 2.0f, 3.0f};
    double want = log(exp(1.0) + exp(2.0) + exp(3.0));
    for (int t = 0; t < 3; t++)
        cr_assert_float_eq(sd_ppl_nll(l, 3, t), want - (t + 1), 1e-6, "target %d", t);
    /* uniform over V entries: log V */
    float u[1000];
    for (int i = 0; i < 1000; i++) u[i] = -7.5f;
    cr_assert_float_eq(sd_ppl_nll(u, 1000, 17), log(1000.0), 1e-6);
    /* the maximum is subtracted: huge logits neither overflow nor lose the
     * small ones */
    const float big[3] = {1000.0f, 1000.0f, -1000.0f};
    cr_assert_float_eq(sd_ppl_nll(big, 3, 0), log(2.0), 1e-9);
    double far = sd_ppl_nll(big, 3, 2);
    cr_assert(isfinite(far) && fabs(far - (2000.0 + log(2.0))) < 1e-3, "got %g", far);
}

Test(perplexity, ppl_and_error_from_the_running_sums) {
    sd_ppl_acc a = {0};
    cr_assert(isnan(sd_ppl_value(&a)));
    cr_assert_eq(sd_ppl_error(&a), 0.0);
    sd_ppl_acc_add(&a, 1.0);
    cr_assert_float_eq(sd_ppl_value(&a), exp(1.0), 1e-12);
    cr_assert_eq(sd_ppl_error(&a), 0.0, "one token has no spread");
    sd_ppl_acc_add(&a, 2.0);
    sd_ppl_acc_add(&a, 3.0);
    cr_assert_eq(a.n, 3);
    /* mean 2, mean of squares 14/3: error = e^2 * sqrt((14/3 - 4) / 2) */
    cr_assert_float_eq(sd_ppl_value(&a), exp(2.0), 1e-12);
    cr_assert_float_eq(sd_ppl_error(&a), exp(2.0) * sqrt(1.0 / 3.0), 1e-12);
    sd_ppl_acc same = {0};
    for (int i = 0; i < 4; i++) sd_ppl_acc_add(&same, 0.5);
    cr_assert_eq(sd_ppl_error(&same), 0.0, "no spread, no error");
}

Test(perplexity, windows_of_a_text) {
    sd_err e = {{0}};
    cr_assert_eq(sd_ppl_n_chunks(7638, 512, 0, &e), 14);
    cr_assert_eq(sd_ppl_n_chunks(7638, 512, 4, &e), 4);
    cr_assert_eq(sd_ppl_n_chunks(7638, 512, 99, &e), 14);
    cr_assert_eq(sd_ppl_n_chunks(512, 512, 0, &e), 1);
    cr_assert_eq(sd_ppl_n_chunks(511, 512, 0, &e), -1);
    cr_assert(tu_matches("511 tokens, fewer than one window of 512", e.msg), "%s", e.msg);
}

/* ---- the protocol on a synthetic model -----------------------------------
 * The reference here runs each window as one forward call that returns
 * every row, puts BOS first (the synthetic vocabulary adds BOS), and sums
 * the exponentials in long double. */
static synth_model make_synth(int ctx_train) {
    synth_model s;
    synth_cfg c = synth_default();
    c.ctx = ctx_train;
    sd_err e = {{0}};
    cr_assert_eq(synth_model_load(&c, ctx_train, 2, &s, &e), 0, "%s", e.msg);
    return s;
}

static double ref_nll(const float *l, int vocab, int target) {
    long double sum = 0;
    for (int i = 0; i < vocab; i++) sum += expl((long double)l[i]);
    return (double)(logl(sum) - l[target]);
}

/* PPL over the first k windows of ctx, by the plain reference. */
static double ref_ppl(sd_model *m, const int32_t *ids, int ctx, int k, long *n_scored) {
    int vocab = m->hp.vocab;
    float *all = malloc((size_t)ctx * vocab * sizeof *all);
    int32_t *win = malloc((size_t)ctx * sizeof *win);
    cr_assert(all && win);
    double sum = 0;
    long n = 0;
    for (int c = 0; c < k; c++) {
        memcpy(win, ids + (size_t)c * ctx, (size_t)ctx * sizeof *win);
        win[0] = sd_tokenizer_bos(m->tok);
        sd_err e;
        cr_assert_eq(sd_forward_ex(m, m->kv, win, ctx, 0, 0, all, ctx, &e), 0, "%s", e.msg);
        for (int j = ctx / 2; j < ctx - 1; j++, n++)
            sum += ref_nll(all + (size_t)j * vocab, vocab, ids[(size_t)c * ctx + j + 1]);
    }
    free(all);
    free(win);
    *n_scored = n;
    return exp(sum / (double)n);
}

typedef struct seen {
    int calls;
    double running[16];
    long scored[16];
} seen;

static void on_chunk(void *ud, const sd_ppl_chunk *c) {
    seen *s = ud;
    cr_assert(c->k == s->calls + 1 && c->k <= 16);
    s->running[s->calls] = c->ppl;
    s->scored[s->calls++] = c->n_scored;
}

/* Pseudo-random ids over the whole vocabulary; id 1 (BOS) never occurs, so
 * a window that kept its first token would score differently. */
static int32_t *random_ids(int n, int vocab) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    cr_assert(ids);
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = 3 + (int32_t)((x >> 8) % (uint32_t)(vocab - 3));
    }
    return ids;
}

static void check_against_reference(int ctx, int n_ids, int max_chunks) {
    synth_model s = make_synth(512);
    sd_model *m = s.m;
    cr_assert(sd_tokenizer_add_bos(m->tok) && sd_tokenizer_bos(m->tok) == 1);
    int32_t *ids = random_ids(n_ids, m->hp.vocab);
    seen got = {0};
    sd_ppl_opts o = {ctx, max_chunks, on_chunk, &got};
    sd_ppl_result r;
    sd_err e = {{0}};
    cr_assert_eq(sd_ppl_eval(m, ids, n_ids, &o, &r, &e), 0, "%s", e.msg);
    int k = n_ids / ctx;
    if (max_chunks > 0 && max_chunks < k) k = max_chunks;
    cr_assert_eq(r.n_chunks, k);
    cr_assert_eq(got.calls, k);
    cr_assert_eq(r.n_tokens, n_ids);
    cr_assert_eq(r.ctx, ctx);
    cr_assert_eq(r.n_scored, (long)k * (ctx / 2 - 1));
    cr_assert_eq(r.n_evaluated, (long)k * ctx);
    for (int c = 1; c <= k; c++) {
        long n;
        double want = ref_ppl(m, ids, ctx, c, &n);
        cr_assert_eq(got.scored[c - 1], n);
        cr_assert(fabs(got.running[c - 1] / want - 1) < 1e-6, "ctx %d [%d]: %.9g, reference %.9g",
                  ctx, c, got.running[c - 1], want);
    }
    cr_assert_eq(r.ppl, got.running[k - 1]);
    cr_assert(r.err > 0 && r.err < r.ppl);
    cr_assert_float_eq(log(r.ppl), r.mean_nll, 1e-12);
    free(ids);
    synth_model_free(&s);
}

Test(perplexity, windows_match_a_plain_reimplementation) {
    /* one piece per window */
    check_against_reference(16, 16 * 3 + 7, 0);
    /* windows longer than the forward pass's 128-position pieces, with the
     * scored half starting inside a piece (300 / 2 = 150) */
    check_against_reference(300, 2 * 300 + 1, 0);
    /* --chunks keeps the first windows */
    check_against_reference(64, 64 * 5, 2);
}

/* ---- input checks ---------------------------------------------------------- */
Test(perplexity, bad_windows_and_texts_are_refused) {
    synth_model s = make_synth(512);
    sd_model *m = s.m;
    sd_err e = {{0}};
    struct {
        int ctx;
        const char *why;
    } bad[] = {{15, "even window of at least 4"},
               {2, "even window of at least 4"},
               {0, "even window"},
               {1024, "1024 tokens is larger than the model's context_length 512"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sd_ppl_check_ctx(m, bad[i].ctx, &e), -1, "ctx %d", bad[i].ctx);
        cr_assert(tu_matches(bad[i].why, e.msg), "ctx %d: %s", bad[i].ctx, e.msg);
    }
    cr_assert_eq(sd_ppl_check_ctx(m, 512, &e), 0);
    cr_assert_eq(sd_ppl_check_ctx(m, 4, &e), 0);

    int32_t ids[40] = {0};
    sd_ppl_result r;
    sd_ppl_opts o = {64, 0, NULL, NULL};
    cr_assert_eq(sd_ppl_eval(m, ids, 40, &o, &r, &e), -1);
    cr_assert(tu_matches("40 tokens, fewer than one window of 64", e.msg), "%s", e.msg);
    o.ctx = 33;
    cr_assert_eq(sd_ppl_eval(m, ids, 40, &o, &r, &e), -1);
    cr_assert(tu_matches("even window", e.msg), "%s", e.msg);

    int32_t *t;
    int n;
    cr_assert_eq(sd_ppl_tokenize(m, "", 0, &t, &n, &e), -1);
    cr_assert(tu_matches("empty", e.msg), "%s", e.msg);
    cr_assert_eq(sd_ppl_tokenize(m, "\n", 1, &t, &n, &e), -1);
    cr_assert(tu_matches("empty", e.msg), "%s", e.msg);
    synth_model_free(&s);
}

/* One trailing newline is dropped (as llama-perplexity's -f does), not two;
 * BOS comes first because the model adds it. */
Test(perplexity, tokenize_drops_one_trailing_newline) {
    synth_model s = make_synth(512);
    sd_model *m = s.m;
    const char *texts[][2] = {{"the cat\n", "the cat"}, {"the cat\n\n", "the cat\n"}};
    for (int i = 0; i < 2; i++) {
        int32_t *a, *b;
        int na, nb;
        sd_err e;
        cr_assert_eq(sd_ppl_tokenize(m, texts[i][0], strlen(texts[i][0]), &a, &na, &e), 0, "%s",
                     e.msg);
        cr_assert_eq(sd_tokenize(m->tok, texts[i][1], strlen(texts[i][1]), 1, 0, &b, &nb, &e), 0);
        cr_assert_eq(na, nb, "'%s'", texts[i][0]);
        cr_assert_eq(memcmp(a, b, (size_t)na * sizeof *a), 0);
        cr_assert_eq(a[0], 1, "BOS first");
        free(a);
        free(b);
    }
    synth_model_free(&s);
}

/* ---- SmolLM2 against llama-perplexity ------------------------------------ */
#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GPL3 "tests/data/text/GPL-3.txt"

/* llama-perplexity -c 512 -b 512 -t 2 -ctk f32 -ctv f32, running values */
static const double smol_f32[14] = {16.2605, 17.7025, 16.2962, 18.2268, 18.2758, 18.1138, 18.1095,
                                    18.4091, 18.3229, 18.5760, 18.4396, 18.4886, 17.6642, 18.3336};

Test(perplexity, smollm2_gpl3_matches_llama_perplexity, .timeout = 600) {
    if (access(SMOL, R_OK) != 0) {
        cr_skip_test("SmolLM2 not fetched (%s missing; `make model` fetches it)", SMOL);
        return;
    }
    sd_err e = {{0}};
    sd_model_opts mo = {.n_ctx = 1};
    sd_model *m = sd_model_load(SMOL, sd_backend_open(SD_DEVICE_CPU, 2, &e), &mo, &e);
    cr_assert(m, "%s", e.msg);
    char *text = tu_slurp(GPL3);
    cr_assert(text, "%s missing", GPL3);
    int32_t *ids;
    int n;
    cr_assert_eq(sd_ppl_tokenize(m, text, strlen(text), &ids, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 7638, "llama.cpp makes 7638 tokens of GPL-3");
    seen got = {0};
    sd_ppl_opts o = {512, 0, on_chunk, &got};
    sd_ppl_result r;
    cr_assert_eq(sd_ppl_eval(m, ids, n, &o, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.n_chunks, 14);
    cr_assert_eq(r.n_scored, 3570);
    double want = smol_f32[13];
    cr_log_info("SmolLM2 GPL-3, 14 windows of 512: PPL %.4f +/- %.5f (llama.cpp, F32 cache: "
                "%.4f +/- 0.86131, %+.2f%%), %.1f s",
                r.ppl, r.err, want, 100 * (r.ppl / want - 1), r.seconds);
    for (int k = 0; k < got.calls; k++)
        cr_log_info("  [%d] %.4f vs %.4f (%+.2f%%)", k + 1, got.running[k], smol_f32[k],
                    100 * (got.running[k] / smol_f32[k] - 1));
    cr_assert(fabs(r.ppl / want - 1) < 0.01, "PPL %.4f, llama.cpp %.4f", r.ppl, want);
    free(ids);
    free(text);
    sd_model_free(m);
}
