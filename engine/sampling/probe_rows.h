/* What the load-time checks feed a stage: a small vocabulary with pieces,
 * and seeded Gaussian logits rows. */
#ifndef SD_PROBE_ROWS_H
#define SD_PROBE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "samplers/sampler.h"

/* Vocabulary of the probe rows. */
#define SD_PROBE_VOCAB 64

/* Token i is the piece "<i>" for i < 10, "<?>" above: enough for a stage
 * that insists on pieces to start. NULL outside the vocabulary. */
const char *sd_probe_piece(const void *ctx, int32_t id, size_t *len);
/* The engine info a load-time check creates its instance with: the probe
 * vocabulary and its pieces, history up to max_history, one
 * end-of-generation id (0), no particular role. */
sd_engine_info sd_probe_info(int max_history);
/* row[0..SD_PROBE_VOCAB) = Gaussian logits of standard deviation sd, the
 * same for the same seed. */
void sd_probe_gaussian(uint64_t seed, double sd, float *row);

#endif
