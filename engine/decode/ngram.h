/* N-gram stores for NASD. A store maps a context (the last L tokens) to the
 * continuations seen after it, with counts; lookups return the best one:
 * highest count, ties to the continuation seen first.
 *   multi-level: contexts of every length L in [1, N-1] (k-grams for k in
 *                [2, N]); the longest context that is known wins.
 *   one-level:   only contexts of length N-1.
 * Both also keep level 0 (the empty context: overall token counts), used as
 * the filler when no context is known and the caller allows it.
 * Storage is two open-addressing hash tables (contexts, and context+token
 * pairs) sized from the expected number of observations and grown by
 * doubling: no allocation per token. */
#ifndef SD_NGRAM_H
#define SD_NGRAM_H

#include <stdint.h>

#include "kernels/common/error.h"

#define SD_NGRAM_MAX_N 16

enum sd_ngram_kind { SD_NGRAM_MULTI = 0, SD_NGRAM_ONE = 1 };

typedef struct sd_ngram sd_ngram;

/* n in [2, SD_NGRAM_MAX_N]; expected: observations to size the tables for. */
sd_ngram *sd_ngram_create(int kind, int n, int expected, sd_err *e);
void sd_ngram_free(sd_ngram *s);
void sd_ngram_reset(sd_ngram *s);

/* Records that tok followed hist[0..len) (its last L tokens, every level). */
int sd_ngram_observe(sd_ngram *s, const int32_t *hist, int len, int32_t tok, sd_err *e);
/* Observes seq[i] after seq[0..i) for i in [from, to). */
int sd_ngram_observe_seq(sd_ngram *s, const int32_t *seq, int from, int to, sd_err *e);
/* Best continuation of hist[0..len): 1 and *tok when a context is known, or
 * when fallback is set and anything was observed (level 0); else 0. *level
 * (optional) receives the context length used. */
int sd_ngram_predict(const sd_ngram *s, const int32_t *hist, int len, int fallback, int32_t *tok,
                     int *level);

/* Whether tok was observed after hist[0..len)'s context of some length in
 * [min_level, N-1] (the levels the store keeps). */
int sd_ngram_seen(const sd_ngram *s, const int32_t *hist, int len, int min_level, int32_t tok);

#endif
