/* Command-line options of the specdec binary, parsed into one struct so the
 * parser can be tested and fuzzed without running a model. */
#ifndef SD_ARGS_H
#define SD_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "engine/session/session.h"
#include "kernels/common/error.h"

/* The session's settings plus what only the command line has: the
 * prompt, the output form and the mode. */
typedef struct sd_args {
    sd_config c;
    const char *prompt;
    const char *prompt_file;
    int json;  /* one JSON document (an object with a list of runs) on stdout */
    int jsonl; /* one JSON object per run, one a line */
    int debug;
    int interactive;
    int help;
    int version;
    int list_samplers;
    const char *check_sampler; /* --check-sampler NAME: check one plugin and exit */
    int sampler_timeout;       /* time limit of one plugin call in ms (0: none) */
    const char *perplexity; /* --perplexity FILE: evaluate instead of generating */
    int chunks;             /* --chunks N: only the first N windows (0: all) */
} sd_args;

/* Fills a from argv (argv[0] skipped). Returns 0, or -1 with a message
 * naming the flag and the bad value. */
int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e);
/* The largest -t/--threads accepted: 4x the online cores. */
int sd_threads_max(void);

#endif
