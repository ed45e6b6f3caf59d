#include <string.h>
#include <time.h>

#include "engine/decode/decode.h"
#include "kernels/common/top_k.h"

double sd_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sd_is_eos(const sd_gen_cfg *cfg, int32_t id) {
    for (int i = 0; i < cfg->n_eos; i++)
        if (cfg->eos_ids[i] == id) return 1;
    return 0;
}

int sd_is_greedy(const sd_gen_cfg *cfg) {
    return !cfg->sampler || sd_sampler_is_greedy(cfg->sampler);
}

int sd_fast_greedy(const sd_gen_cfg *cfg) {
    return !cfg->sampler ||
           (sd_sampler_is_greedy(cfg->sampler) && sd_sampler_n_stages(cfg->sampler) == 1);
}

int sd_drafter_sampler(const sd_gen_cfg *cfg, sd_sampler **out, sd_err *e) {
    *out = cfg->draft_sampler ? cfg->draft_sampler : cfg->sampler;
    if (!cfg->draft_sampler && cfg->sampler && sd_sampler_keeps_history(cfg->sampler))
        return sd_fail(e, "sampler '%s' keeps token history: the drafter needs its own instance "
                          "(draft_sampler)", sd_sampler_name(cfg->sampler));
    return 0;
}

int sd_reset_samplers(const sd_gen_cfg *cfg, const int32_t *prompt, int n, sd_err *e) {
    if (cfg->sampler && sd_sampler_reset(cfg->sampler, prompt, n, e)) return -1;
    if (cfg->draft_sampler && sd_sampler_reset(cfg->draft_sampler, prompt, n, e)) return -1;
    return 0;
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int sd_token_need(sd_sampler *smp, const int32_t *seq, int pos, sd_err *e) {
    return smp ? sd_sampler_need(smp, seq, pos, e) : pos;
}

int sd_token_dist(sd_sampler *smp, const int32_t *seq, int pos, const float *rows, int first,
                  float *probs, int vocab, sd_err *e) {
    if (smp) return sd_sampler_dist(smp, seq, pos, rows, first, probs, vocab, e);
    memset(probs, 0, (size_t)vocab * sizeof *probs);
    probs[argmax(rows + (size_t)(pos - first) * vocab, vocab)] = 1.0f;
    return 0;
}

int sd_dist_sample(const sd_gen_cfg *cfg, sd_sampler *smp, const float *probs, int vocab,
                   int32_t *id, sd_err *e) {
    if (!smp) {
        *id = argmax(probs, vocab);
        return 0;
    }
    if (!cfg->rng && !sd_sampler_is_greedy(smp))
        return sd_fail(e, "sampler '%s' draws at random: sd_gen_cfg needs an rng",
                       sd_sampler_name(smp));
    return sd_sampler_sample(smp, probs, vocab, cfg->rng, id, e);
}

int sd_lm_extend(sd_lm *lm, const int32_t *seq, int len, int use_cache, float *logits,
                 int n_logits, sd_gen_stats *st, sd_err *e) {
    int start = use_cache ? lm->kv->n : 0;
    if (start > len - n_logits) start = len - n_logits;
    st->host_bytes += (long long)n_logits * sd_head_rows(lm->m, lm->vocab_limit) * (long long)sizeof(float);
    return sd_forward_head(lm->m, lm->kv, seq + start, len - start, start, lm->n_layers, lm->vocab_limit,
                           logits, n_logits, 0, NULL, NULL, e);
}

int sd_lm_extend_top_k(sd_lm *lm, const int32_t *seq, int len, int use_cache, int n_rows, int k,
                       int32_t *ids, float *probs, sd_gen_stats *st, sd_err *e) {
    int start = use_cache ? lm->kv->n : 0;
    if (start > len - n_rows) start = len - n_rows;
    st->host_bytes += (long long)n_rows * k * (long long)(sizeof(int32_t) + (probs ? sizeof(float) : 0));
    return sd_forward_head(lm->m, lm->kv, seq + start, len - start, start, lm->n_layers, lm->vocab_limit,
                           NULL, n_rows, k, ids, probs, e);
}

int sd_check_vocab(const sd_model *draft, const sd_model *target, sd_err *e) {
    int nd = sd_tokenizer_n_vocab(draft->tok), nt = sd_tokenizer_n_vocab(target->tok);
    if (nd != nt)
        return sd_fail(e, "drafter vocabulary has %d tokens, the target's %d", nd, nt);
    for (int i = 0; i < nt; i++) {
        gguf_str a = sd_tokenizer_piece(draft->tok, i), b = sd_tokenizer_piece(target->tok, i);
        if (a.len != b.len || memcmp(a.s, b.s, a.len))
            return sd_fail(e, "drafter and target vocabularies differ at token %d ('%.*s' vs '%.*s')",
                           i, (int)(a.len > 40 ? 40 : a.len), a.s, (int)(b.len > 40 ? 40 : b.len),
                           b.s);
    }
    return 0;
}

int sd_emit(const sd_gen_cfg *cfg, int32_t *out, int *count, int32_t id) {
    out[(*count)++] = id;
    if (cfg->on_token) cfg->on_token(cfg->ud, id);
    return sd_is_eos(cfg, id) || (cfg->cancel && *cfg->cancel);
}

int sd_gen_finish(const sd_gen_cfg *cfg, sd_gen_stats *st, double t0, int32_t *out, int count,
                  int max_gen_len) {
    st->total_s = sd_now() - t0;
    st->new_tokens = count;
    if (st->verify_s > 0) {
        const double rest = st->total_s - st->draft_s - st->catchup_s - st->verify_s;
        st->host_s = rest > 0 ? rest : 0;
    }
    if (cfg->pad_id >= 0)
        for (int i = count; i < max_gen_len; i++) out[i] = cfg->pad_id;
    return count;
}

double sd_gen_decode_tps(const sd_gen_stats *st) {
    const int n = st->new_tokens - st->prefill_new_tokens;
    const double s = st->total_s - st->prefill_s;
    return n > 0 && s > 0 ? n / s : 0;
}

double sd_gen_step_s(const sd_gen_stats *st) {
    const double tps = sd_gen_decode_tps(st);
    return tps > 0 ? 1 / tps : 0;
}

int sd_top_k(const float *x, int n, int k, int32_t *idx) { return sd_host_top_k(x, n, k, idx); }

int sd_gen_total(int n_inputs, int max_gen_len, int n_ctx, sd_gen_stats *st, sd_err *e) {
    if (n_inputs > n_ctx)
        return sd_fail(e, "prompt of %d tokens is longer than the context (%d)", n_inputs, n_ctx);
    /* the last token comes from the logits at position n_ctx - 1 and is never
     * fed back, so a full context ends at n_ctx + 1 tokens */
    if (max_gen_len > n_ctx + 1 - n_inputs) {
        st->hit_context = 1;
        return n_ctx + 1;
    }
    return n_inputs + max_gen_len;
}

void sd_report_step(const sd_gen_cfg *cfg, const int32_t *accepted, int n_accepted,
                    int32_t rejected, int32_t next) {
    if (!cfg->on_step) return;
    sd_step st = {accepted, n_accepted, rejected, next};
    cfg->on_step(cfg->ud, &st);
}
