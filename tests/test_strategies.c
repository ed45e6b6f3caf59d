/* What the decoding strategies must keep:
 *   - greedy speculative (draft model and self-speculative) and NASD output
 *     equal greedy autoregressive output token for token, gamma 1..8, cache
 *     on and off, on every stories260K variant;
 *   - the target as its own drafter accepts every draft;
 *   - stochastic speculative decoding preserves the target distribution
 *     (chi-square over seeded runs, two samplers);
 *   - beam search: one beam equals greedy; with every beam and candidate
 *     kept it finds the exhaustive optimum;
 *   - (the rounds' adaptive lengths, hybrid drafts and the stats of
 *     verification runs: tests/test_rounds.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/session/device.h"
#include "engine/decode/ngram.h"
#include "tests/util/synth_model.h"

#define MODELS "tests/data/models/"
#define GEN 48

static const char *files[] = {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"};
static const int32_t prompt[] = {1, 403, 407, 261, 378}; /* "Once upon a time" */
static const int32_t synth_prompt[] = {1, 300, 301};
#define NP 5

static sd_model *load_kv(const char *file, uint32_t kv_type) {
    char path[256];
    snprintf(path, sizeof path, MODELS "%s", file);
    sd_err e = {{0}};
    sd_model_opts o = {.n_ctx = 256, .kv_type = kv_type};
    sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

static sd_model *load(const char *file) { return load_kv(file, SD_F32); }

static synth_model make_synth(synth_cfg c) {
    synth_model s;
    sd_err e = {{0}};
    cr_assert_eq(synth_model_load(&c, 64, 1, &s, &e), 0, "%s", e.msg);
    return s;
}

static int greedy_ar(sd_model *m, int use_cache, int32_t *out) {
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = use_cache};
    sd_gen_stats st;
    sd_err e;
    int n = sd_autoregressive_generate(prompt, NP, m, GEN, &cfg, out, &st, &e);
    cr_assert_eq(n, GEN, "%s", e.msg);
    cr_assert_eq(st.prefill_new_tokens, 1);
    return n;
}

Test(speculative, greedy_equals_autoregressive) {
    for (int t = 0; t < 3; t++) {
        sd_model *target = load(files[t]);
        int32_t want[GEN], got[GEN];
        greedy_ar(target, 1, want);
        for (int d = 0; d < 3; d++) {
            sd_model *draft = load(files[d]);
            sd_err e;
            cr_assert_eq(sd_check_vocab(draft, target, &e), 0, "%s", e.msg);
            sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
            for (int cache = 0; cache < 2; cache++)
                for (int g = 1; g <= 8; g++) {
                    sd_spec_opts o = {{g, 0, g % 2, 0}, 0, 0};
                    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = cache};
                    sd_gen_stats st;
                    int n = sd_speculative_generate(prompt, NP, &dl, &tl, &o, GEN, &cfg, got, &st, &e);
                    cr_assert_eq(n, GEN, "%s", e.msg);
                    cr_assert_arr_eq(got, want, sizeof want, "target %s draft %s gamma %d cache %d",
                                     files[t], files[d], g, cache);
                    cr_assert(st.drafted > 0 && st.accepted <= st.drafted);
                    if (t == d) cr_assert_eq(st.accepted, st.drafted, "own drafter must accept all");
                    /* the first target call emits one token, or (first_target
                     * off) the first round's accepted drafts and its last token */
                    if (o.v.first_target) cr_assert_eq(st.prefill_new_tokens, 1);
                    else if (t == d) cr_assert_eq(st.prefill_new_tokens, g + 1, "gamma %d", g);
                    else cr_assert(st.prefill_new_tokens >= 1 && st.prefill_new_tokens <= g + 1);
                    /* ids only: (g+1) per round from the target, one per draft */
                    cr_assert_eq(st.host_bytes, 4LL * (st.drafted + st.target_calls + st.draft_calls));
                }
            sd_model_free(draft);
        }
        sd_model_free(target);
    }
}

/* Greedy speculative decoding of GEN tokens after prompt (cache on, first
 * target step on): asserts the output is want, returns the stats. */
static sd_gen_stats spec_greedy(sd_lm *dl, sd_lm *tl, int gamma, double p_min, const int32_t *want) {
    sd_spec_opts o = {{gamma, 0, 1, 0}, p_min, 0};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e;
    int32_t got[GEN];
    cr_assert_eq(sd_speculative_generate(prompt, NP, dl, tl, &o, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof got, "gamma %d p_min %g vocab limit %d", gamma, p_min, dl->vocab_limit);
    return st;
}

/* A drafter whose head covers only the first token ids (sd_lm.vocab_limit,
 * --draft-vocab): speculative output still equals the target's greedy
 * output, drafts come only from those ids, and the drafter alone (the
 * draft-only strategy) emits only them. */
Test(speculative, trimmed_drafter_equals_autoregressive) {
    static const int limits[] = {16, 100, 256};
    sd_model *target = load(files[0]), *draft = load(files[2]);
    int32_t want[GEN], got[GEN];
    greedy_ar(target, 1, want);
    for (int li = 0; li < 3; li++) {
        sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, limits[li]};
        const int hr = sd_head_rows(draft, limits[li]);
        cr_assert_eq(hr, (limits[li] + 15) / 16 * 16);
        for (int g = 1; g <= 6; g += 5) cr_assert(spec_greedy(&dl, &tl, g, 0, want).drafted > 0);
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        sd_err e;
        cr_assert_eq(sd_autoregressive_generate_lm(prompt, NP, &dl, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
        for (int i = 0; i < GEN; i++)
            cr_assert_lt(got[i], hr, "draft-only token %d is %d, limit %d", i, got[i], hr);
    }
    sd_model_free(target);
    sd_model_free(draft);
}

/* The multinomial sampler of plugins/ over m's vocabulary; *set to close. */
static sd_sampler *multinomial(const sd_model *m, sd_sampler_set **set) {
    sd_err e;
    const char *dirs[] = {"plugins"};
    *set = sd_samplers_open(dirs, 1, &e);
    cr_assert(*set, "%s", e.msg);
    sd_sampler *smp = sd_sampler_create(*set, "multinomial", NULL, 0, m->hp.vocab, &e);
    cr_assert(smp, "%s", e.msg);
    return smp;
}

/* p_min (--draft-p-min) only shortens rounds: the output stays the
 * target's greedy output for every threshold; a threshold no draft falls
 * below drafts exactly as without one; 0.5 changes the rounds; p_min 1
 * verifies one draft a round (no draft of a 512-token vocabulary reaches
 * probability 1). Also with a trimmed drafter head. */
Test(speculative, p_min_shortens_rounds_not_output) {
    sd_model *target = load(files[0]), *draft = load(files[2]);
    int32_t want[GEN], got[GEN];
    greedy_ar(target, 1, want);
    static const double thresholds[] = {0, 1e-9, 0.5, 0.9, 1};
    for (int lim = 0; lim <= 100; lim += 100) {
        sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, lim};
        long drafted[5], rounds[5], calls[5];
        for (int k = 0; k < 5; k++) {
            const sd_gen_stats st = spec_greedy(&dl, &tl, 6, thresholds[k], want);
            drafted[k] = st.drafted;
            rounds[k] = st.target_calls;
            calls[k] = st.draft_calls;
            /* greedy: a draft's id crosses, with p_min also its probability */
            cr_assert_eq(st.host_bytes, 4LL * (st.target_calls + st.drafted) + (k ? 8LL : 4LL) * st.draft_calls);
        }
        cr_assert_eq(drafted[1], drafted[0]);
        cr_assert_eq(rounds[1], rounds[0]);
        cr_assert_eq(calls[1], calls[0]);
        cr_assert(drafted[2] != drafted[0] || rounds[2] != rounds[0],
                  "p_min 0.5 never ended a round early (limit %d)", lim);
        /* first_target: the first round drafts nothing; the last may have
         * no room for a draft */
        cr_assert(drafted[4] <= rounds[4] - 1 && drafted[4] >= rounds[4] - 2,
                  "p_min 1: %ld drafts in %ld rounds", drafted[4], rounds[4]);
    }
    /* sampled drafts: the probability is q of the draft */
    sd_err e;
    sd_sampler_set *set;
    sd_sampler *smp = multinomial(target, &set);
    sd_rng rng;
    sd_rng_seed(&rng, 3);
    sd_lm tl = {target, target->kv, 0, 0}, dl = {draft, draft->kv, 0, 0};
    sd_spec_opts o = {{6, 0, 1, 0}, 1, 0};
    sd_gen_cfg cfg = {.sampler = smp, .rng = &rng, .pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
    cr_assert(st.drafted <= st.target_calls - 1 && st.drafted >= st.target_calls - 2,
              "sampled, p_min 1: %ld drafts in %ld rounds", (long)st.drafted, (long)st.target_calls);
    sd_sampler_destroy(smp);
    sd_samplers_close(set);
    sd_model_free(target);
    sd_model_free(draft);
}

/* The trimmed head's logits are the whole head's first rows (one row: the
 * same products, bit for bit; two rows: the whole head takes the two-row
 * tiles, equal to rounding), -inf past them; its top k are the top k of
 * those rows. */
Test(speculative, trimmed_head_logits_and_ids) {
    sd_model *m = load(files[2]);
    const int V = m->hp.vocab, hr = sd_head_rows(m, 200), k = 5;
    float *full = malloc(sizeof(float) * 2 * V), *part = malloc(sizeof(float) * 2 * V);
    int32_t ids[2 * 5], want[5];
    sd_err e;
    for (int rows = 1; rows <= 2; rows++) {
        cr_assert_eq(sd_forward_head(m, m->kv, prompt, NP, 0, 0, 0, full, rows, 0, NULL, NULL, &e), 0, "%s", e.msg);
        cr_assert_eq(sd_forward_head(m, m->kv, prompt, NP, 0, 0, 200, part, rows, 0, NULL, NULL, &e), 0, "%s", e.msg);
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < V; i++) {
                const float a = part[r * V + i], b = full[r * V + i];
                if (i >= hr) cr_assert(isinf(a) && a < 0, "row %d id %d: %g", r, i, a);
                else if (rows == 1) cr_assert_eq(a, b, "row %d id %d", r, i);
                else cr_assert_leq(fabsf(a - b), 1e-4f * (1 + fabsf(b)), "row %d id %d: %g vs %g", r, i, a, b);
            }
    }
    cr_assert_eq(sd_forward_head(m, m->kv, prompt, NP, 0, 0, 0, full, 1, 0, NULL, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_forward_head(m, m->kv, prompt, NP, 0, 0, 200, NULL, 1, k, ids, NULL, &e), 0, "%s", e.msg);
    sd_top_k(full, hr, k, want);
    cr_assert_arr_eq(ids, want, sizeof want);
    cr_assert_eq(sd_forward_head(m, m->kv, prompt, NP, 0, 0, 16, NULL, 1, 17, ids, NULL, &e), -1);
    cr_assert(strstr(e.msg, "top 17"), "%s", e.msg);
    free(full), free(part);
    sd_model_free(m);
}

Test(speculative, self_speculative_equals_autoregressive) {
    for (int t = 0; t < 3; t++) {
        sd_model *m = load(files[t]);
        int32_t want[GEN], got[GEN];
        greedy_ar(m, 1, want);
        for (int k = 1; k <= m->hp.n_layers; k++) {
            sd_err e;
            sd_kv *kv = sd_kv_create(m->be, k, m->kv->kv_dim, m->n_ctx, m->kv_type, &e);
            cr_assert(kv, "%s", e.msg);
            sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv, k, 0};
            for (int g = 1; g <= 8; g++) {
                sd_spec_opts o = {{g, 0, 1, 0}, 0, 0};
                sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
                sd_gen_stats st;
                cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, GEN, &cfg, got, &st, &e), GEN);
                cr_assert_arr_eq(got, want, sizeof want, "%s layers %d gamma %d", files[t], k, g);
                if (k == m->hp.n_layers) cr_assert_eq(st.accepted, st.drafted);
            }
            sd_kv_free(kv);
        }
        sd_model_free(m);
    }
}

Test(nasd, greedy_equals_autoregressive) {
    for (int t = 0; t < 3; t++) {
        sd_model *m = load(files[t]);
        int32_t want[GEN], got[GEN];
        greedy_ar(m, 1, want);
        sd_lm tl = {m, m->kv, 0, 0};
        for (int kind = 0; kind < 2; kind++)
            for (int stop = 0; stop < 2; stop++)
                for (int cache = 0; cache < 2; cache++)
                    for (int g = 1; g <= 8; g++) {
                        sd_err e;
                        sd_ngram *s = sd_ngram_create(kind, 2 + g % 3, 64, &e);
                        cr_assert(s, "%s", e.msg);
                        sd_nasd_opts o = {{g, 0, (g + cache) % 2, 0}, 3, stop};
                        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = cache};
                        sd_gen_stats st;
                        int n = sd_ngram_assisted_generate(prompt, NP, s, &tl, &o, GEN, &cfg, got, &st, &e);
                        cr_assert_eq(n, GEN, "%s", e.msg);
                        cr_assert_arr_eq(got, want, sizeof want, "%s kind %d stop %d cache %d gamma %d",
                                         files[t], kind, stop, cache, g);
                        cr_assert(o.v.first_target ? st.prefill_new_tokens == 1
                                                 : st.prefill_new_tokens >= 1 && st.prefill_new_tokens <= g + 1);
                        cr_assert(st.accepted <= st.drafted);
                        /* (g+1)*k ids a round, k = 3 fillers */
                        cr_assert_eq(st.host_bytes, 4LL * 3 * (st.drafted + st.target_calls));
                        sd_ngram_free(s);
                    }
        sd_model_free(m);
    }
}

/* What a round copies from backend memory to the host. Greedy: the ids of
 * the g+1 verified rows, (g+1)*k*4 bytes with k = 1 (speculative) or the
 * filler count (NASD), and one id per model draft; before the id path a
 * round copied (g+1) rows of vocab floats. Sampled: the rows, as the test
 * needs p and q. Each round's bytes are checked from on_step: the round's
 * tokens tell g when it ended at a rejection (g drafts and their row count
 * are not in the report otherwise, so full rounds are checked in total). */
typedef struct bytes_probe {
    const sd_gen_stats *st;
    long long last;
    int k, bad;
} bytes_probe;

static void probe_step(void *ud, const sd_step *step) {
    bytes_probe *p = ud;
    long long round = p->st->host_bytes - p->last;
    p->last = p->st->host_bytes;
    /* at least the accepted drafts, the rejected one and the bonus row */
    long long rows = step->n_accepted + (step->rejected >= 0) + 1;
    if (round % (4LL * p->k) || round / (4LL * p->k) < rows) p->bad++;
}

Test(strategies, greedy_rounds_copy_ids_not_rows) {
    sd_model *m = load("stories260K.gguf");
    int32_t want[GEN], got[GEN];
    greedy_ar(m, 1, want);
    sd_lm tl = {m, m->kv, 0, 0};
    const long long row = 4LL * m->hp.vocab;
    for (int k = 0; k <= 8; k += 4) {
        sd_err e;
        sd_ngram *s = sd_ngram_create(SD_NGRAM_MULTI, 3, 64, &e);
        cr_assert(s, "%s", e.msg);
        sd_nasd_opts o = {{4, 0, 1, 0}, k, 0};
        sd_gen_stats st;
        bytes_probe p = {&st, 0, k > 1 ? k : 1, 0};
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1, .on_step = probe_step, .ud = &p};
        cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, s, &tl, &o, GEN, &cfg, got, &st, &e), GEN);
        cr_assert_arr_eq(got, want, sizeof want, "nasd filler_top_k %d", k);
        cr_assert_eq(st.host_bytes, 4LL * p.k * (st.drafted + st.target_calls), "filler_top_k %d", k);
        cr_assert_eq(p.bad, 0, "%d rounds copied other than (g+1)*k ids", p.bad);
        cr_assert_lt(st.host_bytes, row * st.target_calls, "a greedy round must copy less than a row");
        sd_ngram_free(s);
    }
    sd_kv *kv = sd_kv_create(m->be, 2, m->kv->kv_dim, m->n_ctx, m->kv_type, NULL);
    cr_assert(kv);
    sd_lm dl = {m, kv, 2, 0};
    sd_spec_opts so = {{4, 0, 1, 0}, 0, 0};
    sd_gen_stats st;
    sd_err e;
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, got, &st, &e), GEN);
    cr_assert_arr_eq(got, want, sizeof want);
    cr_assert_eq(st.host_bytes, 4LL * (st.drafted + st.target_calls + st.draft_calls));
    /* sampled: every verified row and every draft row crosses */
    sd_sampler_set *set;
    sd_sampler *smp = multinomial(m, &set);
    sd_rng rng;
    sd_rng_seed(&rng, 7);
    sd_gen_cfg scfg = {.sampler = smp, .rng = &rng, .pad_id = -1, .use_cache = 1};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &scfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_eq(st.host_bytes, row * (st.drafted + st.target_calls + st.draft_calls));
    sd_sampler_destroy(smp);
    sd_samplers_close(set);
    sd_kv_free(kv);
    sd_model_free(m);
}

/* Stories repeat themselves, so the store must pay off on a long run. */
Test(nasd, accepts_drafts_on_repetitive_text) {
    sd_model *m = load("stories260K.gguf");
    sd_lm tl = {m, m->kv, 0, 0};
    sd_err e;
    sd_ngram *s = sd_ngram_create(SD_NGRAM_MULTI, 3, 256, &e);
    int32_t out[200];
    sd_nasd_opts o = {{4, 0, 1, 0}, 3, 0};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, s, &tl, &o, 200, &cfg, out, &st, &e), 200);
    cr_assert(st.accepted > 20, "accepted %ld of %ld", st.accepted, st.drafted);
    cr_assert(st.target_calls < 200);
    sd_ngram_free(s);
    sd_model_free(m);
}

Test(speculative, vocabulary_mismatch_is_named) {
    sd_model *target = load("stories260K.gguf");
    synth_model s = make_synth(synth_default());
    sd_err e;
    cr_assert_eq(sd_check_vocab(s.m, target, &e), -1);
    cr_assert(strstr(e.msg, "320 tokens") && strstr(e.msg, "512"), "%s", e.msg);
    synth_cfg c = synth_default();
    c.vocab = 512;
    synth_model s2 = make_synth(c);
    cr_assert_eq(sd_check_vocab(s2.m, target, &e), -1);
    cr_assert(strstr(e.msg, "differ at token"), "%s", e.msg);
    synth_model_free(&s);
    synth_model_free(&s2);
    sd_model_free(target);
}

Test(speculative, bad_gamma_and_context) {
    sd_model *m = load("stories260K.gguf");
    sd_lm tl = {m, m->kv, 0, 0};
    int32_t out[8];
    sd_spec_opts o = {{0, 0, 1, 0}, 0, 0};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e;
    sd_kv *kv = sd_kv_create(m->be, 1, m->kv->kv_dim, m->n_ctx, m->kv_type, &e);
    sd_lm dl = {m, kv, 1, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, 8, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "gamma 0"), "%s", e.msg);
    static const double bad_p[] = {-0.5, 1.5, NAN};
    for (int k = 0; k < 3; k++) {
        sd_spec_opts po = {{4, 0, 1, 0}, bad_p[k], 0};
        cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &po, 8, &cfg, out, &st, &e), -1);
        cr_assert(strstr(e.msg, "p_min") && strstr(e.msg, "[0, 1]"), "%s", e.msg);
        sd_spec_opts so = {{4, 0, 1, bad_p[k]}, 0, 0};
        cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, 8, &cfg, out, &st, &e), -1);
        cr_assert(strstr(e.msg, "stop_below") && strstr(e.msg, "[0, 1]"), "%s", e.msg);
    }
    /* a context of 256: the run stops at the limit and says so */
    o.v.gamma = 5;
    int32_t *big = malloc(400 * sizeof *big);
    int n = sd_speculative_generate(prompt, NP, &dl, &tl, &o, 400, &cfg, big, &st, &e);
    cr_assert(n > 0 && n <= 256 - NP + 1, "%d: %s", n, e.msg);
    cr_assert(st.hit_context);
    free(big);
    sd_kv_free(kv);
    sd_model_free(m);
}

/* ---- distribution preservation ------------------------------------------------
 * Two synthetic models with the same vocabulary but different weights (so
 * the drafter is often wrong), or a drafter of another shape (narrower,
 * deeper, another GQA ratio: the Qwen 0.5B -> 1.5B situation), or NASD's
 * n-gram drafter (one-hot q). first_target off: the first token itself
 * comes out of draft + verify, so its law must be the target's exactly.
 * Cells with expected count < 5 are pooled; the chi-square statistic must
 * stay below the 0.999 quantile (normal approximation). */
static double chi2_limit(int dof) {
    double z = 3.09;
    double h = 2.0 / (9.0 * dof);
    return dof * pow(1 - h + z * sqrt(h), 3);
}

enum { SAME_SHAPE, OTHER_SHAPE, NGRAM, TRIMMED, P_MIN, ADAPTIVE, HYBRID };

/* Chi-square of runs draws (count) against the law (law[i] * runs expected
 * of token i), cells under 5 pooled; asserts it is below the 0.999
 * quantile and returns it, the number of cells in *cells. */
static double chi_square(const char *what, const long *count, const float *law, int V, int runs,
                         int *cells) {
    double chi = 0, pooled_o = 0, pooled_e = 0;
    int n = 0;
    for (int i = 0; i < V; i++) {
        double ex = law[i] * runs;
        if (ex < 5) {
            pooled_o += count[i];
            pooled_e += ex;
            continue;
        }
        chi += (count[i] - ex) * (count[i] - ex) / ex;
        n++;
    }
    if (pooled_e >= 5) {
        chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        n++;
    } else {
        cr_assert(pooled_o <= pooled_e + 10, "mass on near-zero tokens: %g", pooled_o);
    }
    cr_assert(n >= 5, "too few cells (%d)", n);
    cr_assert(chi < chi2_limit(n - 1), "%s: chi2 %g over %d cells (limit %g)", what, chi, n,
              chi2_limit(n - 1));
    *cells = n;
    return chi;
}

/* One run of n tokens, first_target off: gamma-3 speculative decoding with
 * dl, or NASD whose store holds best as the prompt's continuation (so the
 * store's first draft is the target's most likely token and both branches,
 * accept and reject, decide the first token). */
static void run_drafted(int drafter, sd_ngram *store, int32_t best, const int32_t *pr, int n_pr,
                        sd_lm *dl, sd_lm *tl, const sd_gen_cfg *cfg, int n, int32_t *out,
                        sd_gen_stats *st) {
    sd_err e;
    if (drafter == NGRAM) {
        sd_nasd_opts o = {{3, 0, 0, 0}, 0, 0};
        sd_ngram_reset(store);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(sd_ngram_observe(store, pr, n_pr, best, &e), 0, "%s", e.msg);
        cr_assert_eq(sd_ngram_assisted_generate(pr, n_pr, store, tl, &o, n, cfg, out, st, &e), n,
                     "%s", e.msg);
    } else {
        sd_spec_opts o = {{3, 0, 0, drafter == ADAPTIVE ? 0.01 : 0}, drafter == P_MIN ? 0.2 : 0,
                          drafter == HYBRID ? 3 : 0};
        cr_assert_eq(sd_speculative_generate(pr, n_pr, dl, tl, &o, n, cfg, out, st, &e), n, "%s",
                     e.msg);
    }
}

static void check_distribution(const char *sampler, const char *const *kv, int n_kv, int drafter) {
    synth_cfg c = synth_default();
    c.seed = 11;
    synth_model t = make_synth(c);
    synth_cfg dc = c;
    dc.seed = 12;
    if (drafter == OTHER_SHAPE) {
        dc.dim = 32;
        dc.n_layers = 3;
        dc.n_heads = 4;
        dc.n_kv_heads = 1;
        dc.ffn = 80;
    }
    synth_model d = make_synth(dc);
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, 64, NULL);
    cr_assert(store);
    sd_err e;
    const char *dirs[] = {"plugins"};
    sd_sampler_set *set = sd_samplers_open(dirs, 1, &e);
    cr_assert(set, "%s", e.msg);
    sd_sampler *p = sd_sampler_create(set, sampler, kv, n_kv, c.vocab, &e);
    cr_assert(p, "%s", e.msg);
    int V = c.vocab;
    /* exact target law of the first token */
    float *logits = malloc((size_t)V * sizeof *logits), *probs = malloc((size_t)V * sizeof *probs);
    /* NASD sees the prompt twice, so its store has a draft at once */
    static const int32_t twice[] = {1, 300, 301, 300, 301};
    const int32_t *pr = drafter == NGRAM || drafter == HYBRID ? twice : synth_prompt;
    const int n_pr = drafter == NGRAM || drafter == HYBRID ? 5 : 3;
    cr_assert_eq(sd_forward_ex(t.m, t.m->kv, pr, n_pr, 0, 0, logits, 1, &e), 0);
    cr_assert_eq(sd_sampler_probs(p, logits, probs, 1, V, &e), 0);
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (probs[i] > probs[best]) best = i;
    const int runs = 4000;
    long *count = calloc((size_t)V, sizeof *count);
    sd_lm tl = {t.m, t.m->kv, 0, 0}, dl = {d.m, d.m->kv, 0, drafter == TRIMMED ? V / 2 : 0};
    /* adaptive rounds and hybrid drafts: the second token's law as well
     * (summed over the first token), where the first round's length or the
     * second draft's source decides how it was drawn */
    const int second = drafter == ADAPTIVE || drafter == HYBRID;
    float *law2 = calloc((size_t)V, sizeof *law2), *cond = malloc((size_t)V * sizeof *cond);
    long *count2 = calloc((size_t)V, sizeof *count2);
    cr_assert(law2 && cond && count2);
    for (int x = 0; second && x < V; x++) {
        if (probs[x] < 1e-6f) continue;
        int32_t pr2[8];
        memcpy(pr2, pr, (size_t)n_pr * sizeof *pr2);
        pr2[n_pr] = x;
        cr_assert_eq(sd_forward_ex(t.m, t.m->kv, pr2, n_pr + 1, 0, 0, logits, 1, &e), 0);
        cr_assert_eq(sd_sampler_probs(p, logits, cond, 1, V, &e), 0);
        for (int y = 0; y < V; y++) law2[y] += probs[x] * cond[y];
    }
    long drafted = 0, accepted = 0;
    for (int r = 0; r < runs; r++) {
        sd_rng rng;
        sd_rng_seed(&rng, 1000 + (uint64_t)r);
        sd_gen_cfg cfg = {.sampler = p, .rng = &rng, .pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        int32_t out[4];
        run_drafted(drafter, store, best, pr, n_pr, &dl, &tl, &cfg, 4, out, &st);
        count[out[0]]++;
        count2[out[1]]++;
        drafted += st.drafted;
        accepted += st.accepted;
    }
    int cells;
    double chi = chi_square(sampler, count, probs, V, runs, &cells);
    cr_assert(accepted < drafted, "the test needs rejections");
    cr_log_info("%s: chi2 %.1f, %d cells, acceptance %.2f", sampler, chi, cells,
                (double)accepted / drafted);
    if (second) chi_square("second token", count2, law2, V, runs, &cells);
    free(law2);
    free(cond);
    free(count2);
    free(count);
    free(logits);
    free(probs);
    sd_ngram_free(store);
    sd_sampler_destroy(p);
    sd_samplers_close(set);
    synth_model_free(&t);
    synth_model_free(&d);
}

Test(speculative, preserves_distribution_multinomial) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, SAME_SHAPE);
}

Test(speculative, preserves_distribution_top_k) {
    const char *kv[] = {"temperature=0.7", "top_k=20"};
    check_distribution("top_k", kv, 2, SAME_SHAPE);
}

Test(speculative, preserves_distribution_with_a_drafter_of_another_shape) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, OTHER_SHAPE);
}

/* Drafts only from the lower half of the vocabulary: the upper half is
 * reached through rejections alone, and the law must not move. */
Test(speculative, preserves_distribution_with_p_min) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, P_MIN);
}

/* Adaptive rounds stop after one, two or three drafts as the drafter's
 * probabilities fall: the first two tokens keep the target's law. */
Test(speculative, preserves_distribution_with_adaptive_rounds) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, ADAPTIVE);
}

/* The store knows the prompt's continuation: the first draft is the
 * store's (one-hot), the next ones the model's or the store's. */
Test(speculative, preserves_distribution_with_a_hybrid_drafter) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, HYBRID);
}

Test(speculative, preserves_distribution_with_a_trimmed_drafter) {
    const char *kv[] = {"temperature=1.0"};
    check_distribution("multinomial", kv, 1, TRIMMED);
}

Test(nasd, preserves_distribution) {
    const char *kv[] = {"temperature=0.25"}; /* a peaked law: drafts often accepted */
    check_distribution("multinomial", kv, 1, NGRAM);
}

/* ---- F16 KV cache ----------------------------------------------------------------
 * The cache rounds K/V to half precision: logits move by about that
 * rounding (here within 1e-2 of logits of magnitude ~10), and every
 * strategy over an F16 cache is as lossless against AR over the same
 * cache as over an F32 one. */
Test(kv_f16, close_to_f32_and_every_strategy_lossless) {
    sd_model *m32 = load(files[0]), *m = load_kv(files[0], SD_F16);
    cr_assert_eq(m->kv->type, SD_F16);
    cr_assert_eq(m->kv->row_bytes, (size_t)m->kv->kv_dim * 2);
    const int V = m->hp.vocab;
    float *a = malloc(sizeof(float) * NP * V), *b = malloc(sizeof(float) * NP * V);
    cr_assert(a && b);
    sd_err e;
    cr_assert_eq(sd_forward(m32, prompt, NP, 0, a, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_forward(m, prompt, NP, 0, b, &e), 0, "%s", e.msg);
    double worst = 0, big = 0;
    for (int i = 0; i < NP * V; i++) {
        worst = fmax(worst, fabs(a[i] - b[i]));
        big = fmax(big, fabs(a[i]));
    }
    cr_assert_leq(worst, 1e-3 * big + 1e-4, "f16 cache moved a logit by %g (max |logit| %g)", worst,
                  big);
    cr_assert_gt(worst, 0, "an F16 cache should round something");
    free(a), free(b);

    int32_t want[GEN], got[GEN];
    greedy_ar(m, 1, want);
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_kv *kv = sd_kv_create(m->be, m->hp.n_layers, m->kv->kv_dim, m->n_ctx, SD_F16, &e);
    cr_assert(kv, "%s", e.msg);
    sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv, m->hp.n_layers, 0};
    sd_spec_opts so = {{4, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want, "spec over an f16 cache");
    cr_assert_eq(st.accepted, st.drafted, "own drafter must accept all");
    sd_kv_free(kv);
    sd_ngram *ng = sd_ngram_create(SD_NGRAM_MULTI, 2, 64, &e);
    cr_assert(ng, "%s", e.msg);
    sd_nasd_opts no = {{4, 0, 0, 0}, 3, 0};
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, ng, &tl, &no, GEN, &cfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want, "nasd over an f16 cache");
    sd_ngram_free(ng);
    sd_beam_opts bo = {1, 3, 5.0, 1.2};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &bo, GEN, &cfg, got, &st, &e), GEN, "%s",
                 e.msg);
    cr_assert_arr_eq(got, want, sizeof want, "one beam over f16 caches");
    cr_assert_null(sd_kv_create(m->be, 1, 8, 8, SD_BF16, &e));
    cr_assert(strstr(e.msg, "element type BF16"), "%s", e.msg);
    sd_model_free(m);
    sd_model_free(m32);
}

/* ---- samplers that keep token history ---------------------------------------------
 * A penalty or mirostat chain depends on the tokens before each row. The
 * strategies reset each instance to the prompt, verify row i after the
 * drafts before it, and give the drafter an instance of its own, so with
 * the target as its own drafter every draft is accepted (p = q bit for
 * bit), and sampled runs keep the autoregressive law. */

static sd_sampler *chain(sd_sampler_set *set, const char *spec, const char *const *kv, int n_kv,
                         int vocab, int role) {
    sd_err e;
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = vocab,
                           .max_history = 512,
                           .role = role};
    sd_sampler *p = sd_sampler_create_for(set, spec, kv, n_kv, &info, &e);
    cr_assert(p, "%s: %s", spec, e.msg);
    return p;
}

static sd_sampler_set *builtin_plugins(void) {
    const char *dirs[] = {"plugins"};
    sd_err e;
    sd_sampler_set *set = sd_samplers_open(dirs, 1, &e);
    cr_assert(set, "%s", e.msg);
    return set;
}

typedef struct chain_case {
    const char *spec;
    const char *kv[3];
    int n_kv;
} chain_case;

/* Sampled: the target drafting for itself through its own instance. */
Test(speculative, stateful_chains_accept_every_self_draft) {
    static const chain_case cases[] = {
        {"penalty,multinomial", {"penalty.repeat=1.5"}, 1},
        {"penalty,top_k,nucleus", {"repeat=1.3", "top_k.top_k=20", "top_p=0.95"}, 3},
        {"mirostat", {"tau=3"}, 1},
        {"penalty,mirostat", {"repeat=1.5", "tau=4", "eta=0.3"}, 3},
    };
    sd_model *m = load("stories260K.gguf");
    sd_kv *kv = sd_kv_create(m->be, m->hp.n_layers, m->kv->kv_dim, m->n_ctx, m->kv_type, NULL);
    sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv, m->hp.n_layers, 0};
    sd_sampler_set *set = builtin_plugins();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const chain_case *k = &cases[c];
        sd_sampler *tp = chain(set, k->spec, k->kv, k->n_kv, m->hp.vocab, SD_ROLE_TARGET);
        sd_sampler *dp = chain(set, k->spec, k->kv, k->n_kv, m->hp.vocab, SD_ROLE_DRAFTER);
        for (int first = 0; first < 2; first++) {
            sd_rng rng;
            sd_rng_seed(&rng, 5);
            sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                              .use_cache = 1};
            sd_spec_opts o = {{4, 0, first, 0}, 0, 0};
            int32_t out[96];
            sd_gen_stats st;
            sd_err e;
            cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, 96, &cfg, out, &st, &e),
                         96, "%s: %s", k->spec, e.msg);
            cr_assert(st.drafted > 60 && st.accepted == st.drafted, "%s: accepted %ld of %ld",
                      k->spec, st.accepted, st.drafted);
            cr_log_info("%s, first_target %d: accepted %ld of %ld drafts", k->spec, first,
                        st.accepted, st.drafted);
        }
        /* one instance for both models is refused: its history would mix them */
        sd_rng rng;
        sd_rng_seed(&rng, 5);
        sd_gen_cfg shared = {.sampler = tp, .rng = &rng, .pad_id = -1, .use_cache = 1};
        sd_spec_opts o = {{4, 0, 1, 0}, 0, 0};
        int32_t out[8];
        sd_gen_stats st;
        sd_err e;
        cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &o, 8, &shared, out, &st, &e), -1);
        cr_assert(strstr(e.msg, "keeps token history: the drafter needs its own instance"), "%s",
                  e.msg);
        sd_sampler_destroy(tp);
        sd_sampler_destroy(dp);
    }
    sd_samplers_close(set);
    sd_kv_free(kv);
    sd_model_free(m);
}

/* Greedy-equivalent chains (penalty then greedy; mirostat with a
 * temperature that leaves one token): speculative decoding with the target
 * as drafter and NASD give the autoregressive output token for token, with
 * the cache on and off. */
Test(speculative, stateful_greedy_chains_equal_autoregressive) {
    static const chain_case cases[] = {
        {"penalty,greedy", {"repeat=1.5"}, 1},
        {"penalty,greedy", {"repeat=1.2", "frequency=0.5", "window=16"}, 3},
        {"mirostat", {"temperature=0.001"}, 1},
        {"penalty,mirostat", {"repeat=1.5", "temperature=0.001"}, 2},
    };
    sd_model *m = load("stories260K.gguf");
    sd_kv *kv = sd_kv_create(m->be, m->hp.n_layers, m->kv->kv_dim, m->n_ctx, m->kv_type, NULL);
    sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv, m->hp.n_layers, 0};
    sd_sampler_set *set = builtin_plugins();
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, m->n_ctx, NULL);
    int32_t plain[GEN];
    greedy_ar(m, 1, plain);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const chain_case *k = &cases[c];
        sd_sampler *tp = chain(set, k->spec, k->kv, k->n_kv, m->hp.vocab, SD_ROLE_TARGET);
        sd_sampler *dp = chain(set, k->spec, k->kv, k->n_kv, m->hp.vocab, SD_ROLE_DRAFTER);
        for (int cache = 0; cache < 2; cache++) {
            sd_rng rng;
            sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                              .use_cache = cache};
            int32_t want[GEN], got[GEN];
            sd_gen_stats st;
            sd_err e;
            sd_rng_seed(&rng, 9);
            cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, GEN, &cfg, want, &st, &e), GEN,
                         "%s", e.msg);
            sd_spec_opts so = {{3, 0, 1, 0}, 0, 0};
            sd_rng_seed(&rng, 9);
            cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, got, &st, &e),
                         GEN, "%s", e.msg);
            cr_assert_arr_eq(got, want, sizeof want, "%s: spec differs from ar", k->spec);
            cr_assert_eq(st.accepted, st.drafted, "%s", k->spec);
            sd_nasd_opts no = {{4, 0, 1, 0}, 3, 0};
            sd_ngram_reset(store);
            sd_rng_seed(&rng, 9);
            cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &tl, &no, GEN, &cfg, got, &st,
                                                    &e),
                         GEN, "%s", e.msg);
            cr_assert_arr_eq(got, want, sizeof want, "%s: nasd differs from ar", k->spec);
            cr_log_info("%s (cache %d): nasd accepted %ld of %ld", k->spec, cache, st.accepted,
                        st.drafted);
            if (!strcmp(k->spec, "penalty,greedy") && k->n_kv == 1)
                cr_assert(memcmp(want, plain, sizeof want), "the penalty changed nothing");
        }
        sd_sampler_destroy(tp);
        sd_sampler_destroy(dp);
    }
    sd_ngram_free(store);
    sd_samplers_close(set);
    sd_kv_free(kv);
    sd_model_free(m);
}

/* A greedy chain that keeps history needs no rng: every strategy runs with
 * none and gives the autoregressive output; a sampled chain without one is
 * refused with its name. */
Test(speculative, greedy_chain_runs_without_rng) {
    static const char *const kv[] = {"dry.multiplier=2", "dry.allowed_length=1"};
    sd_model *m = load("stories260K.gguf");
    sd_kv *kv2 = sd_kv_create(m->be, m->hp.n_layers, m->kv->kv_dim, m->n_ctx, m->kv_type, NULL);
    sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv2, m->hp.n_layers, 0};
    sd_sampler_set *set = builtin_plugins();
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, m->n_ctx, NULL);
    sd_sampler *tp = chain(set, "dry,greedy", kv, 2, m->hp.vocab, SD_ROLE_TARGET);
    sd_sampler *dp = chain(set, "dry,greedy", kv, 2, m->hp.vocab, SD_ROLE_DRAFTER);
    sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .pad_id = -1, .use_cache = 1};
    int32_t want[GEN], got[GEN];
    sd_gen_stats st;
    sd_err e;
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, GEN, &cfg, want, &st, &e), GEN, "%s",
                 e.msg);
    sd_spec_opts so = {{3, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &dl, &tl, &so, GEN, &cfg, got, &st, &e), GEN,
                 "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want, "spec differs from ar");
    sd_nasd_opts no = {{4, 0, 1, 0}, 3, 0};
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &tl, &no, GEN, &cfg, got, &st, &e),
                 GEN, "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want, "nasd differs from ar");
    sd_sampler *sp = chain(set, "penalty,multinomial", NULL, 0, m->hp.vocab, SD_ROLE_TARGET);
    sd_gen_cfg sampled = {.sampler = sp, .pad_id = -1, .use_cache = 1};
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, GEN, &sampled, got, &st, &e), -1);
    cr_assert(strstr(e.msg, "draws at random: sd_gen_cfg needs an rng"), "%s", e.msg);
    sd_ngram_reset(store);
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &tl, &no, GEN, &sampled, got, &st,
                                            &e),
                 -1);
    cr_assert(strstr(e.msg, "needs an rng"), "%s", e.msg);
    sd_sampler_destroy(sp);
    sd_sampler_destroy(tp);
    sd_sampler_destroy(dp);
    sd_ngram_free(store);
    sd_samplers_close(set);
    sd_kv_free(kv2);
    sd_model_free(m);
}

/* Each generation starts from a reset: prompt A, then B, then A again with
 * the same instances gives A's first output (a history left over from B
 * would be refused: B's tokens are not A's prompt). */
Test(speculative, stateful_chain_resets_between_generations) {
    sd_model *m = load("stories260K.gguf");
    sd_kv *kv = sd_kv_create(m->be, 2, m->kv->kv_dim, m->n_ctx, m->kv_type, NULL);
    sd_lm tl = {m, m->kv, 0, 0}, dl = {m, kv, 2, 0};
    sd_sampler_set *set = builtin_plugins();
    const char *args[] = {"repeat=1.4", "tau=4"};
    sd_sampler *tp = chain(set, "penalty,mirostat", args, 2, m->hp.vocab, SD_ROLE_TARGET);
    sd_sampler *dp = chain(set, "penalty,mirostat", args, 2, m->hp.vocab, SD_ROLE_DRAFTER);
    static const int32_t other[] = {1, 365, 301};
    int32_t first[GEN], mid[GEN], again[GEN];
    int32_t *outs[3] = {first, mid, again};
    for (int strat = 0; strat < 2; strat++)
        for (int k = 0; k < 3; k++) {
            sd_rng rng;
            sd_rng_seed(&rng, 21);
            sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                              .use_cache = 1};
            const int32_t *pr = k == 1 ? other : prompt;
            int np = k == 1 ? 3 : NP;
            sd_spec_opts o = {{4, 0, 1, 0}, 0, 0};
            sd_gen_stats st;
            sd_err e;
            int n = strat ? sd_speculative_generate(pr, np, &dl, &tl, &o, GEN, &cfg, outs[k], &st, &e)
                          : sd_autoregressive_generate(pr, np, m, GEN, &cfg, outs[k], &st, &e);
            cr_assert_eq(n, GEN, "%s", e.msg);
        }
    cr_assert_arr_eq(first, again, sizeof first);
    cr_assert(memcmp(first, mid, sizeof first));
    sd_sampler_destroy(tp);
    sd_sampler_destroy(dp);
    sd_samplers_close(set);
    sd_kv_free(kv);
    sd_model_free(m);
}

/* The law of the second generated token under a stateful chain: exact,
 * sum over t1 of P(t1) P(t2 | t1) with a fresh history for each t1; then
 * 4000 speculative runs (a drafter with other weights, so drafts are
 * often rejected and rolled back) or NASD runs, first_target off. */
static void check_stateful_distribution(const char *spec, const char *const *kv, int n_kv,
                                        int drafter) {
    synth_cfg c = synth_default();
    c.seed = 11;
    synth_model t = make_synth(c);
    synth_cfg dc = c;
    dc.seed = 12;
    synth_model d = make_synth(dc);
    sd_sampler_set *set = builtin_plugins();
    int V = c.vocab;
    sd_sampler *tp = chain(set, spec, kv, n_kv, V, SD_ROLE_TARGET);
    sd_sampler *dp = chain(set, spec, kv, n_kv, V, SD_ROLE_DRAFTER);
    static const int32_t twice[] = {1, 300, 301, 300, 301};
    const int32_t *pr = drafter == NGRAM ? twice : synth_prompt;
    const int n_pr = drafter == NGRAM ? 5 : 3;
    float *rows = malloc(2 * (size_t)V * sizeof *rows), *p1 = malloc((size_t)V * sizeof *p1),
          *p2 = malloc((size_t)V * sizeof *p2), *law = calloc((size_t)V, sizeof *law);
    int32_t seq[8];
    memcpy(seq, pr, (size_t)n_pr * sizeof *seq);
    sd_err e;
    cr_assert_eq(sd_forward_ex(t.m, t.m->kv, pr, n_pr, 0, 0, rows, 1, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_reset(tp, pr, n_pr, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(tp, seq, n_pr, rows, n_pr, p1, V, &e), 0, "%s", e.msg);
    int32_t best = 0;
    for (int t1 = 0; t1 < V; t1++) {
        best = p1[t1] > p1[best] ? t1 : best;
        if (!(p1[t1] > 0)) continue;
        seq[n_pr] = t1;
        cr_assert_eq(sd_forward_ex(t.m, t.m->kv, seq, n_pr + 1, 0, 0, rows + V, 1, &e), 0);
        cr_assert_eq(sd_sampler_dist(tp, seq, n_pr + 1, rows, n_pr, p2, V, &e), 0, "%s", e.msg);
        for (int t2 = 0; t2 < V; t2++) law[t2] += p1[t1] * p2[t2];
    }
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, 64, NULL);
    const int runs = 4000;
    long *count = calloc((size_t)V, sizeof *count), drafted = 0, accepted = 0;
    sd_lm tl = {t.m, t.m->kv, 0, 0}, dl = {d.m, d.m->kv, 0, 0};
    for (int r = 0; r < runs; r++) {
        sd_rng rng;
        sd_rng_seed(&rng, 5000 + (uint64_t)r);
        sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                          .use_cache = 1};
        sd_gen_stats st;
        int32_t out[3];
        run_drafted(drafter, store, best, pr, n_pr, &dl, &tl, &cfg, 3, out, &st);
        count[out[1]]++;
        drafted += st.drafted;
        accepted += st.accepted;
    }
    int cells;
    double chi = chi_square(spec, count, law, V, runs, &cells);
    cr_assert(accepted < drafted, "the test needs rejections");
    cr_log_info("%s (%s): second token chi2 %.1f over %d cells (limit %.1f), acceptance %.3f",
                spec, drafter == NGRAM ? "nasd" : "spec", chi, cells, chi2_limit(cells - 1),
                (double)accepted / drafted);
    free(count);
    free(rows);
    free(p1);
    free(p2);
    free(law);
    sd_ngram_free(store);
    sd_sampler_destroy(tp);
    sd_sampler_destroy(dp);
    sd_samplers_close(set);
    synth_model_free(&t);
    synth_model_free(&d);
}

Test(speculative, preserves_distribution_penalty_chain) {
    const char *kv[] = {"penalty.repeat=3", "penalty.presence=1", "temperature=1.0"};
    check_stateful_distribution("penalty,multinomial", kv, 3, SAME_SHAPE);
}

Test(speculative, preserves_distribution_mirostat) {
    const char *kv[] = {"tau=4.5", "eta=0.5"}; /* mu moves the cut through the law */
    check_stateful_distribution("mirostat", kv, 2, SAME_SHAPE);
}

Test(nasd, preserves_distribution_penalty_chain) {
    const char *kv[] = {"penalty.repeat=3", "temperature=0.25"};
    check_stateful_distribution("penalty,multinomial", kv, 2, NGRAM);
}

/* ---- beam search ---------------------------------------------------------------- */
Test(beam, one_beam_is_greedy) {
    for (int t = 0; t < 3; t++) {
        sd_model *m = load(files[t]);
        int32_t want[GEN], got[GEN];
        greedy_ar(m, 1, want);
        sd_beam_opts o = {1, 3, 5.0, 1.2};
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        sd_err e;
        cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &o, GEN, &cfg, got, &st, &e), GEN, "%s", e.msg);
        cr_assert_arr_eq(got, want, sizeof want, "%s", files[t]);
        cr_assert_eq(st.prefill_new_tokens, 1);
        sd_model_free(m);
    }
}

static double lsm(const float *x, int n, int i) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < n; j++) mx = fmax(mx, x[j]);
    for (int j = 0; j < n; j++) s += exp(x[j] - mx);
    return x[i] - mx - log(s);
}

/* --no-cache recomputes every beam's prefix each step: same beams, same
 * output as with the caches following their beams. */
Test(beam, no_cache_recomputes_the_same_beams) {
    sd_model *m = load("stories260K.gguf");
    int32_t want[16], got[16];
    sd_beam_opts o = {3, 3, 5.0, 1.2};
    sd_gen_stats st;
    sd_err e;
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &o, 16, &cfg, want, &st, &e), 16, "%s", e.msg);
    cfg.use_cache = 0;
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &o, 16, &cfg, got, &st, &e), 16, "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof want);
    sd_model_free(m);
}

Test(beam, finds_exhaustive_optimum) {
    synth_model s = make_synth(synth_default());
    sd_model *m = s.m;
    int V = m->hp.vocab;
    int32_t eos = 2;
    double minl = 1.0, alpha = 1.5;
    /* exhaustive over every sequence of 2 tokens (or 1 ending in EOS) */
    float *l1 = malloc((size_t)V * sizeof *l1), *l2 = malloc((size_t)V * sizeof *l2);
    sd_err e;
    cr_assert_eq(sd_forward_ex(m, m->kv, synth_prompt, 3, 0, 0, l1, 1, &e), 0);
    double best = -INFINITY;
    int32_t bt[2] = {-1, -1};
    for (int a = 0; a < V; a++) {
        double la = lsm(l1, V, a);
        if (a == eos) {
            if (la > best) best = la, bt[0] = a, bt[1] = -1;
            continue;
        }
        int32_t seq[4] = {synth_prompt[0], synth_prompt[1], synth_prompt[2], a};
        cr_assert_eq(sd_forward_ex(m, m->kv, seq, 4, 0, 0, l2, 1, &e), 0);
        double pen = pow((minl + 2) / (minl + 1), alpha);
        for (int b = 0; b < V; b++) {
            double sc = (la + lsm(l2, V, b)) / pen;
            if (sc > best) best = sc, bt[0] = a, bt[1] = b;
        }
    }
    sd_beam_opts o = {V, V, minl, alpha};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1, .eos_ids = &eos, .n_eos = 1};
    sd_gen_stats st;
    int32_t out[2];
    int n = sd_beam_search_generate(synth_prompt, 3, m, &o, 2, &cfg, out, &st, &e);
    cr_assert(n >= 1, "%s", e.msg);
    cr_assert_eq(out[0], bt[0]);
    if (bt[1] >= 0) cr_assert_eq(out[1], bt[1]);
    else cr_assert_eq(n, 1);
    free(l1);
    free(l2);
    synth_model_free(&s);
}

Test(beam, more_beams_score_at_least_greedy) {
    sd_model *m = load("stories260K.gguf");
    sd_beam_opts o = {4, 3, 5.0, 1.2};
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    sd_err e;
    int32_t out[32];
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &o, 32, &cfg, out, &st, &e), 32, "%s", e.msg);
    cr_assert_eq(st.target_calls, 32);
    o.num_beams = 0;
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &o, 32, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "num_beams 0"), "%s", e.msg);
    sd_model_free(m);
}
