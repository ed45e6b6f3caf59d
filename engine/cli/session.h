/* A loaded target (and drafter), sampler, n-gram store and the settings a
 * researcher toggles; runs one prompt through every enabled strategy and
 * reports each next to the autoregressive baseline. Shared by the one-shot
 * CLI and the interactive mode. */
#ifndef SD_SESSION_H
#define SD_SESSION_H

#include <stdio.h>

#include "../generate/generate.h"
#include "../generate/ngram.h"
#include "args.h"

typedef struct sd_session {
    sd_args a; /* current settings (the REPL edits them) */
    sd_model *target, *draft;
    sd_kv *self_kv;   /* cache of the self-speculative drafter */
    sd_lm target_lm, draft_lm;
    int have_drafter;
    sd_sampler_set *samplers;
    sd_processor *proc; /* NULL: built-in greedy */
    sd_ngram *store;
    sd_rng rng;
    uint64_t seed;
} sd_session;

int sd_session_open(sd_session *s, const sd_args *a, sd_err *e);
void sd_session_close(sd_session *s);
/* Runs prompt through the enabled strategies; text to out, metrics to
 * stderr (or JSON lines to out). */
int sd_session_run(sd_session *s, const char *prompt, FILE *out, sd_err *e);
/* Replaces the processor (NULL name: built-in greedy). */
int sd_session_set_sampler(sd_session *s, const char *name, const char *const *kv, int n_kv,
                           sd_err *e);
/* Rebuilds the n-gram store with the current kind and N. */
int sd_session_reset_store(sd_session *s, sd_err *e);
/* Switches the drafter to the target's first k layers (k > 0). */
int sd_session_set_draft_layers(sd_session *s, int k, sd_err *e);
void sd_session_describe(const sd_session *s, FILE *out);

#endif
