/* Command-line options of the specdec binary, parsed into one struct so the
 * parser can be tested and fuzzed without running a model. */
#ifndef SD_ARGS_H
#define SD_ARGS_H

#include <stdint.h>
#include <stdio.h>

#include "../error.h"

#define SD_MAX_LIST 32

/* Strategies, as bits of sd_args.strategies (and the session's toggles). */
enum {
    SD_STRAT_AR = 1 << 0,
    SD_STRAT_SPEC = 1 << 1,
    SD_STRAT_NASD = 1 << 2,
    SD_STRAT_BEAM = 1 << 3,
    SD_STRAT_DRAFT = 1 << 4
};

typedef struct sd_args {
    const char *model;
    const char *draft;
    int draft_layers;
    const char *prompt;
    const char *prompt_file;
    const char *system;
    int strategies;
    int n_predict;
    int threads;
    int n_ctx;
    int device;       /* enum sd_device (engine/model.h) */
    int draft_device; /* -1: same as device */
    int no_cache;
    int ignore_eos;
    int chat;
    int json;
    int debug;
    int interactive;
    int have_seed;
    uint64_t seed;
    int help;
    int list_samplers;
    /* speculative and NASD */
    int gamma;
    int skip_sample_adjustment;
    int no_first_target;
    int ngram_n;
    int ngram_kind; /* SD_NGRAM_MULTI / SD_NGRAM_ONE */
    int filler_top_k;
    int stop_if_unknown;
    int keep_ngrams; /* do not reset the n-gram store between prompts */
    /* beam search */
    int beams;
    int beam_top_k;
    double min_length;
    double alpha;
    /* samplers */
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
/* "ar,spec,nasd" -> bits; -1 with a message on an unknown name. */
int sd_parse_strategies(const char *list, int *bits, sd_err *e);
const char *sd_strategy_name(int bit);

#endif
