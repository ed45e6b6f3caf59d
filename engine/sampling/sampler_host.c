#include "engine/sampling/sampler_host.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "samplers/sampler.h"

/* Row-sum tolerance of a distribution returned by a plugin. */
#define SUM_TOLERANCE 1e-3

/* Self-test run on every plugin at load: a few rows of this width. */
#define PROBE_VOCAB 64
#define PROBE_ROWS 3
#define PROBE_DRAWS 8

/* Longest chain --sampler takes. */
#define MAX_STAGES 8
/* History a handle made by sd_sampler_create may hold. */
#define DEFAULT_HISTORY 4096

/* One stage as the engine sees it, whatever the ABI version of its
 * plugin: the fields both versions share, and the version's descriptor. */
typedef struct stage_def {
    int abi; /* 1 or 2 */
    const sd_sampler_desc *v1;
    const sd_stage_desc *v2;
    const char *name, *description;
    uint32_t kind, flags;
    int32_t n_params;
    const sd_sampler_param *params;
    int history; /* v2 with reset/accept/rollback */
} stage_def;

typedef struct sd_plugin {
    char *file;
    void *dl;
    stage_def d;
} sd_plugin;

typedef struct probed probed;

struct sd_sampler_set {
    sd_plugin *plugins; /* dlopened in this process */
    int n, cap;
    char **warnings;
    int n_warn, cap_warn;
    char **dirs; /* the search path, for loading by name later */
    int n_dirs, cap_dirs;
    probed *probed; /* every file probed, in probe order */
    int n_probed, cap_probed;
};

typedef struct stage {
    const stage_def *d;
    const char *file; /* the plugin's, owned by the set */
    void *handle;
    sd_sampler_value values[SD_SAMPLER_MAX_PARAMS];
} stage;

/* A chain: logits stages, then one sampling stage. The history is the
 * engine's copy of what the stages were told, so that it can find the
 * common prefix with a new sequence and roll back only what differs. */
struct sd_sampler {
    stage st[MAX_STAGES];
    int n;
    int max_vocab;
    int history;        /* some stage keeps history */
    int32_t *hist;      /* [max_history] */
    int n_hist, n_prompt, max_history;
    int last;           /* position of the row last processed at this history, or -1 */
    float *buf[3];      /* [max_vocab] each: stage outputs, catch-up output */
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

/* The name and parameter table, the same in both versions. */
static int check_common(const stage_def *d, char *why, size_t len) {
    if (!d->name || !d->name[0]) {
        snprintf(why, len, "missing name");
        return -1;
    }
    if (!valid_name(d->name, 0)) {
        snprintf(why, len, "invalid name '%.40s' (letters, digits, '_', '-'; at most %d)",
                 d->name, SD_SAMPLER_MAX_NAME);
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

static int missing_function(const char *missing, char *why, size_t len) {
    if (!missing)
        return 0;
    snprintf(why, len, "missing %s function", missing);
    return -1;
}

/* Everything the engine reads from a version-1 descriptor, checked before
 * any of its functions is called; fills def. */
static int check_descriptor(const sd_sampler_desc *d, stage_def *def, char *why, size_t len) {
    if (d->abi_version != SD_SAMPLER_ABI_VERSION) {
        snprintf(why, len,
                 "ABI version %" PRIu32 ", this engine supports 1 through %s() and 2 through %s()",
                 d->abi_version, SD_SAMPLER_ENTRY_SYMBOL, SD_SAMPLER_V2_ENTRY_SYMBOL);
        return -1;
    }
    if (d->struct_size < SD_SAMPLER_V1_SIZE) {
        snprintf(why, len, "descriptor struct_size %" PRIu32 " is smaller than %zu (ABI v1)",
                 d->struct_size, (size_t)SD_SAMPLER_V1_SIZE);
        return -1;
    }
    *def = (stage_def){1, d, NULL, d->name, d->description, SD_STAGE_SAMPLE, d->flags,
                       d->n_params, d->params, 0};
    if (check_common(def, why, len))
        return -1;
    return missing_function(!d->create    ? "create"
                            : !d->destroy ? "destroy"
                            : !d->process ? "process"
                            : !d->sample  ? "sample"
                                          : NULL,
                            why, len);
}

/* The same for a version-2 descriptor. */
static int check_stage_desc(const sd_stage_desc *d, stage_def *def, char *why, size_t len) {
    if (d->abi_version != SD_SAMPLER_ABI_VERSION_2) {
        snprintf(why, len,
                 "ABI version %" PRIu32 " from %s(), which is version 2 (version 1 is %s())",
                 d->abi_version, SD_SAMPLER_V2_ENTRY_SYMBOL, SD_SAMPLER_ENTRY_SYMBOL);
        return -1;
    }
    if (d->struct_size < SD_STAGE_V2_SIZE) {
        snprintf(why, len, "descriptor struct_size %" PRIu32 " is smaller than %zu (ABI v2)",
                 d->struct_size, (size_t)SD_STAGE_V2_SIZE);
        return -1;
    }
    int n_hist = !!d->reset + !!d->accept + !!d->rollback;
    *def = (stage_def){2, NULL, d, d->name, d->description, d->kind, d->flags,
                       d->n_params, d->params, n_hist == 3};
    if (check_common(def, why, len))
        return -1;
    if (d->kind != SD_STAGE_LOGITS && d->kind != SD_STAGE_SAMPLE) {
        snprintf(why, len, "unknown stage kind %" PRIu32 " (SD_STAGE_LOGITS or SD_STAGE_SAMPLE)",
                 d->kind);
        return -1;
    }
    if (missing_function(!d->create    ? "create"
                         : !d->destroy ? "destroy"
                         : !d->process ? "process"
                         : (d->kind == SD_STAGE_SAMPLE && !d->sample) ? "sample"
                                                                       : NULL,
                         why, len))
        return -1;
    if (d->kind == SD_STAGE_LOGITS && d->sample) {
        snprintf(why, len, "a logits stage has no sample function (set it to NULL)");
        return -1;
    }
    if (n_hist != 0 && n_hist != 3) {
        snprintf(why, len, "reset, accept and rollback must be given together (all or none)");
        return -1;
    }
    if ((d->flags & SD_SAMPLER_FLAG_ARGMAX) && (d->kind != SD_STAGE_SAMPLE || n_hist)) {
        snprintf(why, len, "SD_SAMPLER_FLAG_ARGMAX is for sampling stages without history");
        return -1;
    }
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

static void default_values(const stage_def *d, sd_sampler_value *v) {
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

/* The probe rows: Gaussian logits, a row with ties and masked (-inf)
 * tokens, and a flat row. */
static void probe_rows(float *logits, sd_rng *rng) {
    for (int i = 0; i < PROBE_VOCAB; i++) {
        double u1 = 1.0 - sd_rng_uniform(rng), u2 = sd_rng_uniform(rng);
        logits[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        logits[PROBE_VOCAB + i] = (i % 5 == 0) ? -INFINITY : (float)(i % 3);
        logits[2 * PROBE_VOCAB + i] = 0.5f;
    }
}

/* Creates the sampler with its defaults and runs it on rows a decoder can
 * produce: Gaussian logits, a row with ties and masked (-inf) tokens, and a
 * flat row. A plugin that mishandles them would corrupt a run later, so it
 * is rejected now with the reason. A greedy sampler (SD_SAMPLER_FLAG_ARGMAX)
 * must pick the argmax of each row's logits, ties to the lowest id: the
 * engine takes that token itself without calling the plugin, so a sampler
 * that picks another would mean one thing here and another in a run. */
static int self_test(const stage_def *def, char *why, size_t len) {
    const sd_sampler_desc *d = def->v1;
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    default_values(def, v);
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
    probe_rows(logits, &rng);
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

/* A logits row: finite or -inf everywhere, at least one finite value.
 * Checked after every logits stage, so written to vectorize: as bit
 * patterns, NaN and +inf are the magnitudes >= that of +inf except -inf
 * itself; the scalar search for the culprit runs only on failure. */
static int check_logits(const float *x, int n, char *why, size_t len) {
    uint32_t bad = 0, finite = 0;
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        bad |= (uint32_t)((b & 0x7fffffffu) >= 0x7f800000u && b != 0xff800000u);
        finite |= (uint32_t)((b & 0x7fffffffu) < 0x7f800000u);
    }
    if (bad) {
        int i = 0;
        while (!isnan(x[i]) && x[i] != INFINITY)
            i++;
        snprintf(why, len, "logits[%d] = %g", i, (double)x[i]);
        return -1;
    }
    if (!finite)
        snprintf(why, len, "every logit is -inf");
    return finite ? 0 : -1;
}

/* The output of one process() call of a version-2 stage, checked by kind. */
static int check_stage_output(const stage_def *d, const float *out, int n, char *why, size_t len) {
    return d->kind == SD_STAGE_LOGITS ? check_logits(out, n, why, len)
                                      : check_distribution(out, 1, n, why, len);
}

#define PROBE_HISTORY 16

/* The self-test's vocabulary: token i is the piece "<i>" for i < 10, "<?>"
 * above, enough for a stage that insists on pieces to start. */
static const char *probe_piece(const void *ctx, int32_t id, size_t *len) {
    static const char pieces[] = "<0><1><2><3><4><5><6><7><8><9><?>";
    (void)ctx;
    if (id < 0 || id >= PROBE_VOCAB)
        return NULL;
    *len = 3;
    return pieces + 3 * (id < 10 ? id : 10);
}

/* The version-2 self-test: create on PROBE_VOCAB tokens, reset to a
 * three-token prompt, process the three probe rows in order with the
 * chosen token accepted after each of the first two (a sampling stage's
 * own draw, a logits stage's largest output), checking every output; then,
 * for a stage with history, rollback(1) and reset must reproduce the
 * outputs bit for bit. */
static int self_test_v2(const stage_def *def, char *why, size_t len) {
    const sd_stage_desc *d = def->v2;
    static const int32_t prompt[] = {1, 2, 3}, eos[] = {0};
    sd_engine_info info = {SD_SAMPLER_ABI_VERSION_2, sizeof info, PROBE_VOCAB, PROBE_HISTORY,
                           SD_ROLE_OTHER, 1, eos, probe_piece, NULL};
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    default_values(def, v);
    char err[256] = "";
    void *h = d->create(&info, v, err, sizeof err);
    if (!h) {
        err[sizeof err - 1] = '\0';
        snprintf(why, len, "create with the default parameters failed: %s",
                 err[0] ? err : "no reason given");
        return -1;
    }
    float logits[PROBE_ROWS * PROBE_VOCAB], out[PROBE_ROWS][PROBE_VOCAB], again[PROBE_VOCAB];
    sd_rng rng;
    sd_rng_seed(&rng, 0x5eed);
    probe_rows(logits, &rng);
    sd_sampler_rng lr = {rng_uniform, &rng};
    int32_t tok[PROBE_ROWS];
    char detail[160];
    int rc = -1;
    if (def->history && d->reset(h, prompt, 3)) {
        snprintf(why, len, "reset failed on a 3-token prompt");
        goto done;
    }
    for (int r = 0; r < PROBE_ROWS; r++) {
        const float *row = logits + r * PROBE_VOCAB;
        if (d->process(h, row, out[r], PROBE_VOCAB)) {
            snprintf(why, len, "process failed on self-test row %d", r);
            goto done;
        }
        if (check_stage_output(def, out[r], PROBE_VOCAB, detail, sizeof detail)) {
            snprintf(why, len, "process returned an invalid %s on row %d: %s",
                     def->kind == SD_STAGE_LOGITS ? "logits row" : "distribution", r, detail);
            goto done;
        }
        tok[r] = first_max(out[r], PROBE_VOCAB);
        if (def->kind == SD_STAGE_SAMPLE) {
            tok[r] = d->sample(h, out[r], PROBE_VOCAB, &lr);
            if (tok[r] < 0 || tok[r] >= PROBE_VOCAB || !(out[r][tok[r]] > 0)) {
                snprintf(why, len, "sample returned %" PRId32 " on row %d, not a token of "
                         "non-zero probability", tok[r], r);
                goto done;
            }
            if ((def->flags & SD_SAMPLER_FLAG_ARGMAX) && tok[r] != first_max(row, PROBE_VOCAB)) {
                snprintf(why, len, "declares SD_SAMPLER_FLAG_ARGMAX but sample returned %" PRId32
                         " on probe row %d, not the argmax of its logits", tok[r], r);
                goto done;
            }
        }
        if (def->history && r + 1 < PROBE_ROWS && d->accept(h, tok[r])) {
            snprintf(why, len, "accept failed after row %d", r);
            goto done;
        }
    }
    if (def->history) {
        /* rollback(1) undoes tok[1]: rows 1 and 2 must come out the same */
        static const char *const step[] = {"after rollback(1)", "after accept", "after reset"};
        const int rows[] = {1, 2, 0};
        for (int k = 0; k < 3; k++) {
            int fail = k == 0 ? d->rollback(h, 1)
                       : k == 1 ? d->accept(h, tok[1])
                                : d->reset(h, prompt, 3);
            if (fail) {
                snprintf(why, len, "%s failed in the history test",
                         k == 0 ? "rollback(1)" : k == 1 ? "accept" : "reset");
                goto done;
            }
            if (d->process(h, logits + rows[k] * PROBE_VOCAB, again, PROBE_VOCAB)) {
                snprintf(why, len, "process failed %s", step[k]);
                goto done;
            }
            if (memcmp(again, out[rows[k]], sizeof again)) {
                snprintf(why, len, "process %s differs from the first pass over row %d "
                         "(history not restored)", step[k], rows[k]);
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
 * Probing: plugin code runs first in a child process
 * ------------------------------------------------------------------------ */

/* A plugin is native code: its constructor, its descriptor function or its
 * self-test may crash, hang or call abort(). Each file is therefore first
 * opened and self-tested in a forked child, which reports back over a pipe;
 * the parent dlopens only a file its child found good, and a probe that
 * dies or overruns SD_PROBE_TIMEOUT_MS becomes a warning naming the signal,
 * the exit status or the time limit, and the phase it was in. */

/* What a child reports: the sampler's name and its listing entry, or why
 * the file is unusable. */
typedef struct probe_report {
    int ok;
    char name[SD_SAMPLER_MAX_NAME + 1];
    char why[SD_ERRLEN];
    char entry[4096];
} probe_report;

/* Phases the child announces, one byte each, before the report ('R'). */
#define PHASE_LOAD 'L'
#define PHASE_DESC 'D'
#define PHASE_TEST 'T'
#define PHASE_REPORT 'R'

/* One file of the search path, probed once per set. */
struct probed {
    char *path;
    dev_t dev;
    ino_t ino;
    int ok;
    char name[SD_SAMPLER_MAX_NAME + 1];
    char *text; /* ok: the listing entry; otherwise the reason */
};

static void format_entry(FILE *out, const stage_def *d, const char *file) {
    fprintf(out, "%s  (%s)\n    ABI v%d, %s stage%s\n", d->name, file, d->abi,
            d->kind == SD_STAGE_LOGITS ? "logits" : "sampling", d->history ? ", keeps history" : "");
    if (d->description && d->description[0])
        fprintf(out, "    %s\n", d->description);
    for (int j = 0; j < d->n_params; j++) {
        const sd_sampler_param *p = &d->params[j];
        char r[96];
        format_range(p, r, sizeof r);
        fprintf(out, "    %-14s %-5s default %-8.15g range %-18s %s\n", p->name,
                p->type == SD_SAMPLER_INT ? "int" : "float", p->def, r, p->help ? p->help : "");
    }
}

/* dlerror() usually starts with the path it was given; the warning already
 * does. */
static const char *strip_path(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (!strncmp(msg, path, n) && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

static const char *machine_name(unsigned m) {
    switch (m) {
    case EM_386: return "x86";
    case EM_X86_64: return "x86-64";
    case EM_ARM: return "ARM";
    case EM_AARCH64: return "AArch64";
    case EM_PPC64: return "PowerPC64";
    case EM_RISCV: return "RISC-V";
    case EM_S390: return "S390";
    default: return "unknown";
    }
}

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE 0
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

/* Reads the ELF header, without running anything: glibc reports a foreign
 * machine as "No such file or directory" (it skips such files while
 * searching), so the class and machine are compared here. Returns 1 with
 * why filled when the file is an ELF object for another architecture. */
static int foreign_elf(const char *path, char *why, size_t len) {
    unsigned char h[20];
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < sizeof h || memcmp(h, ELFMAG, SELFMAG))
        return 0;
    unsigned machine = h[EI_DATA] == ELFDATA2MSB ? (unsigned)h[18] << 8 | h[19]
                                                 : (unsigned)h[19] << 8 | h[18];
    int bits = h[EI_CLASS] == ELFCLASS64 ? 64 : h[EI_CLASS] == ELFCLASS32 ? 32 : 0;
    if (h[EI_CLASS] == HOST_CLASS && (HOST_MACHINE == 0 || machine == HOST_MACHINE))
        return 0;
    snprintf(why, len,
             "built for another architecture (ELF %d-bit, machine %u %s; this engine is "
             "%d-bit %s)",
             bits, machine, machine_name(machine), HOST_CLASS == ELFCLASS64 ? 64 : 32,
             machine_name(HOST_MACHINE));
    return 1;
}

/* A dlopen failure, with glibc's architecture messages named as such. */
static void dlopen_reason(const char *path, char *why, size_t len) {
    const char *msg = dlerror();
    msg = msg ? strip_path(msg, path) : "unknown error";
    if (strstr(msg, "wrong ELF class") || strstr(msg, "ELF file's machine") ||
        strstr(msg, "ELF load command"))
        snprintf(why, len, "built for another architecture (dlopen failed: %s)", msg);
    else
        snprintf(why, len, "dlopen failed: %s", msg);
}

/* Opens path and fills def with its checked descriptor (-1 with why).
 * phase, when given, is told each step before plugin code runs. The
 * version-2 entry point wins when a file has both. */
static int open_plugin(const char *path, void **dl, stage_def *def, void (*phase)(int c),
                       char *why, size_t len) {
    dlerror();
    if (phase)
        phase(PHASE_LOAD);
    /* RTLD_NOW: unresolved symbols fail here, not in the middle of a run. */
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        dlopen_reason(path, why, len);
        return -1;
    }
    void *sym2 = dlsym(*dl, SD_SAMPLER_V2_ENTRY_SYMBOL);
    void *sym = sym2 ? sym2 : dlsym(*dl, SD_SAMPLER_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(why, len, "missing symbol %s (ABI v1) or %s (ABI v2)", SD_SAMPLER_ENTRY_SYMBOL,
                 SD_SAMPLER_V2_ENTRY_SYMBOL);
        return -1;
    }
    if (phase)
        phase(PHASE_DESC);
    if (sym2) {
        const sd_stage_desc *(*entry)(void);
        memcpy(&entry, &sym, sizeof entry);
        const sd_stage_desc *d = entry();
        if (!d) {
            snprintf(why, len, "%s() returned NULL", SD_SAMPLER_V2_ENTRY_SYMBOL);
            return -1;
        }
        return check_stage_desc(d, def, why, len);
    }
    const sd_sampler_desc *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const sd_sampler_desc *d = entry();
    if (!d) {
        snprintf(why, len, "%s() returned NULL", SD_SAMPLER_ENTRY_SYMBOL);
        return -1;
    }
    return check_descriptor(d, def, why, len);
}

static int child_fd = -1;

static void child_write(const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(child_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        p += w;
        n -= (size_t)w;
    }
}

static void child_phase(int c) {
    char b = (char)c;
    child_write(&b, 1);
}

/* The child: load, check, self-test, report, _exit (no atexit handlers, no
 * flushing of stdio buffers copied from the parent). */
static void probe_child(const char *path, int fd) {
    static probe_report r;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    static const int sigs[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGINT, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], SIG_DFL);
    child_fd = fd;
    void *dl;
    stage_def d;
    if (!open_plugin(path, &dl, &d, child_phase, r.why, sizeof r.why)) {
        child_phase(PHASE_TEST);
        if (!(d.abi == 1 ? self_test(&d, r.why, sizeof r.why)
                         : self_test_v2(&d, r.why, sizeof r.why))) {
            r.ok = 1;
            snprintf(r.name, sizeof r.name, "%s", d.name);
            FILE *out = fmemopen(r.entry, sizeof r.entry, "w");
            if (out) {
                format_entry(out, &d, path);
                fclose(out);
            }
            r.entry[sizeof r.entry - 1] = '\0';
        }
    }
    child_phase(PHASE_REPORT);
    child_write(&r, sizeof r);
    _exit(0);
}

static const char *phase_text(int c) {
    switch (c) {
    case PHASE_LOAD: return "while loading (dlopen, its constructors)";
    case PHASE_DESC: return "in its entry point (" SD_SAMPLER_V2_ENTRY_SYMBOL " or "
                            SD_SAMPLER_ENTRY_SYMBOL ")";
    case PHASE_TEST: return "during the self-test";
    default: return "before loading";
    }
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGTRAP: return "SIGTRAP";
    case SIGPIPE: return "SIGPIPE";
    default: return NULL;
    }
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Runs probe_child for path and fills r from its report, or with why it
 * gave none. Returns -1 only when no child could be started. */
static int probe_file(const char *path, probe_report *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (foreign_elf(path, r->why, sizeof r->why))
        return 0;
    int fds[2];
    if (pipe(fds)) {
        snprintf(err, errlen, "%s: cannot create a pipe for the probe: %s", path, strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%s: cannot fork the probe: %s", path, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(path, fds[1]);
    }
    close(fds[1]);
    /* Phase bytes, then 'R' and the report: read until EOF or the limit. */
    int phase = 0, timed_out = 0;
    size_t got = 0;
    long long end = now_ms() + SD_PROBE_TIMEOUT_MS;
    for (;;) {
        long long left = end - now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        ssize_t k;
        if (phase == PHASE_REPORT) {
            k = read(fds[0], (char *)r + got, sizeof *r - got);
            if (k > 0)
                got += (size_t)k;
        } else {
            char c;
            k = read(fds[0], &c, 1);
            if (k == 1)
                phase = c;
        }
        if (k == 0 || (k < 0 && errno != EINTR) || got == sizeof *r)
            break;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (got == sizeof *r) {
        r->name[sizeof r->name - 1] = '\0';
        r->why[sizeof r->why - 1] = '\0';
        r->entry[sizeof r->entry - 1] = '\0';
        return 0;
    }
    memset(r, 0, sizeof *r);
    if (timed_out)
        snprintf(r->why, sizeof r->why, "no answer in %g s %s; killed",
                 SD_PROBE_TIMEOUT_MS / 1000.0, phase_text(phase));
    else if (WIFSIGNALED(st) && signal_name(WTERMSIG(st)))
        snprintf(r->why, sizeof r->why, "killed by %s %s", signal_name(WTERMSIG(st)),
                 phase_text(phase));
    else if (WIFSIGNALED(st))
        snprintf(r->why, sizeof r->why, "killed by signal %d %s", WTERMSIG(st),
                 phase_text(phase));
    else if (WIFEXITED(st))
        snprintf(r->why, sizeof r->why, "exited with status %d %s", WEXITSTATUS(st),
                 phase_text(phase));
    else
        snprintf(r->why, sizeof r->why, "the probe ended without a report %s", phase_text(phase));
    return 0;
}

/* ---------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------ */

int sd_samplers_find(const sd_sampler_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plugins[i].d.name, name))
            return i;
    return -1;
}

/* dlopens a file its probe found good, in the parent. The self-test is not
 * repeated; the descriptor is checked again (it is the parent's copy) and
 * must carry the name the probe saw. Returns 0 (loaded or warned), -1 on
 * out of memory. */
static int load_probed(sd_sampler_set *s, const probed *f) {
    char why[SD_ERRLEN];
    void *dl = NULL;
    stage_def d;
    int bad = open_plugin(f->path, &dl, &d, NULL, why, sizeof why);
    if (!bad && strcmp(d.name, f->name))
        snprintf(why, sizeof why, "names sampler '%s' now, '%s' when probed", d.name, f->name);
    else if (!bad) {
        char *file = format("%s", f->path);
        if (!file || grow((void **)&s->plugins, &s->cap, s->n + 1, sizeof *s->plugins)) {
            free(file);
            dlclose(dl);
            return -1;
        }
        s->plugins[s->n++] = (sd_plugin){file, dl, d};
        return 0;
    }
    if (dl)
        dlclose(dl);
    return add_warning(s, "%s: %s", f->path, why);
}

/* The record of path, probing it when it is new (*fresh = 1). NULL with
 * *fresh = 0 when it is not a regular file (warned); *oom on out of memory
 * or a probe that could not start (e filled). */
static probed *record(sd_sampler_set *s, const char *path, int *fresh, int *oom, sd_err *e) {
    *fresh = 0;
    *oom = 0;
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) {
        int bad = stat(path, &st) ? add_warning(s, "%s: cannot stat: %s", path, strerror(errno))
                                  : add_warning(s, "%s: not a regular file", path);
        if (bad) {
            *oom = 1;
            sd_fail(e, "out of memory loading sampler plugins");
        }
        return NULL;
    }
    for (int i = 0; i < s->n_probed; i++)
        if (s->probed[i].dev == st.st_dev && s->probed[i].ino == st.st_ino)
            return &s->probed[i];
    probe_report *r = malloc(sizeof *r);
    char err[SD_ERRLEN];
    if (!r || grow((void **)&s->probed, &s->cap_probed, s->n_probed + 1, sizeof *s->probed)) {
        free(r);
        *oom = 1;
        sd_fail(e, "out of memory loading sampler plugins");
        return NULL;
    }
    if (probe_file(path, r, err, sizeof err)) {
        free(r);
        *oom = 1;
        sd_fail(e, "%s", err);
        return NULL;
    }
    probed f = {format("%s", path), st.st_dev, st.st_ino, r->ok, "",
                format("%s", r->ok ? r->entry : r->why)};
    snprintf(f.name, sizeof f.name, "%s", r->name);
    free(r);
    if (!f.path || !f.text || (!f.ok && add_warning(s, "%s: %s", path, f.text))) {
        free(f.path);
        free(f.text);
        *oom = 1;
        sd_fail(e, "out of memory loading sampler plugins");
        return NULL;
    }
    s->probed[s->n_probed] = f;
    *fresh = 1;
    return &s->probed[s->n_probed++];
}

static const sd_plugin *find_desc(const sd_sampler_set *s, const char *name, sd_err *e);

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The *.so paths of dir in byte-wise order. An unreadable directory is a
 * warning and no files. Returns -1 on out of memory. */
static int list_dir(sd_sampler_set *s, const char *dir, char ***paths, int *n_paths) {
    *paths = NULL;
    *n_paths = 0;
    DIR *dp = opendir(dir);
    if (!dp)
        return add_warning(s, "%s: cannot open plugin directory: %s", dir, strerror(errno));
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len <= 3 || strcmp(de->d_name + len - 3, ".so"))
            continue;
        if (grow((void **)&names, &cap, n + 1, sizeof *names) ||
            !(names[n] = format("%s", de->d_name))) {
            free_names(names, n);
            closedir(dp);
            return -1;
        }
        n++;
    }
    closedir(dp);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char *p = join_path(dir, names[i]);
        if (!p) {
            free_names(names, n);
            return -1;
        }
        free(names[i]);
        names[i] = p;
    }
    *paths = names;
    *n_paths = n;
    return 0;
}

static sd_sampler_set *new_set(const char *const *dirs, int n_dirs) {
    sd_sampler_set *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    for (int i = 0; i < n_dirs; i++)
        if (add_dir(&s->dirs, &s->n_dirs, &s->cap_dirs, dirs[i], strlen(dirs[i]))) {
            sd_samplers_close(s);
            return NULL;
        }
    return s;
}

/* Probes every file of one directory; load: dlopen the good ones (the
 * first of each name). */
static int scan_dir(sd_sampler_set *s, const char *dir, int load, sd_err *e) {
    char **paths;
    int n;
    if (list_dir(s, dir, &paths, &n))
        return sd_fail(e, "out of memory loading sampler plugins");
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        int fresh, oom;
        probed *f = record(s, paths[i], &fresh, &oom, e);
        if (oom)
            rc = -1;
        else if (!f || !fresh || !f->ok || !load)
            continue;
        else if (sd_samplers_find(s, f->name) >= 0) {
            const char *first = s->plugins[sd_samplers_find(s, f->name)].file;
            if (add_warning(s, "%s: sampler '%s' is already provided by %s; ignored", f->path,
                            f->name, first))
                rc = sd_fail(e, "out of memory loading sampler plugins");
        } else if (load_probed(s, f))
            rc = sd_fail(e, "out of memory loading sampler plugins");
    }
    free_names(paths, n);
    return rc;
}

sd_sampler_set *sd_samplers_open(const char *const *dirs, int n_dirs, sd_err *e) {
    sd_sampler_set *s = new_set(dirs, n_dirs);
    if (!s) {
        sd_fail(e, "out of memory loading sampler plugins");
        return NULL;
    }
    for (int i = 0; i < n_dirs; i++)
        if (scan_dir(s, dirs[i], 1, e)) {
            sd_samplers_close(s);
            return NULL;
        }
    return s;
}

sd_sampler_set *sd_samplers_open_lazy(const char *const *dirs, int n_dirs, sd_err *e) {
    sd_sampler_set *s = new_set(dirs, n_dirs);
    if (!s)
        sd_fail(e, "out of memory loading sampler plugins");
    return s;
}

int sd_samplers_probe_all(sd_sampler_set *s, sd_err *e) {
    for (int i = 0; i < s->n_dirs; i++)
        if (scan_dir(s, s->dirs[i], 0, e))
            return -1;
    return 0;
}

/* Loads f when it is good and provides name. Returns 1 when loaded, 0 when
 * not this one, -1 on out of memory. */
static int take_if(sd_sampler_set *s, const probed *f, const char *name, sd_err *e) {
    if (!f || !f->ok || strcmp(f->name, name))
        return 0;
    int had = s->n;
    if (load_probed(s, f))
        return sd_fail(e, "out of memory loading sampler plugins");
    return s->n > had;
}

static int load_failed(sd_err *e) {
    sd_fail(e, "out of memory loading sampler plugins");
    return -2;
}

/* Per directory, in search order: <name>.so first (the usual case costs one
 * probe), then the directory's other *.so files, each probed in a child. */
int sd_samplers_load(sd_sampler_set *s, const char *name, sd_err *e) {
    int idx = sd_samplers_find(s, name);
    if (idx >= 0)
        return idx;
    for (int i = 0; i < s->n_dirs; i++) {
        char *guess = format("%s.so", name);
        char *path = guess ? join_path(s->dirs[i], guess) : NULL;
        free(guess);
        if (!path)
            return load_failed(e);
        int fresh, oom = 0, r = 0;
        struct stat st;
        if (!stat(path, &st)) {
            probed *f = record(s, path, &fresh, &oom, e);
            r = oom ? -1 : take_if(s, f, name, e);
        }
        free(path);
        if (r)
            return r < 0 ? -2 : s->n - 1;
        char **paths;
        int n;
        if (list_dir(s, s->dirs[i], &paths, &n))
            return load_failed(e);
        for (int k = 0; k < n && !r; k++) {
            probed *f = record(s, paths[k], &fresh, &oom, e);
            r = oom ? -1 : take_if(s, f, name, e);
        }
        free_names(paths, n);
        if (r)
            return r < 0 ? -2 : s->n - 1;
    }
    find_desc(s, name, e);
    return -1;
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
    for (int i = 0; i < s->n_probed; i++) {
        free(s->probed[i].path);
        free(s->probed[i].text);
    }
    sd_plugin_dirs_free(s->dirs, s->n_dirs);
    free(s->probed);
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
    return (i >= 0 && i < s->n) ? s->plugins[i].d.name : NULL;
}

const char *sd_samplers_file(const sd_sampler_set *s, int i) {
    return (i >= 0 && i < s->n) ? s->plugins[i].file : NULL;
}

/* 1 when f is the first good file providing its name (the one that wins). */
static int first_of_name(const sd_sampler_set *s, int i) {
    for (int j = 0; j < i; j++)
        if (s->probed[j].ok && !strcmp(s->probed[j].name, s->probed[i].name))
            return 0;
    return s->probed[i].ok;
}

char *sd_samplers_list(const sd_sampler_set *s, sd_err *e) {
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    int shown = 0;
    for (int i = 0; i < s->n_probed; i++)
        if (first_of_name(s, i)) {
            fputs(s->probed[i].text, out);
            shown++;
        }
    if (shown == 0)
        fprintf(out, "no samplers loaded\n");
    for (int i = 0; i < s->n_probed; i++)
        if (!s->probed[i].ok)
            fprintf(out, "broken  (%s): %s\n", s->probed[i].path, s->probed[i].text);
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
static void param_names(const stage_def *d, char *buf, size_t cap) {
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

/* The plugin of the stage called name (loaded), or NULL with the names of
 * the good plugins probed so far. */
static const sd_plugin *find_desc(const sd_sampler_set *s, const char *name, sd_err *e) {
    int idx = sd_samplers_find(s, name);
    if (idx >= 0)
        return &s->plugins[idx];
    char avail[SD_ERRLEN / 2] = "";
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < s->n_probed; i++)
        if (first_of_name(s, i))
            appendf(avail, sizeof avail, &used, "%s%s", shown++ ? ", " : "", s->probed[i].name);
    sd_fail(e, "unknown sampler '%s' (available: %s)", name,
            shown ? avail : "none, no plugin loaded");
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Chains: "penalty,top_k,nucleus"
 * ------------------------------------------------------------------------ */

typedef struct chain_spec {
    int n;
    char names[MAX_STAGES][SD_SAMPLER_MAX_NAME + 1];
} chain_spec;

/* The reference tool's names for two of the built-ins. */
static const char *alias(const char *name) {
    if (!strcmp(name, "topk"))
        return "top_k";
    if (!strcmp(name, "topknucleus"))
        return "top_k_nucleus";
    return name;
}

static int split_chain(const char *spec, chain_spec *c, sd_err *e) {
    c->n = 0;
    const char *p = spec;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0)
            return sd_fail(e, "sampler chain '%s': stage %d is empty", spec, c->n + 1);
        if (c->n == MAX_STAGES)
            return sd_fail(e, "sampler chain '%s': more than %d stages", spec, MAX_STAGES);
        if (len > SD_SAMPLER_MAX_NAME)
            return sd_fail(e, "unknown sampler '%.*s' (names have at most %d characters)",
                           (int)(len > 40 ? 40 : len), p, SD_SAMPLER_MAX_NAME);
        char name[SD_SAMPLER_MAX_NAME + 1];
        memcpy(name, p, len);
        name[len] = '\0';
        snprintf(c->names[c->n], sizeof c->names[0], "%s", alias(name));
        for (int i = 0; i < c->n; i++)
            if (!strcmp(c->names[i], c->names[c->n]))
                return sd_fail(e, "sampler chain '%s': stage '%s' appears twice", spec,
                               c->names[i]);
        c->n++;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

int sd_samplers_load_chain(sd_sampler_set *s, const char *spec, sd_err *e) {
    chain_spec c;
    if (split_chain(spec, &c, e))
        return -1;
    for (int i = 0; i < c.n; i++) {
        int r = sd_samplers_load(s, c.names[i], e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The plugins of the chain's stages, checked for its shape. */
static int resolve_chain(const sd_sampler_set *s, const char *spec, const sd_plugin **pl,
                         int *n, sd_err *e) {
    chain_spec c;
    if (split_chain(spec, &c, e))
        return -1;
    for (int i = 0; i < c.n; i++)
        if (!(pl[i] = find_desc(s, c.names[i], e)))
            return -1;
    const stage_def *last = &pl[c.n - 1]->d;
    if (last->kind != SD_STAGE_SAMPLE)
        return sd_fail(e, "sampler chain '%s': its last stage '%s' is a logits stage; end the "
                          "chain with a sampling stage (greedy, multinomial, top_k, nucleus, "
                          "mirostat, ...)", spec, last->name);
    *n = c.n;
    return 0;
}

static int has_param(const stage_def *d, const char *key, size_t klen) {
    for (int j = 0; j < d->n_params; j++)
        if (strlen(d->params[j].name) == klen && !strncmp(d->params[j].name, key, klen))
            return j;
    return -1;
}

/* The stage a "key=value" or "stage.key=value" string is for: *stage, *param
 * (index in the stage's table), *val (the text after '='). */
static int route_arg(const sd_plugin *const *pl, int n, const char *arg, int *stage, int *param,
                     const char **val, sd_err *e) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return sd_fail(e, "%s: sampler argument '%s' is not key=value", pl[n - 1]->d.name, arg);
    *val = eq + 1;
    const char *key = arg;
    size_t klen = (size_t)(eq - arg);
    const char *dot = memchr(arg, '.', klen);
    if (dot) {
        size_t slen = (size_t)(dot - arg);
        *stage = -1;
        for (int i = 0; i < n; i++)
            if (strlen(pl[i]->d.name) == slen && !strncmp(pl[i]->d.name, arg, slen))
                *stage = i;
        if (*stage < 0) {
            char names[SD_ERRLEN / 2] = "";
            size_t used = 0;
            for (int i = 0; i < n; i++)
                appendf(names, sizeof names, &used, "%s%s", i ? ", " : "", pl[i]->d.name);
            return sd_fail(e, "sampler argument '%s': no stage '%.*s' in the chain (stages: %s)",
                           arg, (int)slen, arg, names);
        }
        key = dot + 1;
        klen = (size_t)(eq - key);
    } else {
        /* unqualified: the last stage when it has the key, else the one
         * stage that has it */
        *stage = has_param(&pl[n - 1]->d, key, klen) >= 0 ? n - 1 : -1;
        for (int i = 0; i < n - 1 && *stage < 0; i++)
            if (has_param(&pl[i]->d, key, klen) >= 0) {
                for (int j = i + 1; j < n - 1; j++)
                    if (has_param(&pl[j]->d, key, klen) >= 0)
                        return sd_fail(e, "sampler argument '%s': stages %s and %s both have "
                                          "'%.*s'; write %s.%.*s=... or %s.%.*s=...",
                                       arg, pl[i]->d.name, pl[j]->d.name, (int)klen, key,
                                       pl[i]->d.name, (int)klen, key, pl[j]->d.name, (int)klen,
                                       key);
                *stage = i;
            }
        if (*stage < 0)
            *stage = n - 1; /* reported as unknown there */
    }
    const stage_def *d = &pl[*stage]->d;
    if ((*param = has_param(d, key, klen)) < 0) {
        char names[SD_ERRLEN / 2];
        param_names(d, names, sizeof names);
        return sd_fail(e, "%s: unknown parameter '%.*s' (accepted: %s)", d->name, (int)klen, key,
                       names);
    }
    return 0;
}

/* values[i] = the defaults of stage i overridden by the n_kv strings. On
 * failure *bad is the index of the string at fault. */
static int parse_args(const sd_plugin *const *pl, int n, const char *const *kv, int n_kv,
                      sd_sampler_value (*values)[SD_SAMPLER_MAX_PARAMS], int *bad, sd_err *e) {
    for (int i = 0; i < n; i++)
        default_values(&pl[i]->d, values[i]);
    for (int k = 0; k < n_kv; k++) {
        *bad = k;
        int st, j;
        const char *val;
        if (route_arg(pl, n, kv[k], &st, &j, &val, e) ||
            parse_value(pl[st]->d.name, &pl[st]->d.params[j], val, &values[st][j], e))
            return -1;
    }
    return 0;
}

int sd_sampler_check(const sd_sampler_set *s, const char *spec, const char *const *kv, int n_kv,
                     int *bad_kv, sd_err *e) {
    *bad_kv = -1;
    const sd_plugin *pl[MAX_STAGES];
    int n;
    sd_sampler_value values[MAX_STAGES][SD_SAMPLER_MAX_PARAMS];
    if (resolve_chain(s, spec, pl, &n, e))
        return -1;
    return parse_args(pl, n, kv, n_kv, values, bad_kv, e);
}

/* ---------------------------------------------------------------------------
 * Chain instances
 * ------------------------------------------------------------------------ */

sd_sampler *sd_sampler_create(const sd_sampler_set *s, const char *spec, const char *const *kv,
                              int n_kv, int max_vocab, sd_err *e) {
    sd_engine_info info = {SD_SAMPLER_ABI_VERSION_2, sizeof info, max_vocab, DEFAULT_HISTORY,
                           SD_ROLE_OTHER, 0, NULL, NULL, NULL};
    return sd_sampler_create_for(s, spec, kv, n_kv, &info, e);
}

sd_sampler *sd_sampler_create_for(const sd_sampler_set *s, const char *spec,
                                  const char *const *kv, int n_kv, const sd_engine_info *info,
                                  sd_err *e) {
    const sd_plugin *pl[MAX_STAGES];
    int n, bad;
    if (resolve_chain(s, spec, pl, &n, e))
        return NULL;
    if (info->n_vocab < 1) {
        sd_fail(e, "%s: max_vocab must be >= 1, got %d", spec, (int)info->n_vocab);
        return NULL;
    }
    if (info->max_history < 1) {
        sd_fail(e, "%s: max_history must be >= 1, got %d", spec, (int)info->max_history);
        return NULL;
    }
    sd_sampler *p = calloc(1, sizeof *p);
    if (!p) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    p->max_vocab = info->n_vocab;
    p->max_history = info->max_history;
    p->last = -1;
    sd_sampler_value values[MAX_STAGES][SD_SAMPLER_MAX_PARAMS];
    if (parse_args(pl, n, kv, n_kv, values, &bad, e))
        goto fail;
    for (int b = 0; b < 3; b++)
        if (!(p->buf[b] = malloc((size_t)info->n_vocab * sizeof *p->buf[b])))
            goto oom;
    for (int i = 0; i < n; i++) {
        stage *st = &p->st[i];
        st->d = &pl[i]->d;
        st->file = pl[i]->file;
        memcpy(st->values, values[i], sizeof st->values);
        char err[256] = "";
        st->handle = st->d->abi == 1
                         ? st->d->v1->create(st->values, info->n_vocab, err, sizeof err)
                         : st->d->v2->create(info, st->values, err, sizeof err);
        if (!st->handle) {
            err[sizeof err - 1] = '\0';
            sd_fail(e, "%s: %s (plugin %s)", st->d->name, err[0] ? err : "create failed",
                    st->file);
            goto fail;
        }
        p->n++;
        p->history |= st->d->history;
    }
    if (p->history && !(p->hist = malloc((size_t)info->max_history * sizeof *p->hist)))
        goto oom;
    return p;
oom:
    sd_fail(e, "out of memory");
fail:
    sd_sampler_destroy(p);
    return NULL;
}

void sd_sampler_destroy(sd_sampler *p) {
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        (p->st[i].d->abi == 1 ? p->st[i].d->v1->destroy : p->st[i].d->v2->destroy)(
            p->st[i].handle);
    for (int b = 0; b < 3; b++)
        free(p->buf[b]);
    free(p->hist);
    free(p);
}

static const stage *final_stage(const sd_sampler *p) {
    return &p->st[p->n - 1];
}

const char *sd_sampler_name(const sd_sampler *p) {
    return final_stage(p)->d->name;
}

int sd_sampler_is_greedy(const sd_sampler *p) {
    return (final_stage(p)->d->flags & SD_SAMPLER_FLAG_ARGMAX) ? 1 : 0;
}

int sd_sampler_n_stages(const sd_sampler *p) {
    return p->n;
}

int sd_sampler_keeps_history(const sd_sampler *p) {
    return p->history;
}

int sd_sampler_describe(const sd_sampler *p, char *buf, size_t cap) {
    char tmp[SD_ERRLEN] = "";
    size_t used = 0;
    for (int s = 0; s < p->n; s++) {
        const stage_def *d = p->st[s].d;
        appendf(tmp, sizeof tmp, &used, "%s%s(", s ? "," : "", d->name);
        for (int i = 0; i < d->n_params; i++) {
            const sd_sampler_param *q = &d->params[i];
            if (q->type == SD_SAMPLER_INT)
                appendf(tmp, sizeof tmp, &used, "%s%s=%" PRId64, i ? ", " : "", q->name,
                        p->st[s].values[i].i);
            else
                appendf(tmp, sizeof tmp, &used, "%s%s=%.15g", i ? ", " : "", q->name,
                        p->st[s].values[i].f);
        }
        appendf(tmp, sizeof tmp, &used, ")");
    }
    return snprintf(buf, cap, "%s", tmp);
}

/* One row through the chain at the current history into out[n_vocab]:
 * each stage's output feeds the next; a sampling stage before the last
 * keeps the logits of its support; an argmax stage is computed here. */
static int run_row(sd_sampler *p, const float *logits, float *out, int n_vocab, sd_err *e) {
    const float *in = logits;
    char why[160];
    for (int i = 0; i < p->n; i++) {
        const stage *st = &p->st[i];
        const stage_def *d = st->d;
        int final = i == p->n - 1;
        float *dst = final ? out : p->buf[i & 1];
        if (d->flags & SD_SAMPLER_FLAG_ARGMAX) {
            memset(dst, 0, (size_t)n_vocab * sizeof *dst);
            dst[first_max(in, n_vocab)] = 1.0f;
        } else {
            if (d->abi == 1 ? d->v1->process(st->handle, in, dst, 1, n_vocab)
                            : d->v2->process(st->handle, in, dst, n_vocab))
                return sd_fail(e, "%s: process failed: plugin %s returned an error on 1 row(s) "
                                  "of %d", d->name, st->file, n_vocab);
            if (check_stage_output(d, dst, n_vocab, why, sizeof why))
                return sd_fail(e, "%s: process returned an invalid %s: %s (plugin %s)", d->name,
                               d->kind == SD_STAGE_LOGITS ? "logits row" : "distribution", why,
                               st->file);
        }
        if (!final && d->kind == SD_STAGE_SAMPLE)
            for (int j = 0; j < n_vocab; j++)
                dst[j] = dst[j] > 0 ? in[j] : -INFINITY;
        in = dst;
    }
    return 0;
}

static int check_shape(const sd_sampler *p, int n_rows, int n_vocab, sd_err *e) {
    if (n_rows < 1 || n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad shape %d x %d (n_vocab must be in [1, %d])", sd_sampler_name(p),
                       n_rows, n_vocab, p->max_vocab);
    return 0;
}

int sd_sampler_probs(sd_sampler *p, const float *logits, float *probs, int n_rows,
                     int n_vocab, sd_err *e) {
    if (check_shape(p, n_rows, n_vocab, e))
        return -1;
    for (int r = 0; r < n_rows; r++)
        if (run_row(p, logits + (size_t)r * n_vocab, probs + (size_t)r * n_vocab, n_vocab, e))
            return -1;
    p->last = p->n_hist;
    return 0;
}

int sd_sampler_sample(sd_sampler *p, const float *probs, int n_vocab, sd_rng *r,
                      int32_t *id, sd_err *e) {
    const stage *st = final_stage(p);
    const stage_def *d = st->d;
    if (n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad n_vocab %d (must be in [1, %d])", d->name, n_vocab,
                       p->max_vocab);
    int32_t t;
    if (d->flags & SD_SAMPLER_FLAG_ARGMAX) {
        t = first_max(probs, n_vocab);
    } else {
        sd_sampler_rng lr = {rng_uniform, r};
        t = (d->abi == 1 ? d->v1->sample : d->v2->sample)(st->handle, probs, n_vocab, &lr);
    }
    if (t < 0 || t >= n_vocab)
        return sd_fail(e, "%s: sample returned %" PRId32 ", outside [0, %d) (plugin %s)",
                       d->name, t, n_vocab, st->file);
    /* A token the distribution excludes would be emitted silently, and in
     * speculative decoding break the rejection sampling's exactness. */
    if (!(probs[t] > 0))
        return sd_fail(e, "%s: sample returned token %" PRId32 ", which has probability 0 (plugin %s)",
                       d->name, t, st->file);
    *id = t;
    return 0;
}

/* ---------------------------------------------------------------------------
 * History
 * ------------------------------------------------------------------------ */

int sd_sampler_reset(sd_sampler *p, const int32_t *prompt, int n, sd_err *e) {
    p->last = -1;
    if (!p->history)
        return 0;
    if (n < 0 || n > p->max_history)
        return sd_fail(e, "%s: prompt of %d tokens is longer than the history (%d)",
                       sd_sampler_name(p), n, p->max_history);
    memcpy(p->hist, prompt, (size_t)n * sizeof *p->hist);
    p->n_hist = p->n_prompt = n;
    for (int i = 0; i < p->n; i++)
        if (p->st[i].d->history && p->st[i].d->v2->reset(p->st[i].handle, prompt, n))
            return sd_fail(e, "%s: reset failed (plugin %s)", p->st[i].d->name, p->st[i].file);
    return 0;
}

int sd_sampler_need(sd_sampler *p, const int32_t *seq, int pos, sd_err *e) {
    if (!p->history)
        return pos;
    int l = 0, lim = p->n_hist < pos ? p->n_hist : pos;
    while (l < lim && p->hist[l] == seq[l])
        l++;
    if (l < p->n_prompt)
        return sd_fail(e, "%s: the sequence differs from the prompt at position %d (reset the "
                          "sampler for a new generation)", sd_sampler_name(p), l);
    if (pos > p->max_history)
        return sd_fail(e, "%s: position %d is past the sampler's history (%d tokens)",
                       sd_sampler_name(p), pos, p->max_history);
    if (l < p->n_hist) {
        for (int i = 0; i < p->n; i++)
            if (p->st[i].d->history &&
                p->st[i].d->v2->rollback(p->st[i].handle, p->n_hist - l))
                return sd_fail(e, "%s: rollback(%d) failed (plugin %s)", p->st[i].d->name,
                               p->n_hist - l, p->st[i].file);
        p->n_hist = l;
        p->last = -1;
    }
    return p->last == l && l < pos ? l + 1 : l;
}

int sd_sampler_dist(sd_sampler *p, const int32_t *seq, int pos, const float *rows, int first,
                    float *probs, int n_vocab, sd_err *e) {
    if (check_shape(p, 1, n_vocab, e))
        return -1;
    if (!p->history)
        return probs ? sd_sampler_probs(p, rows + (size_t)(pos - first) * n_vocab, probs, 1,
                                        n_vocab, e)
                     : 0;
    int need = sd_sampler_need(p, seq, pos, e);
    if (need < 0)
        return -1;
    if (need < first)
        return sd_fail(e, "%s: the history needs the row of position %d, the rows given start "
                          "at %d", sd_sampler_name(p), need, first);
    for (int j = p->n_hist; j < pos; j++) {
        if (j != p->last &&
            run_row(p, rows + (size_t)(j - first) * n_vocab, p->buf[2], n_vocab, e))
            return -1;
        for (int i = 0; i < p->n; i++)
            if (p->st[i].d->history && p->st[i].d->v2->accept(p->st[i].handle, seq[j]))
                return sd_fail(e, "%s: accept(%" PRId32 ") failed (plugin %s)", p->st[i].d->name,
                               seq[j], p->st[i].file);
        p->hist[p->n_hist++] = seq[j];
        p->last = -1;
    }
    if (!probs)
        return 0;
    if (run_row(p, rows + (size_t)(pos - first) * n_vocab, probs, n_vocab, e))
        return -1;
    p->last = pos;
    return 0;
}
