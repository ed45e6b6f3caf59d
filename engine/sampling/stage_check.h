/* Checks of what a stage returns, shared by the load-time self-test and the
 * checked calls at run time. Each returns 0, or -1 with why filled. */
#ifndef SD_STAGE_CHECK_H
#define SD_STAGE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "engine/sampling/stage_desc.h"

/* Row-sum tolerance of a distribution returned by a plugin. */
#define SD_SUM_TOLERANCE 1e-3

/* n_rows rows of n_vocab values: finite, >= 0, each summing to 1. */
int sd_check_distribution(const float *probs, int n_rows, int n_vocab, char *why, size_t len);
/* A logits row: finite or -inf everywhere, at least one finite value. */
int sd_check_logits(const float *x, int n, char *why, size_t len);
/* The output of one process() call, checked by the stage's kind. */
int sd_check_stage_output(const stage_def *d, const float *out, int n, char *why, size_t len);
/* The lowest id with the largest value, as the engine's greedy decoding
 * picks it. */
int32_t sd_first_max(const float *x, int n);

#endif
