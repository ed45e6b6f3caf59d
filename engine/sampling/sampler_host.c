#include "engine/sampling/sampler_host.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "samplers/sampler.h"

/* Row-sum tolerance of a distribution returned by a plugin. */
#define SUM_TOLERANCE 1e-3

/* Self-test run on every plugin at load: a few rows of this width. */
#define PROBE_VOCAB 64
#define PROBE_ROWS 3
#define PROBE_DRAWS 8

typedef struct sd_plugin {
    char *file;
    void *dl;
    const sd_sampler_desc *d;
} sd_plugin;

struct sd_sampler_set {
    sd_plugin *plugins;
    int n, cap;
    char **warnings;
    int n_warn, cap_warn;
};

struct sd_sampler {
    const sd_sampler_desc *d;
    void *handle;
    int max_vocab;
    sd_sampler_value values[SD_SAMPLER_MAX_PARAMS];
};

/* ---------------------------------------------------------------------------
 * Small utilities
 * ------------------------------------------------------------------------ */

/* Grows *arr (of elements of size elem) to hold at least need elements. */
static int grow(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static char *vformat(const char *fmt, va_list ap) {
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

static int add_warning(sd_sampler_set *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int add_warning(sd_sampler_set *s, const char *fmt, ...) {
    if (grow((void **)&s->warnings, &s->cap_warn, s->n_warn + 1, sizeof *s->warnings))
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *w = vformat(fmt, ap);
    va_end(ap);
    if (!w)
        return -1;
    s->warnings[s->n_warn++] = w;
    return 0;
}

static char *join_path(const char *dir, const char *name) {
    size_t n = strlen(dir);
    return format("%s%s%s", dir, (n && dir[n - 1] == '/') ? "" : "/", name);
}

/* ---------------------------------------------------------------------------
 * Search list
 * ------------------------------------------------------------------------ */

void sd_plugin_dirs_free(char **dirs, int n) {
    if (!dirs)
        return;
    for (int i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
}

/* Appends a copy of dir[0, len) unless already present. */
static int add_dir(char ***dirs, int *n, int *cap, const char *dir, size_t len) {
    for (int i = 0; i < *n; i++)
        if (strlen((*dirs)[i]) == len && !memcmp((*dirs)[i], dir, len))
            return 0;
    if (grow((void **)dirs, cap, *n + 1, sizeof **dirs))
        return -1;
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, dir, len);
    c[len] = '\0';
    (*dirs)[(*n)++] = c;
    return 0;
}

int sd_plugin_dirs(const char *const *flag_dirs, int n_flag, char ***dirs, int *n_dirs,
                   sd_err *e) {
    char **list = NULL;
    int n = 0, cap = 0;
    *dirs = NULL;
    *n_dirs = 0;
    for (int i = 0; i < n_flag; i++)
        if (flag_dirs[i][0] && add_dir(&list, &n, &cap, flag_dirs[i], strlen(flag_dirs[i])))
            goto oom;
    const char *env = getenv(SD_PLUGIN_PATH_ENV);
    while (env && *env) {
        const char *colon = strchr(env, ':');
        size_t len = colon ? (size_t)(colon - env) : strlen(env);
        if (len && add_dir(&list, &n, &cap, env, len))
            goto oom;
        env = colon ? colon + 1 : NULL;
    }
    /* The binary's own directory: /proc/self/exe names the executable even
     * when it was started through a relative path or a link. */
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            slash[1] = '\0';
            char *p = join_path(exe, "plugins");
            if (!p || add_dir(&list, &n, &cap, p, strlen(p))) {
                free(p);
                goto oom;
            }
            free(p);
        }
    }
    *dirs = list;
    *n_dirs = n;
    return 0;
oom:
    sd_plugin_dirs_free(list, n);
    return sd_fail(e, "out of memory building the plugin search path");
}

/* ---------------------------------------------------------------------------
 * Descriptor validation
 * ------------------------------------------------------------------------ */

static int valid_name(const char *s, int param) {
    size_t n = strlen(s);
    if (n == 0 || n > SD_SAMPLER_MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int ok = param ? (islower(c) || c == '_' || (i > 0 && isdigit(c)))
                       : (isalnum(c) || c == '_' || c == '-');
        if (!ok)
            return 0;
    }
    return 1;
}

static int in_range(const sd_sampler_param *p, double x) {
    int lo = (p->flags & SD_SAMPLER_MIN_EXCLUSIVE) ? x > p->min : x >= p->min;
    int hi = (p->flags & SD_SAMPLER_MAX_EXCLUSIVE) ? x < p->max : x <= p->max;
    return lo && hi;
}

/* "(0, inf)", "[1, 2147483647]"; an infinite bound is always open (values
 * must be finite). */
static void format_range(const sd_sampler_param *p, char *buf, size_t cap) {
    int lo_open = (p->flags & SD_SAMPLER_MIN_EXCLUSIVE) || isinf(p->min);
    int hi_open = (p->flags & SD_SAMPLER_MAX_EXCLUSIVE) || isinf(p->max);
    snprintf(buf, cap, "%c%.15g, %.15g%c", lo_open ? '(' : '[', p->min, p->max, hi_open ? ')' : ']');
}

static int integral(double x) {
    return fabs(x) <= 0x1p53 && x == floor(x);
}

static int check_param(const sd_sampler_param *t, int i, char *why, size_t len) {
    const sd_sampler_param *p = &t[i];
    if (!p->name || !valid_name(p->name, 1)) {
        snprintf(why, len, "bad parameter table: entry %d has an invalid name", i);
        return -1;
    }
    for (int j = 0; j < i; j++)
        if (!strcmp(t[j].name, p->name)) {
            snprintf(why, len, "bad parameter table: parameter '%s' appears twice", p->name);
            return -1;
        }
    if (p->type != SD_SAMPLER_INT && p->type != SD_SAMPLER_FLOAT) {
        snprintf(why, len, "bad parameter table: parameter '%s' has unknown type %d", p->name,
                 (int)p->type);
        return -1;
    }
    if (isnan(p->min) || isnan(p->max) || !isfinite(p->def) || p->min > p->max ||
        (p->type == SD_SAMPLER_INT &&
         (!integral(p->min) || !integral(p->max) || !integral(p->def)))) {
        snprintf(why, len,
                 "bad parameter table: parameter '%s' has invalid bounds or default "
                 "(min %g, max %g, default %g)",
                 p->name, p->min, p->max, p->def);
        return -1;
    }
    if (!in_range(p, p->def)) {
        char r[96];
        format_range(p, r, sizeof r);
        snprintf(why, len, "bad parameter table: default %.15g of '%s' is outside %s", p->def,
                 p->name, r);
        return -1;
    }
    return 0;
}

/* Everything the engine reads from a descriptor, checked before any of its
 * functions is called. */
static int check_descriptor(const sd_sampler_desc *d, char *why, size_t len) {
    if (d->abi_version != SD_SAMPLER_ABI_VERSION) {
        snprintf(why, len, "ABI version %" PRIu32 ", this engine supports %u", d->abi_version,
                 SD_SAMPLER_ABI_VERSION);
        return -1;
    }
    if (d->struct_size < SD_SAMPLER_V1_SIZE) {
        snprintf(why, len, "descriptor struct_size %" PRIu32 " is smaller than %zu (ABI v1)",
                 d->struct_size, (size_t)SD_SAMPLER_V1_SIZE);
        return -1;
    }
    if (!d->name || !d->name[0]) {
        snprintf(why, len, "missing name");
        return -1;
    }
    if (!valid_name(d->name, 0)) {
        snprintf(why, len, "invalid name '%.40s' (letters, digits, '_', '-'; at most %d)",
                 d->name, SD_SAMPLER_MAX_NAME);
        return -1;
    }
    const char *missing = !d->create    ? "create"
                          : !d->destroy ? "destroy"
                          : !d->process ? "process"
                          : !d->sample  ? "sample"
                                        : NULL;
    if (missing) {
        snprintf(why, len, "missing %s function", missing);
        return -1;
    }
    if (d->n_params < 0 || d->n_params > SD_SAMPLER_MAX_PARAMS || (d->n_params > 0 && !d->params)) {
        snprintf(why, len, "bad parameter table: n_params = %" PRId32 " (0..%d, table %s)",
                 d->n_params, SD_SAMPLER_MAX_PARAMS, d->params ? "present" : "missing");
        return -1;
    }
    for (int i = 0; i < d->n_params; i++)
        if (check_param(d->params, i, why, len))
            return -1;
    return 0;
}

/* ---------------------------------------------------------------------------
 * Output checks, shared by the load-time self-test and the checked calls
 * ------------------------------------------------------------------------ */

/* Finite and >= 0, as float bits: below the +inf pattern, or -0. */
static int good_value(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b < 0x7f800000u || b == 0x80000000u;
}

/* Checked after every process() call, so it is written to vectorize: the
 * per-token test is an integer max over bit patterns, the sum uses four
 * accumulators; the scalar search for the culprit runs only on failure. */
static int check_distribution(const float *probs, int n_rows, int n_vocab, char *why,
                              size_t len) {
    for (int r = 0; r < n_rows; r++) {
        const float *row = probs + (size_t)r * (size_t)n_vocab;
        /* As int32 bit patterns (-0 taken as 0), valid values lie in
         * [0, bits(+inf)): track the extremes per lane. */
        int32_t hi[8] = {0}, lo[8] = {0};
        int i = 0;
        for (; i + 8 <= n_vocab; i += 8)
            for (int j = 0; j < 8; j++) {
                int32_t b;
                memcpy(&b, &row[i + j], sizeof b);
                b = b == INT32_MIN ? 0 : b;
                hi[j] = b > hi[j] ? b : hi[j];
                lo[j] = b < lo[j] ? b : lo[j];
            }
        int bad = 0;
        for (int j = 0; j < 8; j++)
            bad |= hi[j] >= 0x7f800000 || lo[j] < 0;
        for (; i < n_vocab; i++)
            bad |= !good_value(row[i]);
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (i = 0; i + 4 <= n_vocab; i += 4) {
            s0 += row[i];
            s1 += row[i + 1];
            s2 += row[i + 2];
            s3 += row[i + 3];
        }
        for (; i < n_vocab; i++)
            s0 += row[i];
        if (bad) {
            for (i = 0; good_value(row[i]); i++)
                ;
            snprintf(why, len, "row %d: probs[%d] = %g", r, i, (double)row[i]);
            return -1;
        }
        double sum = (s0 + s1) + (s2 + s3);
        if (fabs(sum - 1.0) > SUM_TOLERANCE) {
            snprintf(why, len, "row %d sums to %.6g, not 1", r, sum);
            return -1;
        }
    }
    return 0;
}

static double rng_uniform(void *state) {
    return sd_rng_uniform(state);
}

static void default_values(const sd_sampler_desc *d, sd_sampler_value *v) {
    for (int i = 0; i < d->n_params; i++) {
        if (d->params[i].type == SD_SAMPLER_INT)
            v[i].i = (int64_t)d->params[i].def;
        else
            v[i].f = d->params[i].def;
    }
}

/* The lowest id with the largest value, as the engine's greedy decoding
 * picks it. */
static int32_t first_max(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Creates the sampler with its defaults and runs it on rows a decoder can
 * produce: Gaussian logits, a row with ties and masked (-inf) tokens, and a
 * flat row. A plugin that mishandles them would corrupt a run later, so it
 * is rejected now with the reason. A greedy sampler (SD_SAMPLER_FLAG_ARGMAX)
 * must pick the argmax of each row's logits, ties to the lowest id: the
 * engine takes that token itself without calling the plugin, so a sampler
 * that picks another would mean one thing here and another in a run. */
static int self_test(const sd_sampler_desc *d, char *why, size_t len) {
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    default_values(d, v);
    char err[256] = "";
    void *h = d->create(v, PROBE_VOCAB, err, sizeof err);
    if (!h) {
        err[sizeof err - 1] = '\0';
        snprintf(why, len, "create with the default parameters failed: %s",
                 err[0] ? err : "no reason given");
        return -1;
    }
    float logits[PROBE_ROWS * PROBE_VOCAB], probs[PROBE_ROWS * PROBE_VOCAB];
    sd_rng rng;
    sd_rng_seed(&rng, 0x5eed);
    for (int i = 0; i < PROBE_VOCAB; i++) {
        double u1 = 1.0 - sd_rng_uniform(&rng), u2 = sd_rng_uniform(&rng);
        logits[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        logits[PROBE_VOCAB + i] = (i % 5 == 0) ? -INFINITY : (float)(i % 3);
        logits[2 * PROBE_VOCAB + i] = 0.5f;
    }
    int rc = -1;
    if (d->process(h, logits, probs, PROBE_ROWS, PROBE_VOCAB)) {
        snprintf(why, len, "process failed on the self-test rows");
        goto done;
    }
    char detail[160];
    if (check_distribution(probs, PROBE_ROWS, PROBE_VOCAB, detail, sizeof detail)) {
        snprintf(why, len, "process does not return a distribution: %s", detail);
        goto done;
    }
    sd_sampler_rng lr = {rng_uniform, &rng};
    for (int r = 0; r < PROBE_ROWS; r++) {
        const float *row = probs + r * PROBE_VOCAB;
        int32_t best = first_max(logits + r * PROBE_VOCAB, PROBE_VOCAB);
        for (int k = 0; k < PROBE_DRAWS; k++) {
            int32_t id = d->sample(h, row, PROBE_VOCAB, &lr);
            if (id < 0 || id >= PROBE_VOCAB) {
                snprintf(why, len, "sample returned %" PRId32 ", outside [0, %d)", id,
                         PROBE_VOCAB);
                goto done;
            }
            if (row[id] <= 0) {
                snprintf(why, len, "sample returned token %" PRId32 ", which has probability 0",
                         id);
                goto done;
            }
            if ((d->flags & SD_SAMPLER_FLAG_ARGMAX) && id != best) {
                snprintf(why, len,
                         "declares SD_SAMPLER_FLAG_ARGMAX but sample returned %" PRId32
                         " on probe row %d, not the argmax of its logits %" PRId32,
                         id, r, best);
                goto done;
            }
        }
    }
    rc = 0;
done:
    d->destroy(h);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------ */

int sd_samplers_find(const sd_sampler_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plugins[i].d->name, name))
            return i;
    return -1;
}

/* dlerror() usually starts with the path it was given; the warning already
 * does. */
static const char *strip_path(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* Loads one file. Returns 0 when it was loaded or skipped with a warning,
 * -1 on out of memory. */
static int load_file(sd_sampler_set *s, const char *path) {
    char why[SD_ERRLEN];
    dlerror();
    /* RTLD_NOW: unresolved symbols fail here, not in the middle of a run. */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *msg = dlerror();
        return add_warning(s, "%s: dlopen failed: %s", path,
                           msg ? strip_path(msg, path) : "unknown error");
    }
    void *sym = dlsym(dl, SD_SAMPLER_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(dl);
        return add_warning(s, "%s: missing symbol %s", path, SD_SAMPLER_ENTRY_SYMBOL);
    }
    const sd_sampler_desc *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const sd_sampler_desc *d = entry();
    if (!d) {
        snprintf(why, sizeof why, "%s() returned NULL", SD_SAMPLER_ENTRY_SYMBOL);
        goto reject;
    }
    if (check_descriptor(d, why, sizeof why))
        goto reject;
    int dup = sd_samplers_find(s, d->name);
    if (dup >= 0) {
        int rc = add_warning(s, "%s: sampler '%s' is already provided by %s; ignored", path,
                             d->name, s->plugins[dup].file);
        dlclose(dl);
        return rc;
    }
    if (self_test(d, why, sizeof why))
        goto reject;
    char *file = format("%s", path);
    if (!file || grow((void **)&s->plugins, &s->cap, s->n + 1, sizeof *s->plugins)) {
        free(file);
        dlclose(dl);
        return -1;
    }
    s->plugins[s->n++] = (sd_plugin){file, dl, d};
    return 0;
reject:
    dlclose(dl);
    return add_warning(s, "%s: %s", path, why);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct file_id {
    dev_t dev;
    ino_t ino;
} file_id;

typedef struct seen_files {
    file_id *ids;
    int n, cap;
} seen_files;

/* Returns 1 when the file was already visited, 0 after recording it, -1 on
 * out of memory. */
static int visit(seen_files *seen, const struct stat *st) {
    for (int i = 0; i < seen->n; i++)
        if (seen->ids[i].dev == st->st_dev && seen->ids[i].ino == st->st_ino)
            return 1;
    if (grow((void **)&seen->ids, &seen->cap, seen->n + 1, sizeof *seen->ids))
        return -1;
    seen->ids[seen->n++] = (file_id){st->st_dev, st->st_ino};
    return 0;
}

static int scan_dir(sd_sampler_set *s, const char *dir, seen_files *seen) {
    DIR *dp = opendir(dir);
    if (!dp)
        return add_warning(s, "%s: cannot open plugin directory: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0, rc = -1;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len <= 3 || strcmp(de->d_name + len - 3, ".so"))
            continue;
        if (grow((void **)&names, &cap, n + 1, sizeof *names) ||
            !(names[n] = format("%s", de->d_name)))
            goto out;
        n++;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char *path = join_path(dir, names[i]);
        if (!path)
            goto out;
        struct stat st;
        int r;
        if (stat(path, &st))
            r = add_warning(s, "%s: cannot stat: %s", path, strerror(errno));
        else if (!S_ISREG(st.st_mode))
            r = add_warning(s, "%s: not a regular file", path);
        else if ((r = visit(seen, &st)) == 0)
            r = load_file(s, path);
        free(path);
        if (r < 0)
            goto out;
    }
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(dp);
    return rc;
}

sd_sampler_set *sd_samplers_open(const char *const *dirs, int n_dirs, sd_err *e) {
    sd_sampler_set *s = calloc(1, sizeof *s);
    seen_files seen = {NULL, 0, 0};
    if (!s)
        goto oom;
    for (int i = 0; i < n_dirs; i++)
        if (scan_dir(s, dirs[i], &seen))
            goto oom;
    free(seen.ids);
    return s;
oom:
    free(seen.ids);
    sd_samplers_close(s);
    sd_fail(e, "out of memory loading sampler plugins");
    return NULL;
}

void sd_samplers_close(sd_sampler_set *s) {
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        dlclose(s->plugins[i].dl);
        free(s->plugins[i].file);
    }
    for (int i = 0; i < s->n_warn; i++)
        free(s->warnings[i]);
    free(s->plugins);
    free(s->warnings);
    free(s);
}

int sd_samplers_n_warnings(const sd_sampler_set *s) {
    return s->n_warn;
}

const char *sd_samplers_warning(const sd_sampler_set *s, int i) {
    return (i >= 0 && i < s->n_warn) ? s->warnings[i] : NULL;
}

int sd_samplers_count(const sd_sampler_set *s) {
    return s->n;
}

const char *sd_samplers_name(const sd_sampler_set *s, int i) {
    return (i >= 0 && i < s->n) ? s->plugins[i].d->name : NULL;
}

const char *sd_samplers_file(const sd_sampler_set *s, int i) {
    return (i >= 0 && i < s->n) ? s->plugins[i].file : NULL;
}

static const char *type_name(int32_t type) {
    return type == SD_SAMPLER_INT ? "int" : "float";
}

char *sd_samplers_list(const sd_sampler_set *s, sd_err *e) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    if (s->n == 0)
        fprintf(out, "no samplers loaded\n");
    for (int i = 0; i < s->n; i++) {
        const sd_sampler_desc *d = s->plugins[i].d;
        fprintf(out, "%s  (%s)\n", d->name, s->plugins[i].file);
        if (d->description && d->description[0])
            fprintf(out, "    %s\n", d->description);
        for (int j = 0; j < d->n_params; j++) {
            const sd_sampler_param *p = &d->params[j];
            char r[96];
            format_range(p, r, sizeof r);
            fprintf(out, "    %-14s %-5s default %-8.15g range %-18s %s\n", p->name,
                    type_name(p->type), p->def, r, p->help ? p->help : "");
        }
    }
    if (fclose(out) || !text) {
        free(text);
        sd_fail(e, "out of memory");
        return NULL;
    }
    return text;
}

/* ---------------------------------------------------------------------------
 * Samplers
 * ------------------------------------------------------------------------ */

/* Appends to buf[cap] at *used, truncating when full. */
static void appendf(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
    if (*used >= cap - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used = (size_t)w < cap - *used ? *used + (size_t)w : cap - 1;
}

/* "temperature, top_k" into buf, or "none". */
static void param_names(const sd_sampler_desc *d, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    if (d->n_params == 0)
        appendf(buf, cap, &used, "none");
    for (int i = 0; i < d->n_params; i++)
        appendf(buf, cap, &used, "%s%s", i ? ", " : "", d->params[i].name);
}

static int parse_value(const char *sampler, const sd_sampler_param *p, const char *text,
                       sd_sampler_value *out, sd_err *e) {
    char range[96];
    format_range(p, range, sizeof range);
    const char *kind = p->type == SD_SAMPLER_INT ? "an integer" : "a number";
    char *end;
    errno = 0;
    double x;
    if (p->type == SD_SAMPLER_INT) {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end || isspace((unsigned char)text[0]))
            return sd_fail(e, "%s: %s = '%s' is not an integer (expected %s in %s)", sampler,
                           p->name, text, kind, range);
        x = (double)v;
        if (errno == ERANGE || !in_range(p, x))
            return sd_fail(e, "%s: %s = %s is out of range %s", sampler, p->name, text, range);
        out->i = v;
        return 0;
    }
    x = strtod(text, &end);
    if (end == text || *end || isspace((unsigned char)text[0]))
        return sd_fail(e, "%s: %s = '%s' is not a number (expected %s in %s)", sampler, p->name,
                       text, kind, range);
    if (!isfinite(x))
        return sd_fail(e, "%s: %s = '%s' is not a finite number (expected %s in %s)", sampler,
                       p->name, text, kind, range);
    if (!in_range(p, x))
        return sd_fail(e, "%s: %s = %s is out of range %s", sampler, p->name, text, range);
    out->f = x;
    return 0;
}

/* The descriptor of the sampler called name, or NULL with the names that
 * are loaded. */
static const sd_sampler_desc *find_desc(const sd_sampler_set *s, const char *name, sd_err *e) {
    int idx = sd_samplers_find(s, name);
    if (idx >= 0)
        return s->plugins[idx].d;
    char avail[SD_ERRLEN / 2] = "";
    size_t used = 0;
    for (int i = 0; i < s->n; i++)
        appendf(avail, sizeof avail, &used, "%s%s", i ? ", " : "", s->plugins[i].d->name);
    sd_fail(e, "unknown sampler '%s' (available: %s)", name,
            s->n ? avail : "none, no plugin loaded");
    return NULL;
}

/* values = the defaults of d's table overridden by the n_kv "key=value"
 * strings. On failure *bad is the index of the string at fault. */
static int parse_args(const sd_sampler_desc *d, const char *const *kv, int n_kv,
                      sd_sampler_value *values, int *bad, sd_err *e) {
    default_values(d, values);
    for (int k = 0; k < n_kv; k++) {
        *bad = k;
        const char *eq = strchr(kv[k], '=');
        if (!eq || eq == kv[k])
            return sd_fail(e, "%s: sampler argument '%s' is not key=value", d->name, kv[k]);
        size_t klen = (size_t)(eq - kv[k]);
        int j = 0;
        while (j < d->n_params &&
               (strlen(d->params[j].name) != klen || strncmp(d->params[j].name, kv[k], klen)))
            j++;
        if (j == d->n_params) {
            char names[SD_ERRLEN / 2];
            param_names(d, names, sizeof names);
            return sd_fail(e, "%s: unknown parameter '%.*s' (accepted: %s)", d->name, (int)klen,
                           kv[k], names);
        }
        if (parse_value(d->name, &d->params[j], eq + 1, &values[j], e))
            return -1;
    }
    return 0;
}

int sd_sampler_check(const sd_sampler_set *s, const char *name, const char *const *kv, int n_kv,
                     int *bad_kv, sd_err *e) {
    *bad_kv = -1;
    const sd_sampler_desc *d = find_desc(s, name, e);
    sd_sampler_value values[SD_SAMPLER_MAX_PARAMS];
    return d ? parse_args(d, kv, n_kv, values, bad_kv, e) : -1;
}

sd_sampler *sd_sampler_create(const sd_sampler_set *s, const char *name,
                              const char *const *kv, int n_kv, int max_vocab, sd_err *e) {
    const sd_sampler_desc *d = find_desc(s, name, e);
    if (!d)
        return NULL;
    if (max_vocab < 1) {
        sd_fail(e, "%s: max_vocab must be >= 1, got %d", d->name, max_vocab);
        return NULL;
    }
    sd_sampler *p = calloc(1, sizeof *p);
    if (!p) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    p->d = d;
    p->max_vocab = max_vocab;
    int bad;
    if (parse_args(d, kv, n_kv, p->values, &bad, e))
        goto fail;
    char err[256] = "";
    p->handle = d->create(p->values, max_vocab, err, sizeof err);
    if (!p->handle) {
        err[sizeof err - 1] = '\0';
        sd_fail(e, "%s: %s", d->name, err[0] ? err : "create failed");
        goto fail;
    }
    return p;
fail:
    free(p);
    return NULL;
}

void sd_sampler_destroy(sd_sampler *p) {
    if (!p)
        return;
    p->d->destroy(p->handle);
    free(p);
}

const char *sd_sampler_name(const sd_sampler *p) {
    return p->d->name;
}

int sd_sampler_is_greedy(const sd_sampler *p) {
    return (p->d->flags & SD_SAMPLER_FLAG_ARGMAX) ? 1 : 0;
}

int sd_sampler_describe(const sd_sampler *p, char *buf, size_t cap) {
    char tmp[SD_ERRLEN] = "";
    size_t used = 0;
    appendf(tmp, sizeof tmp, &used, "%s(", p->d->name);
    for (int i = 0; i < p->d->n_params; i++) {
        const sd_sampler_param *q = &p->d->params[i];
        if (q->type == SD_SAMPLER_INT)
            appendf(tmp, sizeof tmp, &used, "%s%s=%" PRId64, i ? ", " : "", q->name,
                    p->values[i].i);
        else
            appendf(tmp, sizeof tmp, &used, "%s%s=%.15g", i ? ", " : "", q->name,
                    p->values[i].f);
    }
    appendf(tmp, sizeof tmp, &used, ")");
    return snprintf(buf, cap, "%s", tmp);
}

int sd_sampler_probs(sd_sampler *p, const float *logits, float *probs, int n_rows,
                     int n_vocab, sd_err *e) {
    if (n_rows < 1 || n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad shape %d x %d (n_vocab must be in [1, %d])", p->d->name,
                       n_rows, n_vocab, p->max_vocab);
    if (p->d->process(p->handle, logits, probs, n_rows, n_vocab))
        return sd_fail(e, "%s: process failed (a logits row with NaN, +inf or no finite value?)",
                       p->d->name);
    char why[160];
    if (check_distribution(probs, n_rows, n_vocab, why, sizeof why))
        return sd_fail(e, "%s: process returned an invalid distribution: %s", p->d->name, why);
    return 0;
}

int sd_sampler_sample(sd_sampler *p, const float *probs, int n_vocab, sd_rng *r,
                      int32_t *id, sd_err *e) {
    if (n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad n_vocab %d (must be in [1, %d])", p->d->name, n_vocab,
                       p->max_vocab);
    sd_sampler_rng lr = {rng_uniform, r};
    int32_t t = p->d->sample(p->handle, probs, n_vocab, &lr);
    if (t < 0 || t >= n_vocab)
        return sd_fail(e, "%s: sample returned %" PRId32 ", outside [0, %d)", p->d->name, t,
                       n_vocab);
    *id = t;
    return 0;
}
