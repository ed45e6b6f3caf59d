/* Matrix-vector core on tensor cores (mma.cuh) for the quantised weight
 * types and BF16 and F16 (their part is below, "BF16 and F16 weights"),
 * the SD_CUDA_MMA alternative to mv.cuh's __dp4a and float tiles: each
 * weight byte is read and dequantised once a call, and the products of all
 * its activation rows are one or more mma instructions, so the cost of a
 * call grows little with its rows.
 *
 * Work split. A warp owns 16 weight rows (a "row group": rows 16q + g and
 * 16q + g + 8 go to the four lanes of group g = lane / 4, the A fragment's
 * rows) and a tile of NT = 2, 4, 8 or 16 activation rows. It walks the
 * rows' 32-element chunks (cuda_int.h: one activation block each) four at a
 * time: lane t = lane % 4 of each group loads chunk c0 + t of its two rows,
 * 16 coalesced bytes a row (two loads for Q8_0's 32 bytes), with its
 * scales, MQ_UNROLL steps ahead. So lane t's registers hold whole chunks,
 * but the A fragment wants lane t to hold k 4t..4t+3 of one chunk: rather
 * than exchanging words between lanes, every mma takes word j of each
 * lane's own chunk (k slot t = chunk c0 + t), and B is block diagonal: its
 * column n holds activation row 2p + n % 2 in k slot n / 2 and zeros
 * elsewhere, loaded by the one lane (group n, t = n / 2) whose slot it is.
 * Column n of the result is then row . activations over chunk c0 + n / 2
 * alone, and the C fragment puts columns 2t, 2t + 1 (chunk c0 + t,
 * activation rows 2p, 2p + 1) in lane t: the lane that loaded the chunk's
 * weights and scales turns the integer sums into the block terms. Four
 * mma (j = 0..3, words j and 4 + j: elements 4j..4j+3 and 16+4j..16+4j+3)
 * give a chunk's sum for two activation rows; Q6_K takes m16n8k16 halves
 * instead, its sub-blocks of 16 having their own scales. Three quarters of
 * each B is zeros: the tensor cores have the throughput to spare, the
 * instruction slots that a lane-to-lane transpose would take are not.
 *
 * Arithmetic. The integer sums are the CPU's block sums exactly; the block
 * term is mv.cuh's (d_w * d_x * sum, + m * s_x for Q4_1, - dmin*mn * s_x for
 * Q4_K, d_x * (sc0 * sum0 + sc1 * sum1) for Q6_K). Lane t adds the terms of
 * its chunks in order; the four lanes of a group then add their sums
 * (xor 1, then xor 2), and the K slices of a row group (ks warps) theirs in
 * slice order. Nothing in that depends on the tile height or on which
 * column an activation row takes, so a row of an n-row call has the bits
 * of a one-row call (plan.h SD_SAME_BITS_ROWS): with SD_CUDA_MMA on, one-row
 * calls of these types run here too, in plain launches and in a persistent
 * step's stages.
 *
 * The activations, the folded norm (mv_norm_tile, mv_tile), the virtual
 * blocks and the launch-before-wait ordering are mv.cuh's. */
#ifndef SD_CUDA_MV_MMA_CUH
#define SD_CUDA_MV_MMA_CUH

#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/mv.cuh"

/* Rows a warp owns, in two slots of MQ_UNITS: row 16q + g and 16q + g + 8
 * of one matrix, or (SwiGLU, Q/K/V) the two rows of unit 8q + g. */
enum { MQ_ROWS = 16, MQ_UNITS = 8, MQ_UNROLL = SD_MQ_UNROLL, MQ_MAX_NT = SD_MQ_MAX_NT };

/* Elements in one chunk: an activation block of 32 for the quantised
 * types, 16 (two 16-byte loads, as Q8_0's 32 bytes) for BF16 and F16. */
__host__ __device__ constexpr int mq_chunk_elems(int t) { return mv_float(t) ? 16 : 32; }

/* One lane's share of a step for one weight row: the chunk's values (two
 * loads for Q8_0, BF16 and F16) and its scales (none for BF16, F16). */
struct MqW {
    MvW w[2];
    float2 dm;
};

template <int T>
__device__ __forceinline__ MqW mq_ldw(const MvRow &r, int c, bool ok) {
    MqW m;
    m.w[0] = m.w[1] = MvW{make_uint4(0, 0, 0, 0), make_uint2(0, 0)};
    m.dm = make_float2(0.f, 0.f);
    if (!ok) return m;
    if constexpr (mv_float(T)) {
        m.w[0] = mv_ldw<T>(r, 2 * c);
        m.w[1] = mv_ldw<T>(r, 2 * c + 1);
    } else if constexpr (T == SD_Q8_0) {
        m.w[0] = mv_ldw<T>(r, 2 * c);
        m.w[1] = mv_ldw<T>(r, 2 * c + 1);
        m.dm = mv_lds<T>(r, 2 * c);
    } else {
        m.w[0] = mv_ldw<T>(r, c);
        m.dm = mv_lds<T>(r, c);
    }
    return m;
}

/* The chunk as 8 words of signed bytes, word j = elements 4j..4j+3 (for
 * the 4- to 6-bit types the nibbles and high bits as mv_dot forms them). */
template <int T>
__device__ __forceinline__ void mq_words(const MqW &m, unsigned v[8]) {
    if constexpr (T == SD_Q8_0) {
        v[0] = m.w[0].q.x, v[1] = m.w[0].q.y, v[2] = m.w[0].q.z, v[3] = m.w[0].q.w;
        v[4] = m.w[1].q.x, v[5] = m.w[1].q.y, v[6] = m.w[1].q.z, v[7] = m.w[1].q.w;
    } else {
        const unsigned m4 = 0x0f0f0f0fu;
        const unsigned q[4] = {m.w[0].q.x, m.w[0].q.y, m.w[0].q.z, m.w[0].q.w};
        const uint2 h = m.w[0].h;
#pragma unroll
        for (int g = 0; g < 8; g++) {
            unsigned x = (q[g & 3] >> (g < 4 ? 0 : 4)) & m4;
            if constexpr (T == SD_Q4_0) x = __vsub4(x, 0x08080808u);
            if constexpr (T == SD_Q5_0) x = __vsub4(x | ((h.x >> g) & 0x01010101u) << 4, 0x10101010u);
            if constexpr (T == SD_Q6_K)
                x = __vsub4(x | (((g < 4 ? h.x : h.y) >> (2 * (g & 3))) & 0x03030303u) << 4,
                            0x20202020u);
            v[g] = x;
        }
    }
}

/* The block term of one integer sum (s1: Q6_K's second sub-block). */
template <int T>
__device__ __forceinline__ float mq_term(int s0, int s1, float2 dm, float xd, float xs) {
    if constexpr (T == SD_Q6_K) return xd * (dm.x * (float)s0 + dm.y * (float)s1);
    float v = dm.x * xd * (float)s0;
    if constexpr (T == SD_Q4_1) v += dm.y * xs;
    if constexpr (T == SD_Q4_K) v -= dm.y * xs;
    return v;
}

/* The weights of one step at base: chunk base + 4u + t of rows r0, r1. */
template <int T>
__device__ __forceinline__ void mq_ldw_step(const MvRow &r0, const MvRow &r1, int base, int nch,
                                            MqW w[2][MQ_UNROLL]) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int u = 0; u < MQ_UNROLL; u++) {
        const int c = base + 4 * u + t;
        w[0][u] = mq_ldw<T>(r0, c, c < nch);
        w[1][u] = mq_ldw<T>(r1, c, c < nch);
    }
}

/* Activation row i's block c as the B words of this lane (zeros unless it
 * owns a slot, see the top). */
__device__ __forceinline__ void mq_ldx(const MvAct &L, int i, int c, bool own, unsigned x[8]) {
    int4 a = make_int4(0, 0, 0, 0), b = a;
    if (own) {
        const int4 *p = reinterpret_cast<const int4 *>(L.xq + (size_t)i * L.cols) + 2 * c;
        a = cu_ld_act(p);
        b = cu_ld_act(p + 1);
    }
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
    x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

/* One step's chunk (weights w0, w1 of rows g, g + 8) against activation
 * rows i0 + 2p, i0 + 2p + 1 of L: the integer sums of this lane's chunk c
 * for (row g, 2p), (g, 2p+1), (g+8, 2p), (g+8, 2p+1), and Q6_K's second
 * sub-block's in s1. */
template <int T>
__device__ __forceinline__ void mq_sums(const unsigned v0[8], const unsigned v1[8], const MvAct &L,
                                        int ib, int c, bool ok, int s0[4], int s1[4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int ia = ib + (g & 1);
    unsigned x[8];
    mq_ldx(L, ia, c, ok && t == (g >> 1) && ia < L.n, x);
#pragma unroll
    for (int r = 0; r < 4; r++) s0[r] = s1[r] = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if constexpr (T == SD_Q6_K) {
            const unsigned lo[2] = {v0[j], v1[j]}, hi[2] = {v0[4 + j], v1[4 + j]};
            mma_s8_k16(s0, lo, x[j]);
            mma_s8_k16(s1, hi, x[4 + j]);
        } else {
            const unsigned a[4] = {v0[j], v1[j], v0[4 + j], v1[4 + j]}, b[2] = {x[j], x[4 + j]};
            mma_s8_k32(s0, a, b);
        }
    }
}

/* ---- BF16 and F16 weights ------------------------------------------------
 * The same split on m16n8k16 with bf16 operands and f32 accumulators: a
 * chunk is 16 elements, 8 words of two; mma j (0..3) takes words j and
 * 4 + j of each lane's chunk (A's k 2t, 2t+1 and 8+2t, 8+2t+1: elements
 * 2j, 2j+1, 8+2j, 8+2j+1), and B the same words of the activation chunk
 * in the owner's slot. The C fragment is the accumulator itself: column
 * 2t + a of pair p is this lane's (row, activation row 2p + a) over its
 * chunks, so acc is passed through the mma and no sum leaves it until
 * mq_reduce. A column's result depends on its own A row and B column
 * only, whatever the other columns hold, and every activation row is the
 * same sequence of mma whichever tile it is in: the bits of one-row calls
 * again.
 *
 * The activations are f32 and the CPU multiplies them unrounded: rounded
 * to bf16 (8 significant bits) a product would be off by up to 2^-9, far
 * over the float types' tolerance. So each x is split x = hi + lo, hi the
 * bf16 nearest x and lo the bf16 nearest x - hi (exact in f32), and a
 * chunk takes one mma with hi and one with lo: x is carried to about 2^-17
 * relative. f16 activations would round less, but their range ends at
 * 65504 and lo would fall into f16's subnormals, so the products are bf16
 * for F16 weights too: an f16 weight is hi + lo exactly with hi its top 8
 * significant bits (truncated) and lo the other 3, and a chunk takes
 * w_hi . x_hi, w_hi . x_lo and w_lo . x_hi (w_lo . x_lo, under 2^-16 of
 * the product, is left out). */

/* The bf16 nearest f, as the low 16 bits (ties to even; f is finite). */
__device__ __forceinline__ unsigned mq_bf16(float f) {
    const unsigned u = __float_as_uint(f);
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* A weight chunk as 8 words of two bf16 (word j: elements 2j, 2j+1), hi;
 * for F16 the rest of each element in lo (see above). */
template <int T>
__device__ __forceinline__ void mq_fwords(const MqW &m, unsigned hi[8], unsigned lo[8]) {
    const unsigned q[8] = {m.w[0].q.x, m.w[0].q.y, m.w[0].q.z, m.w[0].q.w,
                           m.w[1].q.x, m.w[1].q.y, m.w[1].q.z, m.w[1].q.w};
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if constexpr (T == SD_BF16) {
            hi[j] = q[j];
            lo[j] = 0;
        } else {
            const float2 f = mv_pair<SD_F16>(q[j]);
            const unsigned a = __float_as_uint(f.x) & 0xffff0000u,
                           b = __float_as_uint(f.y) & 0xffff0000u;
            hi[j] = a >> 16 | b;
            lo[j] = __float_as_uint(f.x - __uint_as_float(a)) >> 16 |
                    (__float_as_uint(f.y - __uint_as_float(b)) & 0xffff0000u);
        }
    }
}

/* Activation row i's chunk c (floats) split into bf16 hi and lo words,
 * zeros unless this lane owns a slot (see the top). */
__device__ __forceinline__ void mq_ldxf(const MvAct &L, int i, int c, bool own, unsigned hi[8],
                                        unsigned lo[8]) {
    float v[16];
#pragma unroll
    for (int k = 0; k < 16; k++) v[k] = 0.f;
    if (own) {
        const int4 *p = reinterpret_cast<const int4 *>(L.x + (size_t)i * L.cols) + 4 * c;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int4 a = cu_ld_act(p + k);
            v[4 * k] = __int_as_float(a.x), v[4 * k + 1] = __int_as_float(a.y);
            v[4 * k + 2] = __int_as_float(a.z), v[4 * k + 3] = __int_as_float(a.w);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const unsigned h0 = mq_bf16(v[2 * j]), h1 = mq_bf16(v[2 * j + 1]);
        hi[j] = h0 | h1 << 16;
        lo[j] = mq_bf16(v[2 * j] - __uint_as_float(h0 << 16)) |
                mq_bf16(v[2 * j + 1] - __uint_as_float(h1 << 16)) << 16;
    }
}

/* One step's chunk c of rows g, g + 8 (hi and lo words of each) against
 * activation rows ib, ib + 1, added to their accumulators c4 (the C
 * fragment: (g, ib), (g, ib+1), (g+8, ib), (g+8, ib+1)). */
template <int T>
__device__ __forceinline__ void mq_fsums(const unsigned h0[8], const unsigned h1[8],
                                         const unsigned l0[8], const unsigned l1[8], const MvAct &L,
                                         int ib, int c, bool ok, float c4[4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int ia = ib + (g & 1);
    unsigned xh[8], xl[8];
    mq_ldxf(L, ia, c, ok && t == (g >> 1) && ia < L.n, xh, xl);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const unsigned a[4] = {h0[j], h1[j], h0[4 + j], h1[4 + j]};
        const unsigned bh[2] = {xh[j], xh[4 + j]}, bl[2] = {xl[j], xl[4 + j]};
        mma_bf16_k16(c4, a, bh);
        mma_bf16_k16(c4, a, bl);
        if constexpr (T == SD_F16) {
            const unsigned al[4] = {l0[j], l1[j], l0[4 + j], l1[4 + j]};
            mma_bf16_k16(c4, al, bh);
        }
    }
}

/* acc[s][i]: this lane's part of row (16q + g + 8s) . activation row i0+i
 * over its chunks; rows past n are left at 0. Arguments as mv_accum's. */
template <int T, int NT>
__device__ __forceinline__ void mq_accum(const MvRow &r0, const MvRow &r1, const MvAct &A, int i0,
                                         int slice, int ks, bool first, bool writer,
                                         float acc[2][NT]) {
    static_assert(NT % 2 == 0 && NT <= MQ_MAX_NT, "tiles of activation row pairs");
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int i = 0; i < NT; i++) acc[0][i] = acc[1][i] = 0.f;
    const int nch = A.cols / mq_chunk_elems(T), step = 4 * MQ_UNROLL * ks;
    int base = slice * 4 * MQ_UNROLL;
    MqW w[2][MQ_UNROLL];
    mq_ldw_step<T>(r0, r1, base, nch, w);
    if (first) {
        cu_grid_wait();
        if (A.nx) mv_norm_tile<T, NT>(A, i0, writer);
    }
    const MvAct L = mv_tile<T, NT>(A, i0);
    const size_t nb = (size_t)nch;
    while (base < nch) {
#pragma unroll
        for (int u = 0; u < MQ_UNROLL; u++) {
            const int c = base + 4 * u + t;
            const bool ok = c < nch;
            if constexpr (mv_float(T)) {
                unsigned h0[8], h1[8], l0[8], l1[8];
                mq_fwords<T>(w[0][u], h0, l0);
                mq_fwords<T>(w[1][u], h1, l1);
#pragma unroll
                for (int p = 0; p < NT / 2; p++) {
                    if (i0 + 2 * p >= L.n) break; /* the same for the whole warp */
                    float c4[4] = {acc[0][2 * p], acc[0][2 * p + 1], acc[1][2 * p],
                                   acc[1][2 * p + 1]};
                    mq_fsums<T>(h0, h1, l0, l1, L, i0 + 2 * p, c, ok, c4);
                    acc[0][2 * p] = c4[0], acc[0][2 * p + 1] = c4[1];
                    acc[1][2 * p] = c4[2], acc[1][2 * p + 1] = c4[3];
                }
            } else {
                unsigned v0[8], v1[8];
                mq_words<T>(w[0][u], v0);
                mq_words<T>(w[1][u], v1);
#pragma unroll
                for (int p = 0; p < NT / 2; p++) {
                    if (i0 + 2 * p >= L.n) break; /* the same for the whole warp */
                    int s0[4], s1[4];
                    mq_sums<T>(v0, v1, L, i0 + 2 * p, c, ok, s0, s1);
                    if (!ok) continue;
#pragma unroll
                    for (int a = 0; a < 2; a++) {
                        const int i = i0 + 2 * p + a;
                        if (i >= L.n) break;
                        const float xd = cu_ld_act(L.xd + i * nb + c);
                        float xs = 0.f;
                        if constexpr (T == SD_Q4_1 || T == SD_Q4_K) xs = cu_ld_act(L.xs + i * nb + c);
                        acc[0][2 * p + a] += mq_term<T>(s0[a], s1[a], w[0][u].dm, xd, xs);
                        acc[1][2 * p + a] += mq_term<T>(s0[2 + a], s1[2 + a], w[1][u].dm, xd, xs);
                    }
                }
            }
        }
        base += step;
        if (base < nch) mq_ldw_step<T>(r0, r1, base, nch, w);
    }
}

/* Sums acc over the four lanes of each group, then over the ks warps of
 * one row group. Lane (g, t) of the row group's first warp (slice 0) gets
 * the totals of rows g (v[0][k]) and g + 8 (v[1][k]) for activation rows
 * i0 + t + 4k. Every thread of the block must call it (two barriers when
 * ks > 1, as mv_reduce). */
template <int NT>
__device__ __forceinline__ void mq_reduce(float acc[2][NT], int slice, int ks,
                                          float v[2][(NT + 3) / 4]) {
    __shared__ float mq_red[MV_WARPS][2][8][NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int k = 0; k < (NT + 3) / 4; k++) v[0][k] = v[1][k] = 0.f;
#pragma unroll
    for (int s = 0; s < 2; s++)
#pragma unroll
        for (int i = 0; i < NT; i++) {
            float a = acc[s][i];
            a += __shfl_xor_sync(0xffffffffu, a, 1);
            a += __shfl_xor_sync(0xffffffffu, a, 2);
            if ((i & 3) == t) v[s][i >> 2] = a;
        }
    if (ks > 1) {
#pragma unroll
        for (int s = 0; s < 2; s++)
#pragma unroll
            for (int k = 0; k < (NT + 3) / 4; k++)
                if (t + 4 * k < NT) mq_red[warp][s][g][t + 4 * k] = v[s][k];
        __syncthreads();
        if (slice == 0)
            for (int w = 1; w < ks; w++)
#pragma unroll
                for (int s = 0; s < 2; s++)
#pragma unroll
                    for (int k = 0; k < (NT + 3) / 4; k++)
                        if (t + 4 * k < NT) v[s][k] += mq_red[warp + w][s][g][t + 4 * k];
        __syncthreads();
    }
}

/* ---- host side ------------------------------------------------------------ */
/* The row tiling of plan.h (sd_mq_plan_make) for activations A against
 * `groups` warps' worth of rows (a matrix's rows / MQ_ROWS; SwiGLU's and
 * Q/K/V's units / 8, a unit being two rows) of weight type t and cols
 * columns; the rest as mv_plan. */
static inline int mq_plan(const MvAct &A, uint32_t t, int64_t groups, int64_t cols, int sms,
                          int per_sm, MvPlan *p, sd_err *e, const char *what) {
    sd_mv_plan q;
    if (sd_mq_plan_make(A.n, groups, cols / mq_chunk_elems((int)t), sms, &q))
        return sd_fail(e, "cuda: %s: grid of %lld blocks is too large", what, (long long)q.blocks);
    p->nt = q.nt;
    p->ntiles = q.ntiles;
    p->ks = q.ks;
    p->blocks = (unsigned)q.blocks;
    p->smem = A.nx ? mv_fold_bytes(mv_float((int)t), q.nt, A.cols) : 0;
    p->per_sm = per_sm;
    p->sms = sms;
    return 0;
}

/* Calls L::run<T, NT>(plan, c, args) for the run-time type and tile. */
template <typename L, int NT>
static inline void mq_launch_t(uint32_t type, const MvPlan &p, const sd_cuda *c,
                               const typename L::Args &a) {
    switch (type) {
    case SD_BF16: L::template run<SD_BF16, NT>(p, c, a); break;
    case SD_F16: L::template run<SD_F16, NT>(p, c, a); break;
    case SD_Q8_0: L::template run<SD_Q8_0, NT>(p, c, a); break;
    case SD_Q4_0: L::template run<SD_Q4_0, NT>(p, c, a); break;
    case SD_Q4_1: L::template run<SD_Q4_1, NT>(p, c, a); break;
    case SD_Q5_0: L::template run<SD_Q5_0, NT>(p, c, a); break;
    case SD_Q4_K: L::template run<SD_Q4_K, NT>(p, c, a); break;
    case SD_Q6_K: L::template run<SD_Q6_K, NT>(p, c, a); break;
    default: break; /* mq_on admitted only these */
    }
}

template <typename L>
static inline void mq_launch(uint32_t type, const MvPlan &p, const sd_cuda *c,
                             const typename L::Args &a) {
    switch (p.nt) {
    case 2: mq_launch_t<L, 2>(type, p, c, a); break;
    case 4: mq_launch_t<L, 4>(type, p, c, a); break;
    case 8: mq_launch_t<L, 8>(type, p, c, a); break;
    default: mq_launch_t<L, 16>(type, p, c, a); break;
    }
}

/* A persistent step's stage on tensor cores (step.cu): its variant, the
 * MQ_STEP bit over the weight type and tile height (2, 8 or 16 rows; a
 * plan of 4 rows takes the 8-row tile, which computes the same bits: rows
 * past n are skipped and a plan of at most 16 rows has one tile). */
enum { MQ_STEP = 1 << 8 };
static inline int mq_step_variant(uint32_t type, int nt) {
    return MQ_STEP | (int)type << 2 | (nt <= 2 ? 0 : nt <= 8 ? 1 : 2);
}

/* Its weight type, and its tile: 0, 1, 2 for 2, 8, 16 rows. */
__host__ __device__ inline int mq_step_type(int variant) { return variant >> 2 & 63; }
__host__ __device__ inline int mq_step_tile(int variant) { return variant & 3; }

/* Units (row pairs, or rows for SwiGLU) a warp of a stage of this variant
 * owns: MQ_UNITS on tensor cores, 1 on the __dp4a and float tiles (the
 * layouts wspan.cuh and step.cu's chunk map read). */
__host__ __device__ inline int mq_step_units(int variant) { return variant & MQ_STEP ? MQ_UNITS : 1; }

/* Whether a product with weights of type t and activations A runs here:
 * SD_CUDA_MMA on, a quantised type, or BF16 or F16 with rows of whole
 * 16-element chunks read as aligned 16-byte loads (A.fast, which a folded
 * norm sets whatever the length; else mv.cuh's float tiles). Plain
 * launches and persistent steps alike (a step's stage gets
 * mq_step_variant). */
static inline int mq_on(const sd_cuda *c, uint32_t t, const MvAct &A) {
    const int fl = (t == SD_BF16 || t == SD_F16) && A.fast && A.cols % 16 == 0;
    return c->mma && (cu_is_quant(t) || fl);
}

#endif
