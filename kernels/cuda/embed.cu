/* x[i] = row ids[i] of the embedding matrix, dequantised from the device
 * layout (cuda_int.h) with the CPU's arithmetic (kernels/cpu/quant.c: one
 * multiply, and for Q4_1 a separate add, never fused), so rows match the CPU
 * bit for bit. For the new types the partial products (d * (q - 16),
 * d * sc, dmin * mn, d * sc * nibble) are exact in float, so each element
 * is one rounding of its exact value whatever order a CPU dequantiser
 * multiplies in: Q5_0 d * (q - 16), Q4_K (d * sc) * nibble - dmin * mn
 * (the subtraction unfused), Q6_K (d * sc) * (q - 32). One thread per
 * element: a row is read once per token, so plain byte and word loads do.
 * Grid: (column blocks, n). */
#include "kernels/cuda/embed.cuh"

__global__ void __launch_bounds__(EM_THREADS) embed_kernel(const EmArgs a) {
    cu_grid_trigger();
    cu_grid_wait();
    em_vblock(a, blockIdx.y * a.gx + blockIdx.x, EM_THREADS);
}

int cu_embed(sd_cuda *c, float *x, const sd_weight *emb, const int32_t *ids_dev, int n,
             sd_err *e) {
    const uint8_t *base = (const uint8_t *)emb->data;
    const int64_t cols = emb->cols;
    int64_t gx = (cols + EM_THREADS - 1) / EM_THREADS;
    if (gx > 1024) gx = 1024;
    const uint32_t t = emb->type;
    EmArgs a;
    a.x = x;
    a.q = base;
    a.hb = base + cu_high_offset(t, emb->rows, cols);
    a.sc = base + cu_scale_offset(t, emb->rows, cols);
    a.ids = ids_dev;
    a.cols = cols;
    a.qrow = cu_qrow_bytes(t, cols);
    a.hrow = cu_hrow_bytes(t, cols);
    a.srow = cu_srow_bytes(t, cols);
    a.type = (int)t;
    a.gx = (unsigned)gx;
    if (c->step) {
        cu_spans sp = {};
        cu_span_add(&sp, ids_dev, (size_t)n * sizeof *ids_dev, 0);
        cu_span_add(&sp, x, (size_t)n * (size_t)cols * sizeof(float), 1);
        return cu_step_add(c, CU_STEP_EMBED, 0, &a, sizeof a, (unsigned)(gx * n), 0, &sp, e);
    }
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, dim3((unsigned)gx, (unsigned)n), EM_THREADS, 0, &at);
    cudaLaunchKernelEx(&cfg, embed_kernel, a);
    return cu_check_launch(c, e, "embed %s %lldx%lld", sd_wtype_name(emb->type),
                           (long long)emb->rows, (long long)cols);
}
