/* Causal grouped-query attention over the layer cache, flash-decoding style.
 *
 * q: [n][n_head*hd] for positions pos..pos+n-1; kc, vc: [pos+n][n_kv*hd];
 * query head h reads kv head h / group (group = n_head / n_kv); scale
 * 1/sqrt(hd); out: [n][n_head*hd].
 *
 * Grid (split, kv head, query tile). A block takes one kv head, a tile of up
 * to AT_QV query vectors of that head's group (query vector v = row i, head
 * g of the group, numbered i*group + g), and one slice of the key range. It
 * walks the slice AT_KEYS keys at a time: K and V of those keys go to shared
 * memory once and serve every query of the tile, which is what makes GQA
 * and the 1..gamma+1 verification rows cost one read of the cache. Each of
 * the 8 warps owns up to 2 query vectors (a GQA group of up to 8 heads is
 * one vector a warp, so a decode step's heads are scored side by side):
 * lane t scores key t, reading K and q 16 bytes at a time into four
 * independent sums (K rows padded to hd + 4 floats, so the 8 lanes of each
 * quarter-warp phase of a 16-byte load hit 32 distinct banks; odd head
 * dims read one float at a time from rows padded to an odd stride), the
 * warp keeps a running maximum m,
 * per-lane sums l and an accumulator over head dims (lane d holds dims d,
 * d+32, ...), rescaled when m grows (online softmax). Keys past a query's
 * position are masked; a tile with no visible key leaves the state alone.
 *
 * With one split that holds keys the tile sees (at_live) the block writes
 * acc / sum(l) directly. Otherwise every such block writes its (m, l, acc),
 * and those splits are merged:
 * out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. Splits are sized
 * so the grid has about two blocks per multiprocessor, at least 64 keys
 * each, which matters for long contexts with few kv heads and one query.
 * The merge is folded into the kernel: each block of a (kv head, query
 * tile) counts itself in c->attn_ctr after its partials are visible
 * (__threadfence, then one atomicAdd), and the last of the live blocks
 * merges the tile (reading the partials from L2) and sets the counter back
 * to 0 for the next launch. attn_combine, a launch of its own, remains for
 * calls with more (kv head, tile) pairs than the counters cover (and for
 * every call with cuda_attn_merge_launch, which the tests use).
 *
 * When the head dim is a multiple of 32, the kernel that writes a head's
 * output (the block itself with one live split, else the merging block) also
 * quantises it into qact.cu's scratch and the call leaves qact's tag, so
 * the output projection after it launches no quantisation of its own.
 *
 * The key split is planned for the length bucket of pos + n
 * (sd_attn_plan_bucket, plan.h), and while a graph is captured
 * (c->pos_dev set) the kernel reads pos from that device word, so a
 * captured step stays valid at the later positions of its bucket. */
#include <math.h>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/qact.cuh"

enum { AT_KEYS = SD_AT_KEYS, AT_QV = SD_AT_QV, AT_WARPS = 8, AT_THREADS = 32 * AT_WARPS,
       AT_QPW = AT_QV / AT_WARPS, AT_MAX_HD = SD_CUDA_MAX_HEAD_DIM };

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
template <int D>
__device__ __forceinline__ void attn_merge(const AttnArgs &a, int kh, int qv0, int nq, int ns) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, hd = a.hd;
    const size_t nqh = (size_t)a.n * a.n_head;
    for (int v = warp; v < nq; v += AT_THREADS / 32) {
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
 * is float4 idx = tid + r * AT_THREADS of the tile's [AT_KEYS][hd / 4]
 * (AT_KEYS * hd / 4 <= AT_THREADS * D). at_fetch loads keys t0..t0+cnt-1
 * into registers (zeros past cnt), at_stash stores them to shared memory;
 * the next tile's fetch is issued before the current tile is scored, so
 * its load latency passes under the arithmetic. */
template <int D>
__device__ __forceinline__ void at_fetch(const AttnArgs &a, int kh, int t0, int cnt, float4 pk[D],
                                         float4 pv[D]) {
    const int h4 = a.hd >> 2;
#pragma unroll
    for (int r = 0; r < D; r++) {
        const int idx = threadIdx.x + r * AT_THREADS, t = idx / h4, d = 4 * (idx - t * h4);
        pk[r] = pv[r] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (idx < AT_KEYS * h4 && t < cnt) {
            const size_t off = (size_t)(t0 + t) * a.kv_dim + (size_t)kh * a.hd + d;
            pk[r] = *reinterpret_cast<const float4 *>(a.kc + off);
            pv[r] = *reinterpret_cast<const float4 *>(a.vc + off);
        }
    }
}

template <int D>
__device__ __forceinline__ void at_stash(float *Ks, float *Vs, int hd, int kstride,
                                         const float4 pk[D], const float4 pv[D]) {
    const int h4 = hd >> 2;
#pragma unroll
    for (int r = 0; r < D; r++) {
        const int idx = threadIdx.x + r * AT_THREADS, t = idx / h4, d = 4 * (idx - t * h4);
        if (idx < AT_KEYS * h4) {
            *reinterpret_cast<float4 *>(Ks + t * kstride + d) = pk[r];
            *reinterpret_cast<float4 *>(Vs + t * hd + d) = pv[r];
        }
    }
}

/* D = ceil(hd / 32): head dims per lane. */
template <int D>
__global__ void __launch_bounds__(AT_THREADS) attn_kernel(const AttnArgs a) {
    cu_grid_trigger();
    cu_grid_wait();
    extern __shared__ __align__(16) float sm[];
    const int hd = a.hd, kstride = at_kstride(hd);
    float *Ks = sm;                    /* [AT_KEYS][kstride] */
    float *Vs = Ks + AT_KEYS * kstride; /* [AT_KEYS][hd] */
    float *Qs = Vs + AT_KEYS * hd;      /* [AT_QV][hd] */
    const int split = blockIdx.x, kh = blockIdx.y, qv0 = blockIdx.z * AT_QV;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q_dim = a.n_head * hd;
    const int nq = min(AT_QV, a.n * a.group - qv0);
    const int pos = a.pos_dev ? *a.pos_dev : a.pos;
    const int live = at_live(a, pos, qv0, nq);
    if (split >= live) return;

    for (int idx = tid; idx < nq * hd; idx += AT_THREADS) {
        const int v = idx / hd, d = idx - v * hd, qv = qv0 + v;
        const int i = qv / a.group, h = kh * a.group + qv % a.group;
        Qs[idx] = a.q[(size_t)i * q_dim + (size_t)h * hd + d];
    }
    /* this split's keys, cut at the last position the tile's queries see */
    const int ks = split * a.kps;
    const int ke = min(ks + a.kps, pos + (qv0 + nq - 1) / a.group + 1);

    float m[AT_QPW], l[AT_QPW], acc[AT_QPW][D];
    int qpos[AT_QPW];
#pragma unroll
    for (int j = 0; j < AT_QPW; j++) {
        const int v = warp + AT_WARPS * j;
        m[j] = -INFINITY;
        l[j] = 0.f;
        qpos[j] = v < nq ? pos + (qv0 + v) / a.group : -1;
#pragma unroll
        for (int k = 0; k < D; k++) acc[j][k] = 0.f;
    }

    const bool vec = (hd & 3) == 0;
    float4 pk[D], pv[D];
    if (vec && ks < ke) at_fetch<D>(a, kh, ks, min(AT_KEYS, ke - ks), pk, pv);
    for (int t0 = ks; t0 < ke; t0 += AT_KEYS) {
        const int cnt = min(AT_KEYS, ke - t0);
        __syncthreads(); /* the previous tile is consumed (and Qs is written) */
        if (vec) {
            at_stash<D>(Ks, Vs, hd, kstride, pk, pv);
            if (t0 + AT_KEYS < ke) at_fetch<D>(a, kh, t0 + AT_KEYS, min(AT_KEYS, ke - t0 - AT_KEYS), pk, pv);
        } else {
            for (int idx = tid; idx < AT_KEYS * hd; idx += AT_THREADS) {
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
        for (int j = 0; j < AT_QPW; j++) {
            if (qpos[j] < 0) continue;
            const float *qr = Qs + (warp + AT_WARPS * j) * hd, *kr = Ks + lane * kstride;
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
    for (int j = 0; j < AT_QPW; j++) {
        if (qpos[j] < 0) continue;
        const float L = at_warp_sum(l[j]);
        const int qv = qv0 + warp + AT_WARPS * j;
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
        unsigned *ctr = a.ctr + (size_t)blockIdx.z * gridDim.y + kh;
        last = atomicAdd(ctr, 1u) == (unsigned)(live - 1);
        if (last) *ctr = 0; /* every live split has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    attn_merge<D>(a, kh, qv0, nq, live);
}

/* attn_combine: the merge as a launch of its own, grid (kv head, query tile). */
template <int D>
__global__ void __launch_bounds__(AT_THREADS) attn_combine(const AttnArgs a) {
    const int qv0 = blockIdx.y * AT_QV, nq = min(AT_QV, a.n * a.group - qv0);
    const int live = at_live(a, a.pos_dev ? *a.pos_dev : a.pos, qv0, nq);
    if (live > 1) attn_merge<D>(a, blockIdx.x, qv0, nq, live);
}

size_t cu_attention_scratch(const sd_cuda *c, const sd_attn_shape *s, int n, int pos) {
    sd_attn_plan pl;
    if (n <= 0 || pos < 0 || s->n_kv <= 0 || s->n_head <= 0 || s->n_head % s->n_kv ||
        s->head_dim <= 0 || sd_attn_plan_bucket(n, pos, s->n_kv, s->n_head / s->n_kv, c->sms, &pl) ||
        pl.n_splits == 1)
        return 0;
    return (size_t)pl.n_splits * n * s->n_head * (s->head_dim + 2) * sizeof(float);
}

template <int D>
static void attn_launch(dim3 grid, size_t smem, const sd_cuda *c, const AttnArgs &a) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, grid, AT_THREADS, smem, &at);
    cudaLaunchKernelEx(&cfg, attn_kernel<D>, a);
}

int cu_attention(sd_cuda *c, const sd_attn_shape *s, float *out, const float *q, const float *kc,
                 const float *vc, int n, int pos, sd_err *e) {
    if (n <= 0) return 0;
    const int hd = s->head_dim;
    if (pos < 0 || s->n_head <= 0 || s->n_kv <= 0 || s->n_head % s->n_kv || hd <= 0 ||
        hd > AT_MAX_HD)
        return sd_fail(e,
                       "cuda: attention: unsupported shape (pos %d, heads %d, kv heads %d, head "
                       "dim %d; head dim must be 1..%d)",
                       pos, s->n_head, s->n_kv, hd, AT_MAX_HD);
    AttnArgs a;
    a.q = q;
    a.kc = kc;
    a.vc = vc;
    a.out = out;
    a.n = n;
    a.pos = pos;
    a.pos_dev = c->pos_dev;
    a.n_head = s->n_head;
    a.group = s->n_head / s->n_kv;
    a.hd = hd;
    a.kv_dim = s->n_kv * hd;
    a.scale = 1.0f / sqrtf((float)hd);

    sd_attn_plan pl; /* kernels/cuda/plan.h */
    if (sd_attn_plan_bucket(n, pos, s->n_kv, a.group, c->sms, &pl))
        return sd_fail(e, "cuda: attention: %d rows x %d heads is too many for one call", n,
                       s->n_head);
    const int64_t qtiles = pl.qtiles;
    a.kps = pl.kps;
    a.n_splits = pl.n_splits;
    a.part_acc = a.part_ml = NULL;
    /* out's int8 blocks for the output projection, when heads hold whole
     * blocks (qact.cu's tag, as RMSNorm leaves it) */
    const int64_t q_dim = (int64_t)s->n_head * hd;
    a.xq = NULL;
    a.xd = a.xs = NULL;
    if (hd % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QACT, n, q_dim, &a.xq, &a.xd, &a.xs, e))
        return -1;
    a.ctr = (int64_t)s->n_kv * qtiles <= CU_ATTN_COUNTERS && !c->attn_merge_launch ? c->attn_ctr
                                                                                  : NULL;
    if (a.n_splits > 1) {
        const size_t slots = (size_t)a.n_splits * n * s->n_head;
        float *buf = (float *)cu_scratch(c, CU_SCRATCH_ATTN, cu_attention_scratch(c, s, n, pos), e);
        if (!buf) return -1;
        a.part_acc = buf;
        a.part_ml = buf + slots * hd;
    }
    const dim3 grid((unsigned)a.n_splits, (unsigned)s->n_kv, (unsigned)qtiles);
    const size_t smem = (size_t)(AT_KEYS * at_kstride(hd) + AT_KEYS * hd + AT_QV * hd) * sizeof(float);
    switch ((hd + 31) / 32) {
    case 1: attn_launch<1>(grid, smem, c, a); break;
    case 2: attn_launch<2>(grid, smem, c, a); break;
    case 3: attn_launch<3>(grid, smem, c, a); break;
    default: attn_launch<4>(grid, smem, c, a); break;
    }
    if (cu_check_launch(c, e, "attention n=%d pos=%d heads %d/%d dim %d", n, pos, s->n_head,
                        s->n_kv, hd))
        return -1;
    if (a.xq) cu_qtag_set(c, out, n, q_dim, CU_SCRATCH_QACT);
    if (a.n_splits == 1 || a.ctr) return 0;
    const dim3 cgrid((unsigned)s->n_kv, (unsigned)qtiles);
    switch ((hd + 31) / 32) {
    case 1: attn_combine<1><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    case 2: attn_combine<2><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    case 3: attn_combine<3><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    default: attn_combine<4><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    }
    return cu_check_launch(c, e, "attention combine n=%d pos=%d splits %d", n, pos, a.n_splits);
}
