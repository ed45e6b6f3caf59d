/* The real models against llama.cpp's greedy outputs (tests/data/
 * smollm2_greedy.jsonl, qwen_greedy.jsonl; llama.cpp build 4748, CPU, F32
 * K/V cache; see tests/data/README.md): SmolLM2-135M-Instruct Q4_1 and the
 * Qwen2.5-Coder pair, 1.5B (Q4_K/Q6_K) and 0.5B (Q5_0/Q8_0/Q4_K/Q6_K).
 * The files are fetched by `make test` (make model, make model-pair); a
 * missing file fails the suite.
 *
 * Greedy ids, two ways. Free-running: fed the golden prompt ids, our greedy
 * continuation must equal llama.cpp's up to the first position whose golden
 * top-2 margin is below the model's margin. Teacher-forced: the prompt and
 * llama.cpp's whole continuation in one forward; at every position whose
 * golden margin is at least the model's margin, our argmax must be
 * llama.cpp's id (this reaches past the first near-tie, where a
 * free-running comparison has to stop). Both engines quantize activations
 * to 8 bits before the quantized products, but in different blocks (we use
 * blocks of 32 with one scale each; llama.cpp uses blocks of 256 (Q8_K)
 * before Q4_K/Q6_K and of 32 before Q5_0/Q8_0), so logits differ by about
 * 1e-2 and more where the K biases reach the hundreds; a near-tie may flip
 * and nothing else may. Margins: 0.25 for the Qwen files; 0.5 for SmolLM2,
 * whose top-2 gaps move by up to 0.40 between three correct summation
 * orders of the same int8 products (first positions of the 6 records: GGUF-
 * layout tiles / scalar path / 16-row repacked tiles differ from llama.cpp's
 * gap by up to 0.28 / 0.40 / 0.28; on record 4 llama.cpp's gap is 0.271
 * and ours 0.094 / 0.033 / -0.013). Teacher-forced at 0.25, the GGUF-layout
 * tiles fail at record 3 position 38 (margin 0.258) and the repacked ones
 * at record 4 position 0; at 0.5 all three orders agree with llama.cpp at
 * all 297 positions compared (50 ids were compared free-running at 0.25).
 *
 * First logits rows (whole vocabulary, golden rounded to 5 or 4 decimals):
 * logits are defined up to an additive constant (softmax, argmax and every
 * sampler ignore it), so ours are compared after removing the mean of
 * ours - golden over the row: the largest remaining |ours - golden| must
 * stay below LOGIT_TOL, and KL(golden || ours) of the two distributions
 * below KL_TOL. The int8 activations of the two engines round differently
 * (llama.cpp stores the block scales in F16, we keep them in F32), and over
 * 24-30 layers these roundings add up to a noise of about 0.1 on every
 * logit, plus a shift of the whole row that moves no probability. Measured
 * on SmolLM2 records 1 and 2 with three correct summation orders of the
 * same int8 products (GGUF-layout SIMD tiles / scalar reference / 16-row
 * repacked tiles): raw max 0.73 / 1.09 / 1.51 and 0.61 / 0.79 / 0.73, of
 * which a uniform shift 0.11 / 0.37 / 0.61 and 0.05 / 0.26 / 0.01;
 * centered max 0.63 / 0.72 / 0.91 and 0.57 / 0.54 / 0.74; KL 6.2e-3 /
 * 4.1e-3 / 2.5e-3 and 3.2e-3 / 2.4e-3 / 3.7e-3. The GGUF-layout and
 * repacked rows differ from each other by up to 1.15 raw, so a raw bound
 * of 1.0 against a third engine sat below the noise of correct code (the
 * scalar reference failed it). stories260K-Q8_0 shows the same noise:
 * emulating llama.cpp's roundings in a float64 model reproduces its logits
 * to 5e-5, see tests/test_model.c. Perplexity, the accuracy gate, agrees
 * within 0.2% (tests/test_perplexity.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/decode/decode.h"
#include "engine/session/device.h"
#include "tests/util/json.h"

#define MARGIN_SMOL 0.5
#define MARGIN_QWEN 0.25
/* Largest |ours - golden - mean(ours - golden)| over a whole first-logits
 * row, and the largest KL(golden || ours) in nats (measured values in the
 * comment above). */
#define LOGIT_TOL_SMOL 1.0
#define LOGIT_TOL_QWEN 1.0
#define KL_TOL 0.02

typedef struct golden_model {
    const char *golden_name; /* the `model` field */
    const char *path;
    double logit_tol, margin;
} golden_model;

static const golden_model smol = {"SmolLM2-135M-Instruct.Q4_1.gguf",
                                  "models/SmolLM2-135M-Instruct.Q4_1.gguf", LOGIT_TOL_SMOL, MARGIN_SMOL};
static const golden_model qwen15 = {"qwen2.5-coder-1.5b.gguf",
                                    "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                    LOGIT_TOL_QWEN, MARGIN_QWEN};
static const golden_model qwen05 = {"qwen2.5-coder-0.5b.gguf",
                                    "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                                    LOGIT_TOL_QWEN, MARGIN_QWEN};

static sd_model *load(const golden_model *g) {
    cr_assert(access(g->path, R_OK) == 0, "%s is missing (`make test` fetches it)", g->path);
    sd_err e = {{0}};
    sd_model_opts o = {.n_ctx = 512};
    sd_model *m = sd_model_load(g->path, sd_backend_open(SD_DEVICE_CPU, 2, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

static int32_t *ids_of(const json *arr, int *n) {
    *n = (int)json_len(arr);
    int32_t *v = malloc((size_t)*n * sizeof *v + 1);
    cr_assert(v);
    for (int i = 0; i < *n; i++) v[i] = (int32_t)json_num(json_at(arr, (size_t)i));
    return v;
}

/* Checks every record of file that belongs to g; returns the records seen. */
static int check_model(const golden_model *g, const char *file) {
    sd_model *m = load(g);
    json **recs;
    long n_rec = jsonl_read(file, &recs);
    cr_assert(n_rec > 0, "cannot read %s", file);
    float *logits = malloc((size_t)m->hp.vocab * sizeof *logits);
    cr_assert(logits);
    int seen = 0;
    for (long r = 0; r < n_rec; r++) {
        size_t len;
        const char *name = json_str(json_get(recs[r], "model"), &len);
        if (strlen(g->golden_name) != len || memcmp(name, g->golden_name, len)) continue;
        seen++;
        int np, ng;
        int32_t *prompt = ids_of(json_get(recs[r], "prompt_ids"), &np);
        int32_t *want = ids_of(json_get(recs[r], "greedy_ids"), &ng);
        const json *margins = json_get(recs[r], "margins");
        sd_err e = {{0}};
        const json *first = json_get(recs[r], "logits_first");
        if (first) {
            cr_assert_eq(sd_forward_ex(m, m->kv, prompt, np, 0, 0, logits, 1, &e), 0, "%s", e.msg);
            cr_assert_eq((int)json_len(first), m->hp.vocab);
            double shift = 0, gmax = -INFINITY, omax = -INFINITY;
            for (int i = 0; i < m->hp.vocab; i++) {
                const double gv = json_num(json_at(first, (size_t)i));
                if (gv > gmax) gmax = gv;
                if (logits[i] > omax) omax = logits[i];
                shift += logits[i] - gv;
            }
            shift /= m->hp.vocab;
            /* KL(g || o) = sum p_g (lp_g - lp_o), log-probs from the row maxima */
            double zg = 0, zo = 0;
            for (int i = 0; i < m->hp.vocab; i++) {
                zg += exp(json_num(json_at(first, (size_t)i)) - gmax);
                zo += exp(logits[i] - omax);
            }
            double worst = 0, raw = 0, top_worst = 0, kl = 0;
            for (int i = 0; i < m->hp.vocab; i++) {
                const double gv = json_num(json_at(first, (size_t)i)), d = logits[i] - gv;
                const double lpg = gv - gmax - log(zg), lpo = logits[i] - omax - log(zo);
                if (fabs(d) > raw) raw = fabs(d);
                if (fabs(d - shift) > worst) worst = fabs(d - shift);
                if (gv > gmax - 5 && fabs(d - shift) > top_worst) top_worst = fabs(d - shift);
                kl += exp(lpg) * (lpg - lpo);
            }
            cr_log_info("%s record %ld: first logits row shifted by %.4f, |diff - shift| max %.4f "
                        "(raw %.4f), within 5 of the top %.4f, KL %.2e",
                        g->golden_name, r + 1, shift, worst, raw, top_worst, kl);
            cr_expect(worst <= g->logit_tol, "%s record %ld: first logits differ by %.4f > %.2f after "
                      "removing their mean difference %.4f", g->golden_name, r + 1, worst, g->logit_tol, shift);
            cr_expect(kl <= KL_TOL, "%s record %ld: KL(llama.cpp || ours) of the first logits %.2e > %.2e",
                      g->golden_name, r + 1, kl, KL_TOL);
        }
        int32_t *got = malloc((size_t)ng * sizeof *got);
        cr_assert(got);
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        cr_assert_eq(sd_autoregressive_generate(prompt, np, m, ng, &cfg, got, &st, &e), ng, "%s",
                     e.msg);
        int agree = 0;
        while (agree < ng && json_num(json_at(margins, (size_t)agree)) >= g->margin) {
            cr_expect_eq(got[agree], want[agree],
                         "%s record %ld: generated position %d is %d, llama.cpp's %d (margin %.3f)",
                         g->golden_name, r + 1, agree, got[agree], want[agree],
                         json_num(json_at(margins, (size_t)agree)));
            if (got[agree] != want[agree]) break;
            agree++;
        }
        /* teacher-forced: row k of the last ng predicts want[k] */
        int32_t *all = malloc((size_t)(np + ng) * sizeof *all);
        float *rows = malloc((size_t)ng * (size_t)m->hp.vocab * sizeof *rows);
        cr_assert(all && rows);
        memcpy(all, prompt, (size_t)np * sizeof *all);
        memcpy(all + np, want, (size_t)ng * sizeof *all);
        cr_assert_eq(sd_forward_ex(m, m->kv, all, np + ng - 1, 0, 0, rows, ng, &e), 0, "%s", e.msg);
        int forced = 0, forced_eq = 0;
        for (int k = 0; k < ng; k++) {
            if (json_num(json_at(margins, (size_t)k)) < g->margin) continue;
            const float *row = rows + (size_t)k * m->hp.vocab;
            int best = 0;
            for (int i = 1; i < m->hp.vocab; i++)
                if (row[i] > row[best]) best = i;
            forced++;
            forced_eq += best == want[k];
            cr_expect_eq(best, want[k], "%s record %ld: teacher-forced position %d is %d, llama.cpp's %d "
                         "(margin %.3f)", g->golden_name, r + 1, k, best, want[k],
                         json_num(json_at(margins, (size_t)k)));
        }
        cr_log_info("%s record %ld: %d of %d ids compared and equal free-running, %d of %d "
                    "teacher-forced", g->golden_name, r + 1, agree, ng, forced_eq, forced);
        free(all), free(rows), free(prompt), free(want), free(got);
    }
    for (long r = 0; r < n_rec; r++) json_free(recs[r]);
    free(recs);
    free(logits);
    sd_model_free(m);
    return seen;
}

Test(golden_greedy, smollm2, .timeout = 600) {
    cr_assert_eq(check_model(&smol, "tests/data/smollm2_greedy.jsonl"), 6);
}

Test(golden_greedy, qwen_0_5b, .timeout = 600) {
    cr_assert_eq(check_model(&qwen05, "tests/data/qwen_greedy.jsonl"), 5);
}

Test(golden_greedy, qwen_1_5b, .timeout = 900) {
    cr_assert_eq(check_model(&qwen15, "tests/data/qwen_greedy.jsonl"), 5);
}

/* The output depends only on the target: the 0.5B drafting for the 1.5B
 * at temperature 0 gives the 1.5B's own greedy ids, round after round. */
Test(golden_greedy, qwen_pair_speculative_equals_target, .timeout = 900) {
    sd_model *t = load(&qwen15), *d = load(&qwen05);
    sd_err e = {{0}};
    cr_assert_eq(sd_check_vocab(d, t, &e), 0, "%s", e.msg);
    json **recs;
    long n_rec = jsonl_read("tests/data/qwen_greedy.jsonl", &recs);
    cr_assert(n_rec == 10);
    for (long r = 0; r < 2; r++) { /* quicksort and the ChatML request */
        int np, ng;
        int32_t *prompt = ids_of(json_get(recs[r], "prompt_ids"), &np);
        int32_t *want = ids_of(json_get(recs[r], "greedy_ids"), &ng);
        int32_t *ar = malloc((size_t)ng * sizeof *ar), *sp = malloc((size_t)ng * sizeof *sp);
        cr_assert(ar && sp);
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        cr_assert_eq(sd_autoregressive_generate(prompt, np, t, ng, &cfg, ar, &st, &e), ng, "%s",
                     e.msg);
        sd_lm tl = {t, t->kv, 0, 0}, dl = {d, d->kv, 0, 0};
        sd_spec_opts o = {{4, 0, 1, 0}, 0, 0};
        cr_assert_eq(sd_speculative_generate(prompt, np, &dl, &tl, &o, ng, &cfg, sp, &st, &e), ng,
                     "%s", e.msg);
        cr_assert(st.accepted > 0 && st.target_calls < ng, "acceptance %ld/%ld in %ld calls",
                  st.accepted, st.drafted, st.target_calls);
        for (int i = 0; i < ng; i++)
            cr_assert_eq(sp[i], ar[i], "record %ld position %d: speculative %d, autoregressive %d",
                         r + 1, i, sp[i], ar[i]);
        cr_log_info("pair record %ld: %ld/%ld drafts accepted, %ld target calls for %d tokens",
                    r + 1, st.accepted, st.drafted, st.target_calls, ng);
        free(prompt), free(want), free(ar), free(sp);
    }
    for (long r = 0; r < n_rec; r++) json_free(recs[r]);
    free(recs);
    sd_model_free(d);
    sd_model_free(t);
}
