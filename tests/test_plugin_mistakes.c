/* Plugin-author mistakes the host catches. Each is a small plugin in
 * tests/plugins/, built here into its own folder under tests/tmp/mistakes/
 * (with -DCORRECT for the fixed version where it has one): the mistake is
 * rejected at load with a reason naming it, or named at run time; the
 * fixed plugin loads. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/sampling/sampler_host.h"

#define ROOT "tests/tmp/mistakes"

/* Builds tests/plugins/<name>.c with defs alone into ROOT/<dir>/<name>.so
 * and opens that folder. */
static sd_sampler_set *build_and_open(const char *dir, const char *name, const char *defs) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "rm -rf '" ROOT "/%s' && mkdir -p '" ROOT "/%s' && cc -std=c11 -O1 -fPIC -shared "
             "-I. %s tests/plugins/%s.c -lm -o '" ROOT "/%s/%s.so'",
             dir, dir, defs, name, dir, name);
    int rc = system(cmd);
    cr_assert_eq(rc, 0, "command failed (%d): %s", rc, cmd);
    char path[256];
    snprintf(path, sizeof path, ROOT "/%s", dir);
    const char *dirs[] = {path};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open(dirs, 1, &e);
    cr_assert(s, "%s", e.msg);
    return s;
}

static void expect_rejected(const char *name, const char *reason) {
    sd_sampler_set *s = build_and_open(name, name, "");
    cr_assert_eq(sd_samplers_count(s), 0, "%s loaded", name);
    cr_assert_eq(sd_samplers_n_warnings(s), 1);
    const char *w = sd_samplers_warning(s, 0);
    cr_assert(strstr(w, reason), "warning '%s' lacks '%s'", w, reason);
    sd_samplers_close(s);
}

static void expect_fixed_loads(const char *name) {
    char dir[64];
    snprintf(dir, sizeof dir, "%s_fixed", name);
    sd_sampler_set *s = build_and_open(dir, name, "-DCORRECT");
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    cr_assert_eq(sd_samplers_count(s), 1);
    sd_samplers_close(s);
}

/* The rollback that does nothing passes a three-token, rollback(1) test;
 * the history probe's repeats and longer rollbacks catch it. */
Test(mistakes, rollback_that_does_nothing) {
    expect_rejected("lazy_rollback", "rollback does not restore the history: at ");
    expect_fixed_loads("lazy_rollback");
}

/* The coin in sample() passes every per-draw check (each token drawn has
 * probability > 0); the chi-square test of the draws catches it. */
Test(mistakes, random_filter_in_sample) {
    expect_rejected("coin_xtc", "sample does not draw from process's distribution");
    expect_fixed_loads("coin_xtc");
}

/* A stage that refuses the drafter role loads and runs as the target's;
 * the query names it for the strategies that draft. */
Test(mistakes, stage_refusing_the_drafter) {
    const char *dirs[] = {ROOT "/no_drafter", "plugins"};
    sd_sampler_set *tmp = build_and_open("no_drafter", "no_drafter", "");
    sd_samplers_close(tmp);
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open(dirs, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = 8,
                           .max_history = 32,
                           .role = SD_ROLE_TARGET};
    sd_sampler *p = sd_sampler_create_for(s, "no_drafter,multinomial", NULL, 0, &info, &e);
    cr_assert(p, "%s", e.msg);
    sd_sampler_destroy(p);
    cr_assert_eq(sd_sampler_allows_drafter(s, "no_drafter,multinomial", NULL, 0, &info, &e), 0,
                 "%s", e.msg);
    cr_assert_str_eq(e.msg, "sampler chain 'no_drafter,multinomial': stage 'no_drafter' refuses "
                            "the drafter role: serves the target only (plugin " ROOT
                            "/no_drafter/no_drafter.so); strategies that draft with the chain "
                            "(spec, draft) cannot use it");
    cr_assert_eq(sd_sampler_allows_drafter(s, "multinomial", NULL, 0, &info, &e), 1, "%s", e.msg);
    cr_assert_eq(sd_sampler_allows_drafter(s, "nope", NULL, 0, &info, &e), -1);
    sd_samplers_close(s);
}

#define LONG_ROW 1000

/* Runs the chain "run_fault,multinomial" built with defs on one row of
 * LONG_ROW logits in a child (time limit 300 ms) and returns its exit
 * status, with what it wrote through the guard in said. */
static int run_faulty(const char *dir, const char *defs, char *said, size_t cap) {
    sd_sampler_set *tmp = build_and_open(dir, "run_fault", defs);
    cr_assert_eq(sd_samplers_n_warnings(tmp), 0, "%s", sd_samplers_warning(tmp, 0));
    sd_samplers_close(tmp);
    char path[256];
    snprintf(path, sizeof path, ROOT "/%s", dir);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        const char *dirs[] = {path, "plugins"};
        sd_err e = {""};
        sd_sampler_set *s = sd_samplers_open(dirs, 2, &e);
        if (!s || sd_sampler_guard(fds[1], 300, &e))
            _exit(2);
        sd_sampler *p = sd_sampler_create(s, "run_fault,multinomial", NULL, 0, LONG_ROW, &e);
        static float logits[LONG_ROW], probs[LONG_ROW];
        if (!p)
            _exit(3);
        int rc = sd_sampler_probs(p, logits, probs, 1, LONG_ROW, &e);
        if (write(fds[1], e.msg, strlen(e.msg)) < 0)
            _exit(4);
        _exit(rc ? 5 : 0);
    }
    close(fds[1]);
    size_t n = 0;
    struct pollfd pf = {fds[0], POLLIN, 0};
    while (n + 1 < cap && poll(&pf, 1, 10000) > 0) {
        ssize_t k = read(fds[0], said + n, cap - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    said[n] = '\0';
    close(fds[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "%s: killed by signal %d; said '%s'", dir,
              WIFSIGNALED(st) ? WTERMSIG(st) : 0, said);
    return WEXITSTATUS(st);
}

Test(mistakes, crash_in_process_is_named, .timeout = 30) {
    char said[1024];
    cr_assert_eq(run_faulty("segv", "-DSEGV", said, sizeof said), SD_SAMPLER_FAULT_EXIT, "%s",
                 said);
    cr_assert_str_eq(said, "specdec: sampler stage 'run_fault' crashed (SIGSEGV) in process() "
                           "(plugin " ROOT "/segv/run_fault.so)\n");
}

Test(mistakes, hang_in_process_is_ended_and_named, .timeout = 30) {
    char said[1024];
    cr_assert_eq(run_faulty("hang", "-DHANG", said, sizeof said), SD_SAMPLER_FAULT_EXIT, "%s",
                 said);
    cr_assert_str_eq(said, "specdec: sampler stage 'run_fault' did not return from process() "
                           "within 300 ms (plugin " ROOT "/hang/run_fault.so)\n");
}

/* A few floats past the row: an error of the call, the run goes on to
 * report it. */
Test(mistakes, short_overrun_is_an_error, .timeout = 30) {
    char said[1024];
    cr_assert_eq(run_faulty("overrun_short", "-DOVERRUN=3", said, sizeof said), 5, "%s", said);
    cr_assert_str_eq(said, "run_fault: process wrote past the end of its row of 1000 values "
                           "(value 0 after the end changed) (plugin " ROOT
                           "/overrun_short/run_fault.so)");
}

/* 16 KiB past the row: into the guard page, a named crash instead of heap
 * corruption found later. */
Test(mistakes, long_overrun_is_a_named_crash, .timeout = 30) {
    char said[1024];
    cr_assert_eq(run_faulty("overrun_long", "-DOVERRUN=4096", said, sizeof said),
                 SD_SAMPLER_FAULT_EXIT, "%s", said);
    cr_assert_str_eq(said, "specdec: sampler stage 'run_fault' crashed (SIGSEGV) in process() "
                           "(plugin " ROOT "/overrun_long/run_fault.so)\n");
}

Test(mistakes, guard_settings_are_checked) {
    sd_err e = {""};
    cr_assert_eq(sd_sampler_guard(2, -1, &e), -1);
    cr_assert_str_eq(e.msg, "sampler call time limit -1 ms is outside [0, 3600000] (0: none)");
    cr_assert_eq(sd_sampler_guard(-2, 100, &e), -1);
    cr_assert_eq(sd_sampler_guard(2, SD_SAMPLER_TIMEOUT_MS, &e), 0);
}

/* A version-1 sampler that keeps state loads, with a warning naming it. */
Test(mistakes, stateful_version_1_is_warned) {
    sd_sampler_set *s = build_and_open("stateful_v1", "stateful_v1", "");
    cr_assert_eq(sd_samplers_count(s), 1);
    cr_assert_eq(sd_samplers_n_warnings(s), 1);
    cr_assert_str_eq(sd_samplers_warning(s, 0),
                     ROOT "/stateful_v1/stateful_v1.so: version-1 sampler 'stateful_v1' looks "
                          "stateful (process gave two different rows for the same input); "
                          "version 1 has no history, so under speculative decoding and NASD its "
                          "state is never rolled back: write it against version 2");
    sd_samplers_close(s);
}

/* Probing the whole search path names every file a name in an earlier
 * folder hides. */
Test(mistakes, shadowed_plugin_is_warned) {
    sd_samplers_close(build_and_open("shadow_a", "lazy_rollback", "-DCORRECT"));
    sd_samplers_close(build_and_open("shadow_b", "lazy_rollback", "-DCORRECT"));
    const char *dirs[] = {ROOT "/shadow_a", ROOT "/shadow_b"};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open_lazy(dirs, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(sd_samplers_probe_all(s, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_samplers_n_warnings(s), 1);
    cr_assert_str_eq(sd_samplers_warning(s, 0),
                     ROOT "/shadow_b/lazy_rollback.so: sampler 'lazy_rollback' is shadowed by "
                          ROOT "/shadow_a/lazy_rollback.so (earlier in the search path); not "
                          "used");
    sd_samplers_close(s);
}

/* ABI v2.1 is compatible: a v2 descriptor that stops before str_defaults
 * loads; a string parameter needs the longer layout. */
Test(mistakes, v2_1_layout) {
    sd_sampler_set *s = build_and_open("v2_old", "v2_layout", "-DOLD_SIZE");
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    cr_assert_eq(sd_samplers_count(s), 1);
    sd_samplers_close(s);
    s = build_and_open("v2_old_string", "v2_layout", "-DOLD_SIZE -DSTRING_PARAM");
    cr_assert_eq(sd_samplers_count(s), 0);
    cr_assert(strstr(sd_samplers_warning(s, 0),
                     "bad parameter table: string parameter 'words' needs ABI v2.1"),
              "%s", sd_samplers_warning(s, 0));
    sd_samplers_close(s);
    s = build_and_open("v2_1_string", "v2_layout", "-DSTRING_PARAM");
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    sd_samplers_close(s);
}

static const char *bytes_of(const void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    (void)id;
    *len = 5;
    return " with";
}

static const char *text_of(const void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    (void)id;
    *len = 6;
    return "\xc4\xa0with";
}

/* piece gives a v2.1 stage the token's bytes and vocab_text the stored
 * string; a stage built against the v2 header is told the v2 info size
 * and gets the stored string in piece, as v2 defined it. */
static sd_sampler_set *build_with_builtins(const char *dir, const char *defs) {
    sd_samplers_close(build_and_open(dir, "v2_layout", defs));
    char path[256];
    snprintf(path, sizeof path, ROOT "/%s", dir);
    const char *dirs[] = {path, "plugins"};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open(dirs, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    return s;
}

Test(mistakes, piece_by_layout) {
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = 8,
                           .max_history = 32,
                           .role = SD_ROLE_TARGET,
                           .piece = bytes_of,
                           .vocab_text = text_of};
    char want[128];
    sd_err e = {""};
    sd_sampler_set *s = build_with_builtins("info_new", "-DREPORT_INFO");
    cr_assert_null(sd_sampler_create_for(s, "v2_layout,greedy", NULL, 0, &info, &e));
    snprintf(want, sizeof want, "struct_size %zu piece ' with' vocab_text '\xc4\xa0with'",
             sizeof info);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    sd_samplers_close(s);
    s = build_with_builtins("info_old", "-DREPORT_INFO -DOLD_SIZE");
    cr_assert_null(sd_sampler_create_for(s, "v2_layout,greedy", NULL, 0, &info, &e));
    snprintf(want, sizeof want, "struct_size %zu piece '\xc4\xa0with' vocab_text '-'",
             (size_t)SD_ENGINE_INFO_V2_SIZE);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    sd_samplers_close(s);
}

/* The checks on demand (the CLI's --check-sampler NAME): a broken
 * <name>.so gives its reason, a good one its file. */
Test(mistakes, verify_by_name) {
    sd_samplers_close(build_and_open("verify", "coin_xtc", ""));
    const char *dirs[] = {ROOT "/verify", "plugins"};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open_lazy(dirs, 2, &e);
    cr_assert(s, "%s", e.msg);
    const char *file;
    cr_assert_eq(sd_samplers_verify(s, "coin_xtc", &file, &e), -1);
    cr_assert_str_eq(file, ROOT "/verify/coin_xtc.so");
    cr_assert(strstr(e.msg, ROOT "/verify/coin_xtc.so: sample does not draw from process's "
                            "distribution"),
              "%s", e.msg);
    cr_assert_eq(sd_samplers_verify(s, "dry", &file, &e), 0, "%s", e.msg);
    cr_assert_str_eq(file, "plugins/dry.so");
    cr_assert_eq(sd_samplers_verify(s, "nope", &file, &e), -1);
    cr_assert(strstr(e.msg, "unknown sampler 'nope'"), "%s", e.msg);
    sd_samplers_close(s);
}
