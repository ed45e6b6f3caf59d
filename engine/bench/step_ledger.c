/* The GPU step ledger (engine/bench/ledger/ledger.h), printed: for each
 * device kind of the constants file and each model shape of
 * engine/bench/synth_presets.h, what a decode step and an n-row verification
 * cost on each CUDA path (graph+pdl, the persistent step with stage waits
 * and as it runs, with a chunk wait and prefetch, the mma products),
 * counted on the CPU from the ops engine/model calls; the predicted tok/s
 * against the copy-bandwidth bound and the targets; the n-row / 1-row
 * ratios; the speculative speedup those costs imply; the prediction next to
 * every measured figure of the file; and for every target, per path, the
 * verdict and the break-even value of each constant that decides it.
 *
 *   step_ledger CONSTANTS TARGETS [--ctx N] [--commit C]
 *       the tables, the verdicts, then the predictions for each target as
 *       the markdown table of docs/gpu.md ("The step ledger"), stamped with
 *       commit C (make ledger passes the checkout's)
 *   step_ledger CONSTANTS TARGETS --fit DEVICE    after a device run: the
 *       constants that fit the file's measured figures of DEVICE best
 *       (least squares of log(predicted / measured)), printed as lines for
 *       the file: eta, kernel_us, quant_rate always, tail_us, flag_us and
 *       mma_eff where figures of their paths exist; flag_us and load_us
 *       from the persistent-step microbenchmark's persist: figures
 *
 * TARGETS: docs/perf/gpu-targets.txt (the targets and the acceptance
 * rates the speedups are implied at). --ctx: the position of the tables'
 * steps (default 1024). The measured figures were taken at other positions
 * (gpu-check: 128 tokens decoded after 32, verification at 64), and are
 * predicted there. */
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

typedef struct shape {
    const synth_preset *p;
    lg_model *m;
    double weight_bytes;
    lg_trace at[MAX_ROWS + 1];  /* n rows at the table's position */
    lg_trace dec;               /* one row at DECODE_AT */
    lg_trace ver[MAX_ROWS + 1]; /* n rows at VERIFY_AT */
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
        for (int n = 1; n <= MAX_ROWS; n++)
            if (lg_model_trace(s->m, n, VERIFY_AT, &s->ver[n], e)) return -1;
    }
    return 0;
}

static void close_shapes(void) {
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        shape *s = &g_shape[i];
        for (int n = 0; n <= MAX_ROWS; n++) lg_trace_free(&s->at[n]);
        for (int n = 0; n <= MAX_ROWS; n++) lg_trace_free(&s->ver[n]);
        lg_trace_free(&s->dec);
        lg_model_close(s->m);
    }
}

static double cost_us(const lg_trace *t, int path, const lg_device *d) {
    lg_step st;
    sd_err e;
    return lg_cost(t, path, d, &st, &e) ? NAN : st.us;
}

/* The paths the decode table lists: the mma paths' one-row step is their
 * dp4a path's. */
static int decode_path(int path) { return path != LG_GRAPH_PDL_MMA && path != LG_PERSIST_FINE_MMA; }

static void print_decode(const lg_device *d, int ctx) {
    printf("decode, one row at position %d: launches (graph nodes, or the persistent launch's "
           "stages, the argmax among them), stage-level + item-level waits (per "
           "layer), MB read and written, predicted step (of it exposed: launches, waits, host)\n",
           ctx);
    printf("  %-18s %-17s %10s %15s %7s %6s %6s %8s %8s %7s %7s %6s  %s\n", "shape", "path", "launches",
           "waits (/layer)", "wt MB", "KV MB", "act MB", "us/step", "exposed", "tok/s", "bound",
           "%bound", "target");
    for (int i = 0; i < SYNTH_N_PRESETS; i++) {
        const shape *s = &g_shape[i];
        double toks_goal, pct_goal;
        target(s->p->name, &toks_goal, &pct_goal);
        const double bound = d->v[LG_COPY_GBS] * 1e9 / s->weight_bytes;
        for (int path = 0, first = 1; path < LG_NPATH; path++) {
            lg_step st;
            sd_err e;
            if (!decode_path(path) || lg_cost(&s->at[1], path, d, &st, &e)) continue;
            char lw[32], wt[48], goal[48] = "";
            snprintf(lw, sizeof lw, st.stages ? "%d (%d st)" : st.nodes ? "%d (%d)" : "%d", st.launches,
                     st.stages ? st.stages : st.nodes);
            snprintf(wt, sizeof wt, "%d+%d (%.1f)", st.waits, st.partial,
                     (double)(st.waits + st.partial) / s->p->n_layers);
            const double toks = 1e6 / st.us, pct = 100 * toks / bound;
            if (toks_goal > 0)
                snprintf(goal, sizeof goal, ">= %.0f tok/s: %s", toks_goal, toks >= toks_goal ? "met" : "not met");
            else if (pct_goal > 0)
                snprintf(goal, sizeof goal, ">= %.0f%%: %s", pct_goal, pct >= pct_goal ? "met" : "not met");
            printf("  %-18s %-17s %10s %15s %7.1f %6.1f %6.1f %8.1f %8.1f %7.0f %7.0f %5.1f%%  %s\n",
                   first ? s->p->name : "", lg_path_name(path), lw, wt, st.w_bytes / 1e6,
                   st.kv_bytes / 1e6, st.act_bytes / 1e6, st.us, st.exposed_us, toks, bound, pct, goal);
            first = 0;
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

/* The verification steps themselves at a few widths: waits, weight and KV
 * MB, the bytes' time and the products' compute summed over the kernels,
 * and the predicted microseconds. */
static void print_verify_steps(const lg_device *d, int ctx) {
    static const int rows[] = {2, 5, 9, 16};
    printf("verify steps at position %d: waits (stage+item) / weight MB / KV MB / bytes us / "
           "compute us / predicted us\n  %-18s %-17s",
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
                char cell[80] = "-";
                if (lg_cost(&s->at[rows[k]], path, d, &st, &e) == 0)
                    snprintf(cell, sizeof cell, "%d+%d/%.0f/%.1f/%.0f/%.0f/%.0f", st.waits, st.partial,
                             st.w_bytes / 1e6, st.kv_bytes / 1e6, st.mem_us, st.work_us, st.us);
                printf("  %-30s", cell);
            }
            printf("\n");
        }
    }
}

/* The best implied speedup over gamma at alpha for a pair on a path, the
 * target's calls of 1..MAX_ROWS rows tr[], the drafter's step dr1; its
 * gamma in *g when g is not NULL. */
static double best_spec(const lg_trace *tr, const lg_trace *dr1, int path, const lg_device *d, double alpha,
                        int *g) {
    const double t1 = cost_us(&tr[1], path, d), td = cost_us(dr1, path, d);
    double best = 0;
    for (int k = 1; k < MAX_ROWS; k++) {
        const double sp = lg_spec_speedup(alpha, k, t1, td, cost_us(&tr[k + 1], path, d));
        if (sp > best) {
            best = sp;
            if (g) *g = k;
        }
    }
    return best;
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
            printf("  %-36s %-17s", path ? "" : pair, lg_path_name(path));
            for (int a = 0; a < g_n_alpha; a++) {
                int bg = 0;
                const double best = best_spec(t->at, &dr->at[1], path, d, g_alpha[a], &bg);
                printf("   %5.2fx (%2d)", best, bg);
            }
            printf("\n");
        }
    }
}

/* What gpu-check's spec steps (bench_gpu_check spec, gamma 4, 128 tokens
 * after 32) should find, costed at VERIFY_AT on the paths the runs take
 * (graph+pdl, and with SD_CUDA_MMA=1 the _mma steps): the self-drafting
 * runs at acceptance 1, the pairs at the targets file's rates. */
#define CHECK_GAMMA 4
static void print_check_spec(const lg_device *d) {
    static const int paths[] = {LG_GRAPH_PDL, LG_GRAPH_PDL_MMA};
    printf("gpu-check's spec steps as predicted (gamma %d, position %d): speedup over decoding alone\n",
           CHECK_GAMMA, VERIFY_AT);
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++)
            for (int self = 1; self >= 0; self--) {
                const shape *t = find_shape(k_pairs[i][0]), *dr = self ? t : find_shape(k_pairs[i][1]);
                const double t1 = cost_us(&t->ver[1], paths[p], d), td = cost_us(&dr->ver[1], paths[p], d);
                const double tv = cost_us(&t->ver[CHECK_GAMMA + 1], paths[p], d);
                printf("  %-17s %-18s <- %-18s", lg_path_name(paths[p]), t->p->name, self ? "itself" : dr->p->name);
                for (int a = self ? g_n_alpha - 1 : 0; a < (self ? g_n_alpha : g_n_alpha - 1); a++)
                    printf("  alpha %.3f: %.2fx", g_alpha[a], lg_spec_speedup(g_alpha[a], CHECK_GAMMA, t1, td, tv));
                printf("\n");
            }
}

/* ---- the measured figures ------------------------------------------------ */

enum { PT_DECODE = 1, PT_VERIFY = 2 };

/* The prediction next to each measured figure of dev whose path is in the
 * mask (a bit a path) and whose kind is in kinds; the mean |log error| of
 * them (NAN when none). */
static double check_points(const lg_consts *c, int dev, const lg_device *d, int print, unsigned mask,
                           int kinds) {
    double sum = 0;
    int cnt = 0;
    for (int i = 0; i < c->n_pt; i++) {
        const lg_point *pt = &c->pt[i];
        const int path = lg_point_path(pt->key);
        const int is_dec = !strncmp(pt->key, "decode_", 7);
        if (pt->dev != dev || !(mask >> path & 1) || !(kinds & (is_dec ? PT_DECODE : PT_VERIFY))) continue;
        char name[64];
        int n = 0;
        snprintf(name, sizeof name, "%s", strchr(pt->key, ':') + 1);
        char *colon = strchr(name, ':');
        if (colon) {
            n = atoi(colon + 1);
            *colon = 0;
        }
        const shape *s = find_shape(name);
        if (!s || (!is_dec && (n < 1 || n > MAX_ROWS))) {
            if (print) printf("  %-36s no such shape or row count in the ledger\n", pt->key);
            continue;
        }
        const double meas = pt->value;
        const double pred = is_dec ? 1e6 / cost_us(&s->dec, path, d) : cost_us(&s->ver[n], path, d) / 1e3;
        sum += fabs(log(pred / meas)), cnt++;
        if (print)
            printf("  %-36s measured %9.3f %-5s predicted %9.3f  error %+6.1f%%  (%s)\n", pt->key,
                   meas, is_dec ? "tok/s" : "ms", pred, 100 * (pred / meas - 1), c->pt_source[i]);
    }
    return cnt ? sum / cnt : NAN;
}

#define ALL_PATHS ((1u << LG_NPATH) - 1)
#define GRAPH_PATHS (1u << LG_GRAPH_PDL | 1u << LG_GRAPH_PDL_NOFOLD)
#define MMA_PATHS (1u << LG_GRAPH_PDL_MMA | 1u << LG_PERSIST_FINE_MMA)

/* ---- the verdicts -------------------------------------------------------- */

/* Every target of the targets file as one question: a decode target of a
 * preset, the verification targets at a pair's target shape, the spec
 * target of a pair at the lowest acceptance. */
enum { G_DECODE, G_VERIFY, G_SPEC };
typedef struct goal {
    int kind, pct;
    const shape *s, *dr;
    double want;
    char what[112];
} goal;

#define MAX_GOALS (LG_MAX_TARGETS + 4)
static goal g_goal[MAX_GOALS];
static int g_n_goal;

static void set_goals(void) {
    g_n_goal = 0;
    for (int i = 0; i < g_targets.n_decode && g_n_goal < MAX_GOALS; i++) {
        goal *g = &g_goal[g_n_goal];
        g->s = find_shape(g_targets.decode[i].preset);
        if (!g->s) continue;
        g->kind = G_DECODE, g->pct = g_targets.decode[i].pct, g->want = g_targets.decode[i].value;
        snprintf(g->what, sizeof g->what, "%s decode >= %.0f%s", g->s->p->name, g->want,
                 g->pct ? "% of the copy bound" : " tok/s");
        g_n_goal++;
    }
    for (int kind = G_VERIFY; kind <= G_SPEC; kind++)
        for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0] && g_n_goal < MAX_GOALS; i++) {
            goal *g = &g_goal[g_n_goal++];
            g->kind = kind, g->s = find_shape(k_pairs[i][0]), g->dr = find_shape(k_pairs[i][1]);
            if (kind == G_VERIFY)
                snprintf(g->what, sizeof g->what, "%s verify <= %.2fx up to %d rows, <= %.2fx up to %d",
                         g->s->p->name, g_targets.verify_ratio[0], g_targets.verify_rows[0],
                         g_targets.verify_ratio[1], g_targets.verify_rows[1]);
            else
                snprintf(g->what, sizeof g->what, "%s <- %s spec >= %.1fx at alpha %.3f", g->s->p->name,
                         g->dr->p->name, g_targets.spec, g_alpha[0]);
        }
}

/* The goal on a path with constants d: its score (met when >= 1: the value
 * over the target, or the target over the value for ratios) and the text
 * of the value. */
static double score(const goal *g, int path, const lg_device *d, char *txt, size_t cap) {
    if (g->kind == G_DECODE) {
        const double toks = 1e6 / cost_us(&g->s->dec, path, d);
        const double pct = 100 * toks * g->s->weight_bytes / (d->v[LG_COPY_GBS] * 1e9);
        if (txt) snprintf(txt, cap, "%.0f tok/s, %.1f%%", toks, pct);
        return (g->pct ? pct : toks) / g->want;
    }
    if (g->kind == G_SPEC) {
        const double sp = best_spec(g->s->ver, &g->dr->ver[1], path, d, g_alpha[0], NULL);
        if (txt)
            snprintf(txt, cap, "%.2fx (%.2fx at %.3f)", sp,
                     best_spec(g->s->ver, &g->dr->ver[1], path, d, g_alpha[g_n_alpha - 2], NULL),
                     g_alpha[g_n_alpha - 2]);
        return sp / g_targets.spec;
    }
    const double t1 = cost_us(&g->s->ver[1], path, d);
    double worst[2] = {0, 0}, sc = INFINITY;
    for (int n = 2; n <= MAX_ROWS; n++)
        for (int k = 0; k < 2; k++) {
            const double r = cost_us(&g->s->ver[n], path, d) / t1;
            if (n <= g_targets.verify_rows[k] && r > worst[k]) worst[k] = r;
        }
    for (int k = 0; k < 2; k++)
        if (worst[k] > 0 && g_targets.verify_ratio[k] / worst[k] < sc) sc = g_targets.verify_ratio[k] / worst[k];
    if (txt) snprintf(txt, cap, "%.2fx, %.2fx", worst[0], worst[1]);
    return sc;
}

/* The constants a verdict can turn on, each with the range a device could
 * plausibly give it; better_hi: the end that helps every target. WAITS is
 * not a constant: every latency of a persistent step's waits and stages
 * (flag_us, tail_us, load_us, op_us) scaled together by a factor. */
#define WAITS (-1)
static const struct {
    int k;
    double lo, hi;
    int better_hi;
    const char *why;
} k_range[] = {
    {LG_ETA, 0.5, 1.0, 1, "1: the device-to-device copy's own rate"},
    {LG_KERNEL_US, 1.0, 8, 0, "a PDL boundary is at least a block's start and its wait, assumed 1 us"},
    {LG_STEP_US, 3, 40, 0, "a graph launch and a 4-byte copy back, assumed 3 us"},
    {LG_BUILD_US, 0, 2, 0, "0: a work list kept per step shape"},
    {LG_FLAG_US, 0.3, 5, 0, "a release and a polling acquire through L2, two L2 round trips, assumed 0.3 us"},
    {LG_TAIL_US, 0, 10, 0, "0: every item of a stage ends together"},
    {LG_LOAD_US, 0, 3, 0, "0: weights found in L2"},
    {LG_OP_US, 0.3, 5, 0, "a norm stage's chain of L2 round trips, assumed 0.3 us"},
    {LG_QUANT_RATE, 1e12, 2e13, 1, "4x the dp4a fit: the dequantisation halved, dp4a at its peak share"},
    {LG_MMA_EFF, 0.05, 1.0, 1, "1: the tensor cores' published dense peak"},
    {WAITS, 0, 4, 0, "0: no wait or stage latency exposed"},
};
#define N_RANGE (sizeof k_range / sizeof k_range[0])

static int is_graph(int path) {
    return path == LG_GRAPH_PDL || path == LG_GRAPH_PDL_NOFOLD || path == LG_GRAPH_PDL_MMA;
}

/* Whether a path's time depends on constant k. */
static int path_uses(int path, int k) {
    if (k == LG_KERNEL_US) return is_graph(path);
    if (k == LG_BUILD_US) return path == LG_PERSIST_STAGE;
    if (k == LG_FLAG_US || k == LG_TAIL_US || k == LG_LOAD_US || k == LG_OP_US || k == WAITS)
        return !is_graph(path);
    if (k == LG_MMA_EFF) return path == LG_GRAPH_PDL_MMA || path == LG_PERSIST_FINE_MMA;
    if (k == LG_SMEM_US) return path == LG_PERSIST_FINE_SMEM;
    return 1;
}

/* base with k_range[r]'s knob at v. */
static lg_device with(const lg_device *base, size_t r, double v) {
    lg_device x = *base;
    if (k_range[r].k != WAITS) {
        x.v[k_range[r].k] = v;
    } else {
        static const int lat[] = {LG_FLAG_US, LG_TAIL_US, LG_LOAD_US, LG_OP_US};
        for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++) x.v[lat[i]] *= v;
    }
    return x;
}

/* The value of k_range[r]'s knob at which the goal's score crosses 1, the
 * rest as d has them: bisection inside the plausible range. 0 and *at
 * filled when it crosses there; -1 when no plausible value meets it; 1
 * when every plausible value does. */
static int break_even(const goal *g, int path, const lg_device *d, size_t r, double *at) {
    double good = k_range[r].better_hi ? k_range[r].hi : k_range[r].lo;
    double bad = k_range[r].better_hi ? k_range[r].lo : k_range[r].hi;
    lg_device x = with(d, r, good);
    if (score(g, path, &x, NULL, 0) < 1) return -1;
    x = with(d, r, bad);
    if (score(g, path, &x, NULL, 0) >= 1) return 1;
    for (int it = 0; it < 40; it++) {
        const double mid = k_range[r].k == LG_QUANT_RATE ? sqrt(good * bad) : (good + bad) / 2;
        x = with(d, r, mid);
        if (score(g, path, &x, NULL, 0) >= 1) good = mid;
        else bad = mid;
    }
    *at = good;
    return 0;
}

/* d with every constant a path uses at its plausible best. */
static lg_device best_case(const lg_device *d, int path) {
    lg_device x = *d;
    for (size_t r = 0; r < N_RANGE; r++)
        if (path_uses(path, k_range[r].k) && k_range[r].k != WAITS)
            x.v[k_range[r].k] = k_range[r].better_hi ? k_range[r].hi : k_range[r].lo;
    return x;
}

/* What a stage-level and an item-level wait of a persistent path expose
 * with constants d (ledger_cost.c's rule, shown in the verdicts). */
static void wait_costs(const lg_device *d, int path, double *stage, double *item) {
    const double *v = d->v;
    if (path == LG_PERSIST_STAGE) {
        *stage = *item = v[LG_FLAG_US] + v[LG_TAIL_US] + v[LG_LOAD_US];
        return;
    }
    const double s = v[LG_FLAG_US] + v[LG_TAIL_US], i = v[LG_FLAG_US];
    /* staged: the stage-level waits are before the products */
    *stage = path == LG_PERSIST_FINE_SMEM ? s + v[LG_SMEM_US] : s > v[LG_LOAD_US] ? s : v[LG_LOAD_US];
    *item = i > v[LG_LOAD_US] ? i : v[LG_LOAD_US];
}

/* The paths the verdicts judge: the default, the persistent step with
 * stage waits and as it runs, the mma, and the two together. */
static const int k_judged[] = {LG_GRAPH_PDL, LG_PERSIST_STAGE, LG_PERSIST_FINE, LG_GRAPH_PDL_MMA,
                               LG_PERSIST_FINE_MMA};
#define N_JUDGED (sizeof k_judged / sizeof k_judged[0])

/* The break-even of the waits' scale with d, as the exposed latency of a
 * stage-level / item-level wait, into buf, with the lowest plausible
 * stage-level wait (flag_us at its floor, no tail, no load) beside it. */
static void waits_even(const goal *g, int path, const lg_device *d, char *buf, size_t cap) {
    double f, st, it, floor_st, floor_it;
    const lg_device b = best_case(d, path);
    wait_costs(&b, path, &floor_st, &floor_it);
    const int rc = break_even(g, path, d, N_RANGE - 1, &f);
    if (rc < 0) {
        snprintf(buf, cap, "at eta %.2f not met even with no wait exposed", d->v[LG_ETA]);
        return;
    }
    if (rc > 0) {
        const lg_device x = with(d, N_RANGE - 1, k_range[N_RANGE - 1].hi);
        wait_costs(&x, path, &st, &it);
        snprintf(buf, cap, "at eta %.2f met with every wait up to %gx the file's (a stage-level wait %.2f us)",
                 d->v[LG_ETA], k_range[N_RANGE - 1].hi, st);
        return;
    }
    const lg_device x = with(d, N_RANGE - 1, f);
    wait_costs(&x, path, &st, &it);
    snprintf(buf, cap, "at eta %.2f met if a stage-level wait exposes <= %.2f us and an item-level one <= %.2f us%s",
             d->v[LG_ETA], st, it, st < floor_st ? " (below the plausible floor)" : "");
}

/* For each goal and judged path: the prediction, met or not, and what
 * decides it: each constant alone that turns it inside its plausible range
 * ("met if flag_us <= X"), the others as the file has them; on the
 * persistent paths the waits' exposed latency that meets it, at the file's
 * eta and at eta 1; where nothing alone turns it, whether the best
 * plausible constants together meet it. */
static void print_verdicts(const lg_consts *c, int dev) {
    const lg_device *d = &c->dev[dev];
    printf("verdicts (%s; decode at position %d, verification and speculation at %d, where gpu-check "
           "measures them): each target on each path, and the break-even value of each constant "
           "that decides it alone, the others as the constants file has them (* assumption: no "
           "device run has measured it)\n",
           lg_dev_name(dev), DECODE_AT, VERIFY_AT);
    for (int i = 0; i < g_n_goal; i++) {
        const goal *g = &g_goal[i];
        printf("  %s\n", g->what);
        for (size_t j = 0; j < N_JUDGED; j++) {
            const int path = k_judged[j];
            char txt[64], dec[400] = "";
            size_t o = 0;
            const int met = score(g, path, d, txt, sizeof txt) >= 1;
            for (size_t r = 0; r + 1 < N_RANGE && o < sizeof dec - 80; r++) {
                const int k = k_range[r].k;
                double at;
                if (!path_uses(path, k) || break_even(g, path, d, r, &at) != 0) continue;
                o += (size_t)snprintf(dec + o, sizeof dec - o, "%s%s%s %s %.3g", o ? ", " : "",
                                      lg_const_name(k), c->assumed[dev][k] ? "*" : "",
                                      k_range[r].better_hi ? ">=" : "<=", at);
            }
            printf("    %-17s %-22s %-8s", lg_path_name(path), txt, met ? "met" : "not met");
            if (o) printf(" met if %s\n", dec);
            else if (met) printf(" met at every plausible value of each constant alone\n");
            else printf(" no constant alone turns it\n");
            if (!is_graph(path)) {
                char w1[160], w2[160];
                waits_even(g, path, d, w1, sizeof w1);
                const lg_device e1 = with(d, 0, 1.0);
                waits_even(g, path, &e1, w2, sizeof w2);
                printf("%22s waits: %s; %s\n", "", w1, w2);
            }
            if (!met && !o) {
                const lg_device b = best_case(d, path);
                char bt[64];
                const int bm = score(g, path, &b, bt, sizeof bt) >= 1;
                printf("%22s %s (every constant at its plausible best: %s)\n", "",
                       bm ? "met only when several constants move together"
                          : "cannot be met under any plausible constant",
                       bt);
            }
        }
    }
    printf("  plausible ranges (best end):");
    for (size_t r = 0; r < N_RANGE; r++)
        printf("%s %s %g..%g (%s)", r ? ";" : "", k_range[r].k == WAITS ? "waits x" : lg_const_name(k_range[r].k),
               k_range[r].lo, k_range[r].hi, k_range[r].why);
    printf("\n\n");
}

/* The predictions against each target as the markdown table of docs/gpu.md:
 * one column per device and built path (graph+pdl, the persistent step,
 * graph+pdl with the mma). */
static void print_markdown(const lg_consts *c, const char *commit) {
    static const int paths[] = {LG_GRAPH_PDL, LG_PERSIST_FINE, LG_GRAPH_PDL_MMA};
    enum { NP = sizeof paths / sizeof paths[0] };
    printf("---- for docs/gpu.md (step ledger, %s; decode at position %d, verification and "
           "speculation at %d)\n\n| target |",
           commit, DECODE_AT, VERIFY_AT);
    for (int dev = 0; dev < LG_NDEV; dev++)
        for (int p = 0; p < NP; p++) printf(" %s %s |", lg_dev_name(dev), lg_path_name(paths[p]));
    printf("\n|---|");
    for (int i = 0; i < LG_NDEV * NP; i++) printf("---|");
    printf("\n");
    for (int i = 0; i < g_n_goal; i++) {
        printf("| %s |", g_goal[i].what);
        for (int dev = 0; dev < LG_NDEV; dev++)
            for (int p = 0; p < NP; p++) {
                char txt[64];
                const int met = score(&g_goal[i], paths[p], &c->dev[dev], txt, sizeof txt) >= 1;
                printf(" %s%s |", txt, met ? " (met)" : "");
            }
        printf("\n");
    }
}

static void print_device(const lg_consts *c, int dev, int ctx) {
    const lg_device *d = &c->dev[dev];
    printf("==== %s\nconstants (* assumption):", lg_dev_name(dev));
    for (int k = 0; k < LG_NCONST; k++)
        printf(" %s%s %g%s", lg_const_name(k), c->assumed[dev][k] ? "*" : "", d->v[k], k + 1 < LG_NCONST ? "," : "\n");
    print_decode(d, ctx);
    print_verify(d, ctx);
    print_verify_steps(d, ctx);
    print_spec(d);
    print_check_spec(d);
    printf("the ledger against the measured figures (each on the path its key names; decode at "
           "position %d, verify at %d)\n",
           DECODE_AT, VERIFY_AT);
    check_points(c, dev, d, 1, ALL_PATHS, PT_DECODE | PT_VERIFY);
    const double ed = check_points(c, dev, d, 0, ALL_PATHS, PT_DECODE);
    const double ev = check_points(c, dev, d, 0, ALL_PATHS, PT_VERIFY);
    printf("  mean |error|: decode %.1f%%, verify %.1f%%\n\n", 100 * (exp(ed) - 1), 100 * (exp(ev) - 1));
    print_verdicts(c, dev);
}

/* One constant fitted to the figures of the paths in mask: a scan of its
 * range (geometric for rates), the value of least mean |log error| kept.
 * The error, or NAN (the constant left) when there are no such figures. */
static double fit_one(lg_consts *c, int dev, int k, double lo, double hi, unsigned mask, int kinds) {
    lg_device *d = &c->dev[dev];
    if (isnan(check_points(c, dev, d, 0, mask, kinds))) return NAN;
    const int geo = k == LG_QUANT_RATE;
    double best = INFINITY, bv = d->v[k];
    for (double v = lo; v <= hi * 1.0001; v = geo ? v * 1.02 : v + (hi - lo) / 400) {
        d->v[k] = v;
        const double err = check_points(c, dev, d, 0, mask, kinds);
        if (err < best) best = err, bv = v;
    }
    d->v[k] = bv;
    return best;
}

/* The microbenchmark's part of --fit: the constants it measured as lines
 * for the file, then what its other figures say about the constants. */
static void print_bench(const lg_consts *c, int dev, unsigned measured) {
    const double *b = c->bench[dev], *v = c->dev[dev].v;
    const char *dn = lg_dev_name(dev);
    if (measured >> LG_FLAG_US & 1)
        printf("flag_us    %s %.3g  bench_persist_cuda persist:flag_us (%s)\n", dn, v[LG_FLAG_US],
               c->bench_source[dev][LG_B_FLAG]);
    if (measured >> LG_LOAD_US & 1)
        printf("load_us    %s %.3g  bench_persist_cuda persist:load_us less persist:l2_us (%s)\n", dn,
               v[LG_LOAD_US], c->bench_source[dev][LG_B_LOAD]);
    if (!measured)
        printf("# flag_us, load_us %s: no persist:flag_us, persist:load_us and persist:l2_us figures "
               "(bench_persist_cuda) yet\n", dn);
    if (b[LG_B_STAGE] > 0)
        printf("# a stage-level wait of empty items: %.3g us (persist:stage_us); flag_us + tail_us is %.3g\n",
               b[LG_B_STAGE], v[LG_FLAG_US] + v[LG_TAIL_US]);
    if (b[LG_B_PREFETCH] > 0 && b[LG_B_L2] > 0 && measured >> LG_LOAD_US & 1)
        printf("# an L2 prefetch 2 us ahead leaves %.3g us of load_us's %.3g (persist:prefetch_us less "
               "persist:l2_us)\n", b[LG_B_PREFETCH] > b[LG_B_L2] ? b[LG_B_PREFETCH] - b[LG_B_L2] : 0,
               v[LG_LOAD_US]);
    if (b[LG_B_READ] > 0)
        printf("# a streaming read runs at %.2f x copy_gbs (persist:read_gbs %.0f GB/s): eta's ceiling\n",
               b[LG_B_READ] / v[LG_COPY_GBS], b[LG_B_READ]);
}

/* After a device run: flag_us and load_us from the persistent-step
 * microbenchmark's figures where the file has them (lg_consts_fit_bench);
 * eta and kernel_us on the graph paths' decode figures (jointly),
 * quant_rate on their verify figures, tail_us on the stage path's, flag_us
 * (unless measured) on the fine path's, mma_eff on the mma paths' verify
 * figures; three rounds. A constant whose figures are missing is left. */
static int fit(lg_consts *c, int dev) {
    lg_device *d = &c->dev[dev];
    if (isnan(check_points(c, dev, d, 0, GRAPH_PATHS, PT_DECODE)) ||
        isnan(check_points(c, dev, d, 0, GRAPH_PATHS, PT_VERIFY))) {
        fprintf(stderr, "step_ledger: --fit needs decode_nofold (or decode_pdl) and verify_nofold (or "
                        "verify_pdl) figures for %s\n", lg_dev_name(dev));
        return 1;
    }
    const unsigned measured = lg_consts_fit_bench(c, dev);
    double ed = 0, ev = 0, et = NAN, ef = NAN, em = NAN;
    for (int round = 0; round < 3; round++) {
        double best = INFINITY, be = d->v[LG_ETA], bk = d->v[LG_KERNEL_US];
        for (double eta = 0.30; eta <= 1.0001; eta += 0.01)
            for (double k = 0.5; k <= 8.0001; k += 0.05) {
                d->v[LG_ETA] = eta, d->v[LG_KERNEL_US] = k;
                const double err = check_points(c, dev, d, 0, GRAPH_PATHS, PT_DECODE);
                if (err < best) best = err, be = eta, bk = k;
            }
        d->v[LG_ETA] = be, d->v[LG_KERNEL_US] = bk, ed = best;
        ev = fit_one(c, dev, LG_QUANT_RATE, 1e12, 1e14, GRAPH_PATHS, PT_VERIFY);
        et = fit_one(c, dev, LG_TAIL_US, 0, 10, 1u << LG_PERSIST_STAGE, PT_DECODE | PT_VERIFY);
        if (!(measured >> LG_FLAG_US & 1))
            ef = fit_one(c, dev, LG_FLAG_US, 0.05, 5, 1u << LG_PERSIST_FINE | 1u << LG_PERSIST_FINE_MMA,
                         PT_DECODE | PT_VERIFY);
        em = fit_one(c, dev, LG_MMA_EFF, 0.02, 1, MMA_PATHS, PT_VERIFY);
    }
    const char *dn = lg_dev_name(dev);
    printf("eta        %s %.2f  fit to the decode_nofold/decode_pdl figures (mean |error| %.1f%%)\n", dn,
           d->v[LG_ETA], 100 * (exp(ed) - 1));
    printf("kernel_us  %s %.2f  fit to the decode_nofold/decode_pdl figures\n", dn, d->v[LG_KERNEL_US]);
    printf("quant_rate %s %.3g  fit to the verify_nofold/verify_pdl figures (mean |error| %.1f%%)\n", dn,
           d->v[LG_QUANT_RATE], 100 * (exp(ev) - 1));
    static const struct {
        int k;
        const char *keys;
    } more[3] = {{LG_TAIL_US, "decode_stage/verify_stage"},
                 {LG_FLAG_US, "decode_fine/verify_fine/verify_fine_mma"},
                 {LG_MMA_EFF, "verify_pdl_mma/verify_fine_mma"}};
    const double err[3] = {et, ef, em};
    for (int i = 0; i < 3; i++) {
        if (more[i].k == LG_FLAG_US && measured >> LG_FLAG_US & 1)
            continue;
        if (isnan(err[i]))
            printf("# %s %s: no %s figures yet; stays as the file has it\n", lg_const_name(more[i].k), dn,
                   more[i].keys);
        else
            printf("%-10s %s %.3g  fit to the %s figures (mean |error| %.1f%%)\n", lg_const_name(more[i].k),
                   dn, d->v[more[i].k], more[i].keys, 100 * (exp(err[i]) - 1));
    }
    print_bench(c, dev, measured);
    return 0;
}

static const char k_usage[] =
    "usage: step_ledger CONSTANTS TARGETS [--ctx N] [--commit C] [--fit h100|h200]\n"
    "  CONSTANTS  docs/perf/gpu-ledger-constants.txt: the cost model's constants and measured figures\n"
    "  TARGETS    docs/perf/gpu-targets.txt: the targets and the acceptance rates\n"
    "  --ctx N    the position of the tables' steps (default 1024)\n"
    "  --commit C the commit the markdown table is stamped with\n"
    "  --fit D    the constants that fit D's measured figures, as lines for CONSTANTS\n";

int main(int argc, char **argv) {
    int ctx = 1024, fit_dev = -1;
    const char *commit = "commit not given";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(k_usage, stdout);
            return 0;
        }
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
        fputs(k_usage, stderr);
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
        set_goals();
        printf("GPU step ledger: constants %s, targets %s; the ops of each step recorded from "
               "engine/model, costed on each path (engine/bench/ledger/ledger_cost.c)\n\n",
               argv[1], argv[2]);
        for (int dev = 0; dev < LG_NDEV; dev++) print_device(&c, dev, ctx);
        print_markdown(&c, commit);
    }
    close_shapes();
    return rc ? 1 : 0;
}
