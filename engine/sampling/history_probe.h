/* The history probe: rollback checked against a fresh replay. */
#ifndef SD_HISTORY_PROBE_H
#define SD_HISTORY_PROBE_H

#include <stddef.h>

#include "engine/sampling/stage_desc.h"

/* For a stage with history: one handle walks a few hundred tokens with
 * repeats, rolling back k tokens for several k after several accepts; after
 * each rollback its next row must equal, bit for bit, that of a fresh
 * handle told only the surviving history. 0, or -1 with the reason. */
int sd_history_probe(const stage_def *def, char *why, size_t len);

#endif
