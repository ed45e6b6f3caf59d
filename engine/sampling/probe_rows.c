#include "engine/sampling/probe_rows.h"

#include <math.h>

#include "engine/sampling/rng.h"

const char *sd_probe_piece(const void *ctx, int32_t id, size_t *len) {
    static const char pieces[] = "<0><1><2><3><4><5><6><7><8><9><?>";
    (void)ctx;
    if (id < 0 || id >= SD_PROBE_VOCAB)
        return NULL;
    *len = 3;
    return pieces + 3 * (id < 10 ? id : 10);
}

void sd_probe_gaussian(uint64_t seed, double sd, float *row) {
    sd_rng r;
    sd_rng_seed(&r, seed);
    for (int i = 0; i < SD_PROBE_VOCAB; i++) {
        double u1 = 1.0 - sd_rng_uniform(&r), u2 = sd_rng_uniform(&r);
        row[i] = (float)(sd * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}
