#include "args.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../generate/ngram.h"
#include "../model.h"

static int parse_int(const char *flag, const char *s, long lo, long hi, int *out, sd_err *e) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno) return sd_fail(e, "%s: '%s' is not an integer", flag, s);
    if (v < lo || v > hi) return sd_fail(e, "%s: %ld is out of range [%ld, %ld]", flag, v, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_num(const char *flag, const char *s, double lo, double hi, double *out,
                     sd_err *e) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v)) return sd_fail(e, "%s: '%s' is not a number", flag, s);
    if (v < lo || v > hi) return sd_fail(e, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
    *out = v;
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

static const struct {
    const char *name;
    int bit;
} strategies[] = {{"ar", SD_STRAT_AR},     {"spec", SD_STRAT_SPEC}, {"nasd", SD_STRAT_NASD},
                  {"beam", SD_STRAT_BEAM}, {"draft", SD_STRAT_DRAFT}};
#define N_STRATEGIES (sizeof strategies / sizeof strategies[0])

const char *sd_strategy_name(int bit) {
    for (size_t i = 0; i < N_STRATEGIES; i++)
        if (strategies[i].bit == bit) return strategies[i].name;
    return "?";
}

int sd_parse_strategies(const char *list, int *bits, sd_err *e) {
    int out = 0;
    const char *p = list;
    while (1) {
        size_t n = strcspn(p, ",");
        size_t i = 0;
        for (; i < N_STRATEGIES; i++)
            if (strlen(strategies[i].name) == n && !strncmp(p, strategies[i].name, n)) break;
        if (i == N_STRATEGIES)
            return sd_fail(e, "--strategy: unknown strategy '%.*s' (known: ar, spec, nasd, beam, draft)",
                           (int)(n > 40 ? 40 : n), p);
        out |= strategies[i].bit;
        if (!p[n]) break;
        p += n + 1;
    }
    *bits = out;
    return 0;
}

void sd_args_usage(FILE *out) {
    fputs(
        "usage: specdec -m MODEL (-p PROMPT | -f FILE | -i) [options]\n"
        "\n"
        "model and prompt\n"
        "  -m, --model PATH          target GGUF model (llama architecture)\n"
        "  -d, --draft PATH          draft model for speculative decoding (same vocabulary)\n"
        "      --draft-layers K      self-speculative drafter: the target's first K layers\n"
        "  -p, --prompt TEXT         prompt text\n"
        "  -f, --file PATH           read the prompt from a file\n"
        "  -i, --interactive         read prompts and /commands from stdin\n"
        "      --chat                wrap the prompt in the model's chat template\n"
        "      --system TEXT         system message for --chat (default: the template's)\n"
        "generation\n"
        "  -n, --n-predict N         tokens to generate (default 128)\n"
        "      --strategy LIST       comma list of ar,spec,nasd,beam,draft (default ar)\n"
        "      --ignore-eos          keep generating past end-of-sequence tokens\n"
        "      --no-cache            recompute the whole prefix every step (no KV cache)\n"
        "      --ctx N               context positions to allocate (default min(model, 4096))\n"
        "  -t, --threads N           CPU threads (default: all cores)\n"
        "      --device D            auto, cpu or cuda (default auto: cuda when a GPU is usable)\n"
        "      --draft-device D      backend of the draft model (default: as --device)\n"
        "speculative decoding and NASD\n"
        "      --gamma G             drafts per verification (default 4)\n"
        "      --skip-sample-adjustment  resample from p, not norm(max(0, p - q)), on rejection\n"
        "      --no-first-target     start drafting right after the prompt\n"
        "      --ngram-n N           NASD n-gram order (default 3)\n"
        "      --ngram-store KIND    multi (k-grams 2..N, longest wins) or one (N-grams only)\n"
        "      --filler-top-k K      target's top-K added to the store per position (default 3)\n"
        "      --stop-if-unknown     stop drafting at an unknown context\n"
        "      --keep-ngrams         keep the n-gram store between prompts\n"
        "      --debug               show accepted/rejected drafts of every step on stderr\n"
        "beam search\n"
        "      --beams B             number of beams (default 4)\n"
        "      --beam-top-k K        candidates per beam and step (default 3)\n"
        "      --min-length L        length-penalty constant (default 5)\n"
        "      --alpha A             length-penalty exponent (default 1.2)\n"
        "sampling\n"
        "      --sampler NAME        sampler plugin (default greedy)\n"
        "      --sampler-arg K=V     sampler parameter, repeatable\n"
        "      --list-samplers       list the sampler plugins found and exit\n"
        "      --plugin-dir DIR      search DIR for sampler plugins first, repeatable\n"
        "      --seed S              seed for sampling (default: random, printed)\n"
        "output\n"
        "      --json                one JSON object per strategy on stdout\n"
        "  -h, --help                show this help\n"
        "\n"
        "Plugins are searched in --plugin-dir, then $SPECDEC_PLUGIN_PATH (colon-separated),\n"
        "then plugins/ beside the binary.\n",
        out);
}

typedef enum { F_BOOL, F_STR, F_INT, F_NUM, F_U64, F_LIST, F_STRAT, F_STORE, F_DEVICE } ftype;

static int parse_device(const char *flag, const char *v, int *out, sd_err *e) {
    if (!strcmp(v, "auto")) *out = SD_DEVICE_AUTO;
    else if (!strcmp(v, "cpu")) *out = SD_DEVICE_CPU;
    else if (!strcmp(v, "cuda")) *out = SD_DEVICE_CUDA;
    else return sd_fail(e, "%s: '%s' is not auto, cpu or cuda", flag, v);
    return 0;
}

typedef struct flag {
    const char *s, *l; /* short and long spellings (either may be NULL) */
    ftype t;
    size_t off;        /* field offset in sd_args */
    double lo, hi;     /* for numbers */
    size_t count_off;  /* F_LIST: offset of the count */
} flag;

#define OFF(f) offsetof(sd_args, f)
static const flag flags[] = {
    {"-h", "--help", F_BOOL, OFF(help), 0, 0, 0},
    {NULL, "--no-cache", F_BOOL, OFF(no_cache), 0, 0, 0},
    {NULL, "--ignore-eos", F_BOOL, OFF(ignore_eos), 0, 0, 0},
    {NULL, "--chat", F_BOOL, OFF(chat), 0, 0, 0},
    {NULL, "--json", F_BOOL, OFF(json), 0, 0, 0},
    {NULL, "--debug", F_BOOL, OFF(debug), 0, 0, 0},
    {"-i", "--interactive", F_BOOL, OFF(interactive), 0, 0, 0},
    {NULL, "--list-samplers", F_BOOL, OFF(list_samplers), 0, 0, 0},
    {NULL, "--skip-sample-adjustment", F_BOOL, OFF(skip_sample_adjustment), 0, 0, 0},
    {NULL, "--no-first-target", F_BOOL, OFF(no_first_target), 0, 0, 0},
    {NULL, "--stop-if-unknown", F_BOOL, OFF(stop_if_unknown), 0, 0, 0},
    {NULL, "--keep-ngrams", F_BOOL, OFF(keep_ngrams), 0, 0, 0},
    {"-m", "--model", F_STR, OFF(model), 0, 0, 0},
    {"-d", "--draft", F_STR, OFF(draft), 0, 0, 0},
    {"-p", "--prompt", F_STR, OFF(prompt), 0, 0, 0},
    {"-f", "--file", F_STR, OFF(prompt_file), 0, 0, 0},
    {NULL, "--system", F_STR, OFF(system), 0, 0, 0},
    {NULL, "--sampler", F_STR, OFF(sampler), 0, 0, 0},
    {"-n", "--n-predict", F_INT, OFF(n_predict), 0, 1 << 24, 0},
    {"-t", "--threads", F_INT, OFF(threads), 1, 1024, 0},
    {NULL, "--ctx", F_INT, OFF(n_ctx), 1, 1 << 24, 0},
    {NULL, "--draft-layers", F_INT, OFF(draft_layers), 1, 1024, 0},
    {NULL, "--gamma", F_INT, OFF(gamma), 1, 256, 0},
    {NULL, "--ngram-n", F_INT, OFF(ngram_n), 2, SD_NGRAM_MAX_N, 0},
    {NULL, "--filler-top-k", F_INT, OFF(filler_top_k), 0, 64, 0},
    {NULL, "--beams", F_INT, OFF(beams), 1, 128, 0},
    {NULL, "--beam-top-k", F_INT, OFF(beam_top_k), 1, 1 << 20, 0},
    {NULL, "--min-length", F_NUM, OFF(min_length), 0, 1e6, 0},
    {NULL, "--alpha", F_NUM, OFF(alpha), -100, 100, 0},
    {NULL, "--seed", F_U64, OFF(seed), 0, 0, 0},
    {NULL, "--sampler-arg", F_LIST, OFF(sampler_args), 0, 0, OFF(n_sampler_args)},
    {NULL, "--plugin-dir", F_LIST, OFF(plugin_dirs), 0, 0, OFF(n_plugin_dirs)},
    {NULL, "--strategy", F_STRAT, OFF(strategies), 0, 0, 0},
    {NULL, "--ngram-store", F_STORE, OFF(ngram_kind), 0, 0, 0},
    {NULL, "--device", F_DEVICE, OFF(device), 0, 0, 0},
    {NULL, "--draft-device", F_DEVICE, OFF(draft_device), 0, 0, 0},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static const flag *find_flag(const char *arg) {
    for (size_t i = 0; i < N_FLAGS; i++)
        if ((flags[i].s && !strcmp(arg, flags[i].s)) || (flags[i].l && !strcmp(arg, flags[i].l)))
            return &flags[i];
    return NULL;
}

int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e) {
    memset(a, 0, sizeof *a);
    a->n_predict = 128;
    a->strategies = SD_STRAT_AR;
    a->gamma = 4;
    a->ngram_n = 3;
    a->ngram_kind = SD_NGRAM_MULTI;
    a->filler_top_k = 3;
    a->beams = 4;
    a->beam_top_k = 3;
    a->min_length = 5.0;
    a->alpha = 1.2;
    a->draft_device = -1;
    char *base = (char *)a;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const flag *f = find_flag(arg);
        if (!f) return sd_fail(e, "unknown option '%s' (see --help)", arg);
        if (f->t == F_BOOL) {
            *(int *)(base + f->off) = 1;
            continue;
        }
        if (i + 1 >= argc) return sd_fail(e, "%s needs a value", arg);
        const char *v = argv[++i];
        int r = 0;
        switch (f->t) {
        case F_STR: *(const char **)(base + f->off) = v; break;
        case F_INT: r = parse_int(arg, v, (long)f->lo, (long)f->hi, (int *)(base + f->off), e); break;
        case F_NUM: r = parse_num(arg, v, f->lo, f->hi, (double *)(base + f->off), e); break;
        case F_U64:
            r = parse_u64(arg, v, (uint64_t *)(base + f->off), e);
            a->have_seed = 1;
            break;
        case F_LIST:
            r = push(arg, (const char **)(base + f->off), (int *)(base + f->count_off), v, e);
            break;
        case F_STRAT: r = sd_parse_strategies(v, &a->strategies, e); break;
        case F_STORE:
            if (!strcmp(v, "multi")) a->ngram_kind = SD_NGRAM_MULTI;
            else if (!strcmp(v, "one")) a->ngram_kind = SD_NGRAM_ONE;
            else r = sd_fail(e, "--ngram-store: '%s' is not multi or one", v);
            break;
        case F_DEVICE: r = parse_device(arg, v, (int *)(base + f->off), e); break;
        case F_BOOL: break;
        }
        if (r) return -1;
    }
    if (a->help || a->list_samplers) return 0;
    if (!a->model) return sd_fail(e, "no model given (-m MODEL; see --help)");
    if (!a->interactive && !a->prompt && !a->prompt_file)
        return sd_fail(e, "no prompt given (-p TEXT, -f FILE or -i)");
    if (a->prompt && a->prompt_file) return sd_fail(e, "give either -p or -f, not both");
    if (a->system && !a->chat) return sd_fail(e, "--system needs --chat");
    if (a->draft && a->draft_layers) return sd_fail(e, "give either -d or --draft-layers, not both");
    if ((a->strategies & (SD_STRAT_SPEC | SD_STRAT_DRAFT)) && !a->draft && !a->draft_layers)
        return sd_fail(e, "--strategy spec/draft needs a drafter (-d DRAFT or --draft-layers K)");
    if (a->n_sampler_args && !a->sampler) return sd_fail(e, "--sampler-arg needs --sampler NAME");
    return 0;
}
