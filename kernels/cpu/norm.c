/* RMSNorm over rows (the op sd_cpu_rmsnorm): one pass for the sum of
 * squares (double), one to scale. Each row's sum runs in element order, as
 * the reference does, so every row has the bits of a one-row call. The sum is a chain of dependent
 * double adds: four rows go side by side (four chains in flight), and
 * tasks of NORM_ROWS rows go to the pool (a prefill's rows would
 * otherwise all wait on the caller). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"

enum { NORM_ROWS = 8 };
typedef struct {
    float *out;
    const float *x, *w;
    int n, dim;
    float eps;
} norm_job;
static void norm_scale(const norm_job *j, int i, double ss) {
    const float *xr = j->x + (size_t)i * j->dim, *w = j->w;
    float *o = j->out + (size_t)i * j->dim;
    const float scale = (float)(1.0 / sqrt(ss / j->dim + j->eps));
    for (int k = 0; k < j->dim; k++) o[k] = xr[k] * scale * w[k];
}
static void norm_task(void *v, int64_t t, int thread) {
    const norm_job *j = v;
    (void)thread;
    const int dim = j->dim, i1 = (int)(t + 1) * NORM_ROWS < j->n ? (int)(t + 1) * NORM_ROWS : j->n;
    int i = (int)t * NORM_ROWS;
    for (; i + 4 <= i1; i += 4) {
        const float *x0 = j->x + (size_t)i * dim, *x1 = x0 + dim, *x2 = x1 + dim, *x3 = x2 + dim;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int k = 0; k < dim; k++) {
            s0 += (double)x0[k] * x0[k];
            s1 += (double)x1[k] * x1[k];
            s2 += (double)x2[k] * x2[k];
            s3 += (double)x3[k] * x3[k];
        }
        norm_scale(j, i, s0);
        norm_scale(j, i + 1, s1);
        norm_scale(j, i + 2, s2);
        norm_scale(j, i + 3, s3);
    }
    for (; i < i1; i++) {
        const float *xr = j->x + (size_t)i * dim;
        double ss = 0;
        for (int k = 0; k < dim; k++) ss += (double)xr[k] * xr[k];
        norm_scale(j, i, ss);
    }
}
void sd_cpu_rmsnorm(sd_cpu *c, float *out, const float *x, const float *w, int n, int dim,
                    float eps) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const norm_job j = {out, x, w, n, dim, eps};
    const int64_t tasks = (n + NORM_ROWS - 1) / NORM_ROWS;
    sd_pool_run(sd_cpu_pool(c), norm_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_RMSNORM, t0);
}

