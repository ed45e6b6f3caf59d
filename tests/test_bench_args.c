/* The kernel benchmark's arguments: a row name it does not know is an
 * error that names it, before any timing starts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#ifndef BENCH_CPU_KERNELS_BIN
#define BENCH_CPU_KERNELS_BIN "build/bench/bench_cpu_kernels"
#endif

Test(bench_args, unknown_row_is_named) {
    char out[4096] = {0};
    FILE *p = popen(BENCH_CPU_KERNELS_BIN " Q4Kx Q4x 2>&1", "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d, output: %s", st, out);
    cr_assert_not_null(strstr(out, "unknown row 'Q4x'"), "output: %s", out);
    cr_assert_null(strstr(out, "int8_peak"), "timed before rejecting: %s", out);
}
