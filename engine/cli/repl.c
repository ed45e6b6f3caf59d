#include "engine/cli/repl.h"

#include <editline/readline.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/args.h"

#define MAX_WORDS 34

static const char usage[] =
    "commands:\n"
    "  /quit                          leave\n"
    "  /help                          this list and the current settings\n"
    "  /debug                         toggle the per-step view of accepted/rejected drafts\n"
    "  /clear                         clear the screen\n"
    "  /target /speculative /ngram /beam /drafter\n"
    "                                 toggle autoregressive, speculative, NASD, beam search,\n"
    "                                 draft-only generation\n"
    "  /cache                         toggle the KV cache\n"
    "  /chat                          toggle the chat template\n"
    "  /parse_special                 toggle control tokens in prompts (not in chat messages)\n"
    "  /length N                      tokens to generate\n"
    "  /gamma N                       drafts per verification\n"
    "  /draft_p_min P                 a draft below drafter probability P ends its round (0: off)\n"
    "  /sampler CHAIN [key=value ...] sampler plugin or chain (a,b,c) and its parameters,\n"
    "                                 stage.key=value for one stage (alias /processor;\n"
    "                                 topk = top_k, topknucleus = top_k_nucleus)\n"
    "  /top_k_filler N                target top-k added to the n-gram store\n"
    "  /set_ngramstorage multi|one N  n-gram store kind and order (rebuilds the store;\n"
    "                                 basic = multi, onelevel = one)\n"
    "  /reset_in_between              toggle resetting the n-gram store between prompts\n"
    "  /draft_layers K                self-speculative drafter: the target's first K layers\n"
    "  /draft_vocab N                 drafts from token ids below N only (0: all)\n"
    "  /seed N                        sampling seed\n"
    "anything else is a prompt, run through every enabled strategy (\\n, \\t and \\\\ in it\n"
    "are a newline, a tab and a backslash); Ctrl-C stops a running generation and\n"
    "returns here, a second Ctrl-C during it (or one at this prompt) ends specdec\n";

static int split(char *line, char **w) {
    int n = 0;
    for (char *t = strtok(line, " \t"); t && n < MAX_WORDS; t = strtok(NULL, " \t")) w[n++] = t;
    return n;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int parse_prob(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= 0 && v <= 1)) return -1;
    *out = v;
    return 0;
}

static void toggle_strategy(sd_session *s, int bit, FILE *out) {
    const sd_strategy *t = sd_strategy_find(bit);
    s->c.strategies ^= bit;
    int on = (s->c.strategies & bit) != 0;
    fprintf(out, "%s: %s\n", t->title, on ? "on" : "off");
    if (on && t->needs_drafter && !s->have_drafter)
        fprintf(out, "note: no drafter yet: /draft_layers K here, or start with -d DRAFT "
                     "or --draft-layers K\n");
}

static void bad(FILE *out, const char *msg) {
    fprintf(out, "error: %s\n%s", msg, usage);
}

static int command(sd_cli *cli, char **w, int n, FILE *out) {
    const char *c = w[0];
    sd_session *s = &cli->s;
    sd_config *a = &s->c;
    sd_err e = {{0}};
    int v;
    if (!strcmp(c, "/quit") || !strcmp(c, "/exit")) return 1;
    if (!strcmp(c, "/help")) {
        fputs(usage, out);
        sd_cli_describe(cli, out);
    } else if (!strcmp(c, "/debug")) {
        cli->debug = !cli->debug;
        fprintf(out, "debug: %s\n", cli->debug ? "on" : "off");
    } else if (!strcmp(c, "/clear")) {
        fputs(isatty(1) ? "\033[H\033[2J" : "", out);
        fprintf(out, "cleared\n");
    } else if (!strcmp(c, "/target")) {
        toggle_strategy(s, SD_STRAT_AR, out);
    } else if (!strcmp(c, "/speculative")) {
        toggle_strategy(s, SD_STRAT_SPEC, out);
    } else if (!strcmp(c, "/ngram")) {
        toggle_strategy(s, SD_STRAT_NASD, out);
    } else if (!strcmp(c, "/beam")) {
        toggle_strategy(s, SD_STRAT_BEAM, out);
    } else if (!strcmp(c, "/drafter")) {
        toggle_strategy(s, SD_STRAT_DRAFT, out);
    } else if (!strcmp(c, "/cache")) {
        a->no_cache = !a->no_cache;
        fprintf(out, "cache: %s\n", a->no_cache ? "off" : "on");
    } else if (!strcmp(c, "/chat")) {
        a->chat = !a->chat;
        fprintf(out, "chat: %s\n", a->chat ? "on" : "off");
    } else if (!strcmp(c, "/parse_special")) {
        a->parse_special = !a->parse_special;
        fprintf(out, "parse_special: %s\n", a->parse_special ? "on" : "off");
    } else if (!strcmp(c, "/length")) {
        if (n != 2 || parse_int(w[1], 1, 1 << 20, &v)) bad(out, "/length N with N >= 1");
        else fprintf(out, "length: %d\n", a->n_predict = v);
    } else if (!strcmp(c, "/draft_vocab")) {
        if (n != 2 || parse_int(w[1], 0, s->target->hp.vocab, &v)) {
            char msg[96];
            snprintf(msg, sizeof msg, "/draft_vocab N with N in [0, %d] (0: all)", s->target->hp.vocab);
            bad(out, msg);
        } else {
            fprintf(out, "draft_vocab: %d\n", a->draft_vocab = v);
        }
    } else if (!strcmp(c, "/gamma")) {
        if (n != 2 || parse_int(w[1], 1, 256, &v)) bad(out, "/gamma N with N in [1, 256]");
        else fprintf(out, "gamma: %d\n", a->gamma = v);
    } else if (!strcmp(c, "/draft_p_min")) {
        double p;
        if (n != 2 || parse_prob(w[1], &p)) bad(out, "/draft_p_min P with P in [0, 1]");
        else fprintf(out, "draft_p_min: %g\n", a->draft_p_min = p);
    } else if (!strcmp(c, "/top_k_filler")) {
        if (n != 2 || parse_int(w[1], 0, 64, &v)) bad(out, "/top_k_filler N with N in [0, 64]");
        else fprintf(out, "top_k_filler: %d\n", a->filler_top_k = v);
    } else if (!strcmp(c, "/reset_in_between")) {
        a->keep_ngrams = !a->keep_ngrams;
        fprintf(out, "reset_in_between: %s\n", a->keep_ngrams ? "off" : "on");
    } else if (!strcmp(c, "/seed")) {
        char *end;
        errno = 0;
        unsigned long long sv = n == 2 && w[1][0] != '-' ? strtoull(w[1], &end, 10) : 0;
        if (n != 2 || w[1][0] == '-' || *end || errno) bad(out, "/seed N with N >= 0");
        else fprintf(out, "seed: %llu\n", (unsigned long long)(s->seed = sv));
    } else if (!strcmp(c, "/set_ngramstorage")) {
        /* basic and onelevel: the reference tool's names */
        int kind = n != 3                                                 ? -1
                   : !strcmp(w[1], "multi") || !strcmp(w[1], "basic")     ? SD_NGRAM_MULTI
                   : !strcmp(w[1], "one") || !strcmp(w[1], "onelevel") ? SD_NGRAM_ONE
                                                                          : -1;
        if (kind < 0 || parse_int(w[2], 2, SD_NGRAM_MAX_N, &v)) {
            bad(out, "/set_ngramstorage multi|one N with N in [2, 16] (basic = multi, onelevel = one)");
        } else {
            int old_kind = a->ngram_kind, old_n = a->ngram_n;
            a->ngram_kind = kind;
            a->ngram_n = v;
            if (sd_session_reset_store(s, &e)) {
                a->ngram_kind = old_kind;
                a->ngram_n = old_n;
                fprintf(out, "error: %s\n", e.msg);
            } else {
                fprintf(out, "ngram storage: %s, N %d\n", kind == SD_NGRAM_MULTI ? "multi" : "one", v);
            }
        }
    } else if (!strcmp(c, "/draft_layers")) {
        if (n != 2 || parse_int(w[1], 1, 1 << 20, &v)) bad(out, "/draft_layers K with K >= 1");
        else if (s->draft) fprintf(out, "error: a draft model is loaded (-d); draft layers need none\n");
        else if (sd_session_set_draft_layers(s, v, &e)) fprintf(out, "error: %s\n", e.msg);
        else fprintf(out, "draft layers: %d\n", v);
    } else if (!strcmp(c, "/sampler") || !strcmp(c, "/processor")) {
        if (n < 2) {
            bad(out, "/sampler CHAIN [key=value ...]");
            sd_cli_list_samplers(s->samplers, out, &e);
        } else if (sd_session_set_sampler(s, w[1], (const char *const *)w + 2,
                                          n - 2, &e)) {
            fprintf(out, "error: %s\n", e.msg);
            sd_cli_list_samplers(s->samplers, out, &e);
        } else {
            char desc[256];
            sd_sampler_describe(s->sampler, desc, sizeof desc);
            fprintf(out, "sampler: %s\n", desc);
        }
    } else {
        fprintf(out, "error: unknown command '%s'\n%s", c, usage);
    }
    return 0;
}

/* ---- Ctrl-C ----------------------------------------------------------------
 * While a prompt runs, SIGINT only sets a flag the strategies check at each
 * token (SA_RESETHAND: a second Ctrl-C during the same run ends specdec, for
 * a run stuck where nothing checks). Outside a run SIGINT has its default
 * action, so a Ctrl-C at the prompt ends the session as before. */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static int run_prompt(sd_cli *cli, const char *prompt, FILE *out, sd_err *e) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    interrupted = 0;
    cli->cancel = &interrupted;
    sigaction(SIGINT, &sa, &old);
    int rc = sd_cli_run(cli, prompt, out, e);
    sigaction(SIGINT, &old, NULL);
    cli->cancel = NULL;
    fflush(out);
    return rc;
}

/* A typed prompt's escapes, in place: \n newline, \t tab, \\ backslash;
 * any other backslash stays as it is. */
static void unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r == '\\' && (r[1] == 'n' || r[1] == 't' || r[1] == '\\')) {
            r++;
            *w++ = *r == 'n' ? '\n' : *r == 't' ? '\t' : '\\';
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

int sd_repl_line(sd_cli *cli, char *line, FILE *out) {
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (!len) return 0;
    if (line[0] == '/') {
        char *w[MAX_WORDS];
        int n = split(line, w);
        if (n == MAX_WORDS) {
            fprintf(out, "error: too many words\n");
            return 0;
        }
        return command(cli, w, n, out);
    }
    sd_err e = {{0}};
    unescape(line);
    if (run_prompt(cli, line, out, &e)) fprintf(out, "error: %s\n", e.msg);
    return 0;
}

int sd_repl_run(sd_cli *cli, const char *first, sd_err *e) {
    /* -i -p TEXT: the prompt first, as given (no unescaping); an error in
     * it ends the run like one without -i */
    if (first && run_prompt(cli, first, stdout, e)) return -1;
    int tty = isatty(0);
    if (tty) {
        printf("specdec interactive mode; /help lists the commands\n");
        using_history();
    }
    size_t cap = 0;
    char *buf = NULL;
    for (;;) {
        char *line;
        if (tty) {
            line = readline("> ");
            if (!line) break;
            if (*line) add_history(line);
        } else {
            if (getline(&buf, &cap, stdin) < 0) break;
            line = buf;
        }
        int quit = sd_repl_line(cli, line, stdout);
        if (tty) free(line);
        fflush(stdout);
        if (quit) break;
    }
    free(buf);
    return 0;
}
