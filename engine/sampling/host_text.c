#include "engine/sampling/host_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sd_host_grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

char *sd_vformat(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *sd_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = sd_vformat(fmt, ap);
    va_end(ap);
    return s;
}

void sd_appendf(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
    if (*used >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used = (size_t)w < cap - *used ? *used + (size_t)w : cap - 1;
}

char *sd_join_path(const char *dir, const char *name) {
    size_t n = strlen(dir);
    return sd_format("%s%s%s", dir, (n && dir[n - 1] == '/') ? "" : "/", name);
}
