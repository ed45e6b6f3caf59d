/* Plugin-author mistakes the host catches. Each is a small plugin in
 * tests/plugins/, built here into its own folder under tests/tmp/mistakes/
 * (with -DCORRECT for the fixed version where it has one): the mistake is
 * rejected at load with a reason naming it, or named at run time; the
 * fixed plugin loads. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    sd_engine_info info = {SD_SAMPLER_ABI_VERSION_2, sizeof info, 8, 32, SD_ROLE_TARGET, 0, NULL,
                           NULL, NULL};
    sd_sampler *p = sd_sampler_create_for(s, "no_drafter,multinomial", NULL, 0, &info, &e);
    cr_assert(p, "%s", e.msg);
    sd_sampler_destroy(p);
    cr_assert_eq(sd_sampler_allows_drafter(s, "no_drafter,multinomial", NULL, 0, &info, &e), 0,
                 "%s", e.msg);
    cr_assert_str_eq(e.msg, "sampler chain 'no_drafter,multinomial': stage 'no_drafter' refuses "
                            "the drafter role: serves the target only (plugin " ROOT
                            "/no_drafter/no_drafter.so); strategies that draft with the chain "
                            "(speculative, NASD) cannot use it");
    cr_assert_eq(sd_sampler_allows_drafter(s, "multinomial", NULL, 0, &info, &e), 1, "%s", e.msg);
    cr_assert_eq(sd_sampler_allows_drafter(s, "nope", NULL, 0, &info, &e), -1);
    sd_samplers_close(s);
}
