/* The ledger's paths: a recorded step (ledger_trace.c) as the kernels a
 * CUDA path launches for it, their bytes and waits, and the predicted time.
 *
 * graph+pdl follows kernels/cuda/backend_cuda.cu and the launchers it calls:
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
 *   - a launch of n rows reads its weights once per tile of
 *     sd_mv_tile_rows(n) rows (kernels/cuda/plan.h);
 *   - the graph holds everything up to the head's product plus two copy
 *     nodes (the position and the token ids); the argmax runs after it,
 *     two launches where the row is split (top_k.cu cu_argmax_split).
 * The constants below mirror those files (a change there is a change
 * here; the GPU suite's decode_graph checks the node count the same rules
 * give).
 *
 * persistent: one cooperative launch a step whose blocks run the ops in
 * order; norms and activation quantisation are done in the op that reads
 * them; each op boundary is a grid-wide barrier except where an op's tiles
 * depend on some tiles of the one before (attention of a KV head after the
 * Q/K/V rows of that head: a flag wait); weights are streamed once for up
 * to 16 rows; the argmax runs inside.
 *
 * Time: every kernel (graph+pdl) costs kernel_us (launch_us outside a
 * graph) plus its body, every op of a persistent step max(op_us, body);
 * a body is the larger of its bytes at eta x copy bandwidth and its
 * products' work at quant_rate / float_rate; a step adds step_us. */
#include <string.h>

#include "engine/bench/ledger/ledger.h"
#include "kernels/cuda/plan.h"

/* mv.cuh MV_FOLD_SMEM; cuda_int.h CU_ARGMAX_MIN_SLICE, CU_ARGMAX_MAX_SPLIT */
enum { FOLD_SMEM = 48 * 1024, ARGMAX_MIN_SLICE = 2048, ARGMAX_MAX_SPLIT = 128 };

const char *lg_path_name(int path) {
    static const char *const names[LG_NPATH] = {"graph+pdl", "graph+pdl nofold", "persistent"};
    return path >= 0 && path < LG_NPATH ? names[path] : "?";
}

/* Weight types the CUDA kernels take with int8 activations (cuda_int.h
 * cu_is_quant); the others are float. */
static int is_quant(uint32_t t) {
    return t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q4_1 || t == SD_Q5_0 || t == SD_Q4_K ||
           t == SD_Q6_K;
}

static double w_bytes(const lg_w *w) {
    return (double)sd_row_bytes(w->type, (uint64_t)w->cols) * (double)w->rows;
}

/* Bytes of n activation rows of cols as a product reads them: int8 with
 * two floats a 32-block for quantised weights, floats otherwise. */
static double act_in(int quant, int n, int64_t cols) {
    return quant ? (double)n * (double)cols * (1.0 + 8.0 / 32) : 4.0 * n * (double)cols;
}

typedef struct sim {
    const lg_device *d;
    int path;
    lg_step *s;
    int seq;
    /* the pending norm */
    int pending, p_n, p_seq;
    const void *p_out, *p_x;
    int64_t p_dim;
    /* the int8 rows the last op left (qact.cu's tag) */
    const void *q_x;
    int q_n, q_seq;
    int64_t q_cols;
} sim;

static double body_us(const lg_device *d, double bytes, double wq, double wf) {
    const double mem = bytes / (d->v[LG_ETA] * d->v[LG_COPY_GBS] * 1e3);
    const double work = 1e6 * (wq / d->v[LG_QUANT_RATE] + wf / d->v[LG_FLOAT_RATE]);
    return mem > work ? mem : work;
}

/* One kernel: its bytes by class and its products' work. */
static void kernel(sim *m, int graph, double wb, double kvb, double actb, double wq, double wf) {
    lg_step *s = m->s;
    s->launches++;
    if (graph) s->nodes++;
    s->w_bytes += wb;
    s->kv_bytes += kvb;
    s->act_bytes += actb;
    s->us += (graph ? m->d->v[LG_KERNEL_US] : m->d->v[LG_LAUNCH_US]) +
             body_us(m->d, wb + kvb + actb, wq, wf);
}

static void tag(sim *m, const void *x, int n, int64_t cols, int seq) {
    m->q_x = x, m->q_n = n, m->q_cols = cols, m->q_seq = seq;
}

/* A norm launched on its own: reads x and the gain, writes out and, when
 * dim holds whole 32-blocks, its int8 rows for the next op. */
static void norm_launch(sim *m, int graph, const void *out, int n, int64_t dim, int seq) {
    const int q = dim % 32 == 0;
    kernel(m, graph, 4.0 * (double)dim, 0, 8.0 * n * (double)dim + (q ? act_in(1, n, dim) : 0), 0,
           0);
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
        return;
    }
    flush(m, o->graph);
    if (need_q && !(m->q_x == o->x && m->q_n == o->n && m->q_cols == o->cols && m->q_seq + 1 == m->seq))
        kernel(m, o->graph, 0, 0, 4.0 * o->n * (double)o->cols + act_in(1, o->n, o->cols), 0, 0);
}

/* A product launch over weights ws[0..nw): each read once per row tile. */
static void mv_launch(sim *m, const lg_op *o, const lg_w *ws, int nw, double out_bytes, double kvb) {
    const int tiles = (o->n + sd_mv_tile_rows(o->n) - 1) / sd_mv_tile_rows(o->n);
    double wb = 0, wq = 0, wf = 0;
    int q = 0;
    for (int i = 0; i < nw; i++) {
        wb += w_bytes(&ws[i]) * tiles;
        const double work = (double)o->n * (double)ws[i].rows * (double)ws[i].cols;
        if (is_quant(ws[i].type)) wq += work, q = 1;
        else wf += work;
    }
    kernel(m, o->graph, wb, kvb, act_in(q, o->n, o->cols) + out_bytes, wq, wf);
}

static void graph_op(sim *m, const lg_op *o) {
    const double n = o->n;
    switch (o->kind) {
    case LG_EMBED:
        flush(m, o->graph);
        if (o->graph) m->s->nodes += 2;
        kernel(m, o->graph, n * (double)sd_row_bytes(o->w[0].type, (uint64_t)o->w[0].cols), 0,
               4.0 * n * (double)o->cols, 0, 0);
        return;
    case LG_RMSNORM:
        flush(m, o->graph);
        if (m->path == LG_GRAPH_PDL && o->cols % 32 == 0) {
            m->pending = 1;
            m->p_out = o->out, m->p_x = o->x, m->p_n = o->n, m->p_dim = o->cols, m->p_seq = m->seq;
        } else {
            norm_launch(m, o->graph, o->out, o->n, o->cols, m->seq);
        }
        return;
    case LG_ATTN: {
        flush(m, o->graph);
        const double kv = 2.0 * 4 * (double)o->n_kv * o->head_dim * ((double)o->pos + n);
        kernel(m, o->graph, 0, kv, 8.0 * n * (double)o->cols, 0, 0);
        if (o->head_dim % 32 == 0) tag(m, o->out, o->n, o->cols, m->seq);
        return;
    }
    case LG_TOPK: {
        flush(m, o->graph);
        int split = o->cols / ARGMAX_MIN_SLICE;
        split = o->k != 1 || split < 2 ? 1 : split > ARGMAX_MAX_SPLIT ? ARGMAX_MAX_SPLIT : split;
        kernel(m, o->graph, 0, 0, 4.0 * n * (double)o->cols, 0, 0);
        if (split > 1) kernel(m, o->graph, 0, 0, 12.0 * n * split, 0, 0);
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
        kernel(m, o->graph, 0, 0, 12.0 * n * (double)o->w[0].rows, 0, 0);
    }
}

static int graph_path(const lg_trace *t, sim *m) {
    for (int i = 0; i < t->n; i++) {
        m->seq = i;
        graph_op(m, &t->op[i]);
    }
    flush(m, 0);
    lg_step *s = m->s;
    s->waits = s->launches - 1;
    s->us += m->d->v[LG_STEP_US];
    return 0;
}

/* The persistent step: every op but rmsnorm is a stage of the one kernel. */
static int persistent_path(const lg_trace *t, sim *m) {
    const lg_device *d = m->d;
    lg_step *s = m->s;
    int prev = -1;
    s->launches = 1;
    s->us = d->v[LG_STEP_US] + d->v[LG_LAUNCH_US];
    for (int i = 0; i < t->n; i++) {
        const lg_op *o = &t->op[i];
        if (o->kind == LG_RMSNORM) continue;
        const double n = o->n;
        double wb = 0, kvb = 0, actb = 0, wq = 0, wf = 0;
        for (int j = 0; j < o->nw; j++) {
            if (o->kind == LG_EMBED) {
                wb += n * (double)sd_row_bytes(o->w[j].type, (uint64_t)o->w[j].cols);
                continue;
            }
            wb += w_bytes(&o->w[j]);
            const double work = n * (double)o->w[j].rows * (double)o->w[j].cols;
            if (is_quant(o->w[j].type)) wq += work;
            else wf += work;
            actb += 4.0 * n * (double)o->w[j].rows;
        }
        if (o->kind == LG_ATTN)
            kvb = 2.0 * 4 * (double)o->n_kv * o->head_dim * ((double)o->pos + n);
        if (o->kind == LG_QKV) kvb = 2.0 * 4 * n * (double)o->w[1].rows;
        actb += 4.0 * n * (double)o->cols;
        s->w_bytes += wb;
        s->kv_bytes += kvb;
        s->act_bytes += actb;
        const double b = body_us(d, wb + kvb + actb, wq, wf);
        s->us += b > d->v[LG_OP_US] ? b : d->v[LG_OP_US];
        if (prev >= 0) {
            if (prev == LG_QKV && o->kind == LG_ATTN) s->partial++;
            else s->waits++;
        }
        prev = o->kind;
    }
    s->us += s->waits * d->v[LG_BARRIER_US] + s->partial * d->v[LG_FLAG_US];
    return 0;
}

int lg_cost(const lg_trace *t, int path, const lg_device *d, lg_step *s, sd_err *e) {
    memset(s, 0, sizeof *s);
    if (path < 0 || path >= LG_NPATH) return sd_fail(e, "ledger: no path %d", path);
    if (!(d->v[LG_ETA] > 0 && d->v[LG_COPY_GBS] > 0 && d->v[LG_QUANT_RATE] > 0 &&
          d->v[LG_FLOAT_RATE] > 0))
        return sd_fail(e, "ledger: eta, copy_gbs and the rates must be positive");
    sim m = {.d = d, .path = path, .s = s};
    return path == LG_PERSISTENT ? persistent_path(t, &m) : graph_path(t, &m);
}

double lg_spec_speedup(double alpha, int gamma, double t1, double draft, double verify) {
    double tok = 0, a = 1;
    for (int i = 0; i <= gamma; i++) tok += a, a *= alpha;
    const double cost = gamma * draft + verify;
    return cost > 0 ? tok * t1 / cost : 0;
}
