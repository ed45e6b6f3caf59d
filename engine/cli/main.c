/* specdec: run a prompt through one or more decoding strategies, once from
 * the flags or interactively. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/cli/args.h"
#include "engine/cli/repl.h"
#include "engine/cli/run.h"

static char *read_file(const char *path, sd_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sd_fail(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
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
    fclose(f);
    if (!buf || bad) {
        free(buf);
        if (bad) sd_fail(e, "%s: cannot read: %s", path, read_errno ? strerror(read_errno) : "read error");
        else sd_fail(e, "%s: out of memory", path);
        return NULL;
    }
    buf[n] = 0;
    if (strlen(buf) != n) {
        free(buf);
        sd_fail(e, "%s: the prompt file contains a NUL byte", path);
        return NULL;
    }
    return buf;
}

static int list_samplers(const sd_args *a, sd_err *e) {
    char **dirs;
    int n_dirs;
    if (sd_plugin_dirs(a->c.plugin_dirs, a->c.n_plugin_dirs, &dirs, &n_dirs, e)) return -1;
    sd_sampler_set *s = sd_samplers_open((const char *const *)dirs, n_dirs, e);
    sd_plugin_dirs_free(dirs, n_dirs);
    if (!s) return -1;
    sd_cli_warnings(s);
    sd_samplers_list(s, stdout);
    sd_samplers_close(s);
    return 0;
}

static int run(const sd_args *a, sd_err *e) {
    if (a->list_samplers) return list_samplers(a, e);
    char *file_text = NULL;
    if (a->prompt_file && !(file_text = read_file(a->prompt_file, e))) return -1;
    sd_cli cli = {.json = a->json, .debug = a->debug};
    if (sd_session_open(&cli.s, &a->c, e)) {
        free(file_text);
        return -1;
    }
    sd_cli_warnings(cli.s.samplers);
    const char *prompt = file_text ? file_text : a->prompt;
    int rc = 0;
    if (a->interactive) rc = sd_repl_run(&cli, prompt, e);
    else rc = sd_cli_run(&cli, prompt, stdout, e);
    sd_session_close(&cli.s);
    free(file_text);
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
        sd_args_usage(stdout);
        return 0;
    }
    if (run(&a, &e)) {
        fprintf(stderr, "specdec: %s\n", e.msg);
        return 1;
    }
    return 0;
}
