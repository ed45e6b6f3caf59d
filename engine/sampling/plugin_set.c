/* The plugin set: scanning the search path, probing each file once,
 * dlopening the good ones, warnings and the listing. */
#include "engine/sampling/plugin_set.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/sampling/host_text.h"
#include "engine/sampling/plugin_dirs.h"
#include "engine/sampling/plugin_probe.h"

static int add_warning(sd_sampler_set *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int add_warning(sd_sampler_set *s, const char *fmt, ...) {
    if (sd_host_grow((void **)&s->warnings, &s->cap_warn, s->n_warn + 1, sizeof *s->warnings))
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *w = sd_vformat(fmt, ap);
    va_end(ap);
    if (!w)
        return -1;
    s->warnings[s->n_warn++] = w;
    return 0;
}

int sd_samplers_find(const sd_sampler_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->plugins[i].d.d.name, name))
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
    int bad = sd_plugin_open(f->path, &dl, &d, NULL, why, sizeof why);
    if (!bad && strcmp(d.d.name, f->name))
        snprintf(why, sizeof why, "names sampler '%s' now, '%s' when probed", d.d.name, f->name);
    else if (!bad) {
        char *file = sd_format("%s", f->path);
        if (!file || sd_host_grow((void **)&s->plugins, &s->cap, s->n + 1, sizeof *s->plugins)) {
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
    if (!r || sd_host_grow((void **)&s->probed, &s->cap_probed, s->n_probed + 1, sizeof *s->probed)) {
        free(r);
        *oom = 1;
        sd_fail(e, "out of memory loading sampler plugins");
        return NULL;
    }
    if (sd_probe_file(path, r, err, sizeof err)) {
        free(r);
        *oom = 1;
        sd_fail(e, "%s", err);
        return NULL;
    }
    probed f = {sd_format("%s", path), st.st_dev, st.st_ino, r->ok, "",
                sd_format("%s", r->ok ? r->entry : r->why)};
    snprintf(f.name, sizeof f.name, "%s", r->name);
    char r_note[SD_ERRLEN];
    snprintf(r_note, sizeof r_note, "%s", r->note);
    free(r);
    int warned = (!f.ok && add_warning(s, "%s: %s", path, f.text)) ||
                 (f.ok && r_note[0] && add_warning(s, "%s: %s", path, r_note));
    if (!f.path || !f.text || warned) {
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
        if (sd_host_grow((void **)&names, &cap, n + 1, sizeof *names) ||
            !(names[n] = sd_format("%s", de->d_name))) {
            free_names(names, n);
            closedir(dp);
            return -1;
        }
        n++;
    }
    closedir(dp);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char *p = sd_join_path(dir, names[i]);
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
        if (sd_dirs_add(&s->dirs, &s->n_dirs, &s->cap_dirs, dirs[i], strlen(dirs[i]))) {
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

static int first_of_name(const sd_sampler_set *s, int i);

/* A good file whose name an earlier one provides is never used: a
 * plugin in a --plugin-dir replacing a built-in is often meant, but it
 * should not be silent. */
static int warn_shadowed(sd_sampler_set *s, int from) {
    for (int i = from; i < s->n_probed; i++) {
        const probed *f = &s->probed[i];
        if (!f->ok || first_of_name(s, i))
            continue;
        int j = 0;
        while (!(s->probed[j].ok && !strcmp(s->probed[j].name, f->name)))
            j++;
        if (add_warning(s, "%s: sampler '%s' is shadowed by %s (earlier in the search path); "
                           "not used",
                        f->path, f->name, s->probed[j].path))
            return -1;
    }
    return 0;
}

int sd_samplers_probe_all(sd_sampler_set *s, sd_err *e) {
    int from = s->n_probed;
    for (int i = 0; i < s->n_dirs; i++)
        if (scan_dir(s, s->dirs[i], 0, e))
            return -1;
    if (warn_shadowed(s, from))
        return sd_fail(e, "out of memory loading sampler plugins");
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
        char *guess = sd_format("%s.so", name);
        char *path = guess ? sd_join_path(s->dirs[i], guess) : NULL;
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
    sd_set_plugin(s, name, e);
    return -1;
}

int sd_samplers_verify(sd_sampler_set *s, const char *name, const char **file, sd_err *e) {
    *file = NULL;
    int r = sd_samplers_load(s, name, e);
    if (r >= 0) {
        *file = s->plugins[r].file;
        return 0;
    }
    if (r == -2)
        return -2;
    char *want = sd_format("/%s.so", name);
    if (!want)
        return load_failed(e);
    size_t wl = strlen(want);
    for (int i = 0; i < s->n_probed; i++) {
        const probed *f = &s->probed[i];
        size_t pl = strlen(f->path);
        if (!f->ok && pl >= wl && !strcmp(f->path + pl - wl, want)) {
            *file = f->path;
            sd_fail(e, "%s: %s", f->path, f->text);
            break;
        }
    }
    free(want);
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
    return (i >= 0 && i < s->n) ? s->plugins[i].d.d.name : NULL;
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

const sd_plugin *sd_set_plugin(const sd_sampler_set *s, const char *name, sd_err *e) {
    int idx = sd_samplers_find(s, name);
    if (idx >= 0)
        return &s->plugins[idx];
    char avail[SD_ERRLEN / 2] = "";
    size_t used = 0;
    int shown = 0;
    for (int i = 0; i < s->n_probed; i++)
        if (first_of_name(s, i))
            sd_appendf(avail, sizeof avail, &used, "%s%s", shown++ ? ", " : "", s->probed[i].name);
    sd_fail(e, "unknown sampler '%s' (available: %s)", name,
            shown ? avail : "none, no plugin loaded");
    return NULL;
}
