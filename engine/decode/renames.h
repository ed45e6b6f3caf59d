/* The renames of an edit, as the hybrid drafter's n-gram store sees them.
 *
 * An edit copies long spans of its input with changes; a rename changes
 * the same span (a name: one token or several) every time it recurs. The
 * store knows the input's contexts, not the output's: after a renamed span
 * its contexts hold the new tokens and the store stops knowing them, and at
 * the next occurrence it predicts the old span again. Renames fix both.
 *
 * Learning: where the store (seen through the renames already known)
 * predicted a token the output did not take, and had never seen that
 * token after the context (else the miss is the store's own ambiguity:
 * code repeats contexts), the miss opens, with the continuation the store
 * expected there (the source). When, a few tokens
 * later, the output follows the source again for RESYNC tokens, the span
 * the output took (to) replaced the source's span (from) and the pair is a
 * rename. Spans of 1..SD_RENAME_SPAN tokens each; an insertion or a
 * removal (one side empty) is no rename: the store finds the copy again
 * on its own once the context after it is known.
 *
 * Before the output follows the source again, the contexts holding the
 * changed span are unknown to the store; while the miss is open, the
 * prediction there is the source after the miss, aligned on what the
 * output took since (a substitution of one token for one right after the
 * change), so a rename's first occurrence keeps its copy.
 *
 * Predicting: the context's tail is translated back (each known `to` span
 * replaced by its `from` span) before the store looks it up, and where the
 * store's continuation is a `from` span, the prediction is its `to` span
 * (its next token when the output is inside one). A rename that does not
 * hold everywhere (a string that keeps the old name) costs a rejected
 * draft: the target decides every token. */
#ifndef SD_RENAMES_H
#define SD_RENAMES_H

#include <stdint.h>

#include "engine/decode/ngram.h"

#define SD_RENAME_SPAN 6
#define SD_RENAMES_MAX 16
/* Tokens the output must follow the source for after a changed span
 * before the change counts as a rename. */
#define SD_RENAME_RESYNC 2

typedef struct sd_rename {
    int32_t from[SD_RENAME_SPAN], to[SD_RENAME_SPAN];
    int n_from, n_to;
} sd_rename;

typedef struct sd_renames {
    sd_rename r[SD_RENAMES_MAX];
    int n, next; /* kept renames; the slot the next one takes (oldest first when full) */
    int miss;    /* position of the open miss, -1: none */
    int32_t src[SD_RENAME_SPAN + SD_RENAME_RESYNC]; /* the store's continuation at the miss */
    int n_src;
} sd_renames;

void sd_renames_init(sd_renames *r);

/* The continuation of seq[0..at) the store gives from a context of at
 * least min_ctx tokens, seen through the renames: 1 and *x, else 0. */
int sd_renames_predict(const sd_renames *r, const sd_ngram *store, const int32_t *seq, int at,
                       int min_ctx, int32_t *x);

/* Learns from the final token seq[i] before the store observes it (calls
 * in order of i): known and predicted are sd_renames_predict's answer at
 * i. Opens a miss, or closes one into a rename. */
void sd_renames_learn(sd_renames *r, const sd_ngram *store, const int32_t *seq, int i,
                      int min_ctx, int known, int32_t predicted);

#endif
