/* What the specdec binary shows of a session: one prompt through every
 * enabled strategy, the text streamed to stdout, metrics on stderr, a
 * side-by-side table, JSON lines, and the --debug view of each round. */
#ifndef SD_RUN_H
#define SD_RUN_H

#include <signal.h>
#include <stdio.h>

#include "engine/cli/args.h"
#include "engine/cli/progress.h"
#include "engine/session/session.h"

/* A session plus the command line's view settings (the interactive mode
 * toggles both). */
typedef struct sd_cli {
    sd_session s;
    int json;  /* one JSON document (settings, runs) instead of text and tables */
    int jsonl; /* one JSON object per run, one a line */
    int debug; /* one line per verification round on stderr */
    int sampler_timeout; /* the plugin call time limit set (sd_sampler_guard) */
    /* NULL, or a flag a SIGINT handler sets (interactive mode): once set, the
     * running strategy stops early and the rest of the prompt's strategies
     * and the table are skipped. */
    const volatile sig_atomic_t *cancel;
    sd_cli_progress progress; /* the state of the progress line (progress.h) */
    /* the words of the last interactive /sampler, which c.sampler and
     * c.sampler_args point into once it is set */
    char sampler_words[1024];
} sd_cli;

/* Runs prompt through the enabled strategies: the text to out, stats and
 * the table to stderr (or the JSON document or lines to out). An
 * interrupted run (cli->cancel) returns 0 after a "specdec: interrupted"
 * line on stderr. */
int sd_cli_run(sd_cli *c, const char *prompt, FILE *out, sd_err *e);
/* The session's settings as the settings table sees them (the seed the
 * session uses, the view settings). */
void sd_cli_args(const sd_cli *c, sd_args *a);
/* What /help adds to the settings: the sampler, the backends, the drafter. */
void sd_cli_describe(const sd_cli *c, FILE *out);
/* Every plugin of the set's search path, probed in child processes: the
 * samplers, their files and parameters, then the broken files with their
 * reason (--list-samplers, the interactive /sampler). */
int sd_cli_list_samplers(sd_sampler_set *set, FILE *out, sd_err *e);
/* Plugin loading warnings, one "specdec: warning: ..." line each. */
void sd_cli_warnings(const sd_sampler_set *set);
/* The --debug line of one verification round. */
void sd_step_view(const sd_tokenizer *t, const sd_step *s);

#endif
