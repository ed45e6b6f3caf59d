/* Causal grouped-query attention (sd_cpu_attention_kv).
 *
 * One task is one query row, one kv head with the G = n_head/n_kv query
 * heads that read it (the kernels load each K/V row once for all of them)
 * and one range of ATTN_SPLIT keys: scores for the range into the thread's
 * slice of the scores scratch, max-subtracted softmax, then the weighted
 * sum of V rows. Tasks come from the pool's counter in order, so the
 * longer causal rows of later i balance themselves. The scalar kernel is
 * the reference: one head at a time, in the order of the definition.
 *
 * Why key ranges: a decode step has one task per kv head, and 3 kv heads
 * (SmolLM2) on 2 threads leave one thread idle a third of the time; at
 * 2048 positions attention is most of the step. A row whose keys 0..pos+i
 * span several ranges writes each range's normalised output and its
 * log-sum-exp to the partials scratch ([n][n_kv][S][G][hd] and
 * [n][n_kv][S][G], S the ranges of the call's longest row), and a second
 * pass merges them: out = sum_s e^(lse_s - L) out_s, L = log sum_s
 * e^(lse_s). The ranges depend only on the row's position, never on the
 * thread count or the rows of the call, so a position's output is the
 * same in a decode step, a verification and a prefill (speculative
 * decoding's output equals autoregressive decoding's only if it is); a row
 * of at most ATTN_SPLIT keys is one range, written directly. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/cpu_int.h"
#include "kernels/common/wtype.h"

enum { ATTN_SPLIT = 512 };
typedef struct {
    sd_attn_group_fn *group;
    float *out;
    const float *q;
    const uint8_t *kc, *vc; /* elem bytes per element */
    int f16;
    size_t elem;
    float *sc;
    size_t slice;   /* scratch floats per thread */
    int64_t ldsc;   /* floats between a group's score rows */
    float *part;    /* [n][n_kv][ns][G][hd] range outputs (ns > 1) */
    float *lse;     /* [n][n_kv][ns][G] */
    int ns;         /* key ranges of the call's longest row */
    int pos, n_kv, n_head, group_size, head_dim;
    int64_t qdim, kvdim;
    float scale;
} attn_job;

static void attn_task(void *v, int64_t t, int thread) {
    const attn_job *j = v;
    const int s = (int)(t % j->ns), kh = (int)(t / j->ns % j->n_kv), i = (int)(t / j->ns / j->n_kv);
    const int len = j->pos + i + 1, t0 = s * ATTN_SPLIT;
    if (t0 >= len) return; /* a shorter row of the call */
    const int64_t off = i * j->qdim + (int64_t)kh * j->group_size * j->head_dim;
    const size_t kvoff = ((size_t)t0 * (size_t)j->kvdim + (size_t)kh * (size_t)j->head_dim) * j->elem;
    float *out = j->out + off, *lse = NULL;
    if (len > ATTN_SPLIT) {
        const int64_t r = ((int64_t)i * j->n_kv + kh) * j->ns + s; /* [i][kh][s] */
        out = j->part + r * j->group_size * j->head_dim;
        lse = j->lse + r * j->group_size;
    }
    j->group(out, j->q + off, j->kc + kvoff, j->vc + kvoff, j->f16,
             len - t0 < ATTN_SPLIT ? len - t0 : ATTN_SPLIT, j->kvdim, j->head_dim, j->group_size,
             j->scale, j->sc + j->slice * (size_t)thread, j->ldsc, lse);
}

/* Row i of a split call: each head's ranges merged into out. */
static void attn_merge_task(void *v, int64_t i, int thread) {
    (void)thread;
    const attn_job *j = v;
    const int len = j->pos + (int)i + 1, ns = (len + ATTN_SPLIT - 1) / ATTN_SPLIT;
    const int hd = j->head_dim, G = j->group_size;
    if (ns == 1) return; /* written directly */
    for (int h = 0; h < j->n_head; h++) {
        const int kh = h / G, g = h % G;
        const int64_t r0 = (i * j->n_kv + kh) * j->ns; /* range 0 of [i][kh] */
        float mx = -INFINITY, sum = 0;
        for (int s = 0; s < ns; s++) {
            const float l = j->lse[(r0 + s) * G + g];
            mx = l > mx ? l : mx;
        }
        for (int s = 0; s < ns; s++) sum += expf(j->lse[(r0 + s) * G + g] - mx);
        float *o = j->out + i * j->qdim + (int64_t)h * hd;
        for (int d = 0; d < hd; d++) o[d] = 0;
        for (int s = 0; s < ns; s++) {
            const float w = expf(j->lse[(r0 + s) * G + g] - mx) / sum;
            const float *p = j->part + ((r0 + s) * G + g) * hd;
            for (int d = 0; d < hd; d++) o[d] += w * p[d];
        }
    }
}

int sd_cpu_attention(sd_cpu *c, float *out, const float *q, const float *kc, const float *vc,
                     int n, int pos, int n_head, int n_kv, int head_dim, sd_err *e) {
    return sd_cpu_attention_kv(c, out, q, kc, vc, SD_F32, n, pos, n_head, n_kv, head_dim, e);
}

int sd_cpu_attention_kv(sd_cpu *c, float *out, const float *q, const void *kc, const void *vc,
                        uint32_t kv_type, int n, int pos, int n_head, int n_kv, int head_dim,
                        sd_err *e) {
    if (n <= 0) return 0;
    if (kv_type != SD_F32 && kv_type != SD_F16)
        return sd_fail(e, "attention: cache type %s (F32 or F16)", sd_wtype_name(kv_type));
    if (pos < 0 || n_head <= 0 || n_kv <= 0 || head_dim <= 0 || n_head % n_kv != 0)
        return sd_fail(e, "attention: bad shape (pos %d, heads %d, kv heads %d, head dim %d)",
                       pos, n_head, n_kv, head_dim);
    const int group = n_head / n_kv;
    /* per thread: one score row per head of a sub-group (at most 4 rows in
     * the SIMD kernels, 1 in the scalar one) of one key range, each a
     * 64-byte multiple */
    const int64_t ldsc = (((int64_t)pos + n < ATTN_SPLIT ? (int64_t)pos + n : ATTN_SPLIT) + 15) & ~(int64_t)15;
    const size_t slice = (size_t)ldsc * (size_t)(group < 4 ? group : 4);
    float *sc = sd_cpu_scratch(c, SD_SCRATCH_ATTN, slice * sizeof(float) * (size_t)sd_cpu_threads(c), e);
    if (!sc) return -1;
    const int ns = (pos + n + ATTN_SPLIT - 1) / ATTN_SPLIT;
    float *part = NULL;
    if (ns > 1) {
        const size_t ranges = (size_t)n * (size_t)n_head * (size_t)ns;
        part = sd_cpu_scratch(c, SD_SCRATCH_ATTN_PART, ranges * ((size_t)head_dim + 1) * sizeof(float), e);
        if (!part) return -1;
    }
    attn_job j = {.group = sd_cpu_attn_group_scalar,
                  .out = out,
                  .q = q,
                  .kc = kc,
                  .vc = vc,
                  .f16 = kv_type == SD_F16,
                  .elem = kv_type == SD_F16 ? 2 : 4,
                  .sc = sc,
                  .slice = slice,
                  .ldsc = ldsc,
                  .part = part,
                  .lse = part ? part + (size_t)n * n_head * ns * head_dim : NULL,
                  .ns = ns,
                  .pos = pos,
                  .n_kv = n_kv,
                  .n_head = n_head,
                  .group_size = group,
                  .head_dim = head_dim,
                  .qdim = (int64_t)n_head * head_dim,
                  .kvdim = (int64_t)n_kv * head_dim,
                  .scale = 1.0f / sqrtf((float)head_dim)};
    if (sd_cpu_isa(c) == SD_ISA_AVX2) j.group = sd_cpu_attn_group_avx2;
    else if (sd_cpu_isa(c) >= SD_ISA_AVX512) j.group = sd_cpu_attn_group_avx512;
    uint64_t t0 = sd_cpu_prof_start(c);
    const int par = (int64_t)n * n_head * (pos + n) * head_dim > 16384;
    sd_pool_run(sd_cpu_pool(c), attn_task, &j, (int64_t)n * n_kv * ns, par);
    if (ns > 1) sd_pool_run(sd_cpu_pool(c), attn_merge_task, &j, n, n > 1);
    sd_cpu_prof_add(c, SD_OP_ATTENTION, t0);
    return 0;
}

