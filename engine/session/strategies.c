#include "engine/session/strategies.h"

#include <stdio.h>
#include <string.h>

#include "engine/session/session.h"

/* Each run reads the session's settings and models, and calls the decode
 * layer; the session has checked the drafter and the head limit before. */

static int run_ar(sd_session *s, const sd_strategy_run *r, sd_err *e) {
    return sd_autoregressive_generate_lm(r->ids, r->n_ids, &s->target_lm, r->max, r->cfg, r->out,
                                         r->st, e);
}

/* The drafter alone, with its own sampler instance: its calls are drafter
 * calls, and its file (the target's for a self-speculative drafter) names
 * the output's model. */
static int run_draft(sd_session *s, const sd_strategy_run *r, sd_err *e) {
    sd_gen_cfg cfg = *r->cfg;
    cfg.sampler = s->draft_sampler;
    cfg.draft_sampler = NULL;
    int n = sd_autoregressive_generate_lm(r->ids, r->n_ids, &s->draft_lm, r->max, &cfg, r->out,
                                          r->st, e);
    r->st->draft_calls = r->st->target_calls;
    r->st->target_calls = 0;
    r->st->model = s->draft ? s->c.draft : s->c.model;
    return n;
}

/* Strategies whose drafter samples from the chain: refused, with the
 * stage's reason, when the chain has no drafter instance. */
static int check_drafter_sampler(const sd_session *s, sd_err *e) {
    if (!s->sampler || s->draft_sampler) return 0;
    return sd_fail(e, "%s", s->drafter_refused);
}

static int run_spec(sd_session *s, const sd_strategy_run *r, sd_err *e) {
    const sd_config *c = &s->c;
    sd_spec_opts o = {{sd_session_gamma(c, SD_STRAT_SPEC), c->skip_sample_adjustment,
                       !c->no_first_target, c->fixed_gamma ? 0 : c->stop_below},
                      c->draft_p_min, c->hybrid_n};
    return sd_speculative_generate(r->ids, r->n_ids, &s->draft_lm, &s->target_lm, &o, r->max,
                                   r->cfg, r->out, r->st, e);
}

static int run_nasd(sd_session *s, const sd_strategy_run *r, sd_err *e) {
    const sd_config *c = &s->c;
    if (!c->keep_ngrams) sd_ngram_reset(s->store);
    sd_nasd_opts o = {{sd_session_gamma(c, SD_STRAT_NASD), c->skip_sample_adjustment,
                       !c->no_first_target, 0},
                      c->filler_top_k, c->stop_if_unknown};
    return sd_ngram_assisted_generate(r->ids, r->n_ids, s->store, &s->target_lm, &o, r->max,
                                      r->cfg, r->out, r->st, e);
}

static int check_beam(const sd_session *s, sd_err *e) {
    return sd_beam_check_sampler(s->sampler, e);
}

static int run_beam(sd_session *s, const sd_strategy_run *r, sd_err *e) {
    const sd_config *c = &s->c;
    sd_beam_opts o = {c->beams, c->beam_top_k, c->min_length, c->alpha};
    return sd_beam_search_generate(r->ids, r->n_ids, s->target, &o, r->max, r->cfg, r->out, r->st,
                                   e);
}

const sd_strategy sd_strategies[SD_N_STRATEGIES] = {
    {SD_STRAT_AR, "ar", "target (autoregressive)", 0, 1, SD_OPT_SAMPLER, NULL, run_ar},
    {SD_STRAT_SPEC, "spec", "speculative", 1, 1,
     SD_OPT_GAMMA | SD_OPT_P_MIN | SD_OPT_DRAFT_VOCAB | SD_OPT_SAMPLER, check_drafter_sampler,
     run_spec},
    {SD_STRAT_NASD, "nasd", "ngram (NASD)", 0, 1, SD_OPT_GAMMA | SD_OPT_NGRAM | SD_OPT_SAMPLER, NULL,
     run_nasd},
    {SD_STRAT_BEAM, "beam", "beam search", 0, 0, SD_OPT_BEAM, check_beam, run_beam},
    {SD_STRAT_DRAFT, "draft", "drafter (draft-only)", 1, 0, SD_OPT_DRAFT_VOCAB | SD_OPT_SAMPLER,
     check_drafter_sampler, run_draft},
};

const sd_strategy *sd_strategy_find(int bit) {
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        if (sd_strategies[i].bit == bit) return &sd_strategies[i];
    return NULL;
}

const char *sd_strategy_name(int bit) {
    const sd_strategy *t = sd_strategy_find(bit);
    return t ? t->name : "?";
}

int sd_parse_strategies(const char *list, int *bits, sd_err *e) {
    int out = 0;
    const char *p = list;
    while (1) {
        size_t n = strcspn(p, ",");
        int i = 0;
        for (; i < SD_N_STRATEGIES; i++)
            if (strlen(sd_strategies[i].name) == n && !strncmp(p, sd_strategies[i].name, n)) break;
        if (i == SD_N_STRATEGIES) {
            char known[96] = "";
            for (int k = 0; k < SD_N_STRATEGIES; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
                         sd_strategies[k].name);
            return sd_fail(e, "unknown strategy '%.*s' (known: %s)", (int)(n > 40 ? 40 : n), p,
                           known);
        }
        out |= sd_strategies[i].bit;
        if (!p[n]) break;
        p += n + 1;
    }
    *bits = out;
    return 0;
}

const sd_strategy *sd_strategies_needing_drafter(int bits) {
    for (int i = 0; i < SD_N_STRATEGIES; i++)
        if ((bits & sd_strategies[i].bit) && sd_strategies[i].needs_drafter) return &sd_strategies[i];
    return NULL;
}
