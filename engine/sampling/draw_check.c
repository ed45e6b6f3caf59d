/* Speculative decoding is exact only if sample() draws from the very
 * distribution process() returned: rejection sampling reads those numbers.
 * A stage that flips a coin in sample() (an XTC written the obvious way)
 * loads, runs, and silently changes what speculative decoding produces.
 * This check draws SD_DRAW_CHECK_DRAWS tokens from process()'s output on
 * two probe rows (fixed seeds) and runs Pearson's chi-square test on the
 * counts: tokens of expected count < 5 are pooled into one bin, and the
 * statistic is compared with the chi-square quantile of probability
 * 1 - SD_DRAW_CHECK_ALPHA (Wilson-Hilferty approximation, good to a few
 * percent at these degrees of freedom). At a 64-token vocabulary this is a
 * few hundred microseconds, cheap enough for every load. */
#include "engine/sampling/draw_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/sampling/rng.h"
#include "engine/sampling/probe_rows.h"
#include "engine/sampling/stage_v1.h"

/* One-sided standard normal quantile of SD_DRAW_CHECK_ALPHA (1e-6). */
#define Z_ALPHA 4.753424

static double rng_uniform(void *state) {
    return sd_rng_uniform(state);
}

static double chi2_quantile(int df) {
    double a = 2.0 / (9.0 * df), c = 1.0 - a + Z_ALPHA * sqrt(a);
    return df * c * c * c;
}

/* Rows whose distributions have mass spread over many tokens: the test
 * needs several bins of expected count >= 5. */
static void check_row(int k, float *row) {
    sd_probe_gaussian(0xd7a3u + (uint64_t)k, k ? 0.7 : 1.5, row);
}

static int test_row(const sd_stage_desc *d, void *h, int k, char *why, size_t len) {
    float row[SD_PROBE_VOCAB], p[SD_PROBE_VOCAB];
    check_row(k, row);
    if (d->process(h, row, p, SD_PROBE_VOCAB)) {
        snprintf(why, len, "draw check: process failed");
        return -1;
    }
    int count[SD_PROBE_VOCAB] = {0};
    sd_rng r;
    sd_rng_seed(&r, 0x5a3au + (uint64_t)k);
    sd_sampler_rng lr = {rng_uniform, &r};
    double sum = 0;
    for (int i = 0; i < SD_PROBE_VOCAB; i++)
        sum += p[i];
    for (int n = 0; n < SD_DRAW_CHECK_DRAWS; n++) {
        int32_t t = d->sample(h, p, SD_PROBE_VOCAB, &lr);
        if (t < 0 || t >= SD_PROBE_VOCAB || !(p[t] > 0)) {
            snprintf(why, len, "draw check: sample returned %" PRId32 ", not a token of "
                     "non-zero probability", t);
            return -1;
        }
        count[t]++;
    }
    double chi2 = 0, pooled_e = 0, worst = 0;
    int pooled_o = 0, bins = 0, worst_id = 0;
    for (int i = 0; i < SD_PROBE_VOCAB; i++) {
        double e = SD_DRAW_CHECK_DRAWS * p[i] / sum;
        if (e < 5) {
            pooled_e += e;
            pooled_o += count[i];
            continue;
        }
        double term = (count[i] - e) * (count[i] - e) / e;
        chi2 += term;
        bins++;
        if (term > worst) {
            worst = term;
            worst_id = i;
        }
    }
    if (pooled_e >= 5) {
        chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e;
        bins++;
    }
    if (bins < 2)
        return 0;
    double limit = chi2_quantile(bins - 1);
    if (chi2 > limit) {
        snprintf(why, len,
                 "sample does not draw from process's distribution: on probe row %d, %d draws "
                 "give chi-square %.1f over %d bins (limit %.1f at false-alarm rate %g); token "
                 "%d drawn %d times for an expected %.1f. A random filter must be part of "
                 "process's distribution (see plugins/README.md)",
                 k, SD_DRAW_CHECK_DRAWS, chi2, bins, limit, SD_DRAW_CHECK_ALPHA, worst_id,
                 count[worst_id], SD_DRAW_CHECK_DRAWS * p[worst_id] / sum);
        return -1;
    }
    return 0;
}

int sd_draw_check(const stage_def *def, char *why, size_t len) {
    const sd_stage_desc *d = &def->d;
    if (d->kind != SD_STAGE_SAMPLE || (d->flags & SD_SAMPLER_FLAG_ARGMAX))
        return 0;
    static const int32_t prompt[] = {1, 2, 3};
    sd_engine_info info = sd_probe_info(16);
    sd_sampler_value v[SD_SAMPLER_MAX_PARAMS];
    sd_stage_defaults(def, v);
    char err[256] = "";
    void *h = sd_stage_create(def, &info, v, err, sizeof err);
    if (!h) {
        snprintf(why, len, "draw check: create failed: %.200s", err);
        return -1;
    }
    int rc = def->history && d->reset(h, prompt, 3) ? -1 : 0;
    if (rc)
        snprintf(why, len, "draw check: reset failed");
    for (int k = 0; k < 2 && !rc; k++)
        rc = test_row(d, h, k, why, len);
    d->destroy(h);
    return rc;
}
