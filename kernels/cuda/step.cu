/* The persistent decode step: the launches of a recorded step (graph_end,
 * backend_cuda.cu) run as one cooperative launch instead of a graph of
 * kernels.
 *
 * Building. cu_step_begin sets c->step, and graph_end issues the step's
 * records through the ordinary launchers, which then add each launch as a
 * stage (cu_step_add) instead of launching it: the kernel's kind and
 * variant (for a matrix-vector kind the weight type, the tile height and
 * whether it runs on the __dp4a and float tiles or, SD_CUDA_MMA, on
 * tensor cores: mv_step_variant, mq_step_variant), its argument struct by
 * value, its virtual blocks (the blocks its grid has; the kernel files'
 * *_vblock functions compute one, given its index) and the device memory
 * its blocks read and write. A norm is folded into the product after it
 * where the graph path folds it (mv.cuh "A folded norm", c->fuse_norm),
 * but for a step with tensor-core stages (c->mma, st_mq): no
 * stage of its own, and every item of the product makes its tile's
 * normalised rows in shared memory from the norm's input, as a folded
 * launch's block does once (the items of the first row group also write
 * the norm's output for later readers); its stage's dynamic shared memory
 * is the tile's. A built work list is kept (see "Kept work lists" below)
 * and launched again for a step of the same records.
 *
 * The work list. Stage s owns items first_s .. first_s + blocks_s - 1, and
 * the items of the step are numbered end to end in the order of the
 * launches, so item i is virtual block i - first_s of the stage that holds
 * it. Device memory of one work list: the stage table (StStage[nst]),
 * then the argument structs, each 16-byte aligned at the offset its stage
 * names, and the chunk tables; the flags' targets apart (see "Epochs").
 *
 * Dependencies. Stage j waits for every earlier stage i whose blocks touch
 * memory that j's blocks also touch, one of the two writing it: i writes
 * what j reads (j needs i's result), i reads what j writes (j must not
 * overwrite i's input before i has read it: the int8 scratch every
 * quantising op reuses, a norm writing its input in place), or both write
 * it (the order of the last writer). A wait is for all of stage i's items
 * (a stage wait on i's flag) unless the kernels' layouts say which of i's
 * items hold what an item of j reads (a chunk wait, below). Of the stages
 * j would wait for, those already done before any item of j runs (a stage
 * it waits for, directly or through stage waits of those, or through the
 * stages a chunk-waited stage waits for) are left out, scanning from the
 * latest back, so a stage keeps a handful of waits (at most ST_DEPS, else
 * the step is not run persistently). The counters the kernels keep between
 * their blocks (attention's splits, ffn's groups) return to 0 by the last
 * block that counts, within the stage, so they hold inside one launch as
 * across launches; they are spans written like any other, so two stages
 * that use them are ordered.
 *
 * Chunk waits. A producer stage may count each item also in one of its
 * chunk flags (chunk0 + ctab[b / cdiv]: a table in the arguments, by the
 * item's row group), and a consumer's item b waits for the chunk b / kdiv
 * % kmod of it instead of the stage. One pair has them now: attention after
 * the Q/K/V product (st_fine). Attention's virtual block (split, kv head
 * kh, query tile) reads the query rows of heads kh * group .. + group - 1,
 * the K and V rows of head kh at every position up to its last row, and
 * nothing else of what the product writes; the positions before this step
 * were written by earlier launches, those of this step by the product's
 * items whose row pairs lie in head kh of K or V, and the queries by those
 * in those heads of Q. So the product's items are chunked by K/V head: a
 * row group (MV_WARPS / ks row pairs, every activation tile, mv_place)
 * whose pairs lie in Q head h counts in chunk h / group, in K or V head h
 * in chunk h; a group of padding pairs past the last matrix joins the
 * chunk before, and a launch whose groups straddle two heads (hd / 2 not
 * a multiple of the pairs a group) gets stage waits. On tensor cores
 * (mv_mma.cuh, a variant of mq_step_variant) a warp owns MQ_UNITS pairs,
 * 8q .. 8q + 7, so a row group is MQ_UNITS * MV_WARPS / ks consecutive
 * pairs and the same map holds with that count (mq_step_units): a 16-row
 * warp writes nothing outside its 8 pairs, each pair's rows within one
 * head as on the __dp4a tiles. A map drawn with the __dp4a count for an
 * mma stage names the wrong items: with 32 pairs a group it puts every
 * group in the first heads' chunks, and attention over the last K/V heads
 * then waits for no item at all (the emulator's schedule check reports
 * the step's result as depending on the block order). At hd = 64 and ks =
 * 1 a group is one head; where groups straddle heads (hd / 2 not a
 * multiple of the 32 / ks pairs a group), attention takes a stage wait.
 * The chunk wait is taken only when every memory the two share is one the
 * product writes and attention reads: a write-after-read of the int8
 * scratch would need all of the product's items, which is why attention quantises its output
 * into slot QOUT, not into the product's QACT (attention.cu). Since every
 * chunk is waited for by some attention item, the product is complete
 * once attention is, and the stages after attention keep their waits.
 * What stays a stage wait, as the data demands for one row and, at the
 * kernels' tilings, for the verification's rows too: the output
 * projection after attention (each row of it reads every head of its
 * activation row, and attention's query tiles are of query vectors, not of
 * the projection's 8-row activation tiles), SwiGLU's down projection
 * after the gate/up product (each reads all of its row's hidden units,
 * whose int8 groups of 32 are quantised by the last block of each group of
 * that product), the Q/K/V and gate/up products with their folded norms
 * after a residual product (a whole row's sum of squares; unfolded, the
 * norm waits so and the product for its norm, as every row of the weights
 * reads the whole activation row) and the head. Each layer of a decode or
 * a verification step so holds 4 stage waits and 1 chunk wait with its
 * norms folded, 6 and 1 with them launched (SD_CUDA_FUSE_NORM=0, or on
 * tensor cores; test_emu_forward's persist_waits and persist_mma_waits
 * count them).
 *
 * Prefetch and staging. A block that takes an item of a stage with waits
 * first fetches the item's weight rows (wspan.cuh: its row runs), then
 * waits, so the weights stream while the producers finish. step_kernel
 * asks L2 for them (a 128-byte line a thread, prefetch.global.L2 on
 * sm_90), and the item's own evict-first loads find them there. With
 * staging on (c->stage, SD_CUDA_STAGE=1) a work list without tensor-core
 * stages runs on step_stage_kernel (step_stage.cu), whose blocks copy them
 * into a buffer of their dynamic shared memory (stage.cuh: cp.async,
 * SG_BYTES after the launches' own dynamic shared memory, sized in
 * st_run) when each matrix's rows are one run and all fit, and compute
 * from there; a work list with tensor-core stages (SD_CUDA_MMA=1 at rows
 * the mma takes) runs on step_kernel, unstaged. Items without waits start
 * loading at once and fetch nothing ahead; nor do the kinds that read no
 * weights.
 *
 * Running. The grid is as many blocks of ST_THREADS threads as are resident
 * at once (occupancy x multiprocessors, a cooperative launch, so all of
 * them are). Each block takes the next item from one counter in device
 * memory, holds its stage's waits (stage flags, chunk flags), runs the
 * item, and counts it in its stage's flag and, for a chunked stage, its
 * chunk's (kernels/cuda/persist.cuh). Items are taken
 * in order and wait only for earlier items, which blocks that run already
 * hold: the earliest unfinished item can always go on, so the launch ends.
 *
 * Epochs. Nothing is reset between launches: the flags and the item
 * counter only grow. The host keeps what each has reached (shadow): a
 * launch's stage s is complete when its flag reaches shadow_s + blocks_s,
 * chunk flag k (taken in order by the chunked stages of the launch) when it
 * reaches its shadow plus the items it counts (the targets, copied before
 * each launch, so a kept work list runs again unchanged); and the launch's
 * first item is the counter's value before it (each launch adds its items
 * plus one failed take a block). Before the counter could pass 2^31 all
 * are zeroed once (cudaMemsetAsync, ordered after the launches that used
 * them).
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
#include <time.h>

#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/stage.cuh"
#include "kernels/cuda/step.cuh"
#include "kernels/cuda/wspan.cuh"

/* ---- device ------------------------------------------------------------------
 * step_kernel: the items of any work list, products on the __dp4a and
 * float tiles (st_mv, step.cuh) or on tensor cores (st_mq), weights read
 * with evict-first loads after an L2 prefetch. The kernel takes the
 * registers of its hungriest callee: uncapped, the tensor-core items made
 * it 168 a thread, 3 blocks a multiprocessor where the __dp4a items fit 4.
 * ST_MIN_BLOCKS holds the step at 4 (128 registers); the tensor-core
 * items of 8- and 16-row tiles spill instead (ptxas: up to 2.4 KB of
 * spill stores in a 16-row item), and a few __dp4a 8-row items a little
 * (Q4_K, Q5_0, Q6_K: under 400 bytes). Which costs less, 3 blocks or the
 * spills, only a GPU run tells (gpu-check's decode_persist_* and
 * verify_persist* rows). */

/* A matrix-vector item on tensor cores (mv_mma.cuh, a variant of
 * mq_step_variant). A step built with tensor-core stages folds no norm
 * (mv_act): the fold's tile code in each of these items made ptxas run for
 * over 8 CPU minutes more on this file, so they take neither first nor
 * writer. */
template <int T, int NT>
__device__ __noinline__ void st_mq(int kind, const unsigned char *args, unsigned b) {
    switch (kind) {
    case CU_STEP_MM: mq_mm_vblock<T, NT>(*reinterpret_cast<const MmArgs *>(args), b, false, false); break;
    case CU_STEP_FFN: mq_ffn_vblock<T, NT>(*reinterpret_cast<const FfnArgs *>(args), b, false, false); break;
    case CU_STEP_QKV:
        mq_qkv_vblock<T, NT, QkvArgs>(*reinterpret_cast<const QkvArgs *>(args), b, false, false);
        break;
    default:
        mq_qkv_vblock<T, NT, QkvScatterArgs>(*reinterpret_cast<const QkvScatterArgs *>(args), b,
                                             false, false);
        break;
    }
}

template <int T>
__device__ __forceinline__ void st_mq_t(int kind, int tile, const unsigned char *args, unsigned b) {
    switch (tile) {
    case 0: st_mq<T, 2>(kind, args, b); break;
    case 1: st_mq<T, 8>(kind, args, b); break;
    default: st_mq<T, 16>(kind, args, b); break;
    }
}

__device__ __forceinline__ void st_mq_item(int kind, int variant, const unsigned char *args, unsigned b) {
    const int tile = mq_step_tile(variant);
    switch (mq_step_type(variant)) {
    case SD_F16: st_mq_t<SD_F16>(kind, tile, args, b); break;
    case SD_BF16: st_mq_t<SD_BF16>(kind, tile, args, b); break;
    case SD_Q8_0: st_mq_t<SD_Q8_0>(kind, tile, args, b); break;
    case SD_Q4_0: st_mq_t<SD_Q4_0>(kind, tile, args, b); break;
    case SD_Q4_1: st_mq_t<SD_Q4_1>(kind, tile, args, b); break;
    case SD_Q5_0: st_mq_t<SD_Q5_0>(kind, tile, args, b); break;
    case SD_Q4_K: st_mq_t<SD_Q4_K>(kind, tile, args, b); break;
    default: st_mq_t<SD_Q6_K>(kind, tile, args, b); break;
    }
}

__device__ __noinline__ void st_item(int kind, int variant, const unsigned char *args, unsigned b) {
    if (!st_is_mv(kind)) st_other(kind, variant, args, b);
    else if (variant & MQ_STEP) st_mq_item(kind, variant, args, b);
    else st_mv_item<0>(kind, variant, args, b);
}

/* The weight rows of virtual block b of a stage towards L2 (st_l2). */
__device__ __noinline__ void st_prefetch(int kind, int variant, const unsigned char *args, unsigned b) {
    WsRun r[WS_RUNS];
    const int n = ws_runs(kind, variant, args, b, r);
    if (n <= WS_RUNS) st_l2(r, n);
}

struct StPolicy {
    static __device__ __forceinline__ const unsigned char *fetch(int kind, int variant,
                                                                const unsigned char *args,
                                                                unsigned b, uint8_t *) {
        st_prefetch(kind, variant, args, b);
        return args;
    }
    static __device__ __forceinline__ void arrive(void) {}
    static __device__ __forceinline__ void item(int kind, int variant, const unsigned char *args,
                                                unsigned b) {
        st_item(kind, variant, args, b);
    }
};

__global__ void __launch_bounds__(ST_THREADS, ST_MIN_BLOCKS) step_kernel(const StArgs a) {
    __shared__ unsigned item;
    st_items<StPolicy>(a, &item, nullptr);
}

/* ---- host ----------------------------------------------------------------------
 * Kept work lists. A built step's stage table, chunk counts and arguments
 * stay on the device in one of ST_KEEP slots (backend_cuda.cu keeps, per
 * slot, the records they were built from, and asks for a replay when a
 * step's records are the same; the last slot is for steps it does not
 * keep): a replay copies only the targets of the flags, which move with
 * every launch (see "Epochs"). */
enum { ST_KEEP = CU_GRAPHS + 1 };

struct StKept {
    int valid;   /* a list is kept (of no items: nothing to launch) */
    StStage *st; /* [nst], host */
    int nst;
    unsigned nchunk, cnt[ST_CHUNKS]; /* chunk flags and the items each counts */
    unsigned items;
    size_t smem;
    long waits, chunk_waits;
    long staged; /* items whose weight rows fit the staging buffer (st_staged) */
    int mma;     /* it has tensor-core stages: step_kernel runs it, unstaged */
    void *dev; /* stage table, then the arguments at args */
    size_t args, dev_cap;
};

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
    struct timespec t0; /* when building began */
    int waits;       /* SD_CUDA_WAITS_* */
    int *cmap;       /* [ST_MAX][2]: a chunked stage's query heads a K/V head, K/V heads */
    unsigned nchunk; /* chunk flags taken */
    unsigned ccnt[ST_CHUNKS]; /* items each chunk counts */
    uint64_t *full; /* [ST_MAX][ST_MAX / 64]: the stages done before any item of each runs */
    uint64_t *done; /* [ST_MAX][ST_MAX / 64]: the stages done once all its items are */
    StKept kept[ST_KEEP];
    /* device */
    unsigned *flag; /* [ST_FLAGS], zeroed at creation */
    unsigned shadow[ST_FLAGS];
    unsigned tgt[ST_MAX + ST_CHUNKS]; /* a launch's targets (StArgs tgt), staged */
    unsigned *tgt_dev;
};

void cu_step_free(sd_cuda *c) {
    cu_persist *p = c->pst;
    if (!p) return;
    if (p->flag && cudaFree(p->flag) != cudaSuccess) cudaGetLastError();
    if (p->tgt_dev && cudaFree(p->tgt_dev) != cudaSuccess) cudaGetLastError();
    for (int k = 0; k < ST_KEEP; k++) {
        if (p->kept[k].dev && cudaFree(p->kept[k].dev) != cudaSuccess) cudaGetLastError();
        free(p->kept[k].st);
    }
    free(p->st);
    free(p->sp);
    free(p->sp0);
    free(p->args);
    free(p->cmap);
    free(p->full);
    free(p->done);
    free(p);
    c->pst = NULL;
}

/* The state, made at the first step (nothing is kept on a failure). */
static int st_setup(sd_cuda *c, sd_err *e) {
    if (c->pst) return 0;
    cu_persist *p = (cu_persist *)calloc(1, sizeof *p);
    if (!p) return sd_fail(e, "cuda: persistent step: out of memory");
    c->pst = p;
    const size_t words = (size_t)ST_MAX * (ST_MAX / 64);
    p->st = (StStage *)malloc(ST_MAX * sizeof *p->st);
    p->sp0 = (int *)malloc((ST_MAX + 1) * sizeof *p->sp0);
    p->cmap = (int *)malloc(2 * ST_MAX * sizeof *p->cmap);
    p->full = (uint64_t *)malloc(words * sizeof *p->full);
    p->done = (uint64_t *)malloc(words * sizeof *p->done);
    if (!p->st || !p->sp0 || !p->cmap || !p->full || !p->done) {
        cu_step_free(c);
        return sd_fail(e, "cuda: persistent step: out of memory");
    }
    cudaError_t err = cudaMalloc(&p->flag, ST_FLAGS * sizeof *p->flag);
    if (err != cudaSuccess) p->flag = NULL;
    else err = cudaMemsetAsync(p->flag, 0, ST_FLAGS * sizeof *p->flag, c->stream);
    if (err == cudaSuccess && (err = cudaMalloc(&p->tgt_dev, sizeof p->tgt)) != cudaSuccess)
        p->tgt_dev = NULL;
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
    p->nchunk = 0;
    p->waits = c->persist_waits;
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    c->step = p;
    return 0;
}

/* Room for bytes more argument bytes at a 16-byte boundary; its offset, or
 * -1 with e filled. */
static long st_args_reserve(cu_persist *p, size_t bytes, sd_err *e) {
    const size_t off = (p->nargs + ST_ALIGN - 1) & ~(size_t)(ST_ALIGN - 1);
    if (off + bytes > 0xffffffffu)
        return sd_fail(e, "cuda: persistent step: more than 4 GiB of arguments");
    if (off + bytes > p->args_cap) {
        const size_t cap = 2 * (off + bytes) + 4096;
        unsigned char *a = (unsigned char *)realloc(p->args, cap);
        if (!a) return sd_fail(e, "cuda: persistent step: out of memory for %zu argument bytes", cap);
        p->args = a;
        p->args_cap = cap;
    }
    memset(p->args + p->nargs, 0, off - p->nargs);
    p->nargs = off + bytes;
    return (long)off;
}

int cu_step_add(sd_cuda *c, int kind, int variant, const void *args, size_t bytes,
                unsigned blocks, size_t smem, const cu_spans *sp, sd_err *e) {
    cu_persist *p = c->step;
    if (sp->n < 0) return sd_fail(e, "cuda: persistent step: a launch touches more than %d spans", CU_STEP_SPANS);
    if (p->nst == ST_MAX) return sd_fail(e, "cuda: persistent step: more than %d launches", ST_MAX);
    if (blocks == 0) return 0;
    if (blocks > 0x7fffffffu - p->items)
        return sd_fail(e, "cuda: persistent step: more than 2^31 work items");
    if (p->nsp + sp->n > p->sp_cap) {
        const int cap = 2 * (p->nsp + sp->n) + 256;
        cu_span *s = (cu_span *)realloc(p->sp, (size_t)cap * sizeof *s);
        if (!s) return sd_fail(e, "cuda: persistent step: out of memory for %d spans", cap);
        p->sp = s;
        p->sp_cap = cap;
    }
    const long off = st_args_reserve(p, bytes, e);
    if (off < 0) return -1;
    memcpy(p->args + off, args, bytes);
    memcpy(p->sp + p->nsp, sp->s, (size_t)sp->n * sizeof *sp->s);
    p->nsp += sp->n;
    StStage *s = &p->st[p->nst];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->variant = variant;
    s->first = p->items;
    s->blocks = blocks;
    s->args = (unsigned)off;
    s->chunk0 = -1;
    s->kdiv = s->kmod = s->cdiv = 1;
    p->nst++;
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

/* The K/V head whose attention reads the rows that pair `pair` of Q/K/V
 * launch q writes, with `group` query heads a K/V head; -1 for a pair past
 * its matrix (computed, not stored). A pair's two rows lie in one head
 * (qkv_vblock: rows 2l and 2l+1, or NEOX's l and l + rope_dim / 2 within
 * the head), head l / (hd / 2) of its matrix. *kv: the pair is of K or V. */
static int st_qkv_head(const QkvArgs *q, int pair, int group, int *kv) {
    int m = 0;
    while (m + 1 < q->nm && pair >= q->m[m + 1].pair0) m++;
    const QkvMat *M = &q->m[m];
    const int local = pair - M->pair0;
    if (2 * local >= M->w.rows) return -1;
    const int head = local / (q->head_dim / 2);
    *kv = M->which != 0;
    return *kv ? head : head / group;
}

/* Chunks Q/K/V stage i by K/V head for attention with n_kv heads of hd dims
 * and `group` query heads each (see the top; a group's pairs as the
 * stage's layout places them): 1, 0 when its row groups do
 * not fall in single heads or the chunk flags are used up, -1 with e
 * filled when out of memory. SD_CUDA_WAITS_PLANTED leaves the K/V rows out
 * of their head's chunk (they count in chunk n_kv, which nothing waits
 * for): attention then reads K/V rows that may not be written yet. */
static int st_chunk_qkv(cu_persist *p, int i, int group, int n_kv, int hd, sd_err *e) {
    if (p->st[i].chunk0 >= 0) return p->cmap[2 * i] == group && p->cmap[2 * i + 1] == n_kv;
    QkvArgs q;
    memcpy(&q, p->args + p->st[i].args, sizeof q); /* a scatter launch's starts with it */
    const int planted = p->waits == SD_CUDA_WAITS_PLANTED, chunks = n_kv + planted;
    if (q.head_dim != hd || hd % 2 || p->nchunk + (unsigned)chunks > ST_CHUNKS) return 0;
    const int per = MV_WARPS / q.ks * mq_step_units(p->st[i].variant);
    const unsigned groups = q.blocks / (unsigned)q.ntiles;
    const size_t mark = p->nargs;
    const long off = st_args_reserve(p, groups * sizeof(unsigned short), e);
    if (off < 0) return -1;
    unsigned short *ct = (unsigned short *)(p->args + off);
    unsigned *cnt = p->ccnt + p->nchunk;
    memset(cnt, 0, (size_t)chunks * sizeof *cnt);
    int last = 0, kv = 0;
    for (unsigned g = 0; g < groups; g++) {
        int h = -1;
        for (int k = 0; k < per; k++) {
            const int kh = st_qkv_head(&q, (int)g * per + k, group, &kv);
            if (kh < 0) continue;
            if (kh >= n_kv || (h >= 0 && kh != h)) {
                p->nargs = mark;
                return 0;
            }
            h = kh;
        }
        last = h < 0 ? last : h; /* a group of padding pairs joins the one before */
        ct[g] = (unsigned short)(planted && kv ? n_kv : last);
        cnt[ct[g]] += (unsigned)q.ntiles;
    }
    StStage *P = &p->st[i];
    P->chunk0 = (int)p->nchunk;
    P->cdiv = (unsigned)q.ntiles;
    P->ctab = (unsigned)off;
    p->cmap[2 * i] = group;
    p->cmap[2 * i + 1] = n_kv;
    p->nchunk += (unsigned)chunks;
    return 1;
}

/* Whether stage j waits for chunks of stage i rather than all of it (see
 * the top): 1 (the chunk maps set), 0, or -1 with e filled. */
static int st_fine(cu_persist *p, int i, int j, sd_err *e) {
    StStage *C = &p->st[j];
    const int pk = p->st[i].kind;
    if (p->waits == SD_CUDA_WAITS_STAGE || C->kind != CU_STEP_ATTN ||
        (pk != CU_STEP_QKV && pk != CU_STEP_QKV_BEAMS))
        return 0;
    for (int a = p->sp0[j]; a < p->sp0[j + 1]; a++)
        for (int b = p->sp0[i]; b < p->sp0[i + 1]; b++)
            if (st_overlap(&p->sp[a], &p->sp[b]) && (p->sp[a].write || !p->sp[b].write)) return 0;
    AttnArgs at;
    memcpy(&at, p->args + C->args, sizeof at);
    const int n_kv = at.kv_dim / at.hd;
    const int r = st_chunk_qkv(p, i, at.group, n_kv, at.hd, e);
    if (r <= 0) return r;
    C = &p->st[j];
    C->kdiv = (unsigned)at.n_splits;
    C->kmod = (unsigned)n_kv;
    return 1;
}

static void st_or(uint64_t *d, const uint64_t *s, int words) {
    for (int w = 0; w < words; w++) d[w] |= s[w];
}

/* Each stage's waits (see the top); -1 with e filled when one needs more
 * than ST_DEPS or memory runs out. */
static int st_deps(cu_persist *p, sd_err *e) {
    const int words = (p->nst + 63) / 64;
    for (int j = 0; j < p->nst; j++) {
        uint64_t *fj = p->full + (size_t)j * words, *dj = p->done + (size_t)j * words;
        memset(fj, 0, (size_t)words * sizeof *fj);
        for (int i = j - 1; i >= 0; i--) {
            if (fj[i / 64] >> (i % 64) & 1) continue;
            if (!st_conflict(p, i, j)) continue;
            if (p->st[j].ndep == ST_DEPS)
                return sd_fail(e, "cuda: persistent step: launch %d waits for more than %d others",
                               j, ST_DEPS);
            const int fine = st_fine(p, i, j, e);
            if (fine < 0) return -1;
            StStage *s = &p->st[j];
            if (fine) s->fine |= 1u << s->ndep;
            s->dep[s->ndep++] = i;
            st_or(fj, (fine ? p->full : p->done) + (size_t)i * words, words);
        }
        const StStage *s = &p->st[j];
        memcpy(dj, fj, (size_t)words * sizeof *dj);
        dj[j / 64] |= (uint64_t)1 << (j % 64);
        /* every chunk of a chunk wait is some item's, so once all items
         * of j are done so are all of i's */
        for (int d = 0; d < s->ndep; d++)
            if (s->fine >> d & 1 && s->blocks >= s->kdiv * s->kmod)
                st_or(dj, p->done + (size_t)s->dep[d] * words, words);
    }
    return 0;
}

/* The resident blocks of a step kernel (step_kernel, or step_stage_kernel
 * when staged) with smem bytes of dynamic shared memory. */
static int st_grid(const sd_cuda *c, int staged, size_t smem, unsigned *grid, sd_err *e) {
    cudaError_t err = cudaSuccess;
    int fit = 0;
    if (staged) {
        if (smem > 48 * 1024)
            err = cudaFuncSetAttribute(step_stage_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem);
        if (err == cudaSuccess)
            err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, step_stage_kernel, ST_THREADS, smem);
    } else {
        if (smem > 48 * 1024)
            err = cudaFuncSetAttribute(step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err == cudaSuccess)
            err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, step_kernel, ST_THREADS, smem);
    }
    if (err != cudaSuccess) return cu_fail(e, err, "persistent step: occupancy at %zu bytes of shared memory", smem);
    if (fit < 1) return sd_fail(e, "cuda: persistent step: no block fits %zu bytes of shared memory", smem);
    *grid = (unsigned)fit * (unsigned)c->sms;
    return 0;
}

static size_t st_align(size_t n) { return (n + ST_ALIGN - 1) & ~(size_t)(ST_ALIGN - 1); }

/* The items a block stages in shared memory when staging is on: those of
 * stages with waits whose rows fit (st_fetch decides so on the device). */
static long st_staged(const cu_persist *p) {
    long n = 0;
    for (int s = 0; s < p->nst; s++) {
        const StStage *S = &p->st[s];
        if (!S->ndep || !sg_args_bytes(S->kind)) continue;
        for (unsigned b = 0; b < S->blocks; b++) {
            WsRun r[WS_RUNS];
            SgPlan g;
            const int k = ws_runs(S->kind, S->variant, p->args + S->args, b, r);
            n += k <= WS_RUNS && sg_plan(S->kind, p->args + S->args, r, k, SG_BYTES, &g);
        }
    }
    return n;
}

/* The step just built into kept slot K: its table and chunk counts on the
 * host, table and arguments on the device (queued on the stream after the
 * launches before; from pageable memory, so the host buffers are free
 * again when the copies return). */
static int st_keep(sd_cuda *c, cu_persist *p, StKept *K, sd_err *e) {
    cudaError_t err;
    const size_t args = st_align((size_t)p->nst * sizeof *p->st), bytes = args + p->nargs;
    if (bytes > K->dev_cap) {
        if ((err = cudaStreamSynchronize(c->stream)) != cudaSuccess)
            return cu_fail(e, err, "persistent step: wait for queued work");
        if (K->dev && cudaFree(K->dev) != cudaSuccess) cudaGetLastError();
        K->dev = NULL;
        K->dev_cap = 0;
        const size_t cap = bytes + bytes / 2;
        if ((err = cudaMalloc(&K->dev, cap)) != cudaSuccess) {
            K->dev = NULL;
            return cu_fail(e, err, "persistent step: %zu bytes of work list", cap);
        }
        K->dev_cap = cap;
    }
    StStage *st = (StStage *)realloc(K->st, (size_t)p->nst * sizeof *st);
    if (!st) return sd_fail(e, "cuda: persistent step: out of memory for %d stages", p->nst);
    K->st = st;
    memcpy(K->st, p->st, (size_t)p->nst * sizeof *p->st);
    K->nst = p->nst;
    K->nchunk = p->nchunk;
    memcpy(K->cnt, p->ccnt, p->nchunk * sizeof *p->ccnt);
    K->items = p->items;
    K->smem = p->smem;
    K->args = args;
    K->waits = K->chunk_waits = 0;
    for (int s = 0; s < p->nst; s++)
        for (int d = 0; d < p->st[s].ndep; d++) {
            if (p->st[s].fine >> d & 1) K->chunk_waits++;
            else K->waits++;
        }
    K->staged = st_staged(p);
    K->mma = 0;
    for (int s = 0; s < p->nst; s++)
        K->mma |= (p->st[s].kind == CU_STEP_MM || p->st[s].kind == CU_STEP_FFN ||
                   p->st[s].kind == CU_STEP_QKV || p->st[s].kind == CU_STEP_QKV_BEAMS) &&
                  (p->st[s].variant & MQ_STEP);
    unsigned char *dev = (unsigned char *)K->dev;
    err = cudaMemcpyAsync(dev, p->st, (size_t)p->nst * sizeof *p->st, cudaMemcpyHostToDevice,
                          c->stream);
    if (err == cudaSuccess && p->nargs)
        err = cudaMemcpyAsync(dev + args, p->args, p->nargs, cudaMemcpyHostToDevice, c->stream);
    return err == cudaSuccess ? 0 : cu_fail(e, err, "persistent step: copy the work list");
}

/* Launches kept work list K: the flags' targets from what they have
 * reached, copied, then the cooperative launch. t0: when the host began
 * on this step. */
static int st_run(sd_cuda *c, cu_persist *p, const StKept *K, const struct timespec *t0, sd_err *e) {
    /* the staging buffer after the launches' own dynamic shared memory */
    const int staged = c->stage && !K->mma;
    const size_t stage_at = st_align(K->smem), smem = staged ? stage_at + SG_BYTES : K->smem;
    unsigned grid;
    if (st_grid(c, staged, smem, &grid, e)) return -1;
    if (grid > K->items) grid = K->items;
    cudaError_t err;
    if (p->shadow[ST_MAX] > 0x7fffffffu) {
        if ((err = cudaMemsetAsync(p->flag, 0, ST_FLAGS * sizeof *p->flag, c->stream)) != cudaSuccess)
            return cu_fail(e, err, "persistent step: reset the flags");
        memset(p->shadow, 0, sizeof p->shadow);
    }
    for (int s = 0; s < K->nst; s++) p->tgt[s] = p->shadow[s] + K->st[s].blocks;
    for (unsigned k = 0; k < K->nchunk; k++) p->tgt[K->nst + k] = p->shadow[ST_CHUNK0 + k] + K->cnt[k];
    const size_t nt = (size_t)K->nst + K->nchunk;
    if ((err = cudaMemcpyAsync(p->tgt_dev, p->tgt, nt * sizeof *p->tgt, cudaMemcpyHostToDevice,
                               c->stream)) != cudaSuccess)
        return cu_fail(e, err, "persistent step: copy the targets");
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double build_us =
        1e6 * (double)(t1.tv_sec - t0->tv_sec) + 1e-3 * (double)(t1.tv_nsec - t0->tv_nsec);
    const unsigned char *dev = (const unsigned char *)K->dev;
    StArgs a;
    a.st = (const StStage *)dev;
    a.args = dev + K->args;
    a.tgt = p->tgt_dev;
    a.nst = K->nst;
    a.flag = p->flag;
    a.base = p->shadow[ST_MAX];
    a.items = K->items;
    a.stage_at = (unsigned)stage_at;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeCooperative;
    at.val.cooperative = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(ST_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    if (staged) cudaLaunchKernelEx(&cfg, step_stage_kernel, a);
    else cudaLaunchKernelEx(&cfg, step_kernel, a);
    if (cu_check_launch(c, e, "persistent step (%d launches, %u items, %u blocks)", K->nst, K->items, grid))
        return -1;
    memcpy(p->shadow, p->tgt, (size_t)K->nst * sizeof *p->tgt);
    memcpy(p->shadow + ST_CHUNK0, p->tgt + K->nst, K->nchunk * sizeof *p->tgt);
    p->shadow[ST_MAX] += K->items + grid;
    c->gstats.persist_stages = K->nst;
    c->gstats.persist_waits = K->waits;
    c->gstats.persist_chunk_waits = K->chunk_waits;
    c->gstats.persist_staged = staged ? K->staged : 0;
    c->gstats.persist_build_us = build_us;
    return 0;
}

int cu_step_replay(sd_cuda *c, int slot, sd_err *e) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cu_persist *p = c->pst;
    if (!p || slot < 0 || slot >= CU_GRAPHS || !p->kept[slot].valid)
        return sd_fail(e, "cuda: persistent step: no work list kept in slot %d", slot);
    return p->kept[slot].items ? st_run(c, p, &p->kept[slot], &t0, e) : 0;
}

int cu_step_end(sd_cuda *c, int ok, int slot, sd_err *e) {
    cu_persist *p = c->step;
    if (!p) return ok ? sd_fail(e, "cuda: persistent step: not building") : -1;
    c->step = NULL;
    if (!ok) return -1;
    StKept *K = &p->kept[slot >= 0 && slot < CU_GRAPHS ? slot : ST_KEEP - 1];
    K->valid = 0;
    if (p->items == 0) {
        K->items = 0;
        K->valid = 1;
        return 0;
    }
    if (st_deps(p, e) || st_keep(c, p, K, e)) return -1;
    K->valid = 1;
    if (st_run(c, p, K, &p->t0, e)) {
        K->valid = 0;
        return -1;
    }
    return 0;
}
