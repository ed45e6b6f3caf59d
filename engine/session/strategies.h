/* The strategy registry: each strategy the session runs, described once:
 * its name, whether it needs a drafter, the settings it reads, whether its
 * output is the target's own, and the function that runs it. Everything
 * that lists strategies (the session, the CLI's parsing and reports, the
 * interactive mode, the benchmarks, the tests) reads this table; its order
 * is the order the CLI runs and reports them. */
#ifndef SD_STRATEGIES_H
#define SD_STRATEGIES_H

#include <stdint.h>

#include "engine/decode/decode.h"
#include "kernels/common/error.h"

/* A strategy's bit in sd_config.strategies: 1 << its index in the table. */
enum {
    SD_STRAT_AR = 1 << 0,
    SD_STRAT_SPEC = 1 << 1,
    SD_STRAT_NASD = 1 << 2,
    SD_STRAT_BEAM = 1 << 3,
    SD_STRAT_DRAFT = 1 << 4
};
#define SD_N_STRATEGIES 5

/* The settings of sd_config a strategy reads, as bits of sd_strategy.options. */
enum {
    SD_OPT_GAMMA = 1 << 0,       /* gamma, skip_sample_adjustment, no_first_target
                                    (speculative: fixed_gamma, stop_below, hybrid_n) */
    SD_OPT_P_MIN = 1 << 1,       /* draft_p_min */
    SD_OPT_DRAFT_VOCAB = 1 << 2, /* draft_vocab */
    SD_OPT_NGRAM = 1 << 3,       /* ngram_n, ngram_kind, filler_top_k, stop_if_unknown, keep_ngrams */
    SD_OPT_BEAM = 1 << 4,        /* beams, beam_top_k, min_length, alpha */
    SD_OPT_SAMPLER = 1 << 5      /* the sampler chain */
};

struct sd_session;

/* One run as the session hands it to a strategy: the prompt, the room for
 * output and the generation settings it built (sampler, rng, stop ids,
 * hooks). */
typedef struct sd_strategy_run {
    const int32_t *ids;
    int n_ids;
    int max;
    const sd_gen_cfg *cfg;
    int32_t *out;
    sd_gen_stats *st;
} sd_strategy_run;

typedef struct sd_strategy {
    int bit;
    const char *name;  /* as --strategy spells it */
    const char *title; /* as the interactive mode names it */
    int needs_drafter; /* a drafter model or the target's first layers */
    int lossless;      /* greedy output equals ar's (same distribution when sampled) */
    int options;       /* SD_OPT_* */
    /* Checks the session's settings before anything runs (NULL: nothing to
     * check); 0, or -1 with a message naming the flag. */
    int (*check)(const struct sd_session *s, sd_err *e);
    int (*run)(struct sd_session *s, const sd_strategy_run *r, sd_err *e);
} sd_strategy;

extern const sd_strategy sd_strategies[SD_N_STRATEGIES];

/* The entry of one SD_STRAT_* bit; NULL for anything else. */
const sd_strategy *sd_strategy_find(int bit);
/* Its name; "?" for anything but one SD_STRAT_* bit. */
const char *sd_strategy_name(int bit);
/* "ar,spec,nasd" -> bits; -1 with a message naming the unknown entry. */
int sd_parse_strategies(const char *list, int *bits, sd_err *e);
/* The first enabled strategy (bits) that needs a drafter; NULL when none does. */
const sd_strategy *sd_strategies_needing_drafter(int bits);

#endif
