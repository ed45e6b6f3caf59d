/* The persistent decode step: the launches of a recorded step (graph_end,
 * backend_cuda.cu) run as one cooperative launch instead of a graph of
 * kernels.
 *
 * Building. cu_step_begin sets c->step, and graph_end issues the step's
 * records through the ordinary launchers, which then add each launch as a
 * stage (cu_step_add) instead of launching it: the kernel's kind and
 * variant, its argument struct by value, its virtual blocks (the blocks
 * its grid has; the kernel files' *_vblock functions compute one, given
 * its index) and the device memory its blocks read and write. Norms are not
 * folded while building (each is a stage of its own), so no stage needs a
 * per-block prologue.
 *
 * The work list. Stage s owns items first_s .. first_s + blocks_s - 1, and
 * the items of the step are numbered end to end in the order of the
 * launches, so item i is virtual block i - first_s of the stage that holds
 * it. Device memory of one launch: the stage table (StStage[nst]), then
 * the argument structs, each 16-byte aligned at the offset its stage
 * names.
 *
 * Dependencies. Stage j waits for every earlier stage i whose blocks touch
 * memory that j's blocks also touch, one of the two writing it: i writes
 * what j reads (j needs i's result), i reads what j writes (j must not
 * overwrite i's input before i has read it: the int8 scratch every
 * quantising op reuses, a norm writing its input in place), or both write
 * it (the order of the last writer). Waiting is for all of stage i's
 * items: a block's virtual block of one kernel reads rows that other
 * blocks of the kernel before wrote, so nothing finer is known without the
 * kernels' layouts. Of the stages j would wait for, those that another of
 * them already waits for (directly or not) are left out, scanning from the
 * latest back, so a stage keeps a handful of waits (at most ST_DEPS, else
 * the step is not run persistently). The counters the kernels keep between
 * their blocks (attention's splits, ffn's groups) return to 0 by the last
 * block that counts, within the stage, so they hold inside one launch as
 * across launches; they are spans written like any other, so two stages
 * that use them are ordered.
 *
 * Running. The grid is as many blocks of ST_THREADS threads as are resident
 * at once (occupancy x multiprocessors, a cooperative launch, so all of
 * them are). Each block takes the next item from one counter in device
 * memory, waits for the stages its stage depends on, runs the item, and
 * counts it in its stage's flag (kernels/cuda/persist.cuh). Items are taken
 * in order and wait only for earlier items, which blocks that run already
 * hold: the earliest unfinished item can always go on, so the launch ends.
 *
 * Epochs. Nothing is reset between launches: the flags and the item
 * counter only grow. The host keeps what each has reached (shadow): a
 * launch's stage s is complete when its flag reaches shadow_s + blocks_s,
 * the target written into the stage table, and the launch's first item is
 * the counter's value before it (each launch adds its items plus one
 * failed take a block). Before the counter could pass 2^31 all are zeroed
 * once (cudaMemsetAsync, ordered after the launches that used them).
 *
 * Block size. The persistent kernel has ST_THREADS = 128 threads: the
 * matrix-vector family and RMSNorm are written for 128 (MV_THREADS,
 * RN_THREADS); attention runs with 4 warps (attn_vblock's W, two query
 * vectors more a warp and twice the K/V loads a thread), and the
 * elementwise kernels (embed, qact, the mixed-type SwiGLU) loop their
 * 256-thread blocks over the 128 threads. Every kernel body meets the
 * block at its barriers with all 128 threads, as in its own launch. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/embed.cuh"
#include "kernels/cuda/ffn.cuh"
#include "kernels/cuda/matvec.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/persist.cuh"
#include "kernels/cuda/qact.cuh"
#include "kernels/cuda/qkv_rope.cuh"

enum {
    ST_THREADS = 128,
    ST_WARPS = ST_THREADS / 32,
    ST_MAX = 4096,  /* stages a step may have */
    ST_DEPS = 8,    /* stages one waits for */
    ST_ALIGN = 16   /* of each argument struct */
};
static_assert((int)ST_THREADS == (int)MV_THREADS && (int)ST_THREADS == (int)RN_THREADS,
              "the matrix-vector kernels and RMSNorm run at their own block size");

/* One stage as the device reads it. */
struct StStage {
    int kind, variant;
    unsigned first, blocks; /* items first .. first + blocks - 1 */
    unsigned args;          /* byte offset of its argument struct */
    unsigned target;        /* its flag's value once its items are done */
    int ndep;
    int dep[ST_DEPS];
};

struct StArgs {
    const StStage *st;
    const unsigned char *args;
    unsigned *flag; /* [ST_MAX] stage flags, then the item counter */
    unsigned base;  /* the counter's value before this launch */
    unsigned items;
};

/* ---- device ------------------------------------------------------------------
 * One matrix-vector item: not inlined, so the step kernel does not carry
 * the registers of every instantiation at once. */
template <int T, int NT>
__device__ __noinline__ void st_mv(int kind, const unsigned char *args, unsigned b) {
    switch (kind) {
    case CU_STEP_MM: mm_vblock<T, NT>(*reinterpret_cast<const MmArgs *>(args), b, false, false); break;
    case CU_STEP_FFN: ffn_vblock<T, NT>(*reinterpret_cast<const FfnArgs *>(args), b, false, false); break;
    case CU_STEP_QKV:
        qkv_vblock<T, NT, QkvArgs>(*reinterpret_cast<const QkvArgs *>(args), b, false, false);
        break;
    default:
        qkv_vblock<T, NT, QkvScatterArgs>(*reinterpret_cast<const QkvScatterArgs *>(args), b,
                                          false, false);
        break;
    }
}

template <int T>
__device__ __forceinline__ void st_mv_t(int kind, int nt8, const unsigned char *args, unsigned b) {
    if (nt8) st_mv<T, 8>(kind, args, b);
    else st_mv<T, 1>(kind, args, b);
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

__device__ __noinline__ void st_item(int kind, int variant, const unsigned char *args, unsigned b) {
    switch (kind) {
    case CU_STEP_MM:
    case CU_STEP_FFN:
    case CU_STEP_QKV:
    case CU_STEP_QKV_BEAMS: {
        const int nt8 = variant & 1;
        switch (variant >> 1) {
        case SD_F32: st_mv_t<SD_F32>(kind, nt8, args, b); break;
        case SD_F16: st_mv_t<SD_F16>(kind, nt8, args, b); break;
        case SD_BF16: st_mv_t<SD_BF16>(kind, nt8, args, b); break;
        case SD_Q8_0: st_mv_t<SD_Q8_0>(kind, nt8, args, b); break;
        case SD_Q4_0: st_mv_t<SD_Q4_0>(kind, nt8, args, b); break;
        case SD_Q4_1: st_mv_t<SD_Q4_1>(kind, nt8, args, b); break;
        case SD_Q5_0: st_mv_t<SD_Q5_0>(kind, nt8, args, b); break;
        case SD_Q4_K: st_mv_t<SD_Q4_K>(kind, nt8, args, b); break;
        default: st_mv_t<SD_Q6_K>(kind, nt8, args, b); break;
        }
        break;
    }
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
    default: em_vblock(*reinterpret_cast<const EmArgs *>(args), b, ST_THREADS); break;
    }
}

__global__ void __launch_bounds__(ST_THREADS) step_kernel(const StArgs a) {
    __shared__ unsigned item;
    int s = 0;
    for (;;) {
        if (threadIdx.x == 0) item = atomicAdd(a.flag + ST_MAX, 1u) - a.base;
        __syncthreads();
        const unsigned it = item;
        __syncthreads(); /* item is read before thread 0 takes the next */
        if (it >= a.items) return;
        while (it - a.st[s].first >= a.st[s].blocks) s++;
        const StStage &S = a.st[s];
        for (int d = 0; d < S.ndep; d++) cu_flag_wait(a.flag + S.dep[d], a.st[S.dep[d]].target, (int)it);
        st_item(S.kind, S.variant, a.args + S.args, it - S.first);
        cu_flag_add(a.flag + s, 1u);
    }
}

/* ---- host ---------------------------------------------------------------------- */
struct cu_persist {
    /* the step being built */
    StStage *st;
    int nst;
    cu_span *sp; /* every stage's spans end to end; stage s's from sp0[s] to sp0[s + 1] */
    int *sp0;
    int nsp, sp_cap;
    unsigned char *args;
    size_t nargs, args_cap;
    size_t smem;
    unsigned items;
    int fuse_saved;
    uint64_t *anc; /* [ST_MAX][ST_MAX / 64]: the stages each waits for, directly or not */
    /* device */
    unsigned *flag; /* [ST_MAX + 1], zeroed at creation */
    unsigned shadow[ST_MAX + 1];
    void *dev;
    size_t dev_cap;
};

void cu_step_free(sd_cuda *c) {
    cu_persist *p = c->pst;
    if (!p) return;
    if (p->flag && cudaFree(p->flag) != cudaSuccess) cudaGetLastError();
    if (p->dev && cudaFree(p->dev) != cudaSuccess) cudaGetLastError();
    free(p->st);
    free(p->sp);
    free(p->sp0);
    free(p->args);
    free(p->anc);
    free(p);
    c->pst = NULL;
}

/* The state, made at the first step (nothing is kept on a failure). */
static int st_setup(sd_cuda *c, sd_err *e) {
    if (c->pst) return 0;
    cu_persist *p = (cu_persist *)calloc(1, sizeof *p);
    if (!p) return sd_fail(e, "cuda: persistent step: out of memory");
    c->pst = p;
    p->st = (StStage *)malloc(ST_MAX * sizeof *p->st);
    p->sp0 = (int *)malloc((ST_MAX + 1) * sizeof *p->sp0);
    p->anc = (uint64_t *)malloc((size_t)ST_MAX * (ST_MAX / 64) * sizeof *p->anc);
    if (!p->st || !p->sp0 || !p->anc) {
        cu_step_free(c);
        return sd_fail(e, "cuda: persistent step: out of memory");
    }
    cudaError_t err = cudaMalloc(&p->flag, (ST_MAX + 1) * sizeof *p->flag);
    if (err != cudaSuccess) p->flag = NULL;
    else err = cudaMemsetAsync(p->flag, 0, (ST_MAX + 1) * sizeof *p->flag, c->stream);
    if (err != cudaSuccess) {
        cu_step_free(c);
        return cu_fail(e, err, "persistent step: flags");
    }
    return 0;
}

int cu_step_begin(sd_cuda *c, sd_err *e) {
    if (st_setup(c, e)) return -1;
    cu_persist *p = c->pst;
    p->nst = p->nsp = 0;
    p->sp0[0] = 0;
    p->nargs = p->smem = 0;
    p->items = 0;
    p->fuse_saved = c->fuse_norm;
    c->fuse_norm = 0;
    c->step = p;
    return 0;
}

int cu_step_add(sd_cuda *c, int kind, int variant, const void *args, size_t bytes,
                unsigned blocks, size_t smem, const cu_spans *sp, sd_err *e) {
    cu_persist *p = c->step;
    if (sp->n < 0) return sd_fail(e, "cuda: persistent step: a launch touches more than %d spans", CU_STEP_SPANS);
    if (p->nst == ST_MAX) return sd_fail(e, "cuda: persistent step: more than %d launches", ST_MAX);
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffu - p->items)
        return sd_fail(e, "cuda: persistent step: more than 2^31 work items");
    const size_t off = (p->nargs + ST_ALIGN - 1) & ~(size_t)(ST_ALIGN - 1);
    if (off + bytes > p->args_cap) {
        const size_t cap = 2 * (off + bytes) + 4096;
        unsigned char *a = (unsigned char *)realloc(p->args, cap);
        if (!a) return sd_fail(e, "cuda: persistent step: out of memory for %zu argument bytes", cap);
        p->args = a;
        p->args_cap = cap;
    }
    if (p->nsp + sp->n > p->sp_cap) {
        const int cap = 2 * (p->nsp + sp->n) + 256;
        cu_span *s = (cu_span *)realloc(p->sp, (size_t)cap * sizeof *s);
        if (!s) return sd_fail(e, "cuda: persistent step: out of memory for %d spans", cap);
        p->sp = s;
        p->sp_cap = cap;
    }
    memset(p->args + p->nargs, 0, off - p->nargs);
    memcpy(p->args + off, args, bytes);
    p->nargs = off + bytes;
    memcpy(p->sp + p->nsp, sp->s, (size_t)sp->n * sizeof *sp->s);
    p->nsp += sp->n;
    StStage *s = &p->st[p->nst++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->variant = variant;
    s->first = p->items;
    s->blocks = blocks;
    s->args = (unsigned)off;
    p->sp0[p->nst] = p->nsp;
    p->items += blocks;
    if (smem > p->smem) p->smem = smem;
    return 0;
}

static int st_overlap(const cu_span *a, const cu_span *b) {
    const char *x = (const char *)a->p, *y = (const char *)b->p;
    return (a->write || b->write) && x < y + b->bytes && y < x + a->bytes;
}

static int st_conflict(const cu_persist *p, int i, int j) {
    for (int a = p->sp0[j]; a < p->sp0[j + 1]; a++)
        for (int b = p->sp0[i]; b < p->sp0[i + 1]; b++)
            if (st_overlap(&p->sp[a], &p->sp[b])) return 1;
    return 0;
}

/* Each stage's waits (see the top); -1 with e filled when one needs more
 * than ST_DEPS. */
static int st_deps(cu_persist *p, sd_err *e) {
    const int words = (p->nst + 63) / 64;
    for (int j = 0; j < p->nst; j++) {
        uint64_t *aj = p->anc + (size_t)j * words;
        memset(aj, 0, (size_t)words * sizeof *aj);
        StStage *s = &p->st[j];
        for (int i = j - 1; i >= 0; i--) {
            if (aj[i / 64] >> (i % 64) & 1) continue;
            if (!st_conflict(p, i, j)) continue;
            if (s->ndep == ST_DEPS)
                return sd_fail(e, "cuda: persistent step: launch %d waits for more than %d others",
                               j, ST_DEPS);
            s->dep[s->ndep++] = i;
            const uint64_t *ai = p->anc + (size_t)i * words;
            for (int w = 0; w < words; w++) aj[w] |= ai[w];
            aj[i / 64] |= (uint64_t)1 << (i % 64);
        }
    }
    return 0;
}

/* Stage table and arguments onto the device, ordered after the launches
 * before (the copy is queued on the stream; from pageable memory, so the
 * host buffers are free again when it returns). */
static int st_upload(sd_cuda *c, cu_persist *p, size_t table, sd_err *e) {
    const size_t bytes = table + p->nargs;
    cudaError_t err;
    if (bytes > p->dev_cap) {
        if ((err = cudaStreamSynchronize(c->stream)) != cudaSuccess)
            return cu_fail(e, err, "persistent step: wait for queued work");
        if (p->dev && cudaFree(p->dev) != cudaSuccess) cudaGetLastError();
        p->dev = NULL;
        p->dev_cap = 0;
        const size_t cap = bytes + bytes / 2;
        if ((err = cudaMalloc(&p->dev, cap)) != cudaSuccess) {
            p->dev = NULL;
            return cu_fail(e, err, "persistent step: %zu bytes of work list", cap);
        }
        p->dev_cap = cap;
    }
    err = cudaMemcpyAsync(p->dev, p->st, (size_t)p->nst * sizeof *p->st, cudaMemcpyHostToDevice,
                          c->stream);
    if (err == cudaSuccess && p->nargs)
        err = cudaMemcpyAsync((unsigned char *)p->dev + table, p->args, p->nargs,
                              cudaMemcpyHostToDevice, c->stream);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "persistent step: copy the work list");
}

/* The resident blocks of the step kernel with smem bytes of dynamic shared memory. */
static int st_grid(const sd_cuda *c, size_t smem, unsigned *grid, sd_err *e) {
    cudaError_t err = cudaSuccess;
    if (smem > 48 * 1024)
        err = cudaFuncSetAttribute(step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int fit = 0;
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, step_kernel, ST_THREADS, smem);
    if (err != cudaSuccess) return cu_fail(e, err, "persistent step: occupancy at %zu bytes of shared memory", smem);
    if (fit < 1) return sd_fail(e, "cuda: persistent step: no block fits %zu bytes of shared memory", smem);
    *grid = (unsigned)fit * (unsigned)c->sms;
    return 0;
}

static int st_launch(sd_cuda *c, cu_persist *p, sd_err *e) {
    if (st_deps(p, e)) return -1;
    unsigned grid;
    if (st_grid(c, p->smem, &grid, e)) return -1;
    if (grid > p->items) grid = p->items;
    cudaError_t err;
    if (p->shadow[ST_MAX] > 0x7fffffffu) {
        if ((err = cudaMemsetAsync(p->flag, 0, (ST_MAX + 1) * sizeof *p->flag, c->stream)) != cudaSuccess)
            return cu_fail(e, err, "persistent step: reset the flags");
        memset(p->shadow, 0, sizeof p->shadow);
    }
    for (int s = 0; s < p->nst; s++) p->st[s].target = p->shadow[s] + p->st[s].blocks;
    const size_t table = (size_t)p->nst * sizeof *p->st;
    const size_t toff = (table + ST_ALIGN - 1) & ~(size_t)(ST_ALIGN - 1);
    if (st_upload(c, p, toff, e)) return -1;
    StArgs a;
    a.st = (const StStage *)p->dev;
    a.args = (const unsigned char *)p->dev + toff;
    a.flag = p->flag;
    a.base = p->shadow[ST_MAX];
    a.items = p->items;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeCooperative;
    at.val.cooperative = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(ST_THREADS);
    cfg.dynamicSmemBytes = p->smem;
    cfg.stream = c->stream;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, step_kernel, a);
    if (cu_check_launch(c, e, "persistent step (%d launches, %u items, %u blocks)", p->nst, p->items, grid))
        return -1;
    for (int s = 0; s < p->nst; s++) p->shadow[s] = p->st[s].target;
    p->shadow[ST_MAX] += p->items + grid;
    return 0;
}

int cu_step_end(sd_cuda *c, int ok, sd_err *e) {
    cu_persist *p = c->step;
    if (!p) return ok ? sd_fail(e, "cuda: persistent step: not building") : -1;
    c->step = NULL;
    c->fuse_norm = p->fuse_saved;
    if (!ok) return -1;
    if (p->items == 0) return 0;
    return st_launch(c, p, e);
}
