/* Helpers shared by the test suites. They report failure by return value
 * (no Criterion calls), so the fuzz harnesses can link this folder too. */
#ifndef SD_TEST_UTIL_H
#define SD_TEST_UTIL_H

/* Case-insensitive PCRE2 search: a reason is checked by its words, not by
 * its exact phrasing. 1 match, 0 no match, -1 bad pattern. */
int tu_matches(const char *pattern, const char *s);

/* Whole file as a NUL-terminated malloc'd string, or NULL. */
char *tu_slurp(const char *path);

typedef struct tu_run {
    char *out, *err; /* malloc'd; NULL when the run could not be made */
    int rc;          /* exit status, -1 when it did not exit normally */
} tu_run;

/* Runs "$SPECDEC_BIN ARGS" (default ./specdec) from the repository root with
 * stdin from `input` (NULL: /dev/null). Files are per process (tests may run
 * in parallel) and removed afterwards. */
tu_run tu_specdec(const char *args, const char *input);
void tu_run_free(tu_run *r);

#endif
