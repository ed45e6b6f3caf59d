#include "error.h"

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
        snprintf(tmp, sizeof tmp, "%s: %s", prefix, e->msg);
        memcpy(e->msg, tmp, sizeof tmp);
    }
    return -1;
}
