/* Growable arrays for the tokenizer sources: doubling capacity, contents
 * kept on growth. */
#include "engine/text/buf.h"

#include <stdlib.h>

int sd_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

int sd_ids_push(sd_ids *ids, int32_t id) {
    if (ids->n == ids->cap && sd_grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v))
        return -1;
    ids->v[ids->n++] = id;
    return 0;
}

