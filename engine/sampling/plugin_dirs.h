/* The plugin search list (the public calls are in sampler_host.h). */
#ifndef SD_PLUGIN_DIRS_H
#define SD_PLUGIN_DIRS_H

#include <stddef.h>

/* Appends a copy of dir[0, len) to *dirs unless already present. 0, or -1
 * on out of memory. */
int sd_dirs_add(char ***dirs, int *n, int *cap, const char *dir, size_t len);

#endif
