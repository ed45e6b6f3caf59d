/* fuzz_cli's body (see tests/util/fuzz_bodies.h): the input, split on NUL
 * bytes, is argv after "specdec"; sd_args_parse must accept or refuse it
 * with a message, never read past an argument or the array. Each argument
 * is its own exactly-sized allocation so ASan sees any over-read. */
#include <stdlib.h>
#include <string.h>

#include "engine/cli/args.h"
#include "tests/util/fuzz_bodies.h"

#define MAX_ARGS 64

/* Out of memory while building argv is not the parser's bug. */
static char *arg_copy(const void *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void sd_fuzz_cli(const uint8_t *data, size_t size) {
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    argv[argc++] = arg_copy("specdec", 7);
    for (size_t at = 0; at < size && argc < MAX_ARGS;) {
        const uint8_t *nul = memchr(data + at, 0, size - at);
        size_t n = nul ? (size_t)(nul - (data + at)) : size - at;
        argv[argc++] = arg_copy(data + at, n);
        at += n + 1;
    }
    argv[argc] = NULL;
    sd_args a;
    sd_err e;
    sd_args_parse(&a, argc, argv, &e);
    for (int i = 0; i < argc; i++) free(argv[i]);
}
