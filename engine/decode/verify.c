/* One verification round of speculative decoding (Leviathan et al., Chen
 * et al.; the contract of the PyTorch original romsto/Speculative-Decoding),
 * shared by the draft-model strategy (speculative.c) and NASD (nasd.c).
 *
 * Sequence layout: seq[0..cur) is final. A round drafts x_1..x_g at
 * cur..cur+g-1, then one target call over [cur-1, cur+g) yields g+1 rows:
 * row i scores x_{i+1}, row g gives the bonus token. Cache invariants at the
 * start of a round: the target holds at most cur-1 positions (exactly cur-1
 * after any round: seq[cur-1] is fed with the drafts), the drafter holds at
 * most cur. sd_lm_extend feeds whatever a cache lacks, and a rejection
 * truncates both caches back to the last accepted position, so no cache
 * ever holds a rejected token.
 *
 * Acceptance: draft x at row i is kept when r < p_i(x)/q_i(x) (r uniform;
 * r = 0 when greedy). A drafter whose q is one-hot at its draft (NASD's
 * n-gram store) has q(x) = 1, so the test is r < p(x). At the first
 * rejection the round ends with a token from norm(max(0, p - q)), which for
 * a one-hot q is p with x removed (p itself when skip_sample_adjustment, or
 * when the difference is empty); when every draft passes, the bonus token
 * comes from row g.
 *
 * Two paths. Greedy with nothing before the argmax: p is one-hot at the
 * target's argmax, so r < p/q holds exactly when the draft equals the
 * argmax, and the residual is that same one-hot row; the g+1 rows stay in
 * backend memory and only their top_k ids cross to the host (k = 1 for
 * speculative decoding, NASD's filler count for its store). Any other
 * chain: the rows come to the host, p and q are full distributions.
 *
 * Sampler history: row i is the distribution after the drafts before it,
 * so the rows are judged one at a time and row i+1 is computed only once
 * draft i is accepted; the sampler's history then never holds a rejected
 * draft, and the round's last token was drawn from the row last computed
 * (sd_sampler_dist then accepts it without recomputing). */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"

int sd_verify_init(sd_verify *v, const sd_gen_cfg *cfg, sd_err *e) {
    if (v->cap < v->o->gamma) v->cap = v->o->gamma;
    size_t V = (size_t)v->target->m->hp.vocab, G = (size_t)v->cap;
    v->vocab = (int)V;
    v->ids = malloc((G + 1) * (size_t)v->top_k * sizeof *v->ids);
    v->conf = malloc(G * sizeof *v->conf);
    v->judged_conf = v->judged_acc = 0;
    if (!v->conf) return sd_fail(e, "out of memory");
    if (!sd_fast_greedy(cfg)) {
        v->q = v->one_hot ? NULL : malloc(G * V * sizeof *v->q);
        v->p = malloc((G + 1) * V * sizeof *v->p);
        v->tlog = malloc((G + 1) * V * sizeof *v->tlog);
        v->resid = malloc(V * sizeof *v->resid);
        if (!v->p || !v->tlog || !v->resid || (!v->one_hot && !v->q))
            return sd_fail(e, "out of memory");
    }
    return v->ids ? 0 : sd_fail(e, "out of memory");
}

void sd_verify_free(sd_verify *v) {
    free(v->ids);
    free(v->conf);
    free(v->q);
    free(v->p);
    free(v->tlog);
    free(v->resid);
}

/* norm(max(0, p - q)) with q a row, or one-hot at x when q is NULL; p when
 * the difference is zero everywhere. */
static const float *residual(const float *p, const float *q, int32_t x, float *out, int vocab) {
    double sum = 0;
    for (int i = 0; i < vocab; i++) {
        float d = p[i] - (q ? q[i] : (float)(i == x));
        out[i] = d > 0 ? d : 0;
        sum += out[i];
    }
    if (!(sum > 0)) return p;
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < vocab; i++) out[i] *= inv;
    return out;
}

/* The adaptive rounds' calibration (sd_verify_opts): accepted drafts over
 * the judged drafts' summed confidence, starting from PRIOR drafts judged
 * as confident as accepted, each round's weight DECAY times the next's. */
#define PRIOR 2.0
#define DECAY 0.9

static double calibration(const sd_verify *v) {
    return (v->judged_acc + PRIOR) / (v->judged_conf + PRIOR);
}

/* Drafts up to max_drafts tokens at seq[cur..); returns how many, or -1. */
static int draft_tokens(sd_verify *v, int fast, int32_t *seq, int cur, int max_drafts,
                        sd_gen_stats *st, sd_err *e) {
    const double stop = v->o->stop_below, a = calibration(v);
    double chance = 1;
    int g = 0;
    while (g < max_drafts) {
        float *q = fast || v->one_hot ? NULL : v->q + (size_t)g * v->vocab;
        const double t = sd_now();
        v->conf[g] = 1;
        int r = v->draft(v->ud, seq, cur + g, q, &v->conf[g], st, e);
        if (!v->drafter) st->draft_s += sd_now() - t;
        if (r < 0) return -1;
        if (r == 0) break;
        const double c = v->conf[g] * a;
        if (v->conf[g] >= 0) chance *= c < 1 ? c : 1;
        g++;
        if (r == 2 || (stop > 0 && chance < stop)) break;
    }
    st->drafted += g;
    return g;
}

/* Adds a round of g drafts with n accepted to the calibration: the target
 * judged the accepted ones and the first rejected one. */
static void calibrate(sd_verify *v, int g, int n) {
    double c = 0;
    int acc = 0;
    for (int i = 0; i < n + (n < g); i++)
        if (v->conf[i] >= 0) c += v->conf[i], acc += i < n;
    v->judged_conf = DECAY * v->judged_conf + c;
    v->judged_acc = DECAY * v->judged_acc + acc;
}

/* Scores the g drafts at seq[c..c+g): the number accepted and the token
 * the round ends with (replacement or bonus). */
static int judge(sd_verify *v, const sd_gen_cfg *cfg, const int32_t *seq, int c, int g, int *n,
                 int32_t *next, sd_err *e) {
    size_t V = (size_t)v->vocab;
    const int32_t *drafts = seq + c;
    if (!v->p) { /* greedy: row i's argmax is ids[i * top_k] */
        int k = v->top_k, i = 0;
        while (i < g && drafts[i] == v->ids[(size_t)i * k]) i++;
        *n = i;
        *next = v->ids[(size_t)i * k];
        return 0;
    }
    /* a one-hot law (greedy final stage) accepts exactly its argmax: r = 0
     * decides that, and no rng is needed */
    const int one_hot = sd_is_greedy(cfg);
    if (!one_hot && !cfg->rng)
        return sd_fail(e, "sampler '%s' draws at random: sd_gen_cfg needs an rng",
                       sd_sampler_name(cfg->sampler));
    int i = 0;
    for (;; i++) {
        if (sd_token_dist(cfg->sampler, seq, c + i, v->tlog, c, v->p + (size_t)i * V, v->vocab, e))
            return -1;
        if (i == g) break;
        int32_t x = drafts[i];
        float px = v->p[(size_t)i * V + x], qx = v->q ? v->q[(size_t)i * V + x] : 1.0f;
        double r = one_hot ? 0 : sd_rng_uniform(cfg->rng);
        if (!(qx > 0 && r * qx < px)) break;
    }
    *n = i;
    const float *dist = v->p + (size_t)i * V;
    if (i < g && !v->o->skip_sample_adjustment)
        dist = residual(dist, v->q ? v->q + (size_t)i * V : NULL, drafts[i], v->resid, v->vocab);
    return sd_dist_sample(cfg, cfg->sampler, dist, v->vocab, next, e);
}

/* The target's top_k ids at verified row i into buf (sampled path: from
 * the row on the host); returns the row's ids. */
static const int32_t *row_ids(const sd_verify *v, int i, int32_t *buf) {
    if (!v->p) return v->ids + (size_t)i * v->top_k;
    sd_top_k(v->tlog + (size_t)i * v->vocab, v->vocab, v->top_k, buf);
    return buf;
}

static int round_at(sd_verify *v, const sd_gen_cfg *cfg, int32_t *seq, int *cur, int max_drafts,
                    int report, int32_t *out, int *count, sd_gen_stats *st, sd_err *e) {
    const int c = *cur, fast = !v->p;
    int g = draft_tokens(v, fast, seq, c, max_drafts, st, e);
    if (g < 0) return -1;
    const double t = sd_now();
    if (fast ? sd_lm_extend_top_k(v->target, seq, c + g, cfg->use_cache, g + 1, v->top_k, v->ids,
                                  NULL, st, e)
             : sd_lm_extend(v->target, seq, c + g, cfg->use_cache, v->tlog, g + 1, st, e))
        return -1;
    const double dt = sd_now() - t;
    st->verify_s += dt;
    if (st->target_calls > 0) {
        const int w = g + 1 < SD_COST_ROWS - 1 ? g + 1 : SD_COST_ROWS - 1;
        st->verify_calls_n[w]++;
        st->verify_s_n[w] += dt;
        if (w == SD_COST_ROWS - 1) st->verify_wide_rows += g + 1;
    }
    st->target_calls++;
    if (st->target_calls == 1) st->prefill_s = sd_now() - v->t0;

    int n = 0;
    int32_t x, buf[SD_TOP_K_MAX];
    if (judge(v, cfg, seq, c, g, &n, &x, e)) return -1;
    st->accepted += n;
    calibrate(v, g, n);
    int32_t rejected = n < g ? seq[c + n] : -1;
    if (v->verified)
        for (int i = 0; i <= n; i++)
            if (v->verified(v->ud, seq, c + i, row_ids(v, i, buf), v->top_k, e)) return -1;
    for (int i = 0; i < n; i++) {
        if (sd_emit(cfg, out, count, seq[c + i])) {
            if (report) sd_report_step(cfg, seq + c, i + 1, -1, -1);
            *cur = c + i + 1;
            return 1;
        }
    }
    if (n < g) {
        if (sd_kv_truncate(v->target->kv, c + n, e)) return -1;
        if (v->drafter && v->drafter->kv->n > c + n && sd_kv_truncate(v->drafter->kv, c + n, e))
            return -1;
    }
    if (report) sd_report_step(cfg, seq + c, n, rejected, x);
    seq[c + n] = x;
    *cur = c + n + 1;
    return sd_emit(cfg, out, count, x);
}

int sd_store_run(int confirmed, int base) {
    if (base >= SD_STORE_RUN_MAX) return base;
    const int run = confirmed < SD_STORE_RUN_MAX ? 2 * confirmed : SD_STORE_RUN_MAX;
    return run < base ? base : run > SD_STORE_RUN_MAX ? SD_STORE_RUN_MAX : run;
}

int sd_verify_round(sd_verify *v, const sd_gen_cfg *cfg, int32_t *seq, int *cur, int max_drafts,
                    int report, int32_t *out, int *count, sd_gen_stats *st, sd_err *e) {
    const int first = st->target_calls == 0;
    const int r = round_at(v, cfg, seq, cur, max_drafts, report, out, count, st, e);
    if (first && r >= 0) st->prefill_new_tokens = *count;
    return r;
}
