/* The top_k_rows op: each row's top-k ids (kernels/common/top_k.h) and,
 * when asked, their softmax probabilities, rows in parallel. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/common/top_k.h"

/* The softmax probabilities of a row's top ids need its denominator, one
 * more pass over the row (the AVX2 sum on every SIMD level). */
typedef struct {
    int (*top_k)(const float *, int, int, int32_t *);
    double (*exp_sum)(const float *, size_t, float);
    const float *x;
    int cols, k;
    int32_t *ids;
    float *probs;
} top_k_job;

static void top_k_task(void *v, int64_t r, int thread) {
    const top_k_job *j = v;
    (void)thread;
    const float *x = j->x + (size_t)r * j->cols;
    int32_t *ids = j->ids + (size_t)r * j->k;
    j->top_k(x, j->cols, j->k, ids);
    if (!j->probs) return;
    const float m = x[ids[0]];
    const double sum = j->exp_sum(x, (size_t)j->cols, m);
    for (int i = 0; i < j->k; i++)
        j->probs[(size_t)r * j->k + i] = (float)((x[ids[i]] == m ? 1.0 : exp((double)x[ids[i]] - m)) / sum);
}

void sd_cpu_top_k_rows(sd_cpu *c, const float *x, int n_rows, int cols, int k, int32_t *ids,
                       float *probs) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const int simd = sd_cpu_isa(c) >= SD_ISA_AVX2;
    top_k_job j = {simd ? sd_top_k_avx2 : sd_top_k_scalar, simd ? sd_cpu_exp_sum_avx2 : sd_exp_sum_ref,
                   x, cols, k, ids, probs};
    sd_pool_run(sd_cpu_pool(c), top_k_task, &j, n_rows, 1);
    sd_cpu_prof_add(c, SD_OP_TOP_K, t0);
}

