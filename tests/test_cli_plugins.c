/* The specdec binary and sampler plugins: broken plugins listed and
 * skipped, only the selected plugin loaded, --check-sampler, the
 * --list-samplers warnings, --plugin-dir checks, and a plugin crash or hang
 * at run time ending the run with exit status 70 (--sampler-timeout). The
 * plugins are built here from tests/plugins/ or from a line of C. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/util/test_util.h"

#define M "tests/data/models/"

typedef tu_run run_out;

static void done(run_out *r) { tu_run_free(r); }

#define PTMP "tests/tmp/cli_plugins"

/* Compiles a sampler from the built-in top_k with a defect switched in by
 * defs, named name, into PTMP/<file>. */
static void build_bad(const char *file, const char *name, const char *defs) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "printf '%%s\\n' '#include <signal.h>' '#include <stdlib.h>' '#include <stdio.h>' "
             "'#include \"samplers/sampler.h\"' "
             "'static void *cr(const sd_sampler_value *v, int m, char *e, size_t n) {' "
             "'(void)v; (void)m; (void)e; (void)n; volatile int *volatile z = NULL;' "
             "'if (BAD == 1) *z = 1; if (BAD == 2) { volatile int s = 1; while (s) {} }' "
             "'if (BAD == 3) abort(); return NULL; }' "
             "'static void de(void *h) { (void)h; }' "
             "'static int pr(void *h, const float *l, float *p, int r, int n) "
             "{ (void)h; (void)l; (void)p; (void)r; (void)n; return -1; }' "
             "'static int32_t sa(void *h, const float *p, int n, sd_sampler_rng *g) "
             "{ (void)h; (void)p; (void)n; (void)g; return -1; }' "
             "'static const sd_sampler_desc d = {SD_SAMPLER_ABI_VERSION, sizeof d, NAME, \"\", 0, "
             "0, NULL, cr, de, pr, sa};' "
             "'#ifdef MARKER' '__attribute__((constructor)) static void boom(void) "
             "{ FILE *f = fopen(MARKER, \"w\"); if (f) fclose(f); raise(SIGSEGV); }' '#endif' "
             "'const sd_sampler_desc *sd_logits_processor_v1(void) { return &d; }' > %s/%s.c && "
             "cc -std=c11 -fPIC -shared -I. -DNAME='\"%s\"' %s %s/%s.c -o %s/%s",
             PTMP, file, name, defs, PTMP, file, PTMP, file);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* Broken plugins are listed as broken with the reason (and warned about on
 * stderr), within the probe's time limit, and the good ones are listed. */
Test(cli, list_samplers_survives_crashing_plugins, .timeout = 60) {
    cr_assert_eq(system("rm -rf " PTMP " && mkdir -p " PTMP), 0);
    build_bad("segv.so", "segv", "-DBAD=1");
    build_bad("hang.so", "hang", "-DBAD=2");
    build_bad("abort.so", "abrt", "-DBAD=3");
    run_out r = tu_specdec_ex("--plugin-dir " PTMP " --list-samplers", NULL, 20, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "top_k  ("), "%s", r.out);
    cr_assert(strstr(r.out, "broken  (" PTMP "/segv.so): killed by SIGSEGV during the self-test"),
              "%s", r.out);
    cr_assert(strstr(r.out, "broken  (" PTMP "/hang.so): no answer in 2 s during the self-test"),
              "%s", r.out);
    cr_assert(strstr(r.out, "broken  (" PTMP "/abort.so): killed by SIGABRT during the self-test"),
              "%s", r.out);
    cr_assert(strstr(r.err, "specdec: warning: " PTMP "/segv.so: killed by SIGSEGV during the "
                            "self-test"),
              "%s", r.err);
    done(&r);
}

/* A generation run opens the selected sampler's plugin only: a plugin
 * whose constructor crashes (after leaving a marker) on the search path
 * after it is never opened; without --sampler nothing is opened; one
 * earlier on the path is probed in a child and the run goes on. */
Test(cli, generation_loads_only_the_selected_plugin, .timeout = 60) {
    cr_assert_eq(system("rm -rf " PTMP "_ctor && mkdir -p " PTMP "_ctor"), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "printf '%%s\\n' '#include <signal.h>' '#include <stdio.h>' "
             "'__attribute__((constructor)) static void boom(void) "
             "{ FILE *f = fopen(\"" PTMP "_ctor/marker\", \"w\"); if (f) fclose(f); raise(SIGSEGV); }' "
             "> " PTMP "_ctor/crash.c && cc -fPIC -shared " PTMP "_ctor/crash.c -o " PTMP
             "_ctor/crash.so");
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *marker = PTMP "_ctor/marker";
    run_out r = tu_specdec_ex("-m " M "stories260K.gguf -p hi -n 4 --seed 1 --sampler top_k "
                              "--plugin-dir plugins --plugin-dir " PTMP "_ctor",
                              NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(access(marker, F_OK) != 0, "the crashing plugin was opened");
    done(&r);
    r = tu_specdec_ex("-m " M "stories260K.gguf -p hi -n 4 --plugin-dir " PTMP "_ctor", NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(access(marker, F_OK) != 0, "a plugin was opened without --sampler");
    done(&r);
    r = tu_specdec_ex("-m " M "stories260K.gguf -p hi -n 4 --seed 1 --sampler top_k "
                      "--plugin-dir " PTMP "_ctor",
                      NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, PTMP "_ctor/crash.so: killed by SIGSEGV while loading"), "%s", r.err);
    done(&r);
}

/* Builds tests/plugins/<name>.c with defs into PTMP_<dir>/<name>.so. */
static void build_test_plugin(const char *dir, const char *name, const char *defs) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "rm -rf " PTMP "_%s && mkdir -p " PTMP "_%s && cc -std=c11 -O1 -fPIC -shared -I. "
             "%s tests/plugins/%s.c -lm -o " PTMP "_%s/%s.so",
             dir, dir, defs, name, dir, name);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* --check-sampler: 0 and a verdict for a good plugin, 1 and the reason for
 * a rejected one or an unknown name; stdout stays empty. */
Test(cli_plugins, check_sampler_verdicts, .timeout = 60) {
    run_out r = tu_specdec_ex("--check-sampler top_k", NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "specdec: sampler 'top_k' passes the load-time checks (plugin "),
              "%s", r.err);
    cr_assert(strstr(r.err, "plugins/top_k.so)\n"), "%s", r.err);
    cr_assert_str_eq(r.out, "");
    done(&r);
    build_test_plugin("lazy", "lazy_rollback", "");
    r = tu_specdec_ex("--plugin-dir " PTMP "_lazy --check-sampler lazy_rollback", NULL, 30, 0);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "specdec: --check-sampler lazy_rollback: " PTMP
                            "_lazy/lazy_rollback.so: rollback does not restore the history"),
              "%s", r.err);
    done(&r);
    r = tu_specdec_ex("--check-sampler nope", NULL, 30, 0);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "specdec: --check-sampler nope: unknown sampler 'nope'"), "%s", r.err);
    done(&r);
}

/* --list-samplers: after the listing, the warnings on stderr (a name
 * shadowed, a version-1 plugin that looks stateful). */
Test(cli_plugins, list_samplers_warns, .timeout = 60) {
    build_test_plugin("stateful", "stateful_v1", "");
    build_test_plugin("shadow", "lazy_rollback", "-DCORRECT");
    run_out r = tu_specdec_ex("--plugin-dir " PTMP "_stateful --plugin-dir " PTMP "_shadow "
                              "--plugin-dir " PTMP "_shadow --list-samplers",
                              NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "stateful_v1"), "%s", r.out);
    cr_assert(strstr(r.err, "specdec: warning: " PTMP "_stateful/stateful_v1.so: version-1 "
                            "sampler 'stateful_v1' looks stateful"),
              "%s", r.err);
    done(&r);
    cr_assert_eq(system("mkdir -p " PTMP "_shadow2 && cp " PTMP "_shadow/lazy_rollback.so " PTMP
                        "_shadow2/"),
                 0);
    r = tu_specdec_ex("--plugin-dir " PTMP "_shadow --plugin-dir " PTMP "_shadow2 --list-samplers",
                      NULL, 30, 0);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "specdec: warning: " PTMP "_shadow2/lazy_rollback.so: sampler "
                            "'lazy_rollback' is shadowed by " PTMP "_shadow/lazy_rollback.so"),
              "%s", r.err);
    done(&r);
}

/* A --plugin-dir that is missing or not a folder is a usage error, with or
 * without --sampler. */
Test(cli_plugins, bad_plugin_dir_is_refused) {
    struct {
        const char *args, *msg;
    } cases[] = {
        {"--list-samplers --plugin-dir tests/none", "specdec: --plugin-dir tests/none: cannot open: "},
        {"-m " M "stories260K.gguf -p hi --plugin-dir Makefile",
         "specdec: --plugin-dir Makefile: not a directory"},
        {"--check-sampler top_k --plugin-dir tests/none", "--plugin-dir tests/none: cannot open"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_out r = tu_specdec(cases[i].args, NULL);
        cr_assert_eq(r.rc, 2, "%s: rc %d (%s)", cases[i].args, r.rc, r.err);
        cr_assert(strstr(r.err, cases[i].msg), "%s: %s", cases[i].args, r.err);
        done(&r);
    }
}

/* A plugin that crashes in process(), or hangs past --sampler-timeout,
 * ends the run with exit status 70 and a line naming the stage, the call
 * and the file. */
Test(cli_plugins, plugin_crash_and_hang_exit_70, .timeout = 60) {
    build_test_plugin("segv", "run_fault", "-DSEGV");
    run_out r = tu_specdec_ex("-m " M "stories260K.gguf -p hi -n 2 --plugin-dir " PTMP
                              "_segv --sampler run_fault,greedy",
                              NULL, 30, 0);
    cr_assert_eq(r.rc, 70, "rc %d: %s", r.rc, r.err);
    cr_assert(strstr(r.err, "specdec: sampler stage 'run_fault' crashed (SIGSEGV) in process() "
                            "(plugin " PTMP "_segv/run_fault.so)"),
              "%s", r.err);
    done(&r);
    build_test_plugin("hang", "run_fault", "-DHANG");
    r = tu_specdec_ex("-m " M "stories260K.gguf -p hi -n 2 --plugin-dir " PTMP
                      "_hang --sampler run_fault,greedy --sampler-timeout 300",
                      NULL, 30, 0);
    cr_assert_eq(r.rc, 70, "rc %d: %s", r.rc, r.err);
    cr_assert(strstr(r.err, "specdec: sampler stage 'run_fault' did not return from process() "
                            "within 300 ms (plugin " PTMP "_hang/run_fault.so)"),
              "%s", r.err);
    done(&r);
}

/* The time limit: checked as a flag, set and checked interactively. */
Test(cli_plugins, sampler_timeout_values) {
    run_out r = tu_specdec("-m " M "stories260K.gguf -p hi --sampler-timeout 3600001", NULL);
    cr_assert_eq(r.rc, 2);
    cr_assert(strstr(r.err, "specdec: --sampler-timeout: 3600001 is out of range [0, 3600000]"),
              "%s", r.err);
    done(&r);
    r = tu_specdec("-m " M "stories260K.gguf -i --sampler-timeout 0",
                   "/sampler_timeout 250\n/sampler_timeout -1\n/help\n");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "sampler_timeout: 250\n"), "%s", r.out);
    cr_assert(strstr(r.err, "error: /sampler_timeout: -1 is out of range [0, 3600000]"), "%s",
              r.err);
    cr_assert(strstr(r.out, "/sampler_timeout MS"), "%s", r.out);
    done(&r);
}

/* A missing folder of $SPECDEC_PLUGIN_PATH is one warning, not an error
 * (unlike a missing --plugin-dir). */
Test(cli_plugins, missing_env_folder_is_a_warning) {
    cr_assert_eq(setenv("SPECDEC_PLUGIN_PATH", "tests/none", 1), 0);
    run_out r = tu_specdec("-m " M "stories260K.gguf -p hi -n 2 --sampler top_k", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *w = "specdec: warning: tests/none: cannot open plugin directory";
    const char *at = strstr(r.err, w);
    cr_assert(at, "%s", r.err);
    cr_assert(!strstr(at + 1, w), "warned twice: %s", r.err);
    done(&r);
}
