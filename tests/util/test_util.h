/* Helpers shared by the test suites. They report failure by return value
 * (no Criterion calls), so the fuzz harnesses can link this folder too. */
#ifndef SD_TEST_UTIL_H
#define SD_TEST_UTIL_H

#include <stddef.h>

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
/* The same, killed after timeout_s seconds when > 0 (rc 124: a hang fails
 * the test instead of stalling the suite), and with stderr sent into the
 * same pipe as stdout when merge is set (out holds both, err is ""), so a
 * test sees the two streams interleaved as a terminal or `2>&1` would. */
tu_run tu_specdec_ex(const char *args, const char *input, int timeout_s, int merge);
void tu_run_free(tu_run *r);

/* max |got - ref| / max |ref| over n values (1 in place of a zero max |ref|);
 * infinity when got holds a NaN or an infinity. */
double tu_rel_err(const float *got, const float *ref, size_t n);
/* For a CPU backend that is the reference of the CUDA one: the CUDA kernels
 * quantize activations in blocks of 32, as every CPU level below VNNI does,
 * while the VNNI and AMX levels' K-quant products read one scale per 256
 * (kernels/cpu/cpu.h, k8). On such a machine this caps the process's level
 * (SD_ISA) at avx512, so both backends see the same activations; call it
 * before creating the CPU backend. */
void tu_cpu_as_cuda_reference(void);

#endif
