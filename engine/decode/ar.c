/* Autoregressive decoding, the baseline every other strategy is measured
 * against. With the cache, the prompt is one forward call and each later
 * token one call of n=1; without it, each step re-runs the whole prefix from
 * position 0 (the PyTorch original's use_cache=False, kept as an oracle).
 * Greedy steps with nothing before the argmax take it where the logits
 * are (on the device for CUDA, the backend's top_k_rows with k = 1), so
 * only the chosen id is copied; any other chain gets the row on the host,
 * at the history the sampler was told (reset to the prompt, then each
 * token). */
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"

int sd_autoregressive_generate_lm(const int32_t *inputs, int n_inputs, sd_lm *lm, int max_gen_len,
                                  const sd_gen_cfg *cfg, int32_t *out, sd_gen_stats *st,
                                  sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    if (n_inputs < 1) return sd_fail(e, "generate: empty prompt");
    if (max_gen_len < 0) return sd_fail(e, "generate: max_gen_len %d < 0", max_gen_len);
    int n_ctx = lm->kv->n_ctx;
    if (n_inputs > n_ctx)
        return sd_fail(e, "prompt of %d tokens is longer than the context (%d)", n_inputs, n_ctx);
    int vocab = lm->m->hp.vocab;
    int32_t *seq = malloc((size_t)(n_inputs + max_gen_len) * sizeof *seq);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    float *probs = malloc((size_t)vocab * sizeof *probs);
    int count = 0, rc = -1;
    if (!seq || !logits || !probs) {
        sd_fail(e, "out of memory");
        goto done;
    }
    memcpy(seq, inputs, (size_t)n_inputs * sizeof *seq);
    if (sd_reset_samplers(cfg, inputs, n_inputs, e)) goto done;
    lm->kv->n = 0; /* a fresh sequence: nothing cached is ours */
    double t0 = sd_now();
    while (count < max_gen_len) {
        int len = n_inputs + count;
        if (len > n_ctx) {
            st->hit_context = 1;
            break;
        }
        int32_t id;
        if (sd_fast_greedy(cfg)) {
            if (sd_lm_extend_top_k(lm, seq, len, cfg->use_cache, 1, 1, &id, NULL, st, e)) goto done;
        } else if (sd_lm_extend(lm, seq, len, cfg->use_cache, logits, 1, st, e) ||
                   sd_token_dist(cfg->sampler, seq, len, logits, len, probs, vocab, e) ||
                   sd_dist_sample(cfg, cfg->sampler, probs, vocab, &id, e)) {
            goto done;
        }
        st->target_calls++;
        if (count == 0) {
            st->prefill_s = sd_now() - t0;
            st->prefill_new_tokens = 1;
        }
        seq[len] = id;
        if (sd_emit(cfg, out, &count, id)) break;
    }
    rc = sd_gen_finish(cfg, st, t0, out, count, max_gen_len);
done:
    free(seq);
    free(logits);
    free(probs);
    return rc;
}

int sd_autoregressive_generate(const int32_t *inputs, int n_inputs, sd_model *m, int max_gen_len,
                               const sd_gen_cfg *cfg, int32_t *out, sd_gen_stats *st, sd_err *e) {
    sd_lm lm = {m, m->kv, 0, 0};
    return sd_autoregressive_generate_lm(inputs, n_inputs, &lm, max_gen_len, cfg, out, st, e);
}
