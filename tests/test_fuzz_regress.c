/* Replays, through the same bodies the libFuzzer harnesses run
 * (tests/util/fuzz_bodies.h), every input a fuzzer crashed on
 * (tests/fuzz/regress/<harness>/) and every seed (tests/fuzz/corpus/<harness>/).
 * A body has no result to check: under `make test SANITIZE=1` a
 * regression is a sanitizer report, in the plain build a crash or a hang
 * (each input runs in the suite's own process, with a time limit). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/util/fuzz_bodies.h"

typedef void (*body_fn)(const uint8_t *, size_t);

/* Reads path into an exactly-sized buffer, as libFuzzer hands inputs over. */
static uint8_t *read_input(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert(n >= 0);
    rewind(f);
    uint8_t *b = malloc(n ? (size_t)n : 1);
    cr_assert(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Runs body on every regular file of dir (a missing dir is an empty one);
 * returns how many ran. */
static int replay_dir(const char *dir, body_fn body) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        size_t len;
        uint8_t *data = read_input(path, &len);
        body(data, len);
        free(data);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *harness, body_fn body) {
    char regress[128], corpus[128];
    snprintf(regress, sizeof regress, "tests/fuzz/regress/%s", harness);
    snprintf(corpus, sizeof corpus, "tests/fuzz/corpus/%s", harness);
    int n = replay_dir(regress, body);
    int seeds = replay_dir(corpus, body);
    cr_assert(seeds > 0, "%s has no seed inputs", corpus);
    cr_log_info("%s: %d regression inputs, %d seeds", harness, n, seeds);
    sd_fuzz_teardown();
}

Test(fuzz_regress, gguf, .timeout = 120) { replay("fuzz_gguf", sd_fuzz_gguf); }
Test(fuzz_regress, tokenizer, .timeout = 120) { replay("fuzz_tokenizer", sd_fuzz_tokenizer); }
Test(fuzz_regress, sampler_args, .timeout = 120) {
    replay("fuzz_sampler_args", sd_fuzz_sampler_args);
}
Test(fuzz_regress, cli, .timeout = 120) { replay("fuzz_cli", sd_fuzz_cli); }
