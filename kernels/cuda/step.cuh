/* The device side of the persistent decode step (step.cu, which builds the
 * work lists and launches them, and describes the protocol): the stage
 * table and the launch's arguments, the item kinds every step kernel runs,
 * and the loop a block runs, taking items in order.
 *
 * Two kernels run that loop, in two files so that nvcc compiles them side
 * by side and neither carries the other's instantiations: step.cu's
 * step_kernel, which runs matrix-vector items on the __dp4a and float tiles
 * or on tensor cores (mv_mma.cuh) and asks L2 for an item's weight rows
 * before its waits, and step_stage.cu's step_stage_kernel (SD_CUDA_STAGE=1,
 * work lists without tensor-core stages), which copies them into shared
 * memory instead (stage.cuh). A policy class gives the loop the two
 * points where they differ (st_items). */
#ifndef SD_CUDA_STEP_CUH
#define SD_CUDA_STEP_CUH

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/embed.cuh"
#include "kernels/cuda/ffn.cuh"
#include "kernels/cuda/matvec.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/persist.cuh"
#include "kernels/cuda/qact.cuh"
#include "kernels/cuda/qkv_rope.cuh"
#include "kernels/cuda/top_k.cuh"
#include "kernels/cuda/wspan.cuh"

enum {
    ST_THREADS = 128,
    ST_WARPS = ST_THREADS / 32,
    ST_MAX = 4096,    /* stages a step may have */
    ST_DEPS = 8,      /* stages one waits for */
    ST_CHUNKS = 4096, /* chunk flags a step may have */
    ST_CHUNK0 = ST_MAX + 1, /* the first chunk flag: after the stage flags and the item counter */
    ST_FLAGS = ST_CHUNK0 + ST_CHUNKS,
    ST_ALIGN = 16,    /* of each argument struct */
    ST_MIN_BLOCKS = 4 /* resident a multiprocessor: the registers a thread may take */
};
static_assert((int)ST_THREADS == (int)MV_THREADS && (int)ST_THREADS == (int)RN_THREADS,
              "the matrix-vector kernels and RMSNorm run at their own block size");

/* One stage as the device reads it. */
struct StStage {
    int kind, variant;
    unsigned first, blocks; /* items first .. first + blocks - 1 */
    unsigned args;          /* byte offset of its argument struct */
    int ndep;
    int dep[ST_DEPS];
    unsigned fine;       /* bit d: dep d is a chunk wait */
    unsigned kdiv, kmod; /* a chunk wait's chunk of dep D for virtual block b:
                            D.chunk0 + b / kdiv % kmod */
    int chunk0;          /* -1, or its virtual block b also counts in chunk flag
                            chunk0 + ctab[b / cdiv] */
    unsigned cdiv, ctab; /* ctab: byte offset of an unsigned short table in the arguments */
};

struct StArgs {
    const StStage *st;
    const unsigned char *args;
    const unsigned *tgt;  /* [nst] each stage flag's value once its items are done, then
                             each chunk flag's */
    int nst;
    unsigned *flag;       /* [ST_FLAGS]: stage flags, the item counter, chunk flags */
    unsigned base;        /* the counter's value before this launch */
    unsigned items;
    unsigned stage_at;    /* step_stage_kernel: its staging buffer's offset in dynamic
                             shared memory */
};

/* step_stage.cu's kernel, which step.cu launches. */
__global__ void step_stage_kernel(const StArgs a);

/* A matrix-vector stage's activation tiles (mv_place). */
__device__ __forceinline__ int st_ntiles(int kind, const unsigned char *args) {
    switch (kind) {
    case CU_STEP_MM: return reinterpret_cast<const MmArgs *>(args)->ntiles;
    case CU_STEP_FFN: return reinterpret_cast<const FfnArgs *>(args)->ntiles;
    default: return reinterpret_cast<const QkvArgs *>(args)->ntiles; /* a scatter's starts with it */
    }
}

/* One matrix-vector item on the __dp4a and float tiles, its rows built with
 * mv_row<S> (mv.cuh: S = 1 reads them with loads valid for shared memory).
 * Every item is its block's first of the stage (mv_accum's first: a
 * folded norm's tile made in shared memory, the grid wait a no-op in a
 * launch without programmatic dependence), and an item of the first row
 * group writes the norm's output (writer). Not inlined, so a step kernel
 * does not carry the registers of every instantiation at once; it still
 * takes those of its hungriest callee. */
template <int T, int NT, int S>
__device__ __noinline__ void st_mv(int kind, const unsigned char *args, unsigned b) {
    const bool w = b < (unsigned)st_ntiles(kind, args);
    switch (kind) {
    case CU_STEP_MM: mm_vblock<T, NT, S>(*reinterpret_cast<const MmArgs *>(args), b, true, w); break;
    case CU_STEP_FFN: ffn_vblock<T, NT, S>(*reinterpret_cast<const FfnArgs *>(args), b, true, w); break;
    case CU_STEP_QKV:
        qkv_vblock<T, NT, QkvArgs, S>(*reinterpret_cast<const QkvArgs *>(args), b, true, w);
        break;
    default:
        qkv_vblock<T, NT, QkvScatterArgs, S>(*reinterpret_cast<const QkvScatterArgs *>(args), b, true, w);
        break;
    }
}

template <int T, int S>
__device__ __forceinline__ void st_mv_t(int kind, int nt8, const unsigned char *args, unsigned b) {
    if (nt8) st_mv<T, 8, S>(kind, args, b);
    else st_mv<T, 1, S>(kind, args, b);
}

/* A matrix-vector item of a __dp4a/float variant (mv_step_variant: weight
 * type, 8-row tile). */
template <int S>
__device__ __forceinline__ void st_mv_item(int kind, int variant, const unsigned char *args, unsigned b) {
    const int nt8 = variant & 1;
    switch (variant >> 1) {
    case SD_F32: st_mv_t<SD_F32, S>(kind, nt8, args, b); break;
    case SD_F16: st_mv_t<SD_F16, S>(kind, nt8, args, b); break;
    case SD_BF16: st_mv_t<SD_BF16, S>(kind, nt8, args, b); break;
    case SD_Q8_0: st_mv_t<SD_Q8_0, S>(kind, nt8, args, b); break;
    case SD_Q4_0: st_mv_t<SD_Q4_0, S>(kind, nt8, args, b); break;
    case SD_Q4_1: st_mv_t<SD_Q4_1, S>(kind, nt8, args, b); break;
    case SD_Q5_0: st_mv_t<SD_Q5_0, S>(kind, nt8, args, b); break;
    case SD_Q4_K: st_mv_t<SD_Q4_K, S>(kind, nt8, args, b); break;
    default: st_mv_t<SD_Q6_K, S>(kind, nt8, args, b); break;
    }
}

template <int D>
__device__ __noinline__ void st_attn(int kind, const unsigned char *args, unsigned b) {
    const AttnArgs &a = *reinterpret_cast<const AttnArgs *>(args);
    const unsigned n_kv = (unsigned)(a.kv_dim / a.hd);
    if (kind == CU_STEP_ATTN) {
        const unsigned ns = (unsigned)a.n_splits;
        attn_vblock<D, ST_WARPS>(a, (int)(b % ns), (int)(b / ns % n_kv), (int)(b / ns / n_kv));
    } else {
        attn_combine_vblock<D, ST_WARPS>(a, (int)(b % n_kv), (int)(b / n_kv));
    }
}

/* An item of the kinds that are not matrix-vector products. */
__device__ __forceinline__ void st_other(int kind, int variant, const unsigned char *args, unsigned b) {
    switch (kind) {
    case CU_STEP_ATTN:
    case CU_STEP_ATTN_MERGE:
        switch (variant) {
        case 1: st_attn<1>(kind, args, b); break;
        case 2: st_attn<2>(kind, args, b); break;
        case 3: st_attn<3>(kind, args, b); break;
        default: st_attn<4>(kind, args, b); break;
        }
        break;
    case CU_STEP_SWIGLU: {
        const SwigluArgs &a = *reinterpret_cast<const SwigluArgs *>(args);
        swiglu_vblock(a.h, a.up, a.count, b, a.blocks, ST_THREADS);
        break;
    }
    case CU_STEP_NORM: rn_row<0>(*reinterpret_cast<const RnArgs *>(args), b, false); break;
    case CU_STEP_QACT: qa_vblock(*reinterpret_cast<const QaArgs *>(args), b, ST_WARPS); break;
    case CU_STEP_TOPK: {
        const TkArgs &a = *reinterpret_cast<const TkArgs *>(args);
        tk_row<ST_THREADS>(a.out, a.probs, a.x, a.cols, a.k, b);
        break;
    }
    case CU_STEP_ARGMAX_PART: {
        const AmPartArgs &a = *reinterpret_cast<const AmPartArgs *>(args);
        am_part<ST_THREADS>(a, b % (unsigned)a.split, b / (unsigned)a.split);
        break;
    }
    case CU_STEP_ARGMAX_FINAL: am_final(*reinterpret_cast<const AmFinalArgs *>(args), b); break;
    default: em_vblock(*reinterpret_cast<const EmArgs *>(args), b, ST_THREADS); break;
    }
}

__device__ __forceinline__ bool st_is_mv(int kind) {
    return kind == CU_STEP_MM || kind == CU_STEP_FFN || kind == CU_STEP_QKV || kind == CU_STEP_QKV_BEAMS;
}

/* Asks L2 for the lines of bytes at p, a 128-byte line a thread. */
__device__ __forceinline__ void st_lines(const uint8_t *p, size_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uintptr_t end = (uintptr_t)p + bytes;
    for (uintptr_t l = ((uintptr_t)p & ~(uintptr_t)127) + 128 * threadIdx.x; l < end; l += 128 * ST_THREADS)
        asm volatile("prefetch.global.L2 [%0];" : : "l"(l));
#else
    (void)p, (void)bytes;
#endif
}

/* The n weight row runs r of an item (wspan.cuh) towards L2, so that they
 * stream while the block waits; on sm_90 (the emulator has no L2 and no
 * __CUDA_ARCH__: nothing). */
__device__ __forceinline__ void st_l2(const WsRun *r, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int k = 0; k < n; k++) {
        const MvMat &m = *r[k].m;
        const size_t r0 = (size_t)r[k].r0, rows = (size_t)(r[k].r1 - r[k].r0);
        st_lines(m.q + r0 * m.qrow, rows * m.qrow);
        st_lines(m.h + r0 * m.hrow, rows * m.hrow);
        st_lines(m.sc + r0 * m.srow, rows * m.srow);
    }
#else
    (void)r, (void)n;
#endif
}

/* The loop of a step kernel's block: take the next item, fetch its weight
 * rows ahead when it has waits (P::fetch, which returns the arguments the
 * item is to run on: its own, or a staged copy), hold its waits, then, for
 * a staged item, wait for the copies (P::arrive), run it (P::item) and
 * count it. item: the block's shared word for the item taken; buf: its
 * staging buffer (P's to use). */
template <class P>
__device__ __forceinline__ void st_items(const StArgs &a, unsigned *item, uint8_t *buf) {
    int s = 0;
    for (;;) {
        if (threadIdx.x == 0) *item = atomicAdd(a.flag + ST_MAX, 1u) - a.base;
        __syncthreads();
        const unsigned it = *item;
        __syncthreads(); /* item is read before thread 0 takes the next */
        if (it >= a.items) return;
        while (it - a.st[s].first >= a.st[s].blocks) s++;
        const StStage &S = a.st[s];
        const unsigned b = it - S.first;
        const unsigned char *const args = a.args + S.args;
        const unsigned char *run = S.ndep ? P::fetch(S.kind, S.variant, args, b, buf) : args;
        for (int d = 0; d < S.ndep; d++) {
            const int i = S.dep[d];
            if (S.fine >> d & 1) {
                const unsigned k = (unsigned)a.st[i].chunk0 + b / S.kdiv % S.kmod;
                cu_flag_wait(a.flag + ST_CHUNK0 + k, a.tgt[a.nst + k], (int)it);
            } else {
                cu_flag_wait(a.flag + i, a.tgt[i], (int)it);
            }
        }
        if (run != args) P::arrive();
        P::item(S.kind, S.variant, run, b);
        if (S.chunk0 >= 0) {
            const unsigned short *ct = reinterpret_cast<const unsigned short *>(a.args + S.ctab);
            cu_flag_add2(a.flag + s, a.flag + ST_CHUNK0 + S.chunk0 + ct[b / S.cdiv], 1u);
        } else {
            cu_flag_add(a.flag + s, 1u);
        }
    }
}

#endif
