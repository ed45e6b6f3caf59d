#include "engine/cli/args.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/eval/perplexity.h"

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

void sd_args_usage(FILE *out) {
    fputs(
        "usage: specdec -m MODEL (-p PROMPT | -f FILE | -i) [options]\n"
        "       specdec -m MODEL --perplexity FILE [--ctx N] [--chunks N] [options]\n"
        "\n"
        "model and prompt\n"
        "  -m, --model PATH          target GGUF model (llama architecture)\n"
        "  -d, --draft PATH          draft model for speculative decoding (same vocabulary)\n"
        "      --draft-layers K      self-speculative drafter: the target's first K layers\n"
        "      --draft-vocab N       the drafter proposes only token ids below N (rounded up to\n"
        "                            16): its output head reads that share of its rows; the\n"
        "                            target verifies, so speculative output is unchanged;\n"
        "                            0: the whole vocabulary (default)\n"
        "  -p, --prompt TEXT         prompt text\n"
        "  -f, --file PATH           read the prompt from a file\n"
        "  -i, --interactive         read prompts and /commands from stdin (after -p/-f)\n"
        "      --chat                wrap the prompt in the model's chat template (the\n"
        "                            prompt is the user message, never control tokens)\n"
        "      --system TEXT         system message for --chat (default: the template's)\n"
        "      --no-parse-special    control-token text in the prompt (<|im_start|>, ...)\n"
        "                            stays plain text (default: it becomes those tokens)\n"
        "generation\n"
        "  -n, --n-predict N         tokens to generate (default 128)\n"
        "      --strategy LIST       comma list of ar,spec,nasd,beam,draft (default ar)\n"
        "      --ignore-eos          keep generating past end-of-sequence tokens\n"
        "      --no-cache            recompute the whole prefix every step (no KV cache)\n"
        "      --ctx N               context positions to allocate (default min(model, 4096))\n"
        "  -t, --threads N           CPU threads (default: the physical cores; at most 4x the cores)\n"
        "      --device D            auto, cpu or cuda (default auto: cuda when a GPU is usable)\n"
        "      --kv-type T           KV cache elements: f32 (default) or f16 (CPU backend; half\n"
        "                            the bytes attention reads per position)\n"
        "      --draft-device D      backend of the draft model (default: as --device)\n"
        "speculative decoding and NASD\n"
        "      --gamma G             drafts per verification (default 4)\n"
        "      --draft-p-min P       speculative: a draft the drafter gives a probability below P\n"
        "                            ends its round early (0 to 1; default 0, off)\n"
        "      --skip-sample-adjustment  resample from p, not norm(max(0, p - q)), on rejection\n"
        "      --no-first-target     start drafting right after the prompt\n"
        "      --ngram-n N           NASD n-gram order (default 3)\n"
        "      --ngram-store KIND    multi (k-grams 2..N, longest wins) or one (N-grams only)\n"
        "      --filler-top-k K      target's top-K added to the store per position (default 3)\n"
        "      --fill-unknown        at an unknown context draft the store's most frequent token\n"
        "                            (default: stop drafting there; --stop-if-unknown)\n"
        "      --keep-ngrams         keep the n-gram store between prompts\n"
        "      --debug               show accepted/rejected drafts of every step on stderr\n"
        "beam search\n"
        "      --beams B             number of beams (default 4)\n"
        "      --beam-top-k K        candidates per beam and step (default 3)\n"
        "      --min-length L        length-penalty constant (default 5)\n"
        "      --alpha A             length-penalty exponent (default 1.2)\n"
        "sampling\n"
        "      --sampler CHAIN       sampler plugin, or a chain of stages such as\n"
        "                            penalty,top_k,nucleus: logits stages, then one sampling\n"
        "                            stage (default greedy; topk and topknucleus are accepted\n"
        "                            for top_k and top_k_nucleus)\n"
        "      --sampler-arg K=V     parameter, repeatable; STAGE.K=V for one stage of a chain\n"
        "                            (K=V: the last stage with K, or the one stage with K)\n"
        "      --list-samplers       list the sampler plugins found and exit\n"
        "      --plugin-dir DIR      search DIR for sampler plugins first, repeatable\n"
        "      --seed S              seed for sampling (default: random, printed)\n"
        "perplexity\n"
        "      --perplexity FILE     perplexity of -m over FILE as llama-perplexity measures it\n"
        "                            (windows of --ctx tokens, default 512, even; the second\n"
        "                            half of each window is scored)\n"
        "      --chunks N            evaluate only the first N windows\n"
        "output\n"
        "      --json                one JSON object per strategy on stdout\n"
        "  -h, --help                show this help\n"
        "\n"
        "Plugins are searched in --plugin-dir, then $SPECDEC_PLUGIN_PATH (colon-separated),\n"
        "then plugins/ beside the binary.\n",
        out);
}

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

typedef enum {
    F_BOOL,
    F_OFF,
    F_STR,
    F_INT,
    F_NUM,
    F_U64,
    F_LIST,
    F_STRAT,
    F_STORE,
    F_DEVICE,
    F_KVTYPE
} ftype;

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
    {NULL, "--no-cache", F_BOOL, OFF(c.no_cache), 0, 0, 0},
    {NULL, "--ignore-eos", F_BOOL, OFF(c.ignore_eos), 0, 0, 0},
    {NULL, "--chat", F_BOOL, OFF(c.chat), 0, 0, 0},
    {NULL, "--no-parse-special", F_OFF, OFF(c.parse_special), 0, 0, 0},
    {NULL, "--json", F_BOOL, OFF(json), 0, 0, 0},
    {NULL, "--debug", F_BOOL, OFF(debug), 0, 0, 0},
    {"-i", "--interactive", F_BOOL, OFF(interactive), 0, 0, 0},
    {NULL, "--list-samplers", F_BOOL, OFF(list_samplers), 0, 0, 0},
    {NULL, "--skip-sample-adjustment", F_BOOL, OFF(c.skip_sample_adjustment), 0, 0, 0},
    {NULL, "--no-first-target", F_BOOL, OFF(c.no_first_target), 0, 0, 0},
    {NULL, "--stop-if-unknown", F_BOOL, OFF(c.stop_if_unknown), 0, 0, 0},
    {NULL, "--fill-unknown", F_OFF, OFF(c.stop_if_unknown), 0, 0, 0},
    {NULL, "--keep-ngrams", F_BOOL, OFF(c.keep_ngrams), 0, 0, 0},
    {"-m", "--model", F_STR, OFF(c.model), 0, 0, 0},
    {"-d", "--draft", F_STR, OFF(c.draft), 0, 0, 0},
    {"-p", "--prompt", F_STR, OFF(prompt), 0, 0, 0},
    {"-f", "--file", F_STR, OFF(prompt_file), 0, 0, 0},
    {NULL, "--perplexity", F_STR, OFF(perplexity), 0, 0, 0},
    {NULL, "--chunks", F_INT, OFF(chunks), 1, 1 << 24, 0},
    {NULL, "--system", F_STR, OFF(c.system), 0, 0, 0},
    {NULL, "--sampler", F_STR, OFF(c.sampler), 0, 0, 0},
    {"-n", "--n-predict", F_INT, OFF(c.n_predict), 0, 1 << 24, 0},
    {"-t", "--threads", F_INT, OFF(c.threads), 1, 1024, 0},
    {NULL, "--ctx", F_INT, OFF(c.n_ctx), 1, 1 << 24, 0},
    {NULL, "--draft-layers", F_INT, OFF(c.draft_layers), 1, 1024, 0},
    {NULL, "--draft-vocab", F_INT, OFF(c.draft_vocab), 0, 1 << 24, 0},
    {NULL, "--gamma", F_INT, OFF(c.gamma), 1, 256, 0},
    {NULL, "--draft-p-min", F_NUM, OFF(c.draft_p_min), 0, 1, 0},
    {NULL, "--ngram-n", F_INT, OFF(c.ngram_n), 2, SD_NGRAM_MAX_N, 0},
    {NULL, "--filler-top-k", F_INT, OFF(c.filler_top_k), 0, 64, 0},
    {NULL, "--beams", F_INT, OFF(c.beams), 1, 128, 0},
    {NULL, "--beam-top-k", F_INT, OFF(c.beam_top_k), 1, 1 << 20, 0},
    {NULL, "--min-length", F_NUM, OFF(c.min_length), 0, 1e6, 0},
    {NULL, "--alpha", F_NUM, OFF(c.alpha), -100, 100, 0},
    {NULL, "--seed", F_U64, OFF(c.seed), 0, 0, 0},
    {NULL, "--sampler-arg", F_LIST, OFF(c.sampler_args), 0, 0, OFF(c.n_sampler_args)},
    {NULL, "--plugin-dir", F_LIST, OFF(c.plugin_dirs), 0, 0, OFF(c.n_plugin_dirs)},
    {NULL, "--strategy", F_STRAT, OFF(c.strategies), 0, 0, 0},
    {NULL, "--ngram-store", F_STORE, OFF(c.ngram_kind), 0, 0, 0},
    {NULL, "--device", F_DEVICE, OFF(c.device), 0, 0, 0},
    {NULL, "--draft-device", F_DEVICE, OFF(c.draft_device), 0, 0, 0},
    {NULL, "--kv-type", F_KVTYPE, OFF(c.kv_type), 0, 0, 0},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static const flag *find_flag(const char *arg) {
    for (size_t i = 0; i < N_FLAGS; i++)
        if ((flags[i].s && !strcmp(arg, flags[i].s)) || (flags[i].l && !strcmp(arg, flags[i].l)))
            return &flags[i];
    return NULL;
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

int sd_args_parse(sd_args *a, int argc, char **argv, sd_err *e) {
    memset(a, 0, sizeof *a);
    sd_config_defaults(&a->c);
    char *base = (char *)a;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const flag *f = find_flag(arg);
        if (!f) return sd_fail(e, "unknown option '%s' (see --help)", arg);
        if (f->t == F_BOOL || f->t == F_OFF) {
            *(int *)(base + f->off) = f->t == F_BOOL;
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
            a->c.have_seed = 1;
            break;
        case F_LIST:
            r = push(arg, (const char **)(base + f->off), (int *)(base + f->count_off), v, e);
            break;
        case F_STRAT:
            if (sd_parse_strategies(v, &a->c.strategies, e)) r = sd_wrap(e, arg);
            break;
        case F_STORE:
            if (!strcmp(v, "multi")) a->c.ngram_kind = SD_NGRAM_MULTI;
            else if (!strcmp(v, "one")) a->c.ngram_kind = SD_NGRAM_ONE;
            else r = sd_fail(e, "--ngram-store: '%s' is not multi or one", v);
            break;
        case F_DEVICE: r = parse_device(arg, v, (int *)(base + f->off), e); break;
        case F_KVTYPE:
            if (!strcmp(v, "f32")) a->c.kv_type = SD_F32;
            else if (!strcmp(v, "f16")) a->c.kv_type = SD_F16;
            else r = sd_fail(e, "--kv-type: '%s' is not f32 or f16", v);
            break;
        case F_BOOL:
        case F_OFF: break;
        }
        if (r) return -1;
        if (f->off == OFF(c.threads) && sd_check_threads(arg, a->c.threads, e)) return -1;
    }
    if (a->help || a->list_samplers) return 0;
    if (!a->c.model) return sd_fail(e, "no model given (-m MODEL; see --help)");
    if (a->perplexity) return check_perplexity(a, e);
    if (a->chunks) return sd_fail(e, "--chunks needs --perplexity FILE");
    if (!a->interactive && !a->prompt && !a->prompt_file)
        return sd_fail(e, "no prompt given (-p TEXT, -f FILE or -i)");
    if (a->prompt && a->prompt_file) return sd_fail(e, "give either -p or -f, not both");
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
