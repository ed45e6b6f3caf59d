/* The specdec binary end to end: flags, errors, JSON output, strategies
 * side by side, and the interactive mode driven through a pipe. Runs
 * ./specdec from the repository root (built by `make`). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/util/json.h"
#include "tests/util/test_util.h"

#define M "tests/data/models/"

typedef tu_run run_out;

/* Runs the binary; a run that could not even be made fails the test. */
static run_out run(const char *args, const char *input) {
    run_out r = tu_specdec(args, input);
    cr_assert(r.out && r.err, "could not run specdec %s", args);
    return r;
}

static void done(run_out *r) { tu_run_free(r); }

Test(cli, help_lists_every_flag) {
    run_out r = run("--help", NULL);
    cr_assert_eq(r.rc, 0);
    const char *want[] = {"--model", "--draft", "--draft-layers", "--prompt", "--interactive",
                          "--chat", "--strategy", "--gamma", "--ngram-n", "--ngram-store",
                          "--filler-top-k", "--beams", "--sampler", "--sampler-arg",
                          "--list-samplers", "--plugin-dir", "--seed", "--json", "--no-cache",
                          "--ignore-eos", "--threads", "--debug"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "help lacks %s", want[i]);
    done(&r);
}

Test(cli, bad_flags_and_values) {
    struct {
        const char *args, *msg;
        int rc;
    } cases[] = {
        {"--bogus", "unknown option '--bogus'", 2},
        {"-m " M "stories260K.gguf", "no prompt given", 2},
        {"-p hi", "no model given", 2},
        {"-m " M "stories260K.gguf -p hi -n abc", "-n: 'abc' is not an integer", 2},
        {"-m " M "stories260K.gguf -p hi -n", "-n needs a value", 2},
        {"-m " M "stories260K.gguf -p hi --gamma 0", "--gamma: 0 is out of range", 2},
        {"-m " M "stories260K.gguf -p hi --strategy ar,fast", "unknown strategy 'fast'", 2},
        {"-m " M "stories260K.gguf -p hi --ngram-store two", "'two' is not multi or one", 2},
        {"-m " M "stories260K.gguf -p hi --strategy spec", "needs a drafter", 2},
        {"-m " M "stories260K.gguf -p hi --alpha nan", "is not a number", 2},
        {"-m " M "stories260K.gguf -p hi --sampler-arg top_k=3", "--sampler-arg needs --sampler", 2},
        {"-m tests/data/none.gguf -p hi", "tests/data/none.gguf: cannot open", 1},
        {"-m Makefile -p hi", "Makefile: not a GGUF file", 1},
        {"-m " M "stories260K.gguf -p hi --ctx 99999", "context_length 2048", 1},
        {"-m " M "stories260K.gguf -f tests/data/none.txt", "tests/data/none.txt: cannot open", 1},
        {"-m " M "stories260K.gguf -p hi --sampler nope", "nope", 1},
        {"-m " M "stories260K.gguf --draft-layers 9 --strategy spec -p hi", "the target has 5 layers", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_out r = run(cases[i].args, NULL);
        cr_assert_eq(r.rc, cases[i].rc, "%s: rc %d (%s)", cases[i].args, r.rc, r.err);
        cr_assert(strstr(r.err, cases[i].msg), "%s: stderr '%s' lacks '%s'", cases[i].args, r.err,
                  cases[i].msg);
        cr_assert(strncmp(r.err, "specdec: ", 9) == 0, "%s", r.err);
        done(&r);
    }
}

static const char *golden_ids = "[432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337]";

Test(cli, json_output_has_the_contract_fields) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 16 --json", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    json *j = json_parse(r.out, strlen(r.out));
    cr_assert(j, "not one JSON object: %s", r.out);
    const char *fields[] = {"strategy", "prompt_ids", "ids", "text", "new_tokens", "seconds",
                            "tokens_per_s", "drafted", "accepted", "acceptance_rate",
                            "target_calls", "draft_calls", "host_bytes", "host_bytes_per_round",
                            "speedup_vs_ar"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_assert(json_get(j, fields[i]), "missing %s", fields[i]);
    cr_assert_str_eq(json_str(json_get(j, "strategy"), NULL), "ar");
    cr_assert_eq(json_num(json_get(j, "new_tokens")), 16);
    /* greedy AR copies one id a step */
    cr_assert_eq(json_num(json_get(j, "host_bytes")), 4 * json_num(json_get(j, "target_calls")));
    cr_assert(strstr(r.out, golden_ids), "ids differ from the golden greedy ids: %s", r.out);
    cr_assert(strncmp(json_str(json_get(j, "text"), NULL), ", there was a little girl", 25) == 0);
    json_free(j);
    done(&r);
}

Test(cli, strategies_side_by_side_are_lossless) {
    run_out r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -p 'Once upon a time' "
                    "-n 40 --ignore-eos --strategy ar,spec,nasd,beam,draft --json",
                    NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *want[] = {"ar", "spec", "nasd", "beam", "draft"};
    char *line = r.out;
    char *ar_ids = NULL;
    for (int i = 0; i < 5; i++) {
        char *nl = strchr(line, '\n');
        cr_assert(nl, "expected 5 JSON lines: %s", r.out);
        *nl = 0;
        json *j = json_parse(line, strlen(line));
        cr_assert(j, "bad JSON: %s", line);
        cr_assert_str_eq(json_str(json_get(j, "strategy"), NULL), want[i]);
        cr_assert_eq(json_num(json_get(j, "new_tokens")), 40);
        char *ids = strstr(line, "\"ids\":");
        cr_assert(ids);
        *strchr(ids, ']') = 0;
        if (i == 0) ar_ids = ids;
        else if (i < 3) {
            cr_assert_str_eq(ids, ar_ids, "%s differs from ar", want[i]);
            cr_assert_eq(json_num(json_get(j, "same_as_ar")), 1);
            cr_assert(json_num(json_get(j, "drafted")) > 0);
            cr_assert(json_num(json_get(j, "speedup_vs_ar")) > 0);
        }
        json_free(j);
        line = nl + 1;
    }
    done(&r);
}

/* beam search honours --no-cache (it recomputes every beam's prefix): the
 * same beams, the same ids */
Test(cli, beam_no_cache_gives_the_same_ids) {
    const char *cmd = "-m " M "stories260K.gguf -p 'Once upon a time' -n 12 --strategy beam --json";
    run_out a = run(cmd, NULL);
    char nc[256];
    snprintf(nc, sizeof nc, "%s --no-cache", cmd);
    run_out b = run(nc, NULL);
    cr_assert_eq(a.rc, 0, "%s", a.err);
    cr_assert_eq(b.rc, 0, "%s", b.err);
    json *ja = json_parse(a.out, strlen(a.out)), *jb = json_parse(b.out, strlen(b.out));
    cr_assert(ja && jb);
    cr_assert_eq(json_num(json_get(jb, "use_cache")), 0);
    char *ia = strstr(a.out, "\"ids\":"), *ib = strstr(b.out, "\"ids\":");
    cr_assert(ia && ib);
    *strchr(ia, ']') = 0;
    *strchr(ib, ']') = 0;
    cr_assert_str_eq(ib, ia);
    json_free(ja), json_free(jb);
    done(&a), done(&b);
}

Test(cli, human_output_streams_text_and_metrics) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 16 --draft-layers 3 "
                    "--strategy ar,spec --debug", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "--- ar ---\nOnce upon a time, there was a little girl"), "%s", r.out);
    cr_assert(strstr(r.out, "same as ar"), "%s", r.out);
    cr_assert(strstr(r.err, "prefill") && strstr(r.err, "tok/s"), "%s", r.err);
    cr_assert(strstr(r.err, "debug: [+"), "plain debug markers when not a tty: %s", r.err);
    done(&r);
}

Test(cli, interactive_mode_through_a_pipe) {
    const char *script =
        "/help\n/length 8\n/gamma 3\n/ngram\n/debug\n/cache\n/set_ngramstorage one 4\n"
        "/top_k_filler 2\n/reset_in_between\n/seed 7\n/gamma zero\n/bogus\n/processor nope\n"
        "/processor top_k top_k=5 temperature=0.5\nOnce upon a time\n/quit\nnot reached\n";
    run_out r = run("-m " M "stories260K.gguf -i", script);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *want[] = {"commands:", "length: 8", "gamma: 3", "ngram (NASD): on", "debug: on",
                          "cache: off", "ngram storage: one, N 4", "top_k_filler: 2",
                          "reset_in_between: off", "seed: 7", "error: /gamma N",
                          "error: unknown command '/bogus'", "processor: top_k(",
                          "--- ar ---", "--- nasd ---"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "missing '%s' in:\n%s", want[i], r.out);
    cr_assert_null(strstr(r.out, "not reached"));
    done(&r);
}

/* Every `./specdec ...` example in README.md runs and exits 0 (examples on
 * the default model need models/, which `make test` fetches). Lines ending
 * in a backslash continue the command. */
Test(cli, readme_examples_run) {
    FILE *f = fopen("README.md", "r");
    cr_assert(f);
    char line[1024], cmd[4096] = "";
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ') p++;
        if (!cmd[0] && strncmp(p, "./specdec ", 10) != 0) continue;
        size_t len = strlen(p);
        while (len && (p[len - 1] == '\n' || p[len - 1] == ' ')) len--;
        int more = len && p[len - 1] == '\\';
        strncat(cmd, p, more ? len - 1 : len);
        if (more) continue;
        if (strstr(cmd, "models/SmolLM2") && access("models/SmolLM2-135M-Instruct.Q4_1.gguf", R_OK)) {
            cmd[0] = 0;
            continue;
        }
        /* keep CI quick: at most 24 new tokens per example */
        char args[4096];
        snprintf(args, sizeof args, "%s -n 24", cmd + 10);
        run_out r = run(args, NULL);
        cr_assert_eq(r.rc, 0, "README example failed: %s\n%s", cmd, r.err);
        cr_assert(strlen(r.out) > 0, "%s printed nothing", cmd);
        done(&r);
        n++;
        cmd[0] = 0;
    }
    fclose(f);
    cr_assert(n >= 4, "found only %d README examples", n);
}
