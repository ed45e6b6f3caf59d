/* The settings table (engine/cli/settings.c) against what the binary
 * does with it: every setting has its interactive command or a stated
 * reason, a value just outside a range fails with the flag (or the
 * command) named, on both sides, and both help texts list every setting.
 * The parser runs in this process; the interactive mode and the help run
 * ./specdec. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "engine/cli/args.h"
#include "engine/cli/settings.h"
#include "tests/util/test_util.h"

#define MODEL "tests/data/models/stories260K.gguf"

static int parse(const char *flag, const char *value, int attached, sd_err *e) {
    char joined[256];
    char *argv[] = {"specdec", "-m", MODEL, "-p", "hi", joined, (char *)value, NULL};
    int argc = 7;
    if (attached) {
        snprintf(joined, sizeof joined, "%s=%s", flag, value);
        argc = 6;
    } else {
        snprintf(joined, sizeof joined, "%s", flag);
    }
    sd_args a;
    return sd_args_parse(&a, argc, argv, e);
}

/* The two values just outside [lo, hi], as the parser reads them. */
static void outside(const sd_setting *s, char lo[64], char hi[64]) {
    if (s->kind == SD_SET_INT) {
        snprintf(lo, 64, "%.0f", s->lo - 1);
        snprintf(hi, 64, "%.0f", s->hi + 1);
    } else {
        snprintf(lo, 64, "%.17g", s->lo - (s->lo ? 1e-9 * (s->lo < 0 ? -s->lo : s->lo) : 1e-9));
        snprintf(hi, 64, "%.17g", s->hi + (s->hi ? 1e-9 * (s->hi < 0 ? -s->hi : s->hi) : 1e-9));
    }
}

Test(settings, names_are_the_long_flags_and_unique) {
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        char name[64];
        cr_assert(strncmp(s->flag, "--", 2) == 0, "%s", s->flag);
        sd_setting_name(s, name, sizeof name);
        cr_assert(!strchr(name, '-'), "%s", name);
        cr_assert_eq(sd_setting_by_flag(s->flag), s, "%s is not its own flag", s->flag);
        cr_assert_eq(sd_setting_by_name(name), s, "/%s finds another setting", name);
        cr_assert_eq(sd_setting_by_name(s->flag + 2), s, "the flag spelling %s", s->flag + 2);
        if (s->short_flag) {
            char sh[3] = {'-', s->short_flag, 0};
            cr_assert_eq(sd_setting_by_flag(sh), s, "%s", sh);
        }
        cr_assert(s->help && s->help[0], "%s has no help", s->flag);
        cr_assert(!s->no_command || strlen(s->no_command) > 10,
                  "%s: no interactive command needs a reason", s->flag);
    }
}

/* lo - 1 and hi + 1 (integers; a hair outside for numbers) fail as
 * "--flag: V is out of range [lo, hi]", given as two words and as
 * --flag=V; lo and hi themselves pass. */
Test(settings, values_just_outside_a_range_fail_naming_the_flag) {
    int checked = 0;
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        if (s->kind != SD_SET_INT && s->kind != SD_SET_NUM) continue;
        char lo[64], hi[64], want[128];
        outside(s, lo, hi);
        const char *bad[] = {lo, hi};
        for (int k = 0; k < 2; k++)
            for (int attached = 0; attached < 2; attached++) {
                sd_err e = {{0}};
                cr_assert_eq(parse(s->flag, bad[k], attached, &e), -1, "%s %s accepted", s->flag, bad[k]);
                snprintf(want, sizeof want, "%s: %s is out of range [", s->flag, bad[k]);
                cr_assert(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
            }
        char edge[64];
        snprintf(edge, sizeof edge, s->kind == SD_SET_INT ? "%.0f" : "%.17g", s->lo);
        sd_err e = {{0}};
        if (s->off != offsetof(sd_args, chunks)) /* --chunks needs --perplexity */
            cr_assert_eq(parse(s->flag, edge, 0, &e), 0, "%s %s: %s", s->flag, edge, e.msg);
        checked++;
    }
    cr_assert_geq(checked, 14);
}

/* The interactive mode refuses the same values with the same range, names
 * the command, one line each, on stderr; a setting without a command
 * says why. */
Test(settings, interactive_commands_share_the_ranges) {
    char script[16384] = "", want[256];
    size_t used = 0;
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        char name[64], lo[64], hi[64];
        sd_setting_name(s, name, sizeof name);
        if (s->no_command || (s->kind != SD_SET_INT && s->kind != SD_SET_NUM)) {
            used += (size_t)snprintf(script + used, sizeof script - used, "/%s%s\n", name,
                                     s->no_command ? " x" : "");
            continue;
        }
        outside(s, lo, hi);
        used += (size_t)snprintf(script + used, sizeof script - used, "/%s %s\n/%s %s\n", name, lo,
                                 name, hi);
    }
    strcat(script, "/quit\n");
    tu_run r = tu_specdec("-m " MODEL " -i", script);
    cr_assert(r.out && r.err);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        char name[64], lo[64], hi[64];
        sd_setting_name(s, name, sizeof name);
        if (!strcmp(name, "help")) continue; /* interactive /help is the command list */
        if (s->no_command) {
            snprintf(want, sizeof want, "error: /%s cannot be changed here: %s\n", name, s->no_command);
            cr_assert(strstr(r.err, want), "missing '%s' in:\n%s", want, r.err);
            continue;
        }
        if (s->kind != SD_SET_INT && s->kind != SD_SET_NUM) continue;
        outside(s, lo, hi);
        snprintf(want, sizeof want, "error: /%s: %s is out of range [", name, lo);
        cr_assert(strstr(r.err, want), "missing '%s' in:\n%s", want, r.err);
        snprintf(want, sizeof want, "error: /%s: %s is out of range [", name, hi);
        cr_assert(strstr(r.err, want), "missing '%s' in:\n%s", want, r.err);
    }
    tu_run_free(&r);
}

Test(settings, both_help_texts_list_every_setting) {
    tu_run h = tu_specdec("--help", NULL);
    tu_run i = tu_specdec("-m " MODEL " -i", "/help\n/quit\n");
    cr_assert(h.out && i.out);
    cr_assert_eq(h.rc, 0);
    cr_assert_eq(i.rc, 0, "%s", i.err);
    for (size_t k = 0; k < sd_n_settings; k++) {
        const sd_setting *s = &sd_settings[k];
        char want[80], alone[80], name[64];
        /* "--gamma G", or a switch followed by its text or, when as wide as
         * the column, by the end of its line */
        snprintf(want, sizeof want, "%s ", s->flag);
        snprintf(alone, sizeof alone, "%s\n", s->flag);
        cr_assert(strstr(h.out, want) || (!s->arg && strstr(h.out, alone)), "--help lacks '%s'",
                  want);
        if (s->no_command) continue;
        snprintf(want, sizeof want, "  /%s ", sd_setting_name(s, name, sizeof name));
        cr_assert(strstr(i.out, want), "/help lacks '%s'", want);
    }
    tu_run_free(&h);
    tu_run_free(&i);
}
