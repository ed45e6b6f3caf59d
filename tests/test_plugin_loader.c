/* Plugin discovery and loading. Every way a plugin can be broken is built
 * here, from one C template compiled with different -D flags into its own
 * directory under tests/tmp/loader/, and must come back as the warning
 * "<file>: <reason>" without stopping the other plugins. Also: duplicates,
 * search order, the min_p example from plugins/example (built by make), and
 * a plugin written against the version-1 layout under its first names. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/sampling/sampler_host.h"

#define ROOT "tests/tmp/loader"

/* A sampler with a switch for each defect. The default build is a working
 * sampler named by PLUGIN_NAME (default "good"). */
static const char template_src[] =
    "#include \"samplers/sampler.h\"\n"
    "#include \"samplers/sampler_util.h\"\n"
    "#define STR2(x) #x\n"
    "#define STR(x) STR2(x)\n"
    "#ifndef PLUGIN_NAME\n"
    "#define PLUGIN_NAME good\n"
    "#endif\n"
    "#if defined(NAME_NULL)\n"
    "#define NAME NULL\n"
    "#elif defined(NAME_EMPTY)\n"
    "#define NAME \"\"\n"
    "#elif defined(NAME_SPACE)\n"
    "#define NAME \"two words\"\n"
    "#else\n"
    "#define NAME STR(PLUGIN_NAME)\n"
    "#endif\n"
    "#ifndef ABI\n"
    "#define ABI SD_SAMPLER_ABI_VERSION\n"
    "#endif\n"
    "#ifndef SIZE\n"
    "#define SIZE sizeof(sd_sampler_desc)\n"
    "#endif\n"
    "#ifndef FLAGS\n"
    "#define FLAGS 0\n"
    "#endif\n"
    "#ifndef PTYPE\n"
    "#define PTYPE SD_SAMPLER_FLOAT\n"
    "#endif\n"
    "#ifndef PDEF\n"
    "#define PDEF 1.0\n"
    "#endif\n"
    "#ifndef PNAME2\n"
    "#define PNAME2 \"scale\"\n"
    "#endif\n"
    "#ifndef NPARAMS\n"
    "#define NPARAMS 2\n"
    "#endif\n"
    "static const sd_sampler_param params[2] = {\n"
    "    {\"temperature\", PTYPE, SD_SAMPLER_MIN_EXCLUSIVE, PDEF, 0.0, 10.0, \"t\"},\n"
    "    {PNAME2, SD_SAMPLER_FLOAT, 0, 0.5, 0.0, 1.0, \"unused\"},\n"
    "};\n"
    "typedef struct h { double t; } h;\n"
    "static void *create(const sd_sampler_value *v, int max_vocab, char *err, size_t errlen) {\n"
    "    (void)max_vocab;\n"
    "#ifdef CREATE_FAILS\n"
    "    (void)v;\n"
    "    sd_su_set_error(err, errlen, \"no luck today\");\n"
    "    return NULL;\n"
    "#else\n"
    "    h *x = malloc(sizeof *x);\n"
    "    if (!x) { sd_su_set_error(err, errlen, \"out of memory\"); return NULL; }\n"
    "    x->t = v[0].f;\n"
    "    return x;\n"
    "#endif\n"
    "}\n"
    "static void destroy(void *x) { free(x); }\n"
    "static int process(void *x, const float *l, float *p, int rows, int n) {\n"
    "    const h *s = x;\n"
    "#ifdef PROCESS_SEGV\n"
    "    volatile int *volatile null = NULL;\n"
    "    *null = 1;\n"
    "#endif\n"
    "#ifdef PROCESS_HANG\n"
    "    volatile int spin = 1;\n"
    "    while (spin) {}\n"
    "#endif\n"
    "#ifdef PROCESS_ABORT\n"
    "    abort();\n"
    "#endif\n"
    "#ifdef PROCESS_FAILS\n"
    "    return -1;\n"
    "#endif\n"
    "#ifdef PROCESS_INVERTED\n"
    "    for (int r = 0; r < rows; r++)\n"
    "        for (int i = 0; i < n; i++) p[(size_t)r * n + i] = l[(size_t)r * n + n - 1 - i];\n"
    "    l = p;\n"
    "#endif\n"
    "    for (int r = 0; r < rows; r++)\n"
    "        if (sd_su_softmax(l + (size_t)r * n, p + (size_t)r * n, n, s->t)) return -1;\n"
    "#ifdef PROCESS_NAN\n"
    "    p[0] = NAN;\n"
    "#endif\n"
    "#ifdef PROCESS_HALF\n"
    "    for (int i = 0; i < rows * n; i++) p[i] *= 0.5f;\n"
    "#endif\n"
    "    return 0;\n"
    "}\n"
    "static int32_t sample(void *x, const float *p, int n, sd_sampler_rng *rng) {\n"
    "    (void)x;\n"
    "#ifdef SAMPLE_OUT_OF_RANGE\n"
    "    (void)p; (void)rng;\n"
    "    return n;\n"
    "#elif defined(SAMPLE_ZERO_WIDE)\n"
    "    for (int i = 64; i < n; i++)\n"
    "        if (p[i] == 0) return i;\n"
    "    return sd_su_sample_cdf(p, n, rng);\n"
    "#elif defined(SAMPLE_ARGMAX)\n"
    "    (void)rng;\n"
    "    return sd_su_argmax(p, n);\n"
    "#else\n"
    "    return sd_su_sample_cdf(p, n, rng);\n"
    "#endif\n"
    "}\n"
    "static const sd_sampler_desc d = {\n"
    "    ABI, SIZE, NAME, \"a test sampler\", FLAGS, NPARAMS, params,\n"
    "#ifdef NO_SAMPLE\n"
    "    create, destroy, process, NULL,\n"
    "#else\n"
    "    create, destroy, process, sample,\n"
    "#endif\n"
    "};\n"
    "#ifdef CTOR_MARKER\n"
    "#include <stdio.h>\n"
    "#include <unistd.h>\n"
    "__attribute__((constructor)) static void boom(void) {\n"
    "    FILE *f = fopen(CTOR_MARKER, \"w\");\n"
    "    if (f) { fprintf(f, \"%d\", (int)getpid()); fclose(f); }\n"
    "    volatile int *volatile null = NULL;\n"
    "    *null = 1;\n"
    "}\n"
    "#endif\n"
    "#ifdef UNDEFINED_REF\n"
    "extern int sd_no_such_function(void);\n"
    "int call_it(void) { return sd_no_such_function(); }\n"
    "#endif\n"
    "#if defined(NO_SYMBOL)\n"
    "const sd_sampler_desc *sd_sampler_desc_v2(void) { return &d; }\n"
    "#elif defined(NULL_DESCRIPTOR)\n"
    "const sd_sampler_desc *sd_logits_processor_v1(void) { return NULL; }\n"
    "#else\n"
    "const sd_sampler_desc *sd_logits_processor_v1(void) { return &d; }\n"
    "#endif\n";

static void run(const char *cmd) {
    int rc = system(cmd);
    cr_assert_eq(rc, 0, "command failed (%d): %s", rc, cmd);
}

/* Empties ROOT/<dir> (creating it). */
static void fresh_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '" ROOT "/%s' && mkdir -p '" ROOT "/%s'", dir, dir);
    run(cmd);
}

/* Compiles text with defs into ROOT/<dir>/<file>. */
static void build_source(const char *dir, const char *file, const char *text, const char *defs) {
    char src[256], cmd[1024];
    snprintf(src, sizeof src, ROOT "/%s/%s.c", dir, file);
    FILE *f = fopen(src, "w");
    cr_assert(f, "cannot write %s: %s", src, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -O1 -fPIC -shared -I. %s '%s' -lm "
             "-o '" ROOT "/%s/%s'",
             defs, src, dir, file);
    run(cmd);
}

/* Compiles the template with defs into ROOT/<dir>/<file>. */
static void build(const char *dir, const char *file, const char *defs) {
    build_source(dir, file, template_src, defs);
}

static sd_sampler_set *open_dirs(const char *a, const char *b) {
    const char *dirs[2] = {a, b};
    sd_err e = {""};
    sd_sampler_set *s = sd_samplers_open(dirs, b ? 2 : 1, &e);
    cr_assert(s, "open: %s", e.msg);
    return s;
}

/* Builds one broken plugin from text alone in its directory and checks
 * that loading it gives exactly one warning "<file>: <reason...>" and no
 * sampler. */
static void expect_rejected_src(const char *dir, const char *text, const char *defs,
                                const char *reason) {
    fresh_dir(dir);
    build_source(dir, "bad.so", text, defs);
    char d[256], want[512];
    snprintf(d, sizeof d, ROOT "/%s", dir);
    snprintf(want, sizeof want, ROOT "/%s/bad.so: %s", dir, reason);
    sd_sampler_set *s = open_dirs(d, NULL);
    cr_assert_eq(sd_samplers_count(s), 0, "%s: loaded anyway", dir);
    cr_assert_eq(sd_samplers_n_warnings(s), 1, "%s: %d warnings", dir, sd_samplers_n_warnings(s));
    const char *w = sd_samplers_warning(s, 0);
    cr_assert(!strncmp(w, want, strlen(want)), "%s: warning '%s', expected '%s...'", dir, w, want);
    sd_samplers_close(s);
}

/* The same with the version-1 template. */
static void expect_rejected(const char *dir, const char *defs, const char *reason) {
    expect_rejected_src(dir, template_src, defs, reason);
}

/* Builds one plugin alone as ROOT/<dir>/<dir>.so and checks that it loads
 * without a warning, the only sampler of the set returned. */
static sd_sampler_set *expect_loaded(const char *dir, const char *defs) {
    char file[128], d[256];
    snprintf(file, sizeof file, "%s.so", dir);
    snprintf(d, sizeof d, ROOT "/%s", dir);
    fresh_dir(dir);
    build(dir, file, defs);
    sd_sampler_set *s = open_dirs(d, NULL);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s: %s", dir, sd_samplers_warning(s, 0));
    cr_assert_eq(sd_samplers_count(s), 1, "%s", dir);
    return s;
}

/* The version-1 ABI as a plugin built before the rename to "sampler"
 * carries it: its own copy of the layout under the first names
 * (sd_logits_processor, sd_lp_*), nothing from samplers/. It must load and
 * run as it did: only C names changed, never the layout or the symbol. */
static const char v1_first_names_src[] =
    "#include <stddef.h>\n"
    "#include <stdint.h>\n"
    "#include <stdlib.h>\n"
    "typedef struct sd_lp_param {\n"
    "    const char *name; int32_t type; uint32_t flags; double def, min, max;\n"
    "    const char *help;\n"
    "} sd_lp_param;\n"
    "typedef union sd_lp_value { int64_t i; double f; } sd_lp_value;\n"
    "typedef struct sd_lp_rng { double (*uniform)(void *); void *state; } sd_lp_rng;\n"
    "typedef struct sd_logits_processor {\n"
    "    uint32_t abi_version, struct_size; const char *name, *description;\n"
    "    uint32_t flags; int32_t n_params; const sd_lp_param *params;\n"
    "    void *(*create)(const sd_lp_value *, int, char *, size_t);\n"
    "    void (*destroy)(void *);\n"
    "    int (*process)(void *, const float *, float *, int, int);\n"
    "    int32_t (*sample)(void *, const float *, int, sd_lp_rng *);\n"
    "} sd_logits_processor;\n"
    "static const sd_lp_param params[] = {{\"width\", 1, 0, 3, 1, 64, \"tokens drawn from\"}};\n"
    "static void *create(const sd_lp_value *v, int max_vocab, char *err, size_t errlen) {\n"
    "    (void)max_vocab; (void)err; (void)errlen;\n"
    "    int64_t *w = malloc(sizeof *w);\n"
    "    if (w) *w = v[0].i;\n"
    "    return w;\n"
    "}\n"
    "static void destroy(void *h) { free(h); }\n"
    "/* Uniform over the first width tokens of each row. */\n"
    "static int process(void *h, const float *l, float *p, int rows, int n) {\n"
    "    int w = (int)*(const int64_t *)h < n ? (int)*(const int64_t *)h : n;\n"
    "    (void)l;\n"
    "    for (int i = 0; i < rows * n; i++) p[i] = i % n < w ? 1.0f / (float)w : 0.0f;\n"
    "    return 0;\n"
    "}\n"
    "static int32_t sample(void *h, const float *p, int n, sd_lp_rng *rng) {\n"
    "    int w = (int)*(const int64_t *)h < n ? (int)*(const int64_t *)h : n;\n"
    "    (void)p;\n"
    "    return (int32_t)(rng->uniform(rng->state) * w);\n"
    "}\n"
    "static const sd_logits_processor d = {1, sizeof d, \"v1\", \"first names\", 0, 1, params,\n"
    "                                      create, destroy, process, sample};\n"
    "const sd_logits_processor *sd_logits_processor_v1(void) { return &d; }\n";

Test(loader, v1_plugin_of_the_first_names_loads_and_runs) {
    fresh_dir("v1_first_names");
    build_source("v1_first_names", "v1.so", v1_first_names_src, "");
    sd_sampler_set *s = open_dirs(ROOT "/v1_first_names", NULL);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    const char *kv[] = {"width=2"};
    sd_err e = {""};
    sd_sampler *p = sd_sampler_create(s, "v1", kv, 1, 8, &e);
    cr_assert(p, "%s", e.msg);
    char desc[64];
    sd_sampler_describe(p, desc, sizeof desc);
    cr_assert_str_eq(desc, "v1(width=2)");
    float logits[8] = {0}, probs[8];
    cr_assert_eq(sd_sampler_probs(p, logits, probs, 1, 8, &e), 0, "%s", e.msg);
    cr_assert(probs[0] == 0.5f && probs[1] == 0.5f && probs[2] == 0.0f);
    sd_rng r;
    sd_rng_seed(&r, 3);
    for (int k = 0; k < 16; k++) {
        int32_t id;
        cr_assert_eq(sd_sampler_sample(p, probs, 8, &r, &id, &e), 0, "%s", e.msg);
        cr_assert(id == 0 || id == 1, "id %d", (int)id);
    }
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

Test(loader, good_template_loads) {
    sd_sampler_set *s = expect_loaded("good", "");
    cr_assert_str_eq(sd_samplers_name(s, 0), "good");
    cr_assert_str_eq(sd_samplers_file(s, 0), ROOT "/good/good.so");
    sd_samplers_close(s);
}

Test(loader, not_an_elf_file) {
    fresh_dir("not_elf");
    FILE *f = fopen(ROOT "/not_elf/bad.so", "w");
    cr_assert(f);
    fputs("This is a text file that someone named bad.so, not a shared object at all.\n", f);
    fclose(f);
    sd_sampler_set *s = open_dirs(ROOT "/not_elf", NULL);
    cr_assert_eq(sd_samplers_count(s), 0);
    cr_assert_eq(sd_samplers_n_warnings(s), 1);
    const char *w = sd_samplers_warning(s, 0);
    const char *want = ROOT "/not_elf/bad.so: dlopen failed: ";
    cr_assert(!strncmp(w, want, strlen(want)), "%s", w);
    cr_assert(strstr(w, "invalid ELF header"), "%s", w);
    sd_samplers_close(s);
}

Test(loader, dlopen_error_undefined_symbol) {
    expect_rejected("undefined", "-DUNDEFINED_REF",
                    "dlopen failed: undefined symbol: sd_no_such_function");
}

Test(loader, missing_entry_symbol) {
    expect_rejected("no_symbol", "-DNO_SYMBOL", "missing symbol sd_logits_processor_v1");
}

Test(loader, entry_returns_null) {
    expect_rejected("null_desc", "-DNULL_DESCRIPTOR", "sd_logits_processor_v1() returned NULL");
}

Test(loader, wrong_abi_version) {
    expect_rejected("abi", "-DABI=2", "ABI version 2, this engine supports 1");
}

Test(loader, struct_size_too_small) {
    expect_rejected("size", "-DSIZE=16", "descriptor struct_size 16 is smaller than");
}

Test(loader, missing_or_invalid_name) {
    expect_rejected("name_null", "-DNAME_NULL", "missing name");
    expect_rejected("name_empty", "-DNAME_EMPTY", "missing name");
    expect_rejected("name_space", "-DNAME_SPACE", "invalid name 'two words'");
}

Test(loader, missing_function) {
    expect_rejected("no_sample", "-DNO_SAMPLE", "missing sample function");
}

Test(loader, bad_parameter_tables) {
    expect_rejected("p_default", "-DPDEF=20.0",
                    "bad parameter table: default 20 of 'temperature' is outside (0, 10]");
    expect_rejected("p_dup", "-DPNAME2='\"temperature\"'",
                    "bad parameter table: parameter 'temperature' appears twice");
    expect_rejected("p_type", "-DPTYPE=7",
                    "bad parameter table: parameter 'temperature' has unknown type 7");
    expect_rejected("p_name", "-DPNAME2='\"Bad-Name\"'",
                    "bad parameter table: entry 1 has an invalid name");
    expect_rejected("p_count", "-DNPARAMS=17", "bad parameter table: n_params = 17");
    expect_rejected("p_int", "-DPTYPE=SD_SAMPLER_INT -DPDEF=1.5",
                    "bad parameter table: parameter 'temperature' has invalid bounds or default");
}

Test(loader, create_failure) {
    expect_rejected("create", "-DCREATE_FAILS",
                    "create with the default parameters failed: no luck today");
}

Test(loader, process_failure) {
    expect_rejected("proc_fail", "-DPROCESS_FAILS", "process failed on self-test row 0");
}

Test(loader, process_nan) {
    expect_rejected("proc_nan", "-DPROCESS_NAN",
                    "process returned an invalid distribution: row 0: probs[0] = nan");
}

Test(loader, process_not_summing_to_one) {
    expect_rejected("proc_half", "-DPROCESS_HALF",
                    "process returned an invalid distribution: row 0 sums to 0.5, not 1");
}

Test(loader, sample_out_of_range) {
    expect_rejected("sample", "-DSAMPLE_OUT_OF_RANGE", "sample returned 64, outside [0, 64)");
}

Test(loader, argmax_flag_must_be_true) {
    expect_rejected("argmax", "-DFLAGS=SD_SAMPLER_FLAG_ARGMAX",
                    "declares SD_SAMPLER_FLAG_ARGMAX but sample returned");
    /* The argmax of its own probabilities is not enough: the engine takes
     * the argmax of the logits, so a process() that reorders the row makes
     * the plugin mean something else than what runs. */
    expect_rejected("argmax_probs",
                    "-DFLAGS=SD_SAMPLER_FLAG_ARGMAX -DSAMPLE_ARGMAX -DPROCESS_INVERTED",
                    "declares SD_SAMPLER_FLAG_ARGMAX but sample returned 14 on probe row 0, "
                    "not the argmax of its logits 49");
}

/* A greedy sampler whose process() is a softmax rather than the one-hot
 * row (the built-in greedy before it had no parameters) still loads: its
 * choice is the argmax of the logits, which is all the engine relies on. */
Test(loader, argmax_flag_with_softmax_probabilities_loads) {
    sd_sampler_set *s =
        expect_loaded("argmax_softmax", "-DFLAGS=SD_SAMPLER_FLAG_ARGMAX -DSAMPLE_ARGMAX");
    sd_samplers_close(s);
}

/* Bad plugins next to good ones: each bad one is one warning, in file
 * order, and the good ones load. */
Test(loader, bad_plugins_do_not_stop_others) {
    fresh_dir("mixed");
    build("mixed", "a_good.so", "-DPLUGIN_NAME=first");
    build("mixed", "b_abi.so", "-DABI=9");
    build("mixed", "c_nan.so", "-DPROCESS_NAN -DPLUGIN_NAME=nan");
    build("mixed", "d_nosym.so", "-DNO_SYMBOL");
    build("mixed", "e_good.so", "-DPLUGIN_NAME=second");
    FILE *f = fopen(ROOT "/mixed/f_empty.so", "w");
    cr_assert(f);
    fclose(f);
    sd_sampler_set *s = open_dirs(ROOT "/mixed", NULL);
    cr_assert_eq(sd_samplers_count(s), 2);
    cr_assert_str_eq(sd_samplers_name(s, 0), "first");
    cr_assert_str_eq(sd_samplers_name(s, 1), "second");
    cr_assert_eq(sd_samplers_n_warnings(s), 4);
    const char *prefix[] = {ROOT "/mixed/b_abi.so: ABI version 9", ROOT "/mixed/c_nan.so: process",
                            ROOT "/mixed/d_nosym.so: missing symbol",
                            ROOT "/mixed/f_empty.so: dlopen failed"};
    for (int i = 0; i < 4; i++)
        cr_assert(!strncmp(sd_samplers_warning(s, i), prefix[i], strlen(prefix[i])), "%s",
                  sd_samplers_warning(s, i));
    sd_err e;
    sd_sampler *p = sd_sampler_create(s, "second", NULL, 0, 10, &e);
    cr_assert(p, "%s", e.msg);
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

Test(loader, duplicate_names_first_wins) {
    fresh_dir("dup_a");
    fresh_dir("dup_b");
    build("dup_a", "z_last.so", "-DPLUGIN_NAME=dup");
    build("dup_a", "m_mid.so", "-DPLUGIN_NAME=dup");
    build("dup_b", "a_first.so", "-DPLUGIN_NAME=dup");
    sd_sampler_set *s = open_dirs(ROOT "/dup_a", ROOT "/dup_b");
    cr_assert_eq(sd_samplers_count(s), 1);
    /* Directory order first, then sorted file names within it. */
    cr_assert_str_eq(sd_samplers_file(s, 0), ROOT "/dup_a/m_mid.so");
    cr_assert_eq(sd_samplers_n_warnings(s), 2);
    cr_assert_str_eq(sd_samplers_warning(s, 0),
                     ROOT "/dup_a/z_last.so: sampler 'dup' is already provided by " ROOT
                          "/dup_a/m_mid.so; ignored");
    cr_assert_str_eq(sd_samplers_warning(s, 1),
                     ROOT "/dup_b/a_first.so: sampler 'dup' is already provided by " ROOT
                          "/dup_a/m_mid.so; ignored");
    sd_samplers_close(s);
}

Test(loader, same_directory_twice_loads_once) {
    fresh_dir("twice");
    build("twice", "one.so", "");
    sd_sampler_set *s = open_dirs(ROOT "/twice", ROOT "/twice/");
    cr_assert_eq(sd_samplers_count(s), 1);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    sd_samplers_close(s);
}

/* An empty folder gives no sampler and no warning (and, under UBSan, no
 * sort of an empty list). */
Test(loader, empty_directory) {
    fresh_dir("empty");
    sd_sampler_set *s = open_dirs(ROOT "/empty", NULL);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    cr_assert_eq(sd_samplers_count(s), 0);
    sd_err e = {""};
    cr_assert_eq(sd_samplers_probe_all(s, &e), 0, "%s", e.msg);
    sd_samplers_close(s);
}

Test(loader, missing_directory_is_a_warning) {
    sd_sampler_set *s = open_dirs(ROOT "/does_not_exist", "plugins");
    cr_assert_eq(sd_samplers_n_warnings(s), 1);
    cr_assert_str_eq(sd_samplers_warning(s, 0),
                     ROOT "/does_not_exist: cannot open plugin directory: No such file or "
                          "directory");
    cr_assert_geq(sd_samplers_count(s), 5);
    sd_samplers_close(s);
}

/* "<directory of this test binary>/plugins" */
static void exe_plugins(char *buf, size_t cap) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(n, 0);
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(buf, cap, "%s/plugins", exe);
}

Test(loader, search_order) {
    cr_assert_eq(setenv(SD_PLUGIN_PATH_ENV, "/env/one::/env/two:/flag/a", 1), 0);
    const char *flags[] = {"/flag/a", "/flag/b"};
    char **dirs;
    int n;
    sd_err e;
    cr_assert_eq(sd_plugin_dirs(flags, 2, &dirs, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 5);
    cr_assert_str_eq(dirs[0], "/flag/a");
    cr_assert_str_eq(dirs[1], "/flag/b");
    cr_assert_str_eq(dirs[2], "/env/one");
    cr_assert_str_eq(dirs[3], "/env/two");
    char own[4200];
    exe_plugins(own, sizeof own);
    cr_assert_str_eq(dirs[4], own);
    cr_assert(strstr(own, "/tests/plugins"), "%s", own);
    sd_plugin_dirs_free(dirs, n);
    cr_assert_eq(unsetenv(SD_PLUGIN_PATH_ENV), 0);
    cr_assert_eq(sd_plugin_dirs(NULL, 0, &dirs, &n, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(dirs[0], own);
    sd_plugin_dirs_free(dirs, n);
}

/* The first directory of the search list wins over later ones. */
Test(loader, earlier_directory_overrides_builtin) {
    fresh_dir("override");
    build("override", "mine.so", "-DPLUGIN_NAME=top_k");
    sd_sampler_set *s = open_dirs(ROOT "/override", "plugins");
    int i = sd_samplers_find(s, "top_k");
    cr_assert_geq(i, 0);
    cr_assert_str_eq(sd_samplers_file(s, i), ROOT "/override/mine.so");
    int found = 0;
    for (int k = 0; k < sd_samplers_n_warnings(s); k++)
        found |= !strcmp(sd_samplers_warning(s, k),
                         "plugins/top_k.so: sampler 'top_k' is already provided by " ROOT
                         "/override/mine.so; ignored");
    cr_assert(found);
    sd_samplers_close(s);
}

Test(loader, min_p_example_loads_and_filters) {
    sd_sampler_set *s = open_dirs("plugins/example", NULL);
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    int i = sd_samplers_find(s, "min_p");
    cr_assert_geq(i, 0, "plugins/example/min_p.so did not load (run make)");
    cr_assert_str_eq(sd_samplers_file(s, i), "plugins/example/min_p.so");
    const char *kv[] = {"min_p=0.1", "temperature=0.5"};
    sd_err e;
    sd_sampler *p = sd_sampler_create(s, "min_p", kv, 2, 8, &e);
    cr_assert(p, "%s", e.msg);
    char d[96];
    sd_sampler_describe(p, d, sizeof d);
    cr_assert_str_eq(d, "min_p(temperature=0.5, min_p=0.1)");
    /* ln(0.1) = -2.303: logits >= 3 - 2.303 are kept. */
    float x[8] = {3, 1, 0.8f, 2.5f, -INFINITY, 0.6f, 3, 0.7f}, probs[8];
    cr_assert_eq(sd_sampler_probs(p, x, probs, 1, 8, &e), 0, "%s", e.msg);
    int kept[8] = {1, 1, 1, 1, 0, 0, 1, 1};
    double z = 0;
    for (int k = 0; k < 8; k++)
        if (kept[k])
            z += exp((x[k] - 3.0) / 0.5);
    for (int k = 0; k < 8; k++) {
        if (!kept[k])
            cr_assert(probs[k] == 0, "token %d: %g", k, (double)probs[k]);
        else
            cr_assert_float_eq(probs[k], exp((x[k] - 3.0) / 0.5) / z, 1e-6, "token %d", k);
    }
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

Test(loader, listing) {
    sd_sampler_set *s = open_dirs("plugins", "plugins/example");
    sd_err e;
    char *buf = sd_samplers_list(s, &e);
    cr_assert(buf, "%s", e.msg);
    cr_assert(strstr(buf, "top_k_nucleus  (plugins/top_k_nucleus.so)"), "%s", buf);
    /* the built-in min_p stage comes first; the example's is named as shadowed */
    cr_assert(strstr(buf, "min_p  (plugins/min_p.so)\n    ABI v2, logits stage\n"), "%s", buf);
    cr_assert(strstr(buf, "penalty  (plugins/penalty.so)\n    ABI v2, logits stage, keeps "
                          "history\n"), "%s", buf);
    int shadowed = 0;
    for (int i = 0; i < sd_samplers_n_warnings(s); i++)
        shadowed |= !strcmp(sd_samplers_warning(s, i),
                            "plugins/example/min_p.so: sampler 'min_p' is already provided by "
                            "plugins/min_p.so; ignored");
    cr_assert(shadowed);
    cr_assert(strstr(buf, "top_p"), "%s", buf);
    cr_assert(strstr(buf, "(0, 1]"), "%s", buf);
    cr_assert(strstr(buf, "[1, 2147483647]"), "%s", buf);
    free(buf);
    sd_samplers_close(s);
}

/* ---- isolation: plugin code runs first in a child process -------------- */

static int has_warning(const sd_sampler_set *s, const char *want) {
    for (int k = 0; k < sd_samplers_n_warnings(s); k++)
        if (!strcmp(sd_samplers_warning(s, k), want))
            return 1;
    return 0;
}

/* A plugin that segfaults, hangs or aborts in its self-test is listed as
 * broken with the reason; the good one loads. The hang costs the probe's
 * 2 s; the criterion timeout bounds the test if isolation breaks. */
Test(loader, crash_hang_abort_are_broken_not_fatal, .timeout = 30) {
    fresh_dir("isolate");
    build("isolate", "good.so", "");
    build("isolate", "segv.so", "-DPLUGIN_NAME=segv -DPROCESS_SEGV");
    build("isolate", "hang.so", "-DPLUGIN_NAME=hang -DPROCESS_HANG");
    build("isolate", "abort.so", "-DPLUGIN_NAME=abrt -DPROCESS_ABORT");
    sd_sampler_set *s = open_dirs(ROOT "/isolate", NULL);
    cr_assert_eq(sd_samplers_count(s), 1);
    cr_assert_str_eq(sd_samplers_name(s, 0), "good");
    cr_assert_eq(sd_samplers_n_warnings(s), 3);
    cr_assert(has_warning(s, ROOT "/isolate/segv.so: killed by SIGSEGV during the self-test"),
              "%s", sd_samplers_warning(s, 0));
    cr_assert(has_warning(s, ROOT "/isolate/abort.so: killed by SIGABRT during the self-test"));
    cr_assert(has_warning(s, ROOT "/isolate/hang.so: no answer in 2 s during the self-test; "
                               "killed"));
    sd_err e;
    char *list = sd_samplers_list(s, &e);
    cr_assert(list, "%s", e.msg);
    cr_assert(strstr(list, "good  (" ROOT "/isolate/good.so)"), "%s", list);
    cr_assert(strstr(list, "broken  (" ROOT "/isolate/segv.so): killed by SIGSEGV"), "%s", list);
    free(list);
    sd_samplers_close(s);
}

static int exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* Loading one sampler by name dlopens that plugin only: a crashing file
 * later on the search path is never touched, and one earlier is probed in
 * a child (its constructor runs there, not here) and skipped. */
Test(loader, load_by_name_touches_only_what_it_needs, .timeout = 30) {
    fresh_dir("lazy");
    const char *marker = ROOT "/lazy/marker";
    build("lazy", "crash.so", "-DCTOR_MARKER='\"" ROOT "/lazy/marker\"'");
    const char *later[] = {"plugins", ROOT "/lazy"};
    sd_err e;
    sd_sampler_set *s = sd_samplers_open_lazy(later, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(sd_samplers_count(s), 0);
    cr_assert_geq(sd_samplers_load(s, "top_k", &e), 0, "%s", e.msg);
    cr_assert_eq(sd_samplers_count(s), 1);
    cr_assert_str_eq(sd_samplers_file(s, 0), "plugins/top_k.so");
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    cr_assert(!exists(marker), "the crashing plugin was opened");
    sd_samplers_close(s);

    const char *earlier[] = {ROOT "/lazy", "plugins"};
    s = sd_samplers_open_lazy(earlier, 2, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_geq(sd_samplers_load(s, "top_k", &e), 0, "%s", e.msg);
    cr_assert_eq(sd_samplers_count(s), 1);
    cr_assert(has_warning(s, ROOT "/lazy/crash.so: killed by SIGSEGV while loading (dlopen, its "
                               "constructors)"),
              "%s", sd_samplers_warning(s, 0));
    FILE *f = fopen(marker, "r");
    cr_assert(f, "the probe did not run the constructor");
    int pid = 0;
    cr_assert_eq(fscanf(f, "%d", &pid), 1);
    fclose(f);
    cr_assert_neq(pid, (int)getpid(), "the constructor ran in this process");
    cr_assert_eq(sd_samplers_load(s, "nope", &e), -1);
    cr_assert(strstr(e.msg, "unknown sampler 'nope' (available: top_k, dry, greedy, "), "%s",
              e.msg);
    sd_samplers_close(s);
}

/* An id of probability 0 in the row sample() was given is caught at run
 * time (the self-test's rows are too narrow to see this plugin do it). */
Test(loader, zero_probability_id_at_run_time) {
    sd_sampler_set *s = expect_loaded("zero", "-DPLUGIN_NAME=zero -DSAMPLE_ZERO_WIDE");
    sd_err e;
    sd_sampler *p = sd_sampler_create(s, "zero", NULL, 0, 100, &e);
    cr_assert(p, "%s", e.msg);
    float probs[100] = {0};
    probs[3] = 1;
    sd_rng r;
    sd_rng_seed(&r, 1);
    int32_t id;
    cr_assert_eq(sd_sampler_sample(p, probs, 100, &r, &id, &e), -1);
    cr_assert_str_eq(e.msg, "zero: sample returned token 64, which has probability 0 (plugin " ROOT
                            "/zero/zero.so)");
    sd_sampler_destroy(p);
    sd_samplers_close(s);
}

/* A plugin built for another machine is named as such, from its ELF header
 * (glibc would say "No such file or directory" for a foreign e_machine). */
Test(loader, wrong_architecture) {
    fresh_dir("arch");
    build("arch", "good.so", "");
    run("cp " ROOT "/arch/good.so " ROOT "/arch/machine.so && "
        "cp " ROOT "/arch/good.so " ROOT "/arch/class.so && rm " ROOT "/arch/good.so");
    /* e_machine (bytes 18-19, little-endian): 183 AArch64 on x86-64, 62
     * x86-64 elsewhere; EI_CLASS (byte 4): 1, 32-bit. */
#if defined(__x86_64__)
    const unsigned char machine[2] = {183, 0};
    const char *want = "machine 183 AArch64; this engine is 64-bit x86-64)";
#else
    const unsigned char machine[2] = {62, 0};
    const char *want = "machine 62 x86-64; this engine is 64-bit";
#endif
    FILE *f = fopen(ROOT "/arch/machine.so", "r+b");
    cr_assert(f);
    cr_assert_eq(fseek(f, 18, SEEK_SET), 0);
    cr_assert_eq(fwrite(machine, 1, 2, f), 2);
    cr_assert_eq(fclose(f), 0);
    f = fopen(ROOT "/arch/class.so", "r+b");
    cr_assert(f);
    cr_assert_eq(fseek(f, 4, SEEK_SET), 0);
    cr_assert_eq(fputc(1, f), 1);
    cr_assert_eq(fclose(f), 0);
    sd_sampler_set *s = open_dirs(ROOT "/arch", NULL);
    cr_assert_eq(sd_samplers_count(s), 0);
    cr_assert_eq(sd_samplers_n_warnings(s), 2);
    const char *w0 = sd_samplers_warning(s, 0), *w1 = sd_samplers_warning(s, 1);
    const char *p0 = ROOT "/arch/class.so: built for another architecture (ELF 32-bit, ";
    const char *p1 = ROOT "/arch/machine.so: built for another architecture (ELF 64-bit, ";
    cr_assert(!strncmp(w0, p0, strlen(p0)), "%s", w0);
    cr_assert(!strncmp(w1, p1, strlen(p1)) && strstr(w1, want), "%s", w1);
    sd_samplers_close(s);
}

/* ---------------------------------------------------------------------------
 * Version 2
 * ------------------------------------------------------------------------ */

/* A logits stage keeping history: it lowers token 2 by 0.25 per accepted
 * token since reset. It refuses an engine without token pieces, and with
 * REFUSE_DRAFTER the drafter's role; a switch for each defect. */
static const char v2_src[] =
    "#include \"samplers/sampler.h\"\n"
    "#include \"samplers/sampler_util.h\"\n"
    "#ifndef ABI2\n"
    "#define ABI2 SD_SAMPLER_ABI_VERSION_2\n"
    "#endif\n"
    "#ifndef KIND\n"
    "#define KIND SD_STAGE_LOGITS\n"
    "#endif\n"
    "typedef struct st { int n, cap; } st;\n"
    "static void *create(const sd_engine_info *info, const sd_sampler_value *v, char *err,\n"
    "                    size_t errlen) {\n"
    "    (void)v;\n"
    "    size_t len;\n"
    "    if (!info->piece || !info->piece(info->piece_ctx, 0, &len)) {\n"
    "        sd_su_set_error(err, errlen, \"needs the vocabulary's pieces\");\n"
    "        return NULL;\n"
    "    }\n"
    "#ifdef REFUSE_DRAFTER\n"
    "    if (info->role == SD_ROLE_DRAFTER) {\n"
    "        sd_su_set_error(err, errlen, \"will not serve a drafter\");\n"
    "        return NULL;\n"
    "    }\n"
    "#endif\n"
    "    st *s = calloc(1, sizeof *s);\n"
    "    if (s) s->cap = info->max_history;\n"
    "    return s;\n"
    "}\n"
    "static void destroy(void *h) { free(h); }\n"
    "static int reset(void *h, const int32_t *p, int n) { (void)p; ((st *)h)->n = n; return 0; }\n"
    "static int accept(void *h, int32_t t) { (void)t; ((st *)h)->n++; return 0; }\n"
    "static int rollback(void *h, int n) {\n"
    "#ifndef BAD_ROLLBACK\n"
    "    ((st *)h)->n -= n;\n"
    "#endif\n"
    "    (void)h; (void)n; return 0;\n"
    "}\n"
    "static int process(void *h, const float *x, float *out, int n) {\n"
    "    for (int i = 0; i < n; i++) out[i] = x[i];\n"
    "    out[2] -= 0.25f * (float)((st *)h)->n;\n"
    "#ifdef PLUS_INF\n"
    "    out[1] = INFINITY;\n"
    "#endif\n"
    "    return 0;\n"
    "}\n"
    "static int32_t sample(void *h, const float *p, int n, sd_sampler_rng *r) {\n"
    "    (void)h; return sd_su_sample_cdf(p, n, r);\n"
    "}\n"
    "static const sd_stage_desc d = {\n"
    "    .abi_version = ABI2, .struct_size = sizeof(sd_stage_desc), .name = \"v2\",\n"
    "    .kind = KIND, .create = create, .destroy = destroy, .reset = reset,\n"
    "    .process = process,\n"
    "#ifdef WITH_SAMPLE\n"
    "    .sample = sample,\n"
    "#endif\n"
    "#ifndef NO_ACCEPT\n"
    "    .accept = accept,\n"
    "#endif\n"
    "    .rollback = rollback,\n"
    "};\n"
    "const sd_stage_desc *sd_sampler_v2(void) { (void)sample; return &d; }\n";

Test(loader_v2, rejections_name_the_rule) {
    expect_rejected_src("v2_abi", v2_src, "-DABI2=3",
                        "ABI version 3 from sd_sampler_v2(), which is version 2");
    expect_rejected_src("v2_kind", v2_src, "-DKIND=7",
                        "unknown stage kind 7 (SD_STAGE_LOGITS or SD_STAGE_SAMPLE)");
    expect_rejected_src("v2_sample", v2_src, "-DWITH_SAMPLE",
                        "a logits stage has no sample function");
    expect_rejected_src("v2_nosample", v2_src, "-DKIND=SD_STAGE_SAMPLE", "missing sample function");
    expect_rejected_src("v2_accept", v2_src, "-DNO_ACCEPT",
                        "reset, accept and rollback must be given together");
    expect_rejected_src("v2_rollback", v2_src, "-DBAD_ROLLBACK",
                        "process after rollback(1) differs from the first pass over row 1 "
                        "(history not restored)");
    expect_rejected_src("v2_inf", v2_src, "-DPLUS_INF",
                        "process returned an invalid logits row on row 0: logits[1] = inf");
}

static const char *piece(const void *ctx, int32_t id, size_t *len) {
    (void)ctx;
    (void)id;
    *len = 1;
    return "x";
}

/* What create() is told: pieces (refused without), the role (a drafter
 * refused by name), and the stage runs in a chain with its history. */
Test(loader_v2, engine_info_reaches_create) {
    fresh_dir("v2_info");
    build_source("v2_info", "v2.so", v2_src, "-DREFUSE_DRAFTER");
    sd_sampler_set *s = open_dirs(ROOT "/v2_info", "plugins");
    cr_assert_eq(sd_samplers_n_warnings(s), 0, "%s", sd_samplers_warning(s, 0));
    sd_err e = {""};
    cr_assert_null(sd_sampler_create(s, "v2,multinomial", NULL, 0, 8, &e));
    cr_assert_str_eq(e.msg, "v2: needs the vocabulary's pieces (plugin " ROOT "/v2_info/v2.so)");
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = 8,
                           .max_history = 32,
                           .role = SD_ROLE_DRAFTER,
                           .piece = piece};
    cr_assert_null(sd_sampler_create_for(s, "v2,multinomial", NULL, 0, &info, &e));
    cr_assert(strstr(e.msg, "v2: will not serve a drafter"), "%s", e.msg);
    info.role = SD_ROLE_TARGET;
    sd_sampler *p = sd_sampler_create_for(s, "v2,multinomial", NULL, 0, &info, &e);
    cr_assert(p, "%s", e.msg);
    float x[3 * 8] = {0}, a[8], b[8]; /* rows of positions 2, 3, 4 */
    int32_t seq[] = {1, 2, 3, 4};
    cr_assert_eq(sd_sampler_reset(p, seq, 2, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 2, x, 2, a, 8, &e), 0, "%s", e.msg);
    cr_assert_eq(sd_sampler_dist(p, seq, 4, x, 2, b, 8, &e), 0, "%s", e.msg);
    /* two more tokens accepted: token 2 lowered by 0.5 more */
    cr_assert_float_eq(logf(a[2] / a[1]) - logf(b[2] / b[1]), 0.5f, 1e-4, "%g",
                       (double)(logf(a[2] / a[1]) - logf(b[2] / b[1])));
    sd_sampler_destroy(p);
    char *list = sd_samplers_list(s, &e);
    cr_assert(strstr(list, "v2  (" ROOT "/v2_info/v2.so)\n    ABI v2, logits stage, keeps history\n"),
              "%s", list);
    free(list);
    sd_samplers_close(s);
}
