/* Chain specifications ("penalty,top_k,nucleus") and their "key=value"
 * arguments, checked against the loaded plugins. */
#ifndef SD_CHAIN_PARSE_H
#define SD_CHAIN_PARSE_H

#include "engine/sampling/plugin_set.h"

/* Longest chain --sampler takes. */
#define SD_MAX_STAGES 8

/* pl[0..*n) = the loaded plugins of spec's stages, the last a sampling
 * stage. 0, or -1 with e naming the stage at fault. */
int sd_chain_resolve(const sd_sampler_set *s, const char *spec, const sd_plugin **pl, int *n,
                     sd_err *e);
/* values[i] = the defaults of stage i overridden by the n_kv strings. On
 * failure *bad is the index of the string at fault. */
int sd_chain_parse_args(const sd_plugin *const *pl, int n, const char *const *kv, int n_kv,
                        sd_sampler_value (*values)[SD_SAMPLER_MAX_PARAMS], int *bad, sd_err *e);

#endif
