/* The ledger's paths: a recorded step (ledger_trace.c) as the kernels a
 * CUDA path launches for it, their bytes and waits, and the predicted time.
 *
 * The kernels follow kernels/cuda/backend_cuda.cu and the launchers it calls:
 *   - rmsnorm is left pending (norm.cu cu_rmsnorm, with folding on and a
 *     dim that is a multiple of 32) and folded by the matrix-vector op
 *     right after it that reads exactly its output, when the op's tile of
 *     normalised rows fits MV_FOLD_SMEM (mv.cuh mv_act, mv_fold_bytes); any
 *     other op launches it first, and a launched norm leaves its int8 rows
 *     for the next op (qact.cu's tag);
 *   - a product on quantised weights that folds nothing quantises its
 *     input in a launch of its own (cu_qact) unless the op before left
 *     those rows: a launched norm, attention with heads of whole 32-blocks,
 *     a SwiGLU on two weights of one quantised type whose rows are whole
 *     blocks (cu_ffn_fuses_qact);
 *   - qkv_rope is one launch when Q, K and V share a type, else one each
 *     (qkv_rope.cu); ffn_swiglu one launch when gate and up share a type,
 *     else two products and an elementwise kernel (ffn.cu); attention one
 *     launch (its splits merge in the last block, attention.cu);
 *   - a dp4a launch of n rows reads its weights once per tile of
 *     sd_mv_tile_rows(n) rows (kernels/cuda/plan.h); an mma launch
 *     (quantised weights, any row count) reads them once;
 *   - the graph holds everything up to the head's product and the argmax
 *     (top_k_rows, recorded with the step: one kernel, two where the row
 *     is split, top_k.cu cu_argmax_split) plus two copy nodes (the
 *     position and the token ids); on the persistent paths the argmax is
 *     the step's last stages.
 * The constants below mirror those files (a change there is a change
 * here; the GPU suite's decode_graph checks the node count the same rules
 * give). The persistent paths take the launches of the graph as their
 * stages, norms folded as there (step.cu), but persist fine mma, whose
 * step folds none (the nofold graph's launches).
 *
 * Time of a kernel's body: the larger of its bytes at eta x copy_gbs and
 * its products' compute. dp4a: weight elements x rows at quant_rate
 * (float_rate for float weights). mma (quantised weights, every row count,
 * kernels/cuda/mv_mma.cuh): the dequantisation of every weight once, as a
 * one-row dp4a call costs it (elements at quant_rate: an upper bound, that
 * call's dp4a included), the mma issue at imma_rate x mma_eff, and the
 * float combine of each 32-block's sum (COMBINE_FMA multiply-adds a weight
 * row, activation row and block) at float_rate. Their sum, not their max:
 * the three share the warps' issue. The issue counts what mv_mma.cuh
 * issues, not the useful products: its B is block diagonal, one m16n8k32
 * taking four chunks of 16 weight rows against two activation rows, so it
 * issues MMA_ISSUE multiply-adds a weight and activation-row pair (rows
 * rounded up to even). BF16 and F16 weights take the same split on the
 * bf16 mma at hmma_rate, each activation as two bf16 (hi + lo) and an F16
 * weight as two more: BF16_SPLIT and F16_SPLIT mma where a quantised chunk
 * takes one. F32 weights stay on the float tiles.
 *
 * Exposed, beyond the bodies:
 *   graph+pdl: kernel_us a kernel in the graph, launch_us one outside;
 *   persist stage: launch_us once, build_us a stage, max(op_us, body) a
 *     stage, and at each stage wait flag_us + tail_us + load_us; a product
 *     stage that folds a norm adds op_us more (every item makes its tile's
 *     normalised rows before its products, where a folded launch's block
 *     does so once for its virtual blocks);
 *   persist fine: no build; at a stage-level (all-to-all) wait flag_us +
 *     tail_us, at an item-level wait flag_us, each plus what of load_us the
 *     wait itself does not cover (the prefetch was issued when the item was
 *     taken, before its wait);
 *   persist fine smem: as persist fine, but a wait before a matrix-vector
 *     stage exposes smem_us in place of the rest of load_us (the item's
 *     rows were staged in shared memory while it waited; every product is
 *     taken as staged, though NEOX Q/K/V and rows too large for the
 *     buffer keep the L2 prefetch on the device);
 *   every step adds step_us. */
#include <string.h>

#include "engine/bench/ledger/ledger.h"
#include "kernels/cuda/plan.h"

/* mv.cuh MV_FOLD_SMEM; cuda_int.h CU_ARGMAX_MIN_SLICE, CU_ARGMAX_MAX_SPLIT */
enum { FOLD_SMEM = 48 * 1024, ARGMAX_MIN_SLICE = 2048, ARGMAX_MAX_SPLIT = 128 };
/* multiply-adds an mma issues a weight and pair of activation rows (16 x 8
 * x 32 for 16 rows x 4 chunks x 2 activation rows, mv_mma.cuh); of the float
 * combine of one 32-block's integer sum (its scale, and the offset term of
 * Q4_1 and the K-quants); the mma a BF16 and an F16 chunk takes */
enum { MMA_ISSUE = 8, COMBINE_FMA = 2, BF16_SPLIT = 2, F16_SPLIT = 3 };

/* The kernels' kinds, for the dependencies of the fine path. */
enum { K_EMBED, K_NORM, K_QACT, K_MV, K_ATTN, K_ELEM, K_ARGMAX };

static const struct {
    const char *name, *tag;
    int graph, fold, persist, mma; /* persist: 1 stage waits, 2 fine waits, 3 fine and staged */
} k_path[LG_NPATH] = {
    {"graph+pdl", "pdl", 1, 1, 0, 0},
    {"graph+pdl nofold", "nofold", 1, 0, 0, 0},
    {"persist stage", "stage", 0, 1, 1, 0},
    {"persist fine", "fine", 0, 1, 2, 0},
    {"graph+pdl mma", "pdl_mma", 1, 1, 0, 1},
    {"persist fine mma", "fine_mma", 0, 0, 2, 1},
    {"persist fine smem", "fine_smem", 0, 1, 3, 0},
};

const char *lg_path_name(int path) { return path >= 0 && path < LG_NPATH ? k_path[path].name : "?"; }
const char *lg_path_tag(int path) { return path >= 0 && path < LG_NPATH ? k_path[path].tag : "?"; }

int lg_path_of_tag(const char *tag, size_t len) {
    for (int p = 0; p < LG_NPATH; p++)
        if (strlen(k_path[p].tag) == len && !strncmp(tag, k_path[p].tag, len)) return p;
    return -1;
}

/* Weight types the CUDA kernels take with int8 activations (cuda_int.h
 * cu_is_quant); of the others, BF16 and F16 go to the bf16/f16 mma. */
static int is_quant(uint32_t t) {
    return t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q4_1 || t == SD_Q5_0 || t == SD_Q4_K ||
           t == SD_Q6_K;
}

static int is_half(uint32_t t) { return t == SD_BF16 || t == SD_F16; }

static double w_bytes(const lg_w *w) {
    return (double)sd_row_bytes(w->type, (uint64_t)w->cols) * (double)w->rows;
}

/* Bytes of n activation rows of cols as a product reads them: int8 with
 * two floats a 32-block for quantised weights, floats otherwise. */
static double act_in(int quant, int n, int64_t cols) {
    return quant ? (double)n * (double)cols * (1.0 + 8.0 / 32) : 4.0 * n * (double)cols;
}

/* A product's weight elements by the unit that computes them. */
typedef struct work {
    double q, h, f; /* quantised, BF16/F16, F32 */
    double h_mma;   /* the BF16/F16 ones weighted by their mma a chunk */
    int n;          /* activation rows */
} work;

typedef struct sim {
    const lg_device *d;
    int path;
    lg_step *s;
    int seq;
    int prev_kind, prev_seq; /* the last stage's kind and op (-1: none yet) */
    /* the pending norm; folding: the next product stage folds it */
    int pending, p_n, p_seq, folding;
    const void *p_out, *p_x;
    int64_t p_dim;
    /* the int8 rows the last op left (qact.cu's tag) */
    const void *q_x;
    int q_n, q_seq;
    int64_t q_cols;
} sim;

/* Whether a product of weight type t runs on the mma on this path. */
static int on_mma(const sim *m, uint32_t t) { return k_path[m->path].mma && (is_quant(t) || is_half(t)); }

static double work_us(const sim *m, const work *w) {
    const double *v = m->d->v;
    if (!w->q && !w->h && !w->f) return 0;
    const int mma = k_path[m->path].mma;
    const double issue = MMA_ISSUE * (double)((w->n + 1) / 2) / (v[LG_MMA_EFF]);
    const double q = mma ? w->q / v[LG_QUANT_RATE] + w->q * issue / v[LG_IMMA_RATE] +
                               w->q * w->n * COMBINE_FMA / 32 / v[LG_FLOAT_RATE]
                         : w->n * w->q / v[LG_QUANT_RATE];
    const double h = mma ? w->h_mma * issue / v[LG_HMMA_RATE] : w->n * w->h / v[LG_FLOAT_RATE];
    return 1e6 * (q + h + w->n * w->f / v[LG_FLOAT_RATE]);
}

/* The exposed latency of a wait of a stage of kind k: item-level (fine) or
 * stage-level. */
static double wait_us(const sim *m, int fine, int k) {
    const double *v = m->d->v;
    if (k_path[m->path].persist == 1) return v[LG_FLAG_US] + v[LG_TAIL_US] + v[LG_LOAD_US];
    const double w = v[LG_FLAG_US] + (fine ? 0 : v[LG_TAIL_US]);
    if (k_path[m->path].persist == 3 && k == K_MV) return w + v[LG_SMEM_US];
    return w + (v[LG_LOAD_US] > w ? v[LG_LOAD_US] - w : 0);
}

/* Whether a stage of kind k after the stage before (of kind pk) waits for
 * a few of its items only: attention for the Q/K/V items of its K/V head
 * (step.cu's chunk waits). Every other wait of the step is for a whole
 * stage: a norm needs its whole row, and each row of a product reads every
 * column of its activation rows (step.cu's header says why). */
static int fine_dep(int pk, int k) { return pk == K_MV && k == K_ATTN; }

/* One kernel of op m->seq: its kind, bytes by class and products' work. A
 * kernel of the same op as the one before that is a product after a
 * product (Q, K and V of mixed types, gate and up) does not depend on it. */
static void kernel(sim *m, int kind, int graph, double wb, double kvb, double actb, const work *w) {
    lg_step *s = m->s;
    const double *v = m->d->v;
    const double mem = (wb + kvb + actb) / (v[LG_ETA] * v[LG_COPY_GBS] * 1e3);
    const double cw = w ? work_us(m, w) : 0;
    const double body = mem > cw ? mem : cw;
    s->launches++;
    s->w_bytes += wb;
    s->kv_bytes += kvb;
    s->act_bytes += actb;
    s->mem_us += mem;
    s->work_us += cw;
    s->us += body;
    if (!k_path[m->path].persist || !graph) {
        const double x = graph ? v[LG_KERNEL_US] : v[LG_LAUNCH_US];
        if (graph) s->nodes++;
        s->waits += s->launches + s->stages > 1;
        s->us += x, s->exposed_us += x;
        return;
    }
    s->launches--; /* a stage of the one launch */
    s->stages++;
    if (body < v[LG_OP_US]) s->us += v[LG_OP_US] - body, s->exposed_us += v[LG_OP_US] - body;
    if (kind == K_MV && m->folding) s->us += v[LG_OP_US], s->exposed_us += v[LG_OP_US];
    const int sibling = m->prev_seq == m->seq && m->prev_kind == K_MV && kind == K_MV;
    if (m->prev_kind >= 0 && !sibling) {
        const int fine = k_path[m->path].persist >= 2 && fine_dep(m->prev_kind, kind);
        if (fine) s->partial++;
        else s->waits++;
        s->us += wait_us(m, fine, kind), s->exposed_us += wait_us(m, fine, kind);
    }
    m->prev_kind = kind, m->prev_seq = m->seq;
    if (kind == K_MV) m->folding = 0;
}

static void tag(sim *m, const void *x, int n, int64_t cols, int seq) {
    m->q_x = x, m->q_n = n, m->q_cols = cols, m->q_seq = seq;
}

/* A norm launched on its own: reads x and the gain, writes out and, when
 * dim holds whole 32-blocks, its int8 rows for the next op. */
static void norm_launch(sim *m, int graph, const void *out, int n, int64_t dim, int seq) {
    const int q = dim % 32 == 0;
    kernel(m, K_NORM, graph, 4.0 * (double)dim, 0,
           8.0 * n * (double)dim + (q ? act_in(1, n, dim) : 0), NULL);
    if (q) tag(m, out, n, dim, seq);
}

static void flush(sim *m, int graph) {
    if (!m->pending) return;
    m->pending = 0;
    norm_launch(m, graph, m->p_out, m->p_n, m->p_dim, m->p_seq);
}

/* A matrix-vector op's input: the pending norm folded, or launched, and
 * the int8 rows made when its weights need them and nobody left them. */
static void mv_input(sim *m, const lg_op *o, int need_q, int fl) {
    const int nt = sd_mv_tile_rows(o->n);
    const double fold = fl ? (double)nt * (double)o->cols * 4
                           : (double)nt * (double)o->cols + 8.0 * nt * (double)(o->cols / 32);
    if (m->pending && m->p_out == o->x && m->p_n == o->n && m->p_dim == o->cols &&
        m->p_seq + 1 == m->seq && fold <= FOLD_SMEM && o->out != m->p_x && o->out != m->p_out) {
        m->pending = 0;
        m->folding = 1;
        return;
    }
    flush(m, o->graph);
    if (need_q && !(m->q_x == o->x && m->q_n == o->n && m->q_cols == o->cols && m->q_seq + 1 == m->seq))
        kernel(m, K_QACT, o->graph, 0, 0, 4.0 * o->n * (double)o->cols + act_in(1, o->n, o->cols), NULL);
}

/* A product launch over weights ws[0..nw): each read once per row tile
 * (once for all rows on the mma). */
static void mv_launch(sim *m, const lg_op *o, const lg_w *ws, int nw, double out_bytes, double kvb) {
    const int nt = sd_mv_tile_rows(o->n);
    const int tiles = (o->n + nt - 1) / nt;
    double wb = 0;
    work w = {.n = o->n};
    int q = 0;
    for (int i = 0; i < nw; i++) {
        wb += w_bytes(&ws[i]) * (on_mma(m, ws[i].type) ? 1 : tiles);
        const double el = (double)ws[i].rows * (double)ws[i].cols;
        if (is_quant(ws[i].type)) w.q += el, q = 1;
        else if (is_half(ws[i].type)) w.h += el, w.h_mma += el * (ws[i].type == SD_BF16 ? BF16_SPLIT : F16_SPLIT);
        else w.f += el;
    }
    kernel(m, K_MV, o->graph, wb, kvb, act_in(q, o->n, o->cols) + out_bytes, &w);
}

static void step_op(sim *m, const lg_op *o) {
    const double n = o->n;
    switch (o->kind) {
    case LG_EMBED:
        flush(m, o->graph);
        if (o->graph && k_path[m->path].graph) m->s->nodes += 2;
        kernel(m, K_EMBED, o->graph, n * (double)sd_row_bytes(o->w[0].type, (uint64_t)o->w[0].cols), 0,
               4.0 * n * (double)o->cols, NULL);
        return;
    case LG_RMSNORM:
        flush(m, o->graph);
        if (k_path[m->path].fold && o->cols % 32 == 0) {
            m->pending = 1;
            m->p_out = o->out, m->p_x = o->x, m->p_n = o->n, m->p_dim = o->cols, m->p_seq = m->seq;
        } else {
            norm_launch(m, o->graph, o->out, o->n, o->cols, m->seq);
        }
        return;
    case LG_ATTN: {
        flush(m, o->graph);
        const double kv = 2.0 * 4 * (double)o->n_kv * o->head_dim * ((double)o->pos + n);
        kernel(m, K_ATTN, o->graph, 0, kv, 8.0 * n * (double)o->cols, NULL);
        if (o->head_dim % 32 == 0) tag(m, o->out, o->n, o->cols, m->seq);
        return;
    }
    case LG_TOPK: {
        flush(m, o->graph);
        int split = o->cols / ARGMAX_MIN_SLICE;
        split = o->k != 1 || split < 2 ? 1 : split > ARGMAX_MAX_SPLIT ? ARGMAX_MAX_SPLIT : split;
        kernel(m, K_ARGMAX, o->graph, 0, 0, 4.0 * n * (double)o->cols, NULL);
        if (split > 1) kernel(m, K_ARGMAX, o->graph, 0, 0, 12.0 * n * split, NULL);
        return;
    }
    default:
        break;
    }
    int need_q = 0, fl = 0, same = 1;
    for (int i = 0; i < o->nw; i++) {
        need_q |= is_quant(o->w[i].type);
        fl |= !is_quant(o->w[i].type);
        same &= o->w[i].type == o->w[0].type;
    }
    mv_input(m, o, need_q, fl);
    if (o->kind == LG_QKV) {
        const double kvw = 2.0 * 4 * n * (double)o->w[1].rows;
        const double outb = 4.0 * n * (double)(o->w[0].rows + 2 * o->w[1].rows);
        if (same) {
            mv_launch(m, o, o->w, 3, outb, kvw);
        } else {
            for (int i = 0; i < 3; i++)
                mv_launch(m, o, &o->w[i], 1, 4.0 * n * (double)o->w[i].rows, i ? kvw / 2 : 0);
        }
    } else if (o->kind == LG_MATMUL) {
        mv_launch(m, o, o->w, 1, (o->accumulate ? 8.0 : 4.0) * n * (double)o->w[0].rows, 0);
    } else if (same) {
        const int64_t rows = o->w[0].rows;
        const int fuses = is_quant(o->w[0].type) && rows % 32 == 0;
        mv_launch(m, o, o->w, 2, 4.0 * n * (double)rows + (fuses ? act_in(1, o->n, rows) : 0), 0);
        if (fuses) tag(m, o->out, o->n, rows, m->seq);
    } else {
        mv_launch(m, o, &o->w[0], 1, 4.0 * n * (double)o->w[0].rows, 0);
        mv_launch(m, o, &o->w[1], 1, 4.0 * n * (double)o->w[1].rows, 0);
        kernel(m, K_ELEM, o->graph, 0, 0, 12.0 * n * (double)o->w[0].rows, NULL);
    }
}

int lg_cost(const lg_trace *t, int path, const lg_device *d, lg_step *s, sd_err *e) {
    memset(s, 0, sizeof *s);
    if (path < 0 || path >= LG_NPATH) return sd_fail(e, "ledger: no path %d", path);
    const double *v = d->v;
    if (!(v[LG_ETA] > 0 && v[LG_COPY_GBS] > 0 && v[LG_QUANT_RATE] > 0 && v[LG_FLOAT_RATE] > 0 &&
          v[LG_IMMA_RATE] > 0 && v[LG_HMMA_RATE] > 0 && v[LG_MMA_EFF] > 0))
        return sd_fail(e, "ledger: eta, copy_gbs, the rates and mma_eff must be positive");
    sim m = {.d = d, .path = path, .s = s, .prev_kind = -1, .prev_seq = -1};
    for (int i = 0; i < t->n; i++) {
        m.seq = i;
        step_op(&m, &t->op[i]);
    }
    flush(&m, 0);
    double x = v[LG_STEP_US];
    if (k_path[path].persist) {
        s->launches++;
        x += v[LG_LAUNCH_US];
        if (k_path[path].persist == 1) x += v[LG_BUILD_US] * s->stages;
    }
    s->us += x, s->exposed_us += x;
    return 0;
}

double lg_spec_speedup(double alpha, int gamma, double t1, double draft, double verify) {
    double tok = 0, a = 1;
    for (int i = 0; i <= gamma; i++) tok += a, a *= alpha;
    const double cost = gamma * draft + verify;
    return cost > 0 ? tok * t1 / cost : 0;
}
