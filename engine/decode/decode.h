/* Decoding strategies. They own no kernels: each is a loop of forward
 * calls, sampler calls and cache truncations, and each reports the same
 * metrics so strategies can be compared side by side. They never print:
 * tokens and verification rounds reach the caller through callbacks. */
#ifndef SD_GENERATE_H
#define SD_GENERATE_H

#include <signal.h>
#include <stdint.h>

#include "kernels/common/error.h"
#include "engine/model/model.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/sampler_host.h"

/* Call widths the stats count one by one (1..SD_COST_ROWS-1 rows; wider
 * calls share the last slot, their rows summed apart). */
#define SD_COST_ROWS 33

typedef struct sd_gen_stats {
    int prompt_tokens;
    int new_tokens;
    double prefill_s; /* first forward call (prompt + first token) */
    /* new tokens final after that call: 1, or a first speculative round's
     * accepted drafts and its last token (--no-first-target) */
    int prefill_new_tokens;
    double total_s; /* whole call, prefill included */
    long target_calls, draft_calls;
    long drafted, accepted;
    long drafted_ngram; /* of drafted: from a hybrid drafter's n-gram store */
    long long host_bytes; /* copied from backend memory to the host (logits rows, ids) */
    int hit_context;  /* stopped because the context was full */
    /* Where a run of verification rounds (speculative decoding, NASD) spent
     * its time; 0 for the other strategies. draft_s: the drafter's one-row
     * calls and draws, and the n-gram lookups; catchup_s: the drafter's
     * calls that also feed what it has not seen (the prompt, the previous
     * round's last token, accepted n-gram drafts); verify_s: the target's
     * calls; host_s: the rest of total_s (acceptance tests, the target's
     * sampling, emitting, the n-gram store). */
    double draft_s, catchup_s, verify_s, host_s;
    /* The calls after the target's first (which also feeds the prompt) by
     * the rows they fed: verify_calls_n[n] target calls of n rows took
     * verify_s_n[n] seconds; draft_calls_n[k] drafter calls fed k rows
     * (k > 1: a catch-up). The last slot holds the wider calls, whose rows
     * add up in verify_wide_rows and draft_wide_rows. The counts are what
     * the cost model (sd_cost_predict) prices with calibrated step costs;
     * verify_s_n is what the run measured, to compare. */
    long verify_calls_n[SD_COST_ROWS];
    double verify_s_n[SD_COST_ROWS];
    long draft_calls_n[SD_COST_ROWS];
    long verify_wide_rows, draft_wide_rows;
    /* The target's one-row step of the autoregressive run the realised
     * speedup is over, and the speedup over autoregressive decoding
     * (decode phase) the cost model predicts for this run from a
     * calibration; 0 when either is unknown (the session fills both), and
     * the seconds the calibration predicts for the target's and the
     * drafter's calls after the first, beside the measured verify_s_n and
     * draft_s + catchup_s: where a missed prediction went wrong. */
    double step_s, predicted_speedup;
    double predicted_verify_s, predicted_draft_s;
    /* The file of the model whose calls made the output (the drafter's for
     * draft-only generation); set by the session, NULL from the strategies. */
    const char *model;
} sd_gen_stats;

/* Called once per generated token, in order, as soon as it is final. */
typedef void (*sd_token_cb)(void *ud, int32_t id);

/* One verification round of speculative decoding or NASD: the drafts the
 * target accepted, the first one it rejected (-1 when none was), and the
 * token the round ended with (the replacement or the bonus token; -1 when
 * the round ended at an end-of-sequence token among the accepted). */
typedef struct sd_step {
    const int32_t *accepted;
    int n_accepted;
    int32_t rejected;
    int32_t next;
} sd_step;
typedef void (*sd_step_cb)(void *ud, const sd_step *step);

typedef struct sd_gen_cfg {
    sd_sampler *sampler; /* NULL: greedy argmax (lowest id on ties) */
    /* The drafter's instance of the same chain (speculative decoding): its
     * own history and state. NULL: the drafter uses sampler, which is
     * refused when the chain keeps token history. */
    sd_sampler *draft_sampler;
    sd_rng *rng;
    const int32_t *eos_ids; /* generation stops after emitting one of these */
    int n_eos;
    int pad_id;    /* >= 0: out[new_tokens..max_gen_len) is filled with it */
    int use_cache; /* 0: every step recomputes the whole prefix */
    sd_token_cb on_token;
    sd_step_cb on_step; /* may be NULL */
    void *ud;
    const volatile sig_atomic_t *cancel; /* may be NULL; set: stop after the token being emitted */
    /* may be NULL; step costs timed apart from the run (the cost model's
     * calibration) that a strategy may plan its calls with: speculative
     * decoding prices the drafter's catch-up with them */
    const struct sd_cost_calib *costs;
    /* without costs: 1 prices the catch-up from the run's own timings
     * (speculative.c run_costs), 0 lets the drafter always catch up */
    int run_costs;
} sd_gen_cfg;

/* A model as a strategy sees it: weights, the cache it extends, and how many
 * of its layers run (0: all). A self-speculative drafter is the target's
 * model with its first K layers and a cache of its own. */
typedef struct sd_lm {
    sd_model *m;
    sd_kv *kv;
    int n_layers;
    int vocab_limit; /* > 0: the head over token ids below it only (sd_forward_head) */
} sd_lm;

/* Logits of the last n_logits tokens of seq[0..len): feeds only what the
 * cache does not hold yet (everything from 0 when use_cache is off). Adds
 * the bytes copied to the host to st->host_bytes. */
int sd_lm_extend(sd_lm *lm, const int32_t *seq, int len, int use_cache, float *logits,
                 int n_logits, sd_gen_stats *st, sd_err *e);

/* The same with the logits left in backend memory: only the top k ids of
 * each of the last n_rows positions cross to the host (ids: [n_rows][k],
 * see sd_forward_top_k); k = 1 is the greedy next token. probs (NULL: not
 * wanted, else [n_rows][k]) gets their softmax probabilities. */
int sd_lm_extend_top_k(sd_lm *lm, const int32_t *seq, int len, int use_cache, int n_rows, int k,
                       int32_t *ids, float *probs, sd_gen_stats *st, sd_err *e);

/* The distribution smp draws from for the token at seq[pos], given the
 * logits rows of positions first..pos (rows): smp's history is brought to
 * seq[0..pos) first (sd_sampler_dist). smp NULL: one-hot at the argmax of
 * row pos. */
int sd_token_dist(sd_sampler *smp, const int32_t *seq, int pos, const float *rows, int first,
                  float *probs, int vocab, sd_err *e);
/* The first position whose logits row sd_token_dist needs for pos (pos
 * unless smp keeps history and is behind); -1 on error. */
int sd_token_need(sd_sampler *smp, const int32_t *seq, int pos, sd_err *e);
/* Draws from one distribution row with smp's final stage and the
 * configured rng (argmax when smp is NULL). */
int sd_dist_sample(const sd_gen_cfg *cfg, sd_sampler *smp, const float *probs, int vocab,
                   int32_t *id, sd_err *e);
/* The final stage is the argmax (or no sampler): distributions are one-hot. */
int sd_is_greedy(const sd_gen_cfg *cfg);
/* Greedy with nothing before the argmax: the logits can stay in backend
 * memory and only ids cross (the top_k_rows op). */
int sd_fast_greedy(const sd_gen_cfg *cfg);
/* The instance that serves the drafter (draft_sampler, else sampler); -1
 * with a message when sampler keeps history and has no drafter instance. */
int sd_drafter_sampler(const sd_gen_cfg *cfg, sd_sampler **out, sd_err *e);
/* Starts the histories of cfg's sampler instances at the prompt. */
int sd_reset_samplers(const sd_gen_cfg *cfg, const int32_t *prompt, int n, sd_err *e);
/* Hands one verification round to cfg->on_step (when set). */
void sd_report_step(const sd_gen_cfg *cfg, const int32_t *accepted, int n_accepted,
                    int32_t rejected, int32_t next);
/* Appends id to out, streams it; returns 1 when it ends generation (EOS). */
int sd_emit(const sd_gen_cfg *cfg, int32_t *out, int *count, int32_t id);
/* Closes a run's stats (time, count), pads out when asked; returns count. */
int sd_gen_finish(const sd_gen_cfg *cfg, sd_gen_stats *st, double t0, int32_t *out, int count,
                  int max_gen_len);
/* Sequence length a run may reach (prompt + generated) within a cache of
 * n_ctx positions; sets st->hit_context when max_gen_len is clamped. -1 and
 * a message when the prompt alone does not fit. */
/* Tokens/s after the first forward call: the tokens that call did not
 * produce over the time after it (0 when either is 0). The prompt's
 * prefill is the same for every strategy, so this rate is the one that
 * tells strategies apart; a drafter's own prefill falls in it. */
double sd_gen_decode_tps(const sd_gen_stats *st);
int sd_gen_total(int n_inputs, int max_gen_len, int n_ctx, sd_gen_stats *st, sd_err *e);
/* The seconds per token of an autoregressive run's decode phase (its
 * one-row target step); 0 when it decoded nothing. */
double sd_gen_step_s(const sd_gen_stats *st);
/* The context of the one-row step that follows the machine's speed: timed
 * right after a calibration's curves and again around every run, the same
 * way each time (a fill, then a few steps in a row: a step timed between
 * wider calls runs about a tenth slower on a small model, and the scale
 * would carry that). */
#define SD_COST_REF_CTX 16
/* The cost model (engine/decode/cost.c). A calibration holds step costs
 * timed apart from any run, at one context length: verify_s[n] a target
 * call scoring n rows (verify_s[1] the one-row step of autoregressive
 * decoding), draft_s[k] a drafter call feeding k rows and drafting from
 * the last; 0 where not timed (no drafter: all of draft_s). */
typedef struct sd_cost_calib {
    int ctx;
    double verify_s[SD_COST_ROWS];
    double draft_s[SD_COST_ROWS];
    /* each model's one-row step after SD_COST_REF_CTX positions, timed
     * right after its curve: the reference a timing around a run is
     * compared with (0: not timed) */
    double verify_ref, draft_ref;
    /* each model's call that filled its cache with ctx positions from
     * empty, the widest timed call: with the widest of the curve it prices
     * the calls wider than the curve (0: not timed) */
    double verify_fill_s, draft_fill_s;
} sd_cost_calib;

/* Times lm's calls of 1..max_rows rows (max_rows < SD_COST_ROWS) after a
 * context of ctx positions (ids repeated to fill it), the greedy path's
 * calls: n_out = 0 returns the ids of every fed row (a verification),
 * n_out = 1 of the last (a draft). Each timed width is the mean of a
 * few calls, the widths taken in turn; widths between the timed ones are
 * interpolated. *fill_s (when not NULL) gets the seconds of the call that
 * fed the ctx positions to the empty cache. The cache is left empty. */
int sd_cost_time_calls(sd_lm *lm, const int32_t *ids, int n_ids, int ctx, int max_rows, int n_out,
                       double *cost, double *fill_s, sd_err *e);
/* Seconds of the drafter's call of rows rows at the calibration c, a call
 * wider than its curve priced on the line through the widest timed call
 * and the call that filled its cache with c->ctx positions (as the
 * prediction prices it); 0 when nothing is timed. */
double sd_cost_draft_call(const sd_cost_calib *c, int rows);
/* The decode-phase speedup over autoregressive decoding the calibration
 * predicts for a verification run from its counts alone (its rounds'
 * widths, its drafter calls and their rows, its tokens); 0 when the run
 * had no rounds after its first or the calibration lacks the one-row
 * step. *verify_pred and *draft_pred (either may be NULL) get the
 * predicted seconds of the target's and the drafter's calls, to set
 * beside the measured ones when the prediction misses. */
double sd_cost_predict(const sd_gen_stats *st, const sd_cost_calib *cal, double *verify_pred,
                       double *draft_pred);
/* The same at the machine's speed during the run: the target's and the
 * drafter's calibrated costs times verify_scale and draft_scale (their
 * one-row steps timed around the run over the calibration's references),
 * over the autoregressive run's one-row step step_s (0: the calibrated
 * one, scaled). The run's own times never enter it. */
double sd_cost_predict_at(const sd_gen_stats *st, const sd_cost_calib *cal, double verify_scale,
                          double draft_scale, double step_s, double *verify_pred,
                          double *draft_pred);
/* Indices of the k largest x (descending, lowest index first on ties);
 * O(n k), for the small k of fillers and beams. Returns min(k, n). The
 * backends' top_k_rows op gives the same order (kernels/cpu sd_cpu_top_k). */
int sd_top_k(const float *x, int n, int k, int32_t *idx);
int sd_is_eos(const sd_gen_cfg *cfg, int32_t id);
double sd_now(void);

/* Generates up to max_gen_len tokens after inputs into out (capacity
 * max_gen_len). Returns the count (EOS included when hit) or -1. Stops early
 * when the context is full (stats->hit_context). */
int sd_autoregressive_generate(const int32_t *inputs, int n_inputs, sd_model *m, int max_gen_len,
                               const sd_gen_cfg *cfg, int32_t *out, sd_gen_stats *st, sd_err *e);
/* The same over any model view (draft-only generation runs the drafter). */
int sd_autoregressive_generate_lm(const int32_t *inputs, int n_inputs, sd_lm *lm, int max_gen_len,
                                  const sd_gen_cfg *cfg, int32_t *out, sd_gen_stats *st,
                                  sd_err *e);

/* The settings of the verification rounds, the same for speculative
 * decoding and NASD: gamma drafts a round at most (at least 1); a rejection
 * resamples from p instead of norm(max(0, p - q)) when
 * skip_sample_adjustment is set; first_target runs the target alone on the
 * prompt first (prefill + first token) instead of a first drafted round.
 *
 * stop_below > 0 makes the rounds adaptive: a round stops drafting once
 * the estimated chance that all its drafts are accepted falls below it, so
 * gamma is only the most a round drafts; 0 drafts gamma every round. The
 * estimate is the product over the round's drafts of min(1, c a), c the
 * drafter's confidence in each (its probability of the draft) and a the
 * run's calibration: accepted drafts over the summed confidence of the
 * drafts the target judged, both decayed per round so a recent change of
 * acceptance shows. The stop depends on the drafter and on past rounds
 * only, never on the target's rows of the round, so the output (greedy)
 * and its distribution (sampled) stay the target's. */
typedef struct sd_verify_opts {
    int gamma;
    int skip_sample_adjustment;
    int first_target;
    double stop_below;
} sd_verify_opts;

/* One verification round, shared by speculative decoding and NASD
 * (engine/decode/verify.c): a drafter proposes up to gamma tokens, one
 * target call scores them, the accepted ones and the token that ends the
 * round are emitted, and the caches roll back past a rejection.
 *
 * draft() proposes the token at seq[at] from seq[0..at): returns 1 with
 * seq[at] set (and, when q is not NULL, q = [vocab] the distribution it was
 * drawn from; *conf its confidence in the draft, left at 1 when it has
 * none, SD_CONF_NONE when the draft's length rule is the drafter's own:
 * such a draft enters neither the round's estimated chance nor the
 * calibration), 2 the same with this draft the round's last, 0 when it
 * has none (drafting stops), -1 on error. The drafter times its own calls
 * into st (draft_s, catchup_s); a round without a drafter model has its
 * draft() calls timed as drafting. A NULL q
 * means the greedy path, where only ids are compared. With one_hot set
 * the drafts are deterministic (q is one-hot at the draft; q is never
 * asked for). verified(), when set, gets the target's top_k ids at every
 * verified position whose context is final. */
typedef struct sd_verify {
    sd_lm *target;
    sd_lm *drafter; /* its cache rolls back with the target's; NULL: none */
    const sd_verify_opts *o;
    int cap; /* the most drafts a round may hold (raised to o->gamma by sd_verify_init) */
    int one_hot;
    int top_k; /* ids per verified row on the greedy path (>= 1) */
    int (*draft)(void *ud, int32_t *seq, int at, float *q, float *conf, sd_gen_stats *st,
                 sd_err *e);
    int (*verified)(void *ud, const int32_t *seq, int at, const int32_t *ids, int k, sd_err *e);
    void *ud;
    /* set by sd_verify_init */
    int vocab;
    int32_t *ids;              /* [cap+1][top_k] */
    float *q, *p, *tlog, *resid; /* sampled path: [cap][vocab], [cap+1][vocab] x2, [vocab] */
    float *conf;                 /* [cap]: the round's confidences */
    double judged_conf, judged_acc; /* adaptive rounds' calibration (decayed sums) */
    /* set by the caller before the first round */
    double t0; /* start of generation, for st->prefill_s */
} sd_verify;

#define SD_CONF_NONE (-1.0f)

/* Allocates the buffers for v's cap, top_k and path. */
int sd_verify_init(sd_verify *v, const sd_gen_cfg *cfg, sd_err *e);
void sd_verify_free(sd_verify *v);
/* One round at *cur with room for max_drafts drafts (0: the target alone,
 * the "first_target" step); report: hand the round to cfg->on_step.
 * Advances *cur past the emitted tokens. Returns 1 when an EOS ended
 * generation, 0 to go on, -1 on error. */
int sd_verify_round(sd_verify *v, const sd_gen_cfg *cfg, int32_t *seq, int *cur, int max_drafts,
                    int report, int32_t *out, int *count, sd_gen_stats *st, sd_err *e);

/* The adaptive rounds' default stop_below: a round drafts on while its
 * drafts are estimated at least 80% likely to be all accepted. A further
 * draft pays while its chance of being reached and accepted is above the
 * run's tokens per target step times its cost in steps: a model draft
 * costs a fifth to a quarter of a target step on a CPU, and its verified
 * row little on the AVX-512 tiles (at about 2 tokens a step: pays above
 * about 0.6) and a quarter of a step on the AVX2 tiles (at about 1.5:
 * above about 0.75); 0.8 is near the best of both and loses little on
 * either. Store drafts are near free and follow their own bound
 * (sd_store_run), outside this estimate. */
#define SD_STOP_BELOW_DEFAULT 0.8

/* The most n-gram store drafts one round takes, and how many the next
 * round may take after `confirmed` store drafts were accepted in a row:
 * twice that, at least base, at most SD_STORE_RUN_MAX (base when it is
 * larger). A store's match that held for a while is likely to hold on
 * (a copied span), and a long round of store drafts costs one wider
 * verification, not drafter calls. */
#define SD_STORE_RUN_MAX 16
int sd_store_run(int confirmed, int base);

/* Speculative decoding (lossless rejection sampling): the drafter proposes
 * gamma tokens, one target call scores gamma+1 positions; draft i is kept
 * when r < p_i(x)/q_i(x); the first rejection resamples from
 * norm(max(0, p - q)); when all pass, one bonus token comes from the
 * target's last row. Caches roll back with sd_kv_truncate. Drafter and
 * target must share the vocabulary. p_min > 0 ends a round's drafting
 * after a draft the drafter gave a probability below p_min (the draft
 * itself is verified: its cost is paid); the output is unchanged, only the
 * rounds' lengths move.
 *
 * ngram_n >= 2 makes the drafter hybrid: an n-gram store (ngram.h, multi-
 * level, contexts of up to 7 tokens or ngram_n - 1 when longer) learns the
 * prompt and every final token, and where the last ngram_n - 1 tokens or
 * more were seen before, the continuation of the longest such context is
 * the draft (one-hot, costing a lookup) instead of the model's; the model
 * feeds what it did not draft on its next call. A round that took a store
 * draft ends where the store stops knowing, and takes up to
 * sd_store_run store drafts (gamma bounds the model's); the store learns
 * the output's renames (renames.h) and, with cfg->costs or
 * cfg->run_costs, the drafter's expensive catch-ups are put off
 * (speculative.c). 0: the model alone.
 * Sampled chains whose drafter instance keeps history draft from the
 * model alone (its history would need the model's rows of store drafts). */
typedef struct sd_spec_opts {
    sd_verify_opts v;
    double p_min;
    int ngram_n;
} sd_spec_opts;

int sd_speculative_generate(const int32_t *inputs, int n_inputs, sd_lm *drafter, sd_lm *target,
                            const sd_spec_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                            int32_t *out, sd_gen_stats *st, sd_err *e);

/* NASD: drafts come from an n-gram store (ngram.h) instead of a model.
 * stop_if_unknown ends a round's drafting at the first unknown context;
 * otherwise the store's overall most frequent token fills in. */
typedef struct sd_ngram sd_ngram;
typedef struct sd_nasd_opts {
    sd_verify_opts v;
    int filler_top_k;
    int stop_if_unknown;
} sd_nasd_opts;

int sd_ngram_assisted_generate(const int32_t *inputs, int n_inputs, sd_ngram *store, sd_lm *target,
                               const sd_nasd_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                               int32_t *out, sd_gen_stats *st, sd_err *e);

/* Beam search: num_beams beams, top_k candidates per beam and step, length
 * penalty ((min_length + len) / (min_length + 1))^alpha. Tokens stream to
 * on_token only at the end (the winner is known last). */
typedef struct sd_beam_opts {
    int num_beams;
    int top_k;
    double min_length;
    double alpha;
} sd_beam_opts;

/* Beam search applies no sampler: 0 when smp is NULL or plain greedy,
 * else -1 with a message naming the chain. */
int sd_beam_check_sampler(const sd_sampler *smp, sd_err *e);
int sd_beam_search_generate(const int32_t *inputs, int n_inputs, sd_model *m,
                            const sd_beam_opts *o, int max_gen_len, const sd_gen_cfg *cfg,
                            int32_t *out, sd_gen_stats *st, sd_err *e);

/* Draft and target vocabularies must match in size and token strings. */
int sd_check_vocab(const sd_model *draft, const sd_model *target, sd_err *e);

#endif
