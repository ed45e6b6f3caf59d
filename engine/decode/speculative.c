/* Speculative decoding with a draft model (Leviathan et al., Chen et al.),
 * following the contract of the PyTorch original (romsto/Speculative-Decoding).
 *
 * The rounds, their sequence layout and the cache invariants are
 * engine/decode/verify.c's: seq[0..cur) is final; at the start of a round
 * the target holds at most cur-1 positions (seq[cur-1] is fed with the
 * drafts) and the drafter at most cur; a rejection truncates both back to
 * the last accepted position. This file supplies the drafter: greedy drafts
 * (nothing before the argmax) take the drafter's argmax on its backend (one
 * id copied per draft); otherwise the drafter's own sampler instance draws
 * from its distribution q. Its history catches up with the round's outcome
 * on the next draft: a token it has not seen (the target's correction or
 * bonus) needs the drafter's row of that position, so that draft asks the
 * drafter for two rows instead of one.
 *
 * With p_min set, a draft the drafter gave a probability below p_min is
 * the round's last; with adaptive rounds (stop_below) that probability is
 * the draft's confidence. Sampled drafts read it from q; greedy drafts have
 * the backend compute it next to the argmax (top_k_rows' probabilities), so
 * one float crosses with the id instead of the logits row.
 *
 * The hybrid drafter's rounds. The store learns every final token, and
 * before it does, says whether it would have predicted it: the tokens it
 * predicted in a row are its streak, how long its match has held. A round
 * drafts from the store when the streak reaches STORE_TRUST and the store
 * knows the context, up to sd_store_run(streak) drafts (gamma right after
 * a miss: whether the copy goes on is open), and ends where the store
 * stops knowing (the target's token at that position costs nothing
 * more), so the draft model is never fed unverified store drafts to draft
 * behind them; two misses in a row break the copy until the store
 * predicts a final token again; any other round drafts from the model.
 * A store that merely knows a context (common words in fresh code) thus
 * never displaces the model, while a copied span (an edit) runs long store
 * rounds. A miss halves the streak, and the store sees the output through
 * the renames it learnt (renames.h), so a copy with a changed name keeps
 * its rounds. The
 * draft model feeds the tokens it has not seen (accepted store drafts, the
 * rounds' last tokens) only when it is next asked to draft, in one call of
 * that many rows: a copy run of many rounds costs it one catch-up, and a
 * catch-up that costs more than the rounds without it lose is put off
 * (plan_round). */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/decode/renames.h"

/* Rows of drafter logits one draft may need (see above). */
#define DRAFT_ROWS 2
/* Final tokens the store must have predicted in a row before it drafts. */
#define STORE_TRUST 2
/* The hybrid store's order: contexts of up to STORE_N - 1 tokens, the
 * longest known one predicting (a copy of code repeats short contexts with
 * different continuations: `order["customer"]`, `order["amount"]`). */
#define STORE_N 8
/* A miss divides the streak by this: one changed token in a long copy
 * leaves the store trusted, while fresh text's short streaks end. */
#define STREAK_KEEP 2
/* Final tokens the store missed in a row that break a copy: after one
 * (a changed span) the store still drafts where the copy goes on; after
 * this many (an inserted or rewritten line) it leaves the rounds to the
 * model until it predicts a final token again. */
#define COPY_BROKEN 2
/* A catch-up costing at most this many one-row target steps is always
 * made (the rounds after a model round or a short store run). */
#define CHEAP_CATCHUP 3
/* Per final token, the weight the share of fresh tokens (ones the store
 * did not predict) keeps of its past. */
#define FRESH_DECAY 0.9
/* Rounds that leave the model out and have no streak draft this many
 * store guesses at most, from contexts of GUESS_CTX tokens or more. */
#define GUESS_RUN 2
#define GUESS_CTX 1

typedef struct spec_ctx {
    sd_lm *drafter;
    const sd_gen_cfg *cfg;
    sd_sampler *smp; /* the drafter's instance */
    float *dlog;     /* [DRAFT_ROWS][vocab], sampled drafts */
    double p_min;
    int want_p; /* greedy drafts: the backend also returns the draft's probability */
    sd_ngram *store; /* hybrid drafting; NULL: the model alone */
    int gamma;       /* model drafts a round at most */
    int round;       /* position of the round's first draft */
    int n_model;     /* the round's model drafts */
    int n_store;     /* the round's store drafts */
    int store_run;   /* store drafts this round at most */
    int streak;      /* final tokens the store predicted in a row */
    int missed;      /* final tokens the store missed in a row */
    int min_ctx;     /* the shortest context the store drafts from */
    sd_renames renames; /* the store's view of the output's renamed spans */
    int prompt;         /* the prompt's tokens: renames are learnt after them */
    const sd_cost_calib *cal; /* prices the drafter's catch-up; NULL: run_costs or none */
    int run_costs;            /* without cal: price it from the run's own timings */
    sd_cost_calib own;        /* those prices (run_costs) */
    double share;             /* the drafter's weight bytes over the target's */
    int defer;                /* this round leaves the draft model out */
    double owed;              /* what the deferred rounds lost, in seconds */
    int seen;                 /* the drafter's cache length at the last round's start */
    double fresh;             /* recent share of final tokens the store did not predict */
} spec_ctx;

/* Whether the store's rounds draft from it: its streak is long enough
 * and the copy is not broken. */
static int store_trusted(const spec_ctx *s) {
    return s->streak >= STORE_TRUST && s->missed < COPY_BROKEN;
}

/* The store's continuation of seq[0..at) from the longest known context
 * of at least min_ctx tokens, through the renames learnt: 1 and *x, else 0. */
static int store_predict(const spec_ctx *s, const int32_t *seq, int at, int32_t *x) {
    return sd_renames_predict(&s->renames, s->store, seq, at, s->min_ctx, x);
}

/* The same for a round's draft: a round without the model and without a
 * streak guesses from shorter contexts too. */
static int store_guess(const spec_ctx *s, const int32_t *seq, int at, int32_t *x) {
    const int guess = s->defer && !store_trusted(s);
    return sd_renames_predict(&s->renames, s->store, seq, at, guess ? GUESS_CTX : s->min_ctx, x);
}

/* A hybrid drafter's store draft at seq[at]: 1 when the store knows the
 * context (q, when asked for, one-hot at the draft), else 0. */
static int store_draft(spec_ctx *s, int32_t *seq, int at, float *q, sd_gen_stats *st) {
    const double t = sd_now();
    int32_t x;
    const int known = store_guess(s, seq, at, &x);
    st->draft_s += sd_now() - t;
    if (!known) return 0;
    seq[at] = x;
    if (q) {
        memset(q, 0, (size_t)s->drafter->m->hp.vocab * sizeof *q);
        q[seq[at]] = 1;
    }
    st->drafted_ngram++;
    s->n_store++;
    return 1;
}

/* Counts a drafter call that fed `fed` positions (after the target's first
 * call) and books its seconds as drafting or, when it fed more than the
 * one position it drafts from, as catch-up. */
static void count_call(int fed, double dt, sd_gen_stats *st) {
    if (fed > 1) st->catchup_s += dt;
    else st->draft_s += dt;
    st->draft_calls++;
    if (!st->target_calls) return;
    const int w = fed < SD_COST_ROWS - 1 ? fed : SD_COST_ROWS - 1;
    st->draft_calls_n[w]++;
    if (w == SD_COST_ROWS - 1) st->draft_wide_rows += fed;
}

static int spec_draft(void *ud, int32_t *seq, int at, float *q, float *conf, sd_gen_stats *st,
                      sd_err *e) {
    spec_ctx *s = ud;
    const sd_gen_cfg *cfg = s->cfg;
    int vocab = s->drafter->m->hp.vocab;
    float p = 1;
    if (s->store && (at == s->round || s->n_store) && (store_trusted(s) || s->defer) &&
        s->n_store < s->store_run && store_draft(s, seq, at, q, st)) {
        *conf = SD_CONF_NONE;
        return s->n_store == s->store_run ? 2 : 1;
    }
    if (s->n_store || s->n_model >= s->gamma || s->defer) return 0;
    /* the positions the call feeds (sd_lm_extend: from the cache's end, and
     * at least the rows it returns) */
    int fed = cfg->use_cache ? at - s->drafter->kv->n : at;
    const double t = sd_now();
    if (!q) {
        if (sd_lm_extend_top_k(s->drafter, seq, at, cfg->use_cache, 1, 1, &seq[at],
                               s->want_p ? &p : NULL, st, e))
            return -1;
    } else {
        int first = sd_token_need(s->smp, seq, at, e);
        if (first < 0) return -1;
        if (fed < at - first + 1) fed = at - first + 1;
        if (at - first + 1 > DRAFT_ROWS)
            return sd_fail(e, "speculative: the drafter's sampler is %d tokens behind", at - first);
        if (sd_lm_extend(s->drafter, seq, at, cfg->use_cache, s->dlog, at - first + 1, st, e) ||
            sd_token_dist(s->smp, seq, at, s->dlog, first, q, vocab, e) ||
            sd_dist_sample(cfg, s->smp, q, vocab, &seq[at], e))
            return -1;
        p = q[seq[at]];
    }
    count_call(fed > 1 ? fed : 1, sd_now() - t, st);
    *conf = p;
    return p < s->p_min || ++s->n_model == s->gamma ? 2 : 1;
}

/* The store learns seq[from..to), each token after checking whether it
 * would have predicted it (the streak), and sets the next round's bound.
 * A miss after a trusted streak (a copy that changed) may be a rename. */
static int learn(spec_ctx *s, const int32_t *seq, int from, int to, sd_err *e) {
    for (int i = from; i < to; i++) {
        int32_t x;
        const int known = store_predict(s, seq, i, &x), hit = known && x == seq[i];
        if (i >= s->prompt)
            sd_renames_learn(&s->renames, s->store, seq, i, s->min_ctx,
                             known && s->streak >= STORE_TRUST, x);
        s->streak = hit ? s->streak + 1 : s->streak / STREAK_KEEP;
        s->missed = hit ? 0 : s->missed + 1;
        if (i >= s->prompt) s->fresh = FRESH_DECAY * s->fresh + (1 - FRESH_DECAY) * !hit;
        if (sd_ngram_observe(s->store, seq, i, seq[i], e)) return -1;
    }
    s->store_run = s->missed ? s->gamma : sd_store_run(s->streak, s->gamma);
    return 0;
}

/* The weight bytes a call of lm reads: its layers and its head's rows. */
static double lm_bytes(const sd_lm *lm) {
    const sd_model *m = lm->m;
    const double head = (double)m->output.row_bytes * m->output.rows;
    const double layers = (double)sd_model_weight_bytes(m) - head;
    const int n = lm->n_layers > 0 && lm->n_layers < m->hp.n_layers ? lm->n_layers : m->hp.n_layers;
    return layers * n / m->hp.n_layers +
           (double)m->output.row_bytes * sd_head_rows(m, lm->vocab_limit);
}

/* Prices for plan_round when the session has no calibration (a run not
 * preceded by an autoregressive one), from what the run has timed so far:
 * the target's one-row step and the price of a row more from the means of
 * the two narrowest verification widths it called (one width: rows more
 * cost nothing; none yet: a row of the prompt's call, a lower bound); the
 * drafter at the target's prices times its share of the weight bytes (a
 * step reads every weight once), its prompt call at the target's times
 * that share (prefill is compute-bound, in proportion to the weights
 * too), a catch-up between the two on their line (sd_cost_draft_call). A guess where a calibration measures, but the choice it
 * serves only needs the catch-up's size against a step: a long prompt's
 * catch-up costs many steps either way. */
static const sd_cost_calib *run_costs(spec_ctx *s, const sd_gen_stats *st) {
    if (!(st->prefill_s > 0)) return NULL;
    const double row = st->prefill_s / s->prompt;
    int w[2], k = 0;
    for (int n = 1; n < SD_COST_ROWS - 1 && k < 2; n++)
        if (st->verify_calls_n[n] > 0) w[k++] = n;
    double one = row, more = 0;
    if (k) {
        const double a = st->verify_s_n[w[0]] / st->verify_calls_n[w[0]];
        if (k == 2) {
            const double b = st->verify_s_n[w[1]] / st->verify_calls_n[w[1]];
            more = b > a ? (b - a) / (w[1] - w[0]) : 0;
        }
        one = a - more * (w[0] - 1) > row ? a - more * (w[0] - 1) : row;
    }
    sd_cost_calib *c = &s->own;
    memset(c, 0, sizeof *c);
    c->verify_s[1] = one;
    c->verify_s[2] = one + more;
    c->draft_s[1] = one * s->share;
    c->ctx = s->prompt;
    c->draft_fill_s = st->prefill_s * s->share;
    return c;
}

/* Whether the round at cur leaves the draft model out. The drafter feeds
 * what it has not seen when it next drafts; when that call would cost more
 * than CHEAP_CATCHUP target steps (a long prompt, a long copy), it is put
 * off (ski rental): the rounds go on from the target and the store (store
 * guesses need no streak then) until the rounds put off since the drafter
 * last caught up have lost as much as the call costs, each about what a
 * model round of one accepted draft saves (a target step less the draft
 * and the wider verification), and the tokens left, at the recent share
 * of fresh ones, would gain as much again. An edit's copy then never pays
 * for a long prompt's catch-up; fresh text pays for it after at most about
 * twice its cost. Priced with the session's calibration (sd_gen_cfg.costs)
 * or, asked for without one, the run's own timings (run_costs); else the
 * drafter always catches up. */
static void plan_round(spec_ctx *s, int cur, int total, const sd_gen_stats *st) {
    s->defer = 0;
    const sd_cost_calib *c = s->cal ? s->cal : s->run_costs ? run_costs(s, st) : NULL;
    if (!s->store || !c || !(c->verify_s[2] > 0 && c->draft_s[1] > 0)) return;
    if (s->drafter->kv->n != s->seen) s->owed = 0; /* it caught up since */
    s->seen = s->drafter->kv->n;
    const double call = sd_cost_draft_call(c, cur - s->seen) - c->draft_s[1];
    const double wider = c->verify_s[2] > c->verify_s[1] ? c->verify_s[2] - c->verify_s[1] : 0;
    const double gain = c->verify_s[1] - c->draft_s[1] - wider;
    const double ahead = s->fresh * (total - cur) * gain;
    if (call <= c->verify_s[1] * CHEAP_CATCHUP || (s->owed >= call && ahead >= call)) return;
    if (!store_trusted(s) && gain > 0) s->owed += gain;
    s->defer = 1;
    if (!store_trusted(s)) s->store_run = GUESS_RUN;
}

int sd_speculative_generate(const int32_t *inputs, int n_inputs, sd_lm *drafter, sd_lm *target,
                            const sd_spec_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                            int32_t *out, sd_gen_stats *st, sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    int gamma = o->v.gamma, vocab = target->m->hp.vocab;
    if (gamma < 1) return sd_fail(e, "speculative: gamma %d must be at least 1", gamma);
    if (!(o->v.stop_below >= 0 && o->v.stop_below <= 1))
        return sd_fail(e, "speculative: stop_below %g is outside [0, 1]", o->v.stop_below);
    if (!(o->p_min >= 0 && o->p_min <= 1))
        return sd_fail(e, "speculative: p_min %g is outside [0, 1]", o->p_min);
    if (o->ngram_n && (o->ngram_n < 2 || o->ngram_n > SD_NGRAM_MAX_N))
        return sd_fail(e, "speculative: ngram_n %d is outside [2, %d] (0: no n-gram drafts)",
                       o->ngram_n, SD_NGRAM_MAX_N);
    if (n_inputs < 1) return sd_fail(e, "speculative: empty prompt");
    if (max_gen_len < 0) return sd_fail(e, "speculative: max_gen_len %d < 0", max_gen_len);
    if (drafter->m->hp.vocab != vocab)
        return sd_fail(e, "speculative: drafter vocabulary %d differs from the target's %d",
                       drafter->m->hp.vocab, vocab);
    int limit = target->kv->n_ctx < drafter->kv->n_ctx ? target->kv->n_ctx : drafter->kv->n_ctx;
    int total = sd_gen_total(n_inputs, max_gen_len, limit, st, e);
    if (total < 0) return -1;
    spec_ctx sc = {.drafter = drafter, .cfg = cfg, .p_min = o->p_min,
                   .want_p = o->p_min > 0 || o->v.stop_below > 0, .gamma = gamma,
                   .store_run = gamma, .min_ctx = o->ngram_n - 1, .prompt = n_inputs,
                   .cal = cfg->costs, .run_costs = cfg->run_costs, .fresh = 1};
    sc.share = lm_bytes(drafter) / lm_bytes(target);
    sd_renames_init(&sc.renames);
    if (sd_drafter_sampler(cfg, &sc.smp, e)) return -1;
    const int sampled = !sd_fast_greedy(cfg);
    if (o->ngram_n && !(sampled && sc.smp && sd_sampler_keeps_history(sc.smp)) &&
        !(sc.store = sd_ngram_create(SD_NGRAM_MULTI, o->ngram_n > STORE_N ? o->ngram_n : STORE_N,
                                     total, e)))
        return -1;
    sd_verify v = {.target = target, .drafter = drafter, .o = &o->v, .top_k = 1,
                   .cap = sc.store && gamma < SD_STORE_RUN_MAX ? SD_STORE_RUN_MAX : gamma,
                   .draft = spec_draft, .ud = &sc};
    int32_t *seq = malloc(((size_t)total + 1) * sizeof *seq);
    int rc = -1, count = 0, cur = n_inputs, r = 0;
    if (sampled) sc.dlog = malloc(DRAFT_ROWS * (size_t)vocab * sizeof *sc.dlog);
    if (sd_verify_init(&v, cfg, e)) goto done;
    if (!seq || (sampled && !sc.dlog)) {
        sd_fail(e, "out of memory");
        goto done;
    }
    memcpy(seq, inputs, (size_t)n_inputs * sizeof *seq);
    if (sd_reset_samplers(cfg, inputs, n_inputs, e)) goto done;
    target->kv->n = drafter->kv->n = 0; /* a fresh sequence: nothing cached is ours */
    v.t0 = sd_now();
    if (sc.store && learn(&sc, seq, 0, n_inputs, e)) goto done;
    for (int first = o->v.first_target; r == 0 && cur < total; first = 0) {
        const int room = total - cur - 1 < v.cap ? total - cur - 1 : v.cap, from = cur;
        sc.round = cur;
        sc.n_store = sc.n_model = 0;
        if (!first) plan_round(&sc, cur, total, st);
        r = sd_verify_round(&v, cfg, seq, &cur, first ? 0 : room, !first, out, &count, st, e);
        if (r >= 0 && sc.store && learn(&sc, seq, from, cur, e)) r = -1;
    }
    if (r >= 0) rc = sd_gen_finish(cfg, st, v.t0, out, count, max_gen_len);
done:
    sd_verify_free(&v);
    sd_ngram_free(sc.store);
    free(sc.dlog);
    free(seq);
    return rc;
}
