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
 * exactly 1 (a row of -inf: probability 1/cols each); NaN adds nothing. */
#include <cub/block/block_reduce.cuh>
#include <limits.h>
#include <math.h>

#include "kernels/cuda/cuda_int.h"

enum { TK_THREADS = 1024 };

struct TkPair {
    float v;
    int i; /* INT_MAX: no candidate */
};

/* a comes before b in (value desc, index asc); no candidate comes last */
__device__ __forceinline__ bool tk_before(const TkPair &a, const TkPair &b) {
    if (b.i == INT_MAX) return a.i != INT_MAX;
    if (a.i == INT_MAX) return false;
    return a.v > b.v || (a.v == b.v && a.i < b.i);
}

struct TkBest {
    __device__ __forceinline__ TkPair operator()(const TkPair &a, const TkPair &b) const {
        return tk_before(b, a) ? b : a;
    }
};

/* exp(v - m) for a value v of a row whose max is m, exactly 1 at v == m */
__device__ __forceinline__ float tk_rel(float v, float m) { return v == m ? 1.0f : expf(v - m); }

__global__ void __launch_bounds__(TK_THREADS)
    top_k_kernel(int32_t *out, float *probs, const float *x, int cols, int k) {
    typedef cub::BlockReduce<TkPair, TK_THREADS> Reduce;
    typedef cub::BlockReduce<float, TK_THREADS> SumReduce;
    __shared__ union {
        typename Reduce::TempStorage pick;
        typename SumReduce::TempStorage sum;
    } tmp;
    __shared__ TkPair prev;
    const float *row = x + (size_t)blockIdx.x * cols;
    int32_t *ids = out + (size_t)blockIdx.x * k;
    float m = 0, total = 0; /* the row's max (every thread), its sum (thread 0) */
    for (int j = 0; j < k; j++) {
        TkPair best = {-INFINITY, INT_MAX};
        for (int c = threadIdx.x; c < cols; c += TK_THREADS) {
            const TkPair cand = {row[c], c};
            const bool fresh = !isnan(cand.v) && (j == 0 || tk_before(prev, cand));
            if (fresh && tk_before(cand, best)) best = cand;
        }
        best = Reduce(tmp.pick).Reduce(best, TkBest());
        if (threadIdx.x == 0) {
            ids[j] = best.i == INT_MAX ? 0 : best.i;
            prev = best;
        }
        __syncthreads(); /* prev for the next pass; tmp reused */
        if (probs && j == 0) {
            m = prev.v;
            float s = 0;
            for (int c = threadIdx.x; c < cols; c += TK_THREADS)
                if (!isnan(row[c])) s += tk_rel(row[c], m);
            total = SumReduce(tmp.sum).Sum(s);
            __syncthreads(); /* tmp reused */
        }
        if (probs && threadIdx.x == 0)
            probs[(size_t)blockIdx.x * k + j] = prev.i == INT_MAX ? 0.0f : tk_rel(prev.v, m) / total;
    }
}

enum { AM_THREADS = 256 };

/* A slice's best pair and, with probabilities, sum_i exp(x_i - v) over it. */
struct AmPart {
    float v;
    int i; /* INT_MAX: no candidate */
    float s;
};

/* sum: the sums are wanted (otherwise they stay 0 and cost no exp) */
struct AmMerge {
    bool sum;
    __device__ __forceinline__ AmPart operator()(const AmPart &a, const AmPart &b) const {
        const TkPair pa = {a.v, a.i}, pb = {b.v, b.i};
        const AmPart &w = tk_before(pb, pa) ? b : a;
        const AmPart r = {w.v, w.i, sum ? a.s * tk_rel(a.v, w.v) + b.s * tk_rel(b.v, w.v) : 0.0f};
        return r;
    }
};

__global__ void __launch_bounds__(AM_THREADS)
    argmax_part_kernel(AmPart *part, const float *x, int cols, int per, int want_sum) {
    typedef cub::BlockReduce<AmPart, AM_THREADS> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    const float *row = x + (size_t)blockIdx.y * cols;
    const int c0 = blockIdx.x * per, c1 = min(cols, c0 + per);
    AmPart best = {-INFINITY, INT_MAX, 0.0f};
    for (int c = c0 + (int)threadIdx.x; c < c1; c += AM_THREADS) {
        const float v = row[c];
        if (isnan(v)) continue;
        if (want_sum) best.s = v > best.v ? best.s * expf(best.v - v) + 1.0f : best.s + tk_rel(v, best.v);
        const TkPair cand = {v, c}, cur = {best.v, best.i};
        if (tk_before(cand, cur)) best.v = v, best.i = c;
    }
    best = Reduce(tmp).Reduce(best, AmMerge{want_sum != 0});
    if (threadIdx.x == 0) part[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = best;
}

/* One warp per row over its `split` pairs. */
__global__ void __launch_bounds__(32)
    argmax_final_kernel(int32_t *out, float *probs, const AmPart *part, int split) {
    const AmPart *p = part + (size_t)blockIdx.x * split;
    const AmMerge merge = {probs != NULL};
    AmPart best = {-INFINITY, INT_MAX, 0.0f};
    for (int i = threadIdx.x; i < split; i += 32) best = merge(best, p[i]);
    for (int off = 16; off > 0; off >>= 1) {
        AmPart o;
        o.v = __shfl_down_sync(0xffffffffu, best.v, off);
        o.i = __shfl_down_sync(0xffffffffu, best.i, off);
        o.s = __shfl_down_sync(0xffffffffu, best.s, off);
        best = merge(best, o);
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = best.i == INT_MAX ? 0 : best.i;
        if (probs) probs[blockIdx.x] = best.i == INT_MAX ? 0.0f : 1.0f / best.s;
    }
}

size_t cu_top_k_part_bytes(void) { return (size_t)SD_MAX_ROWS * CU_ARGMAX_MAX_SPLIT * sizeof(AmPart); }

/* Blocks per row for the argmax of cols elements (1: the single-block
 * kernel): a slice of at least CU_ARGMAX_MIN_SLICE elements a block. */
int cu_argmax_split(int cols) {
    const int s = cols / CU_ARGMAX_MIN_SLICE;
    return s < 2 ? 1 : s > CU_ARGMAX_MAX_SPLIT ? CU_ARGMAX_MAX_SPLIT : s;
}

int cu_top_k_rows(sd_cuda *c, int32_t *out_dev, float *probs_dev, const float *x, int n_rows,
                  int cols, int k, sd_err *e) {
    const int split = k == 1 ? cu_argmax_split(cols) : 1;
    if (split == 1) {
        top_k_kernel<<<n_rows, TK_THREADS, 0, c->stream>>>(out_dev, probs_dev, x, cols, k);
        return cu_check_launch(c, e, "top_k_rows %dx%d k %d", n_rows, cols, k);
    }
    AmPart *part = (AmPart *)c->top_k_part;
    const int per = (cols + split - 1) / split;
    argmax_part_kernel<<<dim3(split, n_rows), AM_THREADS, 0, c->stream>>>(part, x, cols, per, probs_dev != NULL);
    if (cu_check_launch(c, e, "top_k_rows %dx%d argmax, %d slices", n_rows, cols, split)) return -1;
    argmax_final_kernel<<<n_rows, 32, 0, c->stream>>>(out_dev, probs_dev, part, split);
    return cu_check_launch(c, e, "top_k_rows %dx%d argmax, final", n_rows, cols);
}
