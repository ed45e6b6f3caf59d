/* Staging a work item's weight rows in shared memory (the persistent
 * step's staged kernel, step_stage.cu, SD_CUDA_STAGE=1): before its waits
 * a block issues asynchronous copies of the rows the item reads
 * (wspan.cuh's runs) into a buffer of its dynamic shared memory, the bytes
 * arrive while it waits, and the item then computes on a copy of its
 * arguments whose matrices point at the staged rows.
 *
 * The copy. cp.async.cg.shared.global (sm_80 and newer): 16 bytes a
 * thread an instruction, through L2 and past L1 and the registers; the
 * thread goes on at once, and cp.async.wait_all later waits for all of its
 * own copies, after which a barrier makes every thread's visible to the
 * block. Both addresses of a 16-byte cp.async must be 16-byte aligned. A
 * region of n bytes at src goes to dst with dst = src (mod 16), so the
 * 16-byte granules wholly inside it are aligned at both ends and go by
 * cp.async; the bytes of the partial granules at either end (a row of
 * scales is a multiple of 2 or 4 bytes, not of 16, so most runs of scales
 * begin and end inside a granule) go by ordinary byte loads and stores,
 * which the same barrier orders. Nothing outside the region is read, so a
 * region that ends where its allocation ends is safe.
 *
 * Why not the bulk copy (cp.async.bulk, sm_90, completing on an mbarrier):
 * it wants 16-byte aligned addresses and sizes a multiple of 16 too, so the
 * partial granules would still need this path; an item's runs are a few KB
 * in up to three regions a matrix, which 128 threads cover with a few
 * 16-byte copies each; and each item would need the mbarrier's expected
 * byte count and phase kept right across the items a block takes.
 *
 * Under the emulator (no __CUDA_ARCH__) each thread copies its granules
 * with plain loads at once, and the wait is nothing.
 *
 * The layout (sg_plan). An item is staged when each matrix it reads is one
 * run of rows (MM, FFN, Q/K/V without NEOX rotation; NEOX's pairs l and
 * l + rope_dim / 2 make two runs of one matrix, which one rebased pointer
 * cannot reach, so those items keep the L2 prefetch) and everything fits
 * SG_BYTES: first the copy of the argument struct, then a window a region
 * (values, high bits, scales) a matrix, each at a 16-byte boundary plus
 * its source's address mod 16. A staged matrix's q, h and sc point so that
 * row r of the run lands in its window (base - r0 * row bytes: the pointer
 * leaves the buffer below the run and is only ever moved back into it by
 * mv_row), and the staged step's tiles read every weight with loads valid
 * for shared memory (mv.cuh mv_row<1>, mv_ld). */
#ifndef SD_CUDA_STAGE_CUH
#define SD_CUDA_STAGE_CUH

#include "kernels/cuda/wspan.cuh"

/* The staging buffer a block: 48 KiB of dynamic shared memory. The staged
 * step kernel (step_stage.cu) is held at 128 registers a thread, 4 blocks a
 * multiprocessor, and 4 x (48 + 1) KiB (1 KiB reserved a block) is inside
 * its 228 KiB: the buffer costs no residency. It holds 8 rows of 8960 Q4_K
 * values (40 KB: an item of the down projection of Qwen2.5-1.5B) with their
 * arguments. */
enum { SG_BYTES = 48 * 1024, SG_WINS = 3 * WS_RUNS };

/* One region to copy: n bytes from src to the buffer at dst. */
struct SgWin {
    const uint8_t *src;
    unsigned n, dst;
};

struct SgPlan {
    unsigned args;       /* bytes of the argument struct, copied first */
    int nm, nw;          /* matrices staged, windows */
    unsigned off[WS_RUNS];   /* each staged matrix's MvMat: its offset in the arguments */
    long long base[WS_RUNS][3]; /* where row 0 of its q, h, sc would land, from the buffer's
                                   start: its window's start - r0 * row bytes */
    SgWin w[SG_WINS];
    unsigned bytes;      /* of the buffer in use */
};

/* Bytes of the argument struct of a matrix-vector kind, 0 for the others. */
__host__ __device__ inline unsigned sg_args_bytes(int kind) {
    switch (kind) {
    case CU_STEP_MM: return (unsigned)sizeof(MmArgs);
    case CU_STEP_FFN: return (unsigned)sizeof(FfnArgs);
    case CU_STEP_QKV: return (unsigned)sizeof(QkvArgs);
    case CU_STEP_QKV_BEAMS: return (unsigned)sizeof(QkvScatterArgs);
    default: return 0;
    }
}

__host__ __device__ inline unsigned sg_align(unsigned n) { return (n + 15u) & ~15u; }

/* The layout of the n runs r of an item with arguments args (see the top)
 * in a buffer of cap bytes: 1 when it is staged so, 0 when it is not. */
__host__ __device__ inline int sg_plan(int kind, const unsigned char *args, const WsRun *r, int n,
                                       unsigned cap, SgPlan *p) {
    p->args = sg_args_bytes(kind);
    if (n <= 0 || n > WS_RUNS || !p->args) return 0;
    p->nm = p->nw = 0;
    size_t at = sg_align(p->args);
    for (int k = 0; k < n; k++) {
        for (int j = 0; j < k; j++)
            if (r[j].m == r[k].m) return 0; /* two runs of one matrix */
        const MvMat &m = *r[k].m;
        const uint8_t *reg[3] = {m.q, m.h, m.sc};
        const size_t row[3] = {m.qrow, m.hrow, m.srow}, rows = (size_t)(r[k].r1 - r[k].r0);
        for (int g = 0; g < 3; g++) {
            const uint8_t *src = reg[g] + (size_t)r[k].r0 * row[g];
            const size_t bytes = rows * row[g], lead = (uintptr_t)src & 15;
            const size_t dst = at + lead;
            p->base[p->nm][g] = (long long)dst - (long long)r[k].r0 * (long long)row[g];
            if (!bytes) continue;
            at += (lead + bytes + 15) & ~(size_t)15;
            if (at > cap) return 0;
            p->w[p->nw++] = SgWin{src, (unsigned)bytes, (unsigned)dst};
        }
        p->off[p->nm++] = (unsigned)((const unsigned char *)r[k].m - args);
    }
    p->bytes = (unsigned)at;
    return 1;
}

/* Matrix k of plan p as the staged item reads it, for a buffer at buf
 * (integer arithmetic: the pointers may lie below the buffer, see the
 * top). */
__host__ __device__ inline MvMat sg_mat(const SgPlan &p, int k, const unsigned char *args,
                                        const uint8_t *buf) {
    MvMat m = *reinterpret_cast<const MvMat *>(args + p.off[k]);
    const uintptr_t b = (uintptr_t)buf;
    m.q = (const uint8_t *)(b + (uintptr_t)p.base[k][0]);
    m.h = (const uint8_t *)(b + (uintptr_t)p.base[k][1]);
    m.sc = (const uint8_t *)(b + (uintptr_t)p.base[k][2]);
    return m;
}

/* 16 bytes from src to dst, both 16-byte aligned: asynchronous on sm_80
 * and newer (sg_wait_all waits for it), at once elsewhere. */
__device__ __forceinline__ void sg_cp16(uint8_t *dst, const uint8_t *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                 :
                 : "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
#else
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#endif
}

/* Waits for this thread's copies (sg_cp16); a barrier after it makes every
 * thread's visible to the block. */
__device__ __forceinline__ void sg_wait_all(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" : : : "memory");
#endif
}

static_assert(sizeof(MvMat) % 8 == 0 && alignof(MvMat) == 8 && alignof(MmArgs) == 8 &&
                  alignof(FfnArgs) == 8 && alignof(QkvArgs) == 8 && alignof(QkvScatterArgs) == 8,
              "the argument structs are copied in 8-byte words, a staged matrix's words apart");

/* Every thread of the block calls it: issues the copies of plan p's
 * windows into buf and writes the argument struct there with its staged
 * matrices (sg_mat). The item reads them from buf once every thread has
 * passed sg_wait_all and then a barrier. */
__device__ inline void sg_stage(const SgPlan &p, const unsigned char *args, uint8_t *buf) {
    const unsigned t = threadIdx.x, nt = blockDim.x;
    for (int k = 0; k < p.nw; k++) {
        const SgWin &w = p.w[k];
        const uint8_t *src = w.src;
        uint8_t *d = buf + w.dst;
        /* bytes before the first whole granule, then the whole granules */
        const unsigned head = (unsigned)(-(uintptr_t)src & 15);
        const unsigned body = head < w.n ? (w.n - head) & ~15u : 0;
        const unsigned lead = head < w.n ? head : w.n;
        for (unsigned i = t; i < lead; i += nt) d[i] = src[i];
        for (unsigned i = lead + body + t; i < w.n; i += nt) d[i] = src[i];
        for (unsigned i = lead + 16 * t; i < lead + body; i += 16 * nt) sg_cp16(d + i, src + i);
    }
    for (unsigned i = 8 * t; i < p.args; i += 8 * nt) {
        bool mat = false;
        for (int k = 0; k < p.nm; k++) mat |= i - p.off[k] < (unsigned)sizeof(MvMat);
        if (!mat) *reinterpret_cast<uint64_t *>(buf + i) = *reinterpret_cast<const uint64_t *>(args + i);
    }
    for (int k = (int)t; k < p.nm; k += (int)nt)
        *reinterpret_cast<MvMat *>(buf + p.off[k]) = sg_mat(p, k, args, buf);
}

#endif
