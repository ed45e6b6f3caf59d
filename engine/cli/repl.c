#include "engine/cli/repl.h"

#include <editline/readline.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/args.h"
#include "engine/cli/settings.h"

#define MAX_WORDS 34

/* The commands that are not settings; the settings' commands follow them
 * in /help, from the table (engine/cli/settings.c). */
static const char usage[] =
    "commands:\n"
    "  /quit                         leave (also /exit, or Ctrl-D)\n"
    "  /help                         this list and the current settings\n"
    "  /clear                        clear the screen\n"
    "  /target /speculative /ngram /beam /drafter\n"
    "                                toggle autoregressive, speculative, NASD, beam search,\n"
    "                                draft-only generation (or /strategy LIST)\n"
    "  /sampler CHAIN [key=value ...]\n"
    "                                sampler plugin or chain (a,b,c) and its parameters,\n"
    "                                stage.key=value for one stage (alias /processor)\n"
    "  /set_ngramstorage multi|one N n-gram store kind and order (basic = multi,\n"
    "                                onelevel = one)\n"
    "  /length N, /top_k_filler K    the same as /n_predict N, /filler_top_k K\n"
    "settings (/name VALUE; a switch without a value toggles):\n";

static const char after[] =
    "anything else is a prompt, run through every enabled strategy (\\n, \\t and \\\\ in it\n"
    "are a newline, a tab and a backslash); Ctrl-C stops a running generation and\n"
    "returns here, a second Ctrl-C during it (or one at this prompt) ends specdec\n";

/* The reference tool's names for settings of the table. */
static const struct {
    const char *alias, *name;
} aliases[] = {{"length", "n_predict"}, {"top_k_filler", "filler_top_k"}, {"processor", "sampler"}};

static int split(char *line, char **w) {
    int n = 0;
    for (char *t = strtok(line, " \t"); t && n < MAX_WORDS; t = strtok(NULL, " \t")) w[n++] = t;
    return n;
}

/* One line on stderr naming the problem; the command list stays behind /help. */
static void bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* What a set of strategies needs that the session lacks, as one error line
 * naming the command that fixes it; 0 when nothing. */
static int strategies_conflict(const sd_cli *cli, int bits, const char *cmd) {
    const sd_session *s = &cli->s;
    if ((bits & (SD_STRAT_SPEC | SD_STRAT_DRAFT)) && !s->have_drafter) {
        bad("%s: spec and draft need a drafter: /draft_layers K first (or start specdec with "
            "-d DRAFT)", cmd);
        return 1;
    }
    if ((bits & (SD_STRAT_SPEC | SD_STRAT_DRAFT)) && s->sampler && !s->draft_sampler) {
        bad("%s: %s: /sampler with a chain the drafter takes first", cmd, s->drafter_refused);
        return 1;
    }
    sd_err e;
    if ((bits & SD_STRAT_BEAM) && sd_beam_check_sampler(s->sampler, &e)) {
        bad("%s: beam search applies no sampler: /sampler greedy first", cmd);
        return 1;
    }
    return 0;
}

static void toggle_strategy(sd_cli *cli, int bit, const char *cmd) {
    sd_session *s = &cli->s;
    int bits = s->c.strategies ^ bit;
    if ((bits & bit) && strategies_conflict(cli, bits, cmd)) return;
    s->c.strategies = bits;
    printf("%s: %s\n", sd_strategy_name(bit), (bits & bit) ? "on" : "off");
}

/* Keeps the chain and its parameters (w[1..n)) in cli, and the settings
 * pointing at them, so /help and the JSON settings show what runs. */
static void keep_sampler(sd_cli *cli, char **w, int n) {
    sd_config *c = &cli->s.c;
    char *at = cli->sampler_words;
    c->n_sampler_args = 0;
    for (int i = 1; i < n; i++) {
        size_t len = strlen(w[i]) + 1;
        memcpy(at, w[i], len);
        if (i == 1) c->sampler = at;
        else c->sampler_args[c->n_sampler_args++] = at;
        at += len;
    }
}

static void set_sampler(sd_cli *cli, char **w, int n) {
    sd_session *s = &cli->s;
    sd_err e = {{0}};
    size_t len = 0;
    for (int i = 1; i < n; i++) len += strlen(w[i]) + 1;
    if (len > sizeof cli->sampler_words) {
        bad("/sampler: the chain and its parameters exceed %zu characters",
            sizeof cli->sampler_words - 1);
        return;
    }
    if (n < 2) {
        bad("/sampler needs a chain: /sampler CHAIN [key=value ...] (--list-samplers lists them)");
        return;
    }
    if ((s->c.strategies & SD_STRAT_BEAM) && (strcmp(w[1], "greedy") || n > 2)) {
        bad("/sampler %s: beam search is on and applies no sampler: /beam turns it off", w[1]);
        return;
    }
    if (sd_session_set_sampler(s, w[1], (const char *const *)w + 2, n - 2, &e)) {
        bad("/sampler %s: %s", w[1], e.msg);
        return;
    }
    keep_sampler(cli, w, n);
    char desc[256];
    sd_sampler_describe(s->sampler, desc, sizeof desc);
    printf("sampler: %s\n", desc);
    if ((s->c.strategies & (SD_STRAT_SPEC | SD_STRAT_DRAFT)) && s->sampler && !s->draft_sampler)
        fprintf(stderr, "specdec: warning: %s; /speculative and /drafter turn them off\n", s->drafter_refused);
}

/* /set_ngramstorage KIND N: the reference tool's form of /ngram_store and
 * /ngram_n together (basic and onelevel: its names for multi and one). */
static int ngram_storage(char **w, int n, const char **kind) {
    if (n != 3) return -1;
    *kind = !strcmp(w[1], "basic") ? "multi" : !strcmp(w[1], "onelevel") ? "one" : w[1];
    return 0;
}

/* Applies what changed between the session and a, refusing what the
 * session cannot take; 0 when the session now holds a. */
static int apply(sd_cli *cli, const sd_args *a, const char *cmd) {
    sd_session *s = &cli->s;
    sd_config *c = &s->c;
    sd_err e = {{0}};
    if (a->c.strategies != c->strategies && strategies_conflict(cli, a->c.strategies, cmd)) return -1;
    if (a->c.draft_layers != c->draft_layers) {
        if (s->draft) {
            bad("%s: a draft model is loaded (-d); a self-speculative drafter needs none", cmd);
            return -1;
        }
        if (sd_session_set_draft_layers(s, a->c.draft_layers, &e)) {
            bad("%s: %s", cmd, e.msg);
            return -1;
        }
    }
    if (a->c.draft_vocab > s->target->hp.vocab) {
        bad("%s: %d is more than the vocabulary's %d tokens (0: all)", cmd, a->c.draft_vocab,
            s->target->hp.vocab);
        return -1;
    }
    if (a->c.ngram_n != c->ngram_n || a->c.ngram_kind != c->ngram_kind) {
        sd_config old = *c;
        c->ngram_n = a->c.ngram_n;
        c->ngram_kind = a->c.ngram_kind;
        if (sd_session_reset_store(s, &e)) {
            *c = old;
            bad("%s: %s", cmd, e.msg);
            return -1;
        }
    }
    if (a->sampler_timeout != cli->sampler_timeout) {
        if (sd_sampler_guard(2, a->sampler_timeout, &e)) {
            bad("%s: %s", cmd, e.msg);
            return -1;
        }
        cli->sampler_timeout = a->sampler_timeout;
    }
    *c = a->c;
    s->seed = a->c.seed;
    cli->debug = a->debug;
    return 0;
}

static void set(sd_cli *cli, const sd_setting *st, char **w, int n) {
    char name[64], cmd[80], v[256];
    sd_setting_name(st, name, sizeof name);
    snprintf(cmd, sizeof cmd, "/%s", name);
    if (st->no_command) {
        bad("%s cannot be changed here: %s", cmd, st->no_command);
        return;
    }
    sd_args a;
    sd_cli_args(cli, &a);
    sd_err e = {{0}};
    int sw = st->kind == SD_SET_ON || st->kind == SD_SET_OFF;
    if (n > 2 || (n == 1 && !sw)) {
        char r[96];
        sd_setting_range(st, r, sizeof r);
        bad("%s takes one value: %s %s%s%s%s", cmd, cmd, sw ? "[on|off]" : st->arg, r[0] ? " (" : "",
            r, r[0] ? ")" : "");
        return;
    }
    if (n == 1) *(int *)((char *)&a + st->off) ^= 1;
    else if (sd_setting_parse(st, &a, w[1], cmd, &e)) {
        bad("%s", e.msg);
        return;
    }
    if (apply(cli, &a, cmd)) return;
    sd_cli_args(cli, &a);
    printf("%s: %s\n", name, sd_setting_format(st, &a, v, sizeof v));
}

static int command(sd_cli *cli, char **w, int n) {
    const char *c = w[0] + 1;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(c, aliases[i].alias)) c = aliases[i].name;
    if (!strcmp(c, "quit") || !strcmp(c, "exit")) return 1;
    if (!strcmp(c, "help")) {
        sd_args a;
        sd_cli_args(cli, &a);
        fputs(usage, stdout);
        sd_settings_commands(stdout, &a);
        fputs(after, stdout);
        sd_cli_describe(cli, stdout);
    } else if (!strcmp(c, "clear")) {
        fputs(isatty(1) ? "\033[H\033[2J" : "", stdout);
        printf("cleared\n");
    } else if (!strcmp(c, "target")) {
        toggle_strategy(cli, SD_STRAT_AR, w[0]);
    } else if (!strcmp(c, "speculative")) {
        toggle_strategy(cli, SD_STRAT_SPEC, w[0]);
    } else if (!strcmp(c, "ngram")) {
        toggle_strategy(cli, SD_STRAT_NASD, w[0]);
    } else if (!strcmp(c, "beam")) {
        toggle_strategy(cli, SD_STRAT_BEAM, w[0]);
    } else if (!strcmp(c, "drafter")) {
        toggle_strategy(cli, SD_STRAT_DRAFT, w[0]);
    } else if (!strcmp(c, "sampler")) {
        set_sampler(cli, w, n);
    } else if (!strcmp(c, "set_ngramstorage")) {
        const char *kind;
        sd_args a;
        sd_err e = {{0}};
        sd_cli_args(cli, &a);
        if (ngram_storage(w, n, &kind)) {
            bad("/set_ngramstorage takes two values: /set_ngramstorage multi|one N");
        } else if (sd_setting_parse(sd_setting_by_flag("--ngram-store"), &a, kind, w[0], &e) ||
                   sd_setting_parse(sd_setting_by_flag("--ngram-n"), &a, w[2], w[0], &e)) {
            bad("%s", e.msg);
        } else if (!apply(cli, &a, w[0])) {
            printf("ngram storage: %s, N %d\n", kind, a.c.ngram_n);
        }
    } else {
        const sd_setting *st = sd_setting_by_name(c);
        if (st) set(cli, st, w, n);
        else bad("unknown command '%s' (/help lists the commands)", w[0]);
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

int sd_repl_line(sd_cli *cli, char *line) {
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (!len) return 0;
    if (line[0] == '/') {
        char *w[MAX_WORDS];
        int n = split(line, w);
        if (n == MAX_WORDS) {
            bad("%s: more than %d words", w[0], MAX_WORDS - 1);
            return 0;
        }
        return command(cli, w, n);
    }
    sd_err e = {{0}};
    unescape(line);
    if (run_prompt(cli, line, stdout, &e)) bad("%s", e.msg);
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
            if (!line) {
                putchar('\n'); /* Ctrl-D: the shell's prompt starts on a line of its own */
                break;
            }
            if (*line) add_history(line);
        } else {
            if (getline(&buf, &cap, stdin) < 0) break;
            line = buf;
        }
        int quit = sd_repl_line(cli, line);
        if (tty) free(line);
        fflush(stdout);
        if (quit) break;
    }
    free(buf);
    return 0;
}
