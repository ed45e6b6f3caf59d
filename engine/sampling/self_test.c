/* The self-test: create on SD_PROBE_VOCAB tokens with the default
 * parameters, reset to a three-token prompt, process three probe rows
 * (Gaussian logits, a row with ties and masked tokens, a flat row) with the
 * chosen token accepted after each of the first two (a sampling stage's own
 * draw, a logits stage's largest output), checking every output; then, for
 * a stage with history, rollback(1) and reset must reproduce the outputs
 * bit for bit. A stage that mishandles such rows would corrupt a run later,
 * so it is rejected now with the reason. A greedy stage
 * (SD_SAMPLER_FLAG_ARGMAX) must pick the argmax of each row's logits, ties
 * to the lowest id: the engine takes that token itself without calling the
 * plugin, so a stage that picks another would mean one thing here and
 * another in a run. */
#include "engine/sampling/self_test.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/sampling/draw_check.h"
#include "engine/sampling/history_probe.h"
#include "engine/sampling/rng.h"
#include "engine/sampling/stage_check.h"
#include "engine/sampling/stage_v1.h"

#define PROBE_ROWS 3
#define PROBE_DRAWS 8
#define PROBE_HISTORY 16

static double rng_uniform(void *state) {
    return sd_rng_uniform(state);
}

/* The probe rows: Gaussian logits, a row with ties and masked (-inf)
 * tokens, and a flat row. */
static void probe_rows(float *logits, sd_rng *rng) {
    for (int i = 0; i < SD_PROBE_VOCAB; i++) {
        double u1 = 1.0 - sd_rng_uniform(rng), u2 = sd_rng_uniform(rng);
        logits[i] = (float)(3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        logits[SD_PROBE_VOCAB + i] = (i % 5 == 0) ? -INFINITY : (float)(i % 3);
        logits[2 * SD_PROBE_VOCAB + i] = 0.5f;
    }
}

int sd_v1_looks_stateful(const stage_def *def, char *note, size_t len) {
    if (!def->v1)
        return 0;
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = SD_PROBE_VOCAB,
                           .max_history = PROBE_HISTORY,
                           .role = SD_ROLE_OTHER,
                           .piece = sd_probe_piece,
                           .vocab_text = sd_probe_piece};
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    sd_stage_defaults(def, v);
    char err[256];
    void *h = sd_stage_create(def, &info, v, err, sizeof err);
    if (!h)
        return 0;
    float row[SD_PROBE_VOCAB], a[SD_PROBE_VOCAB], b[SD_PROBE_VOCAB];
    sd_probe_gaussian(0x57a7u, 3.0, row);
    int differs = !def->d.process(h, row, a, SD_PROBE_VOCAB) &&
                  !def->d.process(h, row, b, SD_PROBE_VOCAB) && memcmp(a, b, sizeof a);
    def->d.destroy(h);
    if (differs)
        snprintf(note, len,
                 "version-1 sampler '%s' looks stateful (process gave two different rows for "
                 "the same input); version 1 has no history, so under speculative decoding "
                 "and NASD its state is never rolled back: write it against version 2",
                 def->d.name);
    return differs;
}

int sd_self_test(const stage_def *def, char *why, size_t len) {
    const sd_stage_desc *d = &def->d;
    static const int32_t prompt[] = {1, 2, 3};
    sd_engine_info info = sd_probe_info(PROBE_HISTORY);
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    sd_stage_defaults(def, v);
    char err[256] = "";
    void *h = sd_stage_create(def, &info, v, err, sizeof err);
    if (!h) {
        err[sizeof err - 1] = '\0';
        snprintf(why, len, "create with the default parameters failed: %s",
                 err[0] ? err : "no reason given");
        return -1;
    }
    float logits[PROBE_ROWS * SD_PROBE_VOCAB], out[PROBE_ROWS][SD_PROBE_VOCAB];
    float again[SD_PROBE_VOCAB];
    sd_rng rng;
    sd_rng_seed(&rng, 0x5eed);
    probe_rows(logits, &rng);
    sd_sampler_rng lr = {rng_uniform, &rng};
    int32_t tok[PROBE_ROWS];
    char detail[160];
    int rc = -1;
    if (def->history && d->reset(h, prompt, 3)) {
        snprintf(why, len, "reset failed on a 3-token prompt");
        goto done;
    }
    for (int r = 0; r < PROBE_ROWS; r++) {
        const float *row = logits + r * SD_PROBE_VOCAB;
        if (d->process(h, row, out[r], SD_PROBE_VOCAB)) {
            snprintf(why, len, "process failed on self-test row %d", r);
            goto done;
        }
        /* the rows before r passed: checking rows 0..r names row r */
        if (def->d.kind == SD_STAGE_LOGITS
                ? sd_check_logits(out[r], SD_PROBE_VOCAB, detail, sizeof detail)
                : sd_check_distribution(out[0], r + 1, SD_PROBE_VOCAB, detail, sizeof detail)) {
            if (def->d.kind == SD_STAGE_LOGITS)
                snprintf(why, len, "process returned an invalid logits row on row %d: %s", r,
                         detail);
            else
                snprintf(why, len, "process returned an invalid distribution: %s", detail);
            goto done;
        }
        tok[r] = sd_first_max(out[r], SD_PROBE_VOCAB);
        /* several draws per row; one for a stage with history, whose
         * sample() may note what it drew */
        int draws = def->d.kind != SD_STAGE_SAMPLE ? 0 : def->history ? 1 : PROBE_DRAWS;
        for (int k = 0; k < draws; k++) {
            int32_t t = d->sample(h, out[r], SD_PROBE_VOCAB, &lr);
            if (t < 0 || t >= SD_PROBE_VOCAB) {
                snprintf(why, len, "sample returned %" PRId32 ", outside [0, %d) on row %d", t,
                         SD_PROBE_VOCAB, r);
                goto done;
            }
            if (!(out[r][t] > 0)) {
                snprintf(why, len,
                         "sample returned token %" PRId32 ", which has probability 0, on row %d",
                         t, r);
                goto done;
            }
            int32_t best = sd_first_max(row, SD_PROBE_VOCAB);
            if ((def->d.flags & SD_SAMPLER_FLAG_ARGMAX) && t != best) {
                snprintf(why, len,
                         "declares SD_SAMPLER_FLAG_ARGMAX but sample returned %" PRId32
                         " on probe row %d, not the argmax of its logits %" PRId32,
                         t, r, best);
                goto done;
            }
            if (k == 0)
                tok[r] = t;
        }
        if (def->history && r + 1 < PROBE_ROWS && d->accept(h, tok[r])) {
            snprintf(why, len, "accept failed after row %d", r);
            goto done;
        }
    }
    if (def->history) {
        /* rollback(1) undoes tok[1]: rows 1 and 2 must come out the same */
        static const char *const step[] = {"after rollback(1)", "after accept", "after reset"};
        const int rows[] = {1, 2, 0};
        for (int k = 0; k < 3; k++) {
            int fail = k == 0 ? d->rollback(h, 1)
                       : k == 1 ? d->accept(h, tok[1])
                                : d->reset(h, prompt, 3);
            if (fail) {
                snprintf(why, len, "%s failed in the history test",
                         k == 0 ? "rollback(1)" : k == 1 ? "accept" : "reset");
                goto done;
            }
            if (d->process(h, logits + rows[k] * SD_PROBE_VOCAB, again, SD_PROBE_VOCAB)) {
                snprintf(why, len, "process failed %s", step[k]);
                goto done;
            }
            if (memcmp(again, out[rows[k]], sizeof again)) {
                snprintf(why, len, "process %s differs from the first pass over row %d "
                         "(history not restored)", step[k], rows[k]);
                goto done;
            }
        }
    }
    rc = 0;
done:
    d->destroy(h);
    if (rc)
        return rc;
    if (def->history && sd_history_probe(def, why, len))
        return -1;
    return sd_draw_check(def, why, len);
}
