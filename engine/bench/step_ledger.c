/* The GPU step ledger (engine/bench/ledger/ledger.h), printed: for each
 * device kind of the constants file and each model shape of
 * engine/bench/synth_presets.h, what a decode step and an n-row verification
 * cost on each CUDA path, counted on the CPU from the ops engine/model
 * calls; the predicted tok/s against the copy-bandwidth bound and the
 * targets; the n-row / 1-row ratios; the speculative speedup those costs
 * imply; and the prediction next to every measured figure of the file.
 *
 *   step_ledger CONSTANTS TARGETS [--ctx N] [--commit C]
 *       the tables, then the predictions for each target as the markdown
 *       table of docs/gpu.md ("The step ledger"), stamped with commit C
 *       (make ledger passes the checkout's)
 *   step_ledger CONSTANTS TARGETS --fit DEVICE    after a device run: the eta,
 *       kernel_us and quant_rate that fit the file's measured figures of
 *       DEVICE best (least squares of log(predicted / measured)), printed
 *       as lines for the file
 *
 * TARGETS: docs/perf/gpu-targets.txt (the targets and the acceptance
 * rates the speedups are implied at). --ctx: the position of the tables'
 * steps (default 1024). The measured
 * figures were taken at other positions (gpu-check: 128 tokens decoded
 * after 32, verification at 64), and are predicted there. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench/ledger/ledger.h"

#define MAX_ROWS 16
/* where gpu-check measures: decode steps at positions 32..159, verification at 64 */
#define DECODE_AT 96
#define VERIFY_AT 64
#define VERIFY_MEASURED 9

typedef struct shape {
    const synth_preset *p;
    lg_model *m;
    double weight_bytes;
    lg_trace at[MAX_ROWS + 1];  /* n rows at the table's position */
    lg_trace dec;               /* one row at DECODE_AT */
    lg_trace ver[VERIFY_MEASURED + 1]; /* n rows at VERIFY_AT */
} shape;

static shape g_shape[SYNTH_N_PRESETS];

static lg_targets g_targets;

/* The decode target of a preset: tok/s or % of the copy bound (0: none). */
static void target(const char *name, double *toks, double *pct) {
    *toks = *pct = 0;
    for (int i = 0; i < g_targets.n_decode; i++)
        if (!strcmp(name, g_targets.decode[i].preset))
            *(g_targets.decode[i].pct ? pct : toks) = g_targets.decode[i].value;
}

/* The speculative pairs: target, drafter. */
static const char *const k_pairs[][2] = {
    {"qwen-1.5b-q4_k_m", "qwen-0.5b-q4_k_m"},
    {"llama-3b-bf16", "llama-1b-bf16"},
};
/* the acceptance rates of the targets file, lowest first, then 1 */
static double g_alpha[LG_MAX_ALPHA + 1];
static int g_n_alpha;

static void set_alpha(void) {
    g_n_alpha = 0;
    for (int i = 0; i < g_targets.n_accept; i++) {
        int j = g_n_alpha++;
        for (; j > 0 && g_alpha[j - 1] > g_targets.accept[i]; j--) g_alpha[j] = g_alpha[j - 1];
        g_alpha[j] = g_targets.accept[i];
    }
    g_alpha[g_n_alpha++] = 1.0;
}

static shape *find_shape(const char *name) {
    for (int i = 0; i < SYNTH_N_PRESETS; i++)
        if (!strcmp(g_shape[i].p->name, name)) return &g_shape[i];
    return NULL;
}

static int open_shapes(int ctx, sd_err *e) {
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        shape *s = &g_shape[i];
        s->p = &k_synth_presets[i];
        s->m = lg_model_open(s->p, (ctx > DECODE_AT ? ctx : DECODE_AT) + MAX_ROWS + 1, e);
        if (!s->m) return -1;
        s->weight_bytes = (double)lg_model_weight_bytes(s->m);
        for (int n = 1; n <= MAX_ROWS; n++)
            if (lg_model_trace(s->m, n, ctx, &s->at[n], e)) return -1;
        if (lg_model_trace(s->m, 1, DECODE_AT, &s->dec, e)) return -1;
        for (int n = 1; n <= VERIFY_MEASURED; n++)
            if (lg_model_trace(s->m, n, VERIFY_AT, &s->ver[n], e)) return -1;
    }
    return 0;
}

static void close_shapes(void) {
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        shape *s = &g_shape[i];
        for (int n = 0; n <= MAX_ROWS; n++) lg_trace_free(&s->at[n]);
        for (int n = 0; n <= VERIFY_MEASURED; n++) lg_trace_free(&s->ver[n]);
        lg_trace_free(&s->dec);
        lg_model_close(s->m);
    }
}

static double cost_us(const lg_trace *t, int path, const lg_device *d) {
    lg_step st;
    sd_err e;
    return lg_cost(t, path, d, &st, &e) ? NAN : st.us;
}

static void print_decode(const lg_device *d, int ctx) {
    printf("decode, one row at position %d: launches (graph nodes), grid-wide waits (+ partial), "
           "MB read and written, predicted step\n",
           ctx);
    printf("  %-18s %-17s %9s %6s %7s %7s %6s %8s %9s %9s %7s  %s\n", "shape", "path", "launches",
           "waits", "wt MB", "KV MB", "act MB", "us/step", "tok/s", "bound", "% bound", "target");
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        const shape *s = &g_shape[i];
        double toks_goal, pct_goal;
        target(s->p->name, &toks_goal, &pct_goal);
        const double bound = d->v[LG_COPY_GBS] * 1e9 / s->weight_bytes;
        for (int path = 0; path < LG_NPATH; path++) {
            lg_step st;
            sd_err e;
            if (lg_cost(&s->at[1], path, d, &st, &e)) continue;
            char lw[32], wt[32], goal[48] = "";
            snprintf(lw, sizeof lw, st.nodes ? "%d (%d)" : "%d", st.launches, st.nodes);
            snprintf(wt, sizeof wt, st.partial ? "%d+%d" : "%d", st.waits, st.partial);
            const double toks = 1e6 / st.us, pct = 100 * toks / bound;
            if (toks_goal > 0)
                snprintf(goal, sizeof goal, ">= %.0f tok/s: %s", toks_goal, toks >= toks_goal ? "met" : "not met");
            else if (pct_goal > 0)
                snprintf(goal, sizeof goal, ">= %.0f%%: %s", pct_goal, pct >= pct_goal ? "met" : "not met");
            printf("  %-18s %-17s %9s %6s %7.1f %7.1f %6.1f %8.1f %9.0f %9.0f %6.1f%%  %s\n",
                   path ? "" : s->p->name, lg_path_name(path), lw, wt, st.w_bytes / 1e6,
                   st.kv_bytes / 1e6, st.act_bytes / 1e6, st.us, toks, bound, pct, goal);
        }
    }
}

static void print_verify(const lg_device *d, int ctx) {
    printf("verify, n rows at position %d as a multiple of one row (targets:", ctx);
    for (int i = 0; i < g_targets.n_verify; i++)
        printf("%s <= %.2fx up to %d rows", i ? "," : "", g_targets.verify_ratio[i], g_targets.verify_rows[i]);
    printf(")\n  %-18s %-17s", "shape", "path");
    for (int n = 2; n <= MAX_ROWS; n++) printf(" %5d", n);
    printf("  target\n");
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        const shape *s = &g_shape[i];
        for (int path = 0; path < LG_NPATH; path++) {
            const double t1 = cost_us(&s->at[1], path, d);
            int ok = 1;
            printf("  %-18s %-17s", path ? "" : s->p->name, lg_path_name(path));
            for (int n = 2; n <= MAX_ROWS; n++) {
                const double r = cost_us(&s->at[n], path, d) / t1;
                const double lim = lg_targets_verify(&g_targets, n);
                ok &= lim <= 0 || r <= lim;
                printf(" %5.2f", r);
            }
            printf("  %s\n", ok ? "met" : "not met");
        }
    }
}

/* The verification steps themselves at a few widths: launches, waits,
 * weight and KV MB, predicted microseconds. */
static void print_verify_steps(const lg_device *d, int ctx) {
    static const int rows[] = {2, 5, 9, 16};
    printf("verify steps at position %d: launches / waits (+ partial) / weight MB / KV MB / us\n  %-18s %-17s",
           ctx, "shape", "path");
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) printf("  %-30d", rows[k]);
    printf("\n");
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        const shape *s = &g_shape[i];
        for (int path = 0; path < LG_NPATH; path++) {
            printf("  %-18s %-17s", path ? "" : s->p->name, lg_path_name(path));
            for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
                lg_step st;
                sd_err e;
                char cell[64] = "-", waits[24];
                if (lg_cost(&s->at[rows[k]], path, d, &st, &e) == 0) {
                    snprintf(waits, sizeof waits, st.partial ? "%d+%d" : "%d", st.waits, st.partial);
                    snprintf(cell, sizeof cell, "%d/%s/%.0f/%.1f/%.0f", st.launches, waits,
                             st.w_bytes / 1e6, st.kv_bytes / 1e6, st.us);
                }
                printf("  %-30s", cell);
            }
            printf("\n");
        }
    }
}

static void print_spec(const lg_device *d) {
    printf("speculative decoding implied by these costs: best speedup over gamma = 1..%d "
           "(gamma in brackets) at acceptance alpha per draft (target >= %.1fx at the pair's "
           "%.2f-%.2f)\n  %-36s %-17s",
           MAX_ROWS - 1, g_targets.spec, g_alpha[0], g_alpha[g_n_alpha - 2], "target <- drafter", "path");
    for (int a = 0; a < g_n_alpha; a++) printf("   alpha %.3f", g_alpha[a]);
    printf("\n");
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) {
        const shape *t = find_shape(k_pairs[i][0]), *dr = find_shape(k_pairs[i][1]);
        char pair[64];
        snprintf(pair, sizeof pair, "%s <- %s", k_pairs[i][0], k_pairs[i][1]);
        for (int path = 0; path < LG_NPATH; path++) {
            const double t1 = cost_us(&t->at[1], path, d), td = cost_us(&dr->at[1], path, d);
            printf("  %-36s %-17s", path ? "" : pair, lg_path_name(path));
            for (int a = 0; a < g_n_alpha; a++) {
                double best = 0;
                int bg = 0;
                for (int g = 1; g < MAX_ROWS; g++) {
                    const double sp = lg_spec_speedup(g_alpha[a], g, t1, td, cost_us(&t->at[g + 1], path, d));
                    if (sp > best) best = sp, bg = g;
                }
                printf("   %5.2fx (%2d)", best, bg);
            }
            printf("\n");
        }
    }
}

/* What gpu-check's spec steps (bench_gpu_check spec, gamma 4, graph+pdl,
 * 128 tokens after 32) should find, costed at VERIFY_AT: the self-drafting
 * runs at acceptance 1, the pairs at the targets file's rates. */
#define CHECK_GAMMA 4
static void print_check_spec(const lg_device *d) {
    printf("gpu-check's spec steps as predicted (gamma %d, graph+pdl, position %d): speedup over "
           "decoding alone\n",
           CHECK_GAMMA, VERIFY_AT);
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++)
        for (int self = 1; self >= 0; self--) {
            const shape *t = find_shape(k_pairs[i][0]), *dr = self ? t : find_shape(k_pairs[i][1]);
            const double t1 = cost_us(&t->ver[1], LG_GRAPH_PDL, d), td = cost_us(&dr->ver[1], LG_GRAPH_PDL, d);
            const double tv = cost_us(&t->ver[CHECK_GAMMA + 1], LG_GRAPH_PDL, d);
            printf("  %-18s <- %-18s", t->p->name, self ? "itself" : dr->p->name);
            for (int a = self ? g_n_alpha - 1 : 0; a < (self ? g_n_alpha : g_n_alpha - 1); a++)
                printf("  alpha %.3f: %.2fx", g_alpha[a], lg_spec_speedup(g_alpha[a], CHECK_GAMMA, t1, td, tv));
            printf("\n");
        }
}

/* The prediction next to each measured figure of dev; returns the mean
 * |log error| of the decode and verify figures (NAN when none) in *dec
 * and *ver. */
static void check_points(const lg_consts *c, int dev, const lg_device *d, int print, double *dec,
                         double *ver) {
    double sd = 0, sv = 0;
    int nd = 0, nv = 0;
    for (int i = 0; i < c->n_pt; i++) {
        const lg_point *pt = &c->pt[i];
        if (pt->dev != dev) continue;
        char name[64];
        int n = 0;
        const int is_dec = !strncmp(pt->key, "decode_nofold:", 14);
        snprintf(name, sizeof name, "%s", pt->key + 14);
        char *colon = strchr(name, ':');
        if (colon) {
            n = atoi(colon + 1);
            *colon = 0;
        }
        const shape *s = find_shape(name);
        if (!s || (!is_dec && (n < 1 || n > VERIFY_MEASURED))) {
            if (print) printf("  %-36s no such shape or row count in the ledger\n", pt->key);
            continue;
        }
        double pred, meas = pt->value;
        if (is_dec) pred = 1e6 / cost_us(&s->dec, LG_GRAPH_PDL_NOFOLD, d);
        else pred = cost_us(&s->ver[n], LG_GRAPH_PDL_NOFOLD, d) / 1e3;
        const double err = log(pred / meas);
        if (is_dec) sd += fabs(err), nd++;
        else sv += fabs(err), nv++;
        if (print)
            printf("  %-36s measured %9.3f %-5s predicted %9.3f  error %+6.1f%%  (%s)\n", pt->key,
                   meas, is_dec ? "tok/s" : "ms", pred, 100 * (pred / meas - 1),
                   c->pt_source[i]);
    }
    *dec = nd ? sd / nd : NAN;
    *ver = nv ? sv / nv : NAN;
}

/* The best implied speedup over gamma at alpha for a pair on a path. */
static double best_spec(const shape *t, const shape *dr, int path, const lg_device *d, double alpha) {
    const double t1 = cost_us(&t->at[1], path, d), td = cost_us(&dr->at[1], path, d);
    double best = 0;
    for (int g = 1; g < MAX_ROWS; g++) {
        const double sp = lg_spec_speedup(alpha, g, t1, td, cost_us(&t->at[g + 1], path, d));
        if (sp > best) best = sp;
    }
    return best;
}

/* The predictions against each target, one column per device and path
 * (graph+pdl as the backend is, persistent as it could be). */
static void print_markdown(const lg_consts *c, int ctx, const char *commit) {
    static const int paths[2] = {LG_GRAPH_PDL, LG_PERSISTENT};
    printf("---- for docs/gpu.md (step ledger, %s, position %d)\n\n| target |", commit, ctx);
    for (int dev = 0; dev < LG_NDEV; dev++)
        for (int p = 0; p < 2; p++) printf(" %s %s |", lg_dev_name(dev), lg_path_name(paths[p]));
    printf("\n|---|---|---|---|---|\n");
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        const shape *s = &g_shape[i];
        double toks_goal, pct_goal;
        target(s->p->name, &toks_goal, &pct_goal);
        if (toks_goal <= 0 && pct_goal <= 0) continue;
        if (toks_goal > 0) printf("| %s decode >= %.0f tok/s |", s->p->name, toks_goal);
        else printf("| %s decode >= %.0f%% of the copy bound |", s->p->name, pct_goal);
        for (int dev = 0; dev < LG_NDEV; dev++)
            for (int p = 0; p < 2; p++) {
                const double toks = 1e6 / cost_us(&s->at[1], paths[p], &c->dev[dev]);
                const double pct = 100 * toks * s->weight_bytes / (c->dev[dev].v[LG_COPY_GBS] * 1e9);
                const int met = toks_goal > 0 ? toks >= toks_goal : pct >= pct_goal;
                printf(" %.0f tok/s, %.1f%%%s |", toks, pct, met ? " (met)" : "");
            }
        printf("\n");
    }
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) {
        const shape *t = find_shape(k_pairs[i][0]);
        printf("| %s verify, worst n-row / 1-row ratio: n <= %d, n <= %d (targets %.2fx, %.2fx) |",
               t->p->name, g_targets.verify_rows[0], g_targets.verify_rows[1],
               g_targets.verify_ratio[0], g_targets.verify_ratio[1]);
        for (int dev = 0; dev < LG_NDEV; dev++)
            for (int p = 0; p < 2; p++) {
                const double t1 = cost_us(&t->at[1], paths[p], &c->dev[dev]);
                double worst[2] = {0, 0};
                for (int n = 2; n <= MAX_ROWS; n++)
                    for (int k = 0; k < 2; k++) {
                        const double r = cost_us(&t->at[n], paths[p], &c->dev[dev]) / t1;
                        if (n <= g_targets.verify_rows[k] && r > worst[k]) worst[k] = r;
                    }
                const int met = worst[0] <= g_targets.verify_ratio[0] && worst[1] <= g_targets.verify_ratio[1];
                printf(" %.2fx, %.2fx%s |", worst[0], worst[1], met ? " (met)" : "");
            }
        printf("\n");
    }
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) {
        const shape *t = find_shape(k_pairs[i][0]), *dr = find_shape(k_pairs[i][1]);
        printf("| %s <- %s spec >= %.1fx at alpha %.2f-%.2f |", t->p->name, dr->p->name,
               g_targets.spec, g_alpha[0], g_alpha[g_n_alpha - 2]);
        for (int dev = 0; dev < LG_NDEV; dev++)
            for (int p = 0; p < 2; p++) {
                const double lo = best_spec(t, dr, paths[p], &c->dev[dev], g_alpha[0]);
                const double hi = best_spec(t, dr, paths[p], &c->dev[dev], g_alpha[g_n_alpha - 2]);
                printf(" %.2f-%.2fx%s |", lo, hi, lo >= g_targets.spec ? " (met)" : "");
            }
        printf("\n");
    }
}

static void print_device(const lg_consts *c, int dev, int ctx) {
    const lg_device *d = &c->dev[dev];
    printf("==== %s\nconstants:", lg_dev_name(dev));
    for (int k = 0; k < LG_NCONST; k++) printf(" %s %g%s", lg_const_name(k), d->v[k], k + 1 < LG_NCONST ? "," : "\n");
    print_decode(d, ctx);
    print_verify(d, ctx);
    print_verify_steps(d, ctx);
    print_spec(d);
    print_check_spec(d);
    printf("the ledger against the measured figures (graph+pdl nofold: what those runs ran; "
           "decode at position %d, verify at %d)\n",
           DECODE_AT, VERIFY_AT);
    double ed, ev;
    check_points(c, dev, d, 1, &ed, &ev);
    printf("  mean |error|: decode %.1f%%, verify %.1f%%\n\n", 100 * (exp(ed) - 1), 100 * (exp(ev) - 1));
}

/* Grid search of eta and kernel_us on the decode figures, then quant_rate
 * on the verify figures, three rounds. */
static int fit(lg_consts *c, int dev) {
    lg_device *d = &c->dev[dev];
    double ed, ev;
    check_points(c, dev, d, 0, &ed, &ev);
    if (isnan(ed) || isnan(ev)) {
        fprintf(stderr, "step_ledger: --fit needs decode_nofold and verify_nofold figures for %s\n",
                lg_dev_name(dev));
        return 1;
    }
    for (int round = 0; round < 3; round++) {
        double best = INFINITY, be = d->v[LG_ETA], bk = d->v[LG_KERNEL_US];
        for (double eta = 0.30; eta <= 1.0001; eta += 0.01)
            for (double k = 0.5; k <= 8.0001; k += 0.05) {
                d->v[LG_ETA] = eta, d->v[LG_KERNEL_US] = k;
                check_points(c, dev, d, 0, &ed, &ev);
                if (ed < best) best = ed, be = eta, bk = k;
            }
        d->v[LG_ETA] = be, d->v[LG_KERNEL_US] = bk;
        double bestv = INFINITY, br = d->v[LG_QUANT_RATE];
        for (double r = 1e12; r <= 1e14; r *= 1.02) {
            d->v[LG_QUANT_RATE] = r;
            check_points(c, dev, d, 0, &ed, &ev);
            if (ev < bestv) bestv = ev, br = r;
        }
        d->v[LG_QUANT_RATE] = br;
    }
    check_points(c, dev, d, 0, &ed, &ev);
    printf("eta        %s %.2f  fit to the decode_nofold figures (mean |error| %.1f%%)\n",
           lg_dev_name(dev), d->v[LG_ETA], 100 * (exp(ed) - 1));
    printf("kernel_us  %s %.2f  fit to the decode_nofold figures\n", lg_dev_name(dev),
           d->v[LG_KERNEL_US]);
    printf("quant_rate %s %.3g  fit to the verify_nofold figures (mean |error| %.1f%%)\n",
           lg_dev_name(dev), d->v[LG_QUANT_RATE], 100 * (exp(ev) - 1));
    return 0;
}

int main(int argc, char **argv) {
    int ctx = 1024, fit_dev = -1;
    const char *commit = "commit not given";
    for (int i = 3; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (v && !strcmp(argv[i], "--ctx")) {
            /* every shape must hold the position and MAX_ROWS rows after it */
            int most = INT_MAX;
            for (int k = 0; k < SYNTH_N_PRESETS; k++)
                if (k_synth_presets[k].ctx - MAX_ROWS - 1 < most) most = k_synth_presets[k].ctx - MAX_ROWS - 1;
            const long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > most) {
                fprintf(stderr, "step_ledger: --ctx '%s' is not a position in 1..%d (the shortest context)\n", v, most);
                return 2;
            }
            ctx = (int)n;
        } else if (v && !strcmp(argv[i], "--commit")) {
            commit = v;
        } else if (v && !strcmp(argv[i], "--fit")) {
            for (int d = 0; d < LG_NDEV; d++)
                if (!strcmp(v, lg_dev_name(d))) fit_dev = d;
            if (fit_dev < 0) {
                fprintf(stderr, "step_ledger: --fit '%s' is not h100 or h200\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "step_ledger: bad option '%s'%s%s\n", argv[i], v ? " " : " (no value)", v ? v : "");
            return 2;
        }
    }
    if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
        fprintf(stderr, "usage: step_ledger CONSTANTS TARGETS [--ctx N] [--commit C] [--fit h100|h200]\n");
        return 2;
    }
    static lg_consts c;
    sd_err e;
    if (lg_consts_load(argv[1], &c, &e) || lg_targets_load(argv[2], &g_targets, &e)) {
        fprintf(stderr, "step_ledger: %s\n", e.msg);
        return 1;
    }
    if (g_targets.n_verify < 2) {
        fprintf(stderr, "step_ledger: %s: two verify targets wanted (a short and a long call)\n", argv[2]);
        return 1;
    }
    set_alpha();
    int rc = open_shapes(ctx, &e);
    if (rc) {
        fprintf(stderr, "step_ledger: %s\n", e.msg);
    } else if (fit_dev >= 0) {
        rc = fit(&c, fit_dev);
    } else {
        printf("GPU step ledger: constants %s, targets %s; the ops of each step recorded from engine/model "
               "(graph+pdl: backend_cuda.cu's launches; persistent: one cooperative launch)\n\n",
               argv[1], argv[2]);
        for (int dev = 0; dev < LG_NDEV; dev++) print_device(&c, dev, ctx);
        print_markdown(&c, ctx, commit);
    }
    close_shapes();
    return rc ? 1 : 0;
}
