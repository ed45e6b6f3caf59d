/* The cost model of verification runs (speculative decoding, NASD): what a
 * run's decode phase should gain over autoregressive decoding, priced with
 * step costs timed apart from the run (a calibration) and counted from
 * the run's own acceptance. A realised speedup far from the prediction
 * then says something: the run's calls cost more than the calibration's
 * (compare the predicted seconds of each part with the measured ones), or
 * time went outside the calls (host work, which the model leaves out).
 *
 * For the calls after the target's first (the first also feeds the prompt):
 *   T   = sum_n c_n V(n) + sum_k d_k D(k)     predicted decode-phase time,
 *         c_n the run's target calls of n rows, V(n) their calibrated cost,
 *         d_k its drafter calls feeding k rows, D(k) theirs
 *   S   = N V(1) / T                          N the tokens after the first
 *                                             call, V(1) the one-row step
 * Calls wider than the curve (the drafter's first call, which feeds it the
 * prompt, a long catch-up) are priced on the line through the curve's
 * widest call and the calibration's call that filled the cache from empty
 * (wide_of).
 *
 * A shared machine's speed drifts between the calibration and a run, and
 * the realised speedup is over an autoregressive run made at yet another
 * time. sd_cost_predict_at follows the drift: V and D scaled by each
 * model's one-row step timed around the run over the same step timed with
 * the calibration, and V(1) in S replaced by the autoregressive run's
 * own one-row step, the one the realised speedup is over. */
#include <stdlib.h>

#include "engine/decode/decode.h"

/* Timed widths: every one up to 8, then every 2nd to 16, every 4th above;
 * the widths between are interpolated (the costs grow smoothly with the
 * rows: matrix tiles of 5 to 9 rows, attention linear in them). */
static int timed_width(int n) { return n <= 8 || (n <= 16 && n % 2 == 0) || n % 4 == 0; }

/* Calls timed per width, the widths taken in turn (a change in the
 * machine's speed during the calibration moves every width alike, not
 * some of them only). A width's cost is the mean of its calls, not the
 * median: a run's time is the sum of its calls, the slow ones included
 * (on a loaded machine, the calls another job delays). At least REPS
 * passes, and more while the passes have taken less than MIN_PASSES_S (up
 * to MAX_REPS): a small model's pass lasts a few milliseconds, where one
 * interrupt moves a mean of three calls by tens of percent. */
#define REPS 3
#define MAX_REPS 256
#define MIN_PASSES_S 0.05

int sd_cost_time_calls(sd_lm *lm, const int32_t *ids, int n_ids, int ctx, int max_rows, int n_out,
                       double *cost, double *fill_s, sd_err *e) {
    if (n_ids < 1 || ctx < 1 || max_rows < 1 || max_rows >= SD_COST_ROWS)
        return sd_fail(e, "cost calibration: %d ids, context %d, %d rows", n_ids, ctx, max_rows);
    if (ctx + max_rows > lm->kv->n_ctx)
        return sd_fail(e, "cost calibration: context %d + %d rows exceeds the cache (%d)", ctx,
                       max_rows, lm->kv->n_ctx);
    const int len = ctx + max_rows;
    int32_t *seq = malloc((size_t)len * sizeof *seq), *out = malloc((size_t)max_rows * sizeof *out);
    sd_gen_stats st = {0};
    int widths[SD_COST_ROWS], n_widths = 0, rc = -1;
    double t[SD_COST_ROWS] = {0};
    if (!seq || !out) {
        sd_fail(e, "out of memory");
        goto done;
    }
    for (int i = 0; i < len; i++) seq[i] = ids[i % n_ids];
    for (int n = 0; n < SD_COST_ROWS; n++) cost[n] = 0;
    for (int n = 1; n <= max_rows; n++)
        if (timed_width(n) || n == max_rows) widths[n_widths++] = n;
    lm->kv->n = 0;
    const double t0 = sd_now();
    if (sd_lm_extend_top_k(lm, seq, ctx, 1, 1, 1, out, NULL, &st, e)) goto done;
    if (fill_s) *fill_s = sd_now() - t0;
    int reps = 0;
    for (const double start = sd_now();
         reps < REPS || (reps < MAX_REPS && sd_now() - start < MIN_PASSES_S); reps++) {
        for (int i = 0; i < n_widths; i++) {
            const int n = widths[i];
            if (sd_kv_truncate(lm->kv, ctx, e)) goto done;
            const double t1 = sd_now();
            if (sd_lm_extend_top_k(lm, seq, ctx + n, 1, n_out ? n_out : n, 1, out, NULL, &st, e))
                goto done;
            t[i] += sd_now() - t1;
        }
    }
    for (int i = 0; i < n_widths; i++) {
        const int n = widths[i], last = i ? widths[i - 1] : 0;
        cost[n] = t[i] / reps;
        for (int m = last + 1; last && m < n; m++)
            cost[m] = cost[last] + (cost[n] - cost[last]) * (m - last) / (n - last);
    }
    rc = 0;
done:
    lm->kv->n = 0;
    free(seq);
    free(out);
    return rc;
}

/* A call of more rows than the widest timed one (top) costs a + b rows:
 * the line through that call and, when timed, the call that filled the
 * cache (fill_s for fill_rows rows from an empty cache, a prompt's
 * prefill), else through no cost at no rows (top's price per row). The
 * fill prices a prompt fed to the drafter in one call: top's price per
 * row carries a whole read of the weights over few rows and attention
 * over the calibration's context from every row, and overprices it. */
typedef struct wide_price {
    int top;
    double a, b;
} wide_price;

static wide_price wide_of(const double *c, double fill_s, int fill_rows) {
    wide_price w = {0, 0, 0};
    for (int n = 1; n < SD_COST_ROWS; n++)
        if (c[n] > 0) w.top = n;
    if (!w.top) return w;
    const double top_s = c[w.top];
    if (fill_s > top_s && fill_rows > w.top) {
        w.b = (fill_s - top_s) / (fill_rows - w.top);
        w.a = top_s - w.b * w.top;
    } else {
        w.b = top_s / w.top;
    }
    return w;
}

double sd_cost_draft_call(const sd_cost_calib *c, int rows) {
    const wide_price w = wide_of(c->draft_s, c->draft_fill_s, c->ctx);
    if (!w.top || rows < 1) return 0;
    return rows <= w.top && c->draft_s[rows] > 0 ? c->draft_s[rows] : w.a + w.b * rows;
}

/* Seconds of the calls counted in calls[1..SD_COST_ROWS) (wide_rows: the
 * rows of the last slot's) at the calibrated costs c, wider calls priced
 * with the fill (wide_of); -1 when a counted width has no cost. A line
 * prices the last slot's calls from their count and summed rows alone. */
static double priced(const long *calls, long wide_rows, const double *c, double fill_s,
                     int fill_rows) {
    const wide_price w = wide_of(c, fill_s, fill_rows);
    double s = 0;
    for (int n = 1; n < SD_COST_ROWS - 1; n++) {
        if (!calls[n]) continue;
        if (c[n] > 0) s += calls[n] * c[n];
        else if (w.top && n > w.top) s += calls[n] * (w.a + w.b * n);
        else return -1;
    }
    if (calls[SD_COST_ROWS - 1]) {
        if (!w.top) return -1;
        s += calls[SD_COST_ROWS - 1] * w.a + w.b * (double)wide_rows;
    }
    return s;
}

double sd_cost_predict_at(const sd_gen_stats *st, const sd_cost_calib *cal, double verify_scale,
                          double draft_scale, double step_s, double *verify_pred,
                          double *draft_pred) {
    long rounds = 0;
    for (int n = 1; n < SD_COST_ROWS; n++) rounds += st->verify_calls_n[n];
    const int tokens = st->new_tokens - st->prefill_new_tokens;
    if (rounds == 0 || tokens <= 0 || !(cal->verify_s[1] > 0)) return 0;
    const double v = priced(st->verify_calls_n, st->verify_wide_rows, cal->verify_s,
                            cal->verify_fill_s, cal->ctx);
    const double d = priced(st->draft_calls_n, st->draft_wide_rows, cal->draft_s,
                            cal->draft_fill_s, cal->ctx);
    if (v < 0 || d < 0 || !(v + d > 0)) return 0;
    const double vs = v * verify_scale, ds = d * draft_scale;
    if (verify_pred) *verify_pred = vs;
    if (draft_pred) *draft_pred = ds;
    const double step = step_s > 0 ? step_s : cal->verify_s[1] * verify_scale;
    return tokens * step / (vs + ds);
}

double sd_cost_predict(const sd_gen_stats *st, const sd_cost_calib *cal, double *verify_pred,
                       double *draft_pred) {
    return sd_cost_predict_at(st, cal, 1, 1, 0, verify_pred, draft_pred);
}
