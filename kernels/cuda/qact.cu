/* Activation quantisation for the integer matrix products, bit for bit the
 * CPU's (kernels/cpu/cpu_int.h): per block of 32, d = max|x| / 127, id = 1/d
 * (0 when d is 0), q = round-to-nearest-even(x * id), s = d * sum(q). One
 * warp per block, one element per lane (qact.cuh).
 *
 * Fused with the ops that make activations: norm.cu's RMSNorm (dim a
 * multiple of 32) writes the blocks of the rows it writes into slot QACT,
 * attention.cu (head dim a multiple of 32) and ffn.cu's SwiGLU (quantised
 * weights, hidden size a multiple of 32) into slot QOUT, since the input
 * blocks of their own product (SwiGLU's) or of the product before them
 * (Q/K/V, which a persistent step's attention may run beside) are in QACT;
 * each then leaves c->qtag naming the rows and the slot. A cu_qact of
 * exactly those rows in the op right after (the quantised projection of
 * those rows: qkv_rope, ffn_swiglu, the LM head, the output and down
 * projections) takes them as they are and launches nothing. Any other op in between makes the tag stale
 * (c->op_seq has moved), since it may have written the rows or the scratch.
 *
 * Scratch layout (either slot): q [n][cols] int8 | pad to 256 |
 * d [n][cols/32] | s [n][cols/32]; since cols is a multiple of 32, block b of
 * the flattened [n*cols] is block b % (cols/32) of row b / (cols/32). */
#include "kernels/cuda/qact.cuh"

__global__ void __launch_bounds__(32 * QA_WARPS) qact_kernel(const QaArgs a) {
    cu_grid_trigger();
    cu_grid_wait();
    qa_vblock(a, blockIdx.x, QA_WARPS);
}

size_t cu_qact_bytes(int n, int64_t cols) {
    return cu_align256((size_t)n * (size_t)cols) + 2 * (size_t)n * (size_t)(cols / 32) * 4;
}

int cu_qact_buffers(sd_cuda *c, int slot, int n, int64_t cols, int8_t **q, float **d, float **s,
                    sd_err *e) {
    const size_t qbytes = cu_align256((size_t)n * (size_t)cols);
    uint8_t *buf = (uint8_t *)cu_scratch(c, slot, cu_qact_bytes(n, cols), e);
    if (!buf) return -1;
    *q = (int8_t *)buf;
    *d = (float *)(buf + qbytes);
    *s = *d + (int64_t)n * (cols / 32);
    return 0;
}

void cu_qtag_set(sd_cuda *c, const float *x, int n, int64_t cols, int slot) {
    c->qtag.x = x;
    c->qtag.n = n;
    c->qtag.cols = cols;
    c->qtag.seq = c->op_seq;
    c->qtag.slot = slot;
}

int cu_qact(sd_cuda *c, const float *x, int n, int64_t cols, int8_t **q, float **d, float **s,
            sd_err *e) {
    const int64_t blocks = (int64_t)n * (cols / 32);
    if (c->qtag.x == x && c->qtag.n == n && c->qtag.cols == cols && c->qtag.seq + 1 == c->op_seq)
        return cu_qact_buffers(c, c->qtag.slot, n, cols, q, d, s, e); /* the op before made them */
    if (cu_qact_buffers(c, CU_SCRATCH_QACT, n, cols, q, d, s, e)) return -1;
    const int64_t grid = (blocks + QA_WARPS - 1) / QA_WARPS;
    const QaArgs a = {x, *q, *d, *s, blocks};
    if (c->step) {
        cu_spans sp = {};
        cu_span_add(&sp, x, (size_t)n * (size_t)cols * sizeof(float), 0);
        cu_qact_spans(*q, *d, *s, n, cols, &sp);
        return cu_step_add(c, CU_STEP_QACT, 0, &a, sizeof a, (unsigned)grid, 0, &sp, e);
    }
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, (unsigned)grid, 32 * QA_WARPS, 0, &at);
    cudaLaunchKernelEx(&cfg, qact_kernel, a);
    return cu_check_launch(c, e, "quantize activations %dx%lld", n, (long long)cols);
}
