/* NASD: n-gram assisted speculative decoding. The drafter is an n-gram
 * store instead of a model, so a draft costs a hash lookup. Its proposal
 * is deterministic (q is one-hot at the draft x), so the shared round
 * (engine/decode/verify.c, one_hot) tests r < p(x) and resamples a
 * rejection from p with x removed.
 *
 * The store learns as generation goes: the prompt first, then every final
 * token (accepted drafts and the corrected/bonus token), and the target's
 * filler_top_k most likely tokens at every verified position whose context
 * is final (rows 0..n of a round with n accepted drafts). On the greedy
 * path those come from the backend's top-k ids of the verified rows
 * (k = max(1, filler_top_k) ids per row, no logits copied).
 *
 * A round drafts up to sd_store_run(confirmed, gamma) tokens, confirmed
 * the drafts accepted in a row over the last rounds: a copied span runs
 * long rounds, a rejection brings the next back to gamma. */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"

typedef struct nasd_ctx {
    sd_ngram *store;
    const sd_nasd_opts *o;
} nasd_ctx;

static int nasd_draft(void *ud, int32_t *seq, int at, float *q, float *conf, sd_gen_stats *st,
                      sd_err *e) {
    nasd_ctx *s = ud;
    (void)q, (void)conf, (void)st, (void)e;
    return sd_ngram_predict(s->store, seq, at, !s->o->stop_if_unknown, &seq[at], NULL);
}

/* Adds the target's filler_top_k best tokens as continuations of seq[0..at). */
static int nasd_fillers(void *ud, const int32_t *seq, int at, const int32_t *ids, int k,
                        sd_err *e) {
    nasd_ctx *s = ud;
    int n = s->o->filler_top_k < k ? s->o->filler_top_k : k;
    for (int i = 0; i < n; i++)
        if (sd_ngram_observe(s->store, seq, at, ids[i], e)) return -1;
    return 0;
}

int sd_ngram_assisted_generate(const int32_t *inputs, int n_inputs, sd_ngram *store, sd_lm *target,
                               const sd_nasd_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                               int32_t *out, sd_gen_stats *st, sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    int gamma = o->v.gamma;
    if (gamma < 1) return sd_fail(e, "nasd: gamma %d must be at least 1", gamma);
    if (!(o->v.stop_below >= 0 && o->v.stop_below <= 1))
        return sd_fail(e, "nasd: stop_below %g is outside [0, 1]", o->v.stop_below);
    if (o->filler_top_k < 0 || o->filler_top_k > SD_TOP_K_MAX)
        return sd_fail(e, "nasd: filler_top_k %d is outside [0, %d]", o->filler_top_k,
                       SD_TOP_K_MAX);
    if (n_inputs < 1) return sd_fail(e, "nasd: empty prompt");
    if (max_gen_len < 0) return sd_fail(e, "nasd: max_gen_len %d < 0", max_gen_len);
    int total = sd_gen_total(n_inputs, max_gen_len, target->kv->n_ctx, st, e);
    if (total < 0) return -1;
    nasd_ctx nc = {store, o};
    int k = o->filler_top_k > 1 ? o->filler_top_k : 1;
    if (k > target->m->hp.vocab) k = target->m->hp.vocab;
    sd_verify v = {.target = target, .o = &o->v, .one_hot = 1, .top_k = k,
                   .cap = gamma < SD_STORE_RUN_MAX ? SD_STORE_RUN_MAX : gamma,
                   .draft = nasd_draft, .verified = nasd_fillers, .ud = &nc};
    int32_t *seq = malloc(((size_t)total + 1) * sizeof *seq);
    int rc = -1, count = 0, cur = n_inputs, r = 0, confirmed = 0;
    if (sd_verify_init(&v, cfg, e)) goto done;
    if (!seq) {
        sd_fail(e, "out of memory");
        goto done;
    }
    memcpy(seq, inputs, (size_t)n_inputs * sizeof *seq);
    if (sd_ngram_observe_seq(store, seq, 0, n_inputs, e) ||
        sd_reset_samplers(cfg, inputs, n_inputs, e))
        goto done;
    target->kv->n = 0; /* a fresh sequence: nothing cached is ours */
    v.t0 = sd_now();
    for (int first = o->v.first_target; r == 0 && cur < total; first = 0) {
        const int run = sd_store_run(confirmed, gamma);
        const int room = total - cur - 1 < run ? total - cur - 1 : run, from = cur;
        const long drafted = st->drafted, accepted = st->accepted;
        r = sd_verify_round(&v, cfg, seq, &cur, first ? 0 : room, !first, out, &count, st, e);
        confirmed = st->accepted - accepted == st->drafted - drafted
                        ? confirmed + (int)(st->drafted - drafted)
                        : 0;
        for (int i = from; r >= 0 && i < cur; i++)
            if (sd_ngram_observe(store, seq, i, seq[i], e)) r = -1;
    }
    if (r >= 0) rc = sd_gen_finish(cfg, st, v.t0, out, count, max_gen_len);
done:
    sd_verify_free(&v);
    free(seq);
    return rc;
}
