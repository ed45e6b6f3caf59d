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
#include "samplers/sampler.h"

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
/* The load-time checks of the plugin providing name (descriptor,
 * self-test, history probe, draw check; see plugins/README.md), for the
 * CLI's --check-sampler NAME: the files are probed as sd_samplers_load
 * does. 0 when a good file provides name (*file: its path); -1 when none
 * does, e giving "<file>: <reason>" for a broken <name>.so of the search
 * path (*file: its path), else "unknown sampler ..."; -2 as
 * sd_samplers_load. */
int sd_samplers_verify(sd_sampler_set *s, const char *name, const char **file, sd_err *e);
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

/* Faults in plugin calls at run time. Every call into a stage (create,
 * process, sample, reset, accept, rollback, destroy) is marked, so that:
 *   - a crash inside it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) ends the
 *     process with exit status SD_SAMPLER_FAULT_EXIT and the line
 *     "specdec: sampler stage 'NAME' crashed (SIGSEGV) in process() (plugin
 *     FILE)";
 *   - a call running longer than the time limit ends it the same way with
 *     "... did not return from process() within T ms (plugin FILE)";
 *   - a process() writing past the end of its row is an error of the call
 *     ("NAME: process wrote past the end of its row ...") when it stays
 *     within 1 KiB, and faults (named as above) further on.
 * The handlers are installed, and a watchdog thread started, with the
 * first chain created. These lines are the one thing the library writes
 * itself: the process is ending and no caller would see an error. */
#define SD_SAMPLER_FAULT_EXIT 70
/* Default time limit of one plugin call. */
#define SD_SAMPLER_TIMEOUT_MS 5000
/* Sets where the last line goes (fd, -1 for nowhere; default 2) and the
 * time limit of one call in milliseconds, 0 (none) to 3,600,000 (default
 * SD_SAMPLER_TIMEOUT_MS). 0, or -1 with e naming the bad value. */
int sd_sampler_guard(int fd, int timeout_ms, sd_err *e);

/* Chains. spec is one stage name or several separated by commas
 * ("penalty,top_k,nucleus"): logits stages, then one sampling stage; a
 * sampling stage before the last acts as a filter (its support is kept).
 * "topk" and "topknucleus" name top_k and top_k_nucleus.
 * kv: n_kv "key=value" or "stage.key=value" strings; a key given twice takes
 * the last value. An unqualified key goes to the last stage when it has
 * it, else to the one stage that has it (two: an error asking for the
 * stage). Unknown stage, unknown key, malformed or out-of-range value:
 * NULL with a message naming the stage, the key and the value. */

/* Loads the plugin of every stage of spec (sd_samplers_load each). 0, or
 * -1 / -2 as sd_samplers_load. */
int sd_samplers_load_chain(sd_sampler_set *s, const char *spec, sd_err *e);

/* A chain instance for one model role: info (samplers/sampler.h) is handed
 * to every version-2 stage's create(); n_vocab is the longest row,
 * max_history the longest token history. */
sd_sampler *sd_sampler_create_for(const sd_sampler_set *s, const char *spec,
                                  const char *const *kv, int n_kv, const sd_engine_info *info,
                                  sd_err *e);
/* sd_sampler_create_for with role SD_ROLE_OTHER, no vocabulary pieces, no
 * end-of-generation ids and a history of 4096 tokens. max_vocab: the
 * largest n_vocab the sampler will see. */
sd_sampler *sd_sampler_create(const sd_sampler_set *s, const char *spec,
                              const char *const *kv, int n_kv, int max_vocab, sd_err *e);
/* The checks of sd_sampler_create on spec and kv, with the same messages,
 * without creating the sampler (no plugin code runs), so a caller can
 * reject bad arguments before loading a model. On failure *bad_kv is the
 * index of the string at fault, or -1 when spec is at fault. */
int sd_sampler_check(const sd_sampler_set *s, const char *spec, const char *const *kv, int n_kv,
                     int *bad_kv, sd_err *e);
/* Whether every stage of spec accepts the drafter role: each is created
 * with info's role set to SD_ROLE_DRAFTER and destroyed. 1 yes; 0 when a
 * stage refuses, e naming the chain, the stage, its reason and its plugin;
 * -1 when spec or kv is bad (as sd_sampler_check). A session creates the
 * drafter's instance only for strategies that draft, and asks this first,
 * so a chain that refuses the drafter still runs autoregressively. */
int sd_sampler_allows_drafter(const sd_sampler_set *s, const char *spec, const char *const *kv,
                              int n_kv, const sd_engine_info *info, sd_err *e);
void sd_sampler_destroy(sd_sampler *p);

/* The final (sampling) stage's name. */
const char *sd_sampler_name(const sd_sampler *p);
/* 1 when the final stage is the argmax (SD_SAMPLER_FLAG_ARGMAX): the
 * distribution is one-hot at the argmax of the processed logits. */
int sd_sampler_is_greedy(const sd_sampler *p);
int sd_sampler_n_stages(const sd_sampler *p);
/* 1 when a stage keeps token history (the strategies must then drive
 * sd_sampler_reset / sd_sampler_dist). */
int sd_sampler_keeps_history(const sd_sampler *p);
/* Writes "top_k(temperature=0.7, top_k=40)", stages joined by ','. */
int sd_sampler_describe(const sd_sampler *p, char *buf, size_t cap);

/* probs[n_rows][n_vocab] = the chain's distribution for each logits row,
 * every row at the current history. Checks every stage's output: a logits
 * stage's finite or -inf with one finite value, a distribution finite,
 * >= 0, summing to 1 within 1e-3. Errors name the stage and its file. */
int sd_sampler_probs(sd_sampler *p, const float *logits, float *probs, int n_rows,
                     int n_vocab, sd_err *e);
/* *id = a token drawn from probs (one row) by the final stage with r;
 * checks 0 <= id < n_vocab and probs[id] > 0. Errors name the stage and
 * its plugin file. */
int sd_sampler_sample(sd_sampler *p, const float *probs, int n_vocab, sd_rng *r,
                      int32_t *id, sd_err *e);

/* History. A generation starts with sd_sampler_reset(prompt). Then, for
 * the row that follows seq[0..pos), sd_sampler_dist brings the stages'
 * history to exactly seq[0..pos): it rolls back what differs from what
 * they were told and tells them the new tokens (accept), running the
 * chain on the rows of those positions that it has not processed yet,
 * then writes the row's distribution into probs (probs NULL: only the
 * history moves). rows holds the logits of positions first, first+1, ...,
 * pos; sd_sampler_need says which first is enough (it rolls back first).
 * Without history stages both return at once (need: pos). */
int sd_sampler_reset(sd_sampler *p, const int32_t *prompt, int n, sd_err *e);
int sd_sampler_need(sd_sampler *p, const int32_t *seq, int pos, sd_err *e);
int sd_sampler_dist(sd_sampler *p, const int32_t *seq, int pos, const float *rows, int first,
                    float *probs, int n_vocab, sd_err *e);

#endif
