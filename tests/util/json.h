/* A small JSON reader for test data (JSON Lines golden files).
 * json_parse builds a tree; accessors never fail on a wrong kind: they
 * return NULL / 0 so a test can assert on the result. */
#ifndef SD_TEST_JSON_H
#define SD_TEST_JSON_H

#include <stddef.h>

typedef struct json json;

enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

/* NULL on malformed input (including trailing garbage after the value). */
json *json_parse(const char *text, size_t len);
void json_free(json *j);

int json_kind(const json *j);
/* Member of an object, NULL if absent or obj is not an object. */
const json *json_get(const json *obj, const char *key);
/* Elements of an array (members of an object), 0 otherwise. */
size_t json_len(const json *arr);
const json *json_at(const json *arr, size_t i);
/* Number value; a bool reads as 0/1; anything else 0. */
double json_num(const json *j);
/* Decoded UTF-8 (\uXXXX incl. surrogate pairs), NUL-terminated; NULL if not
 * a string. len (optional) receives the byte length, which may count NULs. */
const char *json_str(const json *j, size_t *len);

/* Reads a .jsonl file: one parsed record per non-empty line; returns the
 * count or -1 (unreadable file or a malformed line). */
long jsonl_read(const char *path, json ***records);
void jsonl_free(json **records, long n);

#endif
