/* The cost model's calibration for a session (sd_session_calibrate): the
 * target's verification calls and the drafter's calls timed once, apart
 * from any run, at about the context a run of the current prompt reaches
 * halfway, and timed again only when that context, the widths needed or
 * the drafter view (model, layers, head cut) change; with them each
 * model's one-row step after a short context, timed right after its
 * curve, which sd_session_retime times again the same way around every
 * run to follow the machine's speed. */
#include "engine/session/session.h"

/* A calibration serves prompts whose halfway context is within this many
 * positions of the one it was timed at (attention's share of a step grows
 * slowly with the context). */
#define CTX_SLACK 64

/* lm's one-row step after SD_COST_REF_CTX positions into *t (0 when the
 * cache cannot hold them). */
static int ref_step(sd_lm *lm, const int32_t *ids, int n_ids, double *t, sd_err *e) {
    double c[SD_COST_ROWS];
    *t = 0;
    if (lm->kv->n_ctx < SD_COST_REF_CTX + 1) return 0;
    if (sd_cost_time_calls(lm, ids, n_ids, SD_COST_REF_CTX, 1, 1, c, NULL, e)) return -1;
    *t = c[1];
    return 0;
}

static int same_view(const sd_lm *a, const sd_lm *b) {
    return a->m == b->m && a->kv == b->kv && a->n_layers == b->n_layers &&
           a->vocab_limit == b->vocab_limit;
}

static int near(int a, int b) { return a - b <= CTX_SLACK && b - a <= CTX_SLACK; }

int sd_session_calibrate(sd_session *s, int strat, const int32_t *ids, int n_ids, sd_err *e) {
    const sd_strategy *t = sd_strategy_find(strat);
    if (!t) return sd_fail(e, "unknown strategy bit %d", strat);
    const int gamma = sd_session_gamma(&s->c, strat);
    const int longest = gamma > SD_STORE_RUN_MAX ? gamma : SD_STORE_RUN_MAX;
    const int rows = longest + 1 < SD_COST_ROWS - 1 ? longest + 1 : SD_COST_ROWS - 1;
    const int draft_rows = SD_COST_ROWS - 1;
    const int drafter = t->needs_drafter && s->have_drafter;
    int n_ctx = s->target_lm.kv->n_ctx;
    if (drafter && s->draft_lm.kv->n_ctx < n_ctx) n_ctx = s->draft_lm.kv->n_ctx;
    int ctx = n_ids + s->c.n_predict / 2;
    if (ctx > n_ctx - draft_rows) ctx = n_ctx - draft_rows;
    if (ctx < 1) return 1; /* no room to time the widths: the runs go without a prediction */
    sd_cost_calib *cal = &s->cal;
    if (!(cal->verify_s[rows] > 0) || !near(cal->ctx, ctx)) {
        for (int n = 0; n < SD_COST_ROWS; n++) cal->draft_s[n] = 0;
        cal->draft_fill_s = cal->draft_ref = 0;
        if (sd_cost_time_calls(&s->target_lm, ids, n_ids, ctx, rows, 0, cal->verify_s,
                               &cal->verify_fill_s, e) ||
            ref_step(&s->target_lm, ids, n_ids, &cal->verify_ref, e))
            return -1;
        cal->ctx = ctx;
        s->cal_drafter = (sd_lm){0};
    }
    if (drafter && !same_view(&s->cal_drafter, &s->draft_lm)) {
        if (sd_cost_time_calls(&s->draft_lm, ids, n_ids, cal->ctx, draft_rows, 1, cal->draft_s,
                               &cal->draft_fill_s, e) ||
            ref_step(&s->draft_lm, ids, n_ids, &cal->draft_ref, e))
            return -1;
        s->cal_drafter = s->draft_lm;
    }
    return 0;
}

int sd_session_retime(sd_session *s, int strat, const int32_t *ids, int n_ids,
                      double *verify_scale, double *draft_scale, sd_err *e) {
    const sd_strategy *t = sd_strategy_find(strat);
    if (!t) return sd_fail(e, "unknown strategy bit %d", strat);
    const sd_cost_calib *cal = &s->cal;
    double v = 0, d = 0;
    *verify_scale = *draft_scale = 1;
    if (cal->verify_ref > 0) {
        if (ref_step(&s->target_lm, ids, n_ids, &v, e)) return -1;
        if (v > 0) *verify_scale = v / cal->verify_ref;
    }
    if (t->needs_drafter && s->have_drafter && cal->draft_ref > 0) {
        if (ref_step(&s->draft_lm, ids, n_ids, &d, e)) return -1;
        if (d > 0) *draft_scale = d / cal->draft_ref;
    }
    return 0;
}
