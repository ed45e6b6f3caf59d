/* The weight bytes one virtual block of a matrix-vector kernel reads, for
 * the persistent step's L2 prefetch (step.cu), per kind: the rows its warps
 * take (mv.cuh mv_place: row group b / ntiles, MV_WARPS / ks warps a
 * group, every chunk of each row) as runs of consecutive rows of one
 * matrix, and a run as its bytes of values, high bits and scales (the
 * device layout, cuda_int.h: three arrays of whole rows). A warp owns
 * mq_step_units(variant) units, row pairs or (FFN) rows: one on the __dp4a
 * and float tiles, MQ_UNITS on tensor cores (mv_mma.cuh: warp q's units
 * are 8q .. 8q + 7, a matrix product's 16 rows 16q .. 16q + 15), so a
 * group's units are consecutive either way.
 *
 *   MM    row pair p is rows 2p, 2p + 1;
 *   FFN   row r of the gate and of the up matrix;
 *   QKV   pair p of the launch is pair p - pair0 of the matrix it falls in:
 *         rows 2l, 2l + 1, or with NEOX rotation rows l and l + rope_dim / 2
 *         of its head (or two consecutive rows past rope_dim), so a group's
 *         pairs make up to two runs a matrix.
 * Rows past a matrix's end are read as its last row (mv_row), which the
 * run ending at the last row holds. Other kinds read no weights. A run
 * joins any run it continues or precedes, so that the NEOX halves of the
 * heads a tensor-core group holds stay a few runs. */
#ifndef SD_CUDA_WSPAN_CUH
#define SD_CUDA_WSPAN_CUH

#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/ffn.cuh"
#include "kernels/cuda/matvec.cuh"
#include "kernels/cuda/qkv_rope.cuh"

/* Runs a virtual block may have: QKV's pairs of a row group in up to
 * three matrices, a head's NEOX pairs in up to three runs. */
enum { WS_RUNS = 8 };

struct WsRun {
    const MvMat *m;
    int r0, r1; /* rows r0 .. r1 - 1 */
};

/* Adds rows r0 .. r1 - 1 of m, joining a run of m they continue or
 * precede; n past WS_RUNS when they do not fit. */
__host__ __device__ inline void ws_add(WsRun *out, int &n, const MvMat *m, int r0, int r1) {
    r1 = r1 < m->rows ? r1 : m->rows;
    if (r0 >= r1 || n > WS_RUNS) return;
    for (int k = n - 1; k >= 0; k--) {
        if (out[k].m != m) continue;
        if (out[k].r1 == r0) {
            out[k].r1 = r1;
            return;
        }
        if (out[k].r0 == r1) {
            out[k].r0 = r0;
            return;
        }
    }
    if (n < WS_RUNS) out[n++] = WsRun{m, r0, r1};
    else n = WS_RUNS + 1;
}

/* The row runs of virtual block b of a stage of kind `kind` and variant
 * `variant` with arguments args into out; their count, 0 when it reads no
 * weights, or more than WS_RUNS when they do not fit (then none is
 * known). */
__host__ __device__ inline int ws_runs(int kind, int variant, const unsigned char *args, unsigned b,
                                       WsRun *out) {
    int n = 0;
    const int units = mq_step_units(variant);
    if (kind == CU_STEP_MM) {
        const MmArgs &p = *reinterpret_cast<const MmArgs *>(args);
        const int per = MV_WARPS / p.ks * units, g = (int)(b / (unsigned)p.ntiles);
        ws_add(out, n, &p.w, 2 * g * per, 2 * (g + 1) * per);
    } else if (kind == CU_STEP_FFN) {
        const FfnArgs &p = *reinterpret_cast<const FfnArgs *>(args);
        const int per = MV_WARPS / p.ks * units, g = (int)(b / (unsigned)p.ntiles);
        ws_add(out, n, &p.w1, g * per, (g + 1) * per);
        ws_add(out, n, &p.w3, g * per, (g + 1) * per);
    } else if (kind == CU_STEP_QKV || kind == CU_STEP_QKV_BEAMS) {
        const QkvArgs &p = *reinterpret_cast<const QkvArgs *>(args); /* a scatter's starts with it */
        const int per = MV_WARPS / p.ks * units, g = (int)(b / (unsigned)p.ntiles), hd = p.head_dim;
        /* NEOX: the first rows of the rotated pairs and the unrotated ones in
         * a first pass, the second rows of the rotated pairs in a second */
        for (int second = 0; second < 1 + p.neox; second++)
            for (int k = 0; k < per; k++) {
                const int pair = g * per + k;
                int m = 0;
                while (m + 1 < p.nm && pair >= p.m[m + 1].pair0) m++;
                const MvMat *M = &p.m[m].w;
                const int local = pair - p.m[m].pair0;
                if (!p.neox) {
                    ws_add(out, n, M, 2 * local, 2 * local + 2);
                    continue;
                }
                const int head = local / (hd / 2), t = local % (hd / 2), half = p.rope_dim / 2;
                const int r0 = head * hd + (t < half ? t : p.rope_dim + 2 * (t - half));
                if (t >= half) {
                    if (!second) ws_add(out, n, M, r0, r0 + 2);
                } else {
                    const int r = second ? r0 + half : r0;
                    ws_add(out, n, M, r, r + 1);
                }
            }
    }
    return n;
}

#endif
