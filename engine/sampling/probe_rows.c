#include "engine/sampling/probe_rows.h"

#include <math.h>

#include "engine/sampling/rng.h"

sd_engine_info sd_probe_info(int max_history) {
    static const int32_t eos[] = {0};
    return (sd_engine_info){.abi_version = SD_SAMPLER_ABI_VERSION_2,
                            .struct_size = sizeof(sd_engine_info),
                            .n_vocab = SD_PROBE_VOCAB,
                            .max_history = max_history,
                            .role = SD_ROLE_OTHER,
                            .n_eos = 1,
                            .eos_ids = eos,
                            .piece = sd_probe_piece,
                            .vocab_text = sd_probe_piece};
}

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
