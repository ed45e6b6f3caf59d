#include "engine/cli/run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/json_out.h"

#define N_ORDER SD_N_STRATEGIES

int sd_cli_list_samplers(sd_sampler_set *set, FILE *out, sd_err *e) {
    if (sd_samplers_probe_all(set, e)) return -1;
    char *text = sd_samplers_list(set, e);
    if (!text) return -1;
    fputs(text, out);
    free(text);
    return 0;
}

void sd_cli_warnings(const sd_sampler_set *set) {
    for (int i = 0; i < sd_samplers_n_warnings(set); i++)
        fprintf(stderr, "specdec: warning: %s\n", sd_samplers_warning(set, i));
}

/* ---- one prompt --------------------------------------------------------- */
/* The text stream of one run: tokens become UTF-8 as they are final (a
 * token ending inside a multi-byte character waits for the rest). */
typedef struct stream {
    const sd_tokenizer *tok;
    sd_detok st;
    FILE *out;
    int text; /* stream text to out (off for JSON and the debug view) */
    int failed;
    sd_err e;
} stream;

static void on_token(void *ud, int32_t id) {
    stream *s = ud;
    if (!s->text) return;
    char buf[256];
    int n = sd_detok_push(s->tok, &s->st, id, buf, sizeof buf, &s->e);
    if (n < 0) {
        s->failed = 1;
        return;
    }
    fwrite(buf, 1, (size_t)n, s->out);
    fflush(s->out);
}

static void on_step(void *ud, const sd_step *step) {
    sd_step_view(((stream *)ud)->tok, step);
}

typedef struct result {
    int ran, n;
    int32_t *ids;
    sd_gen_stats st;
} result;

static double rate(int n, double s) { return s > 0 && n > 0 ? n / s : 0; }

/* r's tokens per second over ar's; NAN (shown "-" or null) when either
 * rate is undefined, e.g. with -n 0 nothing was generated or timed. */
static double speedup(const result *r, const result *ar) {
    double a = rate(ar->st.new_tokens, ar->st.total_s), b = rate(r->st.new_tokens, r->st.total_s);
    return a > 0 && b > 0 ? b / a : NAN;
}
/* the same after the first forward call (sd_gen_decode_tps) */
static double decode_speedup(const result *r, const result *ar) {
    double a = sd_gen_decode_tps(&ar->st), b = sd_gen_decode_tps(&r->st);
    return a > 0 && b > 0 ? b / a : NAN;
}

static void print_json(const sd_session *s, FILE *out, int strat, const int32_t *ids, int n_ids,
                       const result *r, const char *text, const result *ar) {
    const sd_gen_stats *st = &r->st;
    const sd_strategy *t = sd_strategy_find(strat);
    char desc[256];
    /* beam search applies no sampler (a chain it cannot apply is refused) */
    if (!(t->options & SD_OPT_SAMPLER)) snprintf(desc, sizeof desc, "none (%s)", t->title);
    else if (s->sampler) sd_sampler_describe(s->sampler, desc, sizeof desc);
    else snprintf(desc, sizeof desc, "greedy");
    sd_json_obj j;
    sd_json_begin(&j, out);
    sd_json_str(&j, "strategy", sd_strategy_name(strat));
    sd_json_str(&j, "model", st->model);
    if (t->needs_drafter) {
        if (s->draft) sd_json_str(&j, "draft", s->c.draft);
        else sd_json_int(&j, "draft_layers", s->c.draft_layers);
        sd_json_int(&j, "draft_vocab", s->c.draft_vocab ? sd_head_rows(s->draft_lm.m, s->c.draft_vocab)
                                                         : s->target->hp.vocab);
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
    sd_json_num(&j, "decode_tokens_per_s", sd_gen_decode_tps(st));
    sd_json_int(&j, "drafted", st->drafted);
    sd_json_int(&j, "accepted", st->accepted);
    sd_json_num(&j, "acceptance_rate", st->drafted ? (double)st->accepted / st->drafted : 0);
    sd_json_int(&j, "target_calls", st->target_calls);
    sd_json_int(&j, "draft_calls", st->draft_calls);
    sd_json_int(&j, "host_bytes", (long)st->host_bytes);
    sd_json_num(&j, "host_bytes_per_round",
                st->target_calls ? (double)st->host_bytes / st->target_calls : 0);
    if (ar && ar->ran) {
        sd_json_num(&j, "speedup_vs_ar", speedup(r, ar));
        sd_json_num(&j, "decode_speedup_vs_ar", decode_speedup(r, ar));
        sd_json_int(&j, "same_as_ar", ar->n == r->n && !memcmp(ar->ids, r->ids, (size_t)r->n * 4));
    } else {
        sd_json_num(&j, "speedup_vs_ar", NAN);
        sd_json_num(&j, "decode_speedup_vs_ar", NAN);
    }
    if (t->options & SD_OPT_GAMMA) sd_json_int(&j, "gamma", s->c.gamma);
    if (t->options & SD_OPT_P_MIN) sd_json_num(&j, "draft_p_min", s->c.draft_p_min);
    sd_json_int(&j, "use_cache", !s->c.no_cache);
    sd_json_int(&j, "hit_context", st->hit_context);
    sd_json_end(&j);
}

static void print_summary(const result *res, FILE *out) {
    const result *ar = &res[0];
    fprintf(out, "\n%-6s %7s %9s %9s %9s %8s %7s %7s %8s %9s %s\n", "", "tokens", "seconds", "tok/s",
            "decode/s", "accept", "target", "draft", "vs ar", "dec vs ar", "output");
    for (int i = 0; i < N_ORDER; i++) {
        const result *r = &res[i];
        if (!r->ran) continue;
        const sd_gen_stats *st = &r->st;
        double tps = rate(st->new_tokens, st->total_s);
        const double dtps = sd_gen_decode_tps(st);
        char acc[16] = "-", sp[16] = "-", dsp[16] = "-", tp[16] = "-", dtp[16] = "-";
        if (st->drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * st->accepted / st->drafted);
        if (ar->ran && isfinite(speedup(r, ar))) snprintf(sp, sizeof sp, "%.2fx", speedup(r, ar));
        if (ar->ran && isfinite(decode_speedup(r, ar)))
            snprintf(dsp, sizeof dsp, "%.2fx", decode_speedup(r, ar));
        if (tps > 0) snprintf(tp, sizeof tp, "%.1f", tps);
        if (dtps > 0) snprintf(dtp, sizeof dtp, "%.1f", dtps);
        const char *same = !ar->ran || r == ar ? ""
                           : (ar->n == r->n && !memcmp(ar->ids, r->ids, (size_t)r->n * 4))
                               ? "same as ar"
                               : "differs from ar";
        fprintf(out, "%-6s %7d %9.3f %9s %9s %8s %7ld %7ld %8s %9s %s\n", sd_strategies[i].name,
                st->new_tokens, st->total_s, tp, dtp, acc, st->target_calls, st->draft_calls, sp, dsp,
                same);
    }
}

int sd_cli_run(sd_cli *cli, const char *prompt, FILE *out, sd_err *e) {
    sd_session *s = &cli->s;
    const sd_config *a = &s->c;
    int32_t *ids = NULL;
    int n_ids = 0, rc = -1, n_runs = 0;
    result res[N_ORDER];
    memset(res, 0, sizeof res);
    char *text = NULL;
    /* Checked before anything is printed, so the error is not lost after
     * the echoed prompt. */
    if (sd_session_check_strategies(s, e) || sd_session_prompt_ids(s, prompt, &ids, &n_ids, e))
        return -1;
    for (int i = 0; i < N_ORDER; i++) n_runs += (a->strategies & sd_strategies[i].bit) != 0;
    if (sd_session_warm_up(s, ids, e)) {
        free(ids);
        return -1;
    }
    for (int i = 0; i < N_ORDER; i++) {
        int strat = sd_strategies[i].bit;
        if (!(a->strategies & strat)) continue;
        result *r = &res[i];
        r->ids = malloc(((size_t)a->n_predict + 1) * sizeof *r->ids);
        if (!r->ids) {
            sd_fail(e, "out of memory");
            goto done;
        }
        stream st = {.tok = s->target->tok, .out = out, .text = !cli->json && !cli->debug};
        sd_hooks h = {on_token, cli->debug && !cli->json ? on_step : NULL, &st, cli->cancel};
        if (!cli->json) {
            if (n_runs > 1) fprintf(out, "--- %s ---\n", sd_strategy_name(strat));
            fputs(prompt, out);
            if (a->chat) fputc('\n', out); /* the answer is a new turn, not a continuation */
            fflush(out);
        }
        r->n = sd_session_generate(s, strat, ids, n_ids, &h, r->ids, &r->st, e);
        if (r->n < 0 || st.failed) {
            if (st.failed) *e = st.e;
            if (!cli->json) fputc('\n', out);
            sd_wrap(e, sd_strategy_name(strat));
            goto done;
        }
        r->ran = 1;
        if (cli->json) {
            if (sd_detokenize(s->target->tok, r->ids, r->n, 0, &text, e)) goto done;
            print_json(s, out, strat, ids, n_ids, r, text, strat == SD_STRAT_AR ? NULL : &res[0]);
            free(text);
            text = NULL;
        } else {
            if (cli->debug) {
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
            /* the text on stdout is complete before its metrics follow on
             * stderr, so a pipe never glues the two onto one line */
            fflush(out);
            const sd_gen_stats *g = &r->st;
            fprintf(stderr,
                    "specdec: %s: prompt %d tokens (prefill %.1f tok/s), %d new tokens in %.3f s: "
                    "%.1f tok/s (decode %.1f tok/s), %ld target calls",
                    sd_strategy_name(strat), g->prompt_tokens, rate(g->prompt_tokens, g->prefill_s),
                    g->new_tokens, g->total_s, rate(g->new_tokens, g->total_s),
                    sd_gen_decode_tps(g), g->target_calls);
            if (g->drafted)
                fprintf(stderr, ", %ld/%ld drafts accepted (%.1f%%), %ld draft calls", g->accepted,
                        g->drafted, 100.0 * g->accepted / g->drafted, g->draft_calls);
            fprintf(stderr, "%s\n", g->hit_context ? " (context full)" : "");
        }
        if (cli->cancel && *cli->cancel) {
            fflush(out);
            fprintf(stderr, "specdec: interrupted\n");
            break;
        }
    }
    if (!cli->json && n_runs > 1 && !(cli->cancel && *cli->cancel)) print_summary(res, out);
    if (!cli->json && s->sampler) fprintf(stderr, "specdec: seed %llu\n", (unsigned long long)s->seed);
    rc = 0;
done:
    for (int i = 0; i < N_ORDER; i++) free(res[i].ids);
    free(text);
    free(ids);
    return rc;
}

void sd_cli_describe(const sd_cli *cli, FILE *out) {
    const sd_session *s = &cli->s;
    const sd_config *a = &s->c;
    char desc[256] = "greedy (built-in)";
    if (s->sampler) sd_sampler_describe(s->sampler, desc, sizeof desc);
    fprintf(out, "strategies:");
    for (int i = 0; i < N_ORDER; i++)
        if (a->strategies & sd_strategies[i].bit) fprintf(out, " %s", sd_strategies[i].name);
    fprintf(out, "\nlength %d, gamma %d, cache %s, chat %s, parse_special %s, debug %s, "
                 "sampler %s, seed %llu\n",
            a->n_predict, a->gamma, a->no_cache ? "off" : "on", a->chat ? "on" : "off",
            a->parse_special ? "on" : "off", cli->debug ? "on" : "off", desc,
            (unsigned long long)s->seed);
    fprintf(out, "target backend: %s%s%s\n", s->target->be->name, s->draft ? ", drafter backend: " : "",
            s->draft ? s->draft->be->name : "");
    fprintf(out, "drafter: %s\n",
            s->draft ? a->draft : s->have_drafter ? "self (first layers of the target)" : "none");
    if (!s->draft && s->have_drafter) fprintf(out, "draft layers: %d\n", a->draft_layers);
    if (s->have_drafter) fprintf(out, "draft p_min: %g%s\n", a->draft_p_min, a->draft_p_min > 0 ? "" : " (off)");
    if (s->have_drafter && a->draft_vocab)
        fprintf(out, "draft vocab: token ids below %d\n", sd_head_rows(s->draft_lm.m, a->draft_vocab));
    else if (s->have_drafter)
        fprintf(out, "draft vocab: all\n");
    fprintf(out, "ngram: %s store, N %d, filler top-k %d, stop if unknown %s, reset between prompts %s\n",
            a->ngram_kind == SD_NGRAM_MULTI ? "multi" : "one", a->ngram_n, a->filler_top_k,
            a->stop_if_unknown ? "on" : "off", a->keep_ngrams ? "off" : "on");
    fprintf(out, "beam: %d beams, top-k %d, min_length %g, alpha %g\n", a->beams, a->beam_top_k,
            a->min_length, a->alpha);
}
