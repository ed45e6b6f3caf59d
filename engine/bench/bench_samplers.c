/* Sampler microbenchmark: microseconds per process + sample of one row for
 * each built-in sampler (default parameters), loaded from plugins/ through
 * the engine's loader, at the vocabulary sizes of SmolLM2 (49152) and
 * Llama 3 (128256). Logits are Gaussian with standard deviation 3, close to
 * the spread of real LM-head outputs. Median of many repetitions, cycling
 * through a few rows so no single row's branch pattern is learnt.
 * Usage: bench_samplers [plugin-dir]   (default: plugins) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/sampling/sampler_host.h"

#define N_ROWS 8
#define REPS 301
#define WARMUP 20

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void gaussian_rows(float *logits, int n, sd_rng *r) {
    for (int i = 0; i < n; i++) {
        double u1 = 1.0 - sd_rng_uniform(r), u2 = sd_rng_uniform(r);
        logits[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

/* Median microseconds per process + sample, or a negative value on error. */
static double bench(const sd_sampler_set *set, const char *name, int vocab, const float *logits,
                    float *probs, double *times) {
    sd_err e;
    sd_sampler *p = sd_sampler_create(set, name, NULL, 0, vocab, &e);
    if (!p) {
        fprintf(stderr, "bench_samplers: %s\n", e.msg);
        return -1;
    }
    sd_rng r;
    sd_rng_seed(&r, 42);
    double result = -1;
    for (int k = 0; k < WARMUP + REPS; k++) {
        const float *row = logits + (size_t)(k % N_ROWS) * (size_t)vocab;
        int32_t id;
        double t0 = now_us();
        if (sd_sampler_probs(p, row, probs, 1, vocab, &e) ||
            sd_sampler_sample(p, probs, vocab, &r, &id, &e)) {
            fprintf(stderr, "bench_samplers: %s\n", e.msg);
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

int main(int argc, char **argv) {
    static const char *const names[] = {"greedy", "multinomial", "top_k", "nucleus",
                                        "top_k_nucleus"};
    static const int vocabs[] = {49152, 128256};
    const char *dir = argc > 1 ? argv[1] : "plugins";
    sd_err e;
    sd_sampler_set *set = sd_samplers_open(&dir, 1, &e);
    if (!set) {
        fprintf(stderr, "bench_samplers: %s\n", e.msg);
        return 1;
    }
    for (int i = 0; i < sd_samplers_n_warnings(set); i++)
        fprintf(stderr, "warning: %s\n", sd_samplers_warning(set, i));
    int rc = 1;
    size_t max = (size_t)vocabs[1] * N_ROWS;
    float *logits = malloc(max * sizeof *logits), *probs = malloc((size_t)vocabs[1] * sizeof *probs);
    double *times = malloc(REPS * sizeof *times);
    if (!logits || !probs || !times) {
        fprintf(stderr, "bench_samplers: out of memory\n");
        goto out;
    }
    sd_rng r;
    sd_rng_seed(&r, 7);
    gaussian_rows(logits, (int)max, &r);
    printf("%-16s %8s %12s   (process + sample, median of %d)\n", "sampler", "vocab",
           "us/call", REPS);
    for (size_t s = 0; s < sizeof names / sizeof names[0]; s++)
        for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
            double us = bench(set, names[s], vocabs[v], logits, probs, times);
            if (us < 0)
                goto out;
            printf("%-16s %8d %12.1f\n", names[s], vocabs[v], us);
        }
    rc = 0;
out:
    free(logits);
    free(probs);
    free(times);
    sd_samplers_close(set);
    return rc;
}
