/* The Q/K/V projection's arguments and one virtual block of it (mv.cuh),
 * shared by qkv_rope.cu's kernel and the persistent step (step.cu). */
#ifndef SD_CUDA_QKV_ROPE_CUH
#define SD_CUDA_QKV_ROPE_CUH

#include <math.h>

#include "kernels/cuda/mv.cuh"
#include "kernels/cuda/mv_mma.cuh"

struct QkvMat {
    MvMat w;
    const float *bias; /* [w.rows] or NULL */
    float *out; /* [n][w.rows] (unused for K/V of a scatter launch) */
    int which;  /* 0: Q, 1: K, 2: V */
    int rope;   /* 1: rotate pairs */
    int pair0;  /* first pair index of this matrix in the launch */
};

struct QkvArgs {
    MvAct a;
    QkvMat m[3];
    int nm;
    int ntiles, ks;
    unsigned blocks; /* virtual blocks (mv.cuh) */
    int pos, pos_step; /* row i stands at pos + i * pos_step */
    const int *pos_dev; /* non-NULL: pos is *pos_dev, K/V outs are cache bases (see the top) */
    int head_dim, rope_dim;
    int neox;          /* pairs (j, j + rope_dim/2) instead of (2j, 2j+1) */
    float theta_scale; /* freq_base^(-2/rope_dim), computed on the host as the CPU does */
};

/* Per-row K/V destinations for beams, by value (see the top). */
struct QkvScatterArgs {
    QkvArgs a;
    float *k[SD_MAX_ROWS], *v[SD_MAX_ROWS];
};

__device__ __forceinline__ const QkvArgs &qkv_args(const QkvArgs &p) { return p; }
__device__ __forceinline__ const QkvArgs &qkv_args(const QkvScatterArgs &p) { return p.a; }

/* Where row i of matrix M goes; kv_row: the cache row of the block's first
 * row past its K/V destination pointers (0 unless they are cache bases). */
__device__ __forceinline__ float *qkv_out(const QkvArgs &, const QkvMat &M, int i, int kv_row) {
    return M.out + (size_t)(i + (M.which ? kv_row : 0)) * M.w.rows;
}
__device__ __forceinline__ float *qkv_out(const QkvScatterArgs &p, const QkvMat &M, int i,
                                          int kv_row) {
    const size_t off = (size_t)kv_row * M.w.rows;
    return M.which == 1 ? p.k[i] + off : M.which == 2 ? p.v[i] + off : M.out + (size_t)i * M.w.rows;
}

/* Pair `pair` of the launch: its matrix M, its rows r0, r1 and, when it
 * rotates, its angle index j (else -1). */
__device__ __forceinline__ void qkv_pair(const QkvArgs &p, int pair, QkvMat &M, int &r0, int &r1,
                                         int &j) {
    M = p.m[0];
    if (p.nm > 1 && pair >= p.m[1].pair0) M = p.m[1];
    if (p.nm > 2 && pair >= p.m[2].pair0) M = p.m[2];
    const int local = pair - M.pair0, hd = p.head_dim;
    if (p.neox) {
        const int head = local / (hd / 2), t = local % (hd / 2), half = p.rope_dim / 2;
        r0 = head * hd + (t < half ? t : p.rope_dim + 2 * (t - half));
        r1 = r0 + (t < half ? half : 1);
        j = t < half ? t : -1;
    } else {
        r0 = 2 * local;
        r1 = r0 + 1;
        j = r0 % hd < p.rope_dim ? (r0 % hd) / 2 : -1;
    }
}

/* The pair's totals v0, v1 for activation row i: bias, rotation, store. */
template <class P>
__device__ __forceinline__ void qkv_store(const P &args, const QkvMat &M, int r0, int r1, int j,
                                          int i, float v0, float v1) {
    const QkvArgs &p = qkv_args(args);
    if (M.bias) {
        v0 += M.bias[r0];
        if (r1 < M.w.rows) v1 += M.bias[r1];
    }
    const int pos = p.pos_dev ? *p.pos_dev : p.pos;
    if (M.rope && j >= 0) {
        /* the CPU's angle: theta_j = p * s^j by repeated multiplication
         * (ggml_rope_cache_init), rotation without fused multiply-adds */
        float theta = (float)(pos + i * p.pos_step);
        for (int k = 0; k < j; k++) theta *= p.theta_scale;
        const float co = cosf(theta), si = sinf(theta), a = v0, bb = v1;
        v0 = __fsub_rn(__fmul_rn(a, co), __fmul_rn(bb, si));
        v1 = __fadd_rn(__fmul_rn(a, si), __fmul_rn(bb, co));
    }
    float *o = qkv_out(args, M, i, p.pos_dev ? pos : 0);
    o[r0] = v0;
    if (r1 < M.w.rows) o[r1] = v1;
}

/* Virtual block b; first and writer as mv_accum takes them. Every thread
 * of the block calls it. */
template <int T, int NT, class P, int S = 0>
__device__ __forceinline__ void qkv_vblock(const P &args, unsigned b, bool first, bool writer) {
    const QkvArgs &p = qkv_args(args);
    int i0, pair, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, pair, slice);
    QkvMat M;
    int r0, r1, j;
    qkv_pair(p, pair, M, r0, r1, j);
    float acc[2][NT], v0, v1;
    mv_accum<T, NT>(mv_row<S>(M.w, r0), mv_row<S>(M.w, r1), p.a, i0, slice, p.ks, first, writer,
                    acc);
    mv_reduce<NT>(acc, slice, p.ks, v0, v1);
    const int lane = threadIdx.x & 31, i = i0 + lane;
    if (slice != 0 || lane >= NT || i >= p.a.n || r0 >= M.w.rows) return;
    qkv_store(args, M, r0, r1, j, i, v0, v1);
}

/* The same on tensor cores (mv_mma.cuh): a warp takes pairs 8q + g (lane
 * group g), their two rows in its two slots; a pair past its matrix's
 * rows (the launch's last warp) is computed on clamped rows and not
 * stored. */
template <int T, int NT, class P, int S = 0>
__device__ __forceinline__ void mq_qkv_vblock(const P &args, unsigned b, bool first, bool writer) {
    const QkvArgs &p = qkv_args(args);
    int i0, grp, slice;
    mv_place(b, p.ntiles, p.ks, NT, i0, grp, slice);
    const int lane = threadIdx.x & 31, t = lane & 3;
    QkvMat M;
    int r0, r1, j;
    qkv_pair(p, MQ_UNITS * grp + (lane >> 2), M, r0, r1, j);
    float acc[2][NT], v[2][(NT + 3) / 4];
    mq_accum<T, NT>(mv_row<S>(M.w, r0), mv_row<S>(M.w, r1), p.a, i0, slice, p.ks, first, writer, acc);
    mq_reduce<NT>(acc, slice, p.ks, v);
    if (slice != 0 || r0 >= M.w.rows) return;
#pragma unroll
    for (int k = 0; k < (NT + 3) / 4; k++) {
        const int i = i0 + t + 4 * k;
        if (t + 4 * k >= NT || i >= p.a.n) break;
        qkv_store(args, M, r0, r1, j, i, v[0][k], v[1][k]);
    }
}

#endif
