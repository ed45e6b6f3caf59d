/* Growable arrays used across engine/text. */
#ifndef SD_TEXT_BUF_H
#define SD_TEXT_BUF_H

#include <stddef.h>
#include <stdint.h>

/* Growable int32 output. */
typedef struct sd_ids {
    int32_t *v;
    size_t n, cap;
} sd_ids;

int sd_ids_push(sd_ids *ids, int32_t id);

/* Ensures *p holds at least need elements of size elem (keeps contents). */
int sd_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
