/* q = rope(Wq x + bq), k_rows = rope(Wk x + bk), v_rows = Wv x + bv in one
 * launch: the three matrices' row pairs are numbered end to end (Q's, then
 * K's, then V's) and a warp takes one pair. A pair is exactly the two rows
 * RoPE turns together: rows (2j, 2j+1) of a head, or with NEOX rotation
 * (qwen2) rows (j, j + rope_dim/2), the rows past rope_dim paired as
 * neighbours. So the warp that computed them adds their biases, rotates them
 * in registers and writes the result straight into q and into the layer's
 * KV cache rows (k_rows/v_rows are positions pos..pos+n-1 of the cache,
 * [n][kv_dim]). When the three weights differ in type, each gets its own
 * launch of the same kernel. The activations are quantised once for all
 * three.
 *
 * Beams (cu_qkv_rope_same_pos): every row stands at the same position and
 * row i's key and value belong to cache i, so the kernel takes the n
 * destination pointers by value in its argument struct (QkvScatterArgs,
 * 2 x SD_MAX_ROWS pointers = 2 KB, within the 4 KB kernel-argument limit):
 * nothing is staged, and no pointer table is copied to the device.
 *
 * Graph capture (c->pos_dev set, backend_cuda.cu "graphs"): the kernel reads
 * the position from that device word, and the K/V destinations it is given
 * are the rows of position 0 (the cache bases); it writes row i at row
 * pos + i of them (beams: at row pos of each base), so one capture serves
 * every position.
 *
 * With SD_CUDA_MMA and a quantised type, BF16 or F16 the launch runs on
 * tensor cores (mv_mma.cuh): a warp takes 8 pairs, their rows in its two
 * row slots, and each lane group rotates and writes its own pair. */
#include "kernels/cuda/qkv_rope.cuh"

/* __grid_constant__: args is read in place in parameter memory (the
 * scatter table is indexed by the row, which would otherwise copy the 2 KB
 * struct to each thread's local memory). */
template <int T, int NT, class P>
__global__ void __launch_bounds__(MV_THREADS) qkv_rope_kernel(const __grid_constant__ P args) {
    cu_grid_trigger();
    const unsigned blocks = qkv_args(args).blocks, ntiles = (unsigned)qkv_args(args).ntiles;
    for (unsigned b = blockIdx.x; b < blocks; b += gridDim.x)
        qkv_vblock<T, NT, P>(args, b, b == blockIdx.x, blockIdx.x < ntiles);
}

template <int T, int NT, class P>
__global__ void __launch_bounds__(MV_THREADS) mq_qkv_kernel(const __grid_constant__ P args) {
    cu_grid_trigger();
    const unsigned blocks = qkv_args(args).blocks, ntiles = (unsigned)qkv_args(args).ntiles;
    for (unsigned b = blockIdx.x; b < blocks; b += gridDim.x)
        mq_qkv_vblock<T, NT, P>(args, b, b == blockIdx.x, blockIdx.x < ntiles);
}

template <class P>
struct MqQkvLaunch {
    typedef P Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const P &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, mq_qkv_kernel<T, NT, P>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, mq_qkv_kernel<T, NT, P>, a);
    }
};

template <class P>
struct QkvLaunch {
    typedef P Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const P &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, qkv_rope_kernel<T, NT, P>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, qkv_rope_kernel<T, NT, P>, a);
    }
};

static QkvArgs *qkv_host_args(QkvArgs *p) { return p; }
static QkvArgs *qkv_host_args(QkvScatterArgs *p) { return &p->a; }

/* A persistent step's stage (step.cu): its kind and the rows it writes. */
static int qkv_step_kind(const QkvArgs *) { return CU_STEP_QKV; }
static int qkv_step_kind(const QkvScatterArgs *) { return CU_STEP_QKV_BEAMS; }
static void qkv_out_spans(const QkvArgs *p, cu_spans *sp) {
    for (int j = 0; j < p->nm; j++)
        cu_span_add(sp, p->m[j].out, (size_t)p->a.n * (size_t)p->m[j].w.rows * sizeof(float), 1);
}
static void qkv_out_spans(const QkvScatterArgs *p, cu_spans *sp) {
    for (int j = 0; j < p->a.nm; j++) {
        const QkvMat &M = p->a.m[j];
        const size_t row = (size_t)M.w.rows * sizeof(float);
        if (M.which == 0) cu_span_add(sp, M.out, (size_t)p->a.a.n * row, 1);
        else
            for (int i = 0; i < p->a.a.n; i++) cu_span_add(sp, M.which == 1 ? p->k[i] : p->v[i], row, 1);
    }
}

/* One launch over matrices first..first+count-1 of ws (all one type). */
template <class P>
static int qkv_launch(sd_cuda *c, P *args, const sd_weight *const *ws, const float *const *bias,
                      float *const *outs, int first, int count, sd_err *e) {
    QkvArgs *p = qkv_host_args(args);
    int pairs = 0;
    p->nm = count;
    for (int j = 0; j < count; j++) {
        const sd_weight *w = ws[first + j];
        p->m[j].w = mv_mat(w);
        p->m[j].bias = bias[first + j];
        p->m[j].out = outs[first + j];
        p->m[j].which = first + j;
        p->m[j].rope = first + j < 2; /* Q and K rotate, V does not */
        p->m[j].pair0 = pairs;
        pairs += (int)((w->rows + 1) / 2);
    }
    const sd_weight *w = ws[first];
    MvPlan pl;
    const int mq = mq_on(c, w->type, p->a);
    if (mq ? mq_plan(p->a, w->type, (pairs + MQ_UNITS - 1) / MQ_UNITS, w->cols, c->sms, c->fuse_norm,
                     &pl, e, "qkv_rope")
           : mv_plan(p->a, pairs, w->cols / mv_chunk_elems((int)w->type), c->sms, c->fuse_norm,
                     mv_float((int)w->type), &pl, e, "qkv_rope"))
        return -1;
    p->ntiles = pl.ntiles;
    p->ks = pl.ks;
    p->blocks = pl.blocks;
    if (c->step) {
        cu_spans sp = {};
        mv_act_spans(p->a, &sp);
        qkv_out_spans(args, &sp);
        return cu_step_add(c, qkv_step_kind(args),
                           mq ? mq_step_variant(w->type, pl.nt) : mv_step_variant(w->type, pl.nt),
                           args, sizeof *args, pl.blocks, pl.smem, &sp, e);
    }
    if (mq)
        mq_launch<MqQkvLaunch<P> >(w->type, pl, c, *args);
    else
        mv_launch<QkvLaunch<P> >(w->type, pl, c, *args);
    return cu_check_launch(c, e, "qkv_rope %s %lldx%lld (%d matrices)", sd_wtype_name(w->type),
                           (long long)w->rows, (long long)w->cols, count);
}

/* Checks the shapes and fills everything of p but the matrices; then one
 * launch when the three weights share a type, else one each. */
template <class P>
static int qkv_run(sd_cuda *c, P *args, const sd_attn_shape *s, float *const *outs,
                   const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                   int n, int pos, int pos_step, sd_err *e) {
    const sd_weight *ws[3] = {wq, wk, wv};
    const float *bias[3] = {s->bq, s->bk, s->bv};
    for (int j = 0; j < 3; j++)
        if (cu_check_weight(ws[j], "qkv_rope", e)) return -1;
    if (s->head_dim <= 0 || s->head_dim % 2 || s->n_head <= 0 || s->n_kv <= 0 || pos < 0)
        return sd_fail(e, "cuda: qkv_rope: bad shape (heads %d, kv heads %d, head dim %d, pos %d)",
                       s->n_head, s->n_kv, s->head_dim, pos);
    if (wq->rows != (int64_t)s->n_head * s->head_dim || wk->rows != (int64_t)s->n_kv * s->head_dim ||
        wv->rows != wk->rows || wk->cols != wq->cols || wv->cols != wq->cols)
        return sd_fail(e,
                       "cuda: qkv_rope: weights %lldx%lld, %lldx%lld, %lldx%lld do not match %d "
                       "heads / %d kv heads of %d",
                       (long long)wq->rows, (long long)wq->cols, (long long)wk->rows,
                       (long long)wk->cols, (long long)wv->rows, (long long)wv->cols, s->n_head,
                       s->n_kv, s->head_dim);
    QkvArgs *p = qkv_host_args(args);
    const int need_q = cu_is_quant(wq->type) || cu_is_quant(wk->type) || cu_is_quant(wv->type);
    const int fl = mv_float((int)wq->type) || mv_float((int)wk->type) || mv_float((int)wv->type);
    if (mv_act(c, &p->a, x, n, wq->cols, need_q, fl, outs[0],
               (size_t)n * (size_t)wq->rows * sizeof(float), e))
        return -1;
    p->pos = pos;
    p->pos_step = pos_step;
    p->pos_dev = c->pos_dev;
    p->head_dim = s->head_dim;
    p->rope_dim = s->rope_dim < s->head_dim ? s->rope_dim : s->head_dim;
    p->neox = s->neox;
    p->theta_scale = p->rope_dim > 0 ? powf(s->rope_base, -2.0f / (float)p->rope_dim) : 1.0f;
    if (wq->type == wk->type && wq->type == wv->type)
        return qkv_launch(c, args, ws, bias, outs, 0, 3, e);
    for (int j = 0; j < 3; j++)
        if (qkv_launch(c, args, ws, bias, outs, j, 1, e)) return -1;
    return 0;
}

int cu_qkv_rope(sd_cuda *c, const sd_attn_shape *s, float *q, float *k_rows, float *v_rows,
                const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                int n, int pos, sd_err *e) {
    if (n <= 0) return 0;
    float *outs[3] = {q, k_rows, v_rows};
    QkvArgs p;
    return qkv_run(c, &p, s, outs, wq, wk, wv, x, n, pos, 1, e);
}

int cu_qkv_rope_same_pos(sd_cuda *c, const sd_attn_shape *s, float *q, float *const *k_dst,
                         float *const *v_dst, const sd_weight *wq, const sd_weight *wk,
                         const sd_weight *wv, const float *x, int n, int pos, sd_err *e) {
    if (n <= 0) return 0;
    if (n > SD_MAX_ROWS)
        return sd_fail(e, "cuda: qkv_rope_same_pos: %d rows (at most %d)", n, SD_MAX_ROWS);
    float *outs[3] = {q, NULL, NULL};
    QkvScatterArgs p = {};
    for (int i = 0; i < n; i++) {
        p.k[i] = k_dst[i];
        p.v[i] = v_dst[i];
    }
    return qkv_run(c, &p, s, outs, wq, wk, wv, x, n, pos, 0, e);
}
