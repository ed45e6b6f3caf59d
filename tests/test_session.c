/* The session layer: the strategy registry (engine/session/strategies.h)
 * and every strategy run through sd_session_generate, as the CLI and the
 * benchmarks run them. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/session/session.h"

#define MODELS "tests/data/models/"

Test(registry, bits_names_and_order) {
    for (int i = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        cr_assert_eq(t->bit, 1 << i, "%s", t->name);
        cr_assert_eq(sd_strategy_find(t->bit), t);
        cr_assert_str_eq(sd_strategy_name(t->bit), t->name);
        cr_assert(t->run && t->title && t->title[0], "%s", t->name);
        for (int k = 0; k < i; k++) cr_assert_str_neq(sd_strategies[k].name, t->name);
    }
    cr_assert_eq(sd_strategies[0].bit, SD_STRAT_AR, "ar runs first: the others compare with it");
    cr_assert_null(sd_strategy_find(0));
    cr_assert_null(sd_strategy_find(SD_STRAT_AR | SD_STRAT_SPEC));
    cr_assert_str_eq(sd_strategy_name(1 << SD_N_STRATEGIES), "?");
}

Test(registry, parse_every_name_and_refuse_others) {
    char list[128] = "";
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "",
                 sd_strategies[i].name);
    int bits = 0;
    sd_err e = {{0}};
    cr_assert_eq(sd_parse_strategies(list, &bits, &e), 0, "%s", e.msg);
    cr_assert_eq(bits, (1 << SD_N_STRATEGIES) - 1);
    cr_assert_eq(sd_parse_strategies("nasd", &bits, &e), 0);
    cr_assert_eq(bits, SD_STRAT_NASD);
    cr_assert_eq(sd_parse_strategies("ar,specx", &bits, &e), -1);
    cr_assert(strstr(e.msg, "'specx'"), "%s", e.msg);
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        cr_assert(strstr(e.msg, sd_strategies[i].name), "the message lists every name: %s", e.msg);
}

Test(registry, drafter_needs) {
    cr_assert_null(sd_strategies_needing_drafter(SD_STRAT_AR | SD_STRAT_NASD | SD_STRAT_BEAM));
    const sd_strategy *t = sd_strategies_needing_drafter(SD_STRAT_AR | SD_STRAT_DRAFT);
    cr_assert(t && t->bit == SD_STRAT_DRAFT);
    cr_assert_eq(sd_strategies_needing_drafter(SD_STRAT_SPEC)->bit, SD_STRAT_SPEC);
}

static void open_session(sd_session *s, const char *target, const char *draft, int n_ctx) {
    sd_config c;
    sd_config_defaults(&c);
    c.model = target;
    c.draft = draft;
    c.n_ctx = n_ctx;
    c.n_predict = 24;
    c.threads = 1;
    c.have_seed = 1;
    c.seed = 7;
    sd_err e = {{0}};
    cr_assert_eq(sd_session_open(s, &c, &e), 0, "%s", e.msg);
}

/* Every strategy of the registry through the session; the lossless ones
 * give ar's greedy ids. */
Test(session, every_strategy_runs) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", MODELS "stories260K-q8_0.gguf", 256);
    sd_err e = {{0}};
    int32_t *ids = NULL, ar[24], out[24];
    int n_ids = 0, n_ar = 0;
    cr_assert_eq(sd_session_prompt_ids(&s, "Once upon a time", &ids, &n_ids, &e), 0, "%s", e.msg);
    for (int i = 0; i < SD_N_STRATEGIES; i++) {
        const sd_strategy *t = &sd_strategies[i];
        sd_gen_stats st;
        int n = sd_session_generate(&s, t->bit, ids, n_ids, NULL, i ? out : ar, &st, &e);
        cr_assert(n > 0, "%s: %s", t->name, e.msg);
        if (!i) n_ar = n;
        else if (t->lossless)
            cr_assert(n == n_ar && !memcmp(out, ar, (size_t)n * sizeof *out), "%s", t->name);
    }
    free(ids);
    sd_session_close(&s);
}

Test(session, strategy_needing_a_drafter_without_one) {
    sd_session s;
    open_session(&s, MODELS "stories260K.gguf", NULL, 64);
    sd_err e = {{0}};
    int32_t ids[2] = {1, 2}, out[24];
    sd_gen_stats st;
    cr_assert_eq(sd_session_generate(&s, SD_STRAT_DRAFT, ids, 2, NULL, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "need a drafter") && strstr(e.msg, "--draft-layers"), "%s", e.msg);
    cr_assert_eq(sd_session_generate(&s, 0, ids, 2, NULL, out, &st, &e), -1);
    sd_session_close(&s);
}
