/* Model benchmark: prefill and decode tokens/s for each model at 1 and 2
 * threads, next to the bytes each decode step must read and this machine's
 * measured memory bandwidth, so decode speed reads as a fraction of the
 * bandwidth bound (bandwidth / weight bytes per token).
 *   usage: bench_model [MODEL...]   (default: stories260K, SmolLM2 and the
 *   Qwen2.5-Coder pair) */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "kernels/cuda/backend_cuda.h"
#include "engine/model/model.h"
#include "engine/session/device.h"

#define PROMPT_TOKENS 128
#define DECODE_TOKENS 128
#define REPEATS 3

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* Read bandwidth: threads stream disjoint halves of a buffer much larger
 * than the last-level cache, summing so the loads cannot be elided. */
static double read_bandwidth(int threads) {
    size_t n = (size_t)256 << 20;
    uint64_t *buf = malloc(n);
    if (!buf) return 0;
    size_t words = n / 8;
    memset(buf, 1, n);
    double best = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = sd_now();
        uint64_t total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
        for (size_t i = 0; i < words; i += 4) total += buf[i] + buf[i + 1] + buf[i + 2] + buf[i + 3];
        double dt = sd_now() - t0;
        sink += total;
        if (n / dt > best) best = (double)n / dt;
    }
    free(buf);
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

static int bench(const char *path, int threads, int device, double read_bw) {
    sd_err e;
    sd_model_opts o = {PROMPT_TOKENS + DECODE_TOKENS + 8};
    sd_model *m = sd_model_load(path, sd_backend_open(device, threads, &e), &o, &e);
    if (!m) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        return -1;
    }
    const char *text =
        "Once upon a time, in a small village by the sea, there lived a girl who loved to watch "
        "the boats. Every morning she ran down to the harbour and counted the sails. ";
    int32_t *ids = NULL, prompt[PROMPT_TOKENS];
    int n_ids = 0;
    if (sd_tokenize(m->tok, text, strlen(text), 0, 0, &ids, &n_ids, &e) || n_ids == 0) {
        fprintf(stderr, "bench_model: tokenize: %s\n", e.msg);
        free(ids);
        sd_model_free(m);
        return -1;
    }
    for (int i = 0; i < PROMPT_TOKENS; i++) prompt[i] = ids[i % n_ids];
    free(ids);
    double pre[REPEATS], dec[REPEATS];
    int ok = 1;
    for (int r = 0; r < REPEATS && ok; r++) {
        /* greedy decoding as the engine runs it: the argmax is taken where
         * the logits are and only the id comes back */
        int32_t tok = 0, next;
        double t0 = sd_now();
        ok = sd_forward_top_k(m, m->kv, prompt, PROMPT_TOKENS, 0, 0, 1, 1, &tok, &e) == 0;
        pre[r] = PROMPT_TOKENS / (sd_now() - t0);
        t0 = sd_now();
        for (int i = 0; i < DECODE_TOKENS && ok; i++) {
            ok = sd_forward_top_k(m, m->kv, &tok, 1, PROMPT_TOKENS + i, 0, 1, 1, &next, &e) == 0;
            tok = next;
        }
        dec[r] = DECODE_TOKENS / (sd_now() - t0);
    }
    if (!ok) {
        fprintf(stderr, "bench_model: forward: %s\n", e.msg);
    } else {
        double bytes = (double)sd_model_weight_bytes(m);
        double d = median(dec, REPEATS), p = median(pre, REPEATS);
        double gbs = d * bytes / 1e9;
        const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char where[16];
        snprintf(where, sizeof where, "%s/%d", m->be->name, threads);
        printf("%-36s %7s %12.1f %12.1f %12.2f %9.2f %8.1f%%\n", name, where, p, d, bytes / 1e6,
               gbs, 100.0 * gbs / read_bw);
    }
    sd_model_free(m);
    return ok ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *defaults[] = {"tests/data/models/stories260K.gguf",
                              "models/SmolLM2-135M-Instruct.Q4_1.gguf",
                              "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                              "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"};
    const char *const *models = argc > 1 ? (const char *const *)argv + 1 : defaults;
    int n_models = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    double bw[3] = {0, read_bandwidth(1), read_bandwidth(2)};
    printf("memory: read %.2f GB/s (1 thread), %.2f GB/s (2 threads); memcpy %.2f GB/s (read+write)\n",
           bw[1], bw[2], copy_bandwidth());
    printf("prefill: %d-token prompt; decode: %d tokens after it; median of %d runs\n",
           PROMPT_TOKENS, DECODE_TOKENS, REPEATS);
    printf("%-36s %7s %12s %12s %12s %9s %9s\n", "model", "where", "prefill t/s", "decode t/s",
           "MB/token", "GB/s", "of bound");
    int rc = 0;
    for (int i = 0; i < n_models; i++)
        for (int t = 1; t <= 2; t++) rc |= bench(models[i], t, SD_DEVICE_CPU, bw[t]);
    char why[256];
    if (sd_cuda_available(why, sizeof why)) {
        /* GPU rows: % of bound is against the host figure only when no
         * device copy bandwidth is known; make bench-kernels measures it */
        for (int i = 0; i < n_models; i++) rc |= bench(models[i], 1, SD_DEVICE_CUDA, bw[1]);
    } else {
        printf("cuda: skipped (%s)\n", why);
    }
    return rc ? 1 : 0;
}
