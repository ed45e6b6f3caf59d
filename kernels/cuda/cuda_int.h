/* Internal to kernels/cuda/*.cu: the backend context, the device weight
 * layout, and the launchers each kernel file provides.
 *
 * Streams: every backend owns one non-blocking stream and queues all of its
 * work there, so ops run in call order without host synchronisation; only
 * to_host, top_k_rows and scratch growth wait for the stream.
 *
 * Errors: each launcher returns 0 or -1 with e filled as
 *   "cuda: <op> <type> <rows>x<cols> launch: <CUDA error string>"
 * Kernel faults surface at the next synchronising call; with cuda_sync
 * (sd_backend_opts) every launch is followed by a stream synchronisation,
 * so a fault is reported by the op that caused it. */
#ifndef SD_CUDA_INT_H
#define SD_CUDA_INT_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "kernels/backend.h"
#include "kernels/cuda/backend_cuda.h"
#include "kernels/common/wtype.h"
}

/* Scratch slots grown on demand (see cu_scratch). QACT holds the int8
 * activations a product reads; QOUT those that ffn_swiglu makes of its
 * output while QACT still holds its input's (qact.cu). */
enum {
    CU_SCRATCH_QACT = 0,
    CU_SCRATCH_ATTN = 1,
    CU_SCRATCH_IDS = 2,
    CU_SCRATCH_QOUT = 3,
    CU_SCRATCH_N = 4
};

/* A decode step as graph_end sees it (backend_cuda.cu, "graphs"): the op
 * calls recorded (cu_rec, defined there), the beams' cache bases of its
 * qkv_rope_same_pos calls, and, once captured, the executable graph with
 * the scratch buffers it was captured against and a use stamp. */
typedef struct cu_rec cu_rec;
typedef struct cu_graph {
    cudaGraphExec_t exec; /* NULL: nothing captured */
    cu_rec *rec;
    int nrec, rec_cap;
    void **ptr;
    int nptr, ptr_cap;
    void *scratch[CU_SCRATCH_N];
    long used;
} cu_graph;
/* Executable graphs kept: a decode step, a verification step, a drafter's
 * shallow step (self-speculation) and one spare. */
enum { CU_GRAPHS = 4 };

/* A pending norm (norm.cu): out[n][dim] = rmsnorm(x) * w, not launched yet.
 * seq is the op that asked for it. The matrix-vector op right after it
 * (seq + 1) that reads exactly out folds it into its own launch (mv.cuh
 * mv_act: each block normalises the rows it needs into shared memory, and
 * the first blocks write out); every other op, and one that cannot fold
 * it, launches it first (cu_norm_flush). */
typedef struct cu_norm {
    float *out;
    const float *x, *w;
    int n, dim;
    float eps;
    long seq;
} cu_norm;

/* ---- the persistent step (step.cu) -------------------------------------------
 * While c->step is set (graph_end building a persistent step), a launcher
 * launches nothing: it adds its launch to the step as a stage (cu_step_add)
 * with the kernel (kind, and a variant the kind defines), its argument
 * struct by value, its virtual blocks, its dynamic shared memory, and the
 * device memory its blocks read and write (spans), from which step.cu
 * derives which earlier stages it waits for. */
enum {
    CU_STEP_MM,         /* MmArgs, variant mv_step_variant (mv.cuh) or mq_step_variant (mv_mma.cuh) */
    CU_STEP_FFN,        /* FfnArgs, the same */
    CU_STEP_QKV,        /* QkvArgs, the same */
    CU_STEP_QKV_BEAMS,  /* QkvScatterArgs, the same */
    CU_STEP_SWIGLU,     /* SwigluArgs */
    CU_STEP_ATTN,       /* AttnArgs, variant D = ceil(head dim / 32) */
    CU_STEP_ATTN_MERGE, /* AttnArgs, the same */
    CU_STEP_NORM,       /* RnArgs */
    CU_STEP_QACT,       /* QaArgs */
    CU_STEP_EMBED,      /* EmArgs */
    CU_STEP_TOPK,       /* TkArgs (top_k.cuh) */
    CU_STEP_ARGMAX_PART,  /* AmPartArgs */
    CU_STEP_ARGMAX_FINAL  /* AmFinalArgs */
};
typedef struct cu_span {
    const void *p;
    size_t bytes;
    int write;
} cu_span;
/* A launch's spans; n = -1 once more were added than fit (the step then
 * cannot take the launch). The most: a beam step's K/V rows. */
enum { CU_STEP_SPANS = 2 * SD_MAX_ROWS + 16 };
typedef struct cu_spans {
    cu_span s[CU_STEP_SPANS];
    int n;
} cu_spans;
static inline void cu_span_add(cu_spans *l, const void *p, size_t bytes, int write) {
    if (l->n < 0 || !p || !bytes) return;
    if (l->n == CU_STEP_SPANS) {
        l->n = -1;
        return;
    }
    l->s[l->n].p = p;
    l->s[l->n].bytes = bytes;
    l->s[l->n].write = write;
    l->n++;
}
typedef struct cu_persist cu_persist;

typedef struct sd_cuda {
    int device;
    int sms;           /* multiprocessors, for sizing grids */
    int sync_each;     /* cuda_sync: synchronise after every launch */
    cudaStream_t stream;
    void *scratch[CU_SCRATCH_N];
    size_t scratch_size[CU_SCRATCH_N];
    int32_t *top_k_dev;  /* [SD_MAX_ROWS][SD_TOP_K_MAX] ids, then as many probabilities */
    int32_t *top_k_host; /* the same, pinned, so the copy back is one DMA */
    void *top_k_part;    /* cu_top_k_part_bytes(): the multi-block argmax's pairs */
    unsigned *attn_ctr;  /* [CU_ATTN_COUNTERS], zero between launches: attention.cu's
                            split counters (the last split merges) */
    unsigned *ffn_ctr;   /* [CU_FFN_COUNTERS], zero between launches: ffn.cu's
                            block counters (the last of a group quantises it) */
    int attn_merge_launch; /* cuda_attn_merge_launch: merge the splits in a
                              launch of their own, as calls too large for the
                              counters do (so that tests reach that path) */
    /* embed's token ids staged in pinned memory (no pageable copy): ids_cap
     * ids; ids_copied marks the end of the last copy out of it, which the
     * next embed waits for before it writes the staging again */
    int32_t *ids_host;
    int ids_cap;
    cudaEvent_t ids_copied;
    /* graph_begin/graph_end (backend.h), backend_cuda.cu "graphs": graph_on
     * switches them (cuda_graph at sd_backend_cuda; sd_cuda_set_graph).
     * While recording, op calls only append to cur; graph_end replays the
     * graph of graphs[] whose calls equal them, or captures them (capturing
     * set, pos_dev pointing at pos_word so the position kernels read it)
     * into the least recently used slot. pos_host is the pinned staging of
     * the step's position, copied to pos_word by each graph's first node;
     * like ids_host it is written again only after ids_copied. */
    int graph_on, recording, capturing;
    int rec_pos, rec_mixed;      /* the recorded step's position; 1: calls disagree on it */
    int rec_ids;                 /* token ids the recorded embeds staged, end to end */
    /* the recorded top_k_rows calls' results: where each lands on the host
     * once graph_end has run the step (their ids at top_k_dev + off, their
     * probabilities as many floats after the ids' area), and the ids
     * staged so far */
    struct {
        int32_t *ids;
        float *probs;
        int off, n;
    } rec_tk[SD_MAX_ROWS];
    int rec_ntk, rec_tk_used;
    size_t rec_need[CU_SCRATCH_N]; /* scratch the recorded calls need */
    cu_graph cur;
    cu_graph graphs[CU_GRAPHS];
    long clock;                  /* stamps cu_graph.used */
    int *pos_host, *pos_word;
    const int *pos_dev;
    sd_cuda_graph_stats gstats;
    /* Ops counted as they start (cu_enter, and each op graph_end issues);
     * qtag: the rows whose int8 blocks the op that wrote them left in
     * scratch slot `slot` (RMSNorm and attention: QACT; ffn_swiglu: QOUT),
     * valid for the op after it (seq + 1 == op_seq), qact.cu */
    long op_seq;
    int pdl; /* programmatic dependent launch (see cu_launch_cfg) */
    struct {
        const float *x;
        int n;
        int64_t cols;
        long seq;
        int slot;
    } qtag;
    /* Folded norms (norm.cu, mv.cuh): fuse_norm is the resident blocks a
     * multiprocessor the folding launches plan for, fewer where the kernel's
     * occupancy is lower (mv.cuh mv_grid), 0 when off (on, 8: the residency
     * of a 64-register block of 128 threads, so a folding launch keeps as
     * many warps streaming as a plain one: the default cuda_fuse_norm,
     * kernels/common/backend_opts.c; sd_cuda_set_fuse_norm); norm is the norm left pending (out NULL: none). */
    int fuse_norm;
    cu_norm norm;
    /* cuda_mma (sd_backend_opts; sd_cuda_set_mma): products with quantised
     * weights on tensor cores (mv_mma.cuh), for every row count; 0: the
     * __dp4a tiles of mv.cuh. */
    int mma;
    long folded; /* norms folded so far (sd_cuda_norms_folded) */
    /* cuda_persistent (sd_backend_opts) on sm_90 or newer (step.cu is built
     * for those alone, Makefile): graph_end runs a recorded step as
     * one persistent launch (step.cu) where it can; pst its state (NULL
     * until the first); step set while the launchers add stages to it;
     * persist_waits how its stages wait (SD_CUDA_WAITS_*); stage: its
     * blocks stage weight rows in shared memory (cuda_stage, step.cu). */
    int persist_on, persist_waits, stage;
    cu_persist *pst;
    cu_persist *step;
    cu_graph pkept[CU_GRAPHS]; /* the records of step.cu's kept work lists (exec unused) */
} sd_cuda;

static inline sd_cuda *cu_ctx(sd_backend *b) { return (sd_cuda *)b->ctx; }

/* ---- programmatic dependent launch (sm_90) ---------------------------------
 * With c->pdl (a device of compute capability 9.0 or newer, unless
 * cuda_pdl = 0 at sd_backend_cuda) the kernels of a decode step (embed, rmsnorm,
 * qact, the matrix-vector family of mv.cuh, attention) are launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization, and each of them
 * first calls cu_grid_trigger(): once every block of the running kernel has
 * called it, the next kernel in the stream is launched and its blocks are
 * scheduled wherever they fit, while the running kernel still works.
 * cu_grid_wait() then holds each thread of the next kernel until the
 * running one has completed and its writes are visible, so the stream's
 * order is kept for everything a kernel reads or writes after its wait.
 *
 * What a kernel may do before its wait: read what no kernel of the step
 * writes, that is the weights (uploaded before any step) and its launch
 * arguments, and nothing else; in particular it writes nothing, since the
 * kernel before it may still be reading. The kernels of a layer use this to
 * start streaming their weights: the matrix-vector kernels load their first
 * chunks of weights into registers (mv.cuh), RMSNorm its gain vector, so
 * the memory latency of a kernel overlaps the tail of the one before. With
 * the trigger at the start, several kernels may be launched ahead; each
 * waits only for the one before it, which waited for its own predecessor.
 * Kernels launched plainly wait as always; in a captured graph the
 * attribute becomes a programmatic edge. at: the attribute's storage, alive
 * until the launch. */
static inline cudaLaunchConfig_t cu_launch_cfg(const sd_cuda *c, dim3 grid, dim3 block,
                                               size_t smem, cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = c->stream;
    at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = c->pdl ? 1 : 0;
    return cfg;
}

/* Reads of what a kernel of the step wrote (activations, the KV cache,
 * partials): a plain coherent load. Never __ldg or ld.global.nc for these:
 * the read-only path requires the data not to change while the kernel
 * lives, and under programmatic dependent launch the kernel is alive
 * before the one it waits for has written them; the first H200 run with
 * early triggers returned stale activations through it (an F32 model,
 * logits off by 1.29). __ldg is for weights only. */
template <class T>
__device__ __forceinline__ T cu_ld_act(const T *p) {
    return *p;
}

/* The wait of a kernel launched with cu_launch_cfg, and the signal that
 * lets the next one launch (no-ops before sm_90, where no launch carries the
 * attribute, and for a kernel launched without it). */
__device__ __forceinline__ void cu_grid_wait(void) {
#if defined(CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
    cudaGridDependencySynchronize();
#endif
}
__device__ __forceinline__ void cu_grid_trigger(void) {
#if defined(CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
    cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/* "cuda: <what>: <error string>" into e; returns -1. */
int cu_fail(sd_err *e, cudaError_t err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* After a launch: the launch error, or (cuda_sync) the execution error. */
int cu_check_launch(sd_cuda *c, sd_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Device buffer of slot grown to at least bytes (waits for queued work
 * before freeing the old one); NULL with e filled on failure, and while a
 * graph is being recorded when the buffer would have to grow (the caller
 * then runs the step without the graph). */
void *cu_scratch(sd_cuda *c, int slot, size_t bytes, sd_err *e);

/* ---- device weight layout ------------------------------------------------
 * upload_weight rewrites w->data to one device allocation of three arrays,
 * each starting on a 256-byte boundary:
 *   [rows][qrow bytes]  values: F32/F16/BF16 as in GGUF; for Q8_0 the int8
 *                       quants of a row end to end (cols bytes); for the
 *                       4- to 6-bit types 16 bytes of low nibbles per 32
 *                       elements, in Q4_0's order (byte j: element j low,
 *                       j+16 high), end to end (cols/2 bytes)
 *   [rows][hrow bytes]  high bits per 32 elements: Q5_0 one 32-bit word,
 *                       Q6_K two (bits 4 and 5 of each element); absent
 *                       for the other types
 *   [rows][srow bytes]  scales: f16 d per 32 elements (Q8_0, Q4_0, Q5_0),
 *                       f16 d | f16 m as one 32-bit word per 32 (Q4_1);
 *                       per 256-element super-block 16 bytes for Q4_K (d,
 *                       dmin, the 12 packed scale bytes, as GGUF has them)
 *                       and 20 for Q6_K (16 int8 scales, f16 d, 2 zero
 *                       bytes); absent for float types
 * so that a warp reads a row's values as consecutive 16-byte vectors and its
 * high bits and scales as consecutive 4/8-byte and 2/4-byte words (GGUF's
 * 34/18/20/22/144/210-byte blocks are not 16-byte aligned, and its K-quant
 * nibble order spreads 32 consecutive elements over 32 bytes). Every
 * quantised type thus has "chunks" of 32 elements, one activation block
 * each: 16 value bytes, 0/4/8 high-bit bytes, a scale word or a share of a
 * super-block record. The high-bit words are rearranged at upload so that
 * the bits of elements 4g..4g+3 (g = 0..7, the g-th 4-byte dot product of
 * the chunk) sit at one shift in each byte: element i = 4g + e has its
 * fifth bit (Q5_0) at bit 8e + g of the word, its bits 4-5 (Q6_K) at bits
 * 8e + 2(g%4) of word g/4. w->row_bytes keeps the GGUF row size. */
static inline int cu_is_quant(uint32_t t) {
    return t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q4_1 || t == SD_Q5_0 || t == SD_Q4_K ||
           t == SD_Q6_K;
}

static inline int cu_is_kquant(uint32_t t) { return t == SD_Q4_K || t == SD_Q6_K; }

static inline size_t cu_elem_bytes(uint32_t t) { return t == SD_F32 ? 4 : 2; }

static inline size_t cu_qrow_bytes(uint32_t t, int64_t cols) {
    if (t == SD_Q8_0) return (size_t)cols;
    if (cu_is_quant(t)) return (size_t)cols / 2;
    return (size_t)cols * cu_elem_bytes(t);
}

static inline size_t cu_hrow_bytes(uint32_t t, int64_t cols) {
    if (t == SD_Q5_0) return (size_t)cols / 8;
    if (t == SD_Q6_K) return (size_t)cols / 4;
    return 0;
}

static inline size_t cu_srow_bytes(uint32_t t, int64_t cols) {
    if (t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q5_0) return (size_t)(cols / 32) * 2;
    if (t == SD_Q4_1) return (size_t)(cols / 32) * 4;
    if (t == SD_Q4_K) return (size_t)(cols / 256) * 16;
    if (t == SD_Q6_K) return (size_t)(cols / 256) * 20;
    return 0;
}

static inline size_t cu_align256(size_t n) { return (n + 255) & ~(size_t)255; }

static inline size_t cu_high_offset(uint32_t t, int64_t rows, int64_t cols) {
    return cu_align256((size_t)rows * cu_qrow_bytes(t, cols));
}

static inline size_t cu_scale_offset(uint32_t t, int64_t rows, int64_t cols) {
    return cu_align256(cu_high_offset(t, rows, cols) + (size_t)rows * cu_hrow_bytes(t, cols));
}

static inline size_t cu_weight_bytes(uint32_t t, int64_t rows, int64_t cols) {
    return cu_scale_offset(t, rows, cols) + (size_t)rows * cu_srow_bytes(t, cols);
}

/* Checks a weight against what the kernels support; fills e naming op. */
int cu_check_weight(const sd_weight *w, const char *op, sd_err *e);

/* ---- launchers (one file each) -------------------------------------------- */
/* repack.cu: GGUF rows on the device (row_bytes apart) -> the layout above. */
int cu_repack(sd_cuda *c, void *dst, const void *raw, const sd_weight *w, sd_err *e);
/* qact.cu: the scratch bytes cu_qact takes for n rows of cols, and scratch
 * slot `slot` (QACT or QOUT) split into its q, d and s arrays (grown as
 * needed). */
size_t cu_qact_bytes(int n, int64_t cols);
int cu_qact_buffers(sd_cuda *c, int slot, int n, int64_t cols, int8_t **q, float **d, float **s,
                    sd_err *e);
/* The int8 activations [n][cols] of q, d and s as spans a launch writes. */
static inline void cu_qact_spans(const int8_t *q, const float *d, const float *s, int n,
                                 int64_t cols, cu_spans *sp) {
    const size_t blocks = (size_t)n * (size_t)(cols / 32);
    cu_span_add(sp, q, (size_t)n * (size_t)cols, 1);
    cu_span_add(sp, d, blocks * sizeof(float), 1);
    cu_span_add(sp, s, blocks * sizeof(float), 1);
}
/* qact.cu: after an op has written the int8 blocks of x[n][cols] into slot:
 * the next op's cu_qact of exactly those rows takes them. */
void cu_qtag_set(sd_cuda *c, const float *x, int n, int64_t cols, int slot);
/* qact.cu: x[n][cols] -> int8 activations in the scratch: q [n][cols] and
 * per block of 32, d [n][cols/32] and s = d * sum(q) [n][cols/32]; no
 * launch when the op before left them (cu_qtag_set). */
int cu_qact(sd_cuda *c, const float *x, int n, int64_t cols, int8_t **q, float **d, float **s,
            sd_err *e);
/* matvec.cu */
int cu_matmul(sd_cuda *c, float *out, const sd_weight *w, const float *x, int n, int accumulate,
              sd_err *e);
/* qkv_rope.cu. While c->pos_dev is set (graph capture) the kernels read the
 * position from it, and k_rows/v_rows (k_dst/v_dst) are the rows of
 * position 0, the cache bases; pos only checks. */
int cu_qkv_rope(sd_cuda *c, const sd_attn_shape *s, float *q, float *k_rows, float *v_rows,
                const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                int n, int pos, sd_err *e);
/* The same with every row at pos and row i's K/V written to k_dst[i]/v_dst[i]
 * (n <= SD_MAX_ROWS; the pointers travel in the kernel arguments). */
int cu_qkv_rope_same_pos(sd_cuda *c, const sd_attn_shape *s, float *q, float *const *k_dst,
                         float *const *v_dst, const sd_weight *wq, const sd_weight *wk,
                         const sd_weight *wv, const float *x, int n, int pos, sd_err *e);
/* ffn.cu; cu_ffn_fuses_qact: whether it also leaves h's int8 blocks */
int cu_ffn_fuses_qact(const sd_weight *w1, const sd_weight *w3);
int cu_ffn_swiglu(sd_cuda *c, float *h, float *tmp, const sd_weight *w1, const sd_weight *w3,
                  const float *x, int n, sd_err *e);
/* norm.cu (also quantises out into the scratch when dim % 32 == 0, see qact.cu);
 * with c->fuse_norm and dim % 32 == 0 it only leaves the norm pending
 * (cu_norm above). cu_norm_flush launches a pending norm (none: nothing). */
int cu_rmsnorm(sd_cuda *c, float *out, const float *x, const float *w, int n, int dim, float eps,
               sd_err *e);
int cu_norm_flush(sd_cuda *c, sd_err *e);
/* attention.cu (the position from c->pos_dev while it is set); the split counters cover this many (kv head, query tile) pairs */
enum { CU_ATTN_COUNTERS = 65536 };
/* ffn.cu: its block counters cover this many (activation tile, group of 32
 * hidden units) pairs */
enum { CU_FFN_COUNTERS = 65536 };
int cu_attention(sd_cuda *c, const sd_attn_shape *s, float *out, const float *q, const float *kc,
                 const float *vc, int n, int pos, sd_err *e);
/* The scratch bytes cu_attention takes for its split partials (0: none). */
size_t cu_attention_scratch(const sd_cuda *c, const sd_attn_shape *s, int n, int pos);
/* embed.cu (ids already on the device, checked by the caller) */
int cu_embed(sd_cuda *c, float *x, const sd_weight *emb, const int32_t *ids_dev, int n,
             sd_err *e);
/* top_k.cu: out_dev[r*k ..] = the k largest of row r of x[n_rows][cols]
 * (value desc, index asc), rows and k checked by the caller; probs_dev
 * (NULL: none) their softmax probabilities over the row. */
int cu_top_k_rows(sd_cuda *c, int32_t *out_dev, float *probs_dev, const float *x, int n_rows,
                  int cols, int k, sd_err *e);
/* The argmax (k = 1) of a row of at least 2 x CU_ARGMAX_MIN_SLICE elements
 * runs on cu_argmax_split(cols) blocks a row (at most CU_ARGMAX_MAX_SPLIT),
 * their pairs in c->top_k_part (cu_top_k_part_bytes(), made with the
 * backend). */
enum { CU_ARGMAX_MIN_SLICE = 2048, CU_ARGMAX_MAX_SPLIT = 128 };
int cu_argmax_split(int cols);
size_t cu_top_k_part_bytes(void);

/* step.cu. cu_step_add: a launcher's launch as a stage of the step being
 * built (see "the persistent step" above); -1 with e filled when the step
 * cannot take it. cu_step_begin starts building (c->step set, norms not
 * folded: each is a stage of its own); cu_step_end stops, and when ok runs
 * the stages as one cooperative launch, keeping the work list in slot
 * 0..CU_GRAPHS-1 (another slot: not kept): 0, or -1 with e filled when
 * the step cannot run persistently (nothing was launched; the caller runs
 * the records another way). cu_step_replay launches the list kept in slot
 * again (built with the position read from pos_dev, so it holds at any
 * position); 0 or -1 with e filled. cu_step_free releases the state with
 * the backend. */
int cu_step_add(sd_cuda *c, int kind, int variant, const void *args, size_t bytes,
                unsigned blocks, size_t smem, const cu_spans *sp, sd_err *e);
int cu_step_begin(sd_cuda *c, sd_err *e);
int cu_step_end(sd_cuda *c, int ok, int slot, sd_err *e);
int cu_step_replay(sd_cuda *c, int slot, sd_err *e);
void cu_step_free(sd_cuda *c);

/* The stream a backend queues its work on (bench timing). */
cudaStream_t sd_cuda_stream(sd_backend *b);

#endif
