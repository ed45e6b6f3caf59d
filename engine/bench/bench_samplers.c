/* Sampler microbenchmark: microseconds per token of a sampler or a chain of
 * stages, loaded by name through the engine's loader like a run loads it:
 * the history moves one token per step (reset to a 64-token prompt, then
 * sd_sampler_dist + sd_sampler_sample, the drawn token appended), so a
 * stage that keeps history pays for its accept too. Logits are Gaussian
 * with standard deviation 3, close to the spread of real LM-head outputs,
 * cycling through a few rows so no single row's branch pattern is learnt.
 * Median of many repetitions.
 *
 * Usage: bench_samplers [--plugin-dir DIR]... [--vocab N]... [--arg K=V]...
 *                       [CHAIN ...]
 * Defaults: plugins/, vocabularies 49152 (SmolLM2), 128256 (Llama 3) and
 * 151936 (Qwen2.5), the built-in samplers alone and a few chains. Any
 * plugin the search path holds can be named; --arg takes the syntax of
 * --sampler-arg and applies to every chain (unknown keys are errors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/sampling/sampler_host.h"

#define N_ROWS 8
#define REPS 301
#define WARMUP 20
#define PROMPT 64
#define MAX_LIST 32

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void gaussian_rows(float *logits, size_t n, sd_rng *r) {
    for (size_t i = 0; i < n; i++) {
        double u1 = 1.0 - sd_rng_uniform(r), u2 = sd_rng_uniform(r);
        logits[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* Median microseconds per token, or a negative value on error. */
static double bench(const sd_sampler_set *set, const char *spec, const char *const *kv, int n_kv,
                    int vocab, const float *logits, float *probs, double *times) {
    sd_err e;
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = vocab,
                           .max_history = PROMPT + WARMUP + REPS + 1,
                           .role = SD_ROLE_TARGET};
    sd_sampler *p = sd_sampler_create_for(set, spec, kv, n_kv, &info, &e);
    if (!p) {
        fprintf(stderr, "bench_samplers: %s\n", e.msg);
        return -1;
    }
    int32_t seq[PROMPT + WARMUP + REPS + 1];
    sd_rng r;
    sd_rng_seed(&r, 42);
    for (int i = 0; i < PROMPT; i++)
        seq[i] = (int32_t)(sd_rng_uniform(&r) * vocab);
    double result = -1;
    if (sd_sampler_reset(p, seq, PROMPT, &e)) {
        fprintf(stderr, "bench_samplers: %s\n", e.msg);
        goto done;
    }
    for (int k = 0; k < WARMUP + REPS; k++) {
        const float *row = logits + (size_t)(k % N_ROWS) * (size_t)vocab;
        int pos = PROMPT + k;
        double t0 = now_us();
        if (sd_sampler_dist(p, seq, pos, row, pos, probs, vocab, &e) ||
            sd_sampler_sample(p, probs, vocab, &r, &seq[pos], &e)) {
            fprintf(stderr, "bench_samplers: %s: %s\n", spec, e.msg);
            goto done;
        }
        double t1 = now_us();
        if (k >= WARMUP)
            times[k - WARMUP] = t1 - t0;
    }
    qsort(times, REPS, sizeof *times, cmp_double);
    result = times[REPS / 2];
done:
    sd_sampler_destroy(p);
    return result;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_samplers [--plugin-dir DIR]... [--vocab N]... [--arg K=V]... "
                    "[CHAIN ...]\n");
    return 2;
}

int main(int argc, char **argv) {
    static const char *const default_chains[] = {
        "greedy", "multinomial", "top_k", "nucleus", "top_k_nucleus",
        "temperature,multinomial", "min_p,multinomial", "typical,multinomial", "mirostat",
        "penalty,greedy", "penalty,multinomial", "penalty,top_k,nucleus", "penalty,mirostat"};
    static const int default_vocabs[] = {49152, 128256, 151936};
    const char *dirs[MAX_LIST], *chains[MAX_LIST], *kv[MAX_LIST];
    int vocabs[MAX_LIST], n_dirs = 0, n_chains = 0, n_kv = 0, n_vocabs = 0;
    for (int i = 1; i < argc; i++) {
        int flag = argv[i][0] == '-';
        if (flag && i + 1 == argc)
            return usage();
        if (!strcmp(argv[i], "--plugin-dir") && n_dirs < MAX_LIST)
            dirs[n_dirs++] = argv[++i];
        else if (!strcmp(argv[i], "--arg") && n_kv < MAX_LIST)
            kv[n_kv++] = argv[++i];
        else if (!strcmp(argv[i], "--vocab") && n_vocabs < MAX_LIST) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > (1 << 24))
                return usage();
            vocabs[n_vocabs++] = (int)v;
        } else if (!flag && n_chains < MAX_LIST)
            chains[n_chains++] = argv[i];
        else
            return usage();
    }
    if (!n_dirs)
        dirs[n_dirs++] = "plugins";
    if (!n_chains)
        for (size_t c = 0; c < sizeof default_chains / sizeof *default_chains; c++)
            chains[n_chains++] = default_chains[c];
    if (!n_vocabs)
        for (size_t v = 0; v < sizeof default_vocabs / sizeof *default_vocabs; v++)
            vocabs[n_vocabs++] = default_vocabs[v];
    sd_err e;
    sd_sampler_set *set = sd_samplers_open_lazy(dirs, n_dirs, &e);
    if (!set) {
        fprintf(stderr, "bench_samplers: %s\n", e.msg);
        return 1;
    }
    int rc = 1, max = 0;
    for (int v = 0; v < n_vocabs; v++)
        max = vocabs[v] > max ? vocabs[v] : max;
    float *logits = malloc((size_t)max * N_ROWS * sizeof *logits),
          *probs = malloc((size_t)max * sizeof *probs);
    double *times = malloc(REPS * sizeof *times);
    if (!logits || !probs || !times) {
        fprintf(stderr, "bench_samplers: out of memory\n");
        goto out;
    }
    sd_rng r;
    sd_rng_seed(&r, 7);
    gaussian_rows(logits, (size_t)max * N_ROWS, &r);
    for (int c = 0; c < n_chains; c++)
        if (sd_samplers_load_chain(set, chains[c], &e)) {
            for (int i = 0; i < sd_samplers_n_warnings(set); i++)
                fprintf(stderr, "warning: %s\n", sd_samplers_warning(set, i));
            fprintf(stderr, "bench_samplers: %s\n", e.msg);
            goto out;
        }
    printf("%-28s %8s %12s   (dist + sample + history, median of %d)\n", "sampler", "vocab",
           "us/token", REPS);
    for (int c = 0; c < n_chains; c++)
        for (int v = 0; v < n_vocabs; v++) {
            double us = bench(set, chains[c], kv, n_kv, vocabs[v], logits, probs, times);
            if (us < 0)
                goto out;
            printf("%-28s %8d %12.1f\n", chains[c], vocabs[v], us);
            fflush(stdout);
        }
    rc = 0;
out:
    free(logits);
    free(probs);
    free(times);
    sd_samplers_close(set);
    return rc;
}
