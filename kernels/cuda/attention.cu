/* Causal grouped-query attention over the layer cache, flash-decoding style.
 *
 * q: [n][n_head*hd] for positions pos..pos+n-1; kc, vc: [pos+n][n_kv*hd];
 * query head h reads kv head h / group (group = n_head / n_kv); scale
 * 1/sqrt(hd); out: [n][n_head*hd].
 *
 * Grid (split, kv head, query tile). A block takes one kv head, a tile of up
 * to AT_QV query vectors of that head's group (query vector v = row i, head
 * g of the group, numbered i*group + g), and one slice of the key range. It
 * walks the slice AT_KEYS keys at a time: K and V of those keys go to shared
 * memory once and serve every query of the tile, which is what makes GQA
 * and the 1..gamma+1 verification rows cost one read of the cache. Each of
 * the 8 warps owns up to 2 query vectors (a GQA group of up to 8 heads is
 * one vector a warp, so a decode step's heads are scored side by side):
 * lane t scores key t, reading K and q 16 bytes at a time into four
 * independent sums (K rows padded to hd + 4 floats, so the 8 lanes of each
 * quarter-warp phase of a 16-byte load hit 32 distinct banks; odd head
 * dims read one float at a time from rows padded to an odd stride), the
 * warp keeps a running maximum m,
 * per-lane sums l and an accumulator over head dims (lane d holds dims d,
 * d+32, ...), rescaled when m grows (online softmax). Keys past a query's
 * position are masked; a tile with no visible key leaves the state alone.
 *
 * With one split that holds keys the tile sees (at_live) the block writes
 * acc / sum(l) directly. Otherwise every such block writes its (m, l, acc),
 * and those splits are merged:
 * out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. Splits are sized
 * so the grid has about two blocks per multiprocessor, at least 64 keys
 * each, which matters for long contexts with few kv heads and one query.
 * The merge is folded into the kernel: each block of a (kv head, query
 * tile) counts itself in c->attn_ctr after its partials are visible
 * (__threadfence, then one atomicAdd), and the last of the live blocks
 * merges the tile (reading the partials from L2) and sets the counter back
 * to 0 for the next launch. attn_combine, a launch of its own, remains for
 * calls with more (kv head, tile) pairs than the counters cover (and for
 * every call with cuda_attn_merge_launch, which the tests use).
 *
 * When the head dim is a multiple of 32, the kernel that writes a head's
 * output (the block itself with one live split, else the merging block) also
 * quantises it into qact.cu's scratch and the call leaves qact's tag, so
 * the output projection after it launches no quantisation of its own.
 *
 * The key split is planned for the length bucket of pos + n
 * (sd_attn_plan_bucket, plan.h), and while a graph is captured
 * (c->pos_dev set) the kernel reads pos from that device word, so a
 * captured step stays valid at the later positions of its bucket. */
#include "kernels/cuda/attention.cuh"

template <int D>
__global__ void __launch_bounds__(AT_THREADS) attn_kernel(const AttnArgs a) {
    cu_grid_trigger();
    cu_grid_wait();
    attn_vblock<D, AT_WARPS>(a, blockIdx.x, blockIdx.y, blockIdx.z);
}

/* attn_combine: the merge as a launch of its own, grid (kv head, query tile). */
template <int D>
__global__ void __launch_bounds__(AT_THREADS) attn_combine(const AttnArgs a) {
    attn_combine_vblock<D, AT_WARPS>(a, blockIdx.x, blockIdx.y);
}

size_t cu_attention_scratch(const sd_cuda *c, const sd_attn_shape *s, int n, int pos) {
    sd_attn_plan pl;
    if (n <= 0 || pos < 0 || s->n_kv <= 0 || s->n_head <= 0 || s->n_head % s->n_kv ||
        s->head_dim <= 0 || sd_attn_plan_bucket(n, pos, s->n_kv, s->n_head / s->n_kv, c->sms, &pl) ||
        pl.n_splits == 1)
        return 0;
    return (size_t)pl.n_splits * n * s->n_head * (s->head_dim + 2) * sizeof(float);
}

template <int D>
static void attn_launch(dim3 grid, size_t smem, const sd_cuda *c, const AttnArgs &a) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = cu_launch_cfg(c, grid, AT_THREADS, smem, &at);
    cudaLaunchKernelEx(&cfg, attn_kernel<D>, a);
}

/* As stages of a persistent step (step.cu): the attention, and the merge
 * after it when the counters do not merge. Spans: the queries, the cache
 * rows up to the last position, the output and its int8 blocks, the
 * partials and the counters. */
static int at_step(sd_cuda *c, const AttnArgs *a, int64_t qtiles, size_t smem, sd_err *e) {
    const int64_t q_dim = (int64_t)a->n_head * a->hd, n_kv = a->kv_dim / a->hd;
    const size_t qbytes = (size_t)a->n * (size_t)q_dim * sizeof(float);
    const size_t kvbytes = (size_t)(a->pos + a->n) * (size_t)a->kv_dim * sizeof(float);
    const size_t slots = (size_t)a->n_splits * a->n * a->n_head;
    cu_spans sp = {};
    cu_span_add(&sp, a->q, qbytes, 0);
    cu_span_add(&sp, a->kc, kvbytes, 0);
    cu_span_add(&sp, a->vc, kvbytes, 0);
    cu_span_add(&sp, a->out, qbytes, 1);
    if (a->xq) cu_qact_spans(a->xq, a->xd, a->xs, a->n, q_dim, &sp);
    if (a->part_acc) {
        cu_span_add(&sp, a->part_acc, slots * a->hd * sizeof(float), 1);
        cu_span_add(&sp, a->part_ml, slots * 2 * sizeof(float), 1);
    }
    if (a->ctr) cu_span_add(&sp, a->ctr, (size_t)(qtiles * n_kv) * sizeof(unsigned), 1);
    const int d = (a->hd + 31) / 32;
    if (cu_step_add(c, CU_STEP_ATTN, d, a, sizeof *a, (unsigned)(a->n_splits * n_kv * qtiles), smem,
                    &sp, e))
        return -1;
    if (a->xq) cu_qtag_set(c, a->out, a->n, q_dim, CU_SCRATCH_QOUT);
    if (a->n_splits == 1 || a->ctr) return 0;
    return cu_step_add(c, CU_STEP_ATTN_MERGE, d, a, sizeof *a, (unsigned)(n_kv * qtiles), 0, &sp, e);
}

int cu_attention(sd_cuda *c, const sd_attn_shape *s, float *out, const float *q, const float *kc,
                 const float *vc, int n, int pos, sd_err *e) {
    if (n <= 0) return 0;
    const int hd = s->head_dim;
    if (pos < 0 || s->n_head <= 0 || s->n_kv <= 0 || s->n_head % s->n_kv || hd <= 0 ||
        hd > AT_MAX_HD)
        return sd_fail(e,
                       "cuda: attention: unsupported shape (pos %d, heads %d, kv heads %d, head "
                       "dim %d; head dim must be 1..%d)",
                       pos, s->n_head, s->n_kv, hd, AT_MAX_HD);
    AttnArgs a;
    a.q = q;
    a.kc = kc;
    a.vc = vc;
    a.out = out;
    a.n = n;
    a.pos = pos;
    a.pos_dev = c->pos_dev;
    a.n_head = s->n_head;
    a.group = s->n_head / s->n_kv;
    a.hd = hd;
    a.kv_dim = s->n_kv * hd;
    a.scale = 1.0f / sqrtf((float)hd);

    sd_attn_plan pl; /* kernels/cuda/plan.h */
    if (sd_attn_plan_bucket(n, pos, s->n_kv, a.group, c->sms, &pl))
        return sd_fail(e, "cuda: attention: %d rows x %d heads is too many for one call", n,
                       s->n_head);
    const int64_t qtiles = pl.qtiles;
    a.kps = pl.kps;
    a.n_splits = pl.n_splits;
    a.part_acc = a.part_ml = NULL;
    /* out's int8 blocks for the output projection, when heads hold whole
     * blocks (qact.cu's tag), in slot QOUT: the Q/K/V product reads its
     * input's blocks from slot QACT, and in a persistent step (step.cu) a
     * head's attention may run while the products of other heads still
     * read them */
    const int64_t q_dim = (int64_t)s->n_head * hd;
    a.xq = NULL;
    a.xd = a.xs = NULL;
    if (hd % 32 == 0 && cu_qact_buffers(c, CU_SCRATCH_QOUT, n, q_dim, &a.xq, &a.xd, &a.xs, e))
        return -1;
    a.ctr = (int64_t)s->n_kv * qtiles <= CU_ATTN_COUNTERS && !c->attn_merge_launch ? c->attn_ctr
                                                                                  : NULL;
    if (a.n_splits > 1) {
        const size_t slots = (size_t)a.n_splits * n * s->n_head;
        float *buf = (float *)cu_scratch(c, CU_SCRATCH_ATTN, cu_attention_scratch(c, s, n, pos), e);
        if (!buf) return -1;
        a.part_acc = buf;
        a.part_ml = buf + slots * hd;
    }
    const dim3 grid((unsigned)a.n_splits, (unsigned)s->n_kv, (unsigned)qtiles);
    const size_t smem = (size_t)(AT_KEYS * at_kstride(hd) + AT_KEYS * hd + AT_QV * hd) * sizeof(float);
    if (c->step) return at_step(c, &a, qtiles, smem, e);
    switch ((hd + 31) / 32) {
    case 1: attn_launch<1>(grid, smem, c, a); break;
    case 2: attn_launch<2>(grid, smem, c, a); break;
    case 3: attn_launch<3>(grid, smem, c, a); break;
    default: attn_launch<4>(grid, smem, c, a); break;
    }
    if (cu_check_launch(c, e, "attention n=%d pos=%d heads %d/%d dim %d", n, pos, s->n_head,
                        s->n_kv, hd))
        return -1;
    if (a.xq) cu_qtag_set(c, out, n, q_dim, CU_SCRATCH_QOUT);
    if (a.n_splits == 1 || a.ctr) return 0;
    const dim3 cgrid((unsigned)s->n_kv, (unsigned)qtiles);
    switch ((hd + 31) / 32) {
    case 1: attn_combine<1><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    case 2: attn_combine<2><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    case 3: attn_combine<3><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    default: attn_combine<4><<<cgrid, AT_THREADS, 0, c->stream>>>(a); break;
    }
    return cu_check_launch(c, e, "attention combine n=%d pos=%d splits %d", n, pos, a.n_splits);
}
