/* Sampler chains and the version-2 stages, through the engine's loader
 * (plugins/ and plugins/example, built by `make`):
 *   - chain syntax and argument routing, with the messages naming the
 *     stage, the parameter and the value;
 *   - what a chain computes: a sampling stage before the last one filters,
 *     logits stages feed the next stage, penalty and temperature by hand;
 *   - history: rollback and reset reproduce outputs bit for bit, instances
 *     do not share state, a sequence that is not the prompt's is refused;
 *   - version-1 plugins as stages. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling/sampler_host.h"

#define V 16

static sd_sampler_set *open_dirs(const char *a, const char *b) {
    const char *dirs[2] = {a, b};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open(dirs, b ? 2 : 1, &e);
    cr_assert(s, "open: %s", e.msg);
    return s;
}

static sd_sampler *make(const sd_sampler_set *s, const char *spec, const char *const *kv,
                        int n_kv) {
    sd_err e = {""};
    sd_sampler *p = sd_sampler_create(s, spec, kv, n_kv, V, &e);
    cr_assert(p, "%s: %s", spec, e.msg);
    return p;
}

static void row(float *x, uint64_t seed) {
    sd_rng r;
    sd_rng_seed(&r, seed);
    for (int i = 0; i < V; i++)
        x[i] = (float)(4.0 * sd_rng_uniform(&r) - 2.0);
}

typedef struct bad_chain {
    const char *spec;
    const char *kv[2];
    int n_kv, bad; /* the index sd_sampler_check reports */
    const char *msg;
} bad_chain;

Test(chains, errors_name_the_stage_parameter_and_value) {
    static const bad_chain cases[] = {
        {"penalty", {NULL}, 0, -1, "sampler chain 'penalty': its last stage 'penalty' is a "
                                   "logits stage; end the chain with a sampling stage"},
        {"top_k,,nucleus", {NULL}, 0, -1, "sampler chain 'top_k,,nucleus': stage 2 is empty"},
        {"top_k,", {NULL}, 0, -1, "stage 2 is empty"},
        {"top_k,topk", {NULL}, 0, -1, "stage 'top_k' appears twice"},
        {"penalty,bogus", {NULL}, 0, -1, "unknown sampler 'bogus' (available: "},
        {"a,b,c,d,e,f,g,h,i", {NULL}, 0, -1, "more than 8 stages"},
        {"penalty,top_k", {"top_k=3", "nucleus.top_p=0.5"}, 2, 1,
         "sampler argument 'nucleus.top_p=0.5': no stage 'nucleus' in the chain (stages: "
         "penalty, top_k)"},
        {"top_k,nucleus", {"top_p=2"}, 1, 0, "nucleus: top_p = 2 is out of range (0, 1]"},
        {"penalty,top_k", {"penalty.repeat=abc"}, 1, 0,
         "penalty: repeat = 'abc' is not a number"},
        {"penalty,greedy", {"window=0"}, 1, 0, "penalty: window = 0 is out of range [1, "},
        {"penalty,greedy", {"top_k.k=40"}, 1, 0, "no stage 'top_k' in the chain"},
        {"top_k,top_k_nucleus,greedy", {"top_k=5"}, 1, 0,
         "sampler argument 'top_k=5': stages top_k and top_k_nucleus both have 'top_k'; write "
         "top_k.top_k=... or top_k_nucleus.top_k=..."},
        {"penalty,mirostat", {"penalty.tau=3"}, 1, 0,
         "penalty: unknown parameter 'tau' (accepted: repeat, frequency, presence, window)"},
    };
    sd_sampler_set *s = open_dirs("plugins", NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_chain *c = &cases[i];
        sd_err e = {""};
        int bad = -2;
        cr_assert_eq(sd_sampler_check(s, c->spec, c->kv, c->n_kv, &bad, &e), -1, "%s", c->spec);
        cr_assert(strstr(e.msg, c->msg), "%s: '%s' lacks '%s'", c->spec, e.msg, c->msg);
        cr_assert_eq(bad, c->bad, "%s: bad index %d", c->spec, bad);
        cr_assert_null(sd_sampler_create(s, c->spec, c->kv, c->n_kv, V, &e), "%s", c->spec);
        cr_assert(strstr(e.msg, c->msg), "%s: create said '%s'", c->spec, e.msg);
    }
    sd_samplers_close(s);
}

/* key=value goes to the last stage that has the key, else to the one stage
 * that has it; stage.key=value to that stage. */
Test(chains, arguments_are_routed_to_stages) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    const char *kv[] = {"temperature=0.5", "top_k.temperature=2", "repeat=1.3", "top_k=7"};
    sd_sampler *p = make(s, "penalty,topk,nucleus", kv, 4);
    char d[512];
    sd_sampler_describe(p, d, sizeof d);
    cr_assert_str_eq(d, "penalty(repeat=1.3, frequency=0, presence=0, window=64),"
                        "top_k(temperature=2, top_k=7),nucleus(temperature=0.5, top_p=0.9)");
    cr_assert_eq(sd_sampler_n_stages(p), 3);
    cr_assert(sd_sampler_keeps_history(p));
    cr_assert_not(sd_sampler_is_greedy(p));
    cr_assert_str_eq(sd_sampler_name(p), "nucleus");
    sd_sampler_destroy(p);
    p = make(s, "min_p,greedy", NULL, 0);
    cr_assert(sd_sampler_is_greedy(p));
    cr_assert_not(sd_sampler_keeps_history(p));
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

/* A sampling stage before the last keeps its support: top_k,multinomial is
 * softmax over the top k; logits stages feed the next: temperature then
 * multinomial equals multinomial at that temperature. */
Test(chains, stages_compose) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    float x[V], got[V], want[V], masked[V];
    row(x, 3);
    const char *k4[] = {"top_k=4", "temperature=1"};
    sd_sampler *chain = make(s, "top_k,multinomial", k4 + 0, 1);
    sd_sampler *topk = make(s, "top_k", k4, 2);
    sd_err e;
    cr_assert_eq(sd_sampler_probs(chain, x, got, 1, V, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_probs(topk, x, want, 1, V, &e), 0, "%s", e.msg);
    for (int i = 0; i < V; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6, "token %d", i);
    sd_sampler_destroy(chain);
    /* top_k as a filter before nucleus: nucleus over the masked row */
    chain = make(s, "top_k,nucleus", (const char *[]){"top_k=6", "top_p=0.8"}, 2);
    sd_sampler *nuc = make(s, "nucleus", (const char *[]){"top_p=0.8"}, 1);
    cr_assert_eq(sd_sampler_probs(topk, x, want, 1, V, &e), 0);
    sd_sampler_destroy(topk);
    topk = make(s, "top_k", (const char *[]){"top_k=6"}, 1);
    cr_assert_eq(sd_sampler_probs(topk, x, want, 1, V, &e), 0);
    for (int i = 0; i < V; i++)
        masked[i] = want[i] > 0 ? x[i] : -INFINITY;
    cr_assert_eq(sd_sampler_probs(nuc, masked, want, 1, V, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_probs(chain, x, got, 1, V, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(got, want, sizeof got);
    sd_sampler_destroy(chain);
    sd_sampler_destroy(nuc);
    sd_sampler_destroy(topk);
    chain = make(s, "temperature,multinomial", (const char *[]){"temperature.temperature=0.5"}, 1);
    sd_sampler *mult = make(s, "multinomial", (const char *[]){"temperature=0.5"}, 1);
    cr_assert_eq(sd_sampler_probs(chain, x, got, 1, V, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_probs(mult, x, want, 1, V, &e), 0, "%s", e.msg);
    for (int i = 0; i < V; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6, "token %d", i);
    sd_sampler_destroy(chain);
    sd_sampler_destroy(mult);
    sd_samplers_close(s);
}

/* penalty by hand: prompt {3, 3, 5}, repeat 2, frequency 0.5, presence
 * 0.25, window 2 (so only {3, 5} of the last two tokens count once each). */
Test(chains, penalty_by_hand) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    const char *kv[] = {"repeat=2", "frequency=0.5", "presence=0.25", "window=2"};
    sd_sampler *p = make(s, "penalty,multinomial", kv, 4);
    float x[V], got[V], want[V];
    row(x, 5);
    x[3] = 1.5f;
    x[5] = -1.0f;
    static const int32_t prompt[] = {3, 3, 5};
    sd_err e;
    cr_assert_eq(sd_sampler_reset(p, prompt, 3, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, prompt, 3, x, 3, got, V, &e), 0, "%s", e.msg);
    float y[V];
    memcpy(y, x, sizeof y);
    y[3] = 1.5f / 2 - 0.5f - 0.25f;
    y[5] = -1.0f * 2 - 0.5f - 0.25f;
    double z = 0;
    for (int i = 0; i < V; i++)
        z += exp(y[i]);
    for (int i = 0; i < V; i++)
        want[i] = (float)(exp(y[i]) / z);
    for (int i = 0; i < V; i++)
        cr_assert_float_eq(got[i], want[i], 1e-6, "token %d", i);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

/* Rollback and reset reproduce outputs bit for bit; two instances of one
 * chain keep separate histories; a sequence that does not start with the
 * prompt of the last reset is refused. */
Test(chains, history_rollback_reset_and_instances) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    const char *kv[] = {"repeat=1.7", "tau=3", "eta=0.5"};
    sd_sampler *a = make(s, "penalty,mirostat", kv, 3), *b = make(s, "penalty,mirostat", kv, 3);
    float rows[4 * V], p0[V], p1[V], p2[V], q[V];
    for (int r = 0; r < 4; r++)
        row(rows + r * V, 10 + (uint64_t)r);
    int32_t seq[8] = {1, 2, 0, 0, 0};
    sd_err e;
    for (int k = 0; k < 2; k++)
        cr_assert_eq(sd_sampler_reset(k ? b : a, seq, 2, &e), 0, "%s", e.msg);
    /* a: row at 2, then 3 after token 7, then 4 after token 9 */
    cr_assert_eq(sd_sampler_dist(a, seq, 2, rows, 2, p0, V, &e), 0, "%s", e.msg);
    seq[2] = 7;
    cr_assert_eq(sd_sampler_dist(a, seq, 3, rows, 2, p1, V, &e), 0, "%s", e.msg);
    seq[3] = 9;
    cr_assert_eq(sd_sampler_dist(a, seq, 4, rows, 2, p2, V, &e), 0, "%s", e.msg);
    cr_assert(memcmp(p0, p1, sizeof p0), "the history changed nothing");
    /* b is still at the prompt */
    cr_assert_eq(sd_sampler_dist(b, seq, 2, rows, 2, q, V, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(q, p0, sizeof q);
    /* another token at 3 and back: the first rows are reproduced */
    seq[3] = 4;
    cr_assert_eq(sd_sampler_need(a, seq, 4, &e), 3, "a rollback past 9 needs the row at 3");
    cr_assert_eq(sd_sampler_dist(a, seq, 4, rows, 2, q, V, &e), 0, "%s", e.msg);
    seq[2] = 11;
    cr_assert_eq(sd_sampler_dist(a, seq, 3, rows, 2, q, V, &e), 0, "%s", e.msg);
    seq[2] = 7;
    seq[3] = 9;
    cr_assert_eq(sd_sampler_dist(a, seq, 4, rows, 2, q, V, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(q, p2, sizeof q);
    cr_assert_eq(sd_sampler_dist(a, seq, 3, rows, 2, q, V, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(q, p1, sizeof q);
    /* rows the history needs must be given */
    seq[2] = 12;
    cr_assert_eq(sd_sampler_dist(a, seq, 4, rows + V, 3, q, V, &e), -1);
    cr_assert(strstr(e.msg, "needs the row of position 2, the rows given start at 3"), "%s",
              e.msg);
    /* a new prompt without a reset is refused */
    int32_t other[] = {5, 6, 7};
    cr_assert_eq(sd_sampler_dist(a, other, 2, rows, 2, q, V, &e), -1);
    cr_assert(strstr(e.msg, "differs from the prompt at position 0 (reset the sampler"), "%s",
              e.msg);
    cr_assert_eq(sd_sampler_reset(a, seq, 2, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(a, seq, 2, rows, 2, q, V, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(q, p0, sizeof q);
    sd_sampler_destroy(a);
    sd_sampler_destroy(b);
    sd_samplers_close(s);
}

/* Version-1 plugins are sampling stages: the example's min_p (v1) ends a
 * chain after a v2 penalty, and the built-in top_k (v1) filters. */
Test(chains, version_1_plugins_are_stages) {
    sd_sampler_set *s = open_dirs("plugins/example", "plugins");
    int i = sd_samplers_find(s, "min_p");
    cr_assert_str_eq(sd_samplers_file(s, i), "plugins/example/min_p.so");
    const char *kv[] = {"penalty.repeat=1.5", "min_p.min_p=0.2", "top_k=5"};
    sd_sampler *p = make(s, "penalty,top_k,min_p", kv, 3);
    float x[V], probs[V];
    row(x, 8);
    static const int32_t prompt[] = {0, 1, 2};
    sd_err e;
    cr_assert_eq(sd_sampler_reset(p, prompt, 3, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, prompt, 3, x, 3, probs, V, &e), 0, "%s", e.msg);
    int kept = 0;
    for (int t = 0; t < V; t++)
        kept += probs[t] > 0;
    cr_assert(kept >= 1 && kept <= 5, "kept %d", kept);
    sd_rng r;
    sd_rng_seed(&r, 2);
    int32_t id;
    cr_assert_eq(sd_sampler_sample(p, probs, V, &r, &id, &e), 0, "%s", e.msg);
    cr_assert_gt(probs[id], 0);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

/* The walkthrough's stateful example (plugins/example/no_repeat_ngram.c):
 * after 1 2 3 1, token 2 would repeat the bigram (1, 2); after a rollback
 * with 3 in place of the last 1 (a rollback), token 3 would repeat (3, 3). */
Test(chains, no_repeat_ngram_example) {
    sd_sampler_set *s = open_dirs("plugins/example", "plugins");
    sd_sampler *p = make(s, "no_repeat_ngram,multinomial", (const char *[]){"n=2"}, 1);
    float rows[2 * V] = {0}, probs[V];
    int32_t seq[] = {1, 2, 3, 1};
    sd_err e;
    cr_assert_eq(sd_sampler_reset(p, seq, 3, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 3, rows, 3, probs, V, &e), 0, "%s", e.msg);
    for (int t = 0; t < V; t++)
        cr_assert_gt(probs[t], 0, "token %d banned after 1 2 3", t);
    cr_assert_eq(sd_sampler_dist(p, seq, 4, rows, 3, probs, V, &e), 0, "%s", e.msg);
    for (int t = 0; t < V; t++)
        cr_assert(t == 2 ? probs[t] == 0 : probs[t] > 0, "token %d: %g", t, (double)probs[t]);
    seq[3] = 3;
    cr_assert_eq(sd_sampler_dist(p, seq, 4, rows, 3, probs, V, &e), 0, "%s", e.msg);
    for (int t = 0; t < V; t++)
        cr_assert(t == 3 ? probs[t] == 0 : probs[t] > 0, "token %d: %g", t, (double)probs[t]);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

/* typical against a full sort in double: the kept set is the smallest
 * prefix of the tokens ranked by |-ln p - H| whose mass reaches p. */
typedef struct ref_dev {
    double dev;
    int id;
} ref_dev;

static int by_ref_dev(const void *a, const void *b) {
    const ref_dev *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    return x->id - y->id;
}

Test(chains, typical_matches_a_full_sort) {
    enum { N = 3000 };
    sd_sampler_set *s = open_dirs("plugins", NULL);
    static float x[N], got[N];
    static double p[N];
    static ref_dev r[N];
    const double ps[] = {0.2, 0.5, 0.9, 0.95};
    for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++) {
        char arg[32];
        snprintf(arg, sizeof arg, "p=%g", ps[c]);
        sd_err e;
        sd_sampler *t = sd_sampler_create(s, "typical,multinomial", (const char *[]){arg}, 1, N, &e);
        cr_assert(t, "%s", e.msg);
        sd_rng g;
        sd_rng_seed(&g, 40 + c);
        for (int i = 0; i < N; i++)
            x[i] = (float)(6.0 * sd_rng_uniform(&g));
        cr_assert_eq(sd_sampler_probs(t, x, got, 1, N, &e), 0, "%s", e.msg);
        double z = 0, h = 0;
        for (int i = 0; i < N; i++)
            z += exp(x[i]);
        for (int i = 0; i < N; i++) {
            p[i] = exp(x[i]) / z;
            h -= p[i] * log(p[i]);
        }
        for (int i = 0; i < N; i++)
            r[i] = (ref_dev){fabs(-log(p[i]) - h), i};
        qsort(r, N, sizeof *r, by_ref_dev);
        int want = 0;
        for (double mass = 0; want < N && (want == 0 || mass < ps[c]); want++)
            mass += p[r[want].id];
        int kept = 0;
        for (int i = 0; i < N; i++)
            kept += got[i] > 0;
        /* float logs against double: a token or two at the boundary */
        cr_assert(abs(kept - want) <= 2, "p %g: kept %d, reference %d", ps[c], kept, want);
        for (int k = 0; k < want - 2; k++)
            cr_assert_gt(got[r[k].id], 0, "p %g: rank %d (token %d) dropped", ps[c], k, r[k].id);
        sd_sampler_destroy(t);
    }
    sd_samplers_close(s);
}

/* xtc's distribution is the exact mixture of its two cases: on p = (0.4,
 * 0.3, 0.2, 0.1, 0, ...) with threshold 0.25, the top choices are tokens 0
 * and 1; with probability 1/2 token 0 goes (token 1 is the least likely
 * top choice and stays) and the rest is renormalised over mass 0.6. */
Test(chains, xtc_is_the_exact_mixture) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    const char *kv[] = {"threshold=0.25", "probability=0.5"};
    sd_sampler *p = make(s, "xtc,multinomial", kv, 2);
    float x[V], probs[V];
    const double p0[4] = {0.4, 0.3, 0.2, 0.1};
    for (int i = 0; i < V; i++)
        x[i] = i < 4 ? (float)log(p0[i]) : -INFINITY;
    sd_err e = {""};
    cr_assert_eq(sd_sampler_probs(p, x, probs, 1, V, &e), 0, "%s", e.msg);
    const double want[4] = {0.5 * 0.4, 0.5 * 0.3 + 0.5 * 0.3 / 0.6, 0.5 * 0.2 + 0.5 * 0.2 / 0.6,
                            0.5 * 0.1 + 0.5 * 0.1 / 0.6};
    for (int i = 0; i < 4; i++)
        cr_assert(fabs(probs[i] - want[i]) < 1e-6, "token %d: %g, want %g", i, probs[i],
                  want[i]);
    for (int i = 4; i < V; i++)
        cr_assert_eq(probs[i], 0.0f);
    /* one top choice only: nothing to exclude */
    const char *high[] = {"threshold=0.35"};
    sd_sampler *q = make(s, "xtc,multinomial", high, 1);
    cr_assert_eq(sd_sampler_probs(q, x, probs, 1, V, &e), 0, "%s", e.msg);
    for (int i = 0; i < 4; i++)
        cr_assert(fabs(probs[i] - p0[i]) < 1e-6, "token %d: %g", i, probs[i]);
    sd_sampler_destroy(q);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

static const char *colon_at_2(const void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    *len = 1;
    return id == 2 ? ":" : "a";
}

/* A byte-level BPE vocabulary's newline, U+010A, at token 2. */
static const char *newline_at_2(const void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    *len = 1;
    return id == 2 ? "\n" : "a";
}

/* dry by hand: after 1 2 3 4 1 2 3, token 4 would extend a repetition of
 * length 3, so logit[4] -= 0.8 * 1.75^(3 - 2); nothing else repeats. With
 * token 2 a sequence breaker (its piece holds ':') the match stops after
 * one token, under allowed_length 2: no penalty; the same when token 2 is
 * a newline (the default breakers). A string parameter is
 * passed and described as text. */
Test(chains, dry_by_hand) {
    sd_sampler_set *s = open_dirs("plugins", NULL);
    static const int32_t seq[] = {1, 2, 3, 4, 1, 2, 3};
    float x[V] = {0}, probs[V];
    sd_err e = {""};
    const char *none[] = {"breakers=;"};
    sd_sampler *p = make(s, "dry,multinomial", none, 1);
    char desc[256];
    sd_sampler_describe(p, desc, sizeof desc);
    cr_assert(strstr(desc, "breakers=\";\""), "%s", desc);
    cr_assert_eq(sd_sampler_reset(p, seq, 7, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 7, x, 7, probs, V, &e), 0, "%s", e.msg);
    for (int i = 0; i < V; i++)
        if (i != 4)
            cr_assert(fabs(probs[i] - probs[0]) < 1e-7, "token %d", i);
    cr_assert(fabs(log(probs[4] / probs[0]) + 0.8 * 1.75) < 1e-5, "%g", log(probs[4] / probs[0]));
    sd_sampler_destroy(p);
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = V,
                           .max_history = 64,
                           .role = SD_ROLE_TARGET,
                           .piece = colon_at_2};
    p = sd_sampler_create_for(s, "dry,multinomial", NULL, 0, &info, &e);
    cr_assert(p, "%s", e.msg);
    cr_assert_eq(sd_sampler_reset(p, seq, 7, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 7, x, 7, probs, V, &e), 0, "%s", e.msg);
    cr_assert(fabs(probs[4] - probs[0]) < 1e-7);
    sd_sampler_destroy(p);
    /* the default breaker "\n" */
    info.piece = newline_at_2;
    p = sd_sampler_create_for(s, "dry,multinomial", NULL, 0, &info, &e);
    cr_assert(p, "%s", e.msg);
    cr_assert_eq(sd_sampler_reset(p, seq, 7, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 7, x, 7, probs, V, &e), 0, "%s", e.msg);
    cr_assert(fabs(probs[4] - probs[0]) < 1e-7);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}
