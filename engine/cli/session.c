#include "session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_out.h"

static const int order[] = {SD_STRAT_AR, SD_STRAT_SPEC, SD_STRAT_NASD, SD_STRAT_BEAM, SD_STRAT_DRAFT};
#define N_ORDER (int)(sizeof order / sizeof order[0])

int sd_session_set_sampler(sd_session *s, const char *name, const char *const *kv, int n_kv,
                           sd_err *e) {
    sd_processor *p = NULL;
    if (name) {
        p = sd_processor_create(s->samplers, name, kv, n_kv, s->target->hp.vocab, e);
        if (!p) return -1;
    }
    sd_processor_destroy(s->proc);
    s->proc = p;
    return 0;
}

int sd_session_reset_store(sd_session *s, sd_err *e) {
    sd_ngram *n = sd_ngram_create(s->a.ngram_kind, s->a.ngram_n, s->target->n_ctx, e);
    if (!n) return -1;
    sd_ngram_free(s->store);
    s->store = n;
    return 0;
}

int sd_session_set_draft_layers(sd_session *s, int k, sd_err *e) {
    if (k < 1 || k > s->target->hp.n_layers)
        return sd_fail(e, "draft layers %d: the target has %d layers", k, s->target->hp.n_layers);
    sd_kv *kv = sd_kv_create(s->target->be, k, s->target->kv->kv_dim, s->target->n_ctx, e);
    if (!kv) return -1;
    sd_kv_free(s->self_kv);
    s->self_kv = kv;
    s->draft_lm = (sd_lm){s->target, kv, k};
    s->a.draft_layers = k;
    s->have_drafter = 1;
    return 0;
}

int sd_session_open(sd_session *s, const sd_args *a, sd_err *e) {
    memset(s, 0, sizeof *s);
    s->a = *a;
    char **dirs;
    int n_dirs;
    if (sd_plugin_dirs(a->plugin_dirs, a->n_plugin_dirs, &dirs, &n_dirs, e)) return -1;
    s->samplers = sd_samplers_open((const char *const *)dirs, n_dirs, e);
    sd_plugin_dirs_free(dirs, n_dirs);
    if (!s->samplers) return -1;
    for (int i = 0; i < sd_samplers_n_warnings(s->samplers); i++)
        fprintf(stderr, "specdec: warning: %s\n", sd_samplers_warning(s->samplers, i));
    sd_model_opts mo = {a->n_ctx, a->threads, a->device};
    s->target = sd_model_load(a->model, &mo, e);
    if (!s->target) goto fail;
    s->target_lm = (sd_lm){s->target, s->target->kv, 0};
    if (a->draft) {
        mo.n_ctx = s->target->n_ctx;
        if (a->draft_device >= 0) mo.device = a->draft_device;
        s->draft = sd_model_load(a->draft, &mo, e);
        if (!s->draft) goto fail;
        if (sd_check_vocab(s->draft, s->target, e)) {
            sd_wrap(e, a->draft);
            goto fail;
        }
        s->draft_lm = (sd_lm){s->draft, s->draft->kv, 0};
        s->have_drafter = 1;
    } else if (a->draft_layers && sd_session_set_draft_layers(s, a->draft_layers, e)) {
        sd_wrap(e, "--draft-layers");
        goto fail;
    }
    if (a->sampler && sd_session_set_sampler(s, a->sampler, a->sampler_args, a->n_sampler_args, e))
        goto fail;
    if (sd_session_reset_store(s, e)) goto fail;
    s->seed = a->have_seed ? a->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return 0;
fail:
    sd_session_close(s);
    return -1;
}

void sd_session_close(sd_session *s) {
    sd_processor_destroy(s->proc);
    sd_ngram_free(s->store);
    sd_kv_free(s->self_kv);
    sd_model_free(s->draft);
    sd_model_free(s->target);
    sd_samplers_close(s->samplers);
    memset(s, 0, sizeof *s);
}

/* ---- one prompt --------------------------------------------------------- */
typedef struct stream {
    const sd_tokenizer *tok;
    sd_detok st;
    FILE *out;
    int failed;
    sd_err e;
} stream;

static void on_token(void *ud, int32_t id) {
    stream *s = ud;
    char buf[256];
    int n = sd_detok_push(s->tok, &s->st, id, buf, sizeof buf, &s->e);
    if (n < 0) {
        s->failed = 1;
        return;
    }
    fwrite(buf, 1, (size_t)n, s->out);
    fflush(s->out);
}

static int prompt_ids(const sd_session *s, const char *text, int32_t **ids, int *n, sd_err *e) {
    const sd_model *m = s->target;
    int add_bos = sd_tokenizer_add_bos(m->tok);
    if (!s->a.chat) return sd_tokenize(m->tok, text, strlen(text), add_bos, 0, ids, n, e);
    char *chat;
    if (sd_chat_format(m->tok, m->file, s->a.system, text, &chat, e)) return -1;
    int r = sd_tokenize(m->tok, chat, strlen(chat), add_bos, 1, ids, n, e);
    free(chat);
    return r;
}

typedef struct result {
    int ran, n;
    int32_t *ids;
    sd_gen_stats st;
} result;

static int run_one(sd_session *s, int strat, const int32_t *ids, int n_ids, sd_gen_cfg *cfg,
                   int32_t *out, sd_gen_stats *st, sd_err *e) {
    const sd_args *a = &s->a;
    int max = a->n_predict;
    switch (strat) {
    case SD_STRAT_AR:
        return sd_autoregressive_generate_lm(ids, n_ids, &s->target_lm, max, cfg, out, st, e);
    case SD_STRAT_DRAFT:
        return sd_autoregressive_generate_lm(ids, n_ids, &s->draft_lm, max, cfg, out, st, e);
    case SD_STRAT_SPEC: {
        sd_spec_opts o = {a->gamma, a->skip_sample_adjustment, !a->no_first_target};
        return sd_speculative_generate(ids, n_ids, &s->draft_lm, &s->target_lm, &o, max, cfg, out,
                                       st, e);
    }
    case SD_STRAT_NASD: {
        if (!a->keep_ngrams) sd_ngram_reset(s->store);
        sd_nasd_opts o = {a->gamma, a->filler_top_k, a->stop_if_unknown,
                          a->skip_sample_adjustment, !a->no_first_target};
        return sd_ngram_assisted_generate(ids, n_ids, s->store, &s->target_lm, &o, max, cfg, out,
                                          st, e);
    }
    default: {
        sd_beam_opts o = {a->beams, a->beam_top_k, a->min_length, a->alpha};
        return sd_beam_search_generate(ids, n_ids, s->target, &o, max, cfg, out, st, e);
    }
    }
}

static double rate(int n, double s) { return s > 0 && n > 0 ? n / s : 0; }

static void print_json(const sd_session *s, FILE *out, int strat, const int32_t *ids, int n_ids,
                       const result *r, const char *text, const result *ar) {
    const sd_gen_stats *st = &r->st;
    char desc[256];
    if (s->proc) sd_processor_describe(s->proc, desc, sizeof desc);
    else snprintf(desc, sizeof desc, "greedy");
    sd_json_obj j;
    sd_json_begin(&j, out);
    sd_json_str(&j, "strategy", sd_strategy_name(strat));
    sd_json_str(&j, "model", s->a.model);
    if (strat == SD_STRAT_SPEC || strat == SD_STRAT_DRAFT) {
        if (s->draft) sd_json_str(&j, "draft", s->a.draft);
        else sd_json_int(&j, "draft_layers", s->a.draft_layers);
    }
    sd_json_str(&j, "sampler", desc);
    sd_json_u64(&j, "seed", s->seed);
    sd_json_ids(&j, "prompt_ids", ids, n_ids);
    sd_json_ids(&j, "ids", r->ids, r->n);
    sd_json_str(&j, "text", text);
    sd_json_int(&j, "prompt_tokens", st->prompt_tokens);
    sd_json_int(&j, "new_tokens", st->new_tokens);
    sd_json_num(&j, "seconds", st->total_s);
    sd_json_num(&j, "tokens_per_s", rate(st->new_tokens, st->total_s));
    sd_json_num(&j, "prefill_tokens_per_s", rate(st->prompt_tokens, st->prefill_s));
    sd_json_num(&j, "decode_tokens_per_s", rate(st->new_tokens - 1, st->total_s - st->prefill_s));
    sd_json_int(&j, "drafted", st->drafted);
    sd_json_int(&j, "accepted", st->accepted);
    sd_json_num(&j, "acceptance_rate", st->drafted ? (double)st->accepted / st->drafted : 0);
    sd_json_int(&j, "target_calls", st->target_calls);
    sd_json_int(&j, "draft_calls", st->draft_calls);
    if (ar && ar->ran) {
        sd_json_num(&j, "speedup_vs_ar",
                    rate(st->new_tokens, st->total_s) / rate(ar->st.new_tokens, ar->st.total_s));
        sd_json_int(&j, "same_as_ar", ar->n == r->n && !memcmp(ar->ids, r->ids, (size_t)r->n * 4));
    } else {
        sd_json_num(&j, "speedup_vs_ar", NAN);
    }
    if (strat == SD_STRAT_SPEC || strat == SD_STRAT_NASD) sd_json_int(&j, "gamma", s->a.gamma);
    sd_json_int(&j, "use_cache", !s->a.no_cache);
    sd_json_int(&j, "hit_context", st->hit_context);
    sd_json_end(&j);
}

static void print_summary(const result *res, FILE *out) {
    const result *ar = &res[0];
    fprintf(out, "\n%-6s %7s %9s %9s %8s %7s %7s %8s %s\n", "", "tokens", "seconds", "tok/s",
            "accept", "target", "draft", "vs ar", "output");
    for (int i = 0; i < N_ORDER; i++) {
        const result *r = &res[i];
        if (!r->ran) continue;
        const sd_gen_stats *st = &r->st;
        double tps = rate(st->new_tokens, st->total_s);
        char acc[16] = "-", sp[16] = "-";
        if (st->drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * st->accepted / st->drafted);
        if (ar->ran) snprintf(sp, sizeof sp, "%.2fx", tps / rate(ar->st.new_tokens, ar->st.total_s));
        const char *same = !ar->ran || r == ar ? ""
                           : (ar->n == r->n && !memcmp(ar->ids, r->ids, (size_t)r->n * 4))
                               ? "same as ar"
                               : "differs from ar";
        fprintf(out, "%-6s %7d %9.3f %9.1f %8s %7ld %7ld %8s %s\n", sd_strategy_name(order[i]),
                st->new_tokens, st->total_s, tps, acc, st->target_calls, st->draft_calls, sp, same);
    }
}

/* One untimed token through each model first, so no strategy pays for
 * thread start-up or the first touch of the mapped weights. */
static int warm_up(sd_session *s, const int32_t *ids, sd_err *e) {
    float *logits = malloc((size_t)s->target->hp.vocab * sizeof *logits);
    if (!logits) return sd_fail(e, "out of memory");
    int rc = sd_forward_ex(s->target, s->target->kv, ids, 1, 0, 0, logits, 1, e);
    if (!rc && s->draft) rc = sd_forward_ex(s->draft, s->draft->kv, ids, 1, 0, 0, logits, 1, e);
    free(logits);
    return rc;
}

int sd_session_run(sd_session *s, const char *prompt, FILE *out, sd_err *e) {
    const sd_args *a = &s->a;
    int32_t *ids = NULL;
    int n_ids = 0, rc = -1, n_runs = 0;
    result res[N_ORDER];
    memset(res, 0, sizeof res);
    char *text = NULL;
    if (prompt_ids(s, prompt, &ids, &n_ids, e)) return -1;
    if (n_ids == 0) {
        free(ids);
        return sd_fail(e, "the prompt is empty and the model has no BOS token to start from");
    }
    /* Checked before anything is printed, so the error is not lost after
     * the echoed prompt (each strategy checks it again for library callers). */
    if (n_ids > s->target->n_ctx) {
        free(ids);
        return sd_fail(e, "prompt of %d tokens is longer than the context (%d; --ctx, at most %d "
                          "for this model)", n_ids, s->target->n_ctx, s->target->hp.ctx_train);
    }
    for (int i = 0; i < N_ORDER; i++) n_runs += (a->strategies & order[i]) != 0;
    if ((a->strategies & (SD_STRAT_SPEC | SD_STRAT_DRAFT)) && !s->have_drafter) {
        free(ids);
        return sd_fail(e, "spec/draft need a drafter (-d DRAFT, --draft-layers K, /drafter)");
    }
    if (warm_up(s, ids, e)) {
        free(ids);
        return -1;
    }
    int32_t stop[16];
    int n_stop = a->ignore_eos ? 0 : sd_tokenizer_stop_ids(s->target->tok, stop, 16);
    for (int i = 0; i < N_ORDER; i++) {
        int strat = order[i];
        if (!(a->strategies & strat)) continue;
        result *r = &res[i];
        r->ids = malloc(((size_t)a->n_predict + 1) * sizeof *r->ids);
        if (!r->ids) {
            sd_fail(e, "out of memory");
            goto done;
        }
        sd_rng_seed(&s->rng, s->seed); /* every strategy sees the same random stream */
        stream st = {.tok = s->target->tok, .out = out};
        sd_gen_cfg cfg = {.proc = s->proc, .rng = &s->rng, .eos_ids = stop, .n_eos = n_stop,
                          .pad_id = -1, .use_cache = !a->no_cache, .debug = a->debug,
                          .on_token = a->json || a->debug ? NULL : on_token, .ud = &st};
        if (!a->json) {
            if (n_runs > 1) fprintf(out, "--- %s ---\n", sd_strategy_name(strat));
            fputs(prompt, out);
            if (a->chat) fputc('\n', out); /* the answer is a new turn, not a continuation */
            fflush(out);
        }
        r->n = run_one(s, strat, ids, n_ids, &cfg, r->ids, &r->st, e);
        if (r->n < 0 || st.failed) {
            if (st.failed) *e = st.e;
            if (!a->json) fputc('\n', out);
            sd_wrap(e, sd_strategy_name(strat));
            goto done;
        }
        r->ran = 1;
        if (a->json) {
            if (sd_detokenize(s->target->tok, r->ids, r->n, 0, &text, e)) goto done;
            print_json(s, out, strat, ids, n_ids, r, text, strat == SD_STRAT_AR ? NULL : &res[0]);
            free(text);
            text = NULL;
        } else {
            if (a->debug) {
                /* the step lines on stderr were the live view; the text
                 * comes whole, so the two never interleave on a terminal */
                if (sd_detokenize(s->target->tok, r->ids, r->n, 0, &text, e)) goto done;
                fputs(text, out);
                free(text);
                text = NULL;
            } else {
                char tail[64];
                int nt = sd_detok_flush(&st.st, tail, sizeof tail);
                fwrite(tail, 1, (size_t)nt, out);
            }
            fputc('\n', out);
            const sd_gen_stats *g = &r->st;
            fprintf(stderr,
                    "specdec: %s: prompt %d tokens (prefill %.1f tok/s), %d new tokens in %.3f s: "
                    "%.1f tok/s (decode %.1f tok/s), %ld target calls",
                    sd_strategy_name(strat), g->prompt_tokens, rate(g->prompt_tokens, g->prefill_s),
                    g->new_tokens, g->total_s, rate(g->new_tokens, g->total_s),
                    rate(g->new_tokens - 1, g->total_s - g->prefill_s), g->target_calls);
            if (g->drafted)
                fprintf(stderr, ", %ld/%ld drafts accepted (%.1f%%), %ld draft calls", g->accepted,
                        g->drafted, 100.0 * g->accepted / g->drafted, g->draft_calls);
            fprintf(stderr, "%s\n", g->hit_context ? " (context full)" : "");
        }
    }
    if (!a->json && n_runs > 1) print_summary(res, out);
    if (!a->json && s->proc) fprintf(stderr, "specdec: seed %llu\n", (unsigned long long)s->seed);
    rc = 0;
done:
    for (int i = 0; i < N_ORDER; i++) free(res[i].ids);
    free(text);
    free(ids);
    return rc;
}

void sd_session_describe(const sd_session *s, FILE *out) {
    const sd_args *a = &s->a;
    char desc[256] = "greedy (built-in)";
    if (s->proc) sd_processor_describe(s->proc, desc, sizeof desc);
    fprintf(out, "strategies:");
    for (int i = 0; i < N_ORDER; i++)
        if (a->strategies & order[i]) fprintf(out, " %s", sd_strategy_name(order[i]));
    fprintf(out, "\nlength %d, gamma %d, cache %s, chat %s, debug %s, sampler %s, seed %llu\n",
            a->n_predict, a->gamma, a->no_cache ? "off" : "on", a->chat ? "on" : "off",
            a->debug ? "on" : "off", desc, (unsigned long long)s->seed);
    fprintf(out, "target backend: %s%s%s\n", s->target->be->name, s->draft ? ", drafter backend: " : "",
            s->draft ? s->draft->be->name : "");
    fprintf(out, "drafter: %s\n",
            s->draft ? a->draft : s->have_drafter ? "self (first layers of the target)" : "none");
    if (!s->draft && s->have_drafter) fprintf(out, "draft layers: %d\n", a->draft_layers);
    fprintf(out, "ngram: %s store, N %d, filler top-k %d, stop if unknown %s, reset between prompts %s\n",
            a->ngram_kind == SD_NGRAM_MULTI ? "multi" : "one", a->ngram_n, a->filler_top_k,
            a->stop_if_unknown ? "on" : "off", a->keep_ngrams ? "off" : "on");
    fprintf(out, "beam: %d beams, top-k %d, min_length %g, alpha %g\n", a->beams, a->beam_top_k,
            a->min_length, a->alpha);
}
