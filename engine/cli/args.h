/* Command-line options of the specdec binary, parsed into one struct so the
 * parser can be tested and fuzzed without running a model. */
#ifndef SD_ARGS_H
#define SD_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "../error.h"

#define SD_MAX_LIST 32

typedef struct sd_args {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    const char *system;
    int n_predict;
    int threads;
    int n_ctx;
    int no_cache;
    int ignore_eos;
    int chat;
    int json;
    int have_seed;
    uint64_t seed;
    int help;
    int list_samplers;
    const char *sampler;
    const char *sampler_args[SD_MAX_LIST];
    int n_sampler_args;
    const char *plugin_dirs[SD_MAX_LIST];
    int n_plugin_dirs;
} sd_args;

/* Fills a from argv (argv[0] skipped). Returns 0, or -1 with a message
 * naming the flag and the bad value. */
int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e);
void sd_args_usage(FILE *out);

#endif
