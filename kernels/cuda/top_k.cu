/* Top-k ids of each row on the device: one block of 1024 threads per row,
 * k passes over the row. Pass j picks the best element strictly after pick
 * j-1 in the order (value desc, index asc): each thread scans a strided
 * subset keeping its best candidate, a CUB block reduction picks the best
 * of those, thread 0 writes it out and to shared memory for the next pass.
 * That order is the engine's host top-k (kernels/common/top_k.h): the
 * lowest index first among equal values, so k = 1 is the first maximum.
 * -inf values are ordinary values (a row of -inf gives 0, 1, ..., k-1);
 * NaN compares false both ways and is never picked.
 *
 * Cost: k reads of the row (a 128K-entry row is 512 KB, in L2 after the
 * first pass); the ids that cross to the host are n_rows*k ints instead of
 * the rows.
 *
 * The argmax (k = 1) of a long row is spread over several blocks, since one
 * block of one multiprocessor cannot stream a 600 KB row at the device's
 * bandwidth: argmax_part_kernel gives each of `split` blocks a contiguous
 * slice of the row (grid: split x rows) and writes the slice's best pair,
 * argmax_final_kernel reduces a row's pairs in one warp. The order is the
 * same (value desc, index asc), so the result is the single-block one.
 *
 * Probabilities (probs set): the softmax probability of each picked id,
 * exp(v - max) / sum_i exp(x_i - max). The single-block kernel sums in one
 * more pass after the first pick (max known). The multi-block argmax keeps
 * a running sum relative to each thread's best value, rescaled when a
 * larger value arrives, and merges two partial sums at the larger of their
 * values, so it needs no second pass. An element equal to the max adds
 * exactly 1 (a row of -inf: probability 1/cols each); NaN adds nothing.
 *
 * The bodies are top_k.cuh's, for any block size: in a persistent step
 * (step.cu) the same work runs as stages of 128-thread items, the k best
 * (one item a row) or a long row's argmax (its slices, then the merge),
 * so a greedy step's ids are made inside the step's one launch. */
#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/top_k.cuh"

enum { TK_THREADS = 1024, AM_THREADS = 256 };

__global__ void __launch_bounds__(TK_THREADS)
    top_k_kernel(int32_t *out, float *probs, const float *x, int cols, int k) {
    tk_row<TK_THREADS>(out, probs, x, cols, k, blockIdx.x);
}

__global__ void __launch_bounds__(AM_THREADS) argmax_part_kernel(const AmPartArgs a) {
    am_part<AM_THREADS>(a, blockIdx.x, blockIdx.y);
}

/* One warp per row over its `split` pairs. */
__global__ void __launch_bounds__(32) argmax_final_kernel(const AmFinalArgs a) { am_final(a, blockIdx.x); }

size_t cu_top_k_part_bytes(void) { return (size_t)SD_MAX_ROWS * CU_ARGMAX_MAX_SPLIT * sizeof(AmPart); }

/* Blocks per row for the argmax of cols elements (1: the single-block
 * kernel): a slice of at least CU_ARGMAX_MIN_SLICE elements a block. */
int cu_argmax_split(int cols) {
    const int s = cols / CU_ARGMAX_MIN_SLICE;
    return s < 2 ? 1 : s > CU_ARGMAX_MAX_SPLIT ? CU_ARGMAX_MAX_SPLIT : s;
}

/* In a step being built (c->step) the launches are added as its stages:
 * the k best read the rows and write the ids (and probabilities), the
 * argmax's slices read the rows and write their pairs, the merge reads
 * those and writes the ids. */
int cu_top_k_rows(sd_cuda *c, int32_t *out_dev, float *probs_dev, const float *x, int n_rows,
                  int cols, int k, sd_err *e) {
    const int split = k == 1 ? cu_argmax_split(cols) : 1;
    const size_t rows = (size_t)n_rows * (size_t)cols * sizeof(float), ids = (size_t)n_rows * (size_t)k;
    if (split == 1) {
        if (c->step) {
            const TkArgs a = {out_dev, probs_dev, x, cols, k};
            cu_spans sp = {};
            cu_span_add(&sp, x, rows, 0);
            cu_span_add(&sp, out_dev, ids * sizeof *out_dev, 1);
            cu_span_add(&sp, probs_dev, ids * sizeof *probs_dev, 1);
            return cu_step_add(c, CU_STEP_TOPK, 0, &a, sizeof a, (unsigned)n_rows, 0, &sp, e);
        }
        top_k_kernel<<<n_rows, TK_THREADS, 0, c->stream>>>(out_dev, probs_dev, x, cols, k);
        return cu_check_launch(c, e, "top_k_rows %dx%d k %d", n_rows, cols, k);
    }
    AmPart *part = (AmPart *)c->top_k_part;
    const AmPartArgs pa = {part, x, cols, (cols + split - 1) / split, probs_dev != NULL, split};
    const AmFinalArgs fa = {out_dev, probs_dev, part, split};
    if (c->step) {
        const size_t pairs = (size_t)n_rows * (size_t)split * sizeof *part;
        cu_spans sp = {};
        cu_span_add(&sp, x, rows, 0);
        cu_span_add(&sp, part, pairs, 1);
        if (cu_step_add(c, CU_STEP_ARGMAX_PART, 0, &pa, sizeof pa, (unsigned)(split * n_rows), 0, &sp, e))
            return -1;
        cu_spans sf = {};
        cu_span_add(&sf, part, pairs, 0);
        cu_span_add(&sf, out_dev, ids * sizeof *out_dev, 1);
        cu_span_add(&sf, probs_dev, ids * sizeof *probs_dev, 1);
        return cu_step_add(c, CU_STEP_ARGMAX_FINAL, 0, &fa, sizeof fa, (unsigned)n_rows, 0, &sf, e);
    }
    argmax_part_kernel<<<dim3(split, n_rows), AM_THREADS, 0, c->stream>>>(pa);
    if (cu_check_launch(c, e, "top_k_rows %dx%d argmax, %d slices", n_rows, cols, split)) return -1;
    argmax_final_kernel<<<n_rows, 32, 0, c->stream>>>(fa);
    return cu_check_launch(c, e, "top_k_rows %dx%d argmax, final", n_rows, cols);
}
