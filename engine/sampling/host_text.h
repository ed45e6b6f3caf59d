/* Small helpers the sampler host's files share: growing arrays, formatted
 * heap strings, appending to fixed buffers, joining paths. */
#ifndef SD_HOST_TEXT_H
#define SD_HOST_TEXT_H

#include <stdarg.h>
#include <stddef.h>

/* Grows *arr (of elements of size elem) to hold at least need elements.
 * 0, or -1 on out of memory (*arr unchanged). */
int sd_host_grow(void **arr, int *cap, int need, size_t elem);
/* A malloc'd formatted string, or NULL on out of memory. */
char *sd_vformat(const char *fmt, va_list ap);
char *sd_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Appends to buf[cap] at *used, truncating when full. */
void sd_appendf(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "dir/name" (no doubled '/'), malloc'd; NULL on out of memory. */
char *sd_join_path(const char *dir, const char *name);

#endif
