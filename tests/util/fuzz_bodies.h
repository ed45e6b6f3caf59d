/* Entry logic of the libFuzzer harnesses in tests/fuzz/, shared with the
 * Criterion suite tests/test_fuzz_regress.c that replays every input a
 * fuzzer ever crashed on (tests/fuzz/regress/<harness>/). Each body takes
 * one input, drives the library with it and frees everything it made; a
 * bug shows up as a sanitizer report or a crash, never as a return value.
 *
 * The tokenizer and sampler bodies load their fixed inputs (tokenizers,
 * plugins) once, on the first call, from paths relative to the repository
 * root; sd_fuzz_teardown releases them (the fuzzers never call it: they
 * exit with the state still reachable). sd_fuzz_cli lives in
 * tests/fuzz/cli_body.c because it needs engine/cli/args.c, which is not
 * part of the library every test links. */
#ifndef SD_TEST_FUZZ_BODIES_H
#define SD_TEST_FUZZ_BODIES_H

#include <stddef.h>
#include <stdint.h>

void sd_fuzz_gguf(const uint8_t *data, size_t size);
void sd_fuzz_tokenizer(const uint8_t *data, size_t size);
void sd_fuzz_sampler_args(const uint8_t *data, size_t size);
void sd_fuzz_cli(const uint8_t *data, size_t size);
void sd_fuzz_teardown(void);

#endif
