/* Generation strategies. They own no kernels: each is a loop of forward
 * calls, processor calls and cache truncations, and each reports the same
 * metrics so strategies can be compared side by side. */
#ifndef SD_GENERATE_H
#define SD_GENERATE_H

#include <stdint.h>

#include "../error.h"
#include "../model.h"
#include "../rng.h"
#include "../samplers.h"

typedef struct sd_gen_stats {
    int prompt_tokens;
    int new_tokens;
    double prefill_s; /* first forward call (prompt + first token) */
    double total_s;   /* whole call, prefill included */
    long target_calls, draft_calls;
    long drafted, accepted;
    int hit_context;  /* stopped because the context was full */
} sd_gen_stats;

/* Called once per generated token, in order, as soon as it is final. */
typedef void (*sd_token_cb)(void *ud, int32_t id);

typedef struct sd_gen_cfg {
    sd_processor *proc; /* NULL: greedy argmax (lowest id on ties) */
    sd_rng *rng;
    const int32_t *eos_ids; /* generation stops after emitting one of these */
    int n_eos;
    int pad_id;    /* >= 0: out[new_tokens..max_gen_len) is filled with it */
    int use_cache; /* 0: every step recomputes the whole prefix */
    int debug;
    sd_token_cb on_token;
    void *ud;
} sd_gen_cfg;

/* Picks the next token from one row of logits with the configured
 * processor; probs is [vocab] scratch. */
int sd_pick_token(const sd_gen_cfg *cfg, const float *logits, float *probs, int vocab,
                  int32_t *id, sd_err *e);
int sd_is_eos(const sd_gen_cfg *cfg, int32_t id);
double sd_now(void);

/* Generates up to max_gen_len tokens after inputs into out (capacity
 * max_gen_len). Returns the count (EOS included when hit) or -1. Stops early
 * when the context is full (stats->hit_context). */
int sd_autoregressive_generate(const int32_t *inputs, int n_inputs, sd_model *m, int max_gen_len,
                               const sd_gen_cfg *cfg, int32_t *out, sd_gen_stats *st, sd_err *e);

#endif
