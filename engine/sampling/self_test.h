/* The self-test every plugin passes at load, in its probe child. */
#ifndef SD_SELF_TEST_H
#define SD_SELF_TEST_H

#include <stddef.h>

#include "engine/sampling/probe_rows.h"
#include "engine/sampling/stage_desc.h"

/* Runs def (defaults, role SD_ROLE_OTHER) on the probe rows; 0, or -1 with
 * the reason in why. */
int sd_self_test(const stage_def *def, char *why, size_t len);
/* For a version-1 sampler: 1 when process() gives two different rows for
 * the same input (it keeps state, which version 1 cannot roll back), with
 * a warning in note; else 0. */
int sd_v1_looks_stateful(const stage_def *def, char *note, size_t len);

#endif
