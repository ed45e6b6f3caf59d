/* SwiGLU: the scalar loop (sd_swiglu_ref, cpu_int.h) is the reference; the AVX2 one (swiglu_avx2.c)
 * runs on every SIMD level. Chunks of SWIGLU_CHUNK elements go to the pool
 * (prefill: rows x ffn elements; one decode row is a single chunk). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"

enum { SWIGLU_CHUNK = 16384 };
typedef struct {
    void (*fn)(float *, const float *, const float *, size_t);
    float *out;
    const float *gate, *up;
    size_t count;
} swiglu_job;
static void swiglu_task(void *v, int64_t t, int thread) {
    const swiglu_job *j = v;
    (void)thread;
    const size_t i0 = (size_t)t * SWIGLU_CHUNK;
    const size_t n = j->count - i0 < SWIGLU_CHUNK ? j->count - i0 : SWIGLU_CHUNK;
    j->fn(j->out + i0, j->gate + i0, j->up + i0, n);
}
void sd_cpu_swiglu(sd_cpu *c, float *out, const float *gate, const float *up, size_t count) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const swiglu_job j = {.fn = sd_cpu_isa(c) >= SD_ISA_AVX2 ? sd_cpu_swiglu_range_avx2
                                                       : sd_swiglu_ref,
                          .out = out, .gate = gate, .up = up, .count = count};
    const int64_t tasks = (int64_t)((count + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK);
    sd_pool_run(sd_cpu_pool(c), swiglu_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_SWIGLU, t0);
}

