/* The plugin set's layout, for the chain files (the public calls are in
 * sampler_host.h). */
#ifndef SD_PLUGIN_SET_H
#define SD_PLUGIN_SET_H

#include <sys/types.h>

#include "kernels/common/error.h"
#include "engine/sampling/sampler_host.h"
#include "engine/sampling/stage_desc.h"

/* A plugin dlopened in this process. */
typedef struct sd_plugin {
    char *file;
    void *dl;
    stage_def d;
} sd_plugin;

/* One file of the search path, probed once per set. */
typedef struct probed {
    char *path;
    dev_t dev;
    ino_t ino;
    int ok;
    char name[SD_SAMPLER_MAX_NAME + 1];
    char *text; /* ok: the listing entry; otherwise the reason */
} probed;

struct sd_sampler_set {
    sd_plugin *plugins; /* dlopened in this process */
    int n, cap;
    char **warnings;
    int n_warn, cap_warn;
    char **dirs; /* the search path, for loading by name later */
    int n_dirs, cap_dirs;
    probed *probed; /* every file probed, in probe order */
    int n_probed, cap_probed;
};

/* The loaded plugin of the stage called name, or NULL with "unknown
 * sampler 'x' (available: ...)" naming the good plugins probed so far. */
const sd_plugin *sd_set_plugin(const sd_sampler_set *s, const char *name, sd_err *e);

#endif
