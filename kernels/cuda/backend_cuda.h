/* The CUDA backend (kernels/cuda), or its stand-in when the build has no
 * CUDA (engine/backend_nocuda.c): the same functions, reporting why.
 *
 * Use: when sd_cuda_available() says yes, sd_backend_cuda(device) gives an
 * op table like sd_backend_cpu's; weights go to the device through
 * upload_weight (which rewrites w->data to device memory in the kernels' own
 * layout, so a weight uploaded to the CUDA backend is only for its ops), and
 * every float pointer passed to an op is memory from its alloc(). Ops are
 * queued on the backend's stream; to_host, top_k_rows and
 * sd_cuda_from_host wait for it. The cuda_* settings of sd_backend_opts
 * (kernels/common/backend_opts.h) are read once, at sd_backend_cuda:
 * cuda_sync = 1 synchronises after every kernel, so that a fault is
 * reported by the op that caused it. */
#ifndef SD_BACKEND_CUDA_H
#define SD_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when a usable GPU (compute capability >= 8.0) exists, with its
 * description in why; else 0 and the reason ("no CUDA device: ...",
 * "built without CUDA ..."). why may be NULL. */
int sd_cuda_available(char *why, size_t cap);
/* The largest attention head the CUDA kernels take (one head's row of keys
 * lives in a warp's registers); models with wider heads run on the CPU. */
#define SD_CUDA_MAX_HEAD_DIM 128
/* The backend on device `device` (0 = first) with the cuda_* settings of o
 * (NULL: the defaults), or NULL with e filled. */
sd_backend *sd_backend_cuda(int device, const sd_backend_opts *o, sd_err *e);
/* CUDA graphs for decode steps (backend.h graph_begin/graph_end): as
 * cuda_graph said at sd_backend_cuda, or as set here. 0, or -1 when b is
 * not a CUDA backend. */
int sd_cuda_set_graph(sd_backend *b, int on);
/* Folded norms (kernels/cuda/cuda_int.h, "pending norm"): an RMSNorm whose
 * output feeds the matrix-vector op right after it runs inside that op's
 * launch, which plans per_sm resident blocks a multiprocessor (1 to
 * SD_CUDA_FUSE_NORM_MAX; cuda_fuse_norm at sd_backend_cuda until set here);
 * 0 launches every norm on its own. 0, or -1 when b is not a CUDA backend or per_sm
 * is out of range. */
int sd_cuda_set_fuse_norm(sd_backend *b, int per_sm);
/* Products with quantised, BF16 and F16 weights on tensor cores
 * (kernels/cuda/mv_mma.cuh) or, off, on the __dp4a and float tiles
 * (mv.cuh): as cuda_mma said at sd_backend_cuda, or as set here, for the
 * launches after the call (a step already captured as a graph keeps its
 * kernels). 0, or -1 when b is not a CUDA backend. */
int sd_cuda_set_mma(sd_backend *b, int on);
/* A check of the tensor-core primitive (kernels/cuda/mma.cuh) for tests: c
 * [16][8] += a . b^T in int32 for device buffers a [16][k] and b [8][k] of
 * int8, k 16 or 32, by one warp of mma. 0, or -1 with e filled. */
int sd_cuda_mma_check(sd_backend *b, const int8_t *a, const int8_t *bm, int32_t *c, int k,
                      sd_err *e);
/* The same for the 16-bit float primitives: c [16][8] += a . bm^T in f32
 * for device buffers a [16][16] and bm [8][16] of bf16 (bf16 non-zero) or
 * f16 bits. 0, or -1 with e filled. */
int sd_cuda_mma_check_h(sd_backend *b, int bf16, const uint16_t *a, const uint16_t *bm, float *c,
                        sd_err *e);
/* The norms folded so far, or -1 when b is not a CUDA backend. */
long sd_cuda_norms_folded(sd_backend *b);
/* What the graphs did: steps launched as graphs; of those the steps
 * captured (recorded with stream capture, then made executable by updating
 * a kept executable graph in place or by a new instantiation) and the steps
 * replayed (a kept graph launched as it is, nothing captured); steps that
 * fell back to plain launches; and the nodes (kernels and copies) of the
 * last graph captured. With cuda_persistent (sd_backend_opts): the steps
 * run as one persistent launch (kernels/cuda/step.cu), of those the steps
 * that launched a kept work list again (persist_replays), and those that
 * could not be and went the graph way (persist_fallbacks; the last reason in
 * persist_why); of the last persistent step, its stages, the waits its
 * stages hold (for all items of an earlier stage, persist_waits, or for the
 * items of one chunk of it, persist_chunk_waits, step.cu), the items whose
 * weight rows its blocks staged in shared memory (persist_staged, with
 * cuda_stage) and the host microseconds it took to build before its launch
 * (the launchers' plans, the waits, the work list's copy queued). */
typedef struct sd_cuda_graph_stats {
    long launched, captures, replays, updated, instantiated, fallbacks, nodes;
    long persistent, persist_replays, persist_fallbacks;
    long persist_stages, persist_waits, persist_chunk_waits, persist_staged;
    double persist_build_us;
    char persist_why[160];
} sd_cuda_graph_stats;
int sd_cuda_graph_stats_get(sd_backend *b, sd_cuda_graph_stats *out);
/* How a persistent step's stages wait (kernels/cuda/step.cu): for the
 * chunks of an earlier stage that hold what they read where the data allows
 * (FINE, the default), always for whole stages (STAGE), or, for tests
 * only, with attention's chunk waits planted wrong: they leave out the K/V
 * rows the step writes (PLANTED, which the emulator's schedule check must
 * catch). 0, or -1 when b is not
 * a CUDA backend or how is none of these. */
enum { SD_CUDA_WAITS_FINE, SD_CUDA_WAITS_STAGE, SD_CUDA_WAITS_PLANTED };
int sd_cuda_set_persist_waits(sd_backend *b, int how);
/* Copies bytes from host memory into device memory of backend b (tests,
 * benchmarks, and any input the op table has no op for); waits for it. */
int sd_cuda_from_host(sd_backend *b, void *dst_dev, const void *src_host, size_t bytes,
                      sd_err *e);

#ifdef __cplusplus
}
#endif

#endif
