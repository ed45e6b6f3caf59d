/* A session: a loaded target (and drafter), a sampler, an n-gram store and
 * the settings a researcher toggles, with one call that runs one strategy on
 * one prompt. It is the one place where strategies meet their models, so the
 * CLI, the interactive mode and the strategy benchmark all go through it.
 * It never prints: tokens and verification steps reach the caller through
 * the hooks it passes, metrics through sd_gen_stats. */
#ifndef SD_SESSION_H
#define SD_SESSION_H

#include <stdint.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/session/device.h"
#include "engine/session/strategies.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler_host.h"

#define SD_MAX_LIST 32
#define SD_DRAFT_VOCAB_AUTO (-1)
/* sd_config.gamma: each strategy's own bound (sd_session_gamma) */
#define SD_GAMMA_AUTO 0
/* That bound: adaptive speculative rounds (a round stops at stop_below > 0,
 * and verifying 9 rows costs little more than 5 on the CPU's tiles) draft
 * up to SD_GAMMA_ADAPTIVE; the rest (fixed rounds, rounds with stop_below
 * 0, NASD's, none of which a drafter's confidence ends early) up to
 * SD_GAMMA_FIXED. */
#define SD_GAMMA_ADAPTIVE 8
#define SD_GAMMA_FIXED 4

typedef struct sd_config {
    const char *model;
    const char *draft;
    int draft_layers;
    /* > 0: the drafter's head covers token ids below it only; 0: the whole
     * head; SD_DRAFT_VOCAB_AUTO: the session decides (sd_session_open) */
    int draft_vocab;
    const char *system;
    int chat;
    int parse_special; /* prompt text (not a --chat message) may hold control tokens */
    int strategies;
    int n_predict;
    int threads;
    int n_ctx;
    uint32_t kv_type; /* SD_F32 or SD_F16 (CPU backend only) */
    int device;       /* enum sd_device */
    int draft_device; /* -1: same as device */
    int no_cache;
    int ignore_eos;
    int have_seed;
    uint64_t seed;
    /* speculative and NASD */
    int gamma; /* the most a round drafts; with fixed_gamma, what every round drafts;
                * SD_GAMMA_AUTO: the strategy's own (sd_session_gamma) */
    /* 0: speculative rounds are adaptive (sd_verify_opts.stop_below, at
     * stop_below); NASD's rounds always draft up to gamma */
    int fixed_gamma;
    double stop_below;
    /* speculative decoding's n-gram drafts (sd_spec_opts.ngram_n): the
     * store drafts from contexts of at least hybrid_n - 1 tokens; 0: the
     * draft model alone */
    int hybrid_n;
    double draft_p_min; /* > 0: a draft below this drafter probability ends its round */
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
    /* sampler */
    const char *sampler;
    const char *sampler_args[SD_MAX_LIST];
    int n_sampler_args;
    const char *plugin_dirs[SD_MAX_LIST];
    int n_plugin_dirs;
    /* NULL, or told about each model's loading and long forward calls
     * (sd_model_opts.progress) */
    sd_progress_cb progress;
    void *progress_ud;
} sd_config;

/* The defaults of every field (no model, greedy, ar only). */
void sd_config_defaults(sd_config *c);

typedef struct sd_session {
    sd_config c;      /* current settings (the interactive mode edits them) */
    sd_model *target, *draft;
    sd_kv *self_kv;   /* cache of the self-speculative drafter */
    sd_lm target_lm, draft_lm;
    int have_drafter;
    sd_sampler_set *samplers; /* warnings from loading them: sd_samplers_warning */
    sd_sampler *sampler;      /* the target's chain instance; NULL: built-in greedy */
    sd_sampler *draft_sampler; /* the drafter's instance of the same chain */
    /* why the chain has no drafter instance (a stage refused the drafter
     * role); "" when it has one or there is no chain */
    char drafter_refused[SD_ERRLEN];
    sd_ngram *store;
    sd_rng rng;
    uint64_t seed;
    /* what the caller should tell the user (a backend fallback, a context
     * cut to the drafter's); "" if none */
    char notice[512];
    /* the target's one-row step, from the last autoregressive run (0 before
     * one): what a verification run's realised speedup is over */
    double step_s;
    /* the cost model's step costs (sd_session_calibrate); cal_drafter is
     * the drafter view its draft_s was timed with (m NULL: not timed) */
    sd_cost_calib cal;
    sd_lm cal_drafter;
} sd_session;

/* Loads the model at path with its caches as o describes them (positions,
 * element type) on the backend `device` names: AUTO takes the CPU instead
 * of CUDA for heads the CUDA kernels do not take and says so in notice (""
 * otherwise). beside: NULL, or the backend of a model already loaded for
 * the same session, whose CPU worker pool a CPU backend shares
 * (sd_backend_open_for). Errors name the file, or the --device / --kv-type
 * setting when the backend is what failed or cannot keep that cache. */
sd_model *sd_load_model(const char *path, int device, int threads, sd_backend *beside,
                        const sd_model_opts *o, char *notice, size_t cap, sd_err *e);

/* The plugin set of c's search path, nothing loaded yet (the session loads
 * the one plugin its sampler needs); NULL on out of memory. */
sd_sampler_set *sd_session_plugins(const sd_config *c, sd_err *e);
/* Opens the plugin search path, the models (each on the backend its device
 * setting names) and the sampler. With a drafter whose context_length is
 * shorter than the target's context, both get the drafter's (said in
 * notice); a drafter of another vocabulary is refused first. With
 * draft_vocab at SD_DRAFT_VOCAB_AUTO, speculative decoding's drafter head
 * is cut to the first token ids when the files say it pays (said in notice;
 * draft-only generation keeps the whole head). Errors name the flag or
 * file at fault. */
int sd_session_open(sd_session *s, const sd_config *c, sd_err *e);
/* sd_session_open with a plugin set the caller opened (sd_session_plugins,
 * perhaps already holding the sampler's plugin); the session owns it from
 * here, failure included. */
int sd_session_open_with(sd_session *s, const sd_config *c, sd_sampler_set *samplers,
                         sd_err *e);
void sd_session_close(sd_session *s);

/* Replaces the sampler chain (NULL spec: built-in greedy), loading its
 * plugins when the set has not yet: one instance for the target, one for
 * the drafter (each created with its role, the vocabulary's pieces and the
 * end-of-generation ids). */
int sd_session_set_sampler(sd_session *s, const char *name, const char *const *kv, int n_kv,
                           sd_err *e);
/* Rebuilds the n-gram store with the current kind and N. */
int sd_session_reset_store(sd_session *s, sd_err *e);
/* Switches the drafter to the target's first k layers (k > 0). */
int sd_session_set_draft_layers(sd_session *s, int k, sd_err *e);

/* The prompt's ids. Without c.chat, control-token text in it (e.g.
 * "<|im_start|>") becomes those tokens when c.parse_special is set. With
 * c.chat it is the user message of the chat template: only the template's
 * markers are control tokens, the message (and c.system) is plain text.
 * Fails when the prompt is empty without a BOS to start from, or longer than
 * the context. */
int sd_session_prompt_ids(const sd_session *s, const char *text, int32_t **ids, int *n,
                          sd_err *e);
/* Fails with a message naming the flags when an enabled strategy needs a
 * drafter and none is loaded, or when its own check of the settings fails
 * (beam search with a sampler it cannot apply). */
int sd_session_check_strategies(const sd_session *s, sd_err *e);
/* One untimed token through each model, so no strategy pays for thread
 * start-up or the first touch of the mapped weights. */
int sd_session_warm_up(sd_session *s, const int32_t *ids, sd_err *e);

/* What the caller hears during one run. */
typedef struct sd_hooks {
    sd_token_cb on_token; /* each final token, in order */
    sd_step_cb on_step;   /* each verification round (spec, NASD) */
    void *ud;
    /* May be NULL. Once *cancel is set (e.g. by a SIGINT handler) the run
     * stops after the token it is emitting (beam search: after its current
     * step, with the best beam so far) and returns what it has. */
    const volatile sig_atomic_t *cancel;
} sd_hooks;

/* Times the step costs the cost model prices strategy strat's runs on ids
 * with (engine/session/calibrate.c): the target's calls of 1..gamma+1
 * rows (at least SD_STORE_RUN_MAX+1) and, for a strategy with a drafter,
 * the drafter's calls feeding 1..SD_COST_ROWS-1 rows, after a context of
 * the prompt and half of c.n_predict. Kept while the prompt's length, the
 * widths and the drafter view allow; the caches are left empty. Returns 0,
 * 1 when the cache is too short to hold the context and the widest call
 * (nothing timed: the runs go without a prediction), or -1. */
int sd_session_calibrate(sd_session *s, int strat, const int32_t *ids, int n_ids, sd_err *e);
/* The most drafts a round of strategy strat (one SD_STRAT_* bit) makes:
 * c->gamma, or at SD_GAMMA_AUTO, SD_GAMMA_ADAPTIVE for speculative
 * decoding's adaptive rounds and SD_GAMMA_FIXED for every other kind. */
int sd_session_gamma(const sd_config *c, int strat);
/* Times the target's (and, for a strategy with a drafter, the drafter's)
 * one-row step after a short context again and gives each over the
 * calibration's reference (1 where either is not timed). The session
 * times them right before a run and right after it (never during it):
 * the mean is the factor sd_cost_predict_at scales the calibrated costs
 * by. The caches are left empty. */
int sd_session_retime(sd_session *s, int strat, const int32_t *ids, int n_ids,
                      double *verify_scale, double *draft_scale, sd_err *e);

/* Runs strategy strat (one SD_STRAT_* bit, sd_strategies) on ids from empty caches, with
 * the session's sampler and the rng reseeded from s->seed, so every
 * strategy sees the same random stream. out has room for c.n_predict ids.
 * An autoregressive run sets s->step_s; a verification run after one is
 * calibrated first (sd_session_calibrate, when the calibration does not
 * serve it yet) and gets the cost model's prediction
 * (st->predicted_speedup) and the autoregressive step (st->step_s).
 * Returns the count or -1. */
int sd_session_generate(sd_session *s, int strat, const int32_t *ids, int n_ids,
                        const sd_hooks *h, int32_t *out, sd_gen_stats *st, sd_err *e);

#endif
