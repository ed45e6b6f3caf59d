/* Verification rounds beyond their fixed form: adaptive lengths
 * (sd_verify_opts.stop_below) and a hybrid drafter (sd_spec_opts.ngram_n)
 * keep the target's greedy output; and the stats of verification runs:
 * the decode rate, the time split, the verification widths and the cost
 * model over them (engine/decode/cost.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/session/device.h"

#define MODELS "tests/data/models/"
#define GEN 48

static const char *files[] = {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"};
static const int32_t prompt[] = {1, 403, 407, 261, 378}; /* "Once upon a time" */
#define NP 5

static sd_model *load(const char *file) {
    char path[256];
    snprintf(path, sizeof path, MODELS "%s", file);
    sd_err e = {{0}};
    sd_model_opts o = {.n_ctx = 256};
    sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

static void greedy_ar(sd_model *m, int32_t *out) {
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e;
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, GEN, &cfg, out, &st, &e), GEN, "%s", e.msg);
}

/* Adaptive rounds (stop_below) with any bound on the drafts and any
 * threshold give the target's greedy output; a high threshold drafts less
 * than the bound allows, and the widths the rounds verified show it. */
Test(speculative, adaptive_rounds_equal_autoregressive) {
    sd_model *target = load(files[0]);
    int32_t want[GEN], got[GEN];
    greedy_ar(target, want);
    for (int d = 1; d < 3; d++) {
        sd_model *draft = load(files[d]);
        sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
        static const double stops[] = {0.05, 0.5, 0.95};
        for (int si = 0; si < 3; si++)
            for (int g = 2; g <= 8; g += 3)
                for (int cache = 0; cache < 2; cache++) {
                    sd_spec_opts o = {{g, 0, 1, stops[si]}, 0, 0};
                    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = cache};
                    sd_gen_stats st;
                    sd_err e;
                    int n = sd_speculative_generate(prompt, NP, &dl, &tl, &o, GEN, &cfg, got, &st, &e);
                    cr_assert_eq(n, GEN, "%s", e.msg);
                    cr_assert_arr_eq(got, want, sizeof want, "draft %s gamma %d stop %g cache %d",
                                     files[d], g, stops[si], cache);
                    if (stops[si] == 0.95 && g == 8) {
                        long short_rounds = 0;
                        for (int w = 1; w < g + 1; w++) short_rounds += st.verify_calls_n[w];
                        cr_assert(short_rounds > 0 && st.drafted < (long)g * (st.target_calls - 1),
                                  "%ld short rounds, %ld drafts in %ld rounds", short_rounds,
                                  st.drafted, st.target_calls - 1);
                    }
                }
        sd_model_free(draft);
    }
    sd_model_free(target);
}

/* A hybrid drafter (n-gram store and model) gives the target's greedy
 * output with and without adaptive rounds, the cache on and off, and its
 * store drafts on a prompt that repeats itself. */
Test(speculative, hybrid_drafter_equals_autoregressive) {
    sd_model *target = load(files[0]), *draft = load(files[2]);
    static const int32_t rep[] = {1, 403, 407, 261, 378, 403, 407, 261, 378, 403, 407};
    const int n_rep = (int)(sizeof rep / sizeof rep[0]);
    int32_t want[GEN], got[GEN];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e;
    cr_assert_eq(sd_autoregressive_generate(rep, n_rep, target, GEN, &cfg, want, &st, &e), GEN);
    sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
    long from_store = 0;
    for (int n = 2; n <= 5; n++)
        for (int k = 0; k < 4; k++) {
            sd_spec_opts o = {{2 + 3 * (k & 1), 0, k & 1, k & 2 ? 0.5 : 0}, 0, n};
            cfg.use_cache = n != 3;
            cr_assert_eq(sd_speculative_generate(rep, n_rep, &dl, &tl, &o, GEN, &cfg, got, &st, &e), GEN,
                         "%s", e.msg);
            cr_assert_arr_eq(got, want, sizeof want, "ngram_n %d case %d", n, k);
            cr_assert(st.drafted_ngram <= st.drafted);
            from_store += st.drafted_ngram;
        }
    cr_assert(from_store > 0, "the store never drafted");
    sd_spec_opts bad = {{4, 0, 1, 0}, 0, 1};
    cr_assert_eq(sd_speculative_generate(rep, n_rep, &dl, &tl, &bad, GEN, &cfg, got, &st, &e), -1);
    cr_assert(strstr(e.msg, "ngram_n 1"), "%s", e.msg);
    sd_model_free(target);
    sd_model_free(draft);
}

/* The bound of a round of store drafts: twice the streak, at least the
 * base, at most SD_STORE_RUN_MAX unless the base is larger. */
Test(hybrid, store_run_follows_the_streak) {
    cr_assert_eq(sd_store_run(0, 4), 4);
    cr_assert_eq(sd_store_run(3, 4), 6);
    cr_assert_eq(sd_store_run(8, 4), SD_STORE_RUN_MAX);
    cr_assert_eq(sd_store_run(1000, 4), SD_STORE_RUN_MAX);
    cr_assert_eq(sd_store_run(0, 20), 20);
}

/* A prompt that repeats one span: the store's streak grows over it and
 * the rounds that copy it run longer than gamma + 1 rows, the drafter
 * model catches up on them in calls of many rows, and the output is
 * still the target's (hybrid drafter and NASD alike). */
Test(hybrid, copied_span_runs_long_rounds) {
    sd_model *target = load(files[0]), *draft = load(files[2]);
    /* the prompt, the target's greedy story after it, the prompt again */
    int32_t rep[NP + GEN + NP], want[GEN], got[GEN];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e = {{0}};
    memcpy(rep, prompt, sizeof prompt);
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, target, GEN, &cfg, rep + NP, &st, &e), GEN);
    memcpy(rep + NP + GEN, prompt, sizeof prompt);
    const int n_rep = NP + GEN + NP;
    cr_assert_eq(sd_autoregressive_generate(rep, n_rep, target, GEN, &cfg, want, &st, &e), GEN);
    sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
    sd_spec_opts o = {{2, 0, 1, SD_STOP_BELOW_DEFAULT}, 0, 4};
    cr_assert_eq(sd_speculative_generate(rep, n_rep, &dl, &tl, &o, GEN, &cfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want);
    long wide = 0;
    for (int n = 4; n < SD_COST_ROWS; n++) wide += st.verify_calls_n[n];
    long catchup = 0;
    for (int k = 5; k < SD_COST_ROWS; k++) catchup += st.draft_calls_n[k];
    cr_assert_geq(st.drafted_ngram, 20, "the store drafted %ld", st.drafted_ngram);
    cr_assert_gt(wide, 0, "no round verified more than gamma + 1 rows");
    cr_assert_gt(catchup, 0, "the drafter never caught up on store drafts in one call");
    sd_ngram *store = sd_ngram_create(SD_NGRAM_ONE, 4, 256, &e);
    cr_assert(store, "%s", e.msg);
    sd_nasd_opts no = {{2, 0, 1, 0}, 1, 1};
    cr_assert_eq(sd_ngram_assisted_generate(rep, n_rep, store, &tl, &no, GEN, &cfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want);
    wide = 0;
    for (int n = 4; n < SD_COST_ROWS; n++) wide += st.verify_calls_n[n];
    cr_assert_gt(wide, 0, "nasd: no round verified more than gamma + 1 rows");
    sd_ngram_free(store);
    sd_model_free(draft);
    sd_model_free(target);
}

/* A prompt whose copy of the story has tokens changed (a rename's
 * shape) or tokens inserted (an added argument's): the target's story
 * differs from it there, the store misses, drafts the source after a
 * change and leaves the rounds to the model where the copy broke, and the
 * output is still the target's, also with the drafter's catch-up priced
 * from the run's own timings. */
Test(hybrid, copy_with_changed_or_inserted_tokens_equals_autoregressive) {
    sd_model *target = load(files[0]), *draft = load(files[2]);
    int32_t story[GEN], rep[NP + 2 * GEN + NP], want[GEN], got[GEN];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e = {{0}};
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, target, GEN, &cfg, story, &st, &e), GEN);
    sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
    for (int shape = 0; shape < 2; shape++) {
        int n_rep = NP;
        memcpy(rep, prompt, sizeof prompt);
        for (int i = 0; i < GEN; i++) {
            const int changed = i >= 6 && i % 9 == 6;
            if (changed && shape == 1) rep[n_rep++] = 400, rep[n_rep++] = 401;
            rep[n_rep++] = changed && shape == 0 ? (story[i] == 400 ? 401 : 400) : story[i];
        }
        memcpy(rep + n_rep, prompt, sizeof prompt);
        n_rep += NP;
        cr_assert_eq(sd_autoregressive_generate(rep, n_rep, target, GEN, &cfg, want, &st, &e), GEN);
        for (int k = 0; k < 3; k++) {
            /* the third: the catch-up priced from the run's own timings */
            sd_spec_opts o = {{k ? 4 : 2, 0, 1, SD_STOP_BELOW_DEFAULT}, 0, 4};
            sd_gen_cfg kc = cfg;
            kc.run_costs = k == 2;
            cr_assert_eq(sd_speculative_generate(rep, n_rep, &dl, &tl, &o, GEN, &kc, got, &st, &e),
                         GEN, "%s", e.msg);
            cr_assert_arr_eq(got, want, sizeof want, "shape %d, gamma %d, run costs %d", shape,
                             o.v.gamma, kc.run_costs);
            cr_assert_gt(st.drafted_ngram, 0, "shape %d: the store never drafted", shape);
        }
    }
    sd_model_free(draft);
    sd_model_free(target);
}

/* The decode rate leaves out the first call's time and every token it
 * emitted; it is 0 where nothing follows that call. */
Test(stats, decode_rate_leaves_out_the_first_call) {
    sd_gen_stats st = {.new_tokens = 21, .prefill_new_tokens = 5, .prefill_s = 1.5, .total_s = 3.5};
    cr_assert_float_eq(sd_gen_decode_tps(&st), 8.0, 1e-12);
    st.new_tokens = 5;
    cr_assert_eq(sd_gen_decode_tps(&st), 0);
    st = (sd_gen_stats){.new_tokens = 9, .prefill_new_tokens = 1, .prefill_s = 2.0, .total_s = 2.0};
    cr_assert_eq(sd_gen_decode_tps(&st), 0);
}

/* The time split of verification runs: each part is non-negative and the
 * four add up to the run; a model drafter has catch-up calls (calls that
 * feed more than the position they draft from, as after a round whose
 * drafts all passed), an n-gram store none; other strategies leave the
 * split at 0. */
static void check_split(const sd_gen_stats *st, int catchup, const char *what) {
    const double sum = st->draft_s + st->catchup_s + st->verify_s + st->host_s;
    cr_assert(st->draft_s >= 0 && st->catchup_s >= 0 && st->verify_s > 0 && st->host_s >= 0,
              "%s: %g %g %g %g", what, st->draft_s, st->catchup_s, st->verify_s, st->host_s);
    cr_assert(catchup ? st->catchup_s > 0 : st->catchup_s == 0, "%s: catch-up %g", what,
              st->catchup_s);
    cr_assert(st->draft_s > 0, "%s: drafting %g", what, st->draft_s);
    cr_assert(fabs(sum - st->total_s) <= 1e-9 + 1e-6 * st->total_s, "%s: %g of %g", what, sum,
              st->total_s);
}

Test(stats, time_split_of_verification_runs) {
    sd_model *t = load("stories260K.gguf"), *d = load("stories260K-q8_0.gguf");
    sd_lm tl = {t, t->kv, 0, 0}, dl = {d, d->kv, 0, 0};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e = {{0}};
    int32_t out[GEN];
    sd_spec_opts so = {{4, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, out, &st, &e), GEN,
                 "%s", e.msg);
    check_split(&st, 1, "spec");
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, 256, &e);
    cr_assert(store, "%s", e.msg);
    sd_nasd_opts no = {{4, 0, 1, 0}, 3, 0};
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &tl, &no, GEN, &cfg, out, &st, &e),
                 GEN, "%s", e.msg);
    check_split(&st, 0, "nasd");
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, t, GEN, &cfg, out, &st, &e), GEN);
    cr_assert(st.draft_s == 0 && st.catchup_s == 0 && st.verify_s == 0 && st.host_s == 0);
    sd_ngram_free(store);
    sd_model_free(d);
    sd_model_free(t);
}

/* The cost model prices a run's counts with a calibration: 10 rounds after
 * the first, 6 of 3 rows and 4 of 5, 30 one-row drafter calls and 10
 * feeding 3 rows, 30 tokens after the first call. With V(1) = 0.1,
 * V(3) = 0.12, V(5) = 0.2, D(1) = 0.03, D(3) = 0.05 the decode phase
 * costs 0.72 + 0.8 + 0.9 + 0.5 = 2.92 s against 30 * 0.1 s: S = 3 / 2.92.
 * The run's own times do not enter; another calibration moves the
 * prediction; no rounds or no one-row step: no prediction. */
static void example_run(sd_gen_stats *st, sd_cost_calib *cal) {
    *st = (sd_gen_stats){.new_tokens = 31, .prefill_new_tokens = 1};
    st->verify_calls_n[3] = 6, st->verify_calls_n[5] = 4;
    st->draft_calls_n[1] = 30, st->draft_calls_n[3] = 10;
    *cal = (sd_cost_calib){0};
    cal->verify_s[1] = 0.1, cal->verify_s[3] = 0.12, cal->verify_s[5] = 0.2;
    cal->draft_s[1] = 0.03, cal->draft_s[3] = 0.05;
}

Test(stats, cost_model_prices_counts_with_a_calibration) {
    sd_gen_stats st;
    sd_cost_calib cal;
    example_run(&st, &cal);
    st.draft_calls = 40, st.draft_s = 9, st.catchup_s = 9;
    st.verify_s_n[3] = 5, st.verify_s_n[5] = 7;
    double v = 0, d = 0;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, &v, &d), 3 / 2.92, 1e-9);
    cr_assert_float_eq(v, 1.52, 1e-9);
    cr_assert_float_eq(d, 1.4, 1e-9);
    st.verify_s_n[3] = 0.72, st.verify_s_n[5] = 0.8, st.draft_s = 0.1, st.catchup_s = 0.2;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, NULL, NULL), 3 / 2.92, 1e-9,
                       "the run's measured times are not the model's inputs");
    sd_cost_calib slow = cal;
    slow.verify_s[5] = 0.4;
    cr_assert_float_eq(sd_cost_predict(&st, &slow, NULL, NULL), 3 / 3.72, 1e-9);
    /* a drafter call wider than the slots: its 40 rows at the widest
     * timed call's price per row (0.05 / 3) */
    st.draft_calls_n[SD_COST_ROWS - 1] = 1, st.draft_wide_rows = 40;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, NULL, NULL), 3 / (2.92 + 40 * 0.05 / 3), 1e-9);
    cal.verify_s[1] = 0;
    cr_assert_eq(sd_cost_predict(&st, &cal, NULL, NULL), 0);
    st.verify_calls_n[3] = st.verify_calls_n[5] = 0;
    cr_assert_eq(sd_cost_predict(&st, &slow, NULL, NULL), 0);
}

/* The prediction at the machine's speed when the run started: the same
 * counts as above with the target's calls 1.5 times and the drafter's
 * twice their calibrated cost (1.52 * 1.5 + 1.4 * 2 = 5.08 s), over an
 * autoregressive step of 0.2 s (30 * 0.2 = 6 s); without that step the
 * calibrated one-row step, scaled (30 * 0.15 = 4.5 s). */
Test(stats, cost_model_follows_the_machine_speed) {
    sd_gen_stats st;
    sd_cost_calib cal;
    example_run(&st, &cal);
    double v = 0, d = 0;
    cr_assert_float_eq(sd_cost_predict_at(&st, &cal, 1.5, 2, 0.2, &v, &d), 6 / 5.08, 1e-9);
    cr_assert_float_eq(v, 2.28, 1e-9);
    cr_assert_float_eq(d, 2.8, 1e-9);
    cr_assert_float_eq(sd_cost_predict_at(&st, &cal, 1.5, 2, 0, NULL, NULL), 4.5 / 5.08, 1e-9);
    cr_assert_float_eq(sd_cost_predict_at(&st, &cal, 1, 1, 0, NULL, NULL),
                       sd_cost_predict(&st, &cal, NULL, NULL), 1e-12);
}

/* Calls wider than the curve are priced on the line through its widest
 * call and the call that filled the cache: the drafter's curve to 3 rows
 * (D(3) = 0.05) and a fill of 43 rows in 0.45 s give 0.02 + 0.01 a row.
 * One call of 40 rows in the last slot costs 0.42 s (not 40 * 0.05 / 3 at
 * D(3)'s price per row), two of 100 rows together 1.04 s, a call of 10
 * rows in its own slot 0.12 s; a fill cheaper than the widest call (a
 * noisy timing) leaves the price per row. A catch-up of 40 rows is priced
 * the same way. */
Test(stats, cost_model_prices_wide_calls_with_the_fill) {
    sd_gen_stats st;
    sd_cost_calib cal;
    example_run(&st, &cal);
    cal.ctx = 43, cal.draft_fill_s = 0.45;
    double v = 0, d = 0;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, &v, &d), 3 / 2.92, 1e-9, "no wide call");
    st.draft_calls_n[SD_COST_ROWS - 1] = 1, st.draft_wide_rows = 40;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, &v, &d), 3 / (2.92 + 0.42), 1e-9);
    cr_assert_float_eq(d, 1.4 + 0.42, 1e-9);
    st.draft_calls_n[SD_COST_ROWS - 1] = 2, st.draft_wide_rows = 100;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, NULL, NULL), 3 / (2.92 + 1.04), 1e-9);
    st.draft_calls_n[SD_COST_ROWS - 1] = 0, st.draft_wide_rows = 0;
    st.draft_calls_n[10] = 1;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, NULL, NULL), 3 / (2.92 + 0.12), 1e-9);
    cal.draft_fill_s = 0.04;
    cr_assert_float_eq(sd_cost_predict(&st, &cal, NULL, NULL), 3 / (2.92 + 10 * 0.05 / 3), 1e-9);
    cal.draft_fill_s = 0.45;
    cr_assert_float_eq(sd_cost_predict_at(&st, &cal, 1, 2, 0, NULL, &d), 3 / (1.52 + 2 * 1.52), 1e-9,
                       "the fill scales with the drafter's speed");
    /* the drafter's catch-up as the speculative rounds price it: the same line */
    cr_assert_float_eq(sd_cost_draft_call(&cal, 3), 0.05, 1e-12);
    cr_assert_float_eq(sd_cost_draft_call(&cal, 40), 0.42, 1e-9);
    cr_assert_float_eq(sd_cost_draft_call(&cal, 0), 0, 1e-12);
}

/* A calibration times every width up to the one asked for, interpolating
 * between the widths it times, grows with the rows, times the call that
 * filled the cache (twenty times the positions: a longer call), and
 * leaves the cache empty; a context that does not fit the cache is
 * refused. */
Test(stats, calibration_times_every_width) {
    sd_model *t = load("stories260K.gguf");
    sd_lm tl = {t, t->kv, 0, 0};
    sd_err e = {{0}};
    double c[SD_COST_ROWS], fill = 0, short_fill = 0;
    cr_assert_eq(sd_cost_time_calls(&tl, prompt, NP, 200, 20, 0, c, &fill, &e), 0, "%s",
                 e.msg);
    for (int n = 1; n <= 20; n++) cr_assert_gt(c[n], 0, "width %d", n);
    for (int n = 21; n < SD_COST_ROWS; n++) cr_assert_eq(c[n], 0, "width %d", n);
    cr_assert_gt(c[20], c[1]);
    cr_assert_eq(t->kv->n, 0);
    cr_assert_eq(sd_cost_time_calls(&tl, prompt, NP, 10, 1, 0, c, &short_fill, &e), 0,
                 "%s", e.msg);
    cr_assert(short_fill > 0 && fill > short_fill,
              "the fill of 200 positions against 10: %g s, %g s", fill, short_fill);
    cr_assert_eq(sd_cost_time_calls(&tl, prompt, NP, 250, 20, 0, c, NULL, &e), -1);
    cr_assert(strstr(e.msg, "context 250"), "%s", e.msg);
    sd_model_free(t);
}

/* A real run's verification widths add up to its target calls after the
 * first, none wider than gamma + 1 rows, and their times to at most the
 * verification time. */
Test(stats, verification_widths_of_a_run) {
    sd_model *t = load("stories260K.gguf"), *d = load("stories260K-q8_0.gguf");
    sd_lm tl = {t, t->kv, 0, 0}, dl = {d, d->kv, 0, 0};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e = {{0}};
    int32_t out[GEN];
    sd_spec_opts so = {{4, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, out, &st, &e), GEN,
                 "%s", e.msg);
    long calls = 0;
    double s = 0;
    for (int n = 1; n < SD_COST_ROWS; n++) calls += st.verify_calls_n[n], s += st.verify_s_n[n];
    cr_assert_eq(calls, st.target_calls - 1);
    for (int n = 6; n < SD_COST_ROWS; n++) cr_assert_eq(st.verify_calls_n[n], 0, "gamma 4: %d rows", n);
    cr_assert(s > 0 && s <= st.verify_s);
    long dcalls = 0;
    for (int k = 1; k < SD_COST_ROWS; k++) dcalls += st.draft_calls_n[k];
    cr_assert_eq(dcalls, st.draft_calls, "every drafter call follows the target's first");
    sd_cost_calib cal = {0};
    cr_assert_eq(sd_cost_time_calls(&tl, prompt, NP, 40, 5, 0, cal.verify_s, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(sd_cost_time_calls(&dl, prompt, NP, 40, 8, 1, cal.draft_s, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert(sd_cost_predict(&st, &cal, NULL, NULL) > 0);
    sd_model_free(d);
    sd_model_free(t);
}
