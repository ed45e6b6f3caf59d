/* The engine's random number generator: xoshiro256** seeded through
 * splitmix64. Every random choice of a run (sampling, speculative
 * acceptance) draws from one sd_rng, so a seed reproduces a run bit for bit.
 * Not thread-safe: one generator per thread. */
#ifndef SD_RNG_H
#define SD_RNG_H

#include <stdint.h>

typedef struct sd_rng {
    uint64_t s[4];
} sd_rng;

/* Expands the seed into the 256-bit state (never all zero). */
void sd_rng_seed(sd_rng *r, uint64_t seed);

/* Next 64 random bits. */
uint64_t sd_rng_next(sd_rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double sd_rng_uniform(sd_rng *r);

#endif
