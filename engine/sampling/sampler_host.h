/* Sampler plugins: discovery, loading, parameter parsing, and the checked
 * calls the generation strategies use.
 *
 * A sampler is described by the ABI in samplers/sampler.h and carried by a
 * plugin, a shared object. The engine finds plugins in a list of
 * directories (sd_plugin_dirs) and turns a sampler name plus "key=value"
 * arguments into a sampler handle (sd_sampler_create). A run loads only the
 * plugin it needs (sd_samplers_open_lazy, then sd_samplers_load by name);
 * sd_samplers_open loads every good one.
 *
 * Every file is first opened and self-tested in a forked child process with
 * a time limit (SD_PROBE_TIMEOUT_MS); this process dlopens only files whose
 * probe succeeded. Failures of a plugin are never fatal: a file that cannot
 * be loaded, breaks the ABI, crashes, hangs or exits is skipped with a
 * warning "<file>: <reason>" kept in the set, and the others still load.
 *
 * Threading: a set is read-only once opened and may be shared; a sampler
 * handle is used by one thread at a time (create one per thread). Handles
 * must be destroyed before the set that made them is closed. */
#ifndef SD_SAMPLERS_H
#define SD_SAMPLERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/common/error.h"
#include "engine/sampling/rng.h"

/* Environment variable holding extra plugin directories, ':'-separated. */
#define SD_PLUGIN_PATH_ENV "SPECDEC_PLUGIN_PATH"

typedef struct sd_sampler_set sd_sampler_set;
typedef struct sd_sampler sd_sampler;

/* Builds the search list: flag_dirs in order (the CLI's --plugin-dir flags),
 * then the entries of $SPECDEC_PLUGIN_PATH (empty entries skipped), then
 * "plugins" beside the running binary (found through /proc/self/exe; left
 * out when that link cannot be read). Repeated entries are kept once, at
 * their first position. *dirs is malloc'd: free with sd_plugin_dirs_free.
 * Returns 0, or -1 on out of memory. */
int sd_plugin_dirs(const char *const *flag_dirs, int n_flag, char ***dirs, int *n_dirs,
                   sd_err *e);
void sd_plugin_dirs_free(char **dirs, int n);

/* Time a probe child gets to load and self-test one plugin. */
#define SD_PROBE_TIMEOUT_MS 2000

/* Scans each directory, in the order given, for *.so files (byte-wise sorted
 * names within a directory), probes each and loads the good ones. The first plugin providing a
 * sampler name wins; later ones are skipped with a warning naming both
 * files. The same file reached twice (a directory listed twice, a link) is
 * loaded once. An unreadable directory is a warning.
 * Returns NULL only on out of memory. */
sd_sampler_set *sd_samplers_open(const char *const *dirs, int n_dirs, sd_err *e);
/* A set over the same search path with nothing probed or loaded yet.
 * Returns NULL only on out of memory. */
sd_sampler_set *sd_samplers_open_lazy(const char *const *dirs, int n_dirs, sd_err *e);
/* Loads the plugin providing name unless already loaded: in each directory
 * of the search path, in order, <name>.so is probed first, then the other
 * *.so files (sorted); the first good file providing name is dlopened. No
 * other file is dlopened here. Returns the sampler's index; -1 with
 * "unknown sampler 'x' (available: ...)" (the good plugins probed) when no
 * good file provides it; -2 when the search itself failed (out of memory,
 * no pipe or fork), e saying which. */
int sd_samplers_load(sd_sampler_set *s, const char *name, sd_err *e);
/* Probes every file of the search path not yet probed, loading none, so
 * that sd_samplers_list shows them all. Returns 0, or -1 with e filled. */
int sd_samplers_probe_all(sd_sampler_set *s, sd_err *e);
void sd_samplers_close(sd_sampler_set *s);

/* Warnings gathered while loading, each "<file>: <reason>". */
int sd_samplers_n_warnings(const sd_sampler_set *s);
const char *sd_samplers_warning(const sd_sampler_set *s, int i);

/* Loaded samplers, in load order. */
int sd_samplers_count(const sd_sampler_set *s);
const char *sd_samplers_name(const sd_sampler_set *s, int i);
const char *sd_samplers_file(const sd_sampler_set *s, int i);
/* Index of the sampler called name, or -1. */
int sd_samplers_find(const sd_sampler_set *s, const char *name);

/* Human-readable listing of every good plugin probed (the first of each
 * name): name, file, description, and each parameter with its type,
 * default, range and help; then "broken  (<file>): <reason>" for each file
 * rejected, as one malloc'd string (the caller
 * prints and frees it); NULL with e filled when out of memory. */
char *sd_samplers_list(const sd_sampler_set *s, sd_err *e);

/* kv: n_kv "key=value" strings; a key given twice takes the last value.
 * Unknown sampler, unknown key, malformed or out-of-range value: NULL with
 * a message listing what is accepted. max_vocab: the largest n_vocab the
 * sampler will see (its scratch is sized for it). */
sd_sampler *sd_sampler_create(const sd_sampler_set *s, const char *name,
                              const char *const *kv, int n_kv, int max_vocab, sd_err *e);
/* The checks of sd_sampler_create on name and kv, with the same messages,
 * without creating the sampler (no plugin code runs), so a caller can
 * reject bad arguments before loading a model. On failure *bad_kv is the
 * index of the string at fault, or -1 when the name is unknown. */
int sd_sampler_check(const sd_sampler_set *s, const char *name, const char *const *kv, int n_kv,
                     int *bad_kv, sd_err *e);
void sd_sampler_destroy(sd_sampler *p);

const char *sd_sampler_name(const sd_sampler *p);
/* 1 when sampling is the argmax of the logits (SD_SAMPLER_FLAG_ARGMAX): a
 * backend may then take the argmax on the device. */
int sd_sampler_is_greedy(const sd_sampler *p);
/* Writes "top_k(temperature=0.7, top_k=40)"; snprintf's return convention. */
int sd_sampler_describe(const sd_sampler *p, char *buf, size_t cap);

/* probs[n_rows][n_vocab] = the plugin's distribution for each logits row.
 * Checks the output: finite, >= 0, each row summing to 1 within 1e-3. */
int sd_sampler_probs(sd_sampler *p, const float *logits, float *probs, int n_rows,
                     int n_vocab, sd_err *e);
/* *id = a token drawn from probs (one row) with r; checks 0 <= id < n_vocab
 * and probs[id] > 0. Errors name the sampler and its plugin file. */
int sd_sampler_sample(sd_sampler *p, const float *probs, int n_vocab, sd_rng *r,
                      int32_t *id, sd_err *e);

#endif
