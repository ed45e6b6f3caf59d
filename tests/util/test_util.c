#define PCRE2_CODE_UNIT_WIDTH 8
#include "tests/util/test_util.h"

#include "kernels/cpu/cpu.h"

#include <math.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int tu_matches(const char *pattern, const char *s) {
    int errc;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_CASELESS,
                                   &errc, &erroff, NULL);
    if (!re) return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)s, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

char *tu_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)n + 1)))
        b[fread(b, 1, (size_t)n, f)] = 0;
    fclose(f);
    return b;
}

tu_run tu_specdec(const char *args, const char *input) { return tu_specdec_ex(args, input, 0, 0); }

tu_run tu_specdec_ex(const char *args, const char *input, int timeout_s, int merge) {
    tu_run r = {NULL, NULL, -1};
    char cmd[8192], in[64], out[64], err[64];
    int pid = (int)getpid();
    snprintf(in, sizeof in, "tests/tmp/run_in.%d", pid);
    snprintf(out, sizeof out, "tests/tmp/run_out.%d", pid);
    snprintf(err, sizeof err, "tests/tmp/run_err.%d", pid);
    if (system("mkdir -p tests/tmp") != 0) return r;
    if (input) {
        FILE *f = fopen(in, "w");
        if (!f) return r;
        fputs(input, f);
        fclose(f);
    }
    const char *bin = getenv("SPECDEC_BIN") ? getenv("SPECDEC_BIN") : "./specdec";
    char limit[48] = "";
    if (timeout_s > 0) snprintf(limit, sizeof limit, "timeout -k 5 %d ", timeout_s);
    /* merged: one pipe into cat, so stdout is a pipe, not a file, as in `specdec 2>&1 | less` */
    if (merge)
        snprintf(cmd, sizeof cmd, "{ %s%s %s <%s 2>&1; echo $? >%s; } | cat >%s", limit, bin,
                 args, input ? in : "/dev/null", err, out);
    else
        snprintf(cmd, sizeof cmd, "%s%s %s <%s >%s 2>%s", limit, bin, args,
                 input ? in : "/dev/null", out, err);
    int st = system(cmd);
    r.out = tu_slurp(out);
    r.err = tu_slurp(err);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (merge && r.err) { /* the err file held the exit status */
        r.rc = r.rc == 0 ? atoi(r.err) : -1;
        r.err[0] = 0;
    }
    remove(out);
    remove(err);
    if (input) remove(in);
    return r;
}

void tu_run_free(tu_run *r) {
    free(r->out);
    free(r->err);
}

double tu_rel_err(const float *got, const float *ref, size_t n) {
    double mx = 0, ref_max = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        double d = fabs((double)got[i] - ref[i]);
        if (d > mx) mx = d;
        if (fabs(ref[i]) > ref_max) ref_max = fabs(ref[i]);
    }
    return mx / (ref_max > 0 ? ref_max : 1.0);
}

void tu_cpu_as_cuda_reference(void) {
    if (sd_cpu_isa_detect() >= SD_ISA_AVX512_VNNI) setenv("SD_ISA", sd_isa_name(SD_ISA_AVX512), 1);
}
