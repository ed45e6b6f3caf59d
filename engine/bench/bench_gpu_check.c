/* The model measurements of the GPU check (scripts/gpu-check.sh), on
 * synthetic files from synth_gguf at real shapes. One subcommand a step:
 *
 *   bench_gpu_check cpu FILE
 *       CPU backend only: a 7-token prefill and one decode step, logits
 *       finite (what runs where there is no GPU).
 *   bench_gpu_check compare FILE
 *       the same file on the CPU and on CUDA: logits of a 7-token prefill,
 *       a 4-row verification at 7 and a decode step at 11, largest error
 *       relative to the row's largest |logit| against the tolerance (1e-3
 *       for float weights, 2e-2 for quantised ones, whose activations are
 *       8-bit on both backends), and the argmax of every row.
 *   bench_gpu_check decode FILE
 *       CUDA greedy decode (the argmax on the device, one id back a token):
 *       tok/s over 128 tokens after a 32-token prompt, median of 3, next to
 *       the bound copy_bw / weight bytes per token, copy_bw being the
 *       device-to-device copy bandwidth (bytes read + written) measured in
 *       the same run. The backend is made with the settings of the
 *       environment (engine/session/device.c): SD_CUDA_GRAPH (graphs) and
 *       SD_CUDA_PDL (programmatic dependent launch), both on unless set to
 *       0. With graphs on, 64 graphed steps must give the ids of 64 plain
 *       ones.
 *       --min-toks T / --min-pct P print the target and whether it is met
 *       (reported, not an exit status). Where the settings run a path of
 *       the step ledger (graph with PDL, norms folded or not; the
 *       persistent step), a "ledger:" line gives the figure under its key
 *       in docs/perf/gpu-ledger-constants.txt; verify prints one too.
 *   bench_gpu_check verify TARGET DRAFT ALPHA...
 *       CUDA: the cost of one target call over n = 1..9 and 16 rows (positions
 *       64.., argmax of every row on the device), median of 15, as a
 *       multiple of n = 1, then the speculative speedup those costs imply
 *       for gamma = 1..8 drafts at each per-draft acceptance rate ALPHA
 *       (inputs: rates measured on the CPU for the real pair), with the
 *       draft step timed on DRAFT: tokens per round (1 - a^(g+1)) / (1 - a)
 *       over (g * t_draft + t_verify(g+1)) / t_verify(1). SD_CUDA_MMA=0
 *       times the quantised products on the __dp4a tiles instead of tensor
 *       cores (the summary line names the setting).
 *   bench_gpu_check spec TARGET DRAFT GAMMA [ALPHA...]
 *       CUDA, end to end: greedy autoregressive decoding of TARGET and
 *       speculative decoding with DRAFT drafting GAMMA tokens a round,
 *       each 128 tokens after a 32-token prompt, median of 3 decode-phase
 *       rates (sd_gen_decode_tps); spec's ids must be ar's. The realised
 *       speedup is set against the cost model (engine/decode/cost.c) built
 *       from the step costs measured in the same run: the target's step
 *       from ar, the drafter's calls and the verification calls from spec,
 *       with the run's acceptance. With DRAFT the same file as TARGET every
 *       draft is accepted, and the two must agree within 10%. Then, from
 *       the same measured costs, the speedup implied at each per-draft
 *       acceptance ALPHA (the pair's rates measured on the CPU):
 *       (1 - a^(g+1)) / (1 - a) t_step / (g t_draft + t_verify(g+1)).
 *
 * Lines starting "S " are the step's summary lines (gpu-check.sh collects
 * them); the rest is the log. Exit 0 when every figure that has a pass
 * criterion met it (targets are reported, not enforced, except the
 * correctness of compare and cpu), 1 on failure, 2 on bad usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/model/model.h"
#include "engine/session/device.h"
#include "kernels/cuda/backend_cuda.h"

#define N_CTX 320

/* The median of v[0..n) (sorted in place, insertion: n is small). */
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1], v[j - 1] = t;
        }
    return v[n / 2];
}

/* The settings every backend of the run is made with, read from the
 * environment once at the start (sd_backend_opts_from_env). PDL also needs
 * sm_90, which the check's H200 has. */
static sd_backend_opts opts;

static const char *on_off(int on) { return on ? "on" : "off"; }

/* The fold setting: "off", or the resident blocks a multiprocessor of the
 * launches that fold a norm. */
static const char *fold_setting(void) {
    static char buf[16];
    if (!opts.cuda_fuse_norm) return "off";
    snprintf(buf, sizeof buf, "%d", opts.cuda_fuse_norm);
    return buf;
}

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The step ledger's tag of the path these settings run (the keys of
 * docs/perf/gpu-ledger-constants.txt), NULL where the ledger has no such
 * path; the persistent step (kernels/cuda/step.cu) is "fine", with the
 * products on tensor cores (SD_CUDA_MMA=1, which fold no norm) "fine_mma",
 * with its items' weights staged in shared memory (SD_CUDA_STAGE=1)
 * "fine_smem"; with its norms launched as stages (SD_CUDA_FUSE_NORM=0) it
 * is none of the ledger's paths. */
static const char *ledger_tag(void) {
    if (opts.cuda_persistent && opts.cuda_mma) return "fine_mma";
    if (opts.cuda_persistent) return !opts.cuda_fuse_norm ? NULL : opts.cuda_stage ? "fine_smem" : "fine";
    if (!opts.cuda_graph || !opts.cuda_pdl) return NULL;
    if (opts.cuda_mma) return opts.cuda_fuse_norm ? "pdl_mma" : NULL;
    return opts.cuda_fuse_norm ? "pdl" : "nofold";
}

/* A file's name less its directories and ".gguf": the synth_gguf preset. */
static int preset_len(const char *path) {
    const char *b = base(path);
    const size_t n = strlen(b);
    return (int)(n > 5 && !strcmp(b + n - 5, ".gguf") ? n - 5 : n);
}

static sd_model *load(const char *path, int device, sd_err *e) {
    sd_model_opts o = {.n_ctx = N_CTX};
    sd_model *m = sd_model_load(path, sd_backend_open_opts(device, 0, &opts, e), &o, e);
    if (!m) fprintf(stderr, "bench_gpu_check: %s: %s\n", sd_device_name(device), e->msg);
    return m;
}

static int need_gpu(void) {
    char why[256];
    if (sd_cuda_available(why, sizeof why)) {
        printf("%s\n", why);
        return 0;
    }
    fprintf(stderr, "bench_gpu_check: no GPU: %s\n", why);
    return -1;
}

/* Deterministic in-vocabulary ids. */
static void tokens(int32_t *t, int n, int vocab) {
    uint32_t s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = (int32_t)(3 + (s >> 8) % (uint32_t)(vocab - 3));
    }
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The three calls of compare (pos, n) over 12 tokens, logits of every row. */
static const int k_steps[3][2] = {{0, 7}, {7, 4}, {11, 1}};

static int run_steps(sd_model *m, const int32_t *t, float *logits, sd_err *e) {
    int V = m->hp.vocab;
    for (int s = 0, row = 0; s < 3; row += k_steps[s][1], s++)
        if (sd_forward_ex(m, m->kv, t + k_steps[s][0], k_steps[s][1], k_steps[s][0], 0,
                          logits + (size_t)row * V, k_steps[s][1], e))
            return -1;
    return 0;
}

static int cmd_cpu(const char *path) {
    sd_err e;
    double t0 = sd_now();
    sd_model *m = load(path, SD_DEVICE_CPU, &e);
    if (!m) return 1;
    double t_load = sd_now() - t0;
    int V = m->hp.vocab;
    int32_t t[12];
    tokens(t, 12, V);
    float *l = malloc((size_t)12 * V * sizeof *l);
    int rc = 1;
    t0 = sd_now();
    if (l && run_steps(m, t, l, &e) == 0) {
        size_t bad = 0;
        for (size_t i = 0; i < (size_t)12 * V; i++) bad += !isfinite(l[i]);
        double mx = 0;
        for (size_t i = 0; i < (size_t)12 * V; i++)
            if (isfinite(l[i]) && fabs(l[i]) > mx) mx = fabs(l[i]);
        rc = bad ? 1 : 0;
        printf("S cpu %-28s %s: 12 positions in %.2f s (load %.2f s), max |logit| %.3g, "
               "%zu non-finite\n",
               base(path), bad ? "FAIL" : "ok", sd_now() - t0, t_load, mx, bad);
    } else {
        fprintf(stderr, "bench_gpu_check: cpu forward: %s\n", l ? e.msg : "out of memory");
    }
    free(l);
    sd_model_free(m);
    return rc;
}

static int is_quant_model(const sd_model *m) {
    uint32_t t = m->layers[0].wq.type;
    return !(t == SD_F32 || t == SD_F16 || t == SD_BF16);
}

static int cmd_compare(const char *path) {
    if (need_gpu()) return 1;
    sd_err e;
    sd_model *a = load(path, SD_DEVICE_CPU, &e);
    if (!a) return 1;
    sd_model *b = load(path, SD_DEVICE_CUDA, &e);
    if (!b) {
        sd_model_free(a);
        return 1;
    }
    int V = a->hp.vocab, rc = 1;
    int32_t t[12];
    tokens(t, 12, V);
    float *la = malloc((size_t)12 * V * sizeof *la), *lb = malloc((size_t)12 * V * sizeof *lb);
    if (la && lb && run_steps(a, t, la, &e) == 0 && run_steps(b, t, lb, &e) == 0) {
        double worst = 0;
        int same = 0;
        for (int r = 0; r < 12; r++) {
            const float *x = la + (size_t)r * V, *y = lb + (size_t)r * V;
            double mx = 0, ref = 0;
            for (int i = 0; i < V; i++) {
                double d = isfinite(y[i]) ? fabs((double)y[i] - x[i]) : INFINITY;
                if (d > mx) mx = d;
                if (fabs(x[i]) > ref) ref = fabs(x[i]);
            }
            double err = mx / (ref > 0 ? ref : 1);
            if (!(err <= worst)) worst = err;
            same += argmax(x, V) == argmax(y, V);
            printf("row %2d: rel err %.3g, argmax cpu %d cuda %d\n", r, err, argmax(x, V),
                   argmax(y, V));
        }
        double tol = is_quant_model(a) ? 2e-2 : 1e-3;
        rc = worst <= tol ? 0 : 1;
        printf("S compare %-24s %s: max rel logit err %.2e (tol %.0e), argmax equal %d/12\n",
               base(path), rc ? "FAIL" : "ok", worst, tol, same);
    } else {
        fprintf(stderr, "bench_gpu_check: compare: %s\n", la && lb ? e.msg : "out of memory");
    }
    free(la);
    free(lb);
    sd_model_free(a);
    sd_model_free(b);
    return rc;
}

/* Device-to-device copy bandwidth through the backend's copy op: 1 GiB,
 * bytes read + written, best of 10 (a 4-byte to_host waits for it). */
static double copy_gbs(sd_backend *be, sd_err *e) {
    size_t n = (size_t)1 << 30;
    char *x = be->alloc(be, n, e), *y = x ? be->alloc(be, n, e) : NULL;
    double best = 0;
    int probe;
    for (int r = 0; y && r < 11; r++) {
        if (be->to_host(be, &probe, x, 4, e)) break;
        double t0 = sd_now();
        if (be->copy(be, y, x, n, e) || be->to_host(be, &probe, y, 4, e)) break;
        double dt = sd_now() - t0;
        if (r > 0 && 2.0 * (double)n / dt > best) best = 2.0 * (double)n / dt;
    }
    if (y) be->release(be, y);
    if (x) be->release(be, x);
    return best / 1e9;
}

/* Greedy decode of n tokens after a prompt of p; tok/s. The ids go to
 * out[0..n) when out is not NULL. */
static double decode_rate(sd_model *m, int p, int n, int32_t *out, sd_err *e) {
    int32_t prompt[64], tok, next;
    tokens(prompt, p, m->hp.vocab);
    if (sd_forward_top_k(m, m->kv, prompt, p, 0, 0, 1, 1, &tok, e)) return -1;
    double t0 = sd_now();
    for (int i = 0; i < n; i++) {
        if (sd_forward_top_k(m, m->kv, &tok, 1, p + i, 0, 1, 1, &next, e)) return -1;
        tok = next;
        if (out) out[i] = tok;
    }
    return n / (sd_now() - t0);
}

/* With graphs on: the ids of 64 graphed steps against 64 plain ones, and
 * what the graphs did. 0 when equal. */
static int graph_check(sd_model *m, sd_err *e) {
    int32_t a[64], b[64];
    if (decode_rate(m, 32, 64, a, e) < 0 || sd_cuda_set_graph(m->be, 0) ||
        decode_rate(m, 32, 64, b, e) < 0 || sd_cuda_set_graph(m->be, 1))
        return -1;
    sd_cuda_graph_stats st;
    sd_cuda_graph_stats_get(m->be, &st);
    int same = !memcmp(a, b, sizeof a);
    printf("S   graphs: %ld steps launched (%ld captured: %ld updated, %ld instantiated; %ld "
           "replayed), %ld fell back, %ld nodes a step; 64 ids %s those of plain launches\n",
           st.launched, st.captures, st.updated, st.instantiated, st.replays, st.fallbacks,
           st.nodes, same ? "equal" : "DIFFER from");
    if (st.persistent || st.persist_fallbacks)
        printf("S   persistent: %ld steps one launch, %ld the graph way%s%s; the last staged %ld "
               "items in shared memory\n", st.persistent, st.persist_fallbacks,
               st.persist_fallbacks ? ": " : "", st.persist_fallbacks ? st.persist_why : "",
               st.persist_staged);
    return same && st.launched + st.persistent > 0 ? 0 : -1;
}

/* target: "--min-toks T" or "--min-pct P" (NULL: none) */
static int cmd_decode(const char *path, const char *target, double goal) {
    if (need_gpu()) return 1;
    sd_err e;
    sd_model *m = load(path, SD_DEVICE_CUDA, &e);
    if (!m) return 1;
    double bw = copy_gbs(m->be, &e);
    double r[3];
    int ok = bw > 0;
    const long f0 = sd_cuda_norms_folded(m->be);
    for (int i = 0; i < 3 && ok; i++) ok = (r[i] = decode_rate(m, 32, 128, NULL, &e)) > 0;
    int rc = 1;
    if (ok) {
        double bytes = (double)sd_model_weight_bytes(m), d = median(r, 3);
        double bound = bw * 1e9 / bytes;
        printf("S decode %-25s graph %-3s pdl %-3s fold %-3s %8.0f tok/s  %7.1f MB/token  bound "
               "%7.0f tok/s (copy %.0f GB/s)  %5.1f%% of bound\n",
               base(path), on_off(opts.cuda_graph), on_off(opts.cuda_pdl), fold_setting(), d,
               bytes / 1e6, bound, bw, 100.0 * d / bound);
        /* plain launches fold at every call (3 x the prompt and 128 steps);
         * a replayed graph keeps what its capture folded (its node count) */
        if (!opts.cuda_graph)
            printf("S   %.1f norms folded a call\n",
                   (double)(sd_cuda_norms_folded(m->be) - f0) / (3 * 129));
        if (ledger_tag())
            printf("S   ledger: decode_%s:%.*s %.0f\n", ledger_tag(), preset_len(path), base(path), d);
        if (target) {
            int toks = !strcmp(target, "--min-toks");
            double got = toks ? d : 100.0 * d / bound;
            printf("S   target >= %.0f%s: %s\n", goal, toks ? " tok/s" : "% of bound",
                   got >= goal ? "met" : "NOT met");
        }
        rc = opts.cuda_graph ? (graph_check(m, &e) ? 1 : 0) : 0;
    } else {
        fprintf(stderr, "bench_gpu_check: decode: %s\n", bw > 0 ? e.msg : "copy bandwidth");
    }
    sd_model_free(m);
    return rc;
}

/* Median seconds of one call over n rows at position pos (argmax of each). */
static double call_cost(sd_model *m, const int32_t *t, int n, int pos, sd_err *e) {
    enum { REPS = 15 };
    double s[REPS];
    int32_t ids[16];
    for (int r = -2; r < REPS; r++) {
        double t0 = sd_now();
        if (sd_forward_top_k(m, m->kv, t, n, pos, 0, n, 1, ids, e)) return -1;
        if (r >= 0) s[r] = sd_now() - t0;
    }
    return median(s, REPS);
}

static int cmd_verify(const char *target, const char *draft, int n_alpha, char **alpha) {
    if (need_gpu()) return 1;
    sd_err e;
    sd_model *m = load(target, SD_DEVICE_CUDA, &e);
    if (!m) return 1;
    int32_t t[64 + 16];
    tokens(t, 64 + 16, m->hp.vocab);
    double cost[17] = {0};
    int ok = sd_forward_ex(m, m->kv, t, 64, 0, 0, NULL, 0, &e) == 0;
    for (int n = 1; n <= 16 && ok; n = n == 9 ? 16 : n + 1)
        ok = (cost[n] = call_cost(m, t + 64, n, 64, &e)) > 0;
    sd_model_free(m);
    double t_draft = -1;
    if (ok && (m = load(draft, SD_DEVICE_CUDA, &e))) {
        int32_t d[65];
        tokens(d, 65, m->hp.vocab);
        if (sd_forward_ex(m, m->kv, d, 64, 0, 0, NULL, 0, &e) == 0)
            t_draft = call_cost(m, d + 64, 1, 64, &e);
        sd_model_free(m);
    }
    if (!ok || t_draft <= 0) {
        fprintf(stderr, "bench_gpu_check: verify: %s\n", e.msg);
        return 1;
    }
    printf("S verify %s (graph %s, pdl %s, fold %s, mma %s): n rows -> ms per call (x n=1):",
           base(target), on_off(opts.cuda_graph), on_off(opts.cuda_pdl), fold_setting(),
           on_off(opts.cuda_mma));
    for (int n = 1; n <= 16; n = n == 9 ? 16 : n + 1)
        printf(" %d:%.3f(%.2fx)", n, cost[n] * 1e3, cost[n] / cost[1]);
    if (ledger_tag()) {
        printf("\nS   ledger: verify_%s:%.*s:N, N = 1..9:", ledger_tag(), preset_len(target), base(target));
        for (int n = 1; n <= 9; n++) printf(" %.3f", cost[n] * 1e3);
    }
    printf("\nS verify 5 rows / 1 row = %.2fx (target <= 1.15x): %s\n", cost[5] / cost[1],
           cost[5] / cost[1] <= 1.15 ? "met" : "NOT met");
    printf("S draft step %s: %.3f ms (%.2fx the target's 1-row call)\n", base(draft),
           t_draft * 1e3, t_draft / cost[1]);
    printf("S speedup implied (acceptance rate per draft = input from the CPU runs of the real "
           "pair):\nS   alpha  g=1   g=2   g=3   g=4   g=5   g=6   g=7   g=8\n");
    for (int i = 0; i < n_alpha; i++) {
        double a = atof(alpha[i]);
        if (!(a >= 0 && a < 1)) {
            fprintf(stderr, "bench_gpu_check: acceptance rate '%s' not in [0, 1)\n", alpha[i]);
            return 2;
        }
        printf("S   %.3f", a);
        for (int g = 1; g <= 8; g++) {
            double tok = (1 - pow(a, g + 1)) / (1 - a);
            double c = (g * t_draft + cost[g + 1]) / cost[1];
            printf(" %5.2f", tok / c);
        }
        printf("\n");
    }
    return 0;
}

static void no_token(void *ud, int32_t id) { (void)ud, (void)id; }

/* The decode-phase rates of three runs of one strategy (spec when drafter
 * is set, else ar), their median in *rate; the run whose rate is the
 * median leaves its stats in *st and its ids in out[0..SPEC_GEN). */
#define SPEC_PROMPT 32
#define SPEC_GEN 128
static int spec_runs(sd_model *t, sd_model *d, int gamma, const int32_t *prompt, int32_t *out,
                     sd_gen_stats *st, double *rate, sd_err *e) {
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1, .on_token = no_token};
    sd_spec_opts so = {.v = {.gamma = gamma}};
    double r[3], sorted[3];
    sd_gen_stats sts[3];
    int32_t ids[3][SPEC_GEN];
    for (int i = 0; i < 3; i++) {
        sd_lm tl = {t, t->kv, 0, 0}, dl = {d, d ? d->kv : NULL, 0, 0};
        memset(&sts[i], 0, sizeof sts[i]);
        int n = d ? sd_speculative_generate(prompt, SPEC_PROMPT, &dl, &tl, &so, SPEC_GEN, &cfg,
                                            ids[i], &sts[i], e)
                  : sd_autoregressive_generate(prompt, SPEC_PROMPT, t, SPEC_GEN, &cfg, ids[i],
                                               &sts[i], e);
        if (n != SPEC_GEN) {
            if (n >= 0) sd_fail(e, "%d tokens of %d", n, SPEC_GEN);
            return -1;
        }
        sorted[i] = r[i] = sd_gen_decode_tps(&sts[i]);
    }
    *rate = median(sorted, 3);
    for (int i = 0; i < 3; i++)
        if (r[i] == *rate) {
            *st = sts[i];
            memcpy(out, ids[i], sizeof ids[i]);
            break;
        }
    return 0;
}

/* The cost model (sd_cost_predict) priced with this run's own costs: the
 * autoregressive run's step for one row, each verification width at its
 * mean measured call, every drafter call at their mean. */
static double own_cost_speedup(const sd_gen_stats *sp, double step) {
    sd_cost_calib cal = {0};
    cal.verify_s[1] = step;
    for (int n = 2; n < SD_COST_ROWS; n++)
        if (sp->verify_calls_n[n]) cal.verify_s[n] = sp->verify_s_n[n] / sp->verify_calls_n[n];
    const double per_draft = sp->draft_calls ? (sp->draft_s + sp->catchup_s) / sp->draft_calls : 0;
    for (int k = 1; k < SD_COST_ROWS; k++)
        if (sp->draft_calls_n[k]) cal.draft_s[k] = per_draft;
    return sd_cost_predict(sp, &cal, NULL, NULL);
}

static int cmd_spec(const char *target, const char *draft, const char *gamma_s, int n_alpha,
                    char **alpha) {
    char *end;
    const long gamma = strtol(gamma_s, &end, 10);
    if (*end || gamma < 1 || gamma > 15) {
        fprintf(stderr, "bench_gpu_check: gamma '%s' is not in 1..15\n", gamma_s);
        return 2;
    }
    for (int i = 0; i < n_alpha; i++) {
        const double a = strtod(alpha[i], &end);
        if (*end || !(a >= 0 && a < 1)) {
            fprintf(stderr, "bench_gpu_check: acceptance rate '%s' not in [0, 1)\n", alpha[i]);
            return 2;
        }
    }
    if (need_gpu()) return 1;
    sd_err e;
    sd_model *t = load(target, SD_DEVICE_CUDA, &e), *d = t ? load(draft, SD_DEVICE_CUDA, &e) : NULL;
    int rc = 1;
    int32_t prompt[SPEC_PROMPT], ar_ids[SPEC_GEN], sp_ids[SPEC_GEN];
    sd_gen_stats ar, sp;
    double ar_rate = 0, sp_rate = 0;
    if (d) tokens(prompt, SPEC_PROMPT, t->hp.vocab < d->hp.vocab ? t->hp.vocab : d->hp.vocab);
    if (!d || spec_runs(t, NULL, 0, prompt, ar_ids, &ar, &ar_rate, &e) ||
        spec_runs(t, d, (int)gamma, prompt, sp_ids, &sp, &sp_rate, &e)) {
        if (t && d) fprintf(stderr, "bench_gpu_check: spec: %s\n", e.msg);
        goto done;
    }
    const int same = !memcmp(ar_ids, sp_ids, sizeof ar_ids), identical = !strcmp(target, draft);
    const double step = 1 / ar_rate, real = sp_rate / ar_rate, pred = own_cost_speedup(&sp, step);
    const double acc = sp.drafted ? (double)sp.accepted / sp.drafted : 0;
    const long vc = sp.verify_calls_n[gamma + 1];
    const double t_draft = sp.draft_calls ? (sp.draft_s + sp.catchup_s) / sp.draft_calls : 0;
    const double t_ver = vc ? sp.verify_s_n[gamma + 1] / vc : 0;
    const double off = pred > 0 ? real / pred - 1 : INFINITY;
    printf("S spec %s <- %s gamma %ld: ids %s ar's, %.1f%% of drafts accepted; ar %.0f tok/s, spec "
           "%.0f tok/s: realised %.2fx, cost model %.2fx from this run's costs (%+.1f%%)%s\n",
           base(target), identical ? "itself" : base(draft), gamma, same ? "equal" : "DIFFER from",
           100 * acc, ar_rate, sp_rate, real, pred, 100 * off,
           identical ? (fabs(off) <= 0.10 ? ": within 10%, met" : ": within 10%, NOT met") : "");
    printf("S   measured: step %.3f ms, draft call %.3f ms (%.2fx the step), %ld-row verify %.3f ms "
           "(%.2fx the step, %ld calls)\n",
           step * 1e3, t_draft * 1e3, t_draft / step, gamma + 1, t_ver * 1e3, t_ver / step, vc);
    for (int i = 0; i < n_alpha && t_ver > 0; i++) {
        const double a = atof(alpha[i]);
        const double tok = (1 - pow(a, (double)gamma + 1)) / (1 - a);
        printf("S   implied at alpha %.3f (CPU acceptance of the real pair): %.2fx\n", a,
               tok * step / (gamma * t_draft + t_ver));
    }
    rc = same ? 0 : 1;
done:
    sd_model_free(d);
    sd_model_free(t);
    return rc;
}

int main(int argc, char **argv) {
    sd_err e;
    if (sd_backend_opts_from_env(&opts, &e)) {
        fprintf(stderr, "bench_gpu_check: %s\n", e.msg);
        return 1;
    }
    if (argc >= 3 && !strcmp(argv[1], "cpu")) return cmd_cpu(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "compare")) return cmd_compare(argv[2]);
    if (argc >= 3 && !strcmp(argv[1], "decode")) {
        if (argc == 3) return cmd_decode(argv[2], NULL, 0);
        if (argc == 5 && (!strcmp(argv[3], "--min-toks") || !strcmp(argv[3], "--min-pct")))
            return cmd_decode(argv[2], argv[3], atof(argv[4]));
    }
    if (argc >= 5 && !strcmp(argv[1], "verify")) return cmd_verify(argv[2], argv[3], argc - 4, argv + 4);
    if (argc >= 5 && !strcmp(argv[1], "spec"))
        return cmd_spec(argv[2], argv[3], argv[4], argc - 5, argv + 5);
    fprintf(stderr, "usage: bench_gpu_check cpu|compare FILE\n"
                    "       bench_gpu_check decode FILE [--min-toks T | --min-pct P]\n"
                    "       bench_gpu_check verify TARGET DRAFT ALPHA...\n"
                    "       bench_gpu_check spec TARGET DRAFT GAMMA [ALPHA...]\n");
    return 2;
}
