/* specdec sampler ABI, version 1.
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

/* Parameter types. */
enum {
    SD_SAMPLER_INT = 1,  /* value in sd_sampler_value.i; default/min/max are integers */
    SD_SAMPLER_FLOAT = 2 /* value in sd_sampler_value.f */
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

/* Size of the version-1 descriptor: a plugin reporting less is rejected. */
#define SD_SAMPLER_V1_SIZE (offsetof(sd_sampler_desc, sample) + sizeof(void (*)(void)))

/* Marks the entry point as exported even when the plugin is built with
 * -fvisibility=hidden. */
#if defined(__GNUC__)
#define SD_SAMPLER_EXPORT __attribute__((visibility("default")))
#else
#define SD_SAMPLER_EXPORT
#endif

/* The entry point every plugin defines (see SD_SAMPLER_ENTRY_SYMBOL for its
 * name). */
SD_SAMPLER_EXPORT const sd_sampler_desc *sd_logits_processor_v1(void);

#ifdef __cplusplus
}
#endif

#endif
