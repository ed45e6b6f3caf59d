/* Matrix-vector core shared by matvec.cu (plain / accumulate), qkv_rope.cu
 * (RoPE epilogue) and ffn.cu (SwiGLU epilogue).
 *
 * Work split. A warp owns two weight rows ("slots": rows 2p and 2p+1 of one
 * matrix, or row p of two matrices for SwiGLU) and a tile of NT <= 8
 * activation rows. Each lane streams 16-byte chunks of both rows (chunk c of
 * a row is bytes [16c, 16c+16) of its values in the device layout, see
 * cuda_int.h), MV_UNROLL chunks per lane issued before any is used, so a
 * warp has 2 * MV_UNROLL * 512 bytes of weights in flight. Dequantisation
 * happens in registers; quantised weights meet int8 activations through
 * __dp4a, exactly the CPU's integer products (kernels/cpu/cpu_int.h), so only the
 * float summation order differs from the CPU. For rows with few chunks and
 * matrices with few rows, ks in {1,2,4} warps of a block split one row pair's
 * chunks and add their sums through shared memory, so the grid keeps enough
 * loads in flight.
 *
 * Activations are at most NT*cols bytes (int8) or floats, read by every
 * warp of a multiprocessor, so they stay in L1, and holding them for two
 * rows at once halves the on-chip traffic. They are read with coherent
 * loads (cu_ld_act), not through the read-only path: the kernel before
 * writes them while this one is already running under programmatic
 * dependent launch (cuda_int.h). Weights are read once, with an
 * evict-first hint (__ldcs), or, in the persistent step's staged kernel
 * (step_stage.cu, stage.cuh), with ordinary loads (mv_ld).
 * Blocks are numbered tile-fastest (block b: activation tile b % ntiles, row
 * group b / ntiles), so for n > NT the blocks that read the same weight rows
 * run side by side and all but the first find them in L2: every weight byte
 * comes from device memory about once per call.
 *
 * A folded norm (cuda_int.h "pending norm"): the activations are
 * rmsnorm(nx) * ng, which no kernel has made. Each block makes its tile's
 * rows after its wait, in shared memory (mv_norm_tile, in norm.cuh's order,
 * so the bits of the RMSNorm kernel and of qact), and reads them from there;
 * the blocks of the first row group also write them to nout, as the norm's
 * output. Each block pays the norm once: a folded launch runs fewer blocks
 * than the plan has (mv_grid: fuse_norm resident blocks a multiprocessor
 * at most, a multiple of ntiles), and each takes the plan's blocks
 * ("virtual blocks") b, b + grid, ..., which keep its tile. Unfolded
 * launches run one virtual block a block, as planned. */
#ifndef SD_CUDA_MV_CUH
#define SD_CUDA_MV_CUH

#include <cuda_fp16.h>

#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/plan.h"
#include "kernels/cuda/qact.cuh"

enum { MV_WARPS = SD_MV_WARPS, MV_THREADS = 32 * MV_WARPS, MV_UNROLL = SD_MV_UNROLL, MV_MAX_NT = SD_MV_MAX_NT };
static_assert((int)MV_THREADS == (int)RN_THREADS, "a folded norm sums in the RMSNorm kernel's order");
/* A folded norm's rows take at most this much shared memory (no opt-in). */
enum { MV_FOLD_SMEM = 48 * 1024 };

/* The activations of one launch. */
struct MvAct {
    const float *x;       /* [n][cols]; float weights read it */
    const int8_t *xq;     /* [n][cols] int8; quantised weights read it */
    const float *xd, *xs; /* [n][cols/32]: block scale d, d * sum(q) */
    int n, cols;
    int fast; /* float weights: cols % 32 == 0 and x 16-byte aligned (else one
                 element per lane per step) */
    /* a folded norm (see the top): nx non-NULL, rows rmsnorm(nx) * ng of eps
     * neps, written to nout by the first row group; x, xq, xd, xs unused */
    const float *nx, *ng;
    float *nout;
    float neps;
};

/* One weight row: its values, high bits and scales (cuda_int.h); sm: read
 * with ordinary loads, which shared memory allows (mv_row). */
struct MvRow {
    const uint8_t *q, *h, *sc;
    int sm;
};

/* A load of weight bytes: evict-first from global memory, or (sm) an
 * ordinary load, valid for rows staged in shared memory too: __ldcs is
 * ld.global.cs, which faults on a shared-memory address (as __ldg does,
 * mv_ld_nc). sm is a constant of the instantiation (mv_row), so each
 * compiles to one kind of load. */
template <class V>
__device__ __forceinline__ V mv_ld(const V *p, int sm) {
    return sm ? *p : __ldcs(p);
}

/* Elements in one 16-byte chunk of values. */
__host__ __device__ constexpr int mv_chunk_elems(int t) {
    return t == SD_F32 ? 4 : (t == SD_F16 || t == SD_BF16) ? 8 : t == SD_Q8_0 ? 16 : 32;
}

/* One chunk of activations in registers: float bits for float weights (8
 * floats in a and b), int8 quants for quantised ones (16 in a for Q8_0, the
 * block's 32 in a and b for the 4- to 6-bit types), with the block's d and
 * d*sum(q) (the latter for the types with an offset, Q4_1 and Q4_K). */
struct MvX {
    int4 a, b;
    float d, s;
};

template <int T>
__device__ __forceinline__ MvX mv_ldx(const MvAct &A, int i, int c) {
    MvX x = {};
    if constexpr (T == SD_F32) {
        x.a = cu_ld_act(reinterpret_cast<const int4 *>(A.x + (size_t)i * A.cols) + c);
    } else if constexpr (T == SD_F16 || T == SD_BF16) {
        const int4 *p = reinterpret_cast<const int4 *>(A.x + (size_t)i * A.cols) + 2 * c;
        x.a = cu_ld_act(p);
        x.b = cu_ld_act(p + 1);
    } else if constexpr (T == SD_Q8_0) {
        const size_t nb = (size_t)(A.cols / 32);
        x.a = cu_ld_act(reinterpret_cast<const int4 *>(A.xq + (size_t)i * A.cols) + c);
        x.d = cu_ld_act(A.xd + i * nb + (c >> 1));
    } else {
        const size_t nb = (size_t)(A.cols / 32);
        const int4 *p = reinterpret_cast<const int4 *>(A.xq + (size_t)i * A.cols) + 2 * c;
        x.a = cu_ld_act(p);
        x.b = cu_ld_act(p + 1);
        x.d = cu_ld_act(A.xd + i * nb + c);
        if constexpr (T == SD_Q4_1 || T == SD_Q4_K) x.s = cu_ld_act(A.xs + i * nb + c);
    }
    return x;
}

/* One chunk of a weight row: 16 value bytes and the high-bit words. */
struct MvW {
    uint4 q;
    uint2 h;
};

template <int T>
__device__ __forceinline__ MvW mv_ldw(const MvRow &r, int c) {
    MvW w;
    w.q = mv_ld(reinterpret_cast<const uint4 *>(r.q) + c, r.sm);
    w.h = make_uint2(0, 0);
    if constexpr (T == SD_Q5_0) w.h.x = mv_ld(reinterpret_cast<const unsigned *>(r.h) + c, r.sm);
    if constexpr (T == SD_Q6_K) w.h = mv_ld(reinterpret_cast<const uint2 *>(r.h) + c, r.sm);
    return w;
}

__device__ __forceinline__ float mv_h2f(unsigned bits) {
    return __half2float(__ushort_as_half((unsigned short)(bits & 0xffffu)));
}

/* The scales of chunk c as two floats; zeros for float types.
 *   Q8_0, Q4_0, Q5_0  (d, 0)
 *   Q4_1              (d, m)
 *   Q4_K              (d * sc, dmin * mn) of sub-block c % 8: x = dm.x *
 *                     nibble - dm.y. The 16-byte record of super-block c / 8
 *                     is one load that its 8 lanes share; sc and mn are
 *                     unpacked with shifts (no indexed register array).
 *   Q6_K              (d * scales[2k], d * scales[2k+1]) for chunk k = c % 8
 *                     of its super-block: the scales of elements 0-15 and
 *                     16-31 of the chunk (sub-blocks of 16).
 * The products of an f16 and a 6- or 8-bit integer are exact in float, so
 * they equal the CPU's however it orders its block arithmetic. */
template <int T>
__device__ __forceinline__ float2 mv_lds(const MvRow &r, int c) {
    if constexpr (T == SD_Q8_0 || T == SD_Q4_0 || T == SD_Q5_0) {
        const int b = T == SD_Q8_0 ? c >> 1 : c;
        return make_float2(mv_h2f(mv_ld(reinterpret_cast<const unsigned short *>(r.sc) + b, r.sm)), 0.f);
    } else if constexpr (T == SD_Q4_1) {
        const unsigned u = mv_ld(reinterpret_cast<const unsigned *>(r.sc) + c, r.sm);
        return make_float2(mv_h2f(u), mv_h2f(u >> 16));
    } else if constexpr (T == SD_Q4_K) {
        /* record {d, dmin, scales[12]}: bytes 0-3 of scales hold sc 0-3 (low
         * 6 bits) and the top bits of sc 4-7, bytes 4-7 the same for mn,
         * bytes 8-11 the low nibbles of sc 4-7 and (high nibbles) mn 4-7 */
        const uint4 rec = mv_ld(reinterpret_cast<const uint4 *>(r.sc) + (c >> 3), r.sm);
        const int s = c & 7, sh = 8 * (s & 3);
        const unsigned a = rec.y >> sh, b = rec.z >> sh, hi = rec.w >> sh;
        const unsigned sc = s < 4 ? a & 63 : (hi & 15) | ((a >> 2) & 48);
        const unsigned mn = s < 4 ? b & 63 : ((hi >> 4) & 15) | ((b >> 2) & 48);
        return make_float2(mv_h2f(rec.x) * (float)sc, mv_h2f(rec.x >> 16) * (float)mn);
    } else if constexpr (T == SD_Q6_K) {
        const unsigned short *rec = reinterpret_cast<const unsigned short *>(r.sc + (size_t)(c >> 3) * 20);
        const unsigned sc = mv_ld(rec + (c & 7), r.sm);
        const float d = mv_h2f(mv_ld(rec + 8, r.sm));
        return make_float2(d * (float)(int8_t)(sc & 0xff), d * (float)(int8_t)(sc >> 8));
    } else {
        return make_float2(0.f, 0.f);
    }
}

/* Two 16-bit floats of one word as floats (element 0 in the low half). */
template <int T>
__device__ __forceinline__ float2 mv_pair(unsigned u) {
    if constexpr (T == SD_BF16)
        return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
    else
        return make_float2(mv_h2f(u), mv_h2f(u >> 16));
}

/* Dot product of one weight chunk with one activation chunk. Quantised:
 * (d_w * d_x) * integer sum (+ m_w * s_x for Q4_1, - (dmin*mn)_w * s_x for
 * Q4_K), the CPU's block term; Q6_K has two integer sums, one per sub-block
 * of 16, each with its own scale. For the 4- to 6-bit types the chunk's
 * elements are formed as 8 words of 4 bytes: word g holds elements 4g..4g+3
 * (the low nibbles of value word g for g < 4, the high nibbles of word g-4
 * after), each byte then or-ed with its high bits (at one shift per word,
 * see cuda_int.h) and offset to a signed byte, ready for __dp4a. */
template <int T>
__device__ __forceinline__ float mv_dot(const MvW &w, float2 dm, const MvX &x) {
    if constexpr (T == SD_F32) {
        return __uint_as_float(w.q.x) * __int_as_float(x.a.x) + __uint_as_float(w.q.y) * __int_as_float(x.a.y) +
               __uint_as_float(w.q.z) * __int_as_float(x.a.z) + __uint_as_float(w.q.w) * __int_as_float(x.a.w);
    } else if constexpr (T == SD_F16 || T == SD_BF16) {
        const float2 w0 = mv_pair<T>(w.q.x), w1 = mv_pair<T>(w.q.y), w2 = mv_pair<T>(w.q.z),
                     w3 = mv_pair<T>(w.q.w);
        return w0.x * __int_as_float(x.a.x) + w0.y * __int_as_float(x.a.y) +
               w1.x * __int_as_float(x.a.z) + w1.y * __int_as_float(x.a.w) +
               w2.x * __int_as_float(x.b.x) + w2.y * __int_as_float(x.b.y) +
               w3.x * __int_as_float(x.b.z) + w3.y * __int_as_float(x.b.w);
    } else if constexpr (T == SD_Q8_0) {
        int s = __dp4a((int)w.q.x, x.a.x, 0);
        s = __dp4a((int)w.q.y, x.a.y, s);
        s = __dp4a((int)w.q.z, x.a.z, s);
        s = __dp4a((int)w.q.w, x.a.w, s);
        return dm.x * x.d * (float)s;
    } else {
        const unsigned m4 = 0x0f0f0f0fu;
        const unsigned q[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
        const int xs[8] = {x.a.x, x.a.y, x.a.z, x.a.w, x.b.x, x.b.y, x.b.z, x.b.w};
        int s[2] = {0, 0}; /* elements 0-15, 16-31 */
#pragma unroll
        for (int g = 0; g < 8; g++) {
            unsigned v = (q[g & 3] >> (g < 4 ? 0 : 4)) & m4;
            if constexpr (T == SD_Q4_0) v = __vsub4(v, 0x08080808u);
            if constexpr (T == SD_Q5_0) v = __vsub4(v | ((w.h.x >> g) & 0x01010101u) << 4, 0x10101010u);
            if constexpr (T == SD_Q6_K)
                v = __vsub4(v | (((g < 4 ? w.h.x : w.h.y) >> (2 * (g & 3))) & 0x03030303u) << 4,
                            0x20202020u);
            s[g >> 2] = __dp4a((int)v, xs[g], s[g >> 2]);
        }
        if constexpr (T == SD_Q6_K) return x.d * (dm.x * (float)s[0] + dm.y * (float)s[1]);
        float v = dm.x * x.d * (float)(s[0] + s[1]);
        if constexpr (T == SD_Q4_1) v += dm.y * x.s;
        if constexpr (T == SD_Q4_K) v -= dm.y * x.s;
        return v;
    }
}

/* Element k of a float-type row (the path for odd shapes): through the
 * read-only path, or an ordinary load of a staged row (mv_ld). */
template <class V>
__device__ __forceinline__ V mv_ld_nc(const V *p, int sm) {
    return sm ? *p : __ldg(p);
}

template <int T>
__device__ __forceinline__ float mv_elem(const MvRow &r, int k) {
    if constexpr (T == SD_F32)
        return mv_ld_nc(reinterpret_cast<const float *>(r.q) + k, r.sm);
    else if constexpr (T == SD_BF16)
        return __uint_as_float((unsigned)mv_ld_nc(reinterpret_cast<const unsigned short *>(r.q) + k, r.sm)
                               << 16);
    else
        return mv_h2f(mv_ld_nc(reinterpret_cast<const unsigned short *>(r.q) + k, r.sm));
}

/* Shared memory of a folded norm's tile (see the top), 16-byte aligned:
 * float weights read floats [NT][cols]; quantised ones int8 [NT][cols],
 * then d and s [NT][cols / 32]. */
__device__ __forceinline__ uint8_t *mv_sm(void) {
    extern __shared__ __align__(16) uint8_t mv_smem[];
    return mv_smem;
}

__host__ __device__ constexpr bool mv_float(int t) {
    return t == SD_F32 || t == SD_F16 || t == SD_BF16;
}

/* The folded norm of rows i0.. of this block's tile into shared memory (and
 * nout when writer). Every thread of the block calls it, after its wait. */
template <int T, int NT>
__device__ __forceinline__ void mv_norm_tile(const MvAct &A, int i0, bool writer) {
    __shared__ double red[RN_WARPS];
    uint8_t *sm = mv_sm();
    const int rows = min(NT, A.n - i0), cols = A.cols, t = threadIdx.x;
    for (int i = 0; i < rows; i++) {
        const float *xr = A.nx + (size_t)(i0 + i) * cols;
        double ss = 0;
        for (int k = t; k < cols; k += RN_THREADS) {
            const float v = cu_ld_act(xr + k);
            ss += (double)v * v;
        }
        const float sc = rn_scale(ss, cols, A.neps, red);
        float *o = A.nout + (size_t)(i0 + i) * cols;
        for (int k = t; k < cols; k += RN_THREADS) {
            const float v = cu_ld_act(xr + k) * sc * __ldg(A.ng + k);
            if (writer) o[k] = v;
            if constexpr (mv_float(T)) {
                reinterpret_cast<float *>(sm)[i * cols + k] = v;
            } else {
                float *d = reinterpret_cast<float *>(sm + NT * cols) + i * (cols / 32);
                qa_block(v, k / 32, reinterpret_cast<int8_t *>(sm) + i * cols, d,
                         d + NT * (cols / 32));
            }
        }
    }
    __syncthreads();
}

/* The activations a block reads: A itself, or for a folded norm its tile in
 * shared memory, whose rows start at 0 (i0 becomes 0). */
template <int T, int NT>
__device__ __forceinline__ MvAct mv_tile(const MvAct &A, int &i0) {
    if (!A.nx) return A;
    MvAct L = A;
    uint8_t *sm = mv_sm();
    L.n = min(NT, A.n - i0);
    i0 = 0;
    L.fast = 1;
    if constexpr (mv_float(T)) {
        L.x = reinterpret_cast<const float *>(sm);
    } else {
        L.xq = reinterpret_cast<const int8_t *>(sm);
        L.xd = reinterpret_cast<const float *>(sm + NT * A.cols);
        L.xs = L.xd + NT * (A.cols / 32);
    }
    return L;
}

/* The weight chunks of one step at base (zeros past nch). */
template <int T>
__device__ __forceinline__ void mv_ldw_step(const MvRow &r0, const MvRow &r1, int base, int nch,
                                            MvW w[2][MV_UNROLL], float2 dm[2][MV_UNROLL]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < MV_UNROLL; u++) {
        const int c = base + 32 * u + lane;
        w[0][u] = w[1][u] = MvW{make_uint4(0, 0, 0, 0), make_uint2(0, 0)};
        dm[0][u] = dm[1][u] = make_float2(0.f, 0.f);
        if (c < nch) {
            w[0][u] = mv_ldw<T>(r0, c);
            w[1][u] = mv_ldw<T>(r1, c);
            dm[0][u] = mv_lds<T>(r0, c);
            dm[1][u] = mv_lds<T>(r1, c);
        }
    }
}

/* acc[s][i] = this lane's part of row slot s . activation row i0+i; rows
 * past n are left at 0 and not computed (a tile of NT = 8 for 5 rows, or
 * the second tile of 9, would otherwise do 3 or 7 rows of products for
 * nothing), and the caller does not store them.
 *
 * first: the block's first virtual block (the same for all its threads),
 * which holds the kernel's wait (cuda_int.h, programmatic dependent
 * launch) and, for a folded norm, makes the tile (writer: also nout). The
 * first step's weight chunks are loaded before cu_grid_wait(), the
 * activations only after it, so a kernel launched early has its first
 * 2 * MV_UNROLL * 512 bytes a warp in flight (for rows of up to 2048
 * 4-bit values, all of its weights) while the kernel before it finishes.
 * The caller has read nothing but its arguments before calling it. */
template <int T, int NT>
__device__ __forceinline__ void mv_accum(const MvRow &r0, const MvRow &r1, const MvAct &A, int i0,
                                         int slice, int ks, bool first, bool writer,
                                         float acc[2][NT]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < NT; i++) acc[0][i] = acc[1][i] = 0.f;
    const int nch = A.cols / mv_chunk_elems(T), step = 32 * MV_UNROLL * ks;
    const bool fast = !mv_float(T) || A.fast;
    int base = slice * 32 * MV_UNROLL;
    MvW w[2][MV_UNROLL];
    float2 dm[2][MV_UNROLL];
    if (fast) mv_ldw_step<T>(r0, r1, base, nch, w, dm);
    if (first) {
        cu_grid_wait();
        if (A.nx) mv_norm_tile<T, NT>(A, i0, writer);
    }
    const MvAct L = mv_tile<T, NT>(A, i0);
    if constexpr (mv_float(T)) {
        if (!fast) {
            for (int k = slice * 32 + lane; k < L.cols; k += 32 * ks) {
                const float w0 = mv_elem<T>(r0, k), w1 = mv_elem<T>(r1, k);
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    if (i0 + i >= L.n) break;
                    const float xv = L.x[(size_t)(i0 + i) * L.cols + k];
                    acc[0][i] += w0 * xv;
                    acc[1][i] += w1 * xv;
                }
            }
            return;
        }
    }
    while (base < nch) {
#pragma unroll
        for (int u = 0; u < MV_UNROLL; u++) {
            const int c = base + 32 * u + lane;
            if (c >= nch) continue;
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (i0 + i >= L.n) break; /* the same for the whole warp */
                const MvX x = mv_ldx<T>(L, i0 + i, c);
                acc[0][i] += mv_dot<T>(w[0][u], dm[0][u], x);
                acc[1][i] += mv_dot<T>(w[1][u], dm[1][u], x);
            }
        }
        base += step;
        if (base < nch) mv_ldw_step<T>(r0, r1, base, nch, w, dm);
    }
}

__device__ __forceinline__ float mv_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sums acc over the warp, then over the ks warps of one row pair. Lane i <
 * NT of the pair's first warp (slice 0) gets the totals of activation row
 * i0+i in v0 (slot 0) and v1 (slot 1). Every thread of the block must call it
 * (it holds two barriers when ks > 1, the second before red is written
 * again by the block's next virtual block). */
template <int NT>
__device__ __forceinline__ void mv_reduce(float acc[2][NT], int slice, int ks, float &v0,
                                          float &v1) {
    __shared__ float red[MV_WARPS][2][MV_MAX_NT];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v0 = v1 = 0.f;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const float a = mv_warp_sum(acc[0][i]), b = mv_warp_sum(acc[1][i]);
        if (lane == i) v0 = a, v1 = b;
    }
    if (ks > 1) {
        if (lane < NT) red[warp][0][lane] = v0, red[warp][1][lane] = v1;
        __syncthreads();
        if (slice == 0 && lane < NT)
            for (int k = 1; k < ks; k++) v0 += red[warp + k][0][lane], v1 += red[warp + k][1][lane];
        __syncthreads();
    }
}

/* This warp's activation tile start, row pair (or row) index and slice in
 * virtual block b. */
__device__ __forceinline__ void mv_place(unsigned b, int ntiles, int ks, int nt, int &i0, int &pair,
                                         int &slice) {
    const int warp = threadIdx.x >> 5;
    i0 = (b % ntiles) * nt;
    pair = (b / ntiles) * (MV_WARPS / ks) + warp / ks;
    slice = warp % ks;
}

/* ---- host side ------------------------------------------------------------ */
struct MvPlan {
    int nt, ntiles, ks;
    unsigned blocks; /* virtual blocks */
    size_t smem;     /* a folded norm's shared memory (0: not folded) */
    int per_sm, sms; /* folded: resident blocks a multiprocessor asked for, multiprocessors */
};

/* Shared memory of a folded norm's tile of nt rows (mv_sm). */
static inline size_t mv_fold_bytes(int fl, int nt, int64_t cols) {
    return fl ? (size_t)nt * (size_t)cols * 4 : (size_t)nt * (size_t)cols + 8 * (size_t)nt * (size_t)(cols / 32);
}

/* The row tiling of kernels/cuda/plan.h (sd_mv_plan_make), with the error
 * named for op `what`, for activations A (a folded norm: per_sm resident
 * blocks a multiprocessor, mv_grid; fl: this launch's weights are a float
 * type). */
static inline int mv_plan(const MvAct &A, int64_t units, int64_t nch, int sms, int per_sm, int fl,
                          MvPlan *p, sd_err *e, const char *what) {
    sd_mv_plan q;
    if (sd_mv_plan_make(A.n, units, nch, sms, &q))
        return sd_fail(e, "cuda: %s: grid of %lld blocks is too large", what, (long long)q.blocks);
    p->nt = q.nt;
    p->ntiles = q.ntiles;
    p->ks = q.ks;
    p->blocks = (unsigned)q.blocks;
    p->smem = A.nx ? mv_fold_bytes(fl, q.nt, A.cols) : 0;
    p->per_sm = per_sm;
    p->sms = sms;
    return 0;
}

/* The blocks to launch of kernel k for plan p: every virtual block when
 * unfolded; folded, per_sm a multiprocessor, or as many as one holds when
 * that is fewer (its registers and shared memory: a block that waits for
 * another to finish would start its share of the plan late and end the
 * launch late), a multiple of ntiles (a block keeps its activation tile). */
template <class K>
static inline unsigned mv_grid(const MvPlan &p, K *k) {
    if (!p.smem) return p.blocks;
    int fit = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, k, MV_THREADS, p.smem) != cudaSuccess) {
        cudaGetLastError();
        fit = 1;
    }
    const int64_t per = fit < p.per_sm ? (fit > 0 ? fit : 1) : p.per_sm;
    const int64_t groups = p.blocks / p.ntiles;
    int64_t g = per * p.sms / p.ntiles;
    if (g < 1) g = 1;
    return (unsigned)(p.ntiles * (groups < g ? groups : g));
}

/* Calls L::run<T, NT>(plan, c, args) for the run-time type and tile (the
 * kernels wait with cu_grid_wait and launch with cu_launch_cfg). */
template <typename L, int NT>
static inline void mv_launch_t(uint32_t type, const MvPlan &p, const sd_cuda *c,
                               const typename L::Args &a) {
    switch (type) {
    case SD_F32: L::template run<SD_F32, NT>(p, c, a); break;
    case SD_F16: L::template run<SD_F16, NT>(p, c, a); break;
    case SD_BF16: L::template run<SD_BF16, NT>(p, c, a); break;
    case SD_Q8_0: L::template run<SD_Q8_0, NT>(p, c, a); break;
    case SD_Q4_0: L::template run<SD_Q4_0, NT>(p, c, a); break;
    case SD_Q4_1: L::template run<SD_Q4_1, NT>(p, c, a); break;
    case SD_Q5_0: L::template run<SD_Q5_0, NT>(p, c, a); break;
    case SD_Q4_K: L::template run<SD_Q4_K, NT>(p, c, a); break;
    case SD_Q6_K: L::template run<SD_Q6_K, NT>(p, c, a); break;
    default: break; /* cu_check_weight admitted only these */
    }
}

template <typename L>
static inline void mv_launch(uint32_t type, const MvPlan &p, const sd_cuda *c,
                             const typename L::Args &a) {
    switch (p.nt) {
    case 1: mv_launch_t<L, 1>(type, p, c, a); break;
    case 2: mv_launch_t<L, 2>(type, p, c, a); break;
    case 4: mv_launch_t<L, 4>(type, p, c, a); break;
    default: mv_launch_t<L, 8>(type, p, c, a); break;
    }
}

static inline int mv_overlap(const void *a, size_t an, const void *b, size_t bn) {
    const char *p = (const char *)a, *q = (const char *)b;
    return p < q + bn && q < p + an;
}

/* Fills A for x[n][cols]. When x is the output of the norm pending right
 * before this op, takes it as a folded norm (see the top) if its tile fits
 * MV_FOLD_SMEM (fl: some weight is a float type) and neither the op's
 * output out[out_bytes] nor the norm's own output overlaps what the blocks
 * read; else launches the norm first. Then, unfolded, when need_q,
 * quantises x into the scratch. */
static inline int mv_act(sd_cuda *c, MvAct *A, const float *x, int n, int64_t cols, int need_q,
                         int fl, const void *out, size_t out_bytes, sd_err *e) {
    A->x = x;
    A->n = n;
    A->cols = (int)cols;
    A->fast = cols % 32 == 0 && ((uintptr_t)x & 15) == 0;
    A->xq = NULL;
    A->xd = A->xs = NULL;
    A->nx = A->ng = NULL;
    A->nout = NULL;
    A->neps = 0.f;
    const cu_norm *p = &c->norm;
    if (p->out) {
        const size_t bytes = (size_t)n * (size_t)cols * 4;
        /* the tile of the launch reading A: when on, mv_mma.cuh's, no
         * lower than the dp4a tile, so a bound too for weights (F32, or
         * float rows of odd shape) that stay on mv.cuh's tiles */
        const int nt = c->mma ? sd_mq_tile_rows(n) : sd_mv_tile_rows(n);
        /* not in a persistent step with tensor-core stages (step.cu) */
        if (p->out == x && p->n == n && p->dim == cols && p->seq + 1 == c->op_seq && !(c->step && c->mma) &&
            mv_fold_bytes(fl, nt, cols) <= MV_FOLD_SMEM && !mv_overlap(p->out, bytes, p->x, bytes) &&
            !mv_overlap(out, out_bytes, p->x, bytes) && !mv_overlap(out, out_bytes, p->out, bytes)) {
            A->nx = p->x;
            A->ng = p->w;
            A->nout = p->out;
            A->neps = p->eps;
            A->fast = 1;
            c->norm.out = NULL;
            c->folded++;
            return 0;
        }
        if (cu_norm_flush(c, e)) return -1;
    }
    if (!need_q) return 0;
    int8_t *q;
    float *d, *s;
    if (cu_qact(c, x, n, cols, &q, &d, &s, e)) return -1;
    A->xq = q;
    A->xd = d;
    A->xs = s;
    return 0;
}

/* A persistent step's stage of a matrix-vector kernel (step.cu): its
 * variant, the weight type and tile height (one row, or the 8-row tile,
 * which computes the same bits for 2 and 4 rows: rows past n are skipped
 * and a plan of fewer than 8 rows a tile has one tile). */
static inline int mv_step_variant(uint32_t type, int nt) { return 2 * (int)type + (nt > 1); }

/* What the blocks of a launch with activations A read. */
static inline void mv_act_spans(const MvAct &A, cu_spans *sp) {
    if (A.nx) {
        /* a folded norm: its input read, its output written (the first row
         * group's blocks), the activations made in shared memory */
        cu_span_add(sp, A.nx, (size_t)A.n * (size_t)A.cols * sizeof(float), 0);
        cu_span_add(sp, A.nout, (size_t)A.n * (size_t)A.cols * sizeof(float), 1);
        return;
    }
    cu_span_add(sp, A.x, (size_t)A.n * (size_t)A.cols * sizeof(float), 0);
    if (!A.xq) return;
    const size_t blocks = (size_t)A.n * (size_t)(A.cols / 32);
    cu_span_add(sp, A.xq, (size_t)A.n * (size_t)A.cols, 0);
    cu_span_add(sp, A.xd, blocks * sizeof(float), 0);
    cu_span_add(sp, A.xs, blocks * sizeof(float), 0);
}

/* A matrix as the kernels see it: values, high bits and scales, bytes per
 * row of each (the persistent step may point them at rows it staged in
 * shared memory, stage.cuh). */
struct MvMat {
    const uint8_t *q, *h, *sc;
    size_t qrow, hrow, srow;
    int rows;
};

static inline MvMat mv_mat(const sd_weight *w) {
    const uint8_t *base = (const uint8_t *)w->data;
    const uint32_t t = w->type;
    MvMat m = {base,
               base + cu_high_offset(t, w->rows, w->cols),
               base + cu_scale_offset(t, w->rows, w->cols),
               cu_qrow_bytes(t, w->cols),
               cu_hrow_bytes(t, w->cols),
               cu_srow_bytes(t, w->cols),
               (int)w->rows};
    return m;
}

/* Row r of m, clamped into the matrix (rows past the end are computed and
 * not stored, which keeps every lane of the warp in step). S = 1 in the
 * staged persistent step (step_stage.cu), whose items may read rows staged
 * in shared memory: its tiles read every weight with ordinary loads (the
 * evict-first hint given up for one instantiation of each tile rather
 * than a run-time switch in every load, which cost registers and ptxas
 * time); S = 0, the kernels' own launches and the unstaged step, keeps the
 * evict-first loads. */
template <int S>
__device__ __forceinline__ MvRow mv_row(const MvMat &m, int r) {
    r = min(r, m.rows - 1);
    MvRow row = {m.q + (size_t)r * m.qrow, m.h + (size_t)r * m.hrow, m.sc + (size_t)r * m.srow, S};
    return row;
}

/* matvec.cu: out[n][rows] (+)= A . W^T with activations already prepared. */
int cu_mm_plain(sd_cuda *c, float *out, const sd_weight *w, const MvAct *A, int accumulate,
                sd_err *e);

#endif
