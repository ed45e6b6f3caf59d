#include "args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *flag, const char *s, long lo, long hi, int *out, sd_err *e) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno)
        return sd_fail(e, "%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi) return sd_fail(e, "%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_u64(const char *flag, const char *s, uint64_t *out, sd_err *e) {
    char *end;
    errno = 0;
    if (!*s || *s == '-') return sd_fail(e, "%s: '%s' is not a non-negative integer", flag, s);
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return sd_fail(e, "%s: '%s' is not a non-negative integer", flag, s);
    *out = v;
    return 0;
}

static int push(const char *flag, const char **list, int *n, const char *v, sd_err *e) {
    if (*n >= SD_MAX_LIST) return sd_fail(e, "%s: given more than %d times", flag, SD_MAX_LIST);
    list[(*n)++] = v;
    return 0;
}

void sd_args_usage(FILE *out) {
    fputs(
        "usage: specdec -m MODEL (-p PROMPT | -f FILE) [options]\n"
        "\n"
        "  -m, --model PATH        GGUF model (llama architecture)\n"
        "  -p, --prompt TEXT       prompt text\n"
        "  -f, --file PATH         read the prompt from a file\n"
        "  -n, --n-predict N       tokens to generate (default 128)\n"
        "      --chat              wrap the prompt in the model's chat template\n"
        "      --system TEXT       system message for --chat (default: the template's)\n"
        "      --ignore-eos        keep generating past end-of-sequence tokens\n"
        "      --no-cache          recompute the whole prefix every step (no KV cache)\n"
        "      --ctx N             context positions to allocate (default min(model, 4096))\n"
        "  -t, --threads N         CPU threads (default: all cores)\n"
        "      --seed S            seed for sampling (default: random, printed)\n"
        "      --sampler NAME      sampler plugin (default greedy)\n"
        "      --sampler-arg K=V   sampler parameter, repeatable\n"
        "      --list-samplers     list the sampler plugins found and exit\n"
        "      --plugin-dir DIR    search DIR for sampler plugins first, repeatable\n"
        "      --json              print one JSON object with ids, text and metrics\n"
        "  -h, --help              show this help\n"
        "\n"
        "Plugins are searched in --plugin-dir, then $SPECDEC_PLUGIN_PATH (colon-separated),\n"
        "then plugins/ beside the binary.\n",
        out);
}

int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e) {
    memset(a, 0, sizeof *a);
    a->n_predict = 128;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        /* flags without a value */
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) { a->help = 1; continue; }
        if (!strcmp(f, "--no-cache")) { a->no_cache = 1; continue; }
        if (!strcmp(f, "--ignore-eos")) { a->ignore_eos = 1; continue; }
        if (!strcmp(f, "--chat")) { a->chat = 1; continue; }
        if (!strcmp(f, "--json")) { a->json = 1; continue; }
        if (!strcmp(f, "--list-samplers")) { a->list_samplers = 1; continue; }
        /* flags with a value */
        static const char *valued[] = {"-m", "--model", "-p", "--prompt", "-f", "--file",
                                       "-n", "--n-predict", "-t", "--threads", "--ctx",
                                       "--seed", "--sampler", "--sampler-arg", "--plugin-dir",
                                       "--system"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            if (!strcmp(f, valued[k])) known = 1;
        if (!known) return sd_fail(e, "unknown option '%s' (see --help)", f);
        if (i + 1 >= argc) return sd_fail(e, "%s needs a value", f);
        const char *v = argv[++i];
        int r = 0;
        if (!strcmp(f, "-m") || !strcmp(f, "--model")) a->model = v;
        else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) a->prompt = v;
        else if (!strcmp(f, "-f") || !strcmp(f, "--file")) a->prompt_file = v;
        else if (!strcmp(f, "--system")) a->system = v;
        else if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) r = parse_int(f, v, 0, 1 << 24, &a->n_predict, e);
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) r = parse_int(f, v, 1, 1024, &a->threads, e);
        else if (!strcmp(f, "--ctx")) r = parse_int(f, v, 1, 1 << 24, &a->n_ctx, e);
        else if (!strcmp(f, "--seed")) { r = parse_u64(f, v, &a->seed, e); a->have_seed = 1; }
        else if (!strcmp(f, "--sampler")) a->sampler = v;
        else if (!strcmp(f, "--sampler-arg")) r = push(f, a->sampler_args, &a->n_sampler_args, v, e);
        else if (!strcmp(f, "--plugin-dir")) r = push(f, a->plugin_dirs, &a->n_plugin_dirs, v, e);
        if (r) return -1;
    }
    if (a->help || a->list_samplers) return 0;
    if (!a->model) return sd_fail(e, "no model given (-m MODEL; see --help)");
    if (!a->prompt && !a->prompt_file) return sd_fail(e, "no prompt given (-p TEXT or -f FILE)");
    if (a->prompt && a->prompt_file) return sd_fail(e, "give either -p or -f, not both");
    if (a->system && !a->chat) return sd_fail(e, "--system needs --chat");
    return 0;
}
