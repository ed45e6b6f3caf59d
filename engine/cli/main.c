/* specdec: run a prompt through one or more decoding strategies, once from
 * the flags or interactively. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/cli/args.h"
#include "engine/cli/settings.h"
#include "engine/cli/perplexity.h"
#include "engine/cli/repl.h"
#include "engine/cli/run.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/backend_cuda.h"

/* The Makefile passes the version (VERSION, and `git describe` of the
 * checkout when there is one). */
#ifndef SD_VERSION
#error "SD_VERSION is defined by the Makefile"
#endif

/* The whole of path ("-": stdin) as a string. */
static char *read_file(const char *path, sd_err *e) {
    int from_stdin = !strcmp(path, "-");
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        sd_fail(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (!from_stdin) fclose(f);
        sd_fail(e, "%s: is a directory", path);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    int read_errno = 0;
    char *buf = malloc(cap);
    while (buf) {
        errno = 0;
        n += fread(buf + n, 1, cap - n - 1, f);
        read_errno = errno;
        if (n < cap - 1) break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int bad = ferror(f);
    if (!from_stdin) fclose(f);
    if (!buf || bad) {
        free(buf);
        if (bad) sd_fail(e, "%s: cannot read: %s", path, read_errno ? strerror(read_errno) : "read error");
        else sd_fail(e, "%s: out of memory", path);
        return NULL;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        free(buf);
        sd_fail(e, "%s: the file contains a NUL byte", path);
        return NULL;
    }
    return buf;
}

/* The version, and what this build and this machine can run: whether the
 * CUDA backend is compiled in (and a GPU usable), the CPU's SIMD levels. */
static void print_version(FILE *out) {
    char why[256];
    fprintf(out, "specdec %s\n", SD_VERSION);
    if (sd_cuda_available(why, sizeof why)) fprintf(out, "cuda: built in, a GPU is usable\n");
    else fprintf(out, "cuda: %s\n", why);
    int best = sd_cpu_isa_detect();
    fprintf(out, "cpu: SIMD levels built in:");
    for (int isa = SD_ISA_SCALAR; isa <= SD_ISA_AMX; isa++) fprintf(out, " %s", sd_isa_name(isa));
    fprintf(out, "; this machine runs %s (SD_ISA caps it)\n", sd_isa_name(best));
}

/* Each --plugin-dir must be a folder: the library only warns about an
 * unreadable entry of the search path (the environment's may be stale),
 * but a folder named on the command line that is not there is a typo. */
static int check_plugin_dirs(const sd_args *a, sd_err *e) {
    for (int i = 0; i < a->c.n_plugin_dirs; i++) {
        const char *dir = a->c.plugin_dirs[i];
        struct stat sb;
        if (stat(dir, &sb))
            return sd_fail(e, "--plugin-dir %s: cannot open: %s", dir, strerror(errno));
        if (!S_ISDIR(sb.st_mode)) return sd_fail(e, "--plugin-dir %s: not a directory", dir);
    }
    return 0;
}

/* Probes every plugin of the search path (each in a child process) and
 * lists them, the broken ones with their reason, then the warnings (names
 * shadowed, version-1 plugins that look stateful, broken files) on stderr;
 * this process dlopens none. */
static int list_samplers(const sd_args *a, sd_err *e) {
    sd_sampler_set *s = sd_session_plugins(&a->c, e);
    if (!s) return -1;
    int rc = sd_cli_list_samplers(s, stdout, e);
    fflush(stdout);
    if (!rc) sd_cli_warnings(s);
    sd_samplers_close(s);
    return rc;
}

/* --check-sampler NAME: the load-time checks of the plugin providing
 * NAME. Returns the exit status: 0 it passes (a verdict line on stderr),
 * 1 no good plugin provides it, 2 the search itself failed. */
static int verify_sampler(const sd_args *a, sd_err *e) {
    sd_sampler_set *s = sd_session_plugins(&a->c, e);
    if (!s) return 2;
    const char *file = NULL;
    int rc = sd_samplers_verify(s, a->check_sampler, &file, e);
    if (!rc)
        fprintf(stderr, "specdec: sampler '%s' passes the load-time checks (plugin %s)\n",
                a->check_sampler, file);
    sd_samplers_close(s);
    if (rc == -2) return 2;
    if (rc) {
        char flag[SD_ERRLEN / 2];
        snprintf(flag, sizeof flag, "--check-sampler %s", a->check_sampler);
        sd_wrap(e, flag);
        return 1;
    }
    return 0;
}

/* --sampler and --sampler-arg against the plugins found for the chain's
 * stages, before any model is loaded, so that a bad name or value is a
 * usage error and costs no model load. The set, holding those plugins,
 * goes on to the session. Returns the exit status: 0, 2 for a bad name or value (the
 * message names the flag and the value), 1 when the search itself failed
 * (out of memory, no fork). */
static int check_sampler(const sd_args *a, sd_sampler_set *s, sd_err *e) {
    int bad = -1, found = sd_samplers_load_chain(s, a->c.sampler, e);
    if (found == -2) return 1;
    if (found >= 0 &&
        !sd_sampler_check(s, a->c.sampler, a->c.sampler_args, a->c.n_sampler_args, &bad, e))
        return 0;
    /* The plugin that would have provided the name may be among the ones
     * skipped: say why. */
    sd_cli_warnings(s);
    char flag[SD_ERRLEN / 2];
    if (bad < 0)
        snprintf(flag, sizeof flag, "--sampler %s", a->c.sampler);
    else
        snprintf(flag, sizeof flag, "--sampler-arg %s", a->c.sampler_args[bad]);
    sd_wrap(e, flag);
    return 2;
}

/* Returns the exit status. */
static int run(const sd_args *a, sd_err *e) {
    if (a->list_samplers) return list_samplers(a, e) ? 1 : 0;
    sd_sampler_set *set = sd_session_plugins(&a->c, e);
    if (!set) return 1;
    int rc = a->c.sampler ? check_sampler(a, set, e) : 0;
    char *file_text = NULL;
    if (!rc && a->prompt_file && !(file_text = read_file(a->prompt_file, e))) rc = 1;
    if (rc) {
        sd_samplers_close(set);
        return rc;
    }
    sd_cli cli = {.json = a->json,
                  .jsonl = a->jsonl,
                  .debug = a->debug,
                  .sampler_timeout = a->sampler_timeout};
    sd_config c = a->c;
    c.progress = sd_cli_progress_cb();
    c.progress_ud = &cli.progress;
    if (sd_session_open_with(&cli.s, &c, set, e)) {
        free(file_text);
        return 1;
    }
    sd_cli_warnings(cli.s.samplers);
    if (cli.s.notice[0]) fprintf(stderr, "specdec: note: %s\n", cli.s.notice);
    const char *prompt = file_text ? file_text : a->prompt;
    if (a->interactive) rc = sd_repl_run(&cli, prompt, e);
    else rc = sd_cli_run(&cli, prompt, stdout, e);
    sd_session_close(&cli.s);
    free(file_text);
    return rc ? 1 : 0;
}

/* --perplexity FILE; returns the exit status (1 for the file or the model,
 * 2 for a flag value the model cannot take). */
static int perplexity(const sd_args *a, sd_err *e) {
    char *text = read_file(a->perplexity, e);
    if (!text) return 1;
    int rc = sd_cli_perplexity(a, text, stdout, e);
    free(text);
    return rc;
}

int main(int argc, char **argv) {
    sd_args a;
    sd_err e = {{0}};
    if (sd_args_parse(&a, argc, argv, &e)) {
        fprintf(stderr, "specdec: %s\n", e.msg);
        return 2;
    }
    if (a.help) {
        sd_settings_usage(stdout);
        return 0;
    }
    if (a.version) {
        print_version(stdout);
        return 0;
    }
    /* before any plugin code runs, the probes' children included */
    if (sd_sampler_guard(2, a.sampler_timeout, &e) || check_plugin_dirs(&a, &e)) {
        fprintf(stderr, "specdec: %s\n", e.msg);
        return 2;
    }
    if (a.check_sampler) {
        int rc = verify_sampler(&a, &e);
        if (rc) fprintf(stderr, "specdec: %s\n", e.msg);
        return rc;
    }
    if (a.perplexity) {
        int rc = perplexity(&a, &e);
        if (rc) fprintf(stderr, "specdec: %s\n", e.msg);
        return rc;
    }
    int rc = run(&a, &e);
    if (rc) fprintf(stderr, "specdec: %s\n", e.msg);
    return rc;
}
