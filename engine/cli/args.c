#include "engine/cli/args.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine/cli/settings.h"
#include "engine/eval/perplexity.h"

int sd_threads_max(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? 4 * (int)(cores < 256 ? cores : 256) : 1024;
}

/* More threads than cores only adds switching; far more is a typo. */
static int sd_check_threads(const char *flag, int n, sd_err *e) {
    int max = sd_threads_max();
    if (n > max)
        return sd_fail(e, "%s: %d threads is more than 4x the %d cores (at most %d)", flag, n,
                       max / 4, max);
    return 0;
}

/* --perplexity reads its text from FILE and scores the second half of each
 * window of --ctx tokens, so the window must be even and score a token;
 * whether the model's context holds it is known once the model is read. */
static int check_perplexity(const sd_args *a, sd_err *e) {
    if (a->prompt || a->prompt_file || a->interactive)
        return sd_fail(e, "--perplexity reads its text from FILE: give no -p, -f or -i with it");
    int ctx = a->c.n_ctx;
    if (ctx && ctx < SD_PPL_MIN_CTX)
        return sd_fail(e, "--ctx: a window of %d is too small for --perplexity (at least %d)", ctx,
                       SD_PPL_MIN_CTX);
    if (ctx % 2)
        return sd_fail(e, "--ctx: %d is odd; --perplexity needs an even window (its second half "
                          "is scored)", ctx);
    return 0;
}

/* The flag arg names and its value, if attached: "--gamma=8" and "-n8"
 * carry theirs, "--gamma" and "-n" take the next word. */
static const sd_setting *split_flag(const char *arg, char *name, size_t cap, const char **value) {
    *value = NULL;
    if (arg[0] == '-' && arg[1] == '-') {
        size_t n = strcspn(arg, "=");
        if (arg[n]) *value = arg + n + 1;
        snprintf(name, cap, "%.*s", (int)(n < cap ? n : cap - 1), arg);
    } else if (arg[0] == '-' && arg[1] && arg[2]) {
        snprintf(name, cap, "%.2s", arg);
        *value = arg + 2;
    } else {
        snprintf(name, cap, "%s", arg);
    }
    const sd_setting *s = sd_setting_by_flag(name);
    /* an attached value on a short switch (-hx) is no flag */
    if (s && *value && arg[1] != '-' && (s->kind == SD_SET_ON || s->kind == SD_SET_OFF)) return NULL;
    return s;
}

int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e) {
    sd_args_defaults(a);
    int given_stop = 0, given_fill = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v;
        char name[64];
        const sd_setting *f = split_flag(arg, name, sizeof name, &v);
        if (!f) return sd_fail(e, "unknown option '%s' (see --help)", arg);
        if (f->off == offsetof(sd_args, c.stop_if_unknown)) {
            given_stop |= f->kind == SD_SET_ON;
            given_fill |= f->kind == SD_SET_OFF;
        }
        if ((f->kind == SD_SET_ON || f->kind == SD_SET_OFF) && !v) {
            *(int *)((char *)a + f->off) = f->kind == SD_SET_ON;
            continue;
        }
        if (!v) {
            if (i + 1 >= argc) return sd_fail(e, "%s needs a value", arg);
            v = argv[++i];
        }
        if (sd_setting_parse(f, a, v, name, e)) return -1;
        if (f->off == offsetof(sd_args, c.threads) && sd_check_threads(name, a->c.threads, e))
            return -1;
    }
    if (a->help || a->version || a->list_samplers || a->check_sampler) return 0;
    if (given_stop && given_fill)
        return sd_fail(e, "--fill-unknown and --stop-if-unknown contradict each other: give one");
    if (a->json && a->jsonl) return sd_fail(e, "give either --json or --jsonl, not both");
    if (!a->c.model) return sd_fail(e, "no model given (-m MODEL; see --help)");
    if (a->perplexity) return check_perplexity(a, e);
    if (a->chunks) return sd_fail(e, "--chunks needs --perplexity FILE");
    if (!a->interactive && !a->prompt && !a->prompt_file)
        return sd_fail(e, "no prompt given (-p TEXT, -f FILE or -i)");
    if (a->prompt && a->prompt_file) return sd_fail(e, "give either -p or -f, not both");
    if (a->interactive && a->prompt_file && !strcmp(a->prompt_file, "-"))
        return sd_fail(e, "-f - reads the prompt from stdin, where -i reads its lines: give one");
    if (a->c.system && !a->c.chat) return sd_fail(e, "--system needs --chat");
    if (a->c.draft && a->c.draft_layers) return sd_fail(e, "give either -d or --draft-layers, not both");
    const sd_strategy *needs = sd_strategies_needing_drafter(a->c.strategies);
    if (needs && !a->c.draft && !a->c.draft_layers)
        return sd_fail(e, "--strategy %s needs a drafter (-d DRAFT or --draft-layers K)", needs->name);
    if (a->c.n_sampler_args && !a->c.sampler) return sd_fail(e, "--sampler-arg needs --sampler NAME");
    if ((a->c.strategies & SD_STRAT_BEAM) && a->c.sampler && strcmp(a->c.sampler, "greedy"))
        return sd_fail(e, "--strategy beam applies no sampler (it ranks beams by the model's "
                          "log-probabilities): drop --sampler %s or run beam separately",
                       a->c.sampler);
    return 0;
}
