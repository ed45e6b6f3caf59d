/* Host-side launch planning of the CUDA kernels, plain C so that
 * tests/test_cuda_plan.c checks it in every build, with or without a GPU
 * or nvcc: the matrix-vector row tiling (mv.cuh) and the attention key
 * split (attention.cu). The kernels' own constants live here. */
#ifndef SD_CUDA_PLAN_H
#define SD_CUDA_PLAN_H

#include <stdint.h>

/* mv.cuh: warps per block, 16-byte chunks per lane per step, the largest
 * activation tile. attention.cu: keys per shared-memory tile, query vectors
 * per block, the fewest keys a split gets. */
enum { SD_MV_WARPS = 4, SD_MV_UNROLL = 2, SD_MV_MAX_NT = 8 };
enum { SD_AT_KEYS = 32, SD_AT_QV = 16, SD_AT_MIN_SPLIT = 64 };

typedef struct sd_mv_plan {
    int nt;          /* activation rows per tile: 1, 2, 4 or 8 */
    int ntiles;      /* tiles over the n rows */
    int ks;          /* warps that split one row pair's chunks: 1, 2 or 4 */
    int64_t blocks;  /* grid size */
} sd_mv_plan;

/* Calls of at most this many rows (a verification, NASD's rows) are
 * planned so that each row's result has the bits of a one-row call: a
 * speculative round must judge its drafts with the logits the target's own
 * decode steps would give, or greedy outputs could part at near-ties. */
enum { SD_SAME_BITS_ROWS = 16 };

/* Activation rows per tile for an n-row call: 1, 2, 4 or 8 (the plan's nt;
 * mv.cuh's norm folding sizes its shared-memory tile by the same rule). */
static inline int sd_mv_tile_rows(int n) { return n >= 5 ? 8 : n >= 3 ? 4 : n; }

/* Tile height and K split for n activation rows against `units` row pairs
 * (or rows) of nch chunks each on a GPU of sms multiprocessors: split while
 * the grid has fewer than 16 warps per multiprocessor and every slice keeps
 * at least one full step. A row's sum is its lanes' chunks in a fixed
 * order, then the ks slices, whatever the tile height; so up to
 * SD_SAME_BITS_ROWS rows the split counts one tile, as a one-row call does.
 * Returns 0, or -1 when the grid would exceed 2^31-1 blocks. */
static inline int sd_mv_plan_make(int n, int64_t units, int64_t nch, int sms, sd_mv_plan *p) {
    p->nt = sd_mv_tile_rows(n);
    p->ntiles = (n + p->nt - 1) / p->nt;
    const int64_t tiles = n <= SD_SAME_BITS_ROWS ? 1 : p->ntiles;
    p->ks = 1;
    while (p->ks < SD_MV_WARPS && units * tiles * p->ks < 16 * (int64_t)sms &&
           nch >= 2 * p->ks * 32 * SD_MV_UNROLL)
        p->ks *= 2;
    const int64_t per_block = SD_MV_WARPS / p->ks;
    p->blocks = (int64_t)p->ntiles * ((units + per_block - 1) / per_block);
    return p->blocks > 0x7fffffff ? -1 : 0;
}

/* mv_mma.cuh (SD_CUDA_MMA): 4-chunk steps a lane loads ahead, the largest
 * activation tile. */
enum { SD_MQ_UNROLL = 2, SD_MQ_MAX_NT = 16 };

/* Activation rows per tensor-core tile for an n-row call: 2, 4, 8 or 16
 * (the B operand takes rows in pairs). */
static inline int sd_mq_tile_rows(int n) { return n <= 2 ? 2 : n <= 4 ? 4 : n <= 8 ? 8 : 16; }

/* The tensor-core plan: tile height and K split for n activation rows
 * against `groups` groups of 16 rows of nch chunks (of 32 elements), in
 * p->nt, ntiles, ks and blocks as sd_mv_plan_make's. A warp owns a row
 * group, eight times a dp4a warp's rows, so the split goes as far as every
 * slice keeps one full step (4 * SD_MQ_UNROLL chunks a lane group); up to
 * SD_SAME_BITS_ROWS rows it counts one tile, so a row's sum is split as a
 * one-row call's. Returns 0, or -1 when the grid would exceed 2^31-1
 * blocks. */
static inline int sd_mq_plan_make(int n, int64_t groups, int64_t nch, int sms, sd_mv_plan *p) {
    p->nt = sd_mq_tile_rows(n);
    p->ntiles = (n + p->nt - 1) / p->nt;
    const int64_t tiles = n <= SD_SAME_BITS_ROWS ? 1 : p->ntiles;
    p->ks = 1;
    while (p->ks < SD_MV_WARPS && groups * tiles * p->ks < 16 * (int64_t)sms &&
           nch >= 2 * p->ks * 4 * SD_MQ_UNROLL)
        p->ks *= 2;
    const int64_t per_block = SD_MV_WARPS / p->ks;
    p->blocks = (int64_t)p->ntiles * ((groups + per_block - 1) / per_block);
    return p->blocks > 0x7fffffff ? -1 : 0;
}

typedef struct sd_attn_plan {
    int64_t qtiles; /* blocks along z: tiles of SD_AT_QV query vectors */
    int kps;        /* keys per split (a multiple of SD_AT_KEYS unless one split) */
    int n_splits;   /* blocks along x */
} sd_attn_plan;

/* The key split for n query rows at positions pos.. over n_kv kv heads of
 * `group` query heads each: about two blocks per multiprocessor, splits of
 * at least SD_AT_MIN_SPLIT keys, one split when the grid is full without.
 * Returns 0, or -1 when the grid's y or z would pass 65535. */
static inline int sd_attn_plan_make(int n, int pos, int n_kv, int group, int sms, sd_attn_plan *p) {
    const int64_t len = (int64_t)pos + n;
    p->qtiles = ((int64_t)n * group + SD_AT_QV - 1) / SD_AT_QV;
    if (p->qtiles > 65535 || n_kv > 65535) return -1;
    const int64_t base = (int64_t)n_kv * p->qtiles, want = 2 * (int64_t)sms;
    int64_t kps = len;
    if (base < want && len >= 2 * SD_AT_MIN_SPLIT) {
        const int64_t splits = (want + base - 1) / base;
        kps = ((len + splits - 1) / splits + SD_AT_KEYS - 1) / SD_AT_KEYS * SD_AT_KEYS;
        if (kps < SD_AT_MIN_SPLIT) kps = SD_AT_MIN_SPLIT;
    }
    p->kps = (int)kps;
    p->n_splits = (int)((len + kps - 1) / kps);
    return 0;
}

/* The plan attention.cu launches: the one for the length bucket of pos + n,
 * the next power of two of at least SD_AT_BUCKET_MIN. A decode step that
 * runs as a CUDA graph is replayed at later positions with the launch
 * shapes it was captured with (backend_cuda.cu, "graphs"), so the split
 * must stay valid while the length grows: it covers the whole bucket, the
 * splits past the real length find no key and return at once (the kernel
 * counts the live splits from the position it reads), and a graph is
 * captured anew only when the length
 * crosses into the next bucket (log2 of the context times in a decode).
 * Planning for the exact length instead would change the split every
 * SD_AT_MIN_SPLIT keys and force a capture each time. Plain launches use
 * the same plan, so a step gives the same bits either way. The cost: up
 * to half the blocks of a step exit at once, and a short context has the
 * parallelism of its length, not of the bucket.
 *
 * A call of 2..SD_SAME_BITS_ROWS rows takes the split a one-row call plans
 * for the same bucket (its query tiles stay its own): a row's output is
 * then the merge of the same key ranges as in a decode step at its
 * position. Planned with their own tiles, the 5 rows of a gamma-4
 * verification split the keys differently from the decode steps at almost
 * every position from 4092 on (Qwen2.5 1.5B shape; from 1020 on at 8 kv
 * heads of 4). What remains are the rows of a call that straddles a bucket
 * boundary: those before it plan in the smaller bucket when decoded alone
 * (12 positions of the first 32768 for the Qwen shapes at 5 rows). */
enum { SD_AT_BUCKET_MIN = 256 };
static inline int sd_attn_plan_bucket(int n, int pos, int n_kv, int group, int sms,
                                      sd_attn_plan *p) {
    int64_t bucket = SD_AT_BUCKET_MIN;
    while (bucket < (int64_t)pos + n) bucket *= 2;
    if (bucket - n > 0x7fffffff) return -1;
    if (sd_attn_plan_make(n, (int)(bucket - n), n_kv, group, sms, p)) return -1;
    if (n > 1 && n <= SD_SAME_BITS_ROWS) {
        sd_attn_plan one;
        if (sd_attn_plan_make(1, (int)(bucket - 1), n_kv, group, sms, &one)) return -1;
        p->kps = one.kps;
        p->n_splits = one.n_splits;
    }
    return 0;
}

#endif
