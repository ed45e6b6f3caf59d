/* Beam search with a length penalty (the PyTorch original's contract).
 * Every live beam has the same length, so one sd_forward_multi call per step
 * scores them all (weights read once per max_batch beams). A candidate's score is its summed
 * log-probability divided by ((min_length + len) / (min_length + 1))^alpha;
 * beams that emitted EOS keep their score and stop growing. After each
 * selection the caches follow their beams: a new beam takes over its
 * parent's cache when it is the first child, otherwise the parent's cache is
 * copied into a cache no survivor needs — no prefix is ever recomputed.
 * Without the cache (use_cache 0, the PyTorch original's use_cache=False
 * oracle) each step instead recomputes every live beam's whole sequence,
 * prompt included, from position 0, and no cache follows its beam. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"

typedef struct cand {
    double score, logp;
    int parent; /* beam index */
    int32_t tok; /* -1: a finished beam carried over unchanged */
    int finished;
} cand;

typedef struct beam {
    double score, logp;
    int finished, len;
    int32_t *toks;
    sd_kv *kv;
} beam;

static double penalty(int len, double min_length, double alpha) {
    return pow((min_length + len) / (min_length + 1.0), alpha);
}

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    if (x->parent != y->parent) return x->parent - y->parent;
    return x->tok - y->tok;
}

/* use_cache 0: the logits after each live beam's whole sequence (prompt +
 * its len tokens, assembled in seq), one forward from position 0 each, rows
 * in beam order. */
static int recompute(sd_model *m, const beam *beams, int B, int len, const int32_t *inputs,
                     int n_inputs, int32_t *seq, float *logits, sd_err *e) {
    memcpy(seq, inputs, (size_t)n_inputs * sizeof *seq);
    for (int i = 0, r = 0; i < B; i++) {
        if (beams[i].finished) continue;
        memcpy(seq + n_inputs, beams[i].toks, (size_t)len * sizeof *seq);
        if (sd_forward_ex(m, beams[i].kv, seq, n_inputs + len, 0, 0,
                          logits + (size_t)r++ * m->hp.vocab, 1, e))
            return -1;
    }
    return 0;
}

/* log of the softmax normaliser of one row: logp(i) = x[i] - lse. */
static double log_sum_exp(const float *x, int n) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return mx + log(sum);
}

int sd_beam_check_sampler(const sd_sampler *smp, sd_err *e) {
    if (!smp || (sd_sampler_is_greedy(smp) && sd_sampler_n_stages(smp) == 1)) return 0;
    char desc[256];
    sd_sampler_describe(smp, desc, sizeof desc);
    return sd_fail(e, "beam search ranks beams by the model's log-probabilities and applies no "
                      "sampler; it cannot honour --sampler %s (run beam without --sampler, or "
                      "run the other strategies separately)", desc);
}

int sd_beam_search_generate(const int32_t *inputs, int n_inputs, sd_model *m,
                            const sd_beam_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                            int32_t *out, sd_gen_stats *st, sd_err *e) {
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_inputs;
    if (sd_beam_check_sampler(cfg->sampler, e)) return -1;
    int V = m->hp.vocab;
    if (o->num_beams < 1) return sd_fail(e, "beam: num_beams %d must be at least 1", o->num_beams);
    if (o->top_k < 1) return sd_fail(e, "beam: top_k %d must be at least 1", o->top_k);
    if (!(o->min_length >= 0) || !isfinite(o->alpha))
        return sd_fail(e, "beam: min_length must be >= 0 and alpha finite");
    if (n_inputs < 1) return sd_fail(e, "beam: empty prompt");
    if (n_inputs > m->n_ctx)
        return sd_fail(e, "prompt of %d tokens is longer than the context (%d)", n_inputs, m->n_ctx);
    if (max_gen_len < 1) {
        if (cfg->pad_id >= 0)
            for (int i = 0; i < max_gen_len; i++) out[i] = cfg->pad_id;
        return 0;
    }
    int gen = max_gen_len;
    if (n_inputs + gen - 1 > m->n_ctx) {
        gen = m->n_ctx - n_inputs + 1;
        st->hit_context = 1;
    }
    int B = o->num_beams < V ? o->num_beams : V, K = o->top_k < V ? o->top_k : V;
    int n_ctx = n_inputs + gen;
    if (n_ctx > m->n_ctx) n_ctx = m->n_ctx;
    beam *beams = calloc((size_t)B, sizeof *beams), *next = calloc((size_t)B, sizeof *next);
    cand *cands = malloc((size_t)B * (size_t)K * sizeof *cands);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    int32_t *idx = malloc((size_t)(K > B ? K : B) * sizeof *idx), *last = malloc((size_t)B * sizeof *last);
    int *claimed = malloc((size_t)B * sizeof *claimed);
    sd_kv **pool = calloc((size_t)B, sizeof *pool), **kvs = calloc((size_t)B, sizeof *kvs);
    sd_kv **spare = calloc((size_t)B, sizeof *spare);
    int32_t *seq = cfg->use_cache ? NULL : malloc((size_t)n_ctx * sizeof *seq);
    int rc = -1, count = 0;
    if (!beams || !next || !cands || !logits || !idx || !last || !claimed || !pool || !kvs ||
        !spare || (!cfg->use_cache && !seq)) {
        sd_fail(e, "out of memory");
        goto done;
    }
    for (int i = 0; i < B; i++) {
        beams[i].toks = malloc((size_t)gen * sizeof(int32_t));
        next[i].toks = malloc((size_t)gen * sizeof(int32_t));
        if (!beams[i].toks || !next[i].toks) {
            sd_fail(e, "out of memory");
            goto done;
        }
        pool[i] = beams[i].kv =
            sd_kv_create(m->be, m->hp.n_layers, m->kv->kv_dim, n_ctx, m->kv_type, e);
        if (!pool[i]) goto done;
    }
    double t0 = sd_now();
    /* prefill once, then every beam starts from a copy of that cache */
    if (sd_forward_ex(m, beams[0].kv, inputs, n_inputs, 0, 0, logits, 1, e)) goto done;
    st->target_calls++;
    st->host_bytes += (long long)V * (long long)sizeof(float);
    st->prefill_s = sd_now() - t0;
    st->prefill_new_tokens = 1; /* one position of every beam */
    double lse = log_sum_exp(logits, V);
    sd_top_k(logits, V, B, idx);
    for (int i = 0; i < B; i++) {
        if (i > 0 && cfg->use_cache && sd_kv_copy(beams[i].kv, beams[0].kv, e)) goto done;
        beams[i].toks[0] = idx[i];
        beams[i].len = 1;
        beams[i].logp = logits[idx[i]] - lse;
        beams[i].score = beams[i].logp / penalty(1, o->min_length, o->alpha);
        beams[i].finished = sd_is_eos(cfg, idx[i]);
    }
    for (int len = 1; len < gen && !(cfg->cancel && *cfg->cancel); len++) {
        int live = 0;
        for (int i = 0; i < B; i++)
            if (!beams[i].finished) {
                kvs[live] = beams[i].kv;
                last[live++] = beams[i].toks[len - 1];
            }
        if (!live) break;
        for (int c = 0; cfg->use_cache && c < live; c += m->max_batch) {
            int nb = live - c < m->max_batch ? live - c : m->max_batch;
            if (sd_forward_multi(m, kvs + c, last + c, nb, n_inputs + len - 1,
                                 logits + (size_t)c * V, e))
                goto done;
        }
        if (!cfg->use_cache && recompute(m, beams, B, len, inputs, n_inputs, seq, logits, e))
            goto done;
        st->target_calls++;
        st->host_bytes += (long long)live * V * (long long)sizeof(float);
        int nc = 0;
        for (int i = 0, r = 0; i < B; i++) {
            beam *bm = &beams[i];
            if (bm->finished) {
                cands[nc++] = (cand){bm->score, bm->logp, i, -1, 1};
                continue;
            }
            const float *row = logits + (size_t)r++ * V;
            double lse_r = log_sum_exp(row, V);
            sd_top_k(row, V, K, idx);
            double pen = penalty(len + 1, o->min_length, o->alpha);
            for (int k = 0; k < K; k++) {
                double l = bm->logp + (row[idx[k]] - lse_r);
                cands[nc++] = (cand){l / pen, l, i, idx[k], sd_is_eos(cfg, idx[k])};
            }
        }
        /* nc >= B: every beam contributes at least one candidate */
        qsort(cands, (size_t)nc, sizeof *cands, cand_cmp);
        memset(claimed, 0, (size_t)B * sizeof *claimed);
        for (int j = 0; j < B; j++) claimed[cands[j].parent] = 1;
        int ns = 0;
        for (int i = 0; i < B; i++)
            if (!claimed[i]) spare[ns++] = beams[i].kv;
        memset(claimed, 0, (size_t)B * sizeof *claimed);
        for (int j = 0; j < B; j++) {
            const cand *c = &cands[j];
            beam *p = &beams[c->parent], *nb = &next[j];
            memcpy(nb->toks, p->toks, (size_t)p->len * sizeof(int32_t));
            nb->len = p->len;
            nb->logp = c->logp;
            nb->score = c->score;
            nb->finished = c->finished;
            if (c->tok >= 0) nb->toks[nb->len++] = c->tok;
            if (!claimed[c->parent]) {
                nb->kv = p->kv;
                claimed[c->parent] = 1;
            } else {
                nb->kv = spare[--ns];
                if (!c->finished && cfg->use_cache && sd_kv_copy(nb->kv, p->kv, e)) goto done;
            }
        }
        beam *tmp = beams;
        beams = next;
        next = tmp;
    }
    int best = 0;
    for (int i = 1; i < B; i++)
        if (beams[i].score > beams[best].score) best = i;
    count = beams[best].len;
    memcpy(out, beams[best].toks, (size_t)count * sizeof(int32_t));
    if (cfg->on_token)
        for (int i = 0; i < count; i++) cfg->on_token(cfg->ud, out[i]);
    rc = sd_gen_finish(cfg, st, t0, out, count, max_gen_len);
done:
    for (int i = 0; beams && next && i < B; i++) {
        free(beams[i].toks);
        free(next[i].toks);
    }
    for (int i = 0; pool && i < B; i++) sd_kv_free(pool[i]);
    free(beams);
    free(next);
    free(cands);
    free(logits);
    free(idx);
    free(last);
    free(claimed);
    free(pool);
    free(kvs);
    free(spare);
    free(seq);
    return rc;
}
