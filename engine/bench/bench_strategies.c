/* Strategy benchmark: one table per model of tokens/s, acceptance and
 * speedup over autoregressive decoding (over the whole call, and over the
 * decode phase: after the first forward call, the prompt's prefill, which
 * is the same for every strategy), each strategy on the same prompt with
 * greedy decoding, median of 3 runs, whether its output equals the
 * autoregressive output, and for the strategies with verification rounds
 * the shares of the run spent drafting, in the drafter's catch-up,
 * verifying and on the host (d/c/v/h, sd_gen_stats). It runs the
 * strategies through the session, the same code path as the specdec
 * binary. SmolLM2 gets an input-grounded prompt (repeat a paragraph), where
 * n-gram drafts shine; its drafter is the self-speculative first 10 layers.
 * stories260K drafts with its Q8_0 variant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session/session.h"

#define RUNS 3

/* The rows: every strategy of the registry in its order (ar first), and
 * after NASD "nasd2g", NASD with twice the gamma: with high acceptance,
 * longer drafts pay for the wider verification call. */
#define N_ROWS (SD_N_STRATEGIES + 1)

typedef struct row {
    const sd_strategy *t;
    int gamma_x; /* the case's gamma times this */
    const char *name;
} row;

static void make_rows(row *r) {
    for (int i = 0, k = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        r[k++] = (row){t, 1, t->name};
        if (t->bit == SD_STRAT_NASD) r[k++] = (row){t, 2, "nasd2g"};
    }
}

typedef struct bench_case {
    const char *title, *target, *draft;
    int draft_layers, chat, gen, gamma;
    const char *prompt;
} bench_case;

/* A verification run's time split (sd_gen_stats) as whole percentages of
 * the run: drafting/catch-up/verification/host; "-" for the strategies
 * without rounds. */
static void time_split(const sd_gen_stats *st, char *buf, size_t cap) {
    if (!(st->verify_s > 0 && st->total_s > 0)) {
        snprintf(buf, cap, "-");
        return;
    }
    const double k = 100.0 / st->total_s;
    snprintf(buf, cap, "%.0f/%.0f/%.0f/%.0f", st->draft_s * k, st->catchup_s * k, st->verify_s * k,
             st->host_s * k);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_case(const bench_case *c) {
    sd_err e = {{0}};
    sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.model = c->target;
    cfg.draft = c->draft;
    cfg.draft_layers = c->draft ? 0 : c->draft_layers;
    cfg.chat = c->chat;
    cfg.n_predict = c->gen;
    cfg.n_ctx = 2048;
    cfg.gamma = c->gamma;
    sd_session s;
    if (sd_session_open(&s, &cfg, &e)) {
        fprintf(stderr, "bench_strategies: %s\n", e.msg);
        return -1;
    }
    int rc = -1, n_ids = 0;
    int32_t *ids = NULL, *out[N_ROWS] = {0};
    row rows[N_ROWS];
    make_rows(rows);
    if (sd_session_prompt_ids(&s, c->prompt, &ids, &n_ids, &e) || sd_session_warm_up(&s, ids, &e))
        goto done;
    printf("\n%s: %s, prompt %d tokens, %d new tokens max, gamma %d, drafter %s\n", c->title,
           strrchr(c->target, '/') + 1, n_ids, c->gen, c->gamma,
           c->draft ? strrchr(c->draft, '/') + 1 : "self (first layers)");
    printf("%-6s %8s %9s %9s %9s %8s %12s %8s %9s %13s %s\n", "", "tokens", "tok/s", "decode/s", "accept",
           "calls", "host B/round", "vs ar", "dec vs ar", "d/c/v/h %", "output");
    double ar_tps = 0, ar_dec = 0;
    int n_out[N_ROWS];
    for (int k = 0; k < N_ROWS; k++) {
        if (!(out[k] = malloc((size_t)c->gen * sizeof(int32_t)))) goto done;
        double tps[RUNS], dec[RUNS];
        sd_gen_stats st;
        s.c.gamma = rows[k].gamma_x * c->gamma;
        for (int r = 0; r < RUNS; r++) {
            int n = sd_session_generate(&s, rows[k].t->bit, ids, n_ids, NULL, out[k], &st, &e);
            if (n < 0) goto done;
            n_out[k] = n;
            tps[r] = st.total_s > 0 ? n / st.total_s : 0;
            dec[r] = sd_gen_decode_tps(&st);
        }
        qsort(tps, RUNS, sizeof *tps, cmp);
        qsort(dec, RUNS, sizeof *dec, cmp);
        const double med = tps[RUNS / 2], med_dec = dec[RUNS / 2];
        if (k == 0) ar_tps = med, ar_dec = med_dec;
        char acc[16] = "-";
        if (st.drafted) snprintf(acc, sizeof acc, "%.1f%%", 100.0 * st.accepted / st.drafted);
        const char *same = k == 0 ? "" : !rows[k].t->lossless ? "(not lossless)"
                           : n_out[k] == n_out[0] && !memcmp(out[k], out[0], (size_t)n_out[k] * 4)
                               ? "identical to ar"
                               : "DIFFERS from ar";
        /* bytes copied from backend memory to the host per target call
         * (a verification round, or an AR/beam step; draft-only: per
         * drafter step, as it makes no target call) */
        const long rounds = st.target_calls ? st.target_calls : st.draft_calls;
        char split[32];
        time_split(&st, split, sizeof split);
        printf("%-6s %8d %9.1f %9.1f %9s %8ld %12.0f %7.2fx %8.2fx %13s %s\n", rows[k].name, n_out[k], med,
               med_dec, acc, st.target_calls + st.draft_calls,
               rounds ? (double)st.host_bytes / rounds : 0.0, med / ar_tps,
               ar_dec > 0 ? med_dec / ar_dec : 0.0, split, same);
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    for (int k = 0; k < N_ROWS; k++) free(out[k]);
    free(ids);
    sd_session_close(&s);
    return rc;
}

/* The real pair: Qwen2.5-Coder 0.5B drafting for the 1.5B, greedy, on code
 * prompts, one table per prompt with the speedup of speculative decoding
 * (the drafter's whole head; its head cut to the first PAIR_VOCAB token
 * ids: "spec/v"; that head with rounds ended at a draft below PAIR_P_MIN:
 * "spec/vp") and NASD over the 1.5B's own autoregressive run for gamma
 * 1..8 (one run each), then the gamma with the best mean speculative
 * speedup over the prompts, per drafter setting, over the whole call and
 * over the decode phase. The prompts are short (21-73 tokens) but the
 * 1.5B's prefill is still 7-25% of its autoregressive call; speculative
 * decoding's own prefill of the drafter counts in its decode phase.
 *
 * A shared host's speed can drift over minutes, and one prompt's 32 rows
 * take about two. So the autoregressive
 * run is repeated before each row set and after the last (5 runs a
 * prompt), and a row's speedup is over the mean of the two runs around its
 * set; the header gives their range. */
#define PAIR_GEN 64
#define MAX_GAMMA 8
#define PAIR_VOCAB 32768
#define PAIR_P_MIN 0.9
#define PAIR_SETS 4

typedef struct pair_prompt {
    const char *title, *text;
    int chat;
} pair_prompt;

static int run_pair(const pair_prompt *pp, int n_pp) {
    sd_err e = {{0}};
    sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.model = "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    cfg.draft = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    cfg.n_predict = PAIR_GEN;
    cfg.n_ctx = 1024;
    sd_session s;
    if (sd_session_open(&s, &cfg, &e)) {
        fprintf(stderr, "bench_strategies: %s\n", e.msg);
        return -1;
    }
    int rc = -1;
    int32_t *ids = NULL, ar[PAIR_GEN], out[PAIR_GEN];
    double speedup[2][3][MAX_GAMMA + 1] = {{{0}}}; /* [whole call, decode phase][head][gamma] */
    for (int k = 0; k < n_pp; k++) {
        int n_ids = 0;
        s.c.chat = pp[k].chat;
        free(ids);
        ids = NULL;
        if (sd_session_prompt_ids(&s, pp[k].text, &ids, &n_ids, &e) ||
            sd_session_warm_up(&s, ids, &e))
            goto done;
        sd_gen_stats st;
        double ar_tps[PAIR_SETS + 1], ar_dec[PAIR_SETS + 1];
        int n_ar = 0;
        static const char *const rows[PAIR_SETS] = {"spec", "spec/v", "spec/vp", "nasd"};
        double lines[PAIR_SETS][MAX_GAMMA + 1][3]; /* tok/s, acceptance and decode tok/s of each row */
        long calls[PAIR_SETS][MAX_GAMMA + 1][2];
        char split[PAIR_SETS][MAX_GAMMA + 1][32];
        int same[PAIR_SETS][MAX_GAMMA + 1], got[PAIR_SETS][MAX_GAMMA + 1];
        for (int strat = 0; strat <= PAIR_SETS; strat++) {
            int n = sd_session_generate(&s, SD_STRAT_AR, ids, n_ids, NULL, strat ? out : ar, &st, &e);
            if (n < 0) goto done;
            if (!strat) n_ar = n;
            ar_tps[strat] = st.total_s > 0 ? n / st.total_s : 0;
            ar_dec[strat] = sd_gen_decode_tps(&st);
            for (int g = 1; strat < PAIR_SETS && g <= MAX_GAMMA; g++) {
                s.c.gamma = g;
                s.c.draft_vocab = strat == 1 || strat == 2 ? PAIR_VOCAB : 0;
                s.c.draft_p_min = strat == 2 ? PAIR_P_MIN : 0;
                int bit = strat == 3 ? SD_STRAT_NASD : SD_STRAT_SPEC;
                n = sd_session_generate(&s, bit, ids, n_ids, NULL, out, &st, &e);
                if (n < 0) goto done;
                lines[strat][g][0] = st.total_s > 0 ? n / st.total_s : 0;
                lines[strat][g][1] = st.drafted ? 100.0 * st.accepted / st.drafted : -1;
                lines[strat][g][2] = sd_gen_decode_tps(&st);
                calls[strat][g][0] = st.target_calls, calls[strat][g][1] = st.draft_calls;
                time_split(&st, split[strat][g], sizeof split[strat][g]);
                got[strat][g] = n;
                same[strat][g] = n == n_ar && !memcmp(out, ar, (size_t)n * sizeof *out);
            }
        }
        double lo = ar_tps[0], hi = ar_tps[0], dlo = ar_dec[0], dhi = ar_dec[0];
        for (int r = 1; r <= PAIR_SETS; r++) {
            lo = fmin(lo, ar_tps[r]), hi = fmax(hi, ar_tps[r]);
            dlo = fmin(dlo, ar_dec[r]), dhi = fmax(dhi, ar_dec[r]);
        }
        printf("\nQwen2.5-Coder 0.5B -> 1.5B, %s: prompt %d tokens, %d new tokens, ar %.2f-%.2f tok/s, "
               "decode %.2f-%.2f tok/s (%d runs, one before each row set and one after the last)\n",
               pp[k].title, n_ids, n_ar, lo, hi, dlo, dhi, PAIR_SETS + 1);
        printf("%-7s %5s %8s %9s %9s %8s %7s %6s %8s %9s %13s %s\n", "", "gamma", "tokens", "tok/s",
               "decode/s", "accept", "target", "draft", "vs ar", "dec vs ar", "d/c/v/h %", "output");
        for (int strat = 0; strat < PAIR_SETS; strat++)
            for (int g = 1; g <= MAX_GAMMA; g++) {
                const double ref = (ar_tps[strat] + ar_tps[strat + 1]) / 2, tps = lines[strat][g][0];
                const double dref = (ar_dec[strat] + ar_dec[strat + 1]) / 2, dtps = lines[strat][g][2];
                if (strat < 3) {
                    speedup[0][strat][g] += tps / ref / n_pp;
                    speedup[1][strat][g] += dtps / dref / n_pp;
                }
                char acc[16] = "-";
                if (lines[strat][g][1] >= 0) snprintf(acc, sizeof acc, "%.1f%%", lines[strat][g][1]);
                printf("%-7s %5d %8d %9.2f %9.2f %8s %7ld %6ld %7.2fx %8.2fx %13s %s\n", rows[strat], g,
                       got[strat][g], tps, dtps, acc, calls[strat][g][0], calls[strat][g][1], tps / ref,
                       dtps / dref, split[strat][g],
                       same[strat][g] ? "identical to ar" : "DIFFERS from ar");
            }
    }
    for (int ph = 0; ph < 2; ph++)
        for (int h = 0; h < 3; h++) {
            int best = 1;
            for (int g = 2; g <= MAX_GAMMA; g++)
                if (speedup[ph][h][g] > speedup[ph][h][best]) best = g;
            char head[64] = "whole";
            if (h) snprintf(head, sizeof head, "ids below %d%s", PAIR_VOCAB, h == 2 ? ", p_min " : "");
            if (h == 2) snprintf(head + strlen(head), sizeof head - strlen(head), "%g", PAIR_P_MIN);
            printf("%sbest gamma for speculative decoding, drafter head %s: %d (mean speedup %.2fx over %d "
                   "prompts, %s)\n", h ? "" : "\n", head, best, speedup[ph][h][best], n_pp,
                   ph ? "decode phase" : "whole call");
        }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_strategies: %s\n", e.msg);
    free(ids);
    sd_session_close(&s);
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
    static const pair_prompt pair[] = {
        {"completion", "def is_prime(n: int) -> bool:\n    \"\"\"Return True when n is a prime number.\"\"\"\n", 0},
        {"chat request", "Write a C function that reverses a singly linked list in place.", 1},
        {"edit (repeat with a change)",
         "Rename the variable total to sum in this function and print the whole function again:\n\n"
         "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n"
         "    return total / len(values)\n", 1},
    };
    rc |= run_pair(pair, (int)(sizeof pair / sizeof pair[0]));
    return rc ? 1 : 0;
}
