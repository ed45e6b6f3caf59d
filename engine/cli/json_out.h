/* Writes one JSON object on one line (JSON Lines), escaping strings so that
 * any bytes the model produced stay valid JSON (invalid UTF-8 becomes U+FFFD). */
#ifndef SD_JSON_OUT_H
#define SD_JSON_OUT_H

#include <stdint.h>
#include <stdio.h>

typedef struct sd_json_obj {
    FILE *out;
    int n;
} sd_json_obj;

void sd_json_begin(sd_json_obj *j, FILE *out);
void sd_json_str(sd_json_obj *j, const char *key, const char *v);
void sd_json_int(sd_json_obj *j, const char *key, long v);
void sd_json_u64(sd_json_obj *j, const char *key, uint64_t v);
void sd_json_num(sd_json_obj *j, const char *key, double v);
void sd_json_ids(sd_json_obj *j, const char *key, const int32_t *ids, int n);
void sd_json_nums(sd_json_obj *j, const char *key, const double *v, int n);
void sd_json_end(sd_json_obj *j);

#endif
