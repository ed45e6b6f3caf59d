#include "engine/cli/run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cli/json_out.h"
#include "engine/cli/settings.h"

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

/* --debug with JSON: each round kept as n_accepted, the accepted ids, the
 * rejected id and the next id (-1: none), for the run's "steps". */
typedef struct steps {
    int32_t *v;
    size_t n, cap;
    int failed;
} steps;

static void keep(steps *k, int32_t x) {
    if (k->failed) return;
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 256;
        int32_t *v = realloc(k->v, cap * sizeof *v);
        if (!v) {
            k->failed = 1;
            return;
        }
        k->v = v;
        k->cap = cap;
    }
    k->v[k->n++] = x;
}

/* ---- one prompt --------------------------------------------------------- */
/* The text stream of one run: tokens become UTF-8 as they are final (a
 * token ending inside a multi-byte character waits for the rest). The
 * prompt is echoed with the first token, not before the prefill, so a
 * progress line on the terminal has a line of its own. */
typedef struct stream {
    const sd_tokenizer *tok;
    sd_detok st;
    FILE *out;
    const char *prompt; /* echoed before the text; NULL once it is */
    int chat;           /* the answer is a new turn: a newline after the prompt */
    int text; /* stream text to out (off for JSON and the debug view) */
    steps *steps; /* NULL: --debug lines on stderr */
    int failed;
    sd_err e;
} stream;

static void echo(stream *s) {
    if (!s->prompt) return;
    fputs(s->prompt, s->out);
    if (s->chat) fputc('\n', s->out);
    s->prompt = NULL;
}

static void on_token(void *ud, int32_t id) {
    stream *s = ud;
    if (!s->text) return;
    echo(s);
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
    stream *s = ud;
    if (!s->steps) {
        sd_step_view(s->tok, step);
        return;
    }
    keep(s->steps, step->n_accepted);
    for (int i = 0; i < step->n_accepted; i++) keep(s->steps, step->accepted[i]);
    keep(s->steps, step->rejected);
    keep(s->steps, step->next);
}

static void json_steps(sd_json_obj *j, const steps *k) {
    sd_json_key(j, "steps");
    fputc('[', j->out);
    for (size_t at = 0; at < k->n;) {
        int n = k->v[at++];
        sd_json_obj o;
        if (at > 1) fputc(',', j->out);
        sd_json_begin(&o, j->out);
        sd_json_ids(&o, "accepted", k->v + at, n);
        at += (size_t)n;
        if (k->v[at] >= 0) sd_json_int(&o, "rejected", k->v[at]);
        else sd_json_null(&o, "rejected");
        if (k->v[at + 1] >= 0) sd_json_int(&o, "next", k->v[at + 1]);
        else sd_json_null(&o, "next");
        at += 2;
        sd_json_end(&o);
    }
    fputc(']', j->out);
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

/* A verification run's decode rate over the autoregressive one the cost
 * model's prediction is relative to (its one-row step); NAN without one. */
static double realised_speedup(const sd_gen_stats *st) {
    const double d = sd_gen_decode_tps(st);
    return st->step_s > 0 && d > 0 ? d * st->step_s : NAN;
}

static void print_json(const sd_session *s, FILE *out, int strat, const int32_t *ids, int n_ids,
                       const result *r, const char *text, const result *ar, const steps *k) {
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
        sd_json_int(&j, "draft_vocab", s->draft_lm.vocab_limit
                                           ? sd_head_rows(s->draft_lm.m, s->draft_lm.vocab_limit)
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
    if (t->options & SD_OPT_GAMMA) {
        sd_json_obj split;
        sd_json_obj_in(&j, "time_split", &split);
        sd_json_num(&split, "draft_s", st->draft_s);
        sd_json_num(&split, "catchup_s", st->catchup_s);
        sd_json_num(&split, "verify_s", st->verify_s);
        sd_json_num(&split, "host_s", st->host_s);
        sd_json_end(&split);
        sd_json_num(&j, "predicted_speedup", st->predicted_speedup > 0 ? st->predicted_speedup : NAN);
        sd_json_num(&j, "realised_speedup", realised_speedup(st));
        sd_json_int(&j, "drafted_ngram", st->drafted_ngram);
        sd_json_int(&j, "gamma", sd_session_gamma(&s->c, t->bit));
    }
    if (t->options & SD_OPT_P_MIN) sd_json_num(&j, "draft_p_min", s->c.draft_p_min);
    sd_json_int(&j, "use_cache", !s->c.no_cache);
    sd_json_int(&j, "hit_context", st->hit_context);
    if (k) json_steps(&j, k);
    sd_json_end(&j);
}

static const char *plural(long n, const char *one, const char *many) {
    return n == 1 ? one : many;
}

/* The side-by-side table (several strategies), on stderr with the stats. */
static void print_summary(const result *res) {
    const result *ar = &res[0];
    fprintf(stderr, "\n%-6s %7s %9s %9s %9s %8s %7s %7s %8s %9s %s\n", "", "tokens", "seconds",
            "tok/s", "decode/s", "accept", "target", "draft", "vs ar", "dec vs ar", "output");
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
        fprintf(stderr, "%-6s %7d %9.3f %9s %9s %8s %7ld %7ld %8s %9s %s\n", sd_strategies[i].name,
                st->new_tokens, st->total_s, tp, dtp, acc, st->target_calls, st->draft_calls, sp, dsp,
                same);
    }
}

/* One run's stats line on stderr; a rate with nothing to count reads n/a. */
static void print_stats(int strat, const sd_gen_stats *g) {
    char pre[32] = "n/a", all[32] = "n/a", dec[32] = "n/a";
    double d = sd_gen_decode_tps(g);
    if (rate(g->prompt_tokens, g->prefill_s) > 0)
        snprintf(pre, sizeof pre, "%.1f tok/s", rate(g->prompt_tokens, g->prefill_s));
    if (rate(g->new_tokens, g->total_s) > 0)
        snprintf(all, sizeof all, "%.1f tok/s", rate(g->new_tokens, g->total_s));
    if (d > 0) snprintf(dec, sizeof dec, "%.1f tok/s", d);
    fprintf(stderr,
            "specdec: %s: prompt %d %s (prefill %s), %d new %s in %.3f s: %s (decode %s), "
            "%ld target %s",
            sd_strategy_name(strat), g->prompt_tokens, plural(g->prompt_tokens, "token", "tokens"),
            pre, g->new_tokens, plural(g->new_tokens, "token", "tokens"), g->total_s, all, dec,
            g->target_calls, plural(g->target_calls, "call", "calls"));
    if (g->drafted)
        fprintf(stderr, ", %ld/%ld drafts accepted (%.1f%%), %ld draft %s", g->accepted, g->drafted,
                100.0 * g->accepted / g->drafted, g->draft_calls,
                plural(g->draft_calls, "call", "calls"));
    fprintf(stderr, "%s\n", g->hit_context ? " (context full)" : "");
}

/* --debug: where a verification run's time went, and the cost model's
 * speedup beside the realised one (both need an autoregressive run first). */
static void print_time_split(const sd_gen_stats *g) {
    const double part[4] = {g->draft_s, g->catchup_s, g->verify_s, g->host_s};
    const char *name[4] = {"drafting", "catch-up", "verification", "host"};
    const double total = g->total_s > 0 ? g->total_s : 1;
    fprintf(stderr, "specdec: time split:");
    for (int i = 0; i < 4; i++)
        fprintf(stderr, "%s %s %.3f s (%.1f%%)", i ? "," : "", name[i], part[i],
                100.0 * part[i] / total);
    if (g->predicted_speedup > 0 && isfinite(realised_speedup(g))) {
        const double real = realised_speedup(g);
        fprintf(stderr, "; speedup predicted %.2fx, realised %.2fx", g->predicted_speedup, real);
        double verify = 0;
        for (int n = 1; n < SD_COST_ROWS; n++) verify += g->verify_s_n[n];
        /* a miss of more than 10%: the calibrated parts beside the measured */
        if (fabs(g->predicted_speedup / real - 1) > 0.10)
            fprintf(stderr, " (calibrated calls: verification %.3f s against %.3f s measured, "
                            "drafter %.3f s against %.3f s)",
                    g->predicted_verify_s, verify, g->predicted_draft_s,
                    g->draft_s + g->catchup_s);
        fputc('\n', stderr);
    } else
        fprintf(stderr, "; speedup predicted -, realised - (no autoregressive run to compare)\n");
}

void sd_cli_args(const sd_cli *cli, sd_args *a) {
    sd_args_defaults(a);
    a->c = cli->s.c;
    a->c.seed = cli->s.seed;
    a->debug = cli->debug;
    a->sampler_timeout = cli->sampler_timeout;
    a->json = cli->json;
    a->jsonl = cli->jsonl;
}

/* --json: the document's head; its runs follow one a line, then the tail. */
static void document_head(const sd_cli *cli, FILE *out) {
    sd_args a;
    sd_cli_args(cli, &a);
    sd_json_obj doc, set;
    sd_json_begin(&doc, out);
    sd_json_obj_in(&doc, "settings", &set);
    sd_json_settings(&set, &a);
    sd_json_end(&set);
    sd_json_key(&doc, "runs");
    fputs("[\n", out);
}

static void document_tail(FILE *out, const sd_err *e) {
    fputs("]", out);
    if (e) {
        sd_json_obj err = {out, 1};
        sd_json_str(&err, "error", e->msg);
    }
    fputs("}\n", out);
    fflush(out);
}

int sd_cli_run(sd_cli *cli, const char *prompt, FILE *out, sd_err *e) {
    sd_session *s = &cli->s;
    const sd_config *a = &s->c;
    int32_t *ids = NULL;
    int n_ids = 0, rc = -1, n_runs = 0, n_json = 0;
    int json = cli->json || cli->jsonl;
    result res[N_ORDER];
    memset(res, 0, sizeof res);
    steps k = {0};
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
    if (cli->json) document_head(cli, out);
    for (int i = 0; i < N_ORDER; i++) {
        int strat = sd_strategies[i].bit;
        if (!(a->strategies & strat)) continue;
        result *r = &res[i];
        r->ids = malloc(((size_t)a->n_predict + 1) * sizeof *r->ids);
        if (!r->ids) {
            sd_fail(e, "out of memory");
            goto done;
        }
        k.n = 0;
        stream st = {.tok = s->target->tok, .out = out, .prompt = json ? NULL : prompt,
                     .chat = a->chat, .text = !json && !cli->debug, .steps = json ? &k : NULL};
        sd_hooks h = {on_token, cli->debug ? on_step : NULL, &st, cli->cancel};
        if (!json && n_runs > 1) {
            fprintf(out, "--- %s ---\n", sd_strategy_name(strat));
            fflush(out);
        }
        r->n = sd_session_generate(s, strat, ids, n_ids, &h, r->ids, &r->st, e);
        if (r->n >= 0 && k.failed) {
            sd_fail(e, "out of memory");
            r->n = -1;
        }
        if (r->n < 0 || st.failed) {
            if (st.failed) *e = st.e;
            if (!json) {
                echo(&st);
                fputc('\n', out);
            }
            sd_wrap(e, sd_strategy_name(strat));
            goto done;
        }
        r->ran = 1;
        if (json) {
            if (sd_detokenize(s->target->tok, r->ids, r->n, 0, &text, e)) goto done;
            if (n_json++) fputs(cli->json ? ",\n" : "", out);
            print_json(s, out, strat, ids, n_ids, r, text, strat == SD_STRAT_AR ? NULL : &res[0],
                       cli->debug ? &k : NULL);
            if (cli->jsonl) fputc('\n', out);
            fflush(out);
            free(text);
            text = NULL;
        } else {
            echo(&st);
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
            print_stats(strat, &r->st);
            if (cli->debug && (sd_strategy_find(strat)->options & SD_OPT_GAMMA))
                print_time_split(&r->st);
        }
        if (cli->cancel && *cli->cancel) {
            fflush(out);
            fprintf(stderr, "specdec: interrupted\n");
            break;
        }
    }
    if (!json && n_runs > 1 && !(cli->cancel && *cli->cancel)) print_summary(res);
    if (!json && s->sampler) fprintf(stderr, "specdec: seed %llu\n", (unsigned long long)s->seed);
    rc = 0;
done:
    if (cli->json) {
        if (n_json && rc) fputc('\n', out);
        document_tail(out, rc ? e : NULL);
    }
    for (int i = 0; i < N_ORDER; i++) free(res[i].ids);
    free(k.v);
    free(text);
    free(ids);
    return rc;
}

void sd_cli_describe(const sd_cli *cli, FILE *out) {
    const sd_session *s = &cli->s;
    const sd_config *a = &s->c;
    char desc[256] = "greedy (built-in)";
    if (s->sampler) sd_sampler_describe(s->sampler, desc, sizeof desc);
    fprintf(out, "sampler: %s\n", desc);
    fprintf(out, "target backend: %s%s%s\n", s->target->be->name, s->draft ? ", drafter backend: " : "",
            s->draft ? s->draft->be->name : "");
    fprintf(out, "drafter: %s\n",
            s->draft ? a->draft : s->have_drafter ? "self (first layers of the target)" : "none");
    if (s->have_drafter && a->draft_vocab > 0)
        fprintf(out, "draft vocabulary: token ids below %d\n", sd_head_rows(s->draft_lm.m, a->draft_vocab));
    else if (s->have_drafter && a->draft_vocab == SD_DRAFT_VOCAB_AUTO)
        fprintf(out, "draft vocabulary: cut where it saves the drafter's reads (speculative only)\n");
}
