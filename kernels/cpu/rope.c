/* Rotary position embedding over q/k rows, and the bias add of the
 * projections before it. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"

/* llama.cpp's "normal" rope: pair (2j, 2j+1) turns by theta_j = p*s^j with
 * s = base^(-2/rope_dim), theta built by repeated float multiplication as
 * ggml_rope_cache_init does, so angles match llama.cpp bit for bit. */
enum { ROPE_ROWS = 4 }; /* rows a pool task: each computes its own angles */
typedef struct {
    float *x;
    int n, pos, n_heads, head_dim, half, step, other;
    float theta_scale;
} rope_job;
static void rope_task(void *v, int64_t t, int thread) {
    const rope_job *j = v;
    (void)thread;
    const int half = j->half, step = j->step, other = j->other;
    enum { MAXP = 512 };
    float cs[MAXP], sn[MAXP];
    const int i1 = (int)(t + 1) * ROPE_ROWS < j->n ? (int)(t + 1) * ROPE_ROWS : j->n;
    for (int i = (int)t * ROPE_ROWS; i < i1; i++) {
        float *row = j->x + (size_t)i * j->n_heads * j->head_dim;
        float theta = (float)(j->pos + i);
        int cached = half <= MAXP;
        if (cached) {
            for (int k = 0; k < half; k++) {
                cs[k] = cosf(theta);
                sn[k] = sinf(theta);
                theta *= j->theta_scale;
            }
        }
        for (int h = 0; h < j->n_heads; h++) {
            float *v = row + (size_t)h * j->head_dim;
            float th = (float)(j->pos + i);
            for (int k = 0; k < half; k++) {
                float co, si;
                if (cached) {
                    co = cs[k];
                    si = sn[k];
                } else {
                    co = cosf(th);
                    si = sinf(th);
                    th *= j->theta_scale;
                }
                float *p0 = v + step * k, *p1 = p0 + other;
                float a = *p0, b = *p1;
                *p0 = a * co - b * si;
                *p1 = a * si + b * co;
            }
        }
    }
}
void sd_cpu_rope(sd_cpu *c, float *x, int n, int pos, int n_heads, int head_dim, int rope_dim,
                 float freq_base, int neox) {
    uint64_t t0 = sd_cpu_prof_start(c);
    if (rope_dim > head_dim) rope_dim = head_dim;
    const int half = rope_dim / 2;
    /* element offsets of pair j: (2j, 2j+1), or (j, j+half) for neox */
    const rope_job j = {.x = x, .n = n, .pos = pos, .n_heads = n_heads, .head_dim = head_dim,
                        .half = half, .step = neox ? 1 : 2, .other = neox ? half : 1,
                        .theta_scale = powf(freq_base, -2.0f / (float)rope_dim)};
    const int64_t tasks = (n + ROPE_ROWS - 1) / ROPE_ROWS;
    sd_pool_run(sd_cpu_pool(c), rope_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_ROPE, t0);
}

void sd_cpu_add_bias(float *x, const float *b, int n, int dim) {
    for (int i = 0; i < n; i++) {
        float *row = x + (size_t)i * dim;
        for (int r = 0; r < dim; r++) row[r] += b[r];
    }
}

