/* The ledger's constants file: one value a line,
 *
 *   NAME DEVICE VALUE SOURCE...
 *
 * NAME a constant of the cost model (ledger.h) or a measured figure
 * ("decode_PATH:PRESET", tok/s; "verify_PATH:PRESET:N", ms for an n-row
 * call; PATH a path's tag, lg_path_tag; "persist:NAME", a figure of the
 * persistent-step microbenchmark, lg_bench_name), DEVICE h100 or h200, VALUE a
 * positive number, SOURCE the run or reasoning it comes from (required; a
 * source that begins "assumption" marks a value no device run has
 * measured). '#' starts a comment line. Every constant must be given once
 * for every device. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench/ledger/ledger.h"

static const char *const k_const[LG_NCONST] = {
    "copy_gbs", "eta",      "kernel_us",  "launch_us", "step_us",   "build_us",  "flag_us", "tail_us",
    "load_us",  "op_us",    "quant_rate", "float_rate", "imma_rate", "hmma_rate", "mma_eff",
    "smem_us",
};
static const char *const k_dev[LG_NDEV] = {"h100", "h200"};
static const char *const k_bench[LG_NBENCH] = {"flag_us", "stage_us", "load_us",
                                               "l2_us",   "prefetch_us", "read_gbs"};

const char *lg_const_name(int k) { return k >= 0 && k < LG_NCONST ? k_const[k] : "?"; }
const char *lg_dev_name(int d) { return d >= 0 && d < LG_NDEV ? k_dev[d] : "?"; }
const char *lg_bench_name(int b) { return b >= 0 && b < LG_NBENCH ? k_bench[b] : "?"; }

/* The next whitespace-separated word of *p into w (cap bytes); its length. */
static size_t word(const char **p, char *w, size_t cap) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t') s++;
    size_t n = 0;
    while (s[n] && s[n] != ' ' && s[n] != '\t') n++;
    if (n < cap) {
        memcpy(w, s, n);
        w[n] = 0;
    }
    *p = s + n;
    return n;
}

static int parse_line(const char *line, const char *name, int ln, lg_consts *c,
                      unsigned char seen[LG_NDEV][LG_NCONST], sd_err *e) {
    char key[64], dev[16], val[64];
    const char *p = line;
    size_t kn = word(&p, key, sizeof key);
    if (kn == 0 || key[0] == '#') return 0;
    if (kn >= sizeof key) return sd_fail(e, "%s:%d: name longer than %zu characters", name, ln, sizeof key - 1);
    if (word(&p, dev, sizeof dev) >= sizeof dev) dev[0] = 0;
    int d = -1;
    for (int i = 0; i < LG_NDEV; i++)
        if (!strcmp(dev, k_dev[i])) d = i;
    if (d < 0) return sd_fail(e, "%s:%d: device '%s' is not h100 or h200", name, ln, dev);
    if (word(&p, val, sizeof val) >= sizeof val) val[0] = 0;
    char *end;
    errno = 0;
    const double v = strtod(val, &end);
    if (!val[0] || *end || errno || !isfinite(v) || !(v > 0))
        return sd_fail(e, "%s:%d: value '%s' of %s is not a positive number", name, ln, val, key);
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return sd_fail(e, "%s:%d: %s %s has no source (the run it comes from)", name, ln, key, dev);
    if (!strncmp(key, "persist:", 8)) {
        int b = -1;
        for (int i = 0; i < LG_NBENCH; i++)
            if (!strcmp(key + 8, k_bench[i])) b = i;
        if (b < 0)
            return sd_fail(e, "%s:%d: '%s' is not a figure of the persistent-step microbenchmark "
                              "(persist:flag_us, stage_us, load_us, l2_us, prefetch_us, read_gbs)",
                           name, ln, key);
        if (c->bench[d][b] > 0) return sd_fail(e, "%s:%d: %s %s given twice", name, ln, key, dev);
        c->bench[d][b] = v;
        snprintf(c->bench_source[d][b], LG_SOURCE_MAX, "%s", p);
        return 0;
    }
    if (strchr(key, ':')) {
        if (lg_point_path(key) < 0)
            return sd_fail(e, "%s:%d: measured figure '%s' is not decode_PATH:PRESET or "
                              "verify_PATH:PRESET:N with PATH a path's tag (nofold, pdl, stage, "
                              "fine, pdl_mma, fine_mma, fine_smem)", name, ln, key);
        if (c->n_pt == LG_MAX_POINTS)
            return sd_fail(e, "%s:%d: more than %d measured figures", name, ln, LG_MAX_POINTS);
        lg_point *pt = &c->pt[c->n_pt];
        snprintf(pt->key, sizeof pt->key, "%s", key);
        pt->dev = d;
        pt->value = v;
        snprintf(c->pt_source[c->n_pt], LG_SOURCE_MAX, "%s", p);
        c->n_pt++;
        return 0;
    }
    int k = -1;
    for (int i = 0; i < LG_NCONST; i++)
        if (!strcmp(key, k_const[i])) k = i;
    if (k < 0) return sd_fail(e, "%s:%d: unknown constant '%s'", name, ln, key);
    if (seen[d][k]) return sd_fail(e, "%s:%d: %s %s given twice", name, ln, key, dev);
    if ((k == LG_ETA || k == LG_MMA_EFF) && v > 1)
        return sd_fail(e, "%s:%d: %s %g is above 1", name, ln, key, v);
    seen[d][k] = 1;
    c->assumed[d][k] = !strncmp(p, "assumption", 10);
    c->dev[d].v[k] = v;
    snprintf(c->source[d][k], LG_SOURCE_MAX, "%s", p);
    return 0;
}

int lg_point_path(const char *key) {
    const char *colon = strchr(key, ':');
    int skip = !strncmp(key, "decode_", 7) || !strncmp(key, "verify_", 7) ? 7 : 0;
    if (!skip || !colon || colon < key + skip || !colon[1]) return -1;
    return lg_path_of_tag(key + skip, (size_t)(colon - key - skip));
}

int lg_consts_parse(const char *text, const char *name, lg_consts *c, sd_err *e) {
    memset(c, 0, sizeof *c);
    unsigned char seen[LG_NDEV][LG_NCONST] = {{0}};
    int ln = 0, got;
    char line[LG_LINE_MAX];
    for (const char *s = text; (got = lg_next_line(&s, line, &ln, name, e)) > 0;)
        if (parse_line(line, name, ln, c, seen, e)) return -1;
    if (got < 0) return -1;
    for (int d = 0; d < LG_NDEV; d++)
        for (int k = 0; k < LG_NCONST; k++)
            if (!seen[d][k]) return sd_fail(e, "%s: no %s for %s", name, k_const[k], k_dev[d]);
    return 0;
}

int lg_next_line(const char **s, char *line, int *ln, const char *name, sd_err *e) {
    if (!**s) return 0;
    const char *nl = strchr(*s, '\n');
    size_t len = nl ? (size_t)(nl - *s) : strlen(*s);
    ++*ln;
    if (len >= LG_LINE_MAX) return sd_fail(e, "%s:%d: line longer than %d bytes", name, *ln, LG_LINE_MAX - 1);
    memcpy(line, *s, len);
    *s += len + (nl ? 1 : 0);
    if (len && line[len - 1] == '\r') len--;
    line[len] = 0;
    return 1;
}

int lg_read_text(const char *path, char **out, sd_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return sd_fail(e, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        n <= (1L << 20))
        buf = malloc((size_t)n + 1);
    const int ok = buf && fread(buf, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        free(buf);
        return sd_fail(e, "%s: cannot read (larger than 1 MiB, or an I/O error)", path);
    }
    buf[n] = 0;
    if (memchr(buf, 0, (size_t)n)) {
        free(buf);
        return sd_fail(e, "%s: not a text file (a NUL byte)", path);
    }
    *out = buf;
    return 0;
}

int lg_consts_load(const char *path, lg_consts *c, sd_err *e) {
    char *text;
    if (lg_read_text(path, &text, e)) return -1;
    const int rc = lg_consts_parse(text, path, c, e);
    free(text);
    return rc;
}

unsigned lg_consts_fit_bench(lg_consts *c, int dev) {
    const double *b = c->bench[dev];
    unsigned set = 0;
    if (b[LG_B_FLAG] > 0) c->dev[dev].v[LG_FLAG_US] = b[LG_B_FLAG], set |= 1u << LG_FLAG_US;
    if (b[LG_B_LOAD] > 0 && b[LG_B_L2] > 0 && b[LG_B_LOAD] > b[LG_B_L2])
        c->dev[dev].v[LG_LOAD_US] = b[LG_B_LOAD] - b[LG_B_L2], set |= 1u << LG_LOAD_US;
    return set;
}

double lg_consts_point(const lg_consts *c, const char *key, int dev) {
    for (int i = 0; i < c->n_pt; i++)
        if (c->pt[i].dev == dev && !strcmp(c->pt[i].key, key)) return c->pt[i].value;
    return -1;
}
