/* The session layer: the strategy registry (engine/session/strategies.h)
 * and every strategy run through sd_session_generate, as the CLI and the
 * benchmarks run them; a drafter's context and vocabulary at opening. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/session/session.h"
#include "tests/util/synth_model.h"

#define MODELS "tests/data/models/"

Test(registry, bits_names_and_order) {
    for (int i = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        cr_assert_eq(t->bit, 1 << i, "%s", t->name);
        cr_assert_eq(sd_strategy_find(t->bit), t);
        cr_assert_str_eq(sd_strategy_name(t->bit), t->name);
        cr_assert(t->run && t->title && t->title[0], "%s", t->name);
        for (int k = 0; k < i; k++) cr_assert_str_neq(sd_strategies[k].name, t->name);
    }
    cr_assert_eq(sd_strategies[0].bit, SD_STRAT_AR, "ar runs first: the others compare with it");
    cr_assert_null(sd_strategy_find(0));
    cr_assert_null(sd_strategy_find(SD_STRAT_AR | SD_STRAT_SPEC));
    cr_assert_str_eq(sd_strategy_name(1 << SD_N_STRATEGIES), "?");
}

Test(registry, parse_every_name_and_refuse_others) {
    char list[128] = "";
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "",
                 sd_strategies[i].name);
    int bits = 0;
    sd_err e = {{0}};
    cr_assert_eq(sd_parse_strategies(list, &bits, &e), 0, "%s", e.msg);
    cr_assert_eq(bits, (1 << SD_N_STRATEGIES) - 1);
    cr_assert_eq(sd_parse_strategies("nasd", &bits, &e), 0);
    cr_assert_eq(bits, SD_STRAT_NASD);
    cr_assert_eq(sd_parse_strategies("ar,specx", &bits, &e), -1);
    cr_assert(strstr(e.msg, "'specx'"), "%s", e.msg);
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        cr_assert(strstr(e.msg, sd_strategies[i].name), "the message lists every name: %s", e.msg);
}

Test(registry, drafter_needs) {
    cr_assert_null(sd_strategies_needing_drafter(SD_STRAT_AR | SD_STRAT_NASD | SD_STRAT_BEAM));
    const sd_strategy *t = sd_strategies_needing_drafter(SD_STRAT_AR | SD_STRAT_DRAFT);
    cr_assert(t && t->bit == SD_STRAT_DRAFT);
    cr_assert_eq(sd_strategies_needing_drafter(SD_STRAT_SPEC)->bit, SD_STRAT_SPEC);
}

/* The default bound of a round: 8 where the drafter's confidence ends
 * rounds early, 4 where nothing does; a given --gamma for every kind. */
Test(registry, gamma_bound_per_strategy) {
    sd_config c;
    sd_config_defaults(&c);
    cr_assert_eq(c.gamma, SD_GAMMA_AUTO);
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_SPEC), SD_GAMMA_ADAPTIVE);
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_NASD), SD_GAMMA_FIXED);
    c.fixed_gamma = 1;
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_SPEC), SD_GAMMA_FIXED);
    c.fixed_gamma = 0;
    c.stop_below = 0;
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_SPEC), SD_GAMMA_FIXED);
    c.gamma = 3;
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_SPEC), 3);
    cr_assert_eq(sd_session_gamma(&c, SD_STRAT_NASD), 3);
    cr_assert_gt(SD_GAMMA_ADAPTIVE, SD_GAMMA_FIXED);
}

static void open_session(sd_session *s, const char *target, const char *draft, int n_ctx) {
    sd_config c;
    sd_config_defaults(&c);
    c.model = target;
    c.draft = draft;
    c.n_ctx = n_ctx;
    c.n_predict = 24;
    c.threads = 1;
    c.have_seed = 1;
    c.seed = 7;
    sd_err e = {{0}};
    cr_assert_eq(sd_session_open(s, &c, &e), 0, "%s", e.msg);
}

/* Every strategy of the registry through the session; the lossless ones
 * give ar's greedy ids. */
Test(session, every_strategy_runs) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", MODELS "stories260K-q8_0.gguf", 256);
    sd_err e = {{0}};
    int32_t *ids = NULL, ar[24], out[24];
    int n_ids = 0, n_ar = 0;
    cr_assert_eq(sd_session_prompt_ids(&s, "Once upon a time", &ids, &n_ids, &e), 0, "%s", e.msg);
    for (int i = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        sd_gen_stats st;
        int n = sd_session_generate(&s, t->bit, ids, n_ids, NULL, i ? out : ar, &st, &e);
        cr_assert(n > 0, "%s: %s", t->name, e.msg);
        if (!i) n_ar = n;
        else if (t->lossless)
            cr_assert(n == n_ar && !memcmp(out, ar, (size_t)n * sizeof *out), "%s", t->name);
    }
    free(ids);
    sd_session_close(&s);
}

Test(session, strategy_needing_a_drafter_without_one) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", NULL, 64);
    sd_err e = {{0}};
    int32_t ids[2] = {1, 2}, out[24];
    sd_gen_stats st;
    cr_assert_eq(sd_session_generate(&s, SD_STRAT_DRAFT, ids, 2, NULL, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "need a drafter") && strstr(e.msg, "--draft-layers"), "%s", e.msg);
    cr_assert_eq(sd_session_generate(&s, 0, ids, 2, NULL, out, &st, &e), -1);
    sd_session_close(&s);
}

/* ---- a drafter of a shorter context, or of another vocabulary ---------- */

/* A synthetic model of context_length ctx and vocab tokens at a path of
 * this process's own (the caller removes it). */
static void synth_file(char *path, size_t cap, int ctx, int vocab, uint64_t seed) {
    synth_cfg c = synth_default();
    c.ctx = ctx;
    c.vocab = vocab;
    c.seed = seed;
    snprintf(path, cap, "/tmp/sd_test_session_%d_%d_%d.gguf", (int)getpid(), ctx, vocab);
    sd_err e = {{0}};
    cr_assert_eq(synth_model_write(&c, path, &e), 0, "%s", e.msg);
}

static int try_open(sd_session *s, const char *target, const char *draft, int n_ctx, sd_err *e) {
    sd_config c;
    sd_config_defaults(&c);
    c.model = target;
    c.draft = draft;
    c.n_ctx = n_ctx;
    c.threads = 1;
    return sd_session_open(s, &c, e);
}

Test(session, shorter_drafter_sets_the_context) {
    char big[128], small[128];
    synth_file(big, sizeof big, 2048, 320, 1);
    synth_file(small, sizeof small, 1024, 320, 2);
    static const int asked[] = {0, 2048};
    for (int k = 0; k < 2; k++) {
        sd_session s;
        sd_err e = {{0}};
        cr_assert_eq(try_open(&s, big, small, asked[k], &e), 0, "--ctx %d: %s", asked[k], e.msg);
        cr_assert_eq(s.target->n_ctx, 1024);
        cr_assert_eq(s.draft->n_ctx, 1024);
        cr_assert(strstr(s.notice, "1024") && strstr(s.notice, "2048") && strstr(s.notice, "--ctx") &&
                      strstr(s.notice, small), "%s", s.notice);
        sd_session_close(&s);
    }
    /* a context both hold, or a drafter longer than the target: no notice */
    sd_session s;
    sd_err e = {{0}};
    cr_assert_eq(try_open(&s, big, small, 512, &e), 0, "%s", e.msg);
    cr_assert(s.target->n_ctx == 512 && s.draft->n_ctx == 512 && !s.notice[0], "%s", s.notice);
    sd_session_close(&s);
    cr_assert_eq(try_open(&s, small, big, 0, &e), 0, "%s", e.msg);
    cr_assert(s.target->n_ctx == 1024 && s.draft->n_ctx == 1024 && !s.notice[0], "%s", s.notice);
    sd_session_close(&s);
    /* more than the target holds is still the target's error */
    cr_assert_eq(try_open(&s, big, small, 4096, &e), -1);
    cr_assert(strstr(e.msg, big) && strstr(e.msg, "4096"), "%s", e.msg);
    remove(big);
    remove(small);
}

/* The vocabulary is what makes a pair unusable, so it is named first,
 * whatever the contexts. */
Test(session, vocabulary_mismatch_is_reported_first) {
    char target[128], draft[128];
    synth_file(target, sizeof target, 2048, 320, 1);
    synth_file(draft, sizeof draft, 1024, 300, 2);
    sd_session s;
    sd_err e = {{0}};
    cr_assert_eq(try_open(&s, target, draft, 2048, &e), -1);
    cr_assert(strstr(e.msg, "vocabulary") && !strstr(e.msg, "context"), "%s", e.msg);
    remove(target);
    remove(draft);
    cr_assert_eq(try_open(&s, "models/SmolLM2-135M-Instruct.Q4_1.gguf", MODELS "stories260K.gguf", 0,
                          &e), -1);
    cr_assert(strstr(e.msg, "vocabulary") && !strstr(e.msg, "context"), "%s", e.msg);
}

/* ---- the cost model's calibration ----------------------------------------- */

/* No prediction before an autoregressive run; after one the session times
 * the step costs once, keeps them for the next verification run and
 * times the drafter again when its view changes; every prediction comes
 * from them, scaled by the one-row steps timed again before the run. */
Test(session, calibrates_once_after_an_autoregressive_run) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", MODELS "stories260K-q8_0.gguf", 256);
    sd_err e = {{0}};
    int32_t *ids = NULL, out[24];
    int n_ids = 0;
    cr_assert_eq(sd_session_prompt_ids(&s, "Once upon a time", &ids, &n_ids, &e), 0, "%s", e.msg);
    sd_gen_stats st;
    cr_assert(sd_session_generate(&s, SD_STRAT_SPEC, ids, n_ids, NULL, out, &st, &e) > 0, "%s", e.msg);
    cr_assert_eq(st.predicted_speedup, 0);
    cr_assert_eq(s.cal.verify_s[1], 0, "no calibration without an ar run to compare");
    cr_assert(sd_session_generate(&s, SD_STRAT_AR, ids, n_ids, NULL, out, &st, &e) > 0, "%s", e.msg);
    cr_assert(sd_session_generate(&s, SD_STRAT_SPEC, ids, n_ids, NULL, out, &st, &e) > 0, "%s", e.msg);
    const sd_cost_calib first = s.cal;
    cr_assert(first.verify_s[1] > 0 && first.draft_s[1] > 0);
    cr_assert(first.verify_s[SD_STORE_RUN_MAX + 1] > 0, "widths up to a store round's");
    cr_assert_eq(first.ctx, n_ids + s.c.n_predict / 2);
    cr_assert(first.verify_ref > 0 && first.draft_ref > 0, "the one-row references");
    /* the prediction over the ar run's step, its parts the calibrated
     * prices scaled to the speed timed just before the run */
    double v0 = 0, d0 = 0;
    cr_assert_gt(sd_cost_predict(&st, &first, &v0, &d0), 0);
    cr_assert_gt(st.predicted_verify_s, 0);
    cr_assert_float_eq(st.predicted_speedup,
                       (st.new_tokens - st.prefill_new_tokens) * s.step_s /
                           (st.predicted_verify_s + st.predicted_draft_s),
                       1e-9);
    cr_assert(st.predicted_verify_s != v0 || st.predicted_draft_s != d0 ||
                  st.predicted_speedup != sd_cost_predict(&st, &first, NULL, NULL),
              "scaled and over the ar step, not the calibration as timed");
    cr_assert(sd_session_generate(&s, SD_STRAT_NASD, ids, n_ids, NULL, out, &st, &e) > 0, "%s", e.msg);
    cr_assert_gt(st.predicted_speedup, 0);
    cr_assert(!memcmp(&first, &s.cal, sizeof first), "timed again for the same prompt");
    s.c.draft_vocab = 256;
    cr_assert(sd_session_generate(&s, SD_STRAT_SPEC, ids, n_ids, NULL, out, &st, &e) > 0, "%s", e.msg);
    cr_assert(!memcmp(first.verify_s, s.cal.verify_s, sizeof first.verify_s), "the target is the same");
    cr_assert_eq(s.cal_drafter.vocab_limit, 256, "the drafter's new head is timed");
    free(ids);
    sd_session_close(&s);
}

/* ---- draft-only generation is the drafter's ----------------------------- */

Test(session, draft_only_counts_and_names_the_drafter) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", MODELS "stories260K-q8_0.gguf", 256);
    sd_err e = {{0}};
    int32_t *ids = NULL, out[24];
    int n_ids = 0;
    cr_assert_eq(sd_session_prompt_ids(&s, "Once upon a time", &ids, &n_ids, &e), 0, "%s", e.msg);
    sd_gen_stats st;
    int n = sd_session_generate(&s, SD_STRAT_DRAFT, ids, n_ids, NULL, out, &st, &e);
    cr_assert(n > 0, "%s", e.msg);
    cr_assert_eq(st.target_calls, 0);
    cr_assert_eq(st.draft_calls, n, "one drafter call a token (greedy, cached)");
    cr_assert(st.model && !strcmp(st.model, MODELS "stories260K-q8_0.gguf"), "%s", st.model);
    n = sd_session_generate(&s, SD_STRAT_AR, ids, n_ids, NULL, out, &st, &e);
    cr_assert(n > 0 && st.target_calls == n && st.draft_calls == 0);
    cr_assert(st.model && !strcmp(st.model, MODELS "stories260K.gguf"), "%s", st.model);
    free(ids);
    sd_session_close(&s);
}

/* ---- the drafter's head cut, left to the session ------------------------- */

/* Qwen2.5's 151936-token head is about a third of the 0.5B's step: left at
 * auto, speculative decoding's drafter gets the cut, said in the notice,
 * and draft-only generation keeps the whole head; --draft-vocab 0 keeps
 * it whole for both. SmolLM2's 49152 tokens are too few for a cut. */
Test(session, automatic_head_cut_when_it_pays) {
    static const char q[] = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    cr_assert(access(q, R_OK) == 0, "%s missing (`make model-pair` fetches it)", q);
    sd_config c;
    sd_config_defaults(&c);
    c.model = c.draft = q;
    c.n_ctx = 64;
    c.n_predict = 3;
    sd_session s;
    sd_err e = {{0}};
    cr_assert_eq(sd_session_open(&s, &c, &e), 0, "%s", e.msg);
    cr_assert(strstr(s.notice, "token ids below 32768 of 151936"), "%s", s.notice);
    int32_t *ids = NULL, out[3];
    int n_ids = 0;
    sd_gen_stats st;
    cr_assert_eq(sd_session_prompt_ids(&s, "int main(", &ids, &n_ids, &e), 0, "%s", e.msg);
    for (int whole = 0; whole < 2; whole++) {
        s.c.draft_vocab = whole ? 0 : SD_DRAFT_VOCAB_AUTO;
        cr_assert_eq(sd_session_generate(&s, SD_STRAT_SPEC, ids, n_ids, NULL, out, &st, &e), 3, "%s", e.msg);
        cr_assert_eq(s.draft_lm.vocab_limit, whole ? 0 : 32768);
        cr_assert_eq(sd_session_generate(&s, SD_STRAT_DRAFT, ids, n_ids, NULL, out, &st, &e), 3, "%s", e.msg);
        cr_assert_eq(s.draft_lm.vocab_limit, 0);
    }
    free(ids);
    sd_session_close(&s);
    c.model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    c.draft = NULL;
    c.draft_layers = 10;
    cr_assert_eq(sd_session_open(&s, &c, &e), 0, "%s", e.msg);
    cr_assert_eq(s.draft_lm.vocab_limit, 0);
    cr_assert_null(strstr(s.notice, "token ids below"), "%s", s.notice);
    sd_session_close(&s);
}
