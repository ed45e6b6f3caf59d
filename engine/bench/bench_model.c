/* Model benchmark, per model on the CPU backend:
 *   - prefill and decode tokens/s at 1 and 2 threads, next to the bytes each
 *     decode step must read and the read bandwidth measured in the same run,
 *     so decode speed reads as a fraction of the bandwidth bound; prefill
 *     as int8 ops/s against the int8 peak measured in the same run (and the
 *     AMX peak on an AMX CPU) when the layers' weights are quantized;
 *   - decode under contention: the bench starts a busy process pinned to
 *     CPU 0 and decodes at 1 and 2 threads again;
 *   - the cost of verifying n rows (a forward of n tokens after a 256-token
 *     prefix with the argmax of every row, as speculative decoding's
 *     verification runs it) against one row, n = 1..9;
 *   - where the time of one decode step, one 5-row verification and one
 *     PROMPT_TOKENS-token prefill goes, op by op (the CPU kernels' profile);
 *   - decode at LONG_CTX cached positions with an F32 and an F16 cache, and
 *     attention's share of the step (the cache holds random values, see
 *     fill_cache: filling 2048 positions of the 1.5B by prefill would take
 *     a minute).
 * CUDA rows (decode and prefill) when a GPU is usable.
 *   usage: bench_model [MODEL...]   (default: stories260K, SmolLM2 and the
 *   Qwen2.5-Coder pair) */
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/decode/decode.h"
#include "kernels/bench/int8_peak.h"
#include "kernels/cuda/backend_cuda.h"
#include "engine/model/model.h"
#include "engine/session/device.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"
#include "kernels/common/wtype.h"

#define PROMPT_TOKENS 128
#define DECODE_TOKENS 64
#define REPEATS 3
#define VERIFY_PREFIX 256
#define VERIFY_MAX 9
#define LONG_CTX 2048
#define LONG_TOKENS 16

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Read bandwidth, the bound decode is measured against: the kernels' own
 * thread pool streams a buffer of twice the last-level cache (at least
 * 256 MiB) in 1 MiB slices, summing so the loads cannot be elided. The
 * buffer comes from sd_cpu_stream_alloc, as the repacked weights do, so
 * both sit on the same kind of pages. Two loops, the best counts: a plain
 * one, and one that prefetches BW_PF bytes ahead a line at a time as the
 * kernels do (on a Xeon of this project's machine kind a plain stream
 * reaches 10-13 GB/s on one core and a prefetched one 16-19, so a plain
 * loop alone put decode above 100% of its "bound"). */
enum { BW_SLICE_WORDS = (1 << 20) / 8, BW_MAX_THREADS = 64, BW_PF = 12288 };
typedef struct {
    const uint64_t *buf;
    int prefetch;
    uint64_t sum[BW_MAX_THREADS][8]; /* one cache line per thread */
} bw_job;

static void bw_task(void *v, int64_t t, int thread) {
    bw_job *j = v;
    const uint64_t *p = j->buf + (size_t)t * BW_SLICE_WORDS;
    uint64_t s = 0;
    if (j->prefetch)
        for (size_t i = 0; i < BW_SLICE_WORDS; i += 8) {
            __builtin_prefetch((const char *)(p + i) + BW_PF, 0, 2);
            s += p[i] + p[i + 1] + p[i + 2] + p[i + 3] + p[i + 4] + p[i + 5] + p[i + 6] + p[i + 7];
        }
    else
        for (size_t i = 0; i < BW_SLICE_WORDS; i += 4) s += p[i] + p[i + 1] + p[i + 2] + p[i + 3];
    j->sum[thread][0] += s;
}

static size_t bw_bytes(void) {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t n = (size_t)256 << 20;
    if (llc > 0 && 2 * (size_t)llc > n) n = 2 * (size_t)llc;
    if (n > (size_t)4 << 30) n = (size_t)4 << 30;
    return n & ~(size_t)((1 << 20) - 1);
}

static double read_bandwidth(int threads) {
    const size_t n = bw_bytes();
    sd_err e;
    if (threads > BW_MAX_THREADS) threads = BW_MAX_THREADS;
    sd_pool *pool = sd_pool_create(threads, &e);
    bw_job *j = calloc(1, sizeof *j);
    uint64_t *buf = sd_cpu_stream_alloc(n);
    double best = 0;
    if (pool && j && buf) {
        memset(buf, 1, n);
        j->buf = buf;
        for (int rep = 0; rep < 6; rep++) {
            j->prefetch = rep & 1;
            double t0 = sd_now();
            sd_pool_run(pool, bw_task, j, (int64_t)(n / 8 / BW_SLICE_WORDS), 1);
            double dt = sd_now() - t0;
            if (n / dt > best) best = (double)n / dt;
        }
    }
    volatile uint64_t sink = 0;
    for (int t = 0; j && t < BW_MAX_THREADS; t++) sink += j->sum[t][0];
    (void)sink;
    free(buf);
    free(j);
    sd_pool_destroy(pool);
    return best / 1e9;
}

static double copy_bandwidth(void) {
    size_t n = (size_t)128 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;
    if (a && b) {
        memset(a, 1, n);
        memset(b, 2, n);
        for (int rep = 0; rep < 5; rep++) {
            double t0 = sd_now();
            memcpy(b, a, n);
            double dt = sd_now() - t0;
            if (2.0 * (double)n / dt > best) best = 2.0 * (double)n / dt;
        }
    }
    free(a);
    free(b);
    return best / 1e9;
}

/* A prompt of n ids: the model's tokens of a short story, repeated. */
static int make_prompt(sd_model *m, int32_t *prompt, int n, sd_err *e) {
    const char *text =
        "Once upon a time, in a small village by the sea, there lived a girl who loved to watch "
        "the boats. Every morning she ran down to the harbour and counted the sails. ";
    int32_t *ids = NULL;
    int n_ids = 0;
    if (sd_tokenize(m->tok, text, strlen(text), 0, 0, &ids, &n_ids, e) || n_ids == 0) {
        free(ids);
        return -1;
    }
    for (int i = 0; i < n; i++) prompt[i] = ids[i % n_ids];
    free(ids);
    return 0;
}

/* Greedy decoding as the engine runs it (the argmax is taken where the
 * logits are and only the id comes back): n tokens from position pos;
 * tokens/s, or a negative value on failure. */
static double decode(sd_model *m, int32_t tok, int pos, int n, sd_err *e) {
    double t0 = sd_now();
    for (int i = 0; i < n; i++) {
        int32_t next;
        if (sd_forward_top_k(m, m->kv, &tok, 1, pos + i, 0, 1, 1, &next, e)) return -1;
        tok = next;
    }
    return n / (sd_now() - t0);
}

/* Prefill of the prompt, then decode: medians of REPEATS runs. */
static int speeds(sd_model *m, const int32_t *prompt, double *pre, double *dec, sd_err *e) {
    double p[REPEATS], d[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        int32_t tok;
        double t0 = sd_now();
        if (sd_forward_top_k(m, m->kv, prompt, PROMPT_TOKENS, 0, 0, 1, 1, &tok, e)) return -1;
        p[r] = PROMPT_TOKENS / (sd_now() - t0);
        if ((d[r] = decode(m, tok, PROMPT_TOKENS, DECODE_TOKENS, e)) < 0) return -1;
    }
    *pre = median(p, REPEATS);
    *dec = median(d, REPEATS);
    return 0;
}

/* A process spinning on CPU 0 (the contention test); 0 if none could start. */
static pid_t start_busy(void) {
    pid_t pid = fork();
    if (pid == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(0, &one);
        sched_setaffinity(0, sizeof one, &one);
        for (volatile unsigned long i = 0;; i++) {
        }
    }
    return pid > 0 ? pid : 0;
}

static void stop_busy(pid_t pid) {
    if (!pid) return;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Seconds for one forward of n tokens at VERIFY_PREFIX with the argmax of
 * all n rows (best of 5: the cost of the work, not of the noise). */
static double verify_time(sd_model *m, const int32_t *toks, int n, sd_err *e) {
    double best = 1e30;
    int32_t ids[VERIFY_MAX];
    for (int r = 0; r < 5; r++) {
        double t0 = sd_now();
        if (sd_forward_top_k(m, m->kv, toks, n, VERIFY_PREFIX, 0, n, 1, ids, e)) return -1;
        double dt = sd_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* Time of `steps` forwards of n rows at pos with the argmax of the last
 * n_rows, op by op: a decode step or a verification (n_rows = n, after
 * VERIFY_PREFIX positions) or a prompt's prefill (pos 0, n_rows 1). */
static int breakdown(sd_model *m, sd_cpu *c, const int32_t *toks, int n, int pos, int n_rows,
                     int steps, sd_err *e) {
    int32_t ids[VERIFY_MAX];
    /* one forward first: a larger n than before grows the scratch, and its
     * pages' first touch is not the op's cost */
    if (sd_forward_top_k(m, m->kv, toks, n, pos, 0, n_rows, 1, ids, e)) return -1;
    sd_cpu_profile_enable(c, 1);
    double t0 = sd_now();
    for (int r = 0; r < steps; r++)
        if (sd_forward_top_k(m, m->kv, toks, n, pos, 0, n_rows, 1, ids, e)) return -1;
    double total = (sd_now() - t0) * 1e9 / steps;
    sd_cpu_profile p;
    sd_cpu_profile_read(c, &p);
    sd_cpu_profile_enable(c, 0);
    printf("  %d-row %s, %d threads: %.0f us\n", n, pos ? "step" : "prefill", sd_cpu_threads(c),
           total / 1e3);
    double sum = 0;
    for (int op = 0; op < SD_OP_N; op++) {
        double us = p.op_ns[op] / steps / 1e3;
        sum += p.op_ns[op] / steps;
        if (op == SD_OP_MATMUL) {
            printf("    %-22s %9.1f us %5.1f%%\n", "matmul", us, 100 * p.op_ns[op] / steps / total);
            for (int t = 0; t < SD_PROF_TYPES; t++)
                if (p.matmul_type_ns[t] > 0)
                    printf("      %-20s %9.1f us %5.1f%%\n", sd_wtype_name((uint32_t)t),
                           p.matmul_type_ns[t] / steps / 1e3,
                           100 * p.matmul_type_ns[t] / steps / total);
        } else if (p.op_ns[op] > 0) {
            printf("    %-22s %9.1f us %5.1f%%\n", sd_cpu_op_name(op), us,
                   100 * p.op_ns[op] / steps / total);
        }
    }
    printf("    %-22s %9.1f us %5.1f%%\n", "other (host, copies)", (total - sum) / 1e3,
           100 * (total - sum) / total);
    printf("    %-22s %9.1f us %5.1f%%  (inside the ops above)\n", "waiting for workers",
           p.wait_ns / steps / 1e3, 100 * p.wait_ns / steps / total);
    return 0;
}

/* Writes random values into positions 0..n_pos-1 of every layer's K and V
 * (uniform in [-1, 1]; F16 as halves of magnitude 2^-3..2^0). The CPU
 * backend's cache comes from calloc, and pages of a large calloc that were
 * never written all map to the kernel's one zero page: attention over an
 * unwritten cache reads the same 4 KiB again and again from L1, so the
 * step looked cheaper than one over a prefilled cache and the F16 cache
 * could not show that it reads half the bytes. */
static void fill_cache(sd_kv *kv, int n_pos) {
    uint32_t r = 0x9e3779b9u;
    const size_t bytes = (size_t)n_pos * kv->row_bytes;
    for (int l = 0; l < kv->n_layers; l++)
        for (int h = 0; h < 2; h++) {
            void *buf = h ? kv->v[l] : kv->k[l];
            if (kv->type == SD_F16) {
                uint16_t *p = buf;
                for (size_t i = 0; i < bytes / 2; i++) {
                    r = r * 1664525u + 1013904223u;
                    p[i] = (uint16_t)((r >> 31) << 15 | (0x3000u + ((r >> 8) % 0x0c00u)));
                }
            } else {
                float *p = buf;
                for (size_t i = 0; i < bytes / 4; i++) {
                    r = r * 1664525u + 1013904223u;
                    p[i] = (float)(r >> 8) * (2.0f / 16777216.0f) - 1.0f;
                }
            }
        }
}

/* Decode at LONG_CTX positions, 2 threads, for each cache type. */
static int long_context(const char *path, sd_err *e) {
    const uint32_t types[2] = {SD_F32, SD_F16};
    printf("  decode at %d cached positions, 2 threads:", LONG_CTX);
    for (int k = 0; k < 2; k++) {
        sd_model_opts o = {.n_ctx = LONG_CTX + LONG_TOKENS + 2, .kv_type = types[k]};
        sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, 2, e), &o, e);
        if (!m) return -1;
        sd_cpu *c = sd_backend_cpu_context(m->be);
        fill_cache(m->kv, LONG_CTX);
        m->kv->n = LONG_CTX;
        int32_t tok = 1, next;
        int rc = sd_forward_top_k(m, m->kv, &tok, 1, LONG_CTX, 0, 1, 1, &next, e); /* warm */
        sd_cpu_profile_enable(c, 1);
        double rate = rc ? -1 : decode(m, next, LONG_CTX, LONG_TOKENS, e);
        sd_cpu_profile p;
        sd_cpu_profile_read(c, &p);
        sd_model_free(m);
        if (rate < 0) return -1;
        double att = p.op_ns[SD_OP_ATTENTION] / 1e9 / (LONG_TOKENS / rate);
        printf(" kv %s %.1f tok/s (attention %.0f%%)%s", sd_wtype_name(types[k]), rate, 100 * att,
               k ? "\n" : ",");
    }
    return 0;
}

/* int8 multiply-adds x 2 a prefilled token: the layers' weight elements
 * in block-quantized types (the activations go in as int8 there); 0 when
 * a layer weight is float (no int8 peak applies). The output head runs
 * for the last row only and the embedding is a lookup. */
static double prefill_int8_ops(const sd_model *m) {
    double ops = 0;
    for (int l = 0; l < m->hp.n_layers; l++) {
        const sd_layer *L = &m->layers[l];
        const sd_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t k = 0; k < sizeof ws / sizeof *ws; k++) {
            if (sd_wtype_block(sd_cpu_file_type(ws[k]->type)) <= 1) return 0;
            ops += 2.0 * (double)ws[k]->rows * (double)ws[k]->cols;
        }
    }
    return ops;
}

static const char *base_name(const char *path) {
    return strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
}

/* Everything above for one model on the CPU. */
static int bench_cpu(const char *path, const double *read_bw, const double *peak,
                     const double *peak_tile) {
    sd_err e;
    sd_model_opts o = {.n_ctx = VERIFY_PREFIX + PROMPT_TOKENS + DECODE_TOKENS + 16};
    sd_model *m[3] = {NULL, NULL, NULL};
    int32_t prompt[VERIFY_PREFIX];
    int rc = -1;
    for (int t = 1; t <= 2; t++)
        if (!(m[t] = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, t, &e), &o, &e))) goto out;
    if (make_prompt(m[1], prompt, VERIFY_PREFIX, &e)) goto out;
    const double bytes = (double)sd_model_weight_bytes(m[1]);
    double pre[3], dec[3];
    for (int t = 1; t <= 2; t++) {
        if (speeds(m[t], prompt, &pre[t], &dec[t], &e)) goto out;
        /* the bound: the better of the run's first reading and one right
         * after this decode (a shared machine's bandwidth drifts) */
        const double here = read_bandwidth(t), bw = here > read_bw[t] ? here : read_bw[t];
        char where[16];
        snprintf(where, sizeof where, "cpu/%d", t);
        printf("%-36s %7s %12.1f %12.1f %12.2f %9.2f %8.1f%%\n", base_name(path), where, pre[t],
               dec[t], bytes / 1e6, dec[t] * bytes / 1e9, 100.0 * dec[t] * bytes / 1e9 / bw);
    }
    const double ops = prefill_int8_ops(m[1]);
    if (ops > 0 && peak[1] > 0) {
        printf("  prefill: %.2f G int8 ops a token; %.0f / %.0f G op/s at 1 / 2 threads = %.0f%% / "
               "%.0f%% of the int8 peak", ops / 1e9, pre[1] * ops / 1e9, pre[2] * ops / 1e9,
               100 * pre[1] * ops / peak[1], 100 * pre[2] * ops / peak[2]);
        if (peak_tile[1] > 0)
            printf(", %.1f%% / %.1f%% of the AMX peak", 100 * pre[1] * ops / peak_tile[1],
                   100 * pre[2] * ops / peak_tile[2]);
        printf("\n");
    }
    printf("  decode 2 threads / 1 thread: %.2fx unloaded", dec[2] / dec[1]);
    pid_t busy = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? start_busy() : 0;
    if (busy) {
        double loaded[3];
        for (int t = 1; t <= 2 && rc; t++) {
            int32_t tok;
            if (sd_forward_top_k(m[t], m[t]->kv, prompt, PROMPT_TOKENS, 0, 0, 1, 1, &tok, &e) ||
                (loaded[t] = decode(m[t], tok, PROMPT_TOKENS, DECODE_TOKENS, &e)) < 0) {
                stop_busy(busy);
                goto out;
            }
        }
        stop_busy(busy);
        printf("; with a busy process on CPU 0: %.1f (1 thread), %.1f (2 threads) tok/s, "
               "%.2fx\n", loaded[1], loaded[2], loaded[2] / loaded[1]);
    } else {
        printf("; contention test skipped (one CPU)\n");
    }
    /* verification: n rows after a VERIFY_PREFIX-token prefix */
    for (int t = 1; t <= 2; t++) {
        int32_t tok;
        if (sd_forward_top_k(m[t], m[t]->kv, prompt, VERIFY_PREFIX, 0, 0, 1, 1, &tok, &e)) goto out;
        double t1 = 0;
        printf("  verify n rows / 1 row, %d thread%s:", t, t > 1 ? "s" : "");
        for (int n = 1; n <= VERIFY_MAX; n++) {
            double tn = verify_time(m[t], prompt, n, &e);
            if (tn < 0) goto out;
            if (n == 1) t1 = tn;
            printf(" %d:%.2f", n, tn / t1);
        }
        printf("  (1 row %.1f ms; target 1 + 0.1(n-1))\n", t1 * 1e3);
    }
    for (int t = 1; t <= 2; t++) {
        sd_cpu *c = sd_backend_cpu_context(m[t]->be);
        if (breakdown(m[t], c, prompt, 1, VERIFY_PREFIX, 1, 8, &e) ||
            breakdown(m[t], c, prompt, 5, VERIFY_PREFIX, 5, 4, &e) ||
            breakdown(m[t], c, prompt, PROMPT_TOKENS, 0, 1, 2, &e))
            goto out;
    }
    if (m[1]->hp.ctx_train < LONG_CTX + LONG_TOKENS + 2)
        printf("  decode at %d cached positions: skipped (context_length %d)\n", LONG_CTX,
               m[1]->hp.ctx_train);
    else if (long_context(path, &e))
        goto out;
    rc = 0;
out:
    if (rc) fprintf(stderr, "bench_model: %s\n", e.msg);
    for (int t = 1; t <= 2; t++) sd_model_free(m[t]);
    return rc;
}

/* Prefill and decode on the GPU. */
static int bench_cuda(const char *path, double read_bw) {
    sd_err e;
    sd_model_opts o = {.n_ctx = PROMPT_TOKENS + DECODE_TOKENS + 16};
    sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CUDA, 1, &e), &o, &e);
    int32_t prompt[PROMPT_TOKENS];
    double pre, dec;
    if (!m || make_prompt(m, prompt, PROMPT_TOKENS, &e) || speeds(m, prompt, &pre, &dec, &e)) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        sd_model_free(m);
        return -1;
    }
    double bytes = (double)sd_model_weight_bytes(m);
    printf("%-36s %7s %12.1f %12.1f %12.2f %9.2f %8.1f%%\n", base_name(path), "cuda", pre, dec,
           bytes / 1e6, dec * bytes / 1e9, 100.0 * dec * bytes / 1e9 / read_bw);
    sd_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    const char *defaults[] = {"tests/data/models/stories260K.gguf",
                              "models/SmolLM2-135M-Instruct.Q4_1.gguf",
                              "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                              "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"};
    const char *const *models = argc > 1 ? (const char *const *)argv + 1 : defaults;
    int n_models = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    double bw[3] = {0, read_bandwidth(1), read_bandwidth(2)};
    printf("memory: read %.2f GB/s (1 thread), %.2f GB/s (2 threads), best of a plain and a prefetched "
           "stream over %zu MiB; memcpy %.2f GB/s (read+write)\n",
           bw[1], bw[2], bw_bytes() >> 20, copy_bandwidth());
    double peak[3] = {0, sd_int8_peak(1, sd_peak_thread), sd_int8_peak(2, sd_peak_thread)};
    double peak_tile[3] = {0, 0, 0};
    if (sd_cpu_isa_detect() >= SD_ISA_AMX)
        for (int t = 1; t <= 2; t++) peak_tile[t] = sd_int8_peak(t, sd_peak_amx_thread);
    printf("int8 peak: %.0f / %.0f G op/s at 1 / 2 threads (%s)", peak[1] / 1e9, peak[2] / 1e9,
           sd_cpu_isa_detect() >= SD_ISA_AVX512_VNNI ? "vpdpbusd zmm"
           : peak[1] > 0                            ? "vpmaddubsw ymm"
                                                    : "no AVX2: not measured");
    if (peak_tile[1] > 0) printf("; AMX tdpbusd %.0f / %.0f", peak_tile[1] / 1e9, peak_tile[2] / 1e9);
    printf("\n");
    printf("prefill: %d-token prompt; decode: %d tokens after it; median of %d runs; "
           "of bound = decode GB/s / read GB/s at the same threads (the better of the reading "
           "above and one right after the decode)\n",
           PROMPT_TOKENS, DECODE_TOKENS, REPEATS);
    printf("%-36s %7s %12s %12s %12s %9s %9s\n", "model", "where", "prefill t/s", "decode t/s",
           "MB/token", "GB/s", "of bound");
    int rc = 0;
    for (int i = 0; i < n_models; i++) rc |= bench_cpu(models[i], bw, peak, peak_tile);
    char why[256];
    if (sd_cuda_available(why, sizeof why)) {
        /* GPU rows: % of bound is against the host figure only when no
         * device copy bandwidth is known; make bench-kernels measures it */
        for (int i = 0; i < n_models; i++) rc |= bench_cuda(models[i], bw[1]);
    } else {
        printf("cuda: skipped (%s)\n", why);
    }
    return rc ? 1 : 0;
}
