/* A stage whose rollback does nothing (or too little) gives the same output
 * as a correct one as long as only the drafter's instance rolls back: the
 * target verifies, so the text does not change, and a short test with
 * three distinct tokens and rollback(1) does not see it either. This probe
 * makes the difference visible. One handle (the walker) goes through
 * rounds: accept ROUND_LEN tokens drawn from a small alphabet with repeated
 * runs (so penalties and n-gram stages have something to count), then
 * rollback(k) with k from ks[], then process the next row. A second handle,
 * created fresh and told the surviving history token by token, must give
 * that row bit for bit. Before each accept both process the row of that
 * position, as the engine guarantees, and the row depends on the position
 * only, so a stage that keeps something of the last row (mirostat) sees the
 * same rows on both paths. The tokens accepted after a rollback differ from
 * the ones undone, so state left behind by a rollback shows. Every fifth
 * row is half the vocabulary long (a drafter limited to the first ids) while
 * the history holds tokens of the whole vocabulary: a stage must treat a
 * token past the row's end as absent from that row, and write nothing past
 * the row's end (checked). */
#include "engine/sampling/history_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling/rng.h"
#include "engine/sampling/probe_rows.h"
#include "engine/sampling/stage_v1.h"

#define PROMPT_LEN 8
#define ROUND_LEN 40
#define N_ROUNDS 8
#define MAX_HISTORY (PROMPT_LEN + N_ROUNDS * ROUND_LEN + 1)

static const int ks[N_ROUNDS] = {1, 2, 3, 5, 8, 13, 21, 34};

/* The logits row of position pos: Gaussian, seeded by the position, and
 * its length. */
static int row_at(int pos, float *row) {
    sd_probe_gaussian(0x40b0u + (uint64_t)pos, 2.0, row);
    return pos % 5 == 0 ? SD_PROBE_VOCAB / 2 : SD_PROBE_VOCAB;
}

/* The token accepted at pos in round `round`: mostly a repeated run of a
 * short pattern, sometimes a token of the small alphabet at random. */
static int32_t token_at(int pos, int round, sd_rng *r) {
    static const int32_t pattern[] = {3, 7, 3, 7, 11, 3, 5};
    if (sd_rng_uniform(r) < 0.25)
        return sd_rng_uniform(r) < 0.3 ? SD_PROBE_VOCAB - 1 - round
                                       : (int32_t)(sd_rng_uniform(r) * 12);
    return (pattern[(pos + round) % 7] + round) % SD_PROBE_VOCAB;
}

typedef struct walker {
    const sd_stage_desc *d;
    void *h;
} walker;

static int step(walker *w, int pos, int32_t tok, float *scratch) {
    float row[SD_PROBE_VOCAB];
    int n = row_at(pos, row);
    return w->d->process(w->h, row, scratch, n) || w->d->accept(w->h, tok);
}

/* A fresh handle told hist[0..n): its row at position n into out. */
static int replay(const stage_def *def, const sd_engine_info *info, const sd_sampler_value *v,
                  const int32_t *hist, int n, float *out, char *why, size_t len) {
    char err[256] = "";
    walker w = {&def->d, sd_stage_create(def, info, v, err, sizeof err)};
    if (!w.h) {
        snprintf(why, len, "history probe: a second create failed: %.200s", err);
        return -1;
    }
    float scratch[SD_PROBE_VOCAB], row[SD_PROBE_VOCAB];
    int rc = w.d->reset(w.h, hist, PROMPT_LEN);
    for (int p = PROMPT_LEN; p < n && !rc; p++)
        rc = step(&w, p, hist[p], scratch);
    int len_n = row_at(n, row);
    rc = rc || w.d->process(w.h, row, out, len_n);
    if (rc)
        snprintf(why, len, "history probe: the replay of %d tokens failed", n);
    w.d->destroy(w.h);
    return rc ? -1 : 0;
}

int sd_history_probe(const stage_def *def, char *why, size_t len) {
    sd_engine_info info = sd_probe_info(MAX_HISTORY);
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    sd_stage_defaults(def, v);
    char err[256] = "";
    walker w = {&def->d, sd_stage_create(def, &info, v, err, sizeof err)};
    if (!w.h) {
        snprintf(why, len, "history probe: create with a %d-token history failed: %.200s",
                 MAX_HISTORY, err);
        return -1;
    }
    int32_t hist[MAX_HISTORY];
    float scratch[SD_PROBE_VOCAB], got[SD_PROBE_VOCAB], want[SD_PROBE_VOCAB];
    sd_rng r;
    sd_rng_seed(&r, 0x7157u);
    for (int i = 0; i < PROMPT_LEN; i++)
        hist[i] = token_at(i, 0, &r);
    int n = PROMPT_LEN, rc = -1;
    if (w.d->reset(w.h, hist, PROMPT_LEN)) {
        snprintf(why, len, "history probe: reset failed");
        goto done;
    }
    for (int round = 0; round < N_ROUNDS; round++) {
        for (int j = 0; j < ROUND_LEN; j++, n++) {
            hist[n] = token_at(n, round, &r);
            if (step(&w, n, hist[n], scratch)) {
                snprintf(why, len, "history probe: process or accept failed at position %d", n);
                goto done;
            }
        }
        int k = ks[round];
        if (w.d->rollback(w.h, k)) {
            snprintf(why, len, "history probe: rollback(%d) failed at %d tokens", k, n);
            goto done;
        }
        n -= k;
        float row[SD_PROBE_VOCAB];
        int len_n = row_at(n, row);
        for (int i = len_n; i < SD_PROBE_VOCAB; i++)
            got[i] = want[i] = 12345.0f;
        if (w.d->process(w.h, row, got, len_n)) {
            snprintf(why, len, "history probe: process failed after rollback(%d)", k);
            goto done;
        }
        if (replay(def, &info, v, hist, n, want, why, len))
            goto done;
        for (int i = len_n; i < SD_PROBE_VOCAB; i++)
            if (got[i] != 12345.0f || want[i] != 12345.0f) {
                snprintf(why, len,
                         "process wrote past the end of a row of %d values (value %d changed)",
                         len_n, i);
                goto done;
            }
        for (int i = 0; i < len_n; i++)
            if (memcmp(&got[i], &want[i], sizeof got[i])) {
                snprintf(why, len,
                         "rollback does not restore the history: at %d tokens, rollback(%d) "
                         "then process gives %.9g for token %d where a fresh handle told the "
                         "remaining %d tokens gives %.9g",
                         n + k, k, (double)got[i], i, n, (double)want[i]);
                goto done;
            }
    }
    rc = 0;
done:
    w.d->destroy(w.h);
    return rc;
}
