/* The GPU step ledger: what one decode step (one row) or one verification
 * (n rows) of a model shape costs on a CUDA path, counted on the CPU.
 *
 * The op sequence is not written down here: a recording backend
 * (ledger_trace.c) takes the calls engine/model makes for a model of the
 * shape, a synthetic GGUF (engine/bench/synth_presets.h) whose weights are
 * never read, so a shape's step is whatever model.c does. Each path
 * (ledger_cost.c) turns the recorded ops into the kernels the CUDA backend
 * would launch for them, with the bytes each reads and writes, the
 * dependency waits between them, and a predicted time from a cost model
 * whose constants come from the last device runs (ledger_consts.c, the file
 * docs/perf/gpu-ledger-constants.txt). */
#ifndef SD_LEDGER_H
#define SD_LEDGER_H

#include <stddef.h>
#include <stdint.h>

#include "engine/bench/synth_presets.h"
#include "kernels/common/error.h"

/* ---- the recorded ops (ledger_trace.c) ------------------------------------ */

enum lg_kind { LG_EMBED, LG_RMSNORM, LG_QKV, LG_ATTN, LG_MATMUL, LG_FFN, LG_TOPK };

typedef struct lg_w {
    uint32_t type;
    int64_t rows, cols;
} lg_w;

/* One backend call: its kind, rows n, position, whether it was called
 * between graph_begin and graph_end (graph), the buffers it reads (x) and
 * writes (out) as identities for the fusion rules, the width of x (cols:
 * rmsnorm's dim, a product's input), its weights, the attention shape and
 * top_k's k. */
typedef struct lg_op {
    int kind, n, pos, graph;
    const void *out, *x;
    int64_t cols;
    int nw;
    lg_w w[3];
    int n_head, n_kv, head_dim;
    int accumulate, k;
} lg_op;

typedef struct lg_trace {
    lg_op *op;
    int n, cap;
} lg_trace;

typedef struct lg_model lg_model;

/* A model of preset c with n_ctx positions on the recording backend; the
 * weights are an anonymous mapping that is never touched. NULL and e
 * filled on failure. */
lg_model *lg_model_open(const synth_preset *c, int n_ctx, sd_err *e);
/* Records one greedy call of n rows at positions pos.. (every row's argmax
 * comes back: a decode step for n = 1, a verification for n > 1) into t,
 * which is emptied first. */
int lg_model_trace(lg_model *m, int n, int pos, lg_trace *t, sd_err *e);
/* The weight bytes a decode step reads (sd_model_weight_bytes): what the
 * copy-bandwidth bound divides. */
uint64_t lg_model_weight_bytes(const lg_model *m);
void lg_model_close(lg_model *m);
void lg_trace_free(lg_trace *t);

/* ---- devices and constants (ledger_consts.c) ------------------------------ */

enum { LG_H100, LG_H200, LG_NDEV };

/* The cost model's constants of one device kind:
 *   copy_gbs   device-to-device copy bandwidth, bytes read + written, GB/s
 *   eta        the share of it that a step's kernels stream at
 *   kernel_us  a kernel of a graph with PDL beyond its bytes: the boundary
 *              and the tail of its slowest block
 *   launch_us  a kernel launched on its own (outside a graph), or the one
 *              cooperative launch of a persistent step
 *   step_us    a step's fixed host cost: the launch, the ids back, the wait
 *   build_us   a persistent step's host work a stage when its work list is
 *              built again every step (plans, dependencies, the copy)
 *   flag_us    a wait's flag propagation: the producer's release through L2
 *              to the waiting block's acquire
 *   tail_us    a stage-level wait's further exposure: the slowest item of
 *              the stage waited for finishing after the average one
 *   load_us    the first weight loads from device memory after a wait,
 *              exposed unless an L2 prefetch issued before the wait hid them
 *   op_us      the shortest body of one stage inside a persistent kernel
 *              (its blocks' latency chain)
 *   quant_rate, float_rate  weight elements x activation rows a second
 *              that the dp4a / float products compute on quantised or
 *              float weights: where n rows cost more than their bytes
 *   imma_rate, hmma_rate  the tensor cores' dense int8 / bf16 multiply-adds
 *              a second (published peaks)
 *   mma_eff    the share of those peaks that m16n8k32 / m16n8k16 mma
 *              issue reaches in the n-row products
 *   smem_us    what a matrix-vector item whose weight rows were staged in
 *              shared memory during its wait exposes after it: the wait for
 *              its copies and the block's barrier (persist fine smem) */
enum {
    LG_COPY_GBS, LG_ETA, LG_KERNEL_US, LG_LAUNCH_US, LG_STEP_US, LG_BUILD_US, LG_FLAG_US,
    LG_TAIL_US, LG_LOAD_US, LG_OP_US, LG_QUANT_RATE, LG_FLOAT_RATE, LG_IMMA_RATE, LG_HMMA_RATE,
    LG_MMA_EFF, LG_SMEM_US, LG_NCONST
};

typedef struct lg_device {
    double v[LG_NCONST];
} lg_device;

/* A measured figure the ledger is checked against: key
 * KIND_PATH:PRESET[:ROWS] (KIND decode, tok/s, or verify, ms a call of ROWS
 * rows; PATH a path's tag, lg_path_tag: "decode_nofold:llama-1b-bf16",
 * "verify_fine_mma:qwen-1.5b-q4_k_m:5"), device, value. */
typedef struct lg_point {
    char key[64];
    int dev;
    double value;
} lg_point;

/* The persistent-step microbenchmark's figures (kernels/bench/
 * bench_persist_cuda.cu, its "ledger:" lines), keyed persist:NAME:
 *   flag_us      one flag's one-way trip between two blocks
 *   stage_us     a stage-level wait: every block adds to one flag and
 *                waits for all of them
 *   load_us      a block's first 2 KiB of weights from device memory
 *   l2_us        the same from L2
 *   prefetch_us  the same after an L2 prefetch issued 2 us before
 *   read_gbs     a plain streaming read by a full grid, GB/s */
enum { LG_B_FLAG, LG_B_STAGE, LG_B_LOAD, LG_B_L2, LG_B_PREFETCH, LG_B_READ, LG_NBENCH };

#define LG_SOURCE_MAX 160
#define LG_MAX_POINTS 64

typedef struct lg_consts {
    lg_device dev[LG_NDEV];
    char source[LG_NDEV][LG_NCONST][LG_SOURCE_MAX]; /* where each value comes from */
    unsigned char assumed[LG_NDEV][LG_NCONST]; /* its source begins "assumption" */
    lg_point pt[LG_MAX_POINTS];
    char pt_source[LG_MAX_POINTS][LG_SOURCE_MAX];
    int n_pt;
    double bench[LG_NDEV][LG_NBENCH]; /* the microbenchmark's figures, 0 where not given */
    char bench_source[LG_NDEV][LG_NBENCH][LG_SOURCE_MAX];
} lg_consts;

const char *lg_const_name(int k);
const char *lg_dev_name(int d);
/* Parses the constants text (name: the file's name for messages). Every
 * constant must be given for every device; errors read
 * "NAME:LINE: reason" or "NAME: reason". */
int lg_consts_parse(const char *text, const char *name, lg_consts *c, sd_err *e);
/* The same from a file (errors name it). */
int lg_consts_load(const char *path, lg_consts *c, sd_err *e);
/* The path of a measured figure's key, or -1 when it is not one. */
int lg_point_path(const char *key);
/* The measured value of key on dev, or -1 when there is none. */
double lg_consts_point(const lg_consts *c, const char *key, int dev);
/* The name of a microbenchmark figure (flag_us, ...; its key less "persist:"). */
const char *lg_bench_name(int b);
/* Sets the constants of dev that its microbenchmark figures measure:
 * flag_us from persist:flag_us, load_us from persist:load_us less
 * persist:l2_us (the part of a first load that an L2 prefetch can hide)
 * where that is positive. Returns the set constants as bits (1u << LG_FLAG_US, ...). */
unsigned lg_consts_fit_bench(lg_consts *c, int dev);

/* The text of a file of at most 1 MiB (no NUL bytes), malloc'd into *out;
 * errors name the file. */
int lg_read_text(const char *path, char **out, sd_err *e);
/* The next line of the text at *s into line (LG_LINE_MAX bytes, without
 * its newline or a carriage return before it), *s past it and *ln counted:
 * 1, or 0 at the end, or -1 for a line too long ("NAME:LINE: ..."). */
#define LG_LINE_MAX 512
int lg_next_line(const char **s, char *line, int *ln, const char *name, sd_err *e);

/* ---- the targets (ledger_targets.c) --------------------------------------- */

#define LG_MAX_TARGETS 16
#define LG_MAX_ALPHA 8

/* The GPU targets, as docs/perf/gpu-targets.txt states them (the
 * file's head describes its lines): decode targets by preset (tok/s, or %
 * of the copy bound when pct), verification ratios by the rows they cover,
 * the speculative speedup, and the acceptance rates it is implied at. */
typedef struct lg_targets {
    struct {
        char preset[48];
        int pct;
        double value;
    } decode[LG_MAX_TARGETS];
    int n_decode;
    int verify_rows[LG_MAX_TARGETS];
    double verify_ratio[LG_MAX_TARGETS];
    int n_verify;
    double spec;
    double accept[LG_MAX_ALPHA];
    int n_accept;
} lg_targets;

/* Parses the targets text (name: the file's name for messages); errors
 * read "NAME:LINE: reason" or "NAME: reason". */
int lg_targets_parse(const char *text, const char *name, lg_targets *t, sd_err *e);
int lg_targets_load(const char *path, lg_targets *t, sd_err *e);
/* The largest ratio the targets allow an n-row call (0: none applies). */
double lg_targets_verify(const lg_targets *t, int n);

/* ---- paths and their cost (ledger_cost.c) --------------------------------- */

/* graph+pdl: the CUDA backend's default (backend_cuda.cu), each step one
 *   graph launch with programmatic dependent launch, norms folded;
 * graph+pdl nofold: the same with every norm launched on its own (what the
 *   first measured runs ran);
 * persist stage: the persistent step (step.cu) with stage-level waits only
 *   (SD_CUDA_WAITS_STAGE) and a work list built on the host every step: the
 *   graph's launches (norms folded, each item of a folding product making
 *   its tile's normalised rows) as stages of one cooperative launch, each
 *   waiting for every item of the stages it depends on;
 * persist fine: the persistent step as SD_CUDA_PERSISTENT=1 runs it:
 *   attention waits for the Q/K/V items of its own K/V head (a chunk wait),
 *   every other wait is for a whole stage (the data's all-to-all
 *   dependencies), an L2 prefetch of an item's weights before its wait,
 *   the work list kept per step shape;
 * graph+pdl mma: graph+pdl with SD_CUDA_MMA=1, the products of quantised,
 *   BF16 and F16 weights on tensor cores for every row count (mv_mma.cuh),
 *   every weight read and dequantised once for all rows;
 * persist fine mma: persist fine with those products (SD_CUDA_PERSISTENT=1
 *   SD_CUDA_MMA=1: the step's product stages on tensor cores, attention's
 *   chunks drawn from the mma layout, and no norm folded: the nofold
 *   launches as its stages);
 * persist fine smem: persist fine with SD_CUDA_STAGE=1: a matrix-vector
 *   item's weight rows are copied into the block's shared memory while it
 *   waits (kernels/cuda/stage.cuh), so after a wait it exposes smem_us in
 *   place of what of load_us the wait did not cover. */
enum {
    LG_GRAPH_PDL, LG_GRAPH_PDL_NOFOLD, LG_PERSIST_STAGE, LG_PERSIST_FINE, LG_GRAPH_PDL_MMA,
    LG_PERSIST_FINE_MMA, LG_PERSIST_FINE_SMEM, LG_NPATH
};

const char *lg_path_name(int path);
/* The path's tag in measured figures' keys (nofold, pdl, stage, fine,
 * pdl_mma, fine_mma, fine_smem); lg_path_of_tag gives the path of a tag of len
 * bytes, or -1. */
const char *lg_path_tag(int path);
int lg_path_of_tag(const char *tag, size_t len);

/* What one call costs on a path. */
typedef struct lg_step {
    int launches;    /* kernel launches (a persistent step's cooperative launch counts one) */
    int nodes;       /* nodes of the step's graph, copies included (0: no graph) */
    int stages;      /* stages of a persistent step */
    int waits;       /* waits for a whole kernel or stage: kernel boundaries, stage waits */
    int partial;     /* item-level waits (a few items of the stage before) */
    double w_bytes;  /* weight bytes streamed */
    double kv_bytes; /* KV cache bytes read and written */
    double act_bytes; /* activations, logits and scratch read and written */
    double mem_us;   /* the bytes at eta x copy_gbs */
    double work_us;  /* the products' compute, summed over their kernels */
    double exposed_us; /* launches, waits, host: what is not a body */
    double us;       /* predicted time of the call: the kernels' or stages' bodies,
                        each max(bytes, compute), plus exposed_us */
} lg_step;

/* The cost of trace t on path with device d's constants. */
int lg_cost(const lg_trace *t, int path, const lg_device *d, lg_step *s, sd_err *e);

/* Speculative decoding's implied speedup: tokens a round at acceptance
 * alpha per draft and gamma drafts, (1 - alpha^(gamma+1)) / (1 - alpha)
 * (gamma + 1 at alpha = 1), times the target's one-row step t1 over the
 * round's cost gamma * draft + verify (gamma + 1 rows). */
double lg_spec_speedup(double alpha, int gamma, double t1, double draft, double verify);

#endif
