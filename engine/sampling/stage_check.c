#include "engine/sampling/stage_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Finite and >= 0, as float bits: below the +inf pattern, or -0. */
static int good_value(float v) {
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b < 0x7f800000u || b == 0x80000000u;
}


/* Checked after every process() call, so it is written to vectorize: the
 * per-token test is an integer max over bit patterns, the sum uses four
 * accumulators; the scalar search for the culprit runs only on failure. */
int sd_check_distribution(const float *probs, int n_rows, int n_vocab, char *why,
                              size_t len) {
    for (int r = 0; r < n_rows; r++) {
        const float *row = probs + (size_t)r * (size_t)n_vocab;
        /* As int32 bit patterns (-0 taken as 0), valid values lie in
         * [0, bits(+inf)): track the extremes per lane. */
        int32_t hi[8] = {0}, lo[8] = {0};
        int i = 0;
        for (; i + 8 <= n_vocab; i += 8)
            for (int j = 0; j < 8; j++) {
                int32_t b;
                memcpy(&b, &row[i + j], sizeof b);
                b = b == INT32_MIN ? 0 : b;
                hi[j] = b > hi[j] ? b : hi[j];
                lo[j] = b < lo[j] ? b : lo[j];
            }
        int bad = 0;
        for (int j = 0; j < 8; j++)
            bad |= hi[j] >= 0x7f800000 || lo[j] < 0;
        for (; i < n_vocab; i++)
            bad |= !good_value(row[i]);
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (i = 0; i + 4 <= n_vocab; i += 4) {
            s0 += row[i];
            s1 += row[i + 1];
            s2 += row[i + 2];
            s3 += row[i + 3];
        }
        for (; i < n_vocab; i++)
            s0 += row[i];
        if (bad) {
            for (i = 0; good_value(row[i]); i++)
                ;
            snprintf(why, len, "row %d: probs[%d] = %g", r, i, (double)row[i]);
            return -1;
        }
        double sum = (s0 + s1) + (s2 + s3);
        if (fabs(sum - 1.0) > SD_SUM_TOLERANCE) {
            snprintf(why, len, "row %d sums to %.6g, not 1", r, sum);
            return -1;
        }
    }
    return 0;
}

/* A logits row: finite or -inf everywhere, at least one finite value.
 * Checked after every logits stage, so written to vectorize: as bit
 * patterns, NaN and +inf are the magnitudes >= that of +inf except -inf
 * itself; the scalar search for the culprit runs only on failure. */
int sd_check_logits(const float *x, int n, char *why, size_t len) {
    uint32_t bad = 0, finite = 0;
    for (int i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        bad |= (uint32_t)((b & 0x7fffffffu) >= 0x7f800000u && b != 0xff800000u);
        finite |= (uint32_t)((b & 0x7fffffffu) < 0x7f800000u);
    }
    if (bad) {
        int i = 0;
        while (!isnan(x[i]) && x[i] != INFINITY)
            i++;
        snprintf(why, len, "logits[%d] = %g", i, (double)x[i]);
        return -1;
    }
    if (!finite)
        snprintf(why, len, "every logit is -inf");
    return finite ? 0 : -1;
}

/* The output of one process() call of a version-2 stage, checked by kind. */
int sd_check_stage_output(const stage_def *d, const float *out, int n, char *why, size_t len) {
    return d->d.kind == SD_STAGE_LOGITS ? sd_check_logits(out, n, why, len)
                                      : sd_check_distribution(out, 1, n, why, len);
}

int32_t sd_first_max(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
