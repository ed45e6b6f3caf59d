/* The statistical check that sample() draws from what process() returned. */
#ifndef SD_DRAW_CHECK_H
#define SD_DRAW_CHECK_H

#include <stddef.h>

#include "engine/sampling/stage_desc.h"

/* Draws per probe row. */
#define SD_DRAW_CHECK_DRAWS 4000
/* False-alarm probability of the test per row: a correct sampler fails it
 * with about this probability for a given seed (and, the seeds being
 * fixed, then fails every time). */
#define SD_DRAW_CHECK_ALPHA 1e-6

/* For a sampling stage that does not declare SD_SAMPLER_FLAG_ARGMAX:
 * SD_DRAW_CHECK_DRAWS draws from process()'s distribution on each of two
 * probe rows, a chi-square test of the counts against it. 0, or -1 with the
 * reason (the statistic, its degrees of freedom, the token most off). */
int sd_draw_check(const stage_def *def, char *why, size_t len);

#endif
