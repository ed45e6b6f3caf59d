/* Row buffers with guard space: a stage writing past the end of its row
 * is caught. After the row's n values come SD_ROW_CANARY canary values,
 * written before each call and compared after it (a short overrun); the
 * mapping ends with an inaccessible page, so a long one faults inside the
 * plugin call, where call_guard.h names it. */
#ifndef SD_ROW_GUARD_H
#define SD_ROW_GUARD_H

#include <stddef.h>

/* Canary values after the row: 1 KiB. */
#define SD_ROW_CANARY 256

typedef struct sd_guarded_row {
    float *p;      /* max values, then the canary, then the guard page */
    size_t map_len;
} sd_guarded_row;

/* 0, or -1 when out of memory. */
int sd_row_alloc(sd_guarded_row *r, int max);
void sd_row_free(sd_guarded_row *r);
/* Writes the canary after row[0..n). */
void sd_row_arm(float *row, int n);
/* -1 when the canary after row[0..n) is intact, else the index (from n)
 * of its first changed value. */
int sd_row_overrun(const float *row, int n);

#endif
