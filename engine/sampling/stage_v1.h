/* Version-1 plugins seen as version-2 sampling stages, and the one call
 * that creates a handle of either version. */
#ifndef SD_STAGE_V1_H
#define SD_STAGE_V1_H

#include <stddef.h>

#include "engine/sampling/stage_desc.h"

/* Checks a version-1 descriptor and fills def with the adapter: a
 * sampling stage without history whose process() runs the plugin on one
 * row. 0, or -1 with the reason in why. */
int sd_stage_from_v1(const sd_sampler_desc *d, stage_def *def, char *why, size_t len);
/* A handle for def: the plugin's create(), or for version 1 the adapter's
 * (max_vocab = info->n_vocab). NULL with a reason in err. */
void *sd_stage_create(const stage_def *def, const sd_engine_info *info,
                      const sd_sampler_value *values, char *err, size_t errlen);

#endif
