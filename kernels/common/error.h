/* Errors travel as return codes plus a message buffer the caller owns.
 * Library code never prints and never exits: it fills sd_err and returns -1
 * (or NULL); the binary decides what to show. */
#ifndef SD_ERROR_H
#define SD_ERROR_H

#include <stddef.h>

#define SD_ERRLEN 512

typedef struct sd_err {
    char msg[SD_ERRLEN];
} sd_err;

/* Formats into e->msg (when e is not NULL) and returns -1, so a failure
 * path reads `return sd_fail(e, "...", ...);`. */
int sd_fail(sd_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the existing message with "<prefix>: " (used to add file names). */
int sd_wrap(sd_err *e, const char *prefix);

#endif
