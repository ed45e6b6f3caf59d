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

typedef struct sd_plugin {
    char *file;
    void *dl;
    const sd_sampler_desc *d;
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

struct sd_sampler {
    const sd_sampler_desc *d;
    const char *file; /* the plugin's, owned by the set */
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

static void format_entry(FILE *out, const sd_sampler_desc *d, const char *file) {
    fprintf(out, "%s  (%s)\n", d->name, file);
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

/* Opens path and returns its checked descriptor (NULL with why). phase,
 * when given, is told each step before plugin code runs. */
static const sd_sampler_desc *open_plugin(const char *path, void **dl, void (*phase)(int c),
                                          char *why, size_t len) {
    dlerror();
    if (phase)
        phase(PHASE_LOAD);
    /* RTLD_NOW: unresolved symbols fail here, not in the middle of a run. */
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        dlopen_reason(path, why, len);
        return NULL;
    }
    void *sym = dlsym(*dl, SD_SAMPLER_ENTRY_SYMBOL);
    if (!sym) {
        snprintf(why, len, "missing symbol %s", SD_SAMPLER_ENTRY_SYMBOL);
        return NULL;
    }
    const sd_sampler_desc *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    if (phase)
        phase(PHASE_DESC);
    const sd_sampler_desc *d = entry();
    if (!d) {
        snprintf(why, len, "%s() returned NULL", SD_SAMPLER_ENTRY_SYMBOL);
        return NULL;
    }
    return check_descriptor(d, why, len) ? NULL : d;
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
    const sd_sampler_desc *d = open_plugin(path, &dl, child_phase, r.why, sizeof r.why);
    if (d) {
        child_phase(PHASE_TEST);
        if (!self_test(d, r.why, sizeof r.why)) {
            r.ok = 1;
            snprintf(r.name, sizeof r.name, "%s", d->name);
            FILE *out = fmemopen(r.entry, sizeof r.entry, "w");
            if (out) {
                format_entry(out, d, path);
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
    case PHASE_DESC: return "in " SD_SAMPLER_ENTRY_SYMBOL "()";
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
        if (!strcmp(s->plugins[i].d->name, name))
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
    const sd_sampler_desc *d = open_plugin(f->path, &dl, NULL, why, sizeof why);
    if (d && strcmp(d->name, f->name))
        snprintf(why, sizeof why, "names sampler '%s' now, '%s' when probed", d->name, f->name);
    else if (d) {
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

static const sd_sampler_desc *find_desc(const sd_sampler_set *s, const char *name, sd_err *e);

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
    return (i >= 0 && i < s->n) ? s->plugins[i].d->name : NULL;
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

/* The descriptor of the sampler called name (loaded), or NULL with the
 * names of the good plugins probed so far. */
static const sd_sampler_desc *find_desc(const sd_sampler_set *s, const char *name, sd_err *e) {
    int idx = sd_samplers_find(s, name);
    if (idx >= 0)
        return s->plugins[idx].d;
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
    p->file = s->plugins[sd_samplers_find(s, name)].file;
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
        return sd_fail(e, "%s: process failed: plugin %s returned an error on %d row(s) of %d",
                       p->d->name, p->file, n_rows, n_vocab);
    char why[160];
    if (check_distribution(probs, n_rows, n_vocab, why, sizeof why))
        return sd_fail(e, "%s: process returned an invalid distribution: %s (plugin %s)",
                       p->d->name, why, p->file);
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
        return sd_fail(e, "%s: sample returned %" PRId32 ", outside [0, %d) (plugin %s)",
                       p->d->name, t, n_vocab, p->file);
    /* A token the distribution excludes would be emitted silently, and in
     * speculative decoding break the rejection sampling's exactness. */
    if (!(probs[t] > 0))
        return sd_fail(e, "%s: sample returned token %" PRId32 ", which has probability 0 (plugin %s)",
                       p->d->name, t, p->file);
    *id = t;
    return 0;
}
