/* Speculative decoding and NASD keep the output of the shipped XTC and DRY
 * stages, on stories260K (tests/data/models):
 *   - greedy: "dry,greedy" and "xtc,greedy" give the autoregressive output
 *     token for token (ar == spec == nasd), cache on and off;
 *   - sampled ("dry,multinomial" and "temperature,xtc,multinomial"): the
 *     law of the second generated token (so a rejected draft has been
 *     accepted into DRY's history and rolled back before it) over 4000
 *     seeded runs matches the exact law, sum over t1 of P(t1) P(t2 | t1),
 *     each term computed with a fresh history.
 * The drafter is the target's first two layers: its drafts differ from the
 * target's law, so they are often rejected. DRY gets the vocabulary's
 * token bytes, so its default breakers ("\n", ':', ...) apply. The greedy
 * runs pass an rng too: a chain that keeps history is verified by the
 * sampled rule, which draws even when the law is one-hot.
 *
 * False alarms: the runs are seeded, so a given build passes or fails the
 * same way every time; over the choice of seeds a correct engine fails one
 * comparison with probability 0.001 (the chi-square limit is the 0.999
 * quantile, cells expecting fewer than 5 draws pooled), so the four
 * comparisons here together with at most 0.4%. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/sampling/sampler_host.h"
#include "engine/session/device.h"
#include "engine/text/tokenizer.h"

#define STORIES "tests/data/models/stories260K.gguf"
#define DRAFT_LAYERS 2
#define GEN 40
#define RUNS 4000

/* "Once upon a time Once upon a": DRY penalises "time" next. */
static const int32_t prompt[] = {1, 403, 407, 261, 378, 403, 407, 261};
#define NP ((int)(sizeof prompt / sizeof prompt[0]))

typedef struct rig {
    sd_model *m;
    sd_kv *draft_kv;
    sd_lm target, drafter;
    sd_sampler_set *set;
    sd_ngram *store;
} rig;

static rig open_rig(void) {
    rig r;
    sd_err e = {""};
    sd_model_opts o = {.n_ctx = 128, .kv_type = SD_F32};
    r.m = sd_model_load(STORIES, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    cr_assert(r.m, "%s", e.msg);
    r.draft_kv = sd_kv_create(r.m->be, DRAFT_LAYERS, r.m->kv->kv_dim, r.m->n_ctx, r.m->kv_type, &e);
    cr_assert(r.draft_kv, "%s", e.msg);
    r.target = (sd_lm){r.m, r.m->kv, 0, 0};
    r.drafter = (sd_lm){r.m, r.draft_kv, DRAFT_LAYERS, 0};
    const char *dirs[] = {"plugins"};
    r.set = sd_samplers_open(dirs, 1, &e);
    cr_assert(r.set, "%s", e.msg);
    r.store = sd_ngram_create(SD_NGRAM_MULTI, 3, r.m->n_ctx, &e);
    cr_assert(r.store, "%s", e.msg);
    return r;
}

static void close_rig(rig *r) {
    sd_ngram_free(r->store);
    sd_samplers_close(r->set);
    sd_kv_free(r->draft_kv);
    sd_model_free(r->m);
}

static sd_sampler *chain(const rig *r, const char *spec, const char *const *kv, int n_kv,
                         int role) {
    sd_err e = {""};
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = r->m->hp.vocab,
                           .max_history = r->m->n_ctx + 2,
                           .role = role,
                           .piece = sd_tokenizer_bytes,
                           .piece_ctx = r->m->tok,
                           .vocab_text = sd_tokenizer_text};
    sd_sampler *p = sd_sampler_create_for(r->set, spec, kv, n_kv, &info, &e);
    cr_assert(p, "%s: %s", spec, e.msg);
    return p;
}

enum { AR, SPEC, NASD };
static const char *const strategy_names[] = {"ar", "spec", "nasd"};

/* One generation of n tokens; NASD's store is cleared first and, when
 * seed >= 0, told that seed follows the prompt, so its first draft is
 * there at once. first_target off: the first token comes out of a
 * verification too. */
static void generate(rig *r, int strategy, int32_t seed, const sd_gen_cfg *cfg, int n,
                     int32_t *out, sd_gen_stats *st) {
    sd_err e = {""};
    int got = -1;
    if (strategy == AR) {
        got = sd_autoregressive_generate(prompt, NP, r->m, n, cfg, out, st, &e);
    } else if (strategy == SPEC) {
        sd_spec_opts o = {.v = {.gamma = 3}};
        got = sd_speculative_generate(prompt, NP, &r->drafter, &r->target, &o, n, cfg, out, st,
                                      &e);
    } else {
        sd_nasd_opts o = {.v = {.gamma = 3}};
        sd_ngram_reset(r->store);
        for (int k = 0; seed >= 0 && k < 3; k++)
            cr_assert_eq(sd_ngram_observe(r->store, prompt, NP, seed, &e), 0, "%s", e.msg);
        got = sd_ngram_assisted_generate(prompt, NP, r->store, &r->target, &o, n, cfg, out, st,
                                         &e);
    }
    cr_assert_eq(got, n, "%s: %s", strategy_names[strategy], e.msg);
}

typedef struct greedy_case {
    const char *spec;
    const char *kv[3];
    int n_kv;
} greedy_case;

Test(lossless, greedy_chains_equal_autoregressive) {
    static const greedy_case cases[] = {
        {"dry,greedy", {"multiplier=3", "base=3", "allowed_length=1"}, 3},
        {"xtc,greedy", {"threshold=0.05", "probability=0.9"}, 2},
    };
    rig r = open_rig();
    sd_sampler *plain = chain(&r, "greedy", NULL, 0, SD_ROLE_TARGET);
    int32_t base[GEN];
    sd_gen_stats st;
    sd_gen_cfg pc = {.sampler = plain, .pad_id = -1, .use_cache = 1};
    generate(&r, AR, -1, &pc, GEN, base, &st);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const greedy_case *k = &cases[c];
        sd_sampler *tp = chain(&r, k->spec, k->kv, k->n_kv, SD_ROLE_TARGET);
        sd_sampler *dp = chain(&r, k->spec, k->kv, k->n_kv, SD_ROLE_DRAFTER);
        for (int cache = 0; cache < 2; cache++) {
            sd_rng rng;
            sd_rng_seed(&rng, 9);
            sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                              .use_cache = cache};
            int32_t want[GEN], got[GEN];
            generate(&r, AR, -1, &cfg, GEN, want, &st);
            cr_assert(memcmp(want, base, sizeof want), "%s changed nothing", k->spec);
            for (int s = SPEC; s <= NASD; s++) {
                generate(&r, s, -1, &cfg, GEN, got, &st);
                cr_assert_arr_eq(got, want, sizeof want, "%s, cache %d: %s differs from ar",
                                 k->spec, cache, strategy_names[s]);
                cr_assert(s == NASD || st.accepted < st.drafted, "%s: no draft rejected",
                          k->spec);
                cr_log_info("%s, cache %d, %s: accepted %ld of %ld drafts", k->spec, cache,
                            strategy_names[s], st.accepted, st.drafted);
            }
        }
        sd_sampler_destroy(tp);
        sd_sampler_destroy(dp);
    }
    sd_sampler_destroy(plain);
    close_rig(&r);
}

/* Chi-square of count (runs draws) against law, cells expecting fewer
 * than 5 draws pooled; asserts it stays below the 0.999 quantile (Wilson-
 * Hilferty approximation). */
static void chi_square(const char *what, const long *count, const double *law, int V, int runs) {
    double chi = 0, pooled_o = 0, pooled_e = 0;
    int cells = 0;
    for (int i = 0; i < V; i++) {
        double ex = law[i] * runs;
        if (ex < 5) {
            pooled_o += (double)count[i];
            pooled_e += ex;
        } else {
            chi += (count[i] - ex) * (count[i] - ex) / ex;
            cells++;
        }
    }
    if (pooled_e >= 5) {
        chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        cells++;
    } else {
        cr_assert(pooled_o <= pooled_e + 10, "%s: %g draws on near-impossible tokens", what,
                  pooled_o);
    }
    cr_assert_geq(cells, 5, "%s: too few cells (%d)", what, cells);
    int dof = cells - 1;
    double h = 2.0 / (9.0 * dof), limit = dof * pow(1 - h + 3.09 * sqrt(h), 3);
    cr_assert(chi < limit, "%s: chi2 %.1f over %d cells (limit %.1f)", what, chi, cells, limit);
    cr_log_info("%s: chi2 %.1f over %d cells (limit %.1f)", what, chi, cells, limit);
}

/* law[t2] = sum over t1 of P(t1) P(t2 | t1) under the target chain tp;
 * *best = the most likely first token. */
static void second_token_law(rig *r, sd_sampler *tp, double *law, int32_t *best) {
    int V = r->m->hp.vocab;
    float *rows = malloc(2 * (size_t)V * sizeof *rows), *p1 = malloc((size_t)V * sizeof *p1),
          *p2 = malloc((size_t)V * sizeof *p2);
    cr_assert(rows && p1 && p2);
    int32_t seq[NP + 1];
    memcpy(seq, prompt, sizeof prompt);
    sd_err e = {""};
    cr_assert_eq(sd_forward_ex(r->m, r->m->kv, prompt, NP, 0, 0, rows, 1, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_reset(tp, prompt, NP, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(tp, seq, NP, rows, NP, p1, V, &e), 0, "%s", e.msg);
    memset(law, 0, (size_t)V * sizeof *law);
    *best = 0;
    for (int t1 = 0; t1 < V; t1++) {
        *best = p1[t1] > p1[*best] ? t1 : *best;
        if (!(p1[t1] > 0))
            continue;
        seq[NP] = t1;
        cr_assert_eq(sd_forward_ex(r->m, r->m->kv, seq, NP + 1, 0, 0, rows + V, 1, &e), 0, "%s",
                     e.msg);
        cr_assert_eq(sd_sampler_dist(tp, seq, NP + 1, rows, NP, p2, V, &e), 0, "%s", e.msg);
        for (int t2 = 0; t2 < V; t2++)
            law[t2] += (double)p1[t1] * p2[t2];
    }
    free(rows);
    free(p1);
    free(p2);
}

static void check_law(const char *spec, const char *const *kv, int n_kv, int strategy) {
    rig r = open_rig();
    int V = r.m->hp.vocab;
    sd_sampler *tp = chain(&r, spec, kv, n_kv, SD_ROLE_TARGET);
    sd_sampler *dp = chain(&r, spec, kv, n_kv, SD_ROLE_DRAFTER);
    double *law = malloc((size_t)V * sizeof *law);
    long *count = calloc((size_t)V, sizeof *count), drafted = 0, accepted = 0;
    cr_assert(law && count);
    int32_t best;
    second_token_law(&r, tp, law, &best);
    for (int i = 0; i < RUNS; i++) {
        sd_rng rng;
        sd_rng_seed(&rng, 7000 + (uint64_t)i);
        sd_gen_cfg cfg = {.sampler = tp, .draft_sampler = dp, .rng = &rng, .pad_id = -1,
                          .use_cache = 1};
        sd_gen_stats st;
        int32_t out[3];
        generate(&r, strategy, best, &cfg, 3, out, &st);
        count[out[1]]++;
        drafted += st.drafted;
        accepted += st.accepted;
    }
    char what[128];
    snprintf(what, sizeof what, "%s (%s, acceptance %.2f)", spec, strategy_names[strategy],
             drafted ? (double)accepted / (double)drafted : 0.0);
    cr_assert(accepted < drafted, "%s: the test needs rejected drafts", what);
    chi_square(what, count, law, V, RUNS);
    free(law);
    free(count);
    sd_sampler_destroy(tp);
    sd_sampler_destroy(dp);
    close_rig(&r);
}

static const char *const dry_args[] = {"multiplier=3", "base=3", "allowed_length=1",
                                       "temperature=1.3"};
/* the temperature stage flattens the law so that XTC's threshold leaves
 * several top choices; multinomial draws at temperature 1, as XTC's
 * mixture needs */
static const char *const xtc_args[] = {"temperature.temperature=2", "threshold=0.05",
                                       "probability=0.5"};

Test(lossless, speculative_keeps_the_dry_law) {
    check_law("dry,multinomial", dry_args, 4, SPEC);
}

Test(lossless, nasd_keeps_the_dry_law) {
    check_law("dry,multinomial", dry_args, 4, NASD);
}

Test(lossless, speculative_keeps_the_xtc_law) {
    check_law("temperature,xtc,multinomial", xtc_args, 3, SPEC);
}

Test(lossless, nasd_keeps_the_xtc_law) {
    check_law("temperature,xtc,multinomial", xtc_args, 3, NASD);
}
