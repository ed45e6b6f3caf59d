/* Strategy benchmark: one table per model of tokens/s, acceptance and
 * speedup over autoregressive decoding, each strategy on the same prompt
 * with greedy decoding, median of 3 runs, and whether its output equals the
 * autoregressive output. SmolLM2 gets an input-grounded prompt (repeat a
 * paragraph), where n-gram drafts shine; its drafter is the self-speculative
 * first 10 layers. stories260K drafts with its Q8_0 variant. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../engine/generate/generate.h"
#include "../../engine/generate/ngram.h"

#define RUNS 3

/* NASD2 is NASD with twice the gamma: with high acceptance, longer drafts
 * pay for the wider verification call. */
enum { AR, SPEC, NASD, NASD2, BEAM, DRAFT, N_STRAT };
static const char *names[] = {"ar", "spec", "nasd", "nasd2g", "beam", "draft"};

typedef struct bench_case {
    const char *title, *target, *draft;
    int draft_layers, chat, gen, gamma;
    const char *prompt;
} bench_case;

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_case(const bench_case *c) {
    sd_err e;
    sd_model_opts mo = {2048, 0, SD_DEVICE_AUTO};
    sd_model *t = sd_model_load(c->target, &mo, &e), *d = NULL;
    if (!t) {
        fprintf(stderr, "bench_strategies: %s\n", e.msg);
        return -1;
    }
    int rc = -1;
    sd_kv *self = NULL;
    sd_ngram *store = NULL;
    int32_t *ids = NULL, *out[N_STRAT] = {0};
    sd_lm tl = {t, t->kv, 0}, dl;
    if (c->draft) {
        if (!(d = sd_model_load(c->draft, &mo, &e)) || sd_check_vocab(d, t, &e)) goto done;
        dl = (sd_lm){d, d->kv, 0};
    } else {
        if (!(self = sd_kv_create(t->be, c->draft_layers, t->kv->kv_dim, t->n_ctx, &e))) goto done;
        dl = (sd_lm){t, self, c->draft_layers};
    }
    char *text = NULL;
    int n_ids;
    if (c->chat) {
        if (sd_chat_format(t->tok, t->file, NULL, c->prompt, &text, &e)) goto done;
    } else if (!(text = strdup(c->prompt))) {
        goto done;
    }
    int r = sd_tokenize(t->tok, text, strlen(text), sd_tokenizer_add_bos(t->tok), c->chat, &ids, &n_ids, &e);
    free(text);
    if (r) goto done;
    if (!(store = sd_ngram_create(SD_NGRAM_MULTI, 3, t->n_ctx, &e))) goto done;
    int32_t stop[16];
    int n_stop = sd_tokenizer_stop_ids(t->tok, stop, 16);
    printf("\n%s: %s, prompt %d tokens, %d new tokens max, gamma %d, drafter %s\n", c->title,
           strrchr(c->target, '/') + 1, n_ids, c->gen, c->gamma,
           c->draft ? strrchr(c->draft, '/') + 1 : "self (first layers)");
    printf("%-6s %8s %9s %9s %8s %8s %s\n", "", "tokens", "tok/s", "accept", "calls", "vs ar",
           "output");
    double ar_tps = 0;
    int n_out[N_STRAT];
    for (int s = 0; s < N_STRAT; s++) {
        if (!(out[s] = malloc((size_t)c->gen * sizeof(int32_t)))) goto done;
        double tps[RUNS];
        sd_gen_stats st;
        for (int k = 0; k < RUNS; k++) {
            sd_gen_cfg cfg = {.eos_ids = stop, .n_eos = n_stop, .pad_id = -1, .use_cache = 1};
            sd_spec_opts so = {c->gamma, 0, 1};
            sd_nasd_opts no = {s == NASD2 ? 2 * c->gamma : c->gamma, 3, 0, 0, 1};
            sd_beam_opts bo = {4, 3, 5.0, 1.2};
            sd_ngram_reset(store);
            int n = s == AR     ? sd_autoregressive_generate_lm(ids, n_ids, &tl, c->gen, &cfg, out[s], &st, &e)
                    : s == SPEC ? sd_speculative_generate(ids, n_ids, &dl, &tl, &so, c->gen, &cfg, out[s], &st, &e)
                    : s == NASD || s == NASD2 ? sd_ngram_assisted_generate(ids, n_ids, store, &tl, &no, c->gen, &cfg, out[s], &st, &e)
                    : s == BEAM ? sd_beam_search_generate(ids, n_ids, t, &bo, c->gen, &cfg, out[s], &st, &e)
                                : sd_autoregressive_generate_lm(ids, n_ids, &dl, c->gen, &cfg, out[s], &st, &e);
            if (n < 0) goto done;
            n_out[s] = n;
            tps[k] = st.total_s > 0 ? n / st.total_s : 0;
        }
        qsort(tps, RUNS, sizeof *tps, cmp);
        double med = tps[RUNS / 2];
        if (s == AR) ar_tps = med;
        char acc[16] = "-";
        if (st.drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * st.accepted / st.drafted);
        const char *same = s == AR ? "" : s == BEAM || s == DRAFT ? "(not lossless)"
                           : n_out[s] == n_out[AR] && !memcmp(out[s], out[AR], (size_t)n_out[s] * 4)
                               ? "identical to ar"
                               : "DIFFERS from ar";
        printf("%-6s %8d %9.1f %9s %8ld %7.2fx %s\n", names[s], n_out[s], med, acc,
               st.target_calls + st.draft_calls, med / ar_tps, same);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    for (int s = 0; s < N_STRAT; s++) free(out[s]);
    free(ids);
    sd_ngram_free(store);
    sd_kv_free(self);
    sd_model_free(d);
    sd_model_free(t);
    return rc;
}

int main(void) {
    static const char paragraph[] =
        "The lighthouse keeper climbed the one hundred and twelve steps every evening at dusk. "
        "He polished the great lens, trimmed the wick, and wrote the weather in a leather book: "
        "wind from the north-west, sea moderate, two fishing boats returning before dark. In "
        "forty years he had missed only one night, the night his daughter was born.";
    char grounded[1024];
    snprintf(grounded, sizeof grounded,
             "Repeat the following paragraph exactly, word for word:\n\n%s", paragraph);
    bench_case cases[] = {
        {"input-grounded (repeat a paragraph)", "models/SmolLM2-135M-Instruct.Q4_1.gguf", NULL, 10, 1, 96, 4, grounded},
        {"story", "tests/data/models/stories260K.gguf", "tests/data/models/stories260K-q8_0.gguf", 0, 0, 256, 4,
         "Once upon a time"},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rc |= run_case(&cases[i]);
    return rc ? 1 : 0;
}
