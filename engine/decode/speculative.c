/* Speculative decoding with a draft model (Leviathan et al., Chen et al.),
 * following the contract of the PyTorch original (romsto/Speculative-Decoding).
 *
 * Sequence layout: seq[0..cur) is final. A round drafts x_1..x_g at
 * cur..cur+g-1, then one target call over [cur-1, cur+g) yields g+1 rows:
 * row i scores x_{i+1}, row g gives the bonus token. Cache invariants at the
 * start of a round: the target holds cur-1 positions (seq[cur-1] is fed
 * with the drafts), the drafter holds at most cur; sd_lm_extend feeds
 * whatever a cache lacks, and a rejection truncates both caches back to the
 * last accepted position. */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"

typedef struct spec_buf {
    int32_t *seq;
    float *q, *p, *tlog, *dlog, *resid;
} spec_buf;

static void spec_free(spec_buf *b) {
    free(b->seq);
    free(b->q);
    free(b->p);
    free(b->tlog);
    free(b->dlog);
    free(b->resid);
}

/* norm(max(0, p - q)); falls back to p when the two are equal everywhere. */
static const float *residual(const float *p, const float *q, float *out, int vocab) {
    double sum = 0;
    for (int i = 0; i < vocab; i++) {
        float d = p[i] - q[i];
        out[i] = d > 0 ? d : 0;
        sum += out[i];
    }
    if (!(sum > 0)) return p;
    float inv = (float)(1.0 / sum);
    for (int i = 0; i < vocab; i++) out[i] *= inv;
    return out;
}

int sd_speculative_generate(const int32_t *inputs, int n_inputs, sd_lm *drafter, sd_lm *target,
                            const sd_spec_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                            int32_t *out, sd_gen_stats *st, sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    int gamma = o->gamma, vocab = target->m->hp.vocab;
    if (gamma < 1) return sd_fail(e, "speculative: gamma %d must be at least 1", gamma);
    if (n_inputs < 1) return sd_fail(e, "speculative: empty prompt");
    if (max_gen_len < 0) return sd_fail(e, "speculative: max_gen_len %d < 0", max_gen_len);
    if (drafter->m->hp.vocab != vocab)
        return sd_fail(e, "speculative: drafter vocabulary %d differs from the target's %d",
                       drafter->m->hp.vocab, vocab);
    int limit = target->kv->n_ctx < drafter->kv->n_ctx ? target->kv->n_ctx : drafter->kv->n_ctx;
    int total = sd_gen_total(n_inputs, max_gen_len, limit, st, e);
    if (total < 0) return -1;
    size_t V = (size_t)vocab, G = (size_t)gamma;
    spec_buf b = {malloc(((size_t)total + 1) * sizeof(int32_t)), malloc(G * V * sizeof(float)),
                  malloc((G + 1) * V * sizeof(float)), malloc((G + 1) * V * sizeof(float)),
                  malloc(V * sizeof(float)), malloc(V * sizeof(float))};
    int rc = -1, count = 0, cur = n_inputs;
    if (!b.seq || !b.q || !b.p || !b.tlog || !b.dlog || !b.resid) {
        sd_fail(e, "out of memory");
        goto done;
    }
    memcpy(b.seq, inputs, (size_t)n_inputs * sizeof(int32_t));
    target->kv->n = drafter->kv->n = 0; /* a fresh sequence: nothing cached is ours */
    double t0 = sd_now();
    if (o->first_target && cur < total) {
        int32_t t;
        if (sd_lm_extend(target, b.seq, cur, cfg->use_cache, b.tlog, 1, st, e) ||
            sd_token_dist(cfg, b.tlog, b.p, 1, vocab, e) || sd_dist_sample(cfg, b.p, vocab, &t, e))
            goto done;
        st->target_calls++;
        st->prefill_s = sd_now() - t0;
        b.seq[cur++] = t;
        if (sd_emit(cfg, out, &count, t)) goto finished;
    }
    while (cur < total) {
        int g = total - cur - 1 < gamma ? total - cur - 1 : gamma;
        for (int k = 0; k < g; k++) {
            if (sd_lm_extend(drafter, b.seq, cur + k, cfg->use_cache, b.dlog, 1, st, e) ||
                sd_token_dist(cfg, b.dlog, b.q + (size_t)k * V, 1, vocab, e) ||
                sd_dist_sample(cfg, b.q + (size_t)k * V, vocab, &b.seq[cur + k], e))
                goto done;
            st->draft_calls++;
        }
        st->drafted += g;
        if (sd_lm_extend(target, b.seq, cur + g, cfg->use_cache, b.tlog, g + 1, st, e) ||
            sd_token_dist(cfg, b.tlog, b.p, g + 1, vocab, e))
            goto done;
        st->target_calls++;
        if (count == 0 && st->prefill_s == 0) st->prefill_s = sd_now() - t0;

        /* rejection sampling: keep x when r * q(x) < p(x), i.e. r < p/q */
        int n = g;
        for (int i = 0; i < g; i++) {
            int32_t x = b.seq[cur + i];
            float px = b.p[(size_t)i * V + x], qx = b.q[(size_t)i * V + x];
            double r = sd_is_greedy(cfg) ? 0.0 : sd_rng_uniform(cfg->rng);
            if (!(qx > 0 && r * qx < px)) {
                n = i;
                break;
            }
        }
        st->accepted += n;
        int32_t rejected = n < g ? b.seq[cur + n] : -1;
        for (int i = 0; i < n; i++) {
            if (sd_emit(cfg, out, &count, b.seq[cur + i])) {
                sd_report_step(cfg, b.seq + cur, i + 1, -1, -1);
                goto finished;
            }
        }
        const float *dist = b.p + (size_t)n * V;
        if (n < g) {
            if (sd_kv_truncate(target->kv, cur + n, e)) goto done;
            if (drafter->kv->n > cur + n && sd_kv_truncate(drafter->kv, cur + n, e)) goto done;
            if (!o->skip_sample_adjustment) dist = residual(dist, b.q + (size_t)n * V, b.resid, vocab);
        }
        int32_t x;
        if (sd_dist_sample(cfg, dist, vocab, &x, e)) goto done;
        sd_report_step(cfg, b.seq + cur, n, rejected, x);
        b.seq[cur + n] = x;
        cur += n + 1;
        if (sd_emit(cfg, out, &count, x)) break;
    }
finished:
    rc = sd_gen_finish(cfg, st, t0, out, count, max_gen_len);
done:
    spec_free(&b);
    return rc;
}
