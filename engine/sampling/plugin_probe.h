/* Opening a plugin file, and probing it first in a child process. */
#ifndef SD_PLUGIN_PROBE_H
#define SD_PLUGIN_PROBE_H

#include <stddef.h>

#include "kernels/common/error.h"
#include "engine/sampling/stage_desc.h"

/* What a probe reports: the sampler's name and its listing entry, or why
 * the file is unusable. */
typedef struct probe_report {
    int ok;
    char name[SD_SAMPLER_MAX_NAME + 1];
    char why[SD_ERRLEN];
    char entry[4096];
    char note[SD_ERRLEN]; /* ok: a warning about a good file, or empty */
} probe_report;

/* dlopens path and fills def with its checked descriptor (the version-2
 * entry point wins when a file has both); -1 with why, *dl then NULL or
 * to be closed by the caller. phase, when given, is told each step before
 * plugin code runs. */
int sd_plugin_open(const char *path, void **dl, stage_def *def, void (*phase)(int c), char *why,
                   size_t len);
/* Opens and self-tests path in a forked child with a time limit
 * (SD_PROBE_TIMEOUT_MS) and fills r from its report, or with why it gave
 * none. Returns -1 (err filled) only when no child could be started. */
int sd_probe_file(const char *path, probe_report *r, char *err, size_t errlen);

#endif
