/* The targets file (docs/perf/gpu-targets.txt): one target a line,
 *
 *   decode PRESET toks|pct VALUE
 *   verify ROWS RATIO
 *   spec SPEEDUP
 *   accept ALPHA...
 *
 * '#' starts a comment line. The same file gives scripts/gpu-check.sh its
 * decode targets and acceptance rates. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench/ledger/ledger.h"

#define WORDS 12

/* Splits line (modified) into at most WORDS words; their count. */
static int split(char *line, char **w) {
    int n = 0;
    for (char *tok = strtok(line, " \t\r"); tok; tok = strtok(NULL, " \t\r")) {
        if (n == WORDS) return WORDS + 1;
        w[n++] = tok;
    }
    return n;
}

/* word as a positive finite number, or -1 */
static double num(const char *word) {
    char *end;
    errno = 0;
    const double v = strtod(word, &end);
    return *end || errno || !isfinite(v) || !(v > 0) ? -1 : v;
}

static int parse_line(char *line, const char *name, int ln, lg_targets *t, sd_err *e) {
    char *w[WORDS];
    const int n = split(line, w);
    if (n == 0 || w[0][0] == '#') return 0;
    if (n > WORDS) return sd_fail(e, "%s:%d: more than %d words", name, ln, WORDS);
    if (!strcmp(w[0], "decode")) {
        const double v = n == 4 ? num(w[3]) : -1;
        if (n != 4 || (strcmp(w[2], "toks") && strcmp(w[2], "pct")) || v < 0 ||
            strlen(w[1]) >= sizeof t->decode[0].preset)
            return sd_fail(e, "%s:%d: not 'decode PRESET toks|pct VALUE'", name, ln);
        if (t->n_decode == LG_MAX_TARGETS) return sd_fail(e, "%s:%d: more than %d decode targets", name, ln, LG_MAX_TARGETS);
        snprintf(t->decode[t->n_decode].preset, sizeof t->decode[0].preset, "%s", w[1]);
        t->decode[t->n_decode].pct = !strcmp(w[2], "pct");
        t->decode[t->n_decode++].value = v;
        return 0;
    }
    if (!strcmp(w[0], "verify")) {
        const double rows = n == 3 ? num(w[1]) : -1, r = n == 3 ? num(w[2]) : -1;
        if (rows < 1 || rows != floor(rows) || rows > 64 || r < 1)
            return sd_fail(e, "%s:%d: not 'verify ROWS RATIO' (rows 1..64, ratio >= 1)", name, ln);
        if (t->n_verify == LG_MAX_TARGETS) return sd_fail(e, "%s:%d: more than %d verify targets", name, ln, LG_MAX_TARGETS);
        t->verify_rows[t->n_verify] = (int)rows;
        t->verify_ratio[t->n_verify++] = r;
        return 0;
    }
    if (!strcmp(w[0], "spec")) {
        if (n != 2 || (t->spec = num(w[1])) < 0) return sd_fail(e, "%s:%d: not 'spec SPEEDUP'", name, ln);
        return 0;
    }
    if (!strcmp(w[0], "accept")) {
        if (n < 2 || n - 1 > LG_MAX_ALPHA)
            return sd_fail(e, "%s:%d: not 'accept ALPHA...' (1 to %d rates)", name, ln, LG_MAX_ALPHA);
        t->n_accept = 0;
        for (int i = 1; i < n; i++) {
            const double a = num(w[i]);
            if (!(a > 0 && a < 1)) return sd_fail(e, "%s:%d: acceptance rate '%s' not in (0, 1)", name, ln, w[i]);
            t->accept[t->n_accept++] = a;
        }
        return 0;
    }
    return sd_fail(e, "%s:%d: unknown target '%s' (decode, verify, spec, accept)", name, ln, w[0]);
}

int lg_targets_parse(const char *text, const char *name, lg_targets *t, sd_err *e) {
    memset(t, 0, sizeof *t);
    int ln = 0, got;
    char line[LG_LINE_MAX];
    for (const char *s = text; (got = lg_next_line(&s, line, &ln, name, e)) > 0;)
        if (parse_line(line, name, ln, t, e)) return -1;
    if (got < 0) return -1;
    if (!t->n_accept || !(t->spec > 0)) return sd_fail(e, "%s: no accept or no spec line", name);
    return 0;
}

int lg_targets_load(const char *path, lg_targets *t, sd_err *e) {
    char *text;
    if (lg_read_text(path, &text, e)) return -1;
    const int rc = lg_targets_parse(text, path, t, e);
    free(text);
    return rc;
}

double lg_targets_verify(const lg_targets *t, int n) {
    double best = 0;
    int rows = 0;
    for (int i = 0; i < t->n_verify; i++)
        if (n <= t->verify_rows[i] && (!rows || t->verify_rows[i] < rows))
            rows = t->verify_rows[i], best = t->verify_ratio[i];
    return best;
}
