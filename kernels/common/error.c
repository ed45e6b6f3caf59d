#include "kernels/common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sd_fail(sd_err *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int sd_wrap(sd_err *e, const char *prefix) {
    if (e) {
        char tmp[SD_ERRLEN];
        size_t n = strlen(prefix);
        if (n > SD_ERRLEN / 2) n = SD_ERRLEN / 2;
        memcpy(tmp, prefix, n);
        memcpy(tmp + n, ": ", 2);
        size_t m = strlen(e->msg);
        if (m > SD_ERRLEN - n - 3) m = SD_ERRLEN - n - 3;
        memcpy(tmp + n + 2, e->msg, m);
        tmp[n + 2 + m] = 0;
        memcpy(e->msg, tmp, n + 3 + m);
    }
    return -1;
}
