#include "engine/cli/settings.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session/strategies.h"

#define OFF(f) offsetof(sd_args, f)

/* Why a setting has no interactive command. */
#define LOADED "the models are loaded once, when the session opens"
#define MODE "it chooses what specdec does, before any model is loaded"
#define OUTPUT "the output form is chosen for the whole run"

static const sd_choice store_words[] = {{"multi", SD_NGRAM_MULTI}, {"one", SD_NGRAM_ONE}, {NULL, 0}};
static const sd_choice device_words[] = {
    {"auto", SD_DEVICE_AUTO}, {"cpu", SD_DEVICE_CPU}, {"cuda", SD_DEVICE_CUDA}, {NULL, 0}};
static const sd_choice kv_words[] = {{"f32", SD_F32}, {"f16", SD_F16}, {NULL, 0}};

#define STR(flag, sh, field, arg, help, deflt, why, echo, sec) \
    {flag, sh, SD_SET_STR, OFF(field), 0, 0, NULL, 0, arg, help, deflt, why, echo, sec}
#define BOOL(flag, sh, kind, field, help, why, echo, sec) \
    {flag, sh, kind, OFF(field), 0, 0, NULL, 0, NULL, help, NULL, why, echo, sec}
#define INT(flag, sh, field, lo, hi, arg, help, deflt, why, sec) \
    {flag, sh, SD_SET_INT, OFF(field), lo, hi, NULL, 0, arg, help, deflt, why, 1, sec}
#define NUM(flag, field, lo, hi, arg, help, sec) \
    {flag, 0, SD_SET_NUM, OFF(field), lo, hi, NULL, 0, arg, help, NULL, NULL, 1, sec}
#define CHOICE(flag, field, words, arg, help, deflt, why, sec) \
    {flag, 0, SD_SET_CHOICE, OFF(field), 0, 0, words, 0, arg, help, deflt, why, 1, sec}
#define LIST(flag, field, count, arg, help, why, sec) \
    {flag, 0, SD_SET_LIST, OFF(field), 0, 0, NULL, OFF(count), arg, help, NULL, why, 1, sec}

const sd_setting sd_settings[] = {
    /* model and prompt */
    STR("--model", 'm', c.model, "PATH", "target GGUF model (llama or qwen2 architecture)", NULL,
        LOADED, 1, SD_SEC_MODEL),
    STR("--draft", 'd', c.draft, "PATH", "draft model for speculative decoding (same vocabulary)",
        NULL, LOADED, 1, SD_SEC_MODEL),
    INT("--draft-layers", 0, c.draft_layers, 1, 1024, "K",
        "self-speculative drafter: the target's first K layers", "none", NULL, SD_SEC_MODEL),
    INT("--draft-vocab", 0, c.draft_vocab, -1, 1 << 24, "N",
        "the drafter proposes only token ids below N (rounded up\n"
        "to 16): its output head reads that share of its rows; the\n"
        "target verifies, so speculative output is unchanged;\n"
        "0: the whole vocabulary; -1: cut where it saves reads",
        "-1", NULL, SD_SEC_MODEL),
    STR("--prompt", 'p', prompt, "TEXT", "prompt text", NULL,
        "in the interactive mode a line that is not a /command is a prompt", 0, SD_SEC_MODEL),
    STR("--file", 'f', prompt_file, "PATH", "read the prompt from a file (-: from stdin)", NULL,
        "in the interactive mode a line that is not a /command is a prompt", 0, SD_SEC_MODEL),
    BOOL("--interactive", 'i', SD_SET_ON, interactive,
         "read prompts and /commands from stdin (after -p/-f)", MODE, 0, SD_SEC_MODEL),
    BOOL("--chat", 0, SD_SET_ON, c.chat,
         "wrap the prompt in the model's chat template (the\n"
         "prompt is the user message, never control tokens)",
         NULL, 1, SD_SEC_MODEL),
    STR("--system", 0, c.system, "TEXT", "system message for --chat", "the template's",
        "the text of a /command line is split into words", 1, SD_SEC_MODEL),
    BOOL("--no-parse-special", 0, SD_SET_OFF, c.parse_special,
         "control-token text in the prompt (<|im_start|>, ...)\n"
         "stays plain text (default: it becomes those tokens)",
         NULL, 1, SD_SEC_MODEL),
    /* generation */
    INT("--n-predict", 'n', c.n_predict, 0, 1 << 24, "N", "tokens to generate", NULL, NULL,
        SD_SEC_GEN),
    {"--strategy", 0, SD_SET_STRATEGIES, OFF(c.strategies), 0, 0, NULL, 0, "LIST",
     "comma list of ar,spec,nasd,beam,draft, run one after\n"
     "another on the same prompt", NULL, NULL, 1, SD_SEC_GEN},
    BOOL("--ignore-eos", 0, SD_SET_ON, c.ignore_eos, "keep generating past end-of-sequence tokens",
         NULL, 1, SD_SEC_GEN),
    BOOL("--no-cache", 0, SD_SET_ON, c.no_cache,
         "recompute the whole prefix every step (no KV cache)", NULL, 1, SD_SEC_GEN),
    INT("--ctx", 0, c.n_ctx, 1, 1 << 24, "N", "context positions to allocate",
        "min(model, 4096); --perplexity: 512", LOADED, SD_SEC_GEN),
    INT("--threads", 't', c.threads, 1, 1024, "N",
        "CPU threads (at most 4x the cores)", "the physical cores", LOADED, SD_SEC_GEN),
    CHOICE("--device", c.device, device_words, "D", "backend (auto: cuda when a GPU is usable)",
           NULL, LOADED, SD_SEC_GEN),
    CHOICE("--kv-type", c.kv_type, kv_words, "T",
           "KV cache elements; f16 halves the bytes attention reads\n"
           "per position (CPU backend)",
           NULL, LOADED, SD_SEC_GEN),
    CHOICE("--draft-device", c.draft_device, device_words, "D", "backend of the draft model",
           "as --device", LOADED, SD_SEC_GEN),
    /* speculative decoding and NASD */
    INT("--gamma", 0, c.gamma, 0, 256, "G",
        "the most drafts per verification (with --fixed-gamma:\n"
        "the drafts of every round); 0: 8 for speculative rounds\n"
        "that stop at --stop-below, else 4 (NASD, --fixed-gamma,\n"
        "--stop-below 0)",
        "0", NULL, SD_SEC_SPEC),
    BOOL("--fixed-gamma", 0, SD_SET_ON, c.fixed_gamma,
         "speculative: every round drafts gamma tokens (default:\n"
         "a round stops at --stop-below)", NULL, 1, SD_SEC_SPEC),
    NUM("--stop-below", c.stop_below, 0, 1, "P",
        "speculative: a round stops drafting once its estimated\n"
        "chance that every draft passes falls below P (0: off)",
        SD_SEC_SPEC),
    INT("--hybrid-n", 0, c.hybrid_n, 0, 16, "N",
        "speculative: draft from an n-gram store of the prompt and\n"
        "output where its last N-1 tokens were seen, from the\n"
        "drafter elsewhere (0: the drafter alone; 1 is refused)", NULL, NULL, SD_SEC_SPEC),
    NUM("--draft-p-min", c.draft_p_min, 0, 1, "P",
        "speculative: a draft the drafter gives a probability\n"
        "below P ends its round early (0: off)",
        SD_SEC_SPEC),
    BOOL("--skip-sample-adjustment", 0, SD_SET_ON, c.skip_sample_adjustment,
         "resample from p, not norm(max(0, p - q)), on\n"
         "rejection", NULL, 1, SD_SEC_SPEC),
    BOOL("--no-first-target", 0, SD_SET_ON, c.no_first_target,
         "start drafting right after the prompt", NULL, 1, SD_SEC_SPEC),
    INT("--ngram-n", 0, c.ngram_n, 2, SD_NGRAM_MAX_N, "N", "NASD n-gram order (rebuilds the store)",
        NULL, NULL, SD_SEC_SPEC),
    CHOICE("--ngram-store", c.ngram_kind, store_words, "KIND",
           "multi (k-grams 2..N, longest wins) or one (N-grams\n"
           "only); rebuilds the store", NULL,
           NULL, SD_SEC_SPEC),
    INT("--filler-top-k", 0, c.filler_top_k, 0, 64, "K",
        "target's top-K added to the n-gram store per position", NULL, NULL, SD_SEC_SPEC),
    BOOL("--stop-if-unknown", 0, SD_SET_ON, c.stop_if_unknown,
         "at an unknown context stop drafting (the default)", NULL, 1, SD_SEC_SPEC),
    BOOL("--fill-unknown", 0, SD_SET_OFF, c.stop_if_unknown,
         "at an unknown context draft the store's most frequent token",
         "the inverse of /stop_if_unknown: /stop_if_unknown off", 0, SD_SEC_SPEC),
    BOOL("--keep-ngrams", 0, SD_SET_ON, c.keep_ngrams, "keep the n-gram store between prompts",
         NULL, 1, SD_SEC_SPEC),
    /* beam search */
    INT("--beams", 0, c.beams, 1, 128, "B", "number of beams", NULL, NULL, SD_SEC_BEAM),
    INT("--beam-top-k", 0, c.beam_top_k, 1, 1 << 20, "K", "candidates per beam and step", NULL,
        NULL, SD_SEC_BEAM),
    NUM("--min-length", c.min_length, 0, 1e6, "L", "length-penalty constant", SD_SEC_BEAM),
    NUM("--alpha", c.alpha, -100, 100, "A", "length-penalty exponent", SD_SEC_BEAM),
    /* sampling */
    STR("--sampler", 0, c.sampler, "CHAIN",
        "sampler plugin, or a chain of stages such as\n"
        "penalty,top_k,nucleus: logits stages, then one sampling\n"
        "stage (topk and topknucleus are accepted for top_k and\n"
        "top_k_nucleus); interactive: /sampler CHAIN [key=value ...]",
        "greedy", NULL, 1, SD_SEC_SAMPLING),
    LIST("--sampler-arg", c.sampler_args, c.n_sampler_args, "K=V",
         "parameter, repeatable; STAGE.K=V for one stage of a\n"
         "chain (K=V: the last stage with K, or the one stage\n"
         "with K)",
         "the parameters follow the chain: /sampler CHAIN key=value ...", SD_SEC_SAMPLING),
    BOOL("--list-samplers", 0, SD_SET_ON, list_samplers, "list the sampler plugins found and exit",
         MODE, 0, SD_SEC_SAMPLING),
    STR("--check-sampler", 0, check_sampler, "NAME",
        "run the load-time checks of the plugin providing NAME\n"
        "and exit: 0 when it passes, 1 when it is rejected (the\n"
        "reason on stderr), 2 when the search itself failed",
        NULL, MODE, 0, SD_SEC_SAMPLING),
    INT("--sampler-timeout", 0, sampler_timeout, 0, 3600000, "MS",
        "time limit of one call into a sampler plugin; a call\n"
        "past it ends specdec with exit status 70 (0: no limit)",
        NULL, NULL, SD_SEC_SAMPLING),
    LIST("--plugin-dir", c.plugin_dirs, c.n_plugin_dirs, "DIR",
         "search DIR for sampler plugins first, repeatable",
         "the search path is read once, when the session opens", SD_SEC_SAMPLING),
    {"--seed", 0, SD_SET_U64, OFF(c.seed), 0, 0, NULL, 0, "S", "seed for sampling",
     "random, printed", NULL, 1, SD_SEC_SAMPLING},
    /* perplexity */
    STR("--perplexity", 0, perplexity, "FILE",
        "perplexity of -m over FILE as llama-perplexity measures\n"
        "it (windows of --ctx tokens, even; the second half of\n"
        "each window is scored)",
        NULL, MODE, 0, SD_SEC_PPL),
    INT("--chunks", 0, chunks, 1, 1 << 24, "N", "evaluate only the first N windows", "all", MODE,
        SD_SEC_PPL),
    /* output */
    BOOL("--json", 0, SD_SET_ON, json,
         "one JSON document on stdout: {\"settings\": {...},\n"
         "\"runs\": [one object per strategy]} (--perplexity: one\n"
         "object)",
         OUTPUT, 0, SD_SEC_OUTPUT),
    BOOL("--jsonl", 0, SD_SET_ON, jsonl, "one JSON object per strategy, one a line", OUTPUT, 0,
         SD_SEC_OUTPUT),
    BOOL("--debug", 0, SD_SET_ON, debug,
         "each verification round's accepted/rejected drafts: a\n"
         "line on stderr, or \"steps\" in the JSON runs",
         NULL, 1, SD_SEC_OUTPUT),
    BOOL("--version", 0, SD_SET_ON, version, "print the version and the build, then exit", MODE, 0,
         SD_SEC_OUTPUT),
    BOOL("--help", 'h', SD_SET_ON, help, "show this help", MODE, 0, SD_SEC_OUTPUT),
};
const size_t sd_n_settings = sizeof sd_settings / sizeof sd_settings[0];

static const char *const section_titles[SD_N_SECTIONS] = {
    "model and prompt", "generation", "speculative decoding and NASD", "beam search", "sampling",
    "perplexity", "output"};

const char *sd_setting_name(const sd_setting *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", s->flag + 2);
    for (char *p = buf; *p; p++)
        if (*p == '-') *p = '_';
    return buf;
}

const sd_setting *sd_setting_by_flag(const char *arg) {
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        if (!strcmp(arg, s->flag)) return s;
        if (s->short_flag && arg[0] == '-' && arg[1] == s->short_flag && !arg[2]) return s;
    }
    return NULL;
}

const sd_setting *sd_setting_by_name(const char *name) {
    char want[64], have[64];
    snprintf(want, sizeof want, "%s", name);
    for (char *p = want; *p; p++)
        if (*p == '-') *p = '_';
    for (size_t i = 0; i < sd_n_settings; i++)
        if (!strcmp(want, sd_setting_name(&sd_settings[i], have, sizeof have))) return &sd_settings[i];
    return NULL;
}

const char *sd_setting_range(const sd_setting *s, char *buf, size_t cap) {
    buf[0] = 0;
    if (s->kind == SD_SET_INT) {
        snprintf(buf, cap, "%.0f to %.0f", s->lo, s->hi);
    } else if (s->kind == SD_SET_NUM) {
        snprintf(buf, cap, "%g to %g", s->lo, s->hi);
    } else if (s->kind == SD_SET_CHOICE) {
        size_t used = 0;
        for (int i = 0; s->choices[i].word && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                                     !i ? "" : s->choices[i + 1].word ? ", " : " or ",
                                     s->choices[i].word);
    } else if (s->kind == SD_SET_ON || s->kind == SD_SET_OFF) {
        snprintf(buf, cap, "on or off");
    }
    return buf;
}

static int out_of_range(const sd_setting *s, const char *who, const char *v, sd_err *e) {
    if (s->kind == SD_SET_INT)
        return sd_fail(e, "%s: %s is out of range [%.0f, %.0f]", who, v, s->lo, s->hi);
    return sd_fail(e, "%s: %s is out of range [%g, %g]", who, v, s->lo, s->hi);
}

/* Decimal integers only; an integer too long for a long is out of range,
 * not "not an integer". */
static int parse_int(const sd_setting *s, const char *who, const char *v, int *out, sd_err *e) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || end == v) return sd_fail(e, "%s: '%s' is not an integer", who, v);
    if (errno == ERANGE || x < s->lo || x > s->hi) return out_of_range(s, who, v, e);
    *out = (int)x;
    return 0;
}

static int parse_num(const sd_setting *s, const char *who, const char *v, double *out, sd_err *e) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || isnan(x)) return sd_fail(e, "%s: '%s' is not a number", who, v);
    if (errno == ERANGE || !isfinite(x) || x < s->lo || x > s->hi) return out_of_range(s, who, v, e);
    *out = x;
    return 0;
}

static int parse_u64(const char *who, const char *v, uint64_t *out, sd_err *e) {
    char *end;
    errno = 0;
    if (!*v || *v == '-' || *v == '+' || *v == ' ')
        return sd_fail(e, "%s: '%s' is not a non-negative integer", who, v);
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) return sd_fail(e, "%s: '%s' is not a non-negative integer", who, v);
    if (errno == ERANGE) return sd_fail(e, "%s: %s is out of range [0, %llu]", who, v, (unsigned long long)UINT64_MAX);
    *out = x;
    return 0;
}

static int parse_onoff(const char *who, const char *v, int *out, sd_err *e) {
    if (!strcmp(v, "on") || !strcmp(v, "1")) *out = 1;
    else if (!strcmp(v, "off") || !strcmp(v, "0")) *out = 0;
    else return sd_fail(e, "%s: '%s' is not on or off", who, v);
    return 0;
}

int sd_setting_parse(const sd_setting *s, sd_args *a, const char *v, const char *who, sd_err *e) {
    char *field = (char *)a + s->off;
    switch (s->kind) {
    case SD_SET_ON:
    case SD_SET_OFF: {
        int on = 0;
        if (parse_onoff(who, v, &on, e)) return -1;
        *(int *)field = s->kind == SD_SET_ON ? on : !on;
        return 0;
    }
    case SD_SET_INT: return parse_int(s, who, v, (int *)field, e);
    case SD_SET_NUM: return parse_num(s, who, v, (double *)field, e);
    case SD_SET_U64:
        if (parse_u64(who, v, (uint64_t *)field, e)) return -1;
        a->c.have_seed = 1;
        return 0;
    case SD_SET_STR: *(const char **)field = v; return 0;
    case SD_SET_LIST: {
        int *n = (int *)((char *)a + s->count_off);
        if (*n >= SD_MAX_LIST) return sd_fail(e, "%s: given more than %d times", who, SD_MAX_LIST);
        ((const char **)field)[(*n)++] = v;
        return 0;
    }
    case SD_SET_CHOICE: {
        for (int i = 0; s->choices[i].word; i++)
            if (!strcmp(v, s->choices[i].word)) {
                *(int *)field = s->choices[i].value;
                return 0;
            }
        char r[64];
        return sd_fail(e, "%s: '%s' is not %s", who, v, sd_setting_range(s, r, sizeof r));
    }
    case SD_SET_STRATEGIES:
        if (sd_parse_strategies(v, (int *)field, e)) return sd_wrap(e, who);
        return 0;
    }
    return sd_fail(e, "%s: unknown setting kind", who);
}

const char *sd_setting_format(const sd_setting *s, const sd_args *a, char *buf, size_t cap) {
    const char *field = (const char *)a + s->off;
    buf[0] = 0;
    switch (s->kind) {
    case SD_SET_ON: snprintf(buf, cap, "%s", *(const int *)field ? "on" : "off"); break;
    case SD_SET_OFF: snprintf(buf, cap, "%s", *(const int *)field ? "off" : "on"); break;
    case SD_SET_INT: snprintf(buf, cap, "%d", *(const int *)field); break;
    case SD_SET_NUM: snprintf(buf, cap, "%g", *(const double *)field); break;
    case SD_SET_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case SD_SET_STR: {
        const char *v = *(const char *const *)field;
        snprintf(buf, cap, "%s", v ? v : "");
        break;
    }
    case SD_SET_LIST: {
        const char *const *list = (const char *const *)field;
        int n = *(const int *)((const char *)a + s->count_off);
        size_t used = 0;
        for (int i = 0; i < n && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? " " : "", list[i]);
        break;
    }
    case SD_SET_CHOICE:
        for (int i = 0; s->choices[i].word; i++)
            if (s->choices[i].value == *(const int *)field) snprintf(buf, cap, "%s", s->choices[i].word);
        break;
    case SD_SET_STRATEGIES: {
        size_t used = 0;
        for (int i = 0; i < SD_N_STRATEGIES && used < cap; i++)
            if (*(const int *)field & sd_strategies[i].bit)
                used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "," : "",
                                         sd_strategies[i].name);
        break;
    }
    }
    return buf;
}

void sd_args_defaults(sd_args *a) {
    memset(a, 0, sizeof *a);
    sd_config_defaults(&a->c);
    a->sampler_timeout = SD_SAMPLER_TIMEOUT_MS;
}

/* "(1 to 256; default 4)": what the help adds after a setting's text. */
static void range_and_default(const sd_setting *s, const sd_args *d, char *buf, size_t cap) {
    char r[96] = "", v[96] = "";
    if (s->kind == SD_SET_INT || s->kind == SD_SET_NUM || s->kind == SD_SET_CHOICE)
        sd_setting_range(s, r, sizeof r);
    if (s->deflt) snprintf(v, sizeof v, "%s", s->deflt);
    else if (s->kind != SD_SET_ON && s->kind != SD_SET_OFF && s->kind != SD_SET_STR &&
             s->kind != SD_SET_LIST)
        sd_setting_format(s, d, v, sizeof v);
    if (r[0] && v[0]) snprintf(buf, cap, " (%s; default %s)", r, v);
    else if (r[0]) snprintf(buf, cap, " (%s)", r);
    else if (v[0]) snprintf(buf, cap, " (default %s)", v);
    else buf[0] = 0;
}

/* Prints help's lines, the first after lead (padded to col), the others
 * indented to col, with tail after the last. */
static void help_lines(FILE *out, const char *lead, int col, const char *help, const char *tail) {
    int n = fprintf(out, "%s", lead);
    if (n >= col - 1) { /* a lead as wide as the column: the help starts below it */
        fputc('\n', out);
        n = 0;
    }
    for (const char *p = help;;) {
        size_t len = strcspn(p, "\n");
        n += fprintf(out, "%*s%.*s", n < col ? col - n : 1, "", (int)len, p);
        if (!p[len]) break;
        fputc('\n', out);
        n = 0;
        p += len + 1;
    }
    /* the tail goes on a line of its own where it would pass 90 columns */
    if (tail[0] && n + (int)strlen(tail) > 90) fprintf(out, "\n%*s%s\n", col - 1, "", tail);
    else fprintf(out, "%s\n", tail);
}

void sd_settings_usage(FILE *out) {
    sd_args d;
    sd_args_defaults(&d);
    fputs("usage: specdec -m MODEL (-p PROMPT | -f FILE | -i) [options]\n"
          "       specdec -m MODEL --perplexity FILE [--ctx N] [--chunks N] [options]\n"
          "\n"
          "A value follows its flag as the next word or after '=' (--gamma=8); a short flag's\n"
          "value may be attached (-n8). The generated text (or the JSON) is all stdout holds;\n"
          "stats, the strategies' table, perplexity results, progress and errors go to stderr.\n"
          "\n",
          out);
    for (int sec = 0; sec < SD_N_SECTIONS; sec++) {
        fprintf(out, "%s\n", section_titles[sec]);
        for (size_t i = 0; i < sd_n_settings; i++) {
            const sd_setting *s = &sd_settings[i];
            if (s->section != sec) continue;
            char lead[96], tail[160];
            snprintf(lead, sizeof lead, "  %c%c%s%s%s%s", s->short_flag ? '-' : ' ',
                     s->short_flag ? s->short_flag : ' ', s->short_flag ? ", " : "  ", s->flag,
                     s->arg ? " " : "", s->arg ? s->arg : "");
            range_and_default(s, &d, tail, sizeof tail);
            help_lines(out, lead, 28, s->help, tail);
        }
    }
    fputs("\nPlugins are searched in --plugin-dir, then $SPECDEC_PLUGIN_PATH (colon-separated),\n"
          "then plugins/ beside the binary.\n"
          "\n"
          "exit status: 0 done; 1 a run failed (a file, the model, a rejected plugin);\n"
          "2 a bad flag or value; 70 a sampler plugin crashed or passed --sampler-timeout\n"
          "(the line before names the stage, the call and the plugin file)\n",
          out);
}

void sd_settings_commands(FILE *out, const sd_args *a) {
    for (size_t i = 0; i < sd_n_settings; i++) {
        const sd_setting *s = &sd_settings[i];
        if (s->no_command) continue;
        char name[64], lead[96], r[96], v[160], tail[320];
        sd_setting_name(s, name, sizeof name);
        snprintf(lead, sizeof lead, "  /%s %s", name,
                 s->kind == SD_SET_ON || s->kind == SD_SET_OFF ? "[on|off]" : s->arg);
        sd_setting_range(s, r, sizeof r);
        sd_setting_format(s, a, v, sizeof v);
        if (r[0] && v[0]) snprintf(tail, sizeof tail, " (%s; now %s)", r, v);
        else if (r[0] || v[0]) snprintf(tail, sizeof tail, " (%s%s)", v[0] ? "now " : "", v[0] ? v : r);
        else tail[0] = 0;
        help_lines(out, lead, 32, s->help, tail);
    }
}
