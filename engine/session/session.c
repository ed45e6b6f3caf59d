#include "engine/session/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


void sd_config_defaults(sd_config *c) {
    memset(c, 0, sizeof *c);
    c->n_predict = 128;
    c->parse_special = 1;
    c->strategies = SD_STRAT_AR;
    c->draft_vocab = SD_DRAFT_VOCAB_AUTO;
    c->gamma = SD_GAMMA_AUTO;
    c->stop_below = SD_STOP_BELOW_DEFAULT;
    c->hybrid_n = 4;
    c->ngram_n = 3;
    c->ngram_kind = SD_NGRAM_MULTI;
    c->filler_top_k = 3;
    c->stop_if_unknown = 1;
    c->beams = 4;
    c->beam_top_k = 3;
    c->min_length = 5.0;
    c->alpha = 1.2;
    c->draft_device = -1;
}

int sd_session_gamma(const sd_config *c, int strat) {
    if (c->gamma != SD_GAMMA_AUTO) return c->gamma;
    const int adaptive = strat == SD_STRAT_SPEC && !c->fixed_gamma && c->stop_below > 0;
    return adaptive ? SD_GAMMA_ADAPTIVE : SD_GAMMA_FIXED;
}

/* The target's instance always; the drafter's only when every stage
 * accepts the drafter role, else the refusal is kept for the strategies
 * that draft (check_drafter_sampler in strategies.c), so the chain still
 * runs autoregressively and in beam search. */
int sd_session_set_sampler(sd_session *s, const char *spec, const char *const *kv, int n_kv,
                           sd_err *e) {
    sd_sampler *p[2] = {NULL, NULL};
    sd_err refused = {{0}};
    if (spec) {
        if (sd_samplers_load_chain(s->samplers, spec, e) < 0) return -1;
        int32_t stop[16];
        int n_stop = sd_tokenizer_stop_ids(s->target->tok, stop, 16);
        sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                               .struct_size = sizeof info,
                               .n_vocab = s->target->hp.vocab,
                               .max_history = s->target->n_ctx + 2,
                               .role = SD_ROLE_TARGET,
                               .n_eos = n_stop,
                               .eos_ids = stop,
                               .piece = sd_tokenizer_bytes,
                               .piece_ctx = s->target->tok,
                               .vocab_text = sd_tokenizer_text};
        if (!(p[0] = sd_sampler_create_for(s->samplers, spec, kv, n_kv, &info, e))) return -1;
        info.role = SD_ROLE_DRAFTER;
        const int allowed = sd_sampler_allows_drafter(s->samplers, spec, kv, n_kv, &info, &refused);
        if (allowed < 0) *e = refused;
        if (allowed < 0 ||
            (allowed && !(p[1] = sd_sampler_create_for(s->samplers, spec, kv, n_kv, &info, e)))) {
            sd_sampler_destroy(p[0]);
            return -1;
        }
    }
    sd_sampler_destroy(s->sampler);
    sd_sampler_destroy(s->draft_sampler);
    s->sampler = p[0];
    s->draft_sampler = p[1];
    memcpy(s->drafter_refused, refused.msg, sizeof refused.msg);
    return 0;
}

int sd_session_reset_store(sd_session *s, sd_err *e) {
    sd_ngram *n = sd_ngram_create(s->c.ngram_kind, s->c.ngram_n, s->target->n_ctx, e);
    if (!n) return -1;
    sd_ngram_free(s->store);
    s->store = n;
    return 0;
}

/* The automatic head cut. A drafter's step reads its layers and its
 * output head; with a large vocabulary the head is a big share of those
 * bytes (Qwen2.5 0.5B: 151936 x 896, about a third of its step), and the
 * token ids of a BPE vocabulary run roughly from frequent to rare, so a
 * head over the first AUTO_VOCAB ids drafts almost every token the whole
 * head would while reading a fraction of its rows. The cut pays when it
 * removes at least AUTO_SAVING of the drafter's weight bytes; drafts it
 * cannot propose are only rejections, the target decides every token. */
#define AUTO_VOCAB 32768
#define AUTO_SAVING 0.1

/* The head limit SD_DRAFT_VOCAB_AUTO stands for: AUTO_VOCAB or 0 (whole);
 * *saving gets the share of the drafter's weight bytes the cut saves. */
static int auto_draft_vocab(const sd_session *s, double *saving) {
    const sd_model *m = s->draft_lm.m;
    *saving = 0;
    if (!m || m->hp.vocab <= 2 * AUTO_VOCAB) return 0;
    const double head = (double)m->output.row_bytes * m->output.rows;
    *saving = head * (1 - (double)sd_head_rows(m, AUTO_VOCAB) / m->hp.vocab) /
              (double)sd_model_weight_bytes(m);
    return *saving >= AUTO_SAVING ? AUTO_VOCAB : 0;
}

/* The drafter's head limit for strategy strat (engine/model/model.h
 * sd_forward_head): token ids below draft_vocab only, so each draft reads
 * that share of the head's rows. Verification is the target's, so the
 * output does not change; draft-only output would, so the automatic cut
 * is speculative decoding's alone. */
static int set_draft_vocab(sd_session *s, int strat, sd_err *e) {
    const int v = s->c.draft_vocab, vocab = s->target->hp.vocab;
    double saving;
    if (v == SD_DRAFT_VOCAB_AUTO) {
        s->draft_lm.vocab_limit = strat == SD_STRAT_SPEC ? auto_draft_vocab(s, &saving) : 0;
        return 0;
    }
    if (v < 0 || v > vocab)
        return sd_fail(e, "--draft-vocab %d: the vocabulary has %d tokens (1 to %d, 0 for all)", v, vocab,
                       vocab);
    s->draft_lm.vocab_limit = v;
    return 0;
}

/* Says in s->notice when speculative decoding's drafter gets the automatic cut. */
static void note_auto_vocab(sd_session *s) {
    double saving;
    const int v = s->c.draft_vocab == SD_DRAFT_VOCAB_AUTO && s->have_drafter
                      ? auto_draft_vocab(s, &saving) : 0;
    if (!v) return;
    size_t used = strlen(s->notice);
    snprintf(s->notice + used, sizeof s->notice - used,
             "%sspeculative decoding drafts from token ids below %d of %d: the cut saves %.0f%% "
             "of the drafter's weight reads (--draft-vocab 0 keeps the whole head)",
             used ? "; " : "", v, s->draft_lm.m->hp.vocab, 100 * saving);
}

int sd_session_set_draft_layers(sd_session *s, int k, sd_err *e) {
    if (k < 1 || k > s->target->hp.n_layers)
        return sd_fail(e, "draft layers %d: the target has %d layers", k, s->target->hp.n_layers);
    sd_kv *kv = sd_kv_create(s->target->be, k, s->target->kv->kv_dim, s->target->n_ctx,
                           s->target->kv_type, e);
    if (!kv) return -1;
    sd_kv_free(s->self_kv);
    s->self_kv = kv;
    s->draft_lm = (sd_lm){s->target, kv, k, s->c.draft_vocab > 0 ? s->c.draft_vocab : 0};
    s->c.draft_layers = k;
    s->have_drafter = 1;
    return 0;
}

sd_model *sd_load_model(const char *path, int device, int threads, sd_backend *beside,
                        const sd_model_opts *o, char *notice, size_t cap, sd_err *e) {
    sd_hparams hp;
    if (cap) notice[0] = 0;
    if (sd_model_hparams(path, &hp, e)) return NULL;
    char why[160];
    sd_backend *be = sd_backend_open_for(device, threads, hp.head_dim, beside, why, sizeof why, e);
    if (!be) {
        sd_wrap(e, device == SD_DEVICE_CUDA ? "--device cuda" : "--device");
        return NULL;
    }
    if (o->kv_type != SD_F32 && strcmp(be->name, "cpu") != 0) {
        be->destroy(be);
        sd_fail(e, "--kv-type %s: only the CPU backend keeps an F16 cache (add --device cpu)",
                o->kv_type == SD_F16 ? "f16" : "?");
        return NULL;
    }
    if (why[0] && cap) snprintf(notice, cap, "%s: %s", path, why);
    return sd_model_load(path, be, o, e);
}

/* sd_load_model, its notice appended to s->notice; the drafter's CPU
 * backend shares the target's worker pool. */
static sd_model *load(sd_session *s, const char *path, int device, int threads, int n_ctx,
                      sd_err *e) {
    char notice[256];
    sd_model_opts o = {.n_ctx = n_ctx, .kv_type = s->c.kv_type, .progress = s->c.progress,
                       .progress_ud = s->c.progress_ud};
    sd_model *m = sd_load_model(path, device, threads, s->target ? s->target->be : NULL, &o,
                                notice, sizeof notice, e);
    size_t used = strlen(s->notice);
    if (m && notice[0])
        snprintf(s->notice + used, sizeof s->notice - used, "%s%s", used ? "; " : "", notice);
    return m;
}

sd_sampler_set *sd_session_plugins(const sd_config *c, sd_err *e) {
    char **dirs;
    int n_dirs;
    if (sd_plugin_dirs(c->plugin_dirs, c->n_plugin_dirs, &dirs, &n_dirs, e)) return NULL;
    sd_sampler_set *set = sd_samplers_open_lazy((const char *const *)dirs, n_dirs, e);
    sd_plugin_dirs_free(dirs, n_dirs);
    return set;
}

int sd_session_open(sd_session *s, const sd_config *c, sd_err *e) {
    sd_sampler_set *set = sd_session_plugins(c, e);
    return set ? sd_session_open_with(s, c, set, e) : -1;
}

/* The context of a target and drafter pair: the target's (--ctx, or its
 * default) unless the drafter's context_length is shorter, then the
 * drafter's, said in s->notice. So the context never refuses a drafter,
 * and a vocabulary it does not share is what the user hears of. */
static int pair_ctx(sd_session *s, const sd_config *c, int *n_ctx, sd_err *e) {
    sd_hparams t, d;
    if (sd_model_hparams(c->model, &t, e) || sd_model_hparams(c->draft, &d, e)) return -1;
    const int want = sd_model_ctx(&t, c->n_ctx);
    *n_ctx = c->n_ctx;
    if (want > d.ctx_train && want <= t.ctx_train) {
        *n_ctx = d.ctx_train;
        size_t used = strlen(s->notice);
        snprintf(s->notice + used, sizeof s->notice - used,
                 "%sthe context is %d positions, not %d: the drafter %s holds no more "
                 "(context_length %d; --ctx sets it)", used ? "; " : "", d.ctx_train, want, c->draft,
                 d.ctx_train);
    }
    return 0;
}

int sd_session_open_with(sd_session *s, const sd_config *c, sd_sampler_set *samplers,
                         sd_err *e) {
    memset(s, 0, sizeof *s);
    s->c = *c;
    s->samplers = samplers;
    int n_ctx = c->n_ctx;
    if (c->draft && pair_ctx(s, c, &n_ctx, e)) goto fail;
    s->target = load(s, c->model, c->device, c->threads, n_ctx, e);
    if (!s->target) goto fail;
    s->target_lm = (sd_lm){s->target, s->target->kv, 0, 0};
    if (c->draft) {
        int dev = c->draft_device >= 0 ? c->draft_device : c->device;
        s->draft = load(s, c->draft, dev, c->threads, s->target->n_ctx, e);
        if (!s->draft) goto fail;
        if (sd_check_vocab(s->draft, s->target, e)) {
            sd_wrap(e, c->draft);
            goto fail;
        }
        s->draft_lm = (sd_lm){s->draft, s->draft->kv, 0, 0};
        s->have_drafter = 1;
    } else if (c->draft_layers && sd_session_set_draft_layers(s, c->draft_layers, e)) {
        sd_wrap(e, "--draft-layers");
        goto fail;
    }
    if (set_draft_vocab(s, SD_STRAT_SPEC, e)) goto fail;
    note_auto_vocab(s);
    if (c->sampler && sd_session_set_sampler(s, c->sampler, c->sampler_args, c->n_sampler_args, e))
        goto fail;
    if (sd_session_reset_store(s, e)) goto fail;
    s->seed = c->have_seed ? c->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return 0;
fail:
    sd_session_close(s);
    return -1;
}

void sd_session_close(sd_session *s) {
    sd_sampler_destroy(s->sampler);
    sd_sampler_destroy(s->draft_sampler);
    sd_ngram_free(s->store);
    sd_kv_free(s->self_kv);
    sd_model_free(s->draft);
    sd_model_free(s->target);
    sd_samplers_close(s->samplers);
    memset(s, 0, sizeof *s);
}

int sd_session_prompt_ids(const sd_session *s, const char *text, int32_t **ids, int *n,
                          sd_err *e) {
    const sd_model *m = s->target;
    int add_bos = sd_tokenizer_add_bos(m->tok), r;
    if (!s->c.chat)
        r = sd_tokenize(m->tok, text, strlen(text), add_bos, s->c.parse_special, ids, n, e);
    else
        r = sd_chat_tokenize(m->tok, m->file, s->c.system, text, add_bos, ids, n, e);
    if (r) return -1;
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
        return sd_fail(e, "the prompt is empty and the model has no BOS token to start from");
    }
    if (*n > m->n_ctx) {
        int len = *n;
        free(*ids);
        *ids = NULL;
        return sd_fail(e, "prompt of %d tokens is longer than the context (%d; --ctx, at most %d "
                          "for this model)", len, m->n_ctx, m->hp.ctx_train);
    }
    return 0;
}

/* 0 when the session can run every strategy in bits; -1 with the reason. */
static int check_strategies(const sd_session *s, int bits, sd_err *e) {
    if (sd_strategies_needing_drafter(bits) && !s->have_drafter) {
        char names[64] = "";
        for (int i = 0; i < SD_N_STRATEGIES; i++)
            if (sd_strategies[i].needs_drafter)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         names[0] ? "/" : "", sd_strategies[i].name);
        return sd_fail(e, "%s need a drafter (-d DRAFT, --draft-layers K, or /draft_layers K in the "
                          "interactive mode)", names);
    }
    for (int i = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        if ((bits & t->bit) && t->check && t->check(s, e)) return -1;
    }
    return 0;
}

int sd_session_check_strategies(const sd_session *s, sd_err *e) {
    return check_strategies(s, s->c.strategies, e);
}

int sd_session_warm_up(sd_session *s, const int32_t *ids, sd_err *e) {
    float *logits = malloc((size_t)s->target->hp.vocab * sizeof *logits);
    if (!logits) return sd_fail(e, "out of memory");
    int rc = sd_forward_ex(s->target, s->target->kv, ids, 1, 0, 0, logits, 1, e);
    if (!rc && s->draft) rc = sd_forward_ex(s->draft, s->draft->kv, ids, 1, 0, 0, logits, 1, e);
    free(logits);
    return rc;
}

int sd_session_generate(sd_session *s, int strat, const int32_t *ids, int n_ids,
                        const sd_hooks *h, int32_t *out, sd_gen_stats *st, sd_err *e) {
    const sd_config *c = &s->c;
    int32_t stop[16];
    int n_stop = c->ignore_eos ? 0 : sd_tokenizer_stop_ids(s->target->tok, stop, 16);
    sd_rng_seed(&s->rng, s->seed);
    sd_gen_cfg cfg = {.sampler = s->sampler, .draft_sampler = s->draft_sampler, .rng = &s->rng,
                      .eos_ids = stop, .n_eos = n_stop, .pad_id = -1, .use_cache = !c->no_cache};
    if (h) {
        cfg.on_token = h->on_token;
        cfg.on_step = h->on_step;
        cfg.ud = h->ud;
        cfg.cancel = h->cancel;
    }
    const sd_strategy *t = sd_strategy_find(strat);
    if (!t) return sd_fail(e, "unknown strategy bit %d", strat);
    if (check_strategies(s, strat, e) || (t->needs_drafter && set_draft_vocab(s, strat, e))) return -1;
    const int cal = (t->options & SD_OPT_GAMMA) && s->step_s > 0
                        ? sd_session_calibrate(s, strat, ids, n_ids, e)
                        : 1;
    if (cal < 0) return -1;
    double vscale = 1, dscale = 1;
    if (cal == 0) {
        if (sd_session_retime(s, strat, ids, n_ids, &vscale, &dscale, e)) return -1;
        cfg.costs = &s->cal;
    } else {
        cfg.run_costs = 1; /* no calibration (no autoregressive run before): the run's own */
    }
    sd_strategy_run r = {ids, n_ids, c->n_predict, &cfg, out, st};
    const int n = t->run(s, &r, e);
    if (n < 0) return n;
    if (!st->model) st->model = c->model;
    if (strat == SD_STRAT_AR && sd_gen_step_s(st) > 0) s->step_s = sd_gen_step_s(st);
    if (cal == 0 && st->verify_s > 0) {
        /* the speed during the run: the mean of the timings around it */
        double v_after = 1, d_after = 1;
        if (sd_session_retime(s, strat, ids, n_ids, &v_after, &d_after, e)) return -1;
        vscale = (vscale + v_after) / 2;
        dscale = (dscale + d_after) / 2;
        st->step_s = s->step_s;
        st->predicted_speedup = sd_cost_predict_at(st, &s->cal, vscale, dscale, s->step_s,
                                                   &st->predicted_verify_s, &st->predicted_draft_s);
    }
    return n;
}
