/* The bodies of top_k.cu's kernels, one row or one slice of a row a block,
 * for any block size: top_k.cu's own launches (1024 and 256 threads) and
 * the persistent step's items (step.cuh, 128 threads) run the same
 * comparisons. The order, the probabilities and the split of a long row's
 * argmax are described in top_k.cu. */
#ifndef SD_CUDA_TOP_K_CUH
#define SD_CUDA_TOP_K_CUH

#include <cub/block/block_reduce.cuh>
#include <limits.h>
#include <math.h>

#include "kernels/cuda/cuda_int.h"

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

/* Arguments of the three kinds as persistent-step stages: the k best of
 * each row (a block a row), and a long row's argmax as slices (a block a
 * slice: virtual block b is slice b % split of row b / split) and their
 * merge (a block a row, its first warp). */
struct TkArgs {
    int32_t *out;
    float *probs;
    const float *x;
    int cols, k;
};
struct AmPartArgs {
    AmPart *part;
    const float *x;
    int cols, per, want_sum, split;
};
struct AmFinalArgs {
    int32_t *out;
    float *probs;
    const AmPart *part;
    int split;
};

/* The k best of row `row`, by a block of THREADS threads. */
template <int THREADS>
__device__ __forceinline__ void tk_row(int32_t *out, float *probs, const float *x, int cols, int k,
                                       unsigned row) {
    typedef cub::BlockReduce<TkPair, THREADS> Reduce;
    typedef cub::BlockReduce<float, THREADS> SumReduce;
    __shared__ union {
        typename Reduce::TempStorage pick;
        typename SumReduce::TempStorage sum;
    } tk_tmp;
    __shared__ TkPair tk_prev;
    const float *x_row = x + (size_t)row * cols;
    int32_t *ids = out + (size_t)row * k;
    float m = 0, total = 0; /* the row's max (every thread), its sum (thread 0) */
    for (int j = 0; j < k; j++) {
        TkPair best = {-INFINITY, INT_MAX};
        for (int c = threadIdx.x; c < cols; c += THREADS) {
            const TkPair cand = {x_row[c], c};
            const bool fresh = !isnan(cand.v) && (j == 0 || tk_before(tk_prev, cand));
            if (fresh && tk_before(cand, best)) best = cand;
        }
        best = Reduce(tk_tmp.pick).Reduce(best, TkBest());
        if (threadIdx.x == 0) {
            ids[j] = best.i == INT_MAX ? 0 : best.i;
            tk_prev = best;
        }
        __syncthreads(); /* tk_prev for the next pass; tk_tmp reused */
        if (probs && j == 0) {
            m = tk_prev.v;
            float s = 0;
            for (int c = threadIdx.x; c < cols; c += THREADS)
                if (!isnan(x_row[c])) s += tk_rel(x_row[c], m);
            total = SumReduce(tk_tmp.sum).Sum(s);
            __syncthreads(); /* tk_tmp reused */
        }
        if (probs && threadIdx.x == 0)
            probs[(size_t)row * k + j] = tk_prev.i == INT_MAX ? 0.0f : tk_rel(tk_prev.v, m) / total;
    }
    __syncthreads(); /* tk_prev and tk_tmp free for the block's next row */
}

/* Slice `slice` (of `split`) of row `row`'s argmax, by THREADS threads. */
template <int THREADS>
__device__ __forceinline__ void am_part(const AmPartArgs &a, unsigned slice, unsigned row) {
    typedef cub::BlockReduce<AmPart, THREADS> Reduce;
    __shared__ typename Reduce::TempStorage am_tmp;
    const float *x_row = a.x + (size_t)row * a.cols;
    const int c0 = (int)slice * a.per, c1 = min(a.cols, c0 + a.per);
    AmPart best = {-INFINITY, INT_MAX, 0.0f};
    for (int c = c0 + (int)threadIdx.x; c < c1; c += THREADS) {
        const float v = x_row[c];
        if (isnan(v)) continue;
        if (a.want_sum) best.s = v > best.v ? best.s * expf(best.v - v) + 1.0f : best.s + tk_rel(v, best.v);
        const TkPair cand = {v, c}, cur = {best.v, best.i};
        if (tk_before(cand, cur)) best.v = v, best.i = c;
    }
    best = Reduce(am_tmp).Reduce(best, AmMerge{a.want_sum != 0});
    if (threadIdx.x == 0) a.part[(size_t)row * a.split + slice] = best;
    __syncthreads(); /* am_tmp free for the block's next slice */
}

/* Row `row`'s pairs merged by the block's first warp (the other threads
 * do nothing). */
__device__ __forceinline__ void am_final(const AmFinalArgs &a, unsigned row) {
    if (threadIdx.x >= 32) return;
    const AmPart *p = a.part + (size_t)row * a.split;
    const AmMerge merge = {a.probs != NULL};
    AmPart best = {-INFINITY, INT_MAX, 0.0f};
    for (int i = threadIdx.x; i < a.split; i += 32) best = merge(best, p[i]);
    for (int off = 16; off > 0; off >>= 1) {
        AmPart o;
        o.v = __shfl_down_sync(0xffffffffu, best.v, off);
        o.i = __shfl_down_sync(0xffffffffu, best.i, off);
        o.s = __shfl_down_sync(0xffffffffu, best.s, off);
        best = merge(best, o);
    }
    if (threadIdx.x == 0) {
        a.out[row] = best.i == INT_MAX ? 0 : best.i;
        if (a.probs) a.probs[row] = best.i == INT_MAX ? 0.0f : 1.0f / best.s;
    }
}

#endif
