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

/* Tile height and K split for n activation rows against `units` row pairs
 * (or rows) of nch chunks each on a GPU of sms multiprocessors: split while
 * the grid has fewer than 16 warps per multiprocessor and every slice keeps
 * at least one full step. Returns 0, or -1 when the grid would exceed
 * 2^31-1 blocks. */
static inline int sd_mv_plan_make(int n, int64_t units, int64_t nch, int sms, sd_mv_plan *p) {
    p->nt = n >= 5 ? 8 : n >= 3 ? 4 : n;
    p->ntiles = (n + p->nt - 1) / p->nt;
    p->ks = 1;
    while (p->ks < SD_MV_WARPS && units * p->ntiles * p->ks < 16 * (int64_t)sms &&
           nch >= 2 * p->ks * 32 * SD_MV_UNROLL)
        p->ks *= 2;
    const int64_t per_block = SD_MV_WARPS / p->ks;
    p->blocks = (int64_t)p->ntiles * ((units + per_block - 1) / per_block);
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
 * parallelism of its length, not of the bucket. */
enum { SD_AT_BUCKET_MIN = 256 };
static inline int sd_attn_plan_bucket(int n, int pos, int n_kv, int group, int sms,
                                      sd_attn_plan *p) {
    int64_t bucket = SD_AT_BUCKET_MIN;
    while (bucket < (int64_t)pos + n) bucket *= 2;
    if (bucket - n > 0x7fffffff) return -1;
    return sd_attn_plan_make(n, (int)(bucket - n), n_kv, group, sms, p);
}

#endif
