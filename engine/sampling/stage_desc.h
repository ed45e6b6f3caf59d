/* One stage as the engine sees it, whatever the ABI version of its plugin,
 * and the checks of a descriptor before any of its functions runs. */
#ifndef SD_STAGE_DESC_H
#define SD_STAGE_DESC_H

#include <stddef.h>

#include "samplers/sampler.h"

/* The engine calls every stage through d, a version-2 descriptor: the
 * plugin's own (copied up to its struct_size, later fields zero), or for a
 * version-1 plugin the adapter's functions (stage_v1.h) with v1 pointing
 * at the plugin's descriptor. Create a handle with sd_stage_create. */
typedef struct stage_def {
    sd_stage_desc d;
    const sd_sampler_desc *v1; /* NULL for version 2 */
    int abi;                   /* the plugin's ABI version, 1 or 2 */
    int history;               /* reset/accept/rollback given */
} stage_def;

/* Fills def from a version-2 descriptor after checking everything the
 * engine reads from it. 0, or -1 with the reason in why. */
int sd_stage_from_v2(const sd_stage_desc *d, stage_def *def, char *why, size_t len);
/* The name and parameter table, the same in both versions. */
int sd_stage_check_common(const stage_def *def, char *why, size_t len);
/* v[i] = the default of parameter i. */
void sd_stage_defaults(const stage_def *def, sd_sampler_value *v);

/* x inside p's declared range. */
int sd_param_in_range(const sd_sampler_param *p, double x);
/* "(0, inf)", "[1, 2147483647]"; an infinite bound is always open (values
 * must be finite). */
void sd_param_range(const sd_sampler_param *p, char *buf, size_t cap);

#endif
