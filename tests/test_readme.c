/* The README's examples, run as printed. An example is the fenced `sh` block
 * right after a line `<!-- example -->` or `<!-- example: TEXT -->`; each of
 * its commands (a line, with backslash-newline continuing it) must start with
 * `./specdec `, which is replaced by $SPECDEC_BIN (default ./specdec). Each
 * runs from the repository root with stdin from /dev/null, stdout and stderr
 * merged, under a time limit, and must exit 0 and print something; TEXT, when
 * given, must appear in what it printed (for the speculative pair: that
 * acceptance is reported). One test per example. A model file the command
 * names that is not there fails the test under CI (CI fetches every model)
 * and skips it elsewhere, naming the make target that fetches it. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/util/test_util.h"

#define EXAMPLE_LIMIT_S 100
#define MAX_EXAMPLES 32

typedef struct example {
    int line;          /* the README line of the marker */
    char expect[128];  /* text the output must contain; "" for none */
    char cmd[2048];    /* the command as printed, continuations joined */
} example;

static const char marker[] = "<!-- example";

/* Fills ex[0..max) from README.md; returns the count, or -1 (with why set)
 * when the file cannot be read or a marked block is malformed. */
static int parse_readme(example *ex, int max, char *why, size_t cap) {
    FILE *f = fopen("README.md", "r");
    if (!f) {
        snprintf(why, cap, "README.md: cannot open (the suite runs from the repository root)");
        return -1;
    }
    char line[4096];
    int n = 0, lineno = 0, state = 0; /* 0 text, 1 after a marker, 2 in its block */
    example cur;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = 0;
        const char *p = line + strspn(line, " ");
        if (state == 0 && !strncmp(p, marker, sizeof marker - 1)) {
            memset(&cur, 0, sizeof cur);
            cur.line = lineno;
            const char *t = p + sizeof marker - 1;
            if (*t == ':') {
                t += 1 + strspn(t + 1, " ");
                const char *end = strstr(t, "-->");
                size_t len = end ? (size_t)(end - t) : 0;
                while (len && t[len - 1] == ' ') len--;
                if (!end || len == 0 || len >= sizeof cur.expect) {
                    snprintf(why, cap, "README.md:%d: expected `<!-- example: TEXT -->`", lineno);
                    fclose(f);
                    return -1;
                }
                memcpy(cur.expect, t, len);
            }
            state = 1;
        } else if (state == 1 && *p) {
            if (strcmp(p, "```sh") != 0) {
                snprintf(why, cap, "README.md:%d: an example marker must be followed by a ```sh block",
                         cur.line);
                fclose(f);
                return -1;
            }
            state = 2;
        } else if (state == 2 && !strcmp(p, "```")) {
            state = 0;
        } else if (state == 2) {
            size_t len = strlen(p), have = strlen(cur.cmd);
            int more = len && p[len - 1] == '\\';
            if (more) len--;
            if (have + len + 1 > sizeof cur.cmd) {
                snprintf(why, cap, "README.md:%d: command too long", lineno);
                fclose(f);
                return -1;
            }
            memcpy(cur.cmd + have, p, len);
            cur.cmd[have + len] = 0;
            if (more) continue;
            if (n == max) {
                snprintf(why, cap, "README.md: more than %d example commands", max);
                fclose(f);
                return -1;
            }
            ex[n++] = cur;
            cur.cmd[0] = 0;
        }
    }
    fclose(f);
    if (state) {
        snprintf(why, cap, "README.md:%d: example block not closed", cur.line);
        return -1;
    }
    return n;
}

static void free_examples(struct criterion_test_params *crp) {
    cr_free(crp->params);
}

ParameterizedTestParameters(readme, example_runs) {
    example *ex = cr_calloc(MAX_EXAMPLES, sizeof *ex);
    char why[256];
    int n = ex ? parse_readme(ex, MAX_EXAMPLES, why, sizeof why) : -1;
    /* a malformed README is reported by readme.examples_are_marked */
    return cr_make_param_array(example, ex, n > 0 ? (size_t)n : 0, free_examples);
}

static int in_ci(void) {
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") != 0 && strcmp(ci, "false") != 0;
}

ParameterizedTest(example *ex, readme, example_runs) {
    cr_assert(!strncmp(ex->cmd, "./specdec ", 10), "README.md:%d: an example must start with "
              "`./specdec `: %s", ex->line, ex->cmd);
    /* every *.gguf the command names must be there */
    char words[sizeof ex->cmd];
    snprintf(words, sizeof words, "%s", ex->cmd);
    for (char *w = strtok(words, " \t"); w; w = strtok(NULL, " \t")) {
        size_t len = strlen(w);
        if (len < 5 || strcmp(w + len - 5, ".gguf") != 0 || access(w, R_OK) == 0) continue;
        const char *fetch = strstr(w, "qwen") ? "make model-pair" : "make model";
        if (in_ci()) cr_assert_fail("README.md:%d: %s is missing (`%s` fetches it)", ex->line, w, fetch);
        cr_skip_test("README.md:%d: %s not fetched (`%s` fetches it)", ex->line, w, fetch);
        return;
    }
    tu_run r = tu_specdec_ex(ex->cmd + 10, NULL, EXAMPLE_LIMIT_S, 1);
    cr_assert(r.out, "README.md:%d: could not run %s", ex->line, ex->cmd);
    cr_assert_neq(r.rc, 124, "README.md:%d: still running after %d s: %s", ex->line,
                  EXAMPLE_LIMIT_S, ex->cmd);
    cr_assert_eq(r.rc, 0, "README.md:%d: exit %d: %s\n%s", ex->line, r.rc, ex->cmd, r.out);
    cr_assert(strspn(r.out, " \n") < strlen(r.out), "README.md:%d: printed nothing: %s", ex->line,
              ex->cmd);
    if (ex->expect[0])
        cr_assert(strstr(r.out, ex->expect), "README.md:%d: no '%s' in the output of %s:\n%s",
                  ex->line, ex->expect, ex->cmd, r.out);
    tu_run_free(&r);
}

/* The README has its examples, they parse, and the speculative pair is among
 * them with its acceptance checked. */
Test(readme, examples_are_marked) {
    static example ex[MAX_EXAMPLES];
    char why[256] = "";
    int n = parse_readme(ex, MAX_EXAMPLES, why, sizeof why);
    cr_assert(n >= 0, "%s", why);
    cr_assert(n >= 5, "README.md: only %d marked examples", n);
    int pair = 0;
    for (int i = 0; i < n; i++)
        if (strstr(ex[i].cmd, " -d models/qwen2.5-coder-0.5b") && ex[i].expect[0]) pair = 1;
    cr_assert(pair, "README.md: no marked example runs the Qwen pair with an expected output");
}
