/* The cost model of verification runs (speculative decoding, NASD): what a
 * run's decode phase should gain over autoregressive decoding given what
 * its parts cost, so a realised speedup far below the prediction points at
 * time spent outside drafting and verification.
 *
 * Per round after the first (the first also feeds the prompt):
 *   tau = 1 + accepted drafts per round      tokens a round emits
 *   c_v = sum_n f_n V(n)                     verification cost, f_n the share
 *                                            of rounds that scored n rows,
 *                                            V(n) their mean measured time
 *   c_d = d D                                drafter cost, d drafter calls per
 *                                            round, D their mean time (the
 *                                            catch-up calls included)
 * and the predicted speedup is S = tau T1 / (c_v + c_d), T1 the target's
 * one-row step (autoregressive decoding emits 1/T1 tokens a second). The
 * acceptance enters through tau, the verification widths through f_n and
 * V(n) (1, 1.03, 1.21, ... T1 for 1, 2, 3, ... rows on a 2-core AVX2 host),
 * the drafter's price through D; host work (acceptance tests, sampling,
 * the n-gram store) is left out on purpose. */
#include "engine/decode/decode.h"

double sd_cost_speedup(const sd_gen_stats *st, double step_s) {
    long rounds = 0;
    double c_v = 0;
    for (int n = 1; n < SD_COST_ROWS; n++) rounds += st->verify_calls_n[n];
    if (rounds == 0 || !(step_s > 0)) return 0;
    for (int n = 1; n < SD_COST_ROWS; n++)
        if (st->verify_calls_n[n])
            c_v += (double)st->verify_calls_n[n] / rounds *
                   (st->verify_s_n[n] / st->verify_calls_n[n]);
    const double D = st->draft_calls ? (st->draft_s + st->catchup_s) / st->draft_calls : 0;
    const double c_d = (double)st->draft_calls / rounds * D;
    const double tau = (double)(st->new_tokens - st->prefill_new_tokens) / rounds;
    return c_v + c_d > 0 ? tau * step_s / (c_v + c_d) : 0;
}
