/* Kernels with planted bugs, for tests/cuda_emu/test_emu_misuse.c: each
 * case is a kernel and a launcher; the emulator (or ASan under it) must
 * stop every buggy one with a clear report. Built only for the emulator. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/persist.cuh"

/* Reads one float past the end of x (n floats). */
__global__ void oob_read(float *out, const float *x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i % n] = x[i]; /* bug: <= */
}

/* A full-mask shuffle that only the lower half of the warp reaches. */
__global__ void divergent_shfl(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) v += __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* Two halves of a warp at two different shuffles. */
__global__ void diverged_sites(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x & 1)
        v = __shfl_xor_sync(0xffffffffu, v, 2);
    else
        v = __shfl_xor_sync(0xffffffffu, v, 4);
    out[threadIdx.x] = v;
}

/* A full-mask warp sum in a block of 16 threads. */
__global__ void absent_lanes(float *out) {
    float v = 1.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

/* One thread leaves before the barrier the others wait at. */
__global__ void exit_before_barrier(float *out) {
    __shared__ float s[64];
    if (threadIdx.x == 5) return;
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}

/* The two warps of a block wait at two different barriers. */
__global__ void divergent_barriers(float *out) {
    __shared__ float s[64];
    s[threadIdx.x] = 1.0f;
    if (threadIdx.x < 32)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}

/* Thread 0 waits for lane 1 at __syncwarp while lane 1 waits at __syncthreads. */
__global__ void deadlock(float *out) {
    if (threadIdx.x == 0) __syncwarp(0x3u);
    else __syncthreads();
    out[threadIdx.x] = 0.f;
}

/* Thread 0 stages a value in shared memory and the block reads it without a
 * __syncthreads in between: in the blocks the emulator runs backwards, the
 * readers run first and see the 0xff fill (NaN). */
__global__ void missing_barrier(float *out) {
    extern __shared__ float stage[];
    if (threadIdx.x == 0) stage[0] = (float)blockIdx.x;
    /* bug: no __syncthreads() here */
    out[blockIdx.x * blockDim.x + threadIdx.x] = stage[0];
}

/* Launched with programmatic stream serialization: block 1 skips the wait. */
__global__ void pdl_wait(float *out) {
    if (blockIdx.x == 0) cudaGridDependencySynchronize();
    out[threadIdx.x] = 1.0f;
}

/* A producer, then a consumer launched with programmatic stream
 * serialization that reads the producer's output after its wait: through
 * the read-only path (the bug: on a GPU the consumer is alive while the
 * producer writes) or with a plain load. */
__global__ void produce(float *out) { out[threadIdx.x] = (float)threadIdx.x; }
__global__ void consume(float *out, const float *in, int nc) {
    cudaGridDependencySynchronize();
    out[threadIdx.x] = nc ? __ldg(in + threadIdx.x) : in[threadIdx.x];
}

/* Reads the block's dynamic shared memory through __ldcs, a global-memory
 * load (ld.global.cs): what a tile does that reads weights staged in
 * shared memory (kernels/cuda/stage.cuh) without its sm switch. */
__global__ void ldcs_shared(float *out) {
    extern __shared__ float staged[];
    staged[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = __ldcs(staged + (blockDim.x - 1 - threadIdx.x));
}

__global__ void fine(float *out) {
    extern __shared__ float big[];
    big[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = big[blockDim.x - 1 - threadIdx.x];
}

/* A persistent pipeline: PIPE_STAGES stages of PIPE_CHUNKS chunks of 64
 * floats; work item k is chunk k % PIPE_CHUNKS of stage k / PIPE_CHUNKS,
 * and block b takes items b, b + gridDim.x, ... in order. Stage 0 writes
 * chunk c as c * 64 + t; stage s > 0 reads chunks c and c + 1 (wrapping)
 * of stage s - 1, waiting for both flags (flags[s * PIPE_CHUNKS + c] counts
 * the blocks that finished chunk c of stage s). Each chunk goes through a
 * static __shared__ array, reversed, which blocks of a cooperative launch
 * each have their own of. The planted bugs: skip the wait for chunk c + 1
 * (skip_wait), or wait for a count no block reaches (deadlock). */
enum { PIPE_STAGES = 3, PIPE_CHUNKS = 4, PIPE_ITEMS = PIPE_STAGES * PIPE_CHUNKS };

__global__ void pipeline(float *buf, unsigned *flags, int skip_wait, int deadlock) {
    __shared__ float rev[64];
    const unsigned t = threadIdx.x;
    for (unsigned k = blockIdx.x; k < PIPE_ITEMS; k += gridDim.x) {
        const unsigned s = k / PIPE_CHUNKS, c = k % PIPE_CHUNKS, n = (c + 1) % PIPE_CHUNKS;
        float v = (float)(c * 64 + t);
        if (s > 0) {
            const unsigned *prev = flags + (s - 1) * PIPE_CHUNKS;
            cu_flag_wait(prev + c, deadlock && k == PIPE_ITEMS - 1 ? 2 : 1, (int)k);
            if (!skip_wait) cu_flag_wait(prev + n, 1, (int)k);
            const float *in = buf + (s - 1) * PIPE_CHUNKS * 64;
            v = in[c * 64 + t] + 0.5f * in[n * 64 + t];
        }
        rev[t] = v;
        __syncthreads();
        buf[k * 64 + t] = rev[63 - t];
        cu_flag_add(flags + k, 1);
    }
}

/* The pipeline's expected output, as pipeline computes it. */
static void pipeline_ref(float *ref) {
    for (int k = 0; k < PIPE_ITEMS; k++) {
        const int s = k / PIPE_CHUNKS, c = k % PIPE_CHUNKS, n = (c + 1) % PIPE_CHUNKS;
        for (int t = 0; t < 64; t++) {
            const int r = 63 - t;
            float v = (float)(c * 64 + r);
            if (s > 0) {
                const float *in = ref + (s - 1) * PIPE_CHUNKS * 64;
                v = in[c * 64 + r] + 0.5f * in[n * 64 + r];
            }
            ref[k * 64 + t] = v;
        }
    }
}

/* Runs the pipeline case `which` on grid blocks; the outputs that differ
 * from pipeline_ref in *bad. */
static int pipeline_run(const char *which, unsigned grid, int *bad) {
    float *buf = NULL;
    unsigned *flags = NULL;
    cudaMalloc(&buf, PIPE_ITEMS * 64 * sizeof(float));
    cudaMalloc(&flags, PIPE_ITEMS * sizeof(unsigned));
    cudaMemset(flags, 0, PIPE_ITEMS * sizeof(unsigned));
    int skip = strstr(which, "skip") != NULL, dead = strstr(which, "deadlock") != NULL;
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeCooperative;
    at.val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = 64;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    if (!strcmp(which, "coop_kernel")) {
        void *args[] = {&buf, &flags, &skip, &dead};
        cudaLaunchCooperativeKernel((void *)pipeline, dim3(grid), dim3(64), args, 0, 0);
    } else if (!strcmp(which, "coop_graph")) {
        cudaStream_t st;
        cudaGraph_t g;
        cudaGraphExec_t x;
        cudaStreamCreate(&st);
        cfg.stream = st;
        cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
        cudaMemsetAsync(flags, 0, PIPE_ITEMS * sizeof(unsigned), st);
        cudaLaunchKernelEx(&cfg, pipeline, buf, flags, skip, dead);
        cudaStreamEndCapture(st, &g);
        cudaGraphInstantiate(&x, g, 0);
        cudaGraphLaunch(x, st);
        cudaMemset(buf, 0xff, PIPE_ITEMS * 64 * sizeof(float));
        cudaGraphLaunch(x, st); /* a replay from garbage: the same result */
        cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
        cudaStreamDestroy(st);
    } else {
        cudaLaunchKernelEx(&cfg, pipeline, buf, flags, skip, dead);
    }
    const int err = (int)cudaGetLastError();
    static float h[PIPE_ITEMS * 64], ref[PIPE_ITEMS * 64];
    cudaMemcpy(h, buf, sizeof h, cudaMemcpyDeviceToHost);
    pipeline_ref(ref);
    *bad = 0;
    for (int i = 0; i < PIPE_ITEMS * 64; i++) *bad += memcmp(&h[i], &ref[i], sizeof(float)) != 0;
    cudaFree(buf);
    cudaFree(flags);
    return err;
}

/* Runs case `which`; returns the launch's error (0: none) and, for
 * missing_barrier, the number of NaN outputs in *nan (for the pipeline
 * cases, the number of wrong outputs). */
extern "C" int planted_run(const char *which, int *nan) {
    /* pipe_*: 4 blocks; *_small_grid: 3 (a block takes several items);
     * pipe_too_large: more blocks than 2 multiprocessors hold */
    if (!strncmp(which, "pipe_", 5)) {
        const unsigned grid = strstr(which, "small_grid") ? 3 : strstr(which, "too_large") ? 33 : 4;
        if (strstr(which, "too_large")) setenv("CUDA_EMU_SMS", "2", 1);
        if (strstr(which, "checked")) setenv("CUDA_EMU_COOP_CHECK", "1", 1);
        return pipeline_run(which + 5, grid, nan);
    }
    float *x = NULL, *out = NULL;
    const int n = 256;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&out, 4 * n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    if (!strcmp(which, "oob_read")) oob_read<<<3, 128>>>(out, x, n);
    else if (!strcmp(which, "divergent_shfl")) divergent_shfl<<<1, 32>>>(out);
    else if (!strcmp(which, "diverged_sites")) diverged_sites<<<1, 32>>>(out);
    else if (!strcmp(which, "absent_lanes")) absent_lanes<<<1, 16>>>(out);
    else if (!strcmp(which, "exit_before_barrier")) exit_before_barrier<<<1, 64>>>(out);
    else if (!strcmp(which, "deadlock")) deadlock<<<1, 2>>>(out);
    else if (!strcmp(which, "divergent_barriers")) divergent_barriers<<<1, 64>>>(out);
    else if (!strcmp(which, "ldcs_shared")) ldcs_shared<<<1, 64, 64 * sizeof(float)>>>(out);
    else if (!strcmp(which, "block_too_large")) fine<<<1, 1025, 1025 * 4>>>(out);
    else if (!strcmp(which, "grid_too_large")) fine<<<dim3(1, 65536), 32, 128>>>(out);
    else if (!strcmp(which, "smem_without_opt_in")) fine<<<1, 64, 64 * 1024>>>(out);
    else if (!strcmp(which, "smem_opt_in")) {
        cudaFuncSetAttribute(fine, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
        fine<<<1, 64, 64 * 1024>>>(out);
    } else if (!strcmp(which, "smem_over_227k")) {
        cudaFuncSetAttribute(fine, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
        fine<<<1, 64, 228 * 1024>>>(out);
    } else if (!strcmp(which, "pdl_no_wait") || !strcmp(which, "pdl_waits")) {
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = !strcmp(which, "pdl_waits") ? 1 : 2;
        cfg.blockDim = 32;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, pdl_wait, out);
    } else if (!strcmp(which, "ldg_after_pdl") || !strcmp(which, "plain_after_pdl")) {
        setenv("CUDA_EMU_LDG_CHECK", "1", 1);
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = 1;
        cfg.blockDim = 64;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        produce<<<1, 64>>>(x);
        cudaLaunchKernelEx(&cfg, consume, out, (const float *)x, !strcmp(which, "ldg_after_pdl") ? 1 : 0);
    } else if (!strcmp(which, "missing_barrier")) {
        missing_barrier<<<4, 64, sizeof(float)>>>(out);
        float h[4 * 64];
        cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
        *nan = 0;
        for (int i = 0; i < 4 * 64; i++) *nan += h[i] != h[i];
    } else {
        fprintf(stderr, "planted_run: no case %s\n", which);
        return -1;
    }
    const int err = (int)cudaGetLastError();
    cudaFree(x);
    cudaFree(out);
    return err;
}

/* ---- the persistent step's prefetch spans ------------------------------------
 * Not a planted bug but the check that kernels/cuda/wspan.cuh names exactly
 * the weight rows each virtual block of a matrix-vector kernel reads: the
 * rows are found here a second way, warp by warp and lane group by lane
 * group as the kernels place them (mv.cuh mv_place, qkv_vblock's pair
 * mapping, mv_row's clamp; on tensor cores mv_mma.cuh's lane group g of
 * warp q: rows 16q + g and 16q + g + 8 of a matrix product, unit 8q + g
 * of SwiGLU and Q/K/V). */
#include <set>
#include <vector>
#include <utility>

#include "kernels/cuda/wspan.cuh"

typedef std::set<std::pair<const MvMat *, int>> RowSet;

static RowSet ws_declared(int kind, int variant, const void *args, unsigned b, int *runs) {
    WsRun r[WS_RUNS];
    *runs = ws_runs(kind, variant, (const unsigned char *)args, b, r);
    RowSet s;
    for (int k = 0; k < *runs && *runs <= WS_RUNS; k++)
        for (int row = r[k].r0; row < r[k].r1; row++) s.insert({r[k].m, row});
    return s;
}

static int ws_clamp(const MvMat &m, int r) { return r < m.rows - 1 ? r : m.rows - 1; }

/* Rows a virtual block reads, warp by warp (slice 0 of each row pair) and,
 * mq, lane group by lane group of a tensor-core warp. */
static RowSet ws_read(int kind, int mq, const void *args, unsigned b) {
    RowSet s;
    for (int warp = 0; warp < MV_WARPS; warp++)
        for (int g = 0; g < (mq ? MQ_UNITS : 1); g++) {
            if (kind == CU_STEP_MM && mq) {
                const MmArgs &p = *(const MmArgs *)args;
                const int q = (int)(b / p.ntiles) * (MV_WARPS / p.ks) + warp / p.ks;
                s.insert({&p.w, ws_clamp(p.w, MQ_ROWS * q + g)});
                s.insert({&p.w, ws_clamp(p.w, MQ_ROWS * q + g + 8)});
            } else if (kind == CU_STEP_MM) {
                const MmArgs &p = *(const MmArgs *)args;
                const int pair = (int)(b / p.ntiles) * (MV_WARPS / p.ks) + warp / p.ks;
                s.insert({&p.w, ws_clamp(p.w, 2 * pair)});
                s.insert({&p.w, ws_clamp(p.w, 2 * pair + 1)});
            } else if (kind == CU_STEP_FFN) {
                const FfnArgs &p = *(const FfnArgs *)args;
                const int q = (int)(b / p.ntiles) * (MV_WARPS / p.ks) + warp / p.ks;
                const int r = mq ? MQ_UNITS * q + g : q;
                s.insert({&p.w1, ws_clamp(p.w1, r)});
                s.insert({&p.w3, ws_clamp(p.w3, r)});
            } else {
                const QkvArgs &p = *(const QkvArgs *)args;
                const int q = (int)(b / p.ntiles) * (MV_WARPS / p.ks) + warp / p.ks;
                const int pair = mq ? MQ_UNITS * q + g : q;
                int m = 0;
                if (p.nm > 1 && pair >= p.m[1].pair0) m = 1;
                if (p.nm > 2 && pair >= p.m[2].pair0) m = 2;
                const int local = pair - p.m[m].pair0, hd = p.head_dim;
                int r0, r1;
                if (p.neox) {
                    const int head = local / (hd / 2), t = local % (hd / 2), half = p.rope_dim / 2;
                    r0 = head * hd + (t < half ? t : p.rope_dim + 2 * (t - half));
                    r1 = r0 + (t < half ? half : 1);
                } else {
                    r0 = 2 * local;
                    r1 = r0 + 1;
                }
                s.insert({&p.m[m].w, ws_clamp(p.m[m].w, r0)});
                s.insert({&p.m[m].w, ws_clamp(p.m[m].w, r1)});
            }
        }
    return s;
}

/* Every virtual block of one launch; 0, or -1 with msg naming the first
 * that differs. */
static int ws_compare(const char *what, int kind, int mq, const void *args, unsigned blocks,
                      char *msg, size_t cap) {
    const int variant = mq ? mq_step_variant(SD_Q8_0, 2) : mv_step_variant(SD_Q8_0, 1);
    for (unsigned b = 0; b < blocks; b++) {
        int runs;
        const RowSet d = ws_declared(kind, variant, args, b, &runs), r = ws_read(kind, mq, args, b);
        if (runs > WS_RUNS || d != r) {
            snprintf(msg, cap, "%s%s: virtual block %u: %zu rows declared in %d runs, %zu read", what,
                     mq ? " (mma)" : "", b, d.size(), runs, r.size());
            return -1;
        }
    }
    return 0;
}

static MvMat ws_mat(int rows) {
    MvMat m = {};
    m.rows = rows;
    return m;
}

/* The kernels' shapes: row counts odd and even, ks 1, 2 and 4, 1 and 2
 * activation tiles, Q/K/V in one launch and alone, NEOX with rope_dim = hd
 * and below it, heads of 64 and of 8; on the __dp4a tiles and on tensor
 * cores (mq: a warp owns MQ_UNITS units). */
extern "C" int wspan_check(char *msg, size_t cap) {
    for (int mq = 0; mq < 2; mq++)
        for (int ks = 1; ks <= MV_WARPS; ks *= 2)
            for (int ntiles = 1; ntiles <= 2; ntiles++) {
                const int per = MV_WARPS / ks * (mq ? MQ_UNITS : 1);
                for (int rows = 1; rows <= (mq ? 100 : 19); rows += 3) {
                    MmArgs mm = {};
                    mm.w = ws_mat(rows), mm.ks = ks, mm.ntiles = ntiles;
                    const unsigned pairs = (unsigned)(rows + 1) / 2;
                    if (ws_compare("mm", CU_STEP_MM, mq, &mm, ntiles * ((pairs + per - 1) / per), msg, cap))
                        return -1;
                    FfnArgs ff = {};
                    ff.w1 = ws_mat(rows), ff.w3 = ws_mat(rows), ff.ks = ks, ff.ntiles = ntiles;
                    if (ws_compare("ffn", CU_STEP_FFN, mq, &ff, ntiles * ((rows + per - 1) / per), msg, cap))
                        return -1;
                }
                const int shapes[4][4] = {{64, 64, 0, 4}, {64, 64, 1, 4}, {64, 32, 1, 4}, {8, 8, 1, 2}};
                for (const auto &sh : shapes)
                    for (int nm = 1; nm <= 3; nm += 2) {
                        QkvArgs q = {};
                        q.head_dim = sh[0], q.rope_dim = sh[1], q.neox = sh[2], q.ks = ks, q.ntiles = ntiles;
                        q.nm = nm;
                        int pairs = 0;
                        for (int j = 0; j < nm; j++) {
                            const int heads = j == 0 ? sh[3] : sh[3] / 2;
                            q.m[j].w = ws_mat(heads * sh[0]);
                            q.m[j].pair0 = pairs;
                            pairs += heads * sh[0] / 2;
                        }
                        char what[64];
                        snprintf(what, sizeof what, "qkv hd %d rope %d neox %d, %d matrices, ks %d", sh[0],
                                 sh[1], sh[2], nm, ks);
                        if (ws_compare(what, CU_STEP_QKV, mq, &q, ntiles * ((pairs + per - 1) / per), msg, cap))
                            return -1;
                    }
            }
    return 0;
}

/* ---- the persistent step's staging ---------------------------------------------
 * The bytes an item stages (kernels/cuda/stage.cuh) are exactly the weight
 * rows it reads: block b of sg_kernel stages virtual block b of a launch
 * as the persistent step does and copies its buffer out; on the host every
 * row the block's warps read (ws_read), looked up through the staged
 * matrices, must hold the matrix's bytes inside a window, and the windows
 * must hold those rows' bytes and no more. Rows of 40 value bytes, 6 high
 * bytes and 10 scale bytes from an odd address, so that no run is 16-byte
 * aligned; and rows larger than the buffer, of which not one fits. */
#include "kernels/cuda/stage.cuh"

/* The stages staged here are of the __dp4a tiles (a warp owns a row pair). */
#define SG_VARIANT (2 * (int)SD_Q8_0) /* mv_step_variant(SD_Q8_0, 1) */

__global__ void sg_kernel(int kind, const unsigned char *args, uint8_t *out, uintptr_t *at,
                          int *staged) {
    extern __shared__ __align__(16) uint8_t sg_buf[];
    WsRun r[WS_RUNS];
    const int n = ws_runs(kind, SG_VARIANT, args, blockIdx.x, r);
    SgPlan p;
    const int ok = n <= WS_RUNS && sg_plan(kind, args, r, n, SG_BYTES, &p);
    if (ok) sg_stage(p, args, sg_buf);
    sg_wait_all();
    __syncthreads();
    for (unsigned i = threadIdx.x; ok && i < p.bytes; i += blockDim.x)
        out[(size_t)blockIdx.x * SG_BYTES + i] = sg_buf[i];
    if (threadIdx.x == 0) staged[blockIdx.x] = ok, at[blockIdx.x] = (uintptr_t)sg_buf;
}

enum { SG_QROW = 40, SG_HROW = 6, SG_SROW = 10, SG_QROW_BIG = SG_BYTES };

/* A matrix of rows rows in device memory, its bytes random. */
static MvMat sg_mat_new(int rows, size_t qrow, std::vector<void *> &mem) {
    const size_t n = (size_t)rows * (qrow + SG_HROW + SG_SROW) + 3;
    uint8_t *d = NULL;
    cudaMalloc(&d, n);
    mem.push_back(d);
    for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(rand() >> 7);
    MvMat m = {};
    m.q = d + 3, m.h = m.q + (size_t)rows * qrow, m.sc = m.h + (size_t)rows * SG_HROW;
    m.qrow = qrow, m.hrow = SG_HROW, m.srow = SG_SROW, m.rows = rows;
    return m;
}

/* Every virtual block of one launch whose arguments are the bytes args;
 * want: 1 every block staged, 0 none, -1 either. 0, or -1 with msg. */
static int sg_compare(const char *what, int kind, const void *args, size_t bytes, unsigned blocks,
                      int want, char *msg, size_t cap) {
    unsigned char *dargs = NULL, *out = NULL;
    uintptr_t *at = NULL;
    int *staged = NULL;
    cudaMalloc(&dargs, bytes);
    cudaMalloc(&out, (size_t)blocks * SG_BYTES);
    cudaMalloc(&at, blocks * sizeof *at);
    cudaMalloc(&staged, blocks * sizeof *staged);
    cudaMemcpy(dargs, args, bytes, cudaMemcpyHostToDevice);
    sg_kernel<<<blocks, 128, SG_BYTES>>>(kind, dargs, out, at, staged);
    int err = cudaGetLastError() != cudaSuccess;
    if (err) snprintf(msg, cap, "%s: the staging kernel failed", what);
    for (unsigned b = 0; b < blocks && !err; b++) {
        const unsigned char *a = (const unsigned char *)args, *buf = out + (size_t)b * SG_BYTES;
        WsRun r[WS_RUNS];
        const int n = ws_runs(kind, SG_VARIANT, a, b, r);
        SgPlan p;
        const int ok = n <= WS_RUNS && sg_plan(kind, a, r, n, SG_BYTES, &p);
        if (ok != staged[b] || (want >= 0 && ok != want)) {
            snprintf(msg, cap, "%s: virtual block %u: staged %d on the device, %d on the host, %d wanted",
                     what, b, staged[b], ok, want);
            err = 1;
            break;
        }
        if (!ok) continue;
        size_t read = 0, windows = 0;
        for (int w = 0; w < p.nw; w++) windows += p.w[w].n;
        for (const auto &row : ws_read(kind, 0, a, b)) {
            int k = 0;
            while (k < p.nm && a + p.off[k] != (const unsigned char *)row.first) k++;
            if (k == p.nm) {
                snprintf(msg, cap, "%s: virtual block %u reads row %d of a matrix it did not stage",
                         what, b, row.second);
                err = 1;
                break;
            }
            const MvMat &m = *row.first, s = sg_mat(p, k, a, buf);
            const MvMat &dev = *(const MvMat *)(buf + p.off[k]);
            const uint8_t *src[3] = {m.q, m.h, m.sc}, *dst[3] = {s.q, s.h, s.sc};
            const size_t rb[3] = {m.qrow, m.hrow, m.srow};
            if (dev.rows != m.rows || (uintptr_t)dev.q - at[b] != (uintptr_t)(s.q - buf) ||
                (uintptr_t)dev.sc - at[b] != (uintptr_t)(s.sc - buf)) {
                snprintf(msg, cap, "%s: virtual block %u: the staged arguments' matrix %d", what, b, k);
                err = 1;
                break;
            }
            for (int g = 0; g < 3 && !err; g++) {
                const size_t o = (size_t)(dst[g] + (size_t)row.second * rb[g] - buf);
                int in = 0;
                for (int w = 0; w < p.nw; w++) in |= o >= p.w[w].dst && o + rb[g] <= p.w[w].dst + p.w[w].n;
                if (rb[g] && (!in || memcmp(buf + o, src[g] + (size_t)row.second * rb[g], rb[g]))) {
                    snprintf(msg, cap, "%s: virtual block %u: row %d, region %d not staged", what, b,
                             row.second, g);
                    err = 1;
                }
                read += rb[g];
            }
        }
        if (!err && read != windows) {
            snprintf(msg, cap, "%s: virtual block %u: %zu bytes staged, %zu read", what, b, windows, read);
            err = 1;
        }
    }
    cudaFree(dargs);
    cudaFree(out);
    cudaFree(at);
    cudaFree(staged);
    return err ? -1 : 0;
}

/* wspan_check's shapes with bytes in the rows: every item stages but for
 * NEOX Q/K/V items whose pairs make two runs of a matrix and the items of
 * rows too large. */
extern "C" int stage_check(char *msg, size_t cap) {
    std::vector<void *> mem;
    int err = 0;
    srand(7);
    for (int ks = 1; ks <= MV_WARPS && !err; ks *= 2)
        for (int ntiles = 1; ntiles <= 2 && !err; ntiles++) {
            const int per = MV_WARPS / ks;
            for (int rows = 1; rows <= 19 && !err; rows += 6)
                for (size_t qrow = SG_QROW; qrow <= SG_QROW_BIG && !err; qrow += SG_QROW_BIG - SG_QROW) {
                    const int fits = qrow == SG_QROW;
                    MmArgs mm = {};
                    mm.w = sg_mat_new(rows, qrow, mem), mm.ks = ks, mm.ntiles = ntiles;
                    const unsigned pairs = (unsigned)(rows + 1) / 2;
                    err = sg_compare("mm", CU_STEP_MM, &mm, sizeof mm,
                                     ntiles * ((pairs + per - 1) / per), fits, msg, cap);
                    FfnArgs ff = {};
                    ff.w1 = sg_mat_new(rows, qrow, mem), ff.w3 = sg_mat_new(rows, qrow, mem);
                    ff.ks = ks, ff.ntiles = ntiles;
                    if (!err)
                        err = sg_compare("ffn", CU_STEP_FFN, &ff, sizeof ff, ntiles * ((rows + per - 1) / per),
                                         fits, msg, cap);
                }
            const int shapes[4][4] = {{64, 64, 0, 4}, {64, 64, 1, 4}, {64, 32, 1, 4}, {8, 8, 1, 2}};
            for (const auto &sh : shapes)
                for (int nm = 1; nm <= 3 && !err; nm += 2) {
                    QkvScatterArgs qs = {};
                    QkvArgs &q = qs.a;
                    q.head_dim = sh[0], q.rope_dim = sh[1], q.neox = sh[2], q.ks = ks, q.ntiles = ntiles;
                    q.nm = nm;
                    int pairs = 0;
                    for (int j = 0; j < nm; j++) {
                        const int heads = j == 0 ? sh[3] : sh[3] / 2;
                        q.m[j].w = sg_mat_new(heads * sh[0], SG_QROW, mem);
                        q.m[j].pair0 = pairs;
                        pairs += heads * sh[0] / 2;
                    }
                    char what[64];
                    snprintf(what, sizeof what, "qkv hd %d rope %d neox %d, %d matrices, ks %d", sh[0],
                             sh[1], sh[2], nm, ks);
                    const unsigned blocks = ntiles * ((pairs + per - 1) / per);
                    err = sg_compare(what, CU_STEP_QKV, &q, sizeof q, blocks, sh[2] ? -1 : 1, msg, cap);
                    if (!err)
                        err = sg_compare(what, CU_STEP_QKV_BEAMS, &qs, sizeof qs, blocks, sh[2] ? -1 : 1,
                                         msg, cap);
                }
        }
    for (void *d : mem) cudaFree(d);
    return err;
}
