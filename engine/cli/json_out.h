/* Writes JSON objects, escaping strings so that any bytes the model
 * produced stay valid JSON (invalid UTF-8 becomes U+FFFD). An object is
 * written on one line; sd_json_obj_in nests one as a member, and
 * sd_json_settings echoes the settings table (engine/cli/settings.h). */
#ifndef SD_JSON_OUT_H
#define SD_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "engine/cli/args.h"

typedef struct sd_json_obj {
    FILE *out;
    int n;
} sd_json_obj;

/* An object: begin, members, end (end writes the closing brace only:
 * the caller ends the line, or the document, as its layout needs). */
void sd_json_begin(sd_json_obj *j, FILE *out);
/* A member holding an object: inner writes its members, then sd_json_end. */
void sd_json_obj_in(sd_json_obj *j, const char *key, sd_json_obj *inner);
/* A member named key whose value the caller writes next (an array). */
void sd_json_key(sd_json_obj *j, const char *key);
void sd_json_bool(sd_json_obj *j, const char *key, int v);
void sd_json_null(sd_json_obj *j, const char *key);
void sd_json_str(sd_json_obj *j, const char *key, const char *v);
void sd_json_int(sd_json_obj *j, const char *key, long v);
void sd_json_u64(sd_json_obj *j, const char *key, uint64_t v);
void sd_json_num(sd_json_obj *j, const char *key, double v);
void sd_json_ids(sd_json_obj *j, const char *key, const int32_t *ids, int n);
void sd_json_nums(sd_json_obj *j, const char *key, const double *v, int n);
void sd_json_end(sd_json_obj *j);
/* Every setting the table marks for the echo, under its interactive name. */
void sd_json_settings(sd_json_obj *j, const sd_args *a);

#endif
