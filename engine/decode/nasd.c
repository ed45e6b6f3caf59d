/* NASD: n-gram assisted speculative decoding. The drafter is an n-gram
 * store instead of a model, so a draft costs a hash lookup. Its proposal
 * is deterministic (q is one-hot at the draft x), so the lossless test
 * r < p(x)/q(x) becomes r < p(x), and a rejection resamples from p with x
 * removed (norm(max(0, p - onehot(x)))).
 *
 * The store learns as generation goes: the prompt first, then every final
 * token (accepted drafts and the corrected/bonus token), and the target's
 * filler_top_k most likely tokens at every verified position whose context
 * is final (rows 0..n of a round with n accepted drafts). */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"

/* Adds the k highest logits of row as continuations of seq[0..len). */
static int add_fillers(sd_ngram *s, const int32_t *seq, int len, const float *row, int vocab,
                       int k, sd_err *e) {
    int32_t top[64];
    int n = sd_top_k(row, vocab, k < 64 ? k : 64, top);
    for (int i = 0; i < n; i++)
        if (sd_ngram_observe(s, seq, len, top[i], e)) return -1;
    return 0;
}

int sd_ngram_assisted_generate(const int32_t *inputs, int n_inputs, sd_ngram *store, sd_lm *target,
                               const sd_nasd_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                               int32_t *out, sd_gen_stats *st, sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    int gamma = o->gamma, vocab = target->m->hp.vocab;
    if (gamma < 1) return sd_fail(e, "nasd: gamma %d must be at least 1", gamma);
    if (o->filler_top_k < 0) return sd_fail(e, "nasd: filler_top_k %d < 0", o->filler_top_k);
    if (n_inputs < 1) return sd_fail(e, "nasd: empty prompt");
    if (max_gen_len < 0) return sd_fail(e, "nasd: max_gen_len %d < 0", max_gen_len);
    int total = sd_gen_total(n_inputs, max_gen_len, target->kv->n_ctx, st, e);
    if (total < 0) return -1;
    size_t V = (size_t)vocab, G = (size_t)gamma;
    int32_t *seq = malloc(((size_t)total + 1) * sizeof *seq);
    float *tlog = malloc((G + 1) * V * sizeof *tlog);
    float *p = malloc((G + 1) * V * sizeof *p);
    int rc = -1, count = 0, cur = n_inputs;
    if (!seq || !tlog || !p) {
        sd_fail(e, "out of memory");
        goto done;
    }
    memcpy(seq, inputs, (size_t)n_inputs * sizeof *seq);
    if (sd_ngram_observe_seq(store, seq, 0, n_inputs, e)) goto done;
    target->kv->n = 0; /* a fresh sequence: nothing cached is ours */
    double t0 = sd_now();
    if (o->first_target && cur < total) {
        int32_t t;
        if (sd_lm_extend(target, seq, cur, cfg->use_cache, tlog, 1, st, e) ||
            sd_token_dist(cfg, tlog, p, 1, vocab, e) || sd_dist_sample(cfg, p, vocab, &t, e) ||
            add_fillers(store, seq, cur, tlog, vocab, o->filler_top_k, e) ||
            sd_ngram_observe(store, seq, cur, t, e))
            goto done;
        st->target_calls++;
        st->prefill_s = sd_now() - t0;
        seq[cur++] = t;
        if (sd_emit(cfg, out, &count, t)) goto finished;
    }
    while (cur < total) {
        int room = total - cur - 1 < gamma ? total - cur - 1 : gamma, g = 0;
        while (g < room && sd_ngram_predict(store, seq, cur + g, !o->stop_if_unknown, &seq[cur + g], NULL))
            g++;
        st->drafted += g;
        if (sd_lm_extend(target, seq, cur + g, cfg->use_cache, tlog, g + 1, st, e) ||
            sd_token_dist(cfg, tlog, p, g + 1, vocab, e))
            goto done;
        st->target_calls++;
        if (count == 0 && st->prefill_s == 0) st->prefill_s = sd_now() - t0;
        int n = g;
        for (int i = 0; i < g; i++) {
            float px = p[(size_t)i * V + seq[cur + i]];
            double r = sd_is_greedy(cfg) ? 0.0 : sd_rng_uniform(cfg->rng);
            if (!(r < px)) {
                n = i;
                break;
            }
        }
        st->accepted += n;
        int32_t rejected = n < g ? seq[cur + n] : -1;
        for (int i = 0; i <= n && i <= g; i++)
            if (add_fillers(store, seq, cur + i, tlog + (size_t)i * V, vocab, o->filler_top_k, e))
                goto done;
        for (int i = 0; i < n; i++) {
            if (sd_ngram_observe(store, seq, cur + i, seq[cur + i], e)) goto done;
            if (sd_emit(cfg, out, &count, seq[cur + i])) {
                sd_report_step(cfg, seq + cur, i + 1, -1, -1);
                goto finished;
            }
        }
        float *dist = p + (size_t)n * V;
        if (n < g) {
            if (sd_kv_truncate(target->kv, cur + n, e)) goto done;
            if (!o->skip_sample_adjustment) {
                /* remove the rejected draft and renormalise; p itself when
                 * the draft held all the mass (cannot happen after a
                 * rejection, kept for float safety) */
                float px = dist[rejected];
                if (px < 1.0f) {
                    dist[rejected] = 0;
                    float inv = 1.0f / (1.0f - px);
                    for (size_t i = 0; i < V; i++) dist[i] *= inv;
                }
            }
        }
        int32_t x;
        if (sd_dist_sample(cfg, dist, vocab, &x, e)) goto done;
        sd_report_step(cfg, seq + cur, n, rejected, x);
        seq[cur + n] = x;
        if (sd_ngram_observe(store, seq, cur + n, x, e)) goto done;
        cur += n + 1;
        if (sd_emit(cfg, out, &count, x)) break;
    }
finished:
    rc = sd_gen_finish(cfg, st, t0, out, count, max_gen_len);
done:
    free(seq);
    free(tlog);
    free(p);
    return rc;
}
