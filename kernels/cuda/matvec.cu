/* out[n][rows] (+)= x[n][cols] . W^T for every weight type: the plain
 * projection (LM head) and, with accumulate, the output and down
 * projections with the residual add folded in (out is the residual stream;
 * each output element is read and written by one lane). The core loop is in
 * mv.cuh. */
#include "kernels/cuda/mv.cuh"

struct MmArgs {
    MvAct a;
    MvMat w;
    float *out; /* [n][rows] */
    int accumulate;
    int ntiles, ks;
    unsigned blocks; /* virtual blocks (mv.cuh) */
};

template <int T, int NT>
__global__ void __launch_bounds__(MV_THREADS) mm_plain_kernel(const MmArgs p) {
    cu_grid_trigger();
    for (unsigned b = blockIdx.x; b < p.blocks; b += gridDim.x) {
        int i0, pair, slice;
        mv_place(b, p.ntiles, p.ks, NT, i0, pair, slice);
        const int r0 = 2 * pair, r1 = r0 + 1;
        float acc[2][NT], v0, v1;
        mv_accum<T, NT>(mv_row(p.w, r0), mv_row(p.w, r1), p.a, i0, slice, p.ks, b == blockIdx.x,
                        blockIdx.x < (unsigned)p.ntiles, acc);
        mv_reduce<NT>(acc, slice, p.ks, v0, v1);
        const int lane = threadIdx.x & 31, i = i0 + lane;
        if (slice != 0 || lane >= NT || i >= p.a.n) continue;
        float *o = p.out + (size_t)i * p.w.rows;
        if (r0 < p.w.rows) o[r0] = p.accumulate ? o[r0] + v0 : v0;
        if (r1 < p.w.rows) o[r1] = p.accumulate ? o[r1] + v1 : v1;
    }
}

struct MmLaunch {
    typedef MmArgs Args;
    template <int T, int NT>
    static void run(const MvPlan &pl, const sd_cuda *c, const MmArgs &a) {
        cudaLaunchAttribute at;
        const cudaLaunchConfig_t cfg =
            cu_launch_cfg(c, mv_grid(pl, mm_plain_kernel<T, NT>), MV_THREADS, pl.smem, &at);
        cudaLaunchKernelEx(&cfg, mm_plain_kernel<T, NT>, a);
    }
};

int cu_mm_plain(sd_cuda *c, float *out, const sd_weight *w, const MvAct *A, int accumulate,
                sd_err *e) {
    MvPlan pl;
    if (mv_plan(*A, (w->rows + 1) / 2, w->cols / mv_chunk_elems((int)w->type), c->sms,
                c->fuse_norm, mv_float((int)w->type), &pl, e, "matmul"))
        return -1;
    MmArgs p;
    p.a = *A;
    p.w = mv_mat(w);
    p.out = out;
    p.accumulate = accumulate;
    p.ntiles = pl.ntiles;
    p.ks = pl.ks;
    p.blocks = pl.blocks;
    mv_launch<MmLaunch>(w->type, pl, c, p);
    return cu_check_launch(c, e, "matmul %s %lldx%lld", sd_wtype_name(w->type),
                           (long long)w->rows, (long long)w->cols);
}

int cu_matmul(sd_cuda *c, float *out, const sd_weight *w, const float *x, int n, int accumulate,
              sd_err *e) {
    if (n <= 0) return 0;
    if (cu_check_weight(w, "matmul", e)) return -1;
    MvAct A;
    if (mv_act(c, &A, x, n, w->cols, cu_is_quant(w->type), mv_float((int)w->type), out,
               (size_t)n * (size_t)w->rows * sizeof(float), e))
        return -1;
    return cu_mm_plain(c, out, w, &A, accumulate, e);
}
