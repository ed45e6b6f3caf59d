#include "kernels/common/top_k.h"

#include <pthread.h>

#include "kernels/common/top_k_push.h"

int sd_top_k_scalar(const float *x, int n, int k, int32_t *idx) {
    int m = 0;
    for (int i = 0; i < n && k > 0; i++) m = sd_top_k_push(x, i, k, idx, m);
    return m;
}

/* The AVX2 loop needs only AVX2 itself (no FMA or F16C). */
static int have_avx2;
static void detect(void) {
    __builtin_cpu_init();
    have_avx2 = __builtin_cpu_supports("avx2");
}

int sd_host_top_k(const float *x, int n, int k, int32_t *idx) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, detect);
    return have_avx2 ? sd_top_k_avx2(x, n, k, idx) : sd_top_k_scalar(x, n, k, idx);
}
