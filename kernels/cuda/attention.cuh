/* Attention's arguments and one virtual block of its kernels
 * (attention.cu describes them), shared by attention.cu and the persistent
 * step (step.cu). */
#ifndef SD_CUDA_ATTENTION_CUH
#define SD_CUDA_ATTENTION_CUH

#include <math.h>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/qact.cuh"

/* W: warps a block (the kernels' AT_WARPS, the persistent step's 4, step.cu);
 * each warp owns AT_QV / W query vectors of the tile, and each thread loads
 * D * AT_WARPS / W float4 of a K/V tile. */
enum { AT_KEYS = SD_AT_KEYS, AT_QV = SD_AT_QV, AT_WARPS = 8, AT_THREADS = 32 * AT_WARPS,
       AT_MAX_HD = SD_CUDA_MAX_HEAD_DIM };

/* Floats between K rows in shared memory (see the top). */
__host__ __device__ __forceinline__ int at_kstride(int hd) { return (hd & 3) == 0 ? hd + 4 : hd | 1; }

struct AttnArgs {
    const float *q, *kc, *vc;
    float *out;
    float *part_acc; /* [splits][n*n_head][hd] */
    float *part_ml;  /* [splits][n*n_head][2]: m, l */
    unsigned *ctr;   /* [qtiles][n_kv] finished splits, all 0 between launches; NULL: attn_combine merges */
    int n, pos, n_head, group, hd, kv_dim;
    const int *pos_dev; /* non-NULL: pos is *pos_dev (graph capture) */
    int8_t *xq;         /* non-NULL: out's int8 blocks too (qact.cu's scratch) */
    float *xd, *xs;
    int kps, n_splits; /* keys per split, splits */
    float scale;
};

__device__ __forceinline__ float at_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float at_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Writes lane's head dims of the output row slot qh (value v[k] for dim
 * lane + 32k) and, with a.xq, quantises them for the integer product that
 * follows (qact.cuh: block k of the head is dims 32k..32k+31, which the
 * warp holds as v[k]; the head dim is then a multiple of 32, so all lanes
 * take part). */
template <int D>
__device__ __forceinline__ void at_store(const AttnArgs &a, size_t qh, const float v[D]) {
    const int lane = threadIdx.x & 31;
    float *out = a.out + qh * a.hd;
#pragma unroll
    for (int k = 0; k < D; k++)
        if (lane + 32 * k < a.hd) {
            out[lane + 32 * k] = v[k];
            if (a.xq) qa_block(v[k], (int64_t)(qh * a.hd / 32) + k, a.xq, a.xd, a.xs);
        }
}

/* Merges the partials of splits 0..ns-1 (the live ones, at_live) for
 * query vectors qv0..qv0+nq-1 of kv head kh into out. A warp takes one query vector at a time: lane s reads split s's
 * (m, l) (and s+32, ...), the warp's maximum is M, and the weights e^(m_s - M)
 * go to the lanes by shuffle while each lane sums its head dims of
 * e^(m_s - M) acc_s over the splits in order; the loads of consecutive
 * splits are independent, so several are in flight. Partials are read from
 * L2 (__ldcg): other blocks of this launch wrote them. Every split writes
 * every slot of its tile (m = -inf, l = 0, acc = 0 when it saw no key), so
 * a zero weight adds zero. */
template <int D, int W>
__device__ __forceinline__ void attn_merge(const AttnArgs &a, int kh, int qv0, int nq, int ns) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hd = a.hd;
    const size_t nqh = (size_t)a.n * a.n_head;
    for (int v = warp; v < nq; v += W) {
        const int qv = qv0 + v;
        const size_t qh = (size_t)(qv / a.group) * a.n_head + kh * a.group + qv % a.group;
        float M = -INFINITY;
        for (int sp = lane; sp < ns; sp += 32) M = fmaxf(M, __ldcg(a.part_ml + 2 * (sp * nqh + qh)));
        M = at_warp_max(M);
        float L = 0.f, o[D];
#pragma unroll
        for (int k = 0; k < D; k++) o[k] = 0.f;
        for (int s0 = 0; s0 < ns; s0 += 32) {
            const int sp = s0 + lane;
            float w = 0.f;
            if (sp < ns) {
                const size_t slot = sp * nqh + qh;
                const float ms = __ldcg(a.part_ml + 2 * slot);
                if (ms != -INFINITY) {
                    w = expf(ms - M);
                    L += w * __ldcg(a.part_ml + 2 * slot + 1);
                }
            }
            const int cnt = min(32, ns - s0);
#pragma unroll 4
            for (int t = 0; t < cnt; t++) {
                const float wt = __shfl_sync(0xffffffffu, w, t);
                const float *pa = a.part_acc + ((s0 + t) * nqh + qh) * hd;
#pragma unroll
                for (int k = 0; k < D; k++)
                    if (lane + 32 * k < hd) o[k] += wt * __ldcg(pa + lane + 32 * k);
            }
        }
        L = at_warp_sum(L);
#pragma unroll
        for (int k = 0; k < D; k++) o[k] /= L;
        at_store<D>(a, qh, o);
    }
}

/* The splits that hold a key the query tile qv0..qv0+nq-1 sees (keys
 * 0..pos + its last row): the split is planned for the length bucket
 * (plan.h), so the splits past the real length are empty; they return at
 * once and the merge counts and reads only the live ones. With one live
 * split (a context shorter than a split) its block writes the output
 * itself: no partials, no counter, no merge. */
__device__ __forceinline__ int at_live(const AttnArgs &a, int pos, int qv0, int nq) {
    return min(a.n_splits, (pos + (qv0 + nq - 1) / a.group) / a.kps + 1);
}

/* K/V tile loads with head dims a multiple of 4: element r of this thread
 * is float4 idx = tid + r * 32 W of the tile's [AT_KEYS][hd / 4], r < R =
 * D * AT_WARPS / W (AT_KEYS * hd / 4 <= AT_THREADS * D = 32 W * R).
 * at_fetch loads keys t0..t0+cnt-1
 * into registers (zeros past cnt), at_stash stores them to shared memory;
 * the next tile's fetch is issued before the current tile is scored, so
 * its load latency passes under the arithmetic. */
template <int R, int W>
__device__ __forceinline__ void at_fetch(const AttnArgs &a, int kh, int t0, int cnt, float4 pk[R],
                                         float4 pv[R]) {
    const int h4 = a.hd >> 2;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int idx = threadIdx.x + r * 32 * W, t = idx / h4, d = 4 * (idx - t * h4);
        pk[r] = pv[r] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (idx < AT_KEYS * h4 && t < cnt) {
            const size_t off = (size_t)(t0 + t) * a.kv_dim + (size_t)kh * a.hd + d;
            pk[r] = *reinterpret_cast<const float4 *>(a.kc + off);
            pv[r] = *reinterpret_cast<const float4 *>(a.vc + off);
        }
    }
}

template <int R, int W>
__device__ __forceinline__ void at_stash(float *Ks, float *Vs, int hd, int kstride,
                                         const float4 pk[R], const float4 pv[R]) {
    const int h4 = hd >> 2;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int idx = threadIdx.x + r * 32 * W, t = idx / h4, d = 4 * (idx - t * h4);
        if (idx < AT_KEYS * h4) {
            *reinterpret_cast<float4 *>(Ks + t * kstride + d) = pk[r];
            *reinterpret_cast<float4 *>(Vs + t * hd + d) = pv[r];
        }
    }
}

/* D = ceil(hd / 32): head dims per lane. Virtual block (split, kv head kh,
 * query tile qz) of a grid of n_kv kv heads; every thread of the block
 * calls it. */
template <int D, int W>
__device__ __forceinline__ void attn_vblock(const AttnArgs &a, int split, int kh, int qz) {
    constexpr int TH = 32 * W, QPW = AT_QV / W, R = D * AT_WARPS / W;
    static_assert(AT_QV % W == 0 && (D * AT_WARPS) % W == 0, "the tile splits evenly over the warps");
    extern __shared__ __align__(16) float sm[];
    const int hd = a.hd, kstride = at_kstride(hd);
    float *Ks = sm;                    /* [AT_KEYS][kstride] */
    float *Vs = Ks + AT_KEYS * kstride; /* [AT_KEYS][hd] */
    float *Qs = Vs + AT_KEYS * hd;      /* [AT_QV][hd] */
    const int qv0 = qz * AT_QV;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q_dim = a.n_head * hd;
    const int nq = min(AT_QV, a.n * a.group - qv0);
    const int pos = a.pos_dev ? *a.pos_dev : a.pos;
    const int live = at_live(a, pos, qv0, nq);
    if (split >= live) return;

    for (int idx = tid; idx < nq * hd; idx += TH) {
        const int v = idx / hd, d = idx - v * hd, qv = qv0 + v;
        const int i = qv / a.group, h = kh * a.group + qv % a.group;
        Qs[idx] = a.q[(size_t)i * q_dim + (size_t)h * hd + d];
    }
    /* this split's keys, cut at the last position the tile's queries see */
    const int ks = split * a.kps;
    const int ke = min(ks + a.kps, pos + (qv0 + nq - 1) / a.group + 1);

    float m[QPW], l[QPW], acc[QPW][D];
    int qpos[QPW];
#pragma unroll
    for (int j = 0; j < QPW; j++) {
        const int v = warp + W * j;
        m[j] = -INFINITY;
        l[j] = 0.f;
        qpos[j] = v < nq ? pos + (qv0 + v) / a.group : -1;
#pragma unroll
        for (int k = 0; k < D; k++) acc[j][k] = 0.f;
    }

    const bool vec = (hd & 3) == 0;
    float4 pk[R], pv[R];
    if (vec && ks < ke) at_fetch<R, W>(a, kh, ks, min(AT_KEYS, ke - ks), pk, pv);
    for (int t0 = ks; t0 < ke; t0 += AT_KEYS) {
        const int cnt = min(AT_KEYS, ke - t0);
        __syncthreads(); /* the previous tile is consumed (and Qs is written) */
        if (vec) {
            at_stash<R, W>(Ks, Vs, hd, kstride, pk, pv);
            if (t0 + AT_KEYS < ke) at_fetch<R, W>(a, kh, t0 + AT_KEYS, min(AT_KEYS, ke - t0 - AT_KEYS), pk, pv);
        } else {
            for (int idx = tid; idx < AT_KEYS * hd; idx += TH) {
                const int t = idx / hd, d = idx - t * hd;
                float kv = 0.f, vv = 0.f;
                if (t < cnt) {
                    const size_t off = (size_t)(t0 + t) * a.kv_dim + (size_t)kh * hd + d;
                    kv = a.kc[off];
                    vv = a.vc[off];
                }
                Ks[t * kstride + d] = kv;
                Vs[idx] = vv;
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < QPW; j++) {
            if (qpos[j] < 0) continue;
            const float *qr = Qs + (warp + W * j) * hd, *kr = Ks + lane * kstride;
            float s = -INFINITY;
            if (lane < cnt && t0 + lane <= qpos[j]) {
                float dot;
                if ((hd & 3) == 0) {
                    const float4 *q4 = reinterpret_cast<const float4 *>(qr),
                                 *k4 = reinterpret_cast<const float4 *>(kr);
                    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
#pragma unroll 4
                    for (int d = 0; d < hd / 4; d++) {
                        const float4 qa = q4[d], ka = k4[d];
                        d0 += qa.x * ka.x;
                        d1 += qa.y * ka.y;
                        d2 += qa.z * ka.z;
                        d3 += qa.w * ka.w;
                    }
                    dot = (d0 + d1) + (d2 + d3);
                } else {
                    dot = 0.f;
                    for (int d = 0; d < hd; d++) dot += qr[d] * kr[d];
                }
                s = dot * a.scale;
            }
            const float mt = at_warp_max(s);
            if (mt == -INFINITY) continue;
            const float mn = fmaxf(m[j], mt);
            const float corr = expf(m[j] - mn); /* 0 on the first visible tile */
            const float p = expf(s - mn);       /* 0 for masked keys */
            l[j] = l[j] * corr + p;
#pragma unroll
            for (int k = 0; k < D; k++) acc[j][k] *= corr;
            for (int t = 0; t < cnt; t++) {
                const float pt = __shfl_sync(0xffffffffu, p, t);
                const float *vr = Vs + t * hd;
#pragma unroll
                for (int k = 0; k < D; k++)
                    if (lane + 32 * k < hd) acc[j][k] += pt * vr[lane + 32 * k];
            }
            m[j] = mn;
        }
    }

#pragma unroll
    for (int j = 0; j < QPW; j++) {
        if (qpos[j] < 0) continue;
        const float L = at_warp_sum(l[j]);
        const int qv = qv0 + warp + W * j;
        const size_t qh = (size_t)(qv / a.group) * a.n_head + kh * a.group + qv % a.group;
        if (live == 1) {
            float v[D];
#pragma unroll
            for (int k = 0; k < D; k++) v[k] = acc[j][k] / L;
            at_store<D>(a, qh, v);
        } else {
            const size_t slot = (size_t)split * a.n * a.n_head + qh;
            float *o = a.part_acc + slot * hd;
#pragma unroll
            for (int k = 0; k < D; k++)
                if (lane + 32 * k < hd) o[lane + 32 * k] = acc[j][k];
            if (lane == 0) a.part_ml[2 * slot] = m[j], a.part_ml[2 * slot + 1] = L;
        }
    }
    if (live == 1 || !a.ctr) return;

    /* the last split of this (kv head, tile) merges the tile */
    __shared__ int last;
    __threadfence(); /* this block's partials, visible before it is counted */
    __syncthreads();
    if (tid == 0) {
        unsigned *ctr = a.ctr + (size_t)qz * (a.kv_dim / a.hd) + kh;
        last = atomicAdd(ctr, 1u) == (unsigned)(live - 1);
        if (last) *ctr = 0; /* every live split has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    attn_merge<D, W>(a, kh, qv0, nq, live);
}

/* The merge as a pass of its own: virtual block (kv head kh, query tile qz). */
template <int D, int W>
__device__ __forceinline__ void attn_combine_vblock(const AttnArgs &a, int kh, int qz) {
    const int qv0 = qz * AT_QV, nq = min(AT_QV, a.n * a.group - qv0);
    const int live = at_live(a, a.pos_dev ? *a.pos_dev : a.pos, qv0, nq);
    if (live > 1) attn_merge<D, W>(a, kh, qv0, nq, live);
}

#endif
