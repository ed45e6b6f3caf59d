/* The CUDA entry points of a build without CUDA (make CUDA=0, or no nvcc):
 * each says so, so callers need no #ifdef. */
#include <stdio.h>

#include "kernels/cuda/backend_cuda.h"

#define NO_CUDA "built without CUDA (make CUDA=0 or no nvcc)"

int sd_cuda_available(char *why, size_t cap) {
    if (why && cap) snprintf(why, cap, "%s", NO_CUDA);
    return 0;
}

sd_backend *sd_backend_cuda(int device, const sd_backend_opts *o, sd_err *e) {
    (void)o;
    (void)device;
    sd_fail(e, "cuda backend: " NO_CUDA);
    return NULL;
}

int sd_cuda_from_host(sd_backend *b, void *dst_dev, const void *src_host, size_t bytes,
                      sd_err *e) {
    (void)b, (void)dst_dev, (void)src_host, (void)bytes;
    return sd_fail(e, "cuda: from_host: " NO_CUDA);
}

int sd_cuda_set_graph(sd_backend *b, int on) {
    (void)b, (void)on;
    return -1;
}

int sd_cuda_set_persist_waits(sd_backend *b, int how) {
    (void)b, (void)how;
    return -1;
}

int sd_cuda_set_fuse_norm(sd_backend *b, int per_sm) {
    (void)b, (void)per_sm;
    return -1;
}

int sd_cuda_set_mma(sd_backend *b, int on) {
    (void)b, (void)on;
    return -1;
}

int sd_cuda_mma_check(sd_backend *b, const int8_t *a, const int8_t *bm, int32_t *c, int k,
                      sd_err *e) {
    (void)b, (void)a, (void)bm, (void)c, (void)k;
    return sd_fail(e, "cuda: mma_check: " NO_CUDA);
}

int sd_cuda_mma_check_h(sd_backend *b, int bf16, const uint16_t *a, const uint16_t *bm, float *c,
                        sd_err *e) {
    (void)b, (void)bf16, (void)a, (void)bm, (void)c;
    return sd_fail(e, "cuda: mma_check_h: " NO_CUDA);
}

long sd_cuda_norms_folded(sd_backend *b) {
    (void)b;
    return -1;
}

int sd_cuda_graph_stats_get(sd_backend *b, sd_cuda_graph_stats *out) {
    (void)b, (void)out;
    return -1;
}
