/* specdec: one-shot generation from the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../generate/generate.h"
#include "../model.h"
#include "../rng.h"
#include "../samplers.h"
#include "../tokenizer.h"
#include "args.h"
#include "json_out.h"

typedef struct stream {
    const sd_tokenizer *tok;
    sd_detok st;
    int failed;
    sd_err e;
} stream;

static void on_token(void *ud, int32_t id) {
    stream *s = ud;
    char buf[256];
    int n = sd_detok_push(s->tok, &s->st, id, buf, sizeof buf, &s->e);
    if (n < 0) {
        s->failed = 1;
        return;
    }
    fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
}

static char *read_file(const char *path, sd_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sd_fail(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
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
        sd_fail(e, "%s: %s", path, bad ? "read error" : "out of memory");
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static sd_sampler_set *open_samplers(const sd_args *a, sd_err *e) {
    char **dirs;
    int n_dirs;
    if (sd_plugin_dirs(a->plugin_dirs, a->n_plugin_dirs, &dirs, &n_dirs, e)) return NULL;
    sd_sampler_set *s = sd_samplers_open((const char *const *)dirs, n_dirs, e);
    sd_plugin_dirs_free(dirs, n_dirs);
    if (!s) return NULL;
    for (int i = 0; i < sd_samplers_n_warnings(s); i++)
        fprintf(stderr, "specdec: warning: %s\n", sd_samplers_warning(s, i));
    return s;
}

/* Tokens of the prompt: plain text (with BOS when the model wants it) or
 * the chat template's rendering with its special tokens parsed. */
static int prompt_ids(const sd_args *a, const sd_model *m, const char *text, int32_t **ids,
                      int *n, sd_err *e) {
    int add_bos = sd_tokenizer_add_bos(m->tok);
    if (!a->chat) return sd_tokenize(m->tok, text, strlen(text), add_bos, 0, ids, n, e);
    char *chat;
    if (sd_chat_format(m->tok, m->file, a->system, text, &chat, e)) return -1;
    int r = sd_tokenize(m->tok, chat, strlen(chat), add_bos, 1, ids, n, e);
    free(chat);
    return r;
}

static int run(const sd_args *a, sd_err *e) {
    int rc = -1;
    sd_sampler_set *samplers = NULL;
    sd_processor *proc = NULL;
    sd_model *m = NULL;
    char *file_text = NULL, *text = NULL;
    int32_t *ids = NULL, *out = NULL;
    int n_ids = 0;

    if (a->sampler || a->list_samplers) {
        samplers = open_samplers(a, e);
        if (!samplers) goto done;
    }
    if (a->list_samplers) {
        sd_samplers_list(samplers, stdout);
        rc = 0;
        goto done;
    }
    if (a->n_sampler_args && !a->sampler) {
        sd_fail(e, "--sampler-arg needs --sampler NAME");
        goto done;
    }
    sd_model_opts mo = {a->n_ctx, a->threads};
    m = sd_model_load(a->model, &mo, e);
    if (!m) goto done;
    if (a->sampler) {
        proc = sd_processor_create(samplers, a->sampler, a->sampler_args, a->n_sampler_args,
                                   m->hp.vocab, e);
        if (!proc) goto done;
    }
    const char *prompt = a->prompt;
    if (a->prompt_file) {
        file_text = read_file(a->prompt_file, e);
        if (!file_text) goto done;
        prompt = file_text;
    }
    if (prompt_ids(a, m, prompt, &ids, &n_ids, e)) goto done;
    if (n_ids == 0) {
        sd_fail(e, "the prompt is empty and the model has no BOS token to start from");
        goto done;
    }

    int32_t stop[16];
    int n_stop = a->ignore_eos ? 0 : sd_tokenizer_stop_ids(m->tok, stop, 16);
    sd_rng rng;
    uint64_t seed = a->have_seed ? a->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    sd_rng_seed(&rng, seed);
    stream s = {.tok = m->tok};
    s.st.strip_space = 0;
    sd_gen_cfg cfg = {.proc = proc, .rng = &rng, .eos_ids = stop, .n_eos = n_stop,
                      .pad_id = -1, .use_cache = !a->no_cache,
                      .on_token = a->json ? NULL : on_token, .ud = &s};
    out = malloc(((size_t)a->n_predict + 1) * sizeof *out);
    if (!out) {
        sd_fail(e, "out of memory");
        goto done;
    }
    sd_gen_stats st;
    if (!a->json) {
        fwrite(prompt, 1, strlen(prompt), stdout);
        fflush(stdout);
    }
    int n_out = sd_autoregressive_generate(ids, n_ids, m, a->n_predict, &cfg, out, &st, e);
    if (n_out < 0 || s.failed) {
        if (s.failed) *e = s.e;
        if (!a->json) fputc('\n', stdout);
        goto done;
    }
    double decode_s = st.total_s - st.prefill_s;
    double decode_tps = st.new_tokens > 1 && decode_s > 0 ? (st.new_tokens - 1) / decode_s : 0;
    double prefill_tps = st.prefill_s > 0 ? st.prompt_tokens / st.prefill_s : 0;
    double tps = st.total_s > 0 ? st.new_tokens / st.total_s : 0;
    if (a->json) {
        if (sd_detokenize(m->tok, out, n_out, 0, &text, e)) goto done;
        sd_json_obj j;
        sd_json_begin(&j, stdout);
        sd_json_str(&j, "strategy", "ar");
        sd_json_str(&j, "model", a->model);
        sd_json_str(&j, "sampler", proc ? sd_processor_name(proc) : "greedy");
        sd_json_u64(&j, "seed", seed);
        sd_json_ids(&j, "prompt_ids", ids, n_ids);
        sd_json_ids(&j, "ids", out, n_out);
        sd_json_str(&j, "text", text);
        sd_json_int(&j, "prompt_tokens", st.prompt_tokens);
        sd_json_int(&j, "new_tokens", st.new_tokens);
        sd_json_num(&j, "seconds", st.total_s);
        sd_json_num(&j, "tokens_per_s", tps);
        sd_json_num(&j, "prefill_tokens_per_s", prefill_tps);
        sd_json_num(&j, "decode_tokens_per_s", decode_tps);
        sd_json_int(&j, "target_calls", (int)st.target_calls);
        sd_json_int(&j, "use_cache", !a->no_cache);
        sd_json_int(&j, "hit_context", st.hit_context);
        sd_json_end(&j);
    } else {
        char tail[64];
        int nt = sd_detok_flush(&s.st, tail, sizeof tail);
        fwrite(tail, 1, (size_t)nt, stdout);
        fputc('\n', stdout);
        fprintf(stderr, "specdec: prompt %d tokens, prefill %.1f tok/s (%.3f s)\n",
                st.prompt_tokens, prefill_tps, st.prefill_s);
        fprintf(stderr, "specdec: generated %d tokens, decode %.1f tok/s, %.1f tok/s overall%s\n",
                st.new_tokens, decode_tps, tps, st.hit_context ? " (context full)" : "");
        if (proc) fprintf(stderr, "specdec: seed %llu\n", (unsigned long long)seed);
    }
    rc = 0;
done:
    free(text);
    free(out);
    free(ids);
    free(file_text);
    sd_processor_destroy(proc);
    sd_model_free(m);
    sd_samplers_close(samplers);
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
