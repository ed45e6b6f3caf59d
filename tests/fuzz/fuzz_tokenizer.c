/* libFuzzer entry for sd_fuzz_tokenizer (tests/util/fuzz_bodies.h); built and run
 * by `make fuzz`. */
#include <stddef.h>
#include <stdint.h>

#include "tests/util/fuzz_bodies.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sd_fuzz_tokenizer(data, size);
    return 0;
}
