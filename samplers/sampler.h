/* specdec sampler ABI, versions 1 and 2 (version 2 at the end).
 *
 * Version 2 is the one to write: the built-ins use it. Its revision 2.1
 * appends fields to two structures (sd_stage_desc.str_defaults for string
 * parameters, sd_engine_info.vocab_text for the stored token strings) and
 * has piece() give a token's bytes; abi_version stays 2 and struct_size
 * tells the layouts apart, so plugins built against the v2 header load
 * and behave as before. Version 1, described first, is frozen: plugins
 * built against it keep loading, seen by the engine as version-2 sampling
 * stages without history.
 *
 * A sampler decides how the next token is picked from the model's logits.
 * Every sampler, the built-in ones included, is one C file built into a
 * shared object (the plugin) and dropped into a plugin directory:
 *
 *     cc -std=c11 -O2 -fPIC -shared -I<specdec> my_sampler.c -lm -o my_sampler.so
 *
 * with `#include "samplers/sampler.h"`. The engine scans its plugin
 * directories for *.so files, dlopen()s each one, and asks it for its
 * sampler's descriptor through one exported function:
 *
 *     const sd_sampler_desc *sd_logits_processor_v1(void);
 *
 * This header is the contract between the engine and a plugin: the
 * descriptor, the parameter table, the random number source. These layouts
 * are frozen for abi_version 1. Optional helpers for writing a sampler
 * (softmax, top-k / top-p filters, inverse-CDF sampling, argmax) are in
 * samplers/sampler_util.h; they are compiled into the plugin and are not
 * part of the ABI.
 *
 * ---------------------------------------------------------------------------
 * Contract between the engine and a plugin
 * ---------------------------------------------------------------------------
 * Lifetime and ownership
 *   - The descriptor and everything it points to (strings, parameter table)
 *     are owned by the plugin, must be static (valid until dlclose) and are
 *     never written by the engine. sd_logits_processor_v1() may be called
 *     any number of times and must return the same pointer.
 *   - create() returns a handle the plugin owns; the engine passes it back to
 *     process/sample and releases it with destroy() exactly once.
 *   - logits, probs and rng buffers belong to the engine; a plugin must not
 *     keep pointers to them after the call returns.
 *
 * State and threading
 *   - No global mutable state: everything a handle needs lives in the
 *     handle. Different handles may be used concurrently from different
 *     threads; one handle is used by one thread at a time (the engine creates
 *     one handle per thread). create() and destroy() may be called
 *     concurrently for different handles.
 *
 * Memory
 *   - create() receives max_vocab, the largest n_vocab the handle will ever
 *     see, and allocates all scratch space there. process() and sample() must
 *     not allocate: they run on every decoding step. The engine never calls
 *     them with n_vocab > max_vocab.
 *
 * Semantics (those of the PyTorch original, romsto/Speculative-Decoding)
 *   - process() filters the raw logits (top-k, top-p, ...), then computes
 *     probs = softmax(filtered / temperature). Filtered tokens get
 *     probability exactly 0, the others are > 0 or underflow to 0, and each
 *     row sums to 1 up to float rounding. Speculative decoding uses these
 *     probabilities for rejection sampling, so they must be the exact
 *     distribution sample() draws from. (Greedy samplers: see
 *     SD_SAMPLER_FLAG_ARGMAX.)
 *   - sample() draws one token from the distribution it is given, without
 *     filtering it again: during speculative decoding the engine passes the
 *     residual distribution norm(max(0, p - q)), which process() did not
 *     produce. The values are non-negative and sum to about 1 (not exactly:
 *     samplers should draw proportionally to the values). All randomness
 *     must come from the rng argument, so a seed reproduces a run.
 *
 * Input rows
 *   - Logits are finite or -INFINITY (an already masked token); each row has
 *     at least one finite value. A plugin may return an error from process()
 *     for rows that break this (the built-ins do for NaN and +inf).
 *
 * Validation done by the engine (a plugin need not repeat it)
 *   - At load: abi_version, struct_size, name, the function pointers and the
 *     parameter table are checked, then the sampler is created with its
 *     defaults and run on a few probe rows: process must produce
 *     distributions, sample must return ids in range with non-zero
 *     probability, and a sampler with SD_SAMPLER_FLAG_ARGMAX must return the
 *     argmax of each row. A plugin that fails any of this is skipped with a
 *     warning "<file>: <reason>".
 *   - Parameters: every value given to create() has the declared type and
 *     lies in the declared range (NaN and infinities are rejected).
 *   - After every process(): values finite, >= 0, each row summing to 1
 *     within 1e-3. After every sample(): 0 <= id < n_vocab.
 */
#ifndef SD_SAMPLER_H
#define SD_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SD_SAMPLER_ABI_VERSION 1u

/* Name of the one symbol the engine looks up. It keeps the name it had when
 * samplers were called "logits processors": the symbol is part of the binary
 * ABI, and renaming it would make every plugin already built invisible to
 * the engine. Only the C names in this header changed, which compiled
 * plugins never see. */
#define SD_SAMPLER_ENTRY_SYMBOL "sd_logits_processor_v1"

/* Limits the engine enforces on the descriptor. */
#define SD_SAMPLER_MAX_PARAMS 16 /* entries in the parameter table */
#define SD_SAMPLER_MAX_NAME 31   /* characters in a sampler or parameter name */
#define SD_SAMPLER_MAX_STRING 1024 /* bytes in a string parameter's value */

/* Parameter types. */
enum {
    SD_SAMPLER_INT = 1,  /* value in sd_sampler_value.i; default/min/max are integers */
    SD_SAMPLER_FLOAT = 2, /* value in sd_sampler_value.f */
    SD_SAMPLER_STRING = 3 /* value in sd_sampler_value.s; ABI v2.1 stages only
                           * (default in sd_stage_desc.str_defaults; flags,
                           * def, min and max are ignored) */
};

/* Parameter flags: bounds are inclusive unless marked exclusive. */
#define SD_SAMPLER_MIN_EXCLUSIVE 0x1u
#define SD_SAMPLER_MAX_EXCLUSIVE 0x2u

/* One entry of the parameter table. The engine uses it to parse
 * `--sampler-arg name=value`, validate the value, fill in defaults and list
 * the sampler with --list-samplers.
 *   name   [a-z_][a-z0-9_]*, at most SD_SAMPLER_MAX_NAME characters,
 *          unique in the table
 *   type   SD_SAMPLER_INT or SD_SAMPLER_FLOAT
 *   flags  SD_SAMPLER_MIN_EXCLUSIVE / SD_SAMPLER_MAX_EXCLUSIVE
 *   def    default value; must lie in the range
 *   min    lower bound (may be -INFINITY for floats: no bound)
 *   max    upper bound (may be INFINITY for floats: no bound); for ints,
 *          min/max/def are integers of magnitude <= 2^53
 *   help   one line shown by --list-samplers (may be NULL) */
typedef struct sd_sampler_param {
    const char *name;
    int32_t type;
    uint32_t flags;
    double def;
    double min;
    double max;
    const char *help;
} sd_sampler_param;

/* A parameter value as create() receives it: .i for SD_SAMPLER_INT, .f for
 * SD_SAMPLER_FLOAT. */
typedef union sd_sampler_value {
    int64_t i;
    double f;
    const char *s; /* SD_SAMPLER_STRING: NUL-terminated, at most
                    * SD_SAMPLER_MAX_STRING bytes, valid during create()
                    * only (copy it) */
} sd_sampler_value;

/* The engine's seeded random number generator, seen through a function
 * pointer so plugins link against nothing of the engine.
 * uniform(state) returns a double uniformly distributed in [0, 1) with 53
 * random bits. Call it through sd_sampler_uniform() below. */
typedef struct sd_sampler_rng {
    double (*uniform)(void *state);
    void *state;
} sd_sampler_rng;

static inline double sd_sampler_uniform(sd_sampler_rng *rng) {
    return rng->uniform(rng->state);
}

/* Descriptor flags. */
/* Greedy decoding: process() returns the one-hot distribution at the argmax
 * of the logits row (lowest id on ties) and sample() returns the lowest id
 * with the largest value. The engine then computes both itself (the argmax
 * on the device where it can) and calls neither during generation; at load
 * it checks that sample(process(row)) is the argmax of every probe row. */
#define SD_SAMPLER_FLAG_ARGMAX 0x1u

/* The descriptor. Fields are read in this order; later ABI versions only
 * append, so struct_size tells the engine which fields a plugin has.
 *   abi_version  SD_SAMPLER_ABI_VERSION the plugin was built against
 *   struct_size  sizeof(sd_sampler_desc) as the plugin saw it
 *   name         sampler name used by --sampler, [A-Za-z0-9_-]+, at most
 *                SD_SAMPLER_MAX_NAME characters; the first plugin providing
 *                a name wins
 *   description  one line for --list-samplers (may be NULL)
 *   flags        SD_SAMPLER_FLAG_* (unknown bits are ignored)
 *   n_params     entries in params, 0..SD_SAMPLER_MAX_PARAMS
 *   params       the parameter table (may be NULL when n_params is 0)
 *
 *   create(values, max_vocab, err, errlen)
 *       values: n_params entries in table order, already validated.
 *       max_vocab: the largest n_vocab process/sample will receive (>= 1).
 *       Returns a handle, or NULL with a NUL-terminated reason written into
 *       err (errlen bytes, errlen >= 64) for conditions the table cannot
 *       express, or out of memory.
 *   destroy(handle)
 *       Frees everything create() allocated. Never called with NULL.
 *   process(handle, logits, probs, n_rows, n_vocab)
 *       logits: n_rows x n_vocab floats, row-major; probs: the same shape,
 *       written in full. Rows are independent: row r of probs depends only on
 *       row r of logits and the parameters. Returns 0, or -1 when a row is
 *       invalid (the engine reports it). 1 <= n_rows, 1 <= n_vocab <=
 *       max_vocab.
 *   sample(handle, probs, n_vocab, rng)
 *       probs: one row of n_vocab non-negative values (see Semantics above).
 *       Returns a token id in [0, n_vocab), or -1 when the row has no
 *       positive value. */
typedef struct sd_sampler_desc {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *name;
    const char *description;
    uint32_t flags;
    int32_t n_params;
    const sd_sampler_param *params;
    void *(*create)(const sd_sampler_value *values, int max_vocab, char *err, size_t errlen);
    void (*destroy)(void *handle);
    int (*process)(void *handle, const float *logits, float *probs, int n_rows, int n_vocab);
    int32_t (*sample)(void *handle, const float *probs, int n_vocab, sd_sampler_rng *rng);
} sd_sampler_desc;

/* Random filters. Speculative decoding is exact only when sample() draws
 * from the very distribution process() returned. A filter that is random
 * itself (XTC: with probability P, drop the top tokens but one) must not
 * flip its coin in sample(): process() returns the exact mixture
 * (1 - P) * dist(unfiltered) + P * dist(filtered), and sample() draws from
 * it like any sampler. The engine checks this at load with a chi-square
 * test of sample()'s draws against process()'s row (false-alarm rate 1e-6
 * per row; see plugins/README.md). */

/* Size of the version-1 descriptor: a plugin reporting less is rejected. */
#define SD_SAMPLER_V1_SIZE (offsetof(sd_sampler_desc, sample) + sizeof(void (*)(void)))

/* Marks the entry point as exported even when the plugin is built with
 * -fvisibility=hidden. */
#if defined(__GNUC__)
#define SD_SAMPLER_EXPORT __attribute__((visibility("default")))
#else
#define SD_SAMPLER_EXPORT
#endif

/* The entry point of a version-1 plugin (see SD_SAMPLER_ENTRY_SYMBOL for
 * its name). */
SD_SAMPLER_EXPORT const sd_sampler_desc *sd_logits_processor_v1(void);

/* ===========================================================================
 * ABI version 2: stages with token history, per-model instances, chains
 * ===========================================================================
 * A version-2 plugin exports
 *
 *     const sd_stage_desc *sd_sampler_v2(void);
 *
 * (and not sd_logits_processor_v1; a file exporting both is loaded as v2).
 * It provides one *stage*. `--sampler a,b,c` runs a chain of stages on each
 * row of logits: every stage but the last is a logits stage, the last is a
 * sampling stage. Version-1 samplers are sampling stages.
 *
 *   SD_STAGE_LOGITS  process(logits) -> logits (same row, changed: a
 *                    penalty lowers logits, a filter sets them to
 *                    -INFINITY). Its output feeds the next stage.
 *   SD_STAGE_SAMPLE  process(logits) -> the distribution sample() draws
 *                    from, with the semantics of version 1 (see above),
 *                    including SD_SAMPLER_FLAG_ARGMAX.
 * A sampling stage placed before the last one acts as a filter: the engine
 * keeps the logits of the tokens its distribution gives a non-zero
 * probability and sets the others to -INFINITY (so "top_k,nucleus" is
 * top-k, then nucleus on the survivors).
 *
 * Lifecycle (per handle)
 *   create(info, values)  once per model role: a speculative run creates
 *                         one handle for the target and one for the drafter
 *                         (info->role says which), so state never leaks
 *                         from one model to the other.
 *   reset(prompt)         at the start of every generation (every strategy
 *                         run, every interactive prompt): the history
 *                         becomes the prompt's ids.
 *   process / sample / accept / rollback   during the generation.
 *   destroy               once.
 *
 * History
 *   The handle's history is the token sequence of the row it processes
 *   next: after reset it is the prompt; accept(t) appends t; rollback(n)
 *   removes the last n accepted tokens (never more than were accepted
 *   since reset). The engine guarantees:
 *     - process() is always called for the row that follows exactly the
 *       current history (prompt + generated tokens in order), as an
 *       autoregressive run would, under speculative decoding and NASD
 *       too: verification row i is processed after the drafts before it
 *       were accepted, and a rejected draft is rolled back before anything
 *       else is processed.
 *     - accept(t) follows a process() call made at the current history with
 *       no reset or rollback in between: t is the token chosen at the row
 *       last processed, so a stage may remember what it needs about that row
 *       (mirostat: the probability of t). t may have probability 0 in the
 *       stage's own output: a drafter's handle is told the target's
 *       correction.
 *     - the history never exceeds info->max_history tokens.
 *   rollback must restore exactly the state before the accepts it undoes:
 *   process() after rollback(n) must give, bit for bit, what a fresh
 *   handle told only the remaining history gives (the self-test checks it
 *   over a few hundred tokens with repeats and rollbacks of 1 to 34). Keep per-position state (an
 *   array of max_history entries allocated in create) or recompute it.
 *   Stages that keep no history set reset, accept and rollback to NULL
 *   (all three or none); the engine then skips the history bookkeeping.
 *
 * Threading: as version 1. A handle is used by one thread at a time;
 * handles of one plugin may run concurrently (no global mutable state).
 *
 * Memory: create() allocates everything (for info->n_vocab tokens and
 * info->max_history positions); process/sample/accept/rollback must not.
 *
 * Validation done by the engine: the descriptor as in version 1 (name,
 * table, functions), kind, then a self-test in a child process (see
 * plugins/README.md for its exact shape): create on a 64-token vocabulary,
 * reset, three rows processed with accepts between them, rollback and
 * reset reproducing the outputs bit for bit; logits stages must return
 * finite or -INFINITY values with at least one finite per row, sampling
 * stages distributions from which sample() picks tokens of non-zero
 * probability. Then, for stages with history, the history probe (a few
 * hundred tokens with repeats, rollbacks of 1 to 34 tokens, every fifth row
 * half as long, each next row compared with a fresh handle told the
 * surviving history), and for sampling stages the draw check (a chi-square
 * test of sample()'s draws against process()'s row). At run time every
 * output is checked in the same way and a failing call is reported naming
 * the stage and its plugin file; a write past the row is named too. A
 * crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) or a hang (5 s by
 * default) inside a call ends the process with exit status 70
 * (SD_SAMPLER_FAULT_EXIT) and one line naming the stage, the call and the
 * plugin file (engine/sampling/sampler_host.h, sd_sampler_guard). */

#define SD_SAMPLER_ABI_VERSION_2 2u
#define SD_SAMPLER_V2_ENTRY_SYMBOL "sd_sampler_v2"

/* Stage kinds. */
#define SD_STAGE_LOGITS 1u
#define SD_STAGE_SAMPLE 2u

/* Which model a handle serves. */
enum {
    SD_ROLE_TARGET = 0,  /* the model whose distribution is the output's */
    SD_ROLE_DRAFTER = 1, /* a speculative drafter (draft model or first layers) */
    SD_ROLE_OTHER = 2    /* self-test, benchmarks, direct library users */
};

/* What the engine tells create(). Owned by the engine, valid during
 * create() only: copy what you need.
 *   n_vocab      the longest row process() will get (the vocabulary);
 *                process() receives each row's length, <= n_vocab. A
 *                row may be shorter (a drafter limited to the first ids
 *                of the vocabulary) while the history, prompt and accepted
 *                tokens hold ids up to n_vocab - 1: a token at or past a
 *                row's length is absent from that row (probability 0), and
 *                nothing may be written past the row's length. The
 *                history probe runs every fifth row at half length.
 *   max_history  the most tokens a history holds (prompt included)
 *   role         SD_ROLE_*
 *   eos_ids      the ids that end generation (may be empty)
 *   piece(piece_ctx, id, &len)  the bytes token id stands for (not
 *                NUL-terminated), as the decoder writes them: a newline
 *                token is "\n" whether the file stores it as byte-level
 *                BPE's "\xc4\x8a" or SentencePiece's "<0x0A>", and
 *                "\xe2\x96\x81with" (SentencePiece) or "\xc4\xa0with"
 *                (byte-level BPE) is " with". A byte-level token may hold
 *                part of a UTF-8 sequence; control tokens (end of turn,
 *                BOS) are empty (length 0). NULL for an id outside the
 *                vocabulary.
 *   vocab_text(piece_ctx, id, &len)  (ABI v2.1: read it only when
 *                struct_size >= SD_ENGINE_INFO_V2_1_SIZE) the vocabulary
 *                string of token id as the model file stores it, for a
 *                stage that wants the stored forms or a control token's
 *                name ("<|im_end|>").
 *                Both are given in a run (to the target's and the
 *                drafter's instances) and in the self-test (64 tokens:
 *                "<0>".."<9>", then "<?>", the same for both); both are
 *                NULL where the engine has no vocabulary
 *                (sd_sampler_create, the sampler benchmarks): a stage that
 *                cannot work without text refuses then, one that can does
 *                without. A plugin built against the v2 header (its
 *                descriptor's struct_size < SD_STAGE_V2_1_SIZE) is told
 *                struct_size SD_ENGINE_INFO_V2_SIZE and gets the
 *                vocabulary string in piece, as v2 defined it. */
typedef struct sd_engine_info {
    uint32_t abi_version; /* SD_SAMPLER_ABI_VERSION_2 */
    uint32_t struct_size; /* sizeof(sd_engine_info) as the engine saw it */
    int32_t n_vocab;
    int32_t max_history;
    int32_t role;
    int32_t n_eos;
    const int32_t *eos_ids;
    const char *(*piece)(const void *ctx, int32_t id, size_t *len);
    const void *piece_ctx;
    /* ABI v2.1 */
    const char *(*vocab_text)(const void *ctx, int32_t id, size_t *len);
} sd_engine_info;

#define SD_ENGINE_INFO_V2_SIZE (offsetof(sd_engine_info, piece_ctx) + sizeof(void *))
#define SD_ENGINE_INFO_V2_1_SIZE (offsetof(sd_engine_info, vocab_text) + sizeof(void (*)(void)))

/* The version-2 descriptor. Fields up to and including rollback exist in
 * every version-2 plugin; later versions only append.
 *   abi_version  SD_SAMPLER_ABI_VERSION_2
 *   struct_size  sizeof(sd_stage_desc) as the plugin saw it
 *   name, description, n_params, params: as in version 1
 *   kind         SD_STAGE_LOGITS or SD_STAGE_SAMPLE
 *   flags        SD_SAMPLER_FLAG_ARGMAX (sampling stages without history
 *                only: the engine then computes the argmax itself and
 *                never calls process or sample during generation)
 *   create(info, values, err, errlen)  a handle, or NULL with a reason in err
 *   destroy(handle)
 *   reset(handle, prompt, n_prompt)    0, or -1 (n_prompt >= 0)
 *   process(handle, logits, out, n_vocab)  one row at the current history;
 *                logits and out do not overlap; 0 or -1
 *   sample(handle, probs, n_vocab, rng)    sampling stages: as version 1;
 *                logits stages: NULL
 *   accept(handle, token)              0 or -1
 *   rollback(handle, n)                0 or -1 (1 <= n <= accepted) */
typedef struct sd_stage_desc {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *name;
    const char *description;
    uint32_t kind;
    uint32_t flags;
    int32_t n_params;
    const sd_sampler_param *params;
    void *(*create)(const sd_engine_info *info, const sd_sampler_value *values, char *err,
                    size_t errlen);
    void (*destroy)(void *handle);
    int (*reset)(void *handle, const int32_t *prompt, int n_prompt);
    int (*process)(void *handle, const float *logits, float *out, int n_vocab);
    int32_t (*sample)(void *handle, const float *probs, int n_vocab, sd_sampler_rng *rng);
    int (*accept)(void *handle, int32_t token);
    int (*rollback)(void *handle, int n);
    /* ABI v2.1 (struct_size >= SD_STAGE_V2_1_SIZE; a plugin built
     * against the v2 header stops before it and still loads):
     *   str_defaults  n_params entries: the default text of each
     *                 SD_SAMPLER_STRING parameter (NULL: ""), NULL for the
     *                 others; may be NULL when no parameter is a string.
     *                 `--sampler-arg key=text` passes text unchanged (a
     *                 stage parses its own lists and escapes). */
    const char *const *str_defaults;
} sd_stage_desc;

#define SD_STAGE_V2_SIZE (offsetof(sd_stage_desc, rollback) + sizeof(void (*)(void)))
#define SD_STAGE_V2_1_SIZE (offsetof(sd_stage_desc, str_defaults) + sizeof(void *))

/* The entry point of a version-2 plugin. */
SD_SAMPLER_EXPORT const sd_stage_desc *sd_sampler_v2(void);

#ifdef __cplusplus
}
#endif

#endif
