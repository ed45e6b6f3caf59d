/* Strategy benchmark: one table per model of tokens/s, acceptance and
 * speedup over autoregressive decoding (over the whole call, and over the
 * decode phase: after the first forward call, the prompt's prefill, which
 * is the same for every strategy), each strategy on the same prompt with
 * greedy decoding, the median of 5 runs by decode rate (its counts, times
 * and prediction together), whether its output equals the
 * autoregressive output, and for the strategies with verification rounds
 * the shares of the run spent drafting, in the drafter's catch-up,
 * verifying and on the host (d/c/v/h, sd_gen_stats) with the speedup the
 * cost model predicts from step costs the session timed apart from the
 * runs (sd_session_calibrate, engine/decode/cost.c) and the run's counts,
 * and its ratio to the realised decode-phase speedup; a prediction off by
 * more than 10% gets a line with each part's predicted and measured
 * seconds. It runs the
 * strategies through the session, the same code path as the specdec
 * binary. SmolLM2 gets an input-grounded prompt (repeat a paragraph), where
 * n-gram drafts shine; its drafter is the self-speculative first 10 layers.
 * stories260K drafts with its Q8_0 variant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session/session.h"

#define RUNS 5

/* The rows: every strategy of the registry in its order (ar first), and
 * after NASD "nasd2g", NASD with twice the gamma: with high acceptance,
 * longer drafts pay for the wider verification call. */
#define N_ROWS (SD_N_STRATEGIES + 1)

typedef struct row {
    const sd_strategy *t;
    int gamma_x; /* the case's gamma times this */
    const char *name;
} row;

static void make_rows(row *r) {
    for (int i = 0, k = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        r[k++] = (row){t, 1, t->name};
        if (t->bit == SD_STRAT_NASD) r[k++] = (row){t, 2, "nasd2g"};
    }
}

typedef struct bench_case {
    const char *title, *target, *draft;
    int draft_layers, chat, gen, gamma;
    const char *prompt;
} bench_case;

/* A verification run's time split (sd_gen_stats) as whole percentages of
 * the run: drafting/catch-up/verification/host; "-" for the strategies
 * without rounds. */
static void time_split(const sd_gen_stats *st, char *buf, size_t cap) {
    if (!(st->verify_s > 0 && st->total_s > 0)) {
        snprintf(buf, cap, "-");
        return;
    }
    const double k = 100.0 / st->total_s;
    snprintf(buf, cap, "%.0f/%.0f/%.0f/%.0f", st->draft_s * k, st->catchup_s * k, st->verify_s * k,
             st->host_s * k);
}

/* The predicted seconds of a run's one-row drafter calls (drafting; the
 * rest of predicted_draft_s is the wider calls, the catch-up), at the
 * machine's speed the session priced the run at: cal, the calibration
 * that priced it, unscaled over predicted_draft_s. 0 without drafter
 * calls. */
static double predicted_drafting(const sd_gen_stats *st, const sd_cost_calib *cal) {
    double d = 0;
    if (!(st->predicted_draft_s > 0) || !(sd_cost_predict(st, cal, NULL, &d) > 0) || !(d > 0))
        return 0;
    return st->draft_calls_n[1] * cal->draft_s[1] * st->predicted_draft_s / d;
}

/* A prediction more than 10% off the realised speedup: each part's
 * predicted seconds beside the measured ones (after the first call):
 * verification, drafting (drafting: predicted_drafting), the catch-up,
 * and the host, which the model leaves out, so the line says which part
 * the calibration missed. */
static void miss_line(const char *name, const sd_gen_stats *st, double drafting, double real) {
    const double pred = st->predicted_speedup;
    if (!(pred > 0 && real > 0) || fabs(pred / real - 1) <= 0.10) return;
    double v_real = 0;
    for (int n = 1; n < SD_COST_ROWS; n++) v_real += st->verify_s_n[n];
    printf("  %s: predicted %.2fx, realised %.2fx: seconds predicted/measured: verification "
           "%.3f/%.3f, drafting %.3f/%.3f, catch-up %.3f/%.3f, host 0/%.3f; "
           "decode phase %.3f/%.3f\n",
           name, pred, real, st->predicted_verify_s, v_real, drafting, st->draft_s,
           st->predicted_draft_s - drafting, st->catchup_s, st->host_s,
           st->predicted_verify_s + st->predicted_draft_s, st->total_s - st->prefill_s);
}

/* The session predicts a row's speedup over the last autoregressive run
 * it made (its one-row step); the small cases' realised speedup is over
 * another reference (the median autoregressive run). The prediction is
 * moved to that same reference (decode rates: before, mean), so the two
 * are over one step. */
static void over_reference(sd_gen_stats *q, double before, double mean) {
    if (q->predicted_speedup > 0 && before > 0 && mean > 0) q->predicted_speedup *= before / mean;
}

/* A run of a row: its counts and times, and its decode rate. */
typedef struct run_rec {
    sd_gen_stats st;
    double dec;
} run_rec;

static int cmp_run(const void *a, const void *b) {
    const double x = ((const run_rec *)a)->dec, y = ((const run_rec *)b)->dec;
    return (x > y) - (x < y);
}

static int run_case(const bench_case *c) {
    sd_err e = {{0}};
    sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.model = c->target;
    cfg.draft = c->draft;
    cfg.draft_layers = c->draft ? 0 : c->draft_layers;
    cfg.chat = c->chat;
    cfg.n_predict = c->gen;
    cfg.n_ctx = 2048;
    cfg.gamma = c->gamma;
    sd_session s;
    if (sd_session_open(&s, &cfg, &e)) {
        fprintf(stderr, "bench_strategies: %s\n", e.msg);
        return -1;
    }
    int rc = -1, n_ids = 0;
    int32_t *ids = NULL, *out[N_ROWS] = {0};
    row rows[N_ROWS];
    make_rows(rows);
    if (sd_session_prompt_ids(&s, c->prompt, &ids, &n_ids, &e) || sd_session_warm_up(&s, ids, &e))
        goto done;
    printf("\n%s: %s, prompt %d tokens, %d new tokens max, gamma %d, drafter %s; median of %d runs\n",
           c->title, strrchr(c->target, '/') + 1, n_ids, c->gen, c->gamma,
           c->draft ? strrchr(c->draft, '/') + 1 : "self (first layers)", RUNS);
    printf("%-6s %8s %9s %9s %9s %8s %12s %8s %9s %9s %10s %13s %s\n", "", "tokens", "tok/s", "decode/s",
           "accept", "calls", "host B/round", "vs ar", "dec vs ar", "predicted", "pred/real", "d/c/v/h %",
           "output");
    double ar_tps = 0, ar_dec = 0, ar_last = 0;
    int n_out[N_ROWS];
    for (int k = 0; k < N_ROWS; k++) {
        if (!(out[k] = malloc((size_t)c->gen * sizeof(int32_t)))) goto done;
        run_rec runs[RUNS];
        s.c.gamma = rows[k].gamma_x * c->gamma;
        for (int r = 0; r < RUNS; r++) {
            sd_gen_stats *q = &runs[r].st;
            int n = sd_session_generate(&s, rows[k].t->bit, ids, n_ids, NULL, out[k], q, &e);
            if (n < 0) goto done;
            n_out[k] = n;
            runs[r].dec = sd_gen_decode_tps(q);
        }
        /* the session predicts over the last autoregressive run's step */
        if (k == 0) ar_last = runs[RUNS - 1].dec;
        qsort(runs, RUNS, sizeof *runs, cmp_run);
        sd_gen_stats st = runs[RUNS / 2].st;
        const double med = st.total_s > 0 ? n_out[k] / st.total_s : 0, med_dec = runs[RUNS / 2].dec;
        if (k == 0) ar_tps = med, ar_dec = med_dec;
        over_reference(&st, ar_last, ar_dec);
        char acc[16] = "-";
        if (st.drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * st.accepted / st.drafted);
        const char *same = k == 0 ? "" : !rows[k].t->lossless ? "(not lossless)"
                           : n_out[k] == n_out[0] && !memcmp(out[k], out[0], (size_t)n_out[k] * 4)
                               ? "identical to ar"
                               : "DIFFERS from ar";
        /* bytes copied from backend memory to the host per target call
         * (a verification round, or an AR/beam step; draft-only: per
         * drafter step, as it makes no target call) */
        const long rounds = st.target_calls ? st.target_calls : st.draft_calls;
        char split[32], pred[16] = "-", ratio[16] = "-";
        time_split(&st, split, sizeof split);
        const double real = ar_dec > 0 ? med_dec / ar_dec : 0.0;
        const double predicted = st.predicted_speedup;
        if (predicted > 0 && real > 0) {
            snprintf(pred, sizeof pred, "%.2fx", predicted);
            snprintf(ratio, sizeof ratio, "%.2f", predicted / real);
        }
        printf("%-6s %8d %9.1f %9.1f %9s %8ld %12.0f %7.2fx %8.2fx %9s %10s %13s %s\n", rows[k].name, n_out[k],
               med, med_dec, acc, st.target_calls + st.draft_calls,
               rounds ? (double)st.host_bytes / rounds : 0.0, med / ar_tps, real, pred, ratio, split, same);
        miss_line(rows[k].name, &st, predicted_drafting(&st, &s.cal), real);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    for (int k = 0; k < N_ROWS; k++) free(out[k]);
    free(ids);
    sd_session_close(&s);
    return rc;
}

/* The real pair: Qwen2.5-Coder 0.5B drafting for the 1.5B, greedy, one
 * table per prompt: the 1.5B's own autoregressive run, then each row of
 * pair_rows (speculative decoding with the session's defaults and with
 * flags set by hand, NASD; "ngram": drafts from the hybrid drafter's
 * store), with its speedup over the autoregressive run in the decode
 * phase (after the first forward call; the drafter's own prefill counts in
 * it) next to the speedup the cost model predicts from the session's
 * calibration and the run's counts (sd_gen_stats predicted_speedup) and
 * their ratio. Then the mean decode-phase speedup of each row over the
 * code prompts (completion, chat request) and on the edit prompt.
 *
 * A shared host's speed drifts over seconds, so each run of a row is
 * paired with an autoregressive run just before it (paired_run) and is
 * over that run; a row reports the run with the median speedup of
 * PAIR_RUNS (its counts, times and prediction together); the header gives
 * the range of the autoregressive runs. */
#define PAIR_GEN 128
#define PAIR_RUNS 3

typedef struct pair_prompt {
    const char *key, *title, *text;
    int chat, edit;
} pair_prompt;

/* A row: the settings it changes from the session's defaults (KEEP: that
 * setting's default). "spec/old" is speculative decoding as it was by
 * default before the rounds, the head cut and the n-gram drafts became
 * automatic (gamma 4 every round, the whole head, the model alone);
 * "spec/best" the best flags of that version (--draft-vocab 32768
 * --draft-p-min 0.9); "spec/model" today's defaults with the model alone,
 * "spec" today's defaults, "spec/g4" with up to 4 drafts a round (the
 * bound adaptive rounds had before it became 8). */
#define KEEP (-100)

typedef struct pair_row {
    const char *name;
    int bit, gamma, fixed_gamma, draft_vocab, hybrid_n;
    double p_min;
} pair_row;

static const pair_row pair_rows[] = {
    {"spec/old", SD_STRAT_SPEC, 4, 1, 0, 0, 0},
    {"spec/best", SD_STRAT_SPEC, 4, 1, 32768, 0, 0.9},
    {"spec/model", SD_STRAT_SPEC, KEEP, KEEP, KEEP, 0, KEEP},
    {"spec", SD_STRAT_SPEC, KEEP, KEEP, KEEP, KEEP, KEEP},
    {"spec/g4", SD_STRAT_SPEC, 4, KEEP, KEEP, KEEP, KEEP},
    {"nasd", SD_STRAT_NASD, KEEP, KEEP, KEEP, KEEP, KEEP},
};
#define N_PAIR_ROWS (int)(sizeof pair_rows / sizeof pair_rows[0])

/* The session's settings for a row: the defaults (cfg) with the row's
 * changes. */
static void set_row(sd_session *s, const sd_config *cfg, int chat, const pair_row *w) {
    s->c = *cfg;
    s->c.chat = chat;
    if (w->gamma != KEEP) s->c.gamma = w->gamma;
    if (w->fixed_gamma != KEEP) s->c.fixed_gamma = w->fixed_gamma;
    if (w->draft_vocab != KEEP) s->c.draft_vocab = w->draft_vocab;
    if (w->hybrid_n != KEEP) s->c.hybrid_n = w->hybrid_n;
    if (w->p_min != KEEP) s->c.draft_p_min = w->p_min;
}

/* Opens the pair's session, gen new tokens at most. */
static int open_pair(sd_session *s, sd_config *cfg, int gen) {
    sd_err e = {{0}};
    sd_config_defaults(cfg);
    cfg->model = "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    cfg->draft = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    cfg->n_predict = gen;
    cfg->n_ctx = 1024;
    if (sd_session_open(s, cfg, &e)) {
        fprintf(stderr, "bench_strategies: %s\n", e.msg);
        return -1;
    }
    if (s->notice[0]) printf("\nsession: %s\n", s->notice);
    return 0;
}

/* One run of row w on the prompt, paired with an autoregressive run just
 * before it (a shared host's speed drifts over seconds): rec->dec is the
 * row's decode rate over that run's, the session's prediction is over
 * that run's step; *ar_lo / *ar_hi widen to its rate, *same stays 1 while
 * the row's output is ar's. Returns the row's token count, -1 on error. */
static int paired_run(sd_session *s, const sd_config *cfg, int chat, const pair_row *w,
                      const int32_t *ids, int n_ids, const int32_t *ar, int n_ar, int32_t *out,
                      run_rec *rec, double *ar_lo, double *ar_hi, int *same, sd_err *e) {
    sd_gen_stats st;
    s->c = *cfg;
    s->c.chat = chat;
    if (sd_session_generate(s, SD_STRAT_AR, ids, n_ids, NULL, out, &st, e) < 0) return -1;
    const double a = sd_gen_decode_tps(&st);
    *ar_lo = fmin(*ar_lo, a);
    *ar_hi = fmax(*ar_hi, a);
    set_row(s, cfg, chat, w);
    const int n = sd_session_generate(s, w->bit, ids, n_ids, NULL, out, &rec->st, e);
    if (n < 0) return -1;
    *same &= n == n_ar && !memcmp(out, ar, (size_t)n * sizeof *out);
    rec->dec = a > 0 ? sd_gen_decode_tps(&rec->st) / a : 0;
    return n;
}

static int run_pair(const pair_prompt *pp, int n_pp) {
    sd_err e = {{0}};
    sd_config cfg;
    sd_session s;
    if (open_pair(&s, &cfg, PAIR_GEN)) return -1;
    int rc = -1;
    int32_t *ids = NULL, ar[PAIR_GEN], out[PAIR_GEN];
    double mean[2][N_PAIR_ROWS] = {{0}}; /* [code prompts, edit prompt][row] */
    int n_kind[2] = {0, 0};
    for (int k = 0; k < n_pp; k++) {
        int n_ids = 0;
        s.c = cfg;
        s.c.chat = pp[k].chat;
        free(ids);
        ids = NULL;
        if (sd_session_prompt_ids(&s, pp[k].text, &ids, &n_ids, &e) ||
            sd_session_warm_up(&s, ids, &e))
            goto done;
        sd_gen_stats st, rs[N_PAIR_ROWS];
        int got[N_PAIR_ROWS], same[N_PAIR_ROWS];
        double real[N_PAIR_ROWS], drafting[N_PAIR_ROWS];
        int n_ar = sd_session_generate(&s, SD_STRAT_AR, ids, n_ids, NULL, ar, &st, &e);
        if (n_ar < 0) goto done;
        double ar_lo = sd_gen_decode_tps(&st), ar_hi = ar_lo;
        for (int r = 0; r < N_PAIR_ROWS; r++) {
            run_rec runs[PAIR_RUNS];
            same[r] = 1;
            for (int i = 0; i < PAIR_RUNS; i++) {
                got[r] = paired_run(&s, &cfg, pp[k].chat, &pair_rows[r], ids, n_ids, ar, n_ar, out,
                                    &runs[i], &ar_lo, &ar_hi, &same[r], &e);
                if (got[r] < 0) goto done;
            }
            qsort(runs, PAIR_RUNS, sizeof *runs, cmp_run);
            rs[r] = runs[PAIR_RUNS / 2].st;
            real[r] = runs[PAIR_RUNS / 2].dec;
            drafting[r] = predicted_drafting(&rs[r], &s.cal);
        }
        printf("\nQwen2.5-Coder 0.5B -> 1.5B, %s: prompt %d tokens, %d new tokens, ar decode "
               "%.2f-%.2f tok/s (each run of a row paired with one); median of %d runs\n",
               pp[k].title, n_ids, n_ar, ar_lo, ar_hi, PAIR_RUNS);
        printf("%-10s %8s %9s %8s %6s %7s %6s %9s %9s %10s %13s %s\n", "", "tokens", "decode/s", "accept",
               "ngram", "target", "draft", "dec vs ar", "predicted", "pred/real", "d/c/v/h %", "output");
        for (int r = 0; r < N_PAIR_ROWS; r++) {
            sd_gen_stats *q = &rs[r];
            const double pred = q->predicted_speedup;
            mean[pp[k].edit][r] += real[r];
            char acc[16] = "-", split[32];
            if (q->drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * q->accepted / q->drafted);
            time_split(q, split, sizeof split);
            printf("%-10s %8d %9.2f %8s %6ld %7ld %6ld %8.2fx %8.2fx %10.2f %13s %s\n", pair_rows[r].name,
                   got[r], sd_gen_decode_tps(q), acc, q->drafted_ngram, q->target_calls, q->draft_calls, real[r],
                   pred, real[r] > 0 ? pred / real[r] : 0.0, split, same[r] ? "identical to ar" : "DIFFERS from ar");
        }
        for (int r = 0; r < N_PAIR_ROWS; r++) miss_line(pair_rows[r].name, &rs[r], drafting[r], real[r]);
        n_kind[pp[k].edit]++;
    }
    for (int kind = 0; kind < 2; kind++) {
        if (!n_kind[kind]) continue;
        printf("\nmean decode-phase speedup over ar, %s (%d prompt%s):", kind ? "edit" : "code",
               n_kind[kind], n_kind[kind] > 1 ? "s" : "");
        for (int r = 0; r < N_PAIR_ROWS; r++)
            printf(" %s %.2fx%s", pair_rows[r].name, mean[kind][r] / n_kind[kind],
                   r + 1 < N_PAIR_ROWS ? "," : "\n");
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    free(ids);
    sd_session_close(&s);
    return rc;
}

/* The gamma sweep on the pair, per prompt of the pair part: speculative
 * decoding with fixed rounds (every round drafts gamma) at gamma 1..8,
 * with the default drafter head cut and the draft model alone (no n-gram
 * store), and NASD at gamma 1..8, each row one run paired with an
 * autoregressive run (paired_run), its decode-phase speedup over it; the header
 * gives the speedup of speculative decoding with the defaults (adaptive
 * rounds, hybrid drafter) on the same prompt, the reference the fixed
 * rounds are measured against, realised and as the cost model predicts it
 * (greedy runs' counts are deterministic, so the predictions of one
 * calibration compare the rows with less of the machine's drift). As many new
 * tokens as the pair part: the defaults are judged on the runs the pair
 * part reports (a shorter run of an edit is mostly its preamble). */
#define SWEEP_GEN PAIR_GEN
#define SWEEP_MAX_GAMMA 8
#define N_SWEEP_ROWS (1 + 2 * SWEEP_MAX_GAMMA)

static void make_sweep_rows(pair_row *w) {
    w[0] = (pair_row){"spec", SD_STRAT_SPEC, KEEP, KEEP, KEEP, KEEP, KEEP};
    for (int g = 1; g <= SWEEP_MAX_GAMMA; g++) {
        w[g] = (pair_row){"spec", SD_STRAT_SPEC, g, 1, KEEP, 0, KEEP};
        w[SWEEP_MAX_GAMMA + g] = (pair_row){"nasd", SD_STRAT_NASD, g, KEEP, KEEP, KEEP, KEEP};
    }
}

static int run_sweep(const pair_prompt *pp, int n_pp) {
    sd_err e = {{0}};
    sd_config cfg;
    sd_session s;
    if (open_pair(&s, &cfg, SWEEP_GEN)) return -1;
    int rc = -1;
    int32_t *ids = NULL, ar[SWEEP_GEN], out[SWEEP_GEN];
    pair_row rows[N_SWEEP_ROWS];
    make_sweep_rows(rows);
    for (int k = 0; k < n_pp; k++) {
        int n_ids = 0;
        s.c = cfg;
        s.c.chat = pp[k].chat;
        free(ids);
        ids = NULL;
        if (sd_session_prompt_ids(&s, pp[k].text, &ids, &n_ids, &e) ||
            sd_session_warm_up(&s, ids, &e))
            goto done;
        sd_gen_stats st;
        run_rec rs[N_SWEEP_ROWS];
        int got[N_SWEEP_ROWS], same[N_SWEEP_ROWS];
        int n_ar = sd_session_generate(&s, SD_STRAT_AR, ids, n_ids, NULL, ar, &st, &e);
        if (n_ar < 0) goto done;
        double ar_lo = sd_gen_decode_tps(&st), ar_hi = ar_lo;
        for (int r = 0; r < N_SWEEP_ROWS; r++) {
            same[r] = 1;
            got[r] = paired_run(&s, &cfg, pp[k].chat, &rows[r], ids, n_ids, ar, n_ar, out, &rs[r], &ar_lo,
                                &ar_hi, &same[r], &e);
            if (got[r] < 0) goto done;
        }
        printf("\nsweep, Qwen2.5-Coder 0.5B -> 1.5B, %s: prompt %d tokens, %d new tokens (the pair part: "
               "%d), ar decode %.2f-%.2f tok/s (each row paired with one run), spec with the defaults "
               "%.2fx, predicted %.2fx (%s)\n",
               pp[k].title, n_ids, n_ar, PAIR_GEN, ar_lo, ar_hi, rs[0].dec, rs[0].st.predicted_speedup,
               same[0] ? "identical to ar" : "DIFFERS from ar");
        printf("%-6s %5s %8s %9s %8s %7s %6s %9s %9s %s\n", "", "gamma", "tokens", "decode/s", "accept",
               "target", "draft", "dec vs ar", "predicted", "output");
        for (int r = 1; r < N_SWEEP_ROWS; r++) {
            const sd_gen_stats *q = &rs[r].st;
            char acc[16] = "-";
            if (q->drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * q->accepted / q->drafted);
            printf("%-6s %5d %8d %9.2f %8s %7ld %6ld %8.2fx %8.2fx %s\n", rows[r].name, rows[r].gamma,
                   got[r], sd_gen_decode_tps(q), acc, q->target_calls, q->draft_calls, rs[r].dec,
                   q->predicted_speedup, same[r] ? "identical to ar" : "DIFFERS from ar");
        }
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    free(ids);
    sd_session_close(&s);
    return rc;
}

/* Which parts run: "small" (SmolLM2 and stories260K), "pair" (the Qwen
 * pair), "sweep" (the gamma sweep on the pair); all three, in that order,
 * when no argument names one. The pair's prompts can be narrowed by key
 * ("completion", "chat", "edit"; every prompt when none is named). */
int main(int argc, char **argv) {
    int parts = 0, small = 0, pair = 0, sweep = 0, keys = 0;
    static const char *const known[] = {"completion", "chat", "edit"};
    int want[3] = {0, 0, 0};
    for (int i = 1; i < argc; i++) {
        int k = 0;
        while (k < 3 && strcmp(argv[i], known[k])) k++;
        if (k < 3) want[k] = 1, keys++;
        else if (!strcmp(argv[i], "small")) small = 1, parts++;
        else if (!strcmp(argv[i], "pair")) pair = 1, parts++;
        else if (!strcmp(argv[i], "sweep")) sweep = 1, parts++;
        else {
            fprintf(stderr, "bench_strategies: unknown argument '%s' (parts: small, pair, sweep; "
                            "prompts: completion, chat, edit)\n", argv[i]);
            return 2;
        }
    }
    if (!parts) small = pair = sweep = 1;
    static const char paragraph[] =
        "The lighthouse keeper climbed the one hundred and twelve steps every evening at dusk. "
        "He polished the great lens, trimmed the wick, and wrote the weather in a leather book: "
        "wind from the north-west, sea moderate, two fishing boats returning before dark. In "
        "forty years he had missed only one night, the night his daughter was born.";
    char grounded[1024];
    snprintf(grounded, sizeof grounded,
             "Repeat the following paragraph exactly, word for word:\n\n%s", paragraph);
    bench_case cases[] = {
        {"input-grounded (repeat a paragraph)", "models/SmolLM2-135M-Instruct.Q4_1.gguf", NULL, 10, 1, 96, 4, grounded},
        {"story", "tests/data/models/stories260K.gguf", "tests/data/models/stories260K-q8_0.gguf", 0, 0, 256, 4,
         "Once upon a time"},
    };
    int rc = 0;
    for (size_t i = 0; small && i < sizeof cases / sizeof cases[0]; i++) rc |= run_case(&cases[i]);
    static const pair_prompt all[] = {
        {"completion", "completion", "def is_prime(n: int) -> bool:\n    \"\"\"Return True when n is a prime number.\"\"\"\n", 0, 0},
        {"chat", "chat request (fresh code)", "Write a C function that reverses a singly linked list in place.", 1, 0},
        {"edit", "edit (rename a variable in a 30-line function)",
         "Rename the variable total to acc in this function and print the whole function again:\n\n"
         "def summarize(orders, tax_rate=0.2):\n"
         "    \"\"\"Sum the orders per customer and return a report.\"\"\"\n"
         "    total = 0\n"
         "    per_customer = {}\n"
         "    for order in orders:\n"
         "        customer = order[\"customer\"]\n"
         "        amount = order[\"amount\"]\n"
         "        if amount <= 0:\n"
         "            continue\n"
         "        total += amount\n"
         "        per_customer[customer] = per_customer.get(customer, 0) + amount\n"
         "    tax = total * tax_rate\n"
         "    lines = []\n"
         "    for customer, amount in sorted(per_customer.items()):\n"
         "        share = amount / total if total else 0\n"
         "        lines.append(f\"{customer}: {amount:.2f} ({share:.0%})\")\n"
         "    lines.append(f\"total: {total:.2f}\")\n"
         "    lines.append(f\"tax: {tax:.2f}\")\n"
         "    lines.append(f\"with tax: {total + tax:.2f}\")\n"
         "    if total > 1000:\n"
         "        lines.append(\"large account\")\n"
         "    elif total > 100:\n"
         "        lines.append(\"medium account\")\n"
         "    else:\n"
         "        lines.append(\"small account\")\n"
         "    report = \"\\n\".join(lines)\n"
         "    return {\n"
         "        \"total\": total,\n"
         "        \"tax\": tax,\n"
         "        \"report\": report,\n"
         "    }\n", 1, 1},
    };
    pair_prompt prompts[3];
    int n_prompts = 0;
    for (int k = 0; k < 3; k++)
        if (!keys || want[k]) prompts[n_prompts++] = all[k];
    if (pair) rc |= run_pair(prompts, n_prompts);
    if (sweep) rc |= run_sweep(prompts, n_prompts);
    return rc ? 1 : 0;
}
