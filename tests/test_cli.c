/* The specdec binary end to end: flags, errors, JSON output, strategies
 * side by side, and the interactive mode driven through a pipe. Runs
 * ./specdec from the repository root (built by `make`). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    const char *want[] = {"--model", "--draft", "--draft-layers", "--draft-vocab", "--prompt", "--interactive",
                          "--chat", "--strategy", "--gamma", "--draft-p-min", "--ngram-n", "--ngram-store",
                          "--filler-top-k", "--beams", "--sampler", "--sampler-arg",
                          "--list-samplers", "--plugin-dir", "--seed", "--json", "--no-cache",
                          "--ignore-eos", "--threads", "--debug", "--no-parse-special",
                          "--perplexity", "--chunks"};
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
        {"-m " M "stories260K.gguf -p hi --gamma -1", "--gamma: -1 is out of range", 2},
        {"-m " M "stories260K.gguf -p hi --draft-p-min 1.5", "--draft-p-min: 1.5 is out of range [0, 1]", 2},
        {"-m " M "stories260K.gguf -p hi --draft-p-min high", "--draft-p-min: 'high' is not a number", 2},
        {"-m " M "stories260K.gguf -p hi --strategy ar,fast", "unknown strategy 'fast'", 2},
        {"-m " M "stories260K.gguf -p hi --ngram-store two", "'two' is not multi or one", 2},
        {"-m " M "stories260K.gguf -p hi --strategy spec", "needs a drafter", 2},
        {"-m " M "stories260K.gguf -p hi --alpha nan", "is not a number", 2},
        {"-m " M "stories260K.gguf -p hi --kv-type bf16", "--kv-type: 'bf16' is not f32 or f16", 2},
        {"-m " M "stories260K.gguf -p hi --sampler-arg top_k=3", "--sampler-arg needs --sampler", 2},
        {"-m tests/data/none.gguf -p hi", "tests/data/none.gguf: cannot open", 1},
        {"-m Makefile -p hi", "Makefile: not a GGUF file", 1},
        {"-m " M "stories260K.gguf -p hi --ctx 99999", "context_length 2048", 1},
        {"-m " M "stories260K.gguf -f tests/data/none.txt", "tests/data/none.txt: cannot open", 1},
        {"-m " M "stories260K.gguf -p hi --sampler nope",
         "specdec: --sampler nope: unknown sampler 'nope' (available: dry, greedy, ", 2},
        {"-m tests/data/none.gguf -p hi --sampler nope", "--sampler nope: unknown sampler", 2},
        {"-m tests/data/none.gguf -p hi --sampler top_k --sampler-arg top_k=abc",
         "specdec: --sampler-arg top_k=abc: top_k: top_k = 'abc' is not an integer", 2},
        {"-m tests/data/none.gguf -p hi --sampler top_k --sampler-arg top_k=3 --sampler-arg k=3",
         "specdec: --sampler-arg k=3: top_k: unknown parameter 'k' (accepted: temperature, top_k)",
         2},
        {"-m tests/data/none.gguf -p hi --sampler top_k --sampler-arg 5",
         "--sampler-arg 5: top_k: sampler argument '5' is not key=value", 2},
        {"-m tests/data/none.gguf -p hi --sampler greedy --sampler-arg temperature=0.5",
         "--sampler-arg temperature=0.5: greedy: unknown parameter 'temperature'", 2},
        {"-m tests/data/none.gguf -p hi --sampler top_k --sampler-arg top_k=3",
         "tests/data/none.gguf: cannot open", 1},
        /* chains: checked before the model is opened */
        {"-m tests/data/none.gguf -p hi --sampler penalty",
         "specdec: --sampler penalty: sampler chain 'penalty': its last stage 'penalty' is a "
         "logits stage", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,,top_k", "stage 2 is empty", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,bogus,top_k",
         "--sampler penalty,bogus,top_k: unknown sampler 'bogus' (available: ", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,top_k,nucleus --sampler-arg top_k.k=40",
         "specdec: --sampler-arg top_k.k=40: top_k: unknown parameter 'k' (accepted: "
         "temperature, top_k)", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,top_k --sampler-arg penalty.repeat=-1",
         "--sampler-arg penalty.repeat=-1: penalty: repeat = -1 is out of range [0.001, 1000]", 2},
        /* values that would make a logit infinite are refused before any output */
        {"-m " M "stories260K.gguf -p hi --sampler penalty,greedy --sampler-arg repeat=1e-45",
         "penalty: repeat = 1e-45 is out of range [0.001, 1000]", 2},
        {"-m " M "stories260K.gguf -p hi --sampler temperature,greedy --sampler-arg temperature=1e-45",
         "temperature: temperature = 1e-45 is out of range [0.001, 1000]", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,top_k --sampler-arg nucleus.top_p=0.5",
         "no stage 'nucleus' in the chain (stages: penalty, top_k)", 2},
        {"-m tests/data/none.gguf -p hi --sampler penalty,top_k,nucleus --sampler-arg top_k.top_k=40",
         "tests/data/none.gguf: cannot open", 1},
        {"-m tests/data/none.gguf -p hi --strategy ar,beam --sampler penalty,greedy",
         "specdec: --strategy beam applies no sampler (it ranks beams by the model's "
         "log-probabilities): drop --sampler penalty,greedy or run beam separately", 2},
        {"-m " M "stories260K.gguf -f tests", "tests: is a directory", 1},
        {"-m tests -p hi", "tests: is a directory", 1},
        {"-m /dev/null -p hi", "/dev/null: not a regular file (a character device)", 1},
        {"-m " M "stories260K.gguf --draft-layers 9 --strategy spec -p hi", "the target has 5 layers", 1},
        {"-m " M "stories260K.gguf --draft-layers 2 --draft-vocab 513 --strategy spec -p hi",
         "--draft-vocab 513: the vocabulary has 512 tokens", 1},
        {"-m " M "stories260K.gguf --draft-vocab -3 -p hi", "--draft-vocab: -3 is out of range", 2},
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

/* A FIFO as -m or -d is refused by its type; opening it would wait for a
 * writer forever, so the run has a time limit and a hang fails (rc 124). */
Test(cli, fifo_model_is_refused_not_waited_on) {
    char fifo[64], args[256];
    snprintf(fifo, sizeof fifo, "tests/tmp/cli_fifo.%d", (int)getpid());
    cr_assert_eq(system("mkdir -p tests/tmp"), 0);
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo %s", fifo);
    const char *forms[] = {"-m %s -p hi", "-m " M "stories260K.gguf -d %s -p hi"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, forms[i], fifo);
        run_out r = tu_specdec_ex(args, NULL, 10, 0);
        cr_assert(r.out && r.err, "could not run specdec %s", args);
        cr_assert_neq(r.rc, 124, "%s: hung on the FIFO", args);
        cr_assert_eq(r.rc, 1, "%s: rc %d (%s)", args, r.rc, r.err);
        char want[128];
        snprintf(want, sizeof want, "specdec: %s: not a regular file (a FIFO)\n", fifo);
        cr_assert_str_eq(r.err, want);
        done(&r);
    }
    unlink(fifo);
}

/* -n 0 through several strategies: no rate is defined, so the table shows
 * "-" where it used to show -nanx, and JSON has null for the speedup. */
Test(cli, zero_tokens_show_no_nan) {
    run_out r = run("-m " M "stories260K.gguf -p hi -n 0 --strategy ar,nasd,beam", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "vs ar"), "%s", r.err);
    cr_assert_not(strstr(r.out, "vs ar"), "the table belongs on stderr: %s", r.out);
    cr_assert_not(tu_matches("nan|inf", r.err), "%s", r.err);
    cr_assert(tu_matches("\\nnasd +0 +[0-9.]+ +- +- +- +0 +0 +- +- same as ar", r.err), "%s", r.err);
    cr_assert(strstr(r.err, "0 new tokens in") && strstr(r.err, "(decode n/a)"), "%s", r.err);
    done(&r);
    r = run("-m " M "stories260K.gguf -p hi -n 0 --strategy ar,nasd --jsonl", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_not(tu_matches("nan|inf", r.out), "%s", r.out);
    cr_assert(strstr(r.out, "\"speedup_vs_ar\":null,\"decode_speedup_vs_ar\":null,\"same_as_ar\":1"), "%s",
              r.out);
    done(&r);
}

/* -t far above the core count is refused before anything loads (exit 2,
 * naming the flag); 4x the cores is the bound --help states. */
Test(cli, threads_far_above_the_cores_are_refused) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert(cores > 0);
    char args[256], want[128];
    snprintf(args, sizeof args, "-m " M "stories260K.gguf -p hi -n 2 --threads %ld", 4 * cores + 1);
    run_out r = run(args, NULL);
    cr_assert_eq(r.rc, 2, "%s: rc %d (%s)", args, r.rc, r.err);
    snprintf(want, sizeof want, "specdec: --threads: %ld threads is more than 4x the %ld cores",
             4 * cores + 1, cores);
    cr_assert(strncmp(r.err, want, strlen(want)) == 0, "%s", r.err);
    done(&r);
    snprintf(args, sizeof args, "-m " M "stories260K.gguf -p hi -n 2 -t %ld", 4 * cores);
    r = run(args, NULL);
    cr_assert_eq(r.rc, 0, "%s: %s", args, r.err);
    done(&r);
    r = run("--help", NULL);
    cr_assert(strstr(r.out, "at most 4x the cores"), "%s", r.out);
    done(&r);
}

/* stdout and stderr into one pipe (`specdec 2>&1 | less`): the text's
 * last line is complete before the metrics line follows, so every
 * "specdec: " line starts a line of its own, after the text. */
Test(cli, stats_start_their_own_line_in_a_shared_pipe) {
    const char *modes[] = {"-n 16", "-n 16 --strategy ar,nasd"};
    for (int i = 0; i < 2; i++) {
        char args[256];
        snprintf(args, sizeof args, "-m " M "stories260K.gguf -p 'Once upon a time' %s", modes[i]);
        run_out r = tu_specdec_ex(args, NULL, 60, 1);
        cr_assert(r.out, "could not run specdec %s", args);
        cr_assert_eq(r.rc, 0, "%s: %s", args, r.out);
        const char *text = strstr(r.out, "Once upon a time, there was a little girl");
        cr_assert(text, "%s", r.out);
        int lines = 0;
        for (const char *p = strstr(r.out, "specdec: "); p; p = strstr(p + 1, "specdec: ")) {
            cr_assert(p == r.out || p[-1] == '\n', "glued onto the line before:\n%s", r.out);
            lines++;
        }
        cr_assert(lines >= 1 + i, "%s", r.out);
        cr_assert(tu_matches("girl[^\\n]*\\nspecdec: ar: prompt", r.out), "%s", r.out);
        done(&r);
    }
}

/* --perplexity on the 260K model (it adds BOS, so each window's first token
 * is replaced) with small windows: the running values as they come, the
 * final line, and the same numbers as one JSON object. */
#define PPL_RUN "-m " M "stories260K.gguf --perplexity tests/data/text/GPL-3.txt --ctx 64 --chunks 3 -t 2"

Test(cli, perplexity_prints_running_values_then_the_total) {
    run_out r = run(PPL_RUN, NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "", "the results belong on stderr");
    cr_assert(tu_matches("^perplexity: tests/data/text/GPL-3.txt, 22154 tokens, 3 chunks of 64 "
                         "\\(31 scored each\\)\\n\\[1\\][0-9.]+,\\[2\\][0-9.]+,\\[3\\]([0-9.]+)\\n"
                         "PPL = \\1 \\+/- [0-9.]+ over 93 tokens scored in 3 chunks of 64; 192 "
                         "tokens evaluated in [0-9.]+ s \\([0-9.]+ tokens/s\\)\\n$",
                         r.err),
              "%s", r.err);
    double ppl = strtod(strstr(r.err, "PPL = ") + 6, NULL);
    done(&r);

    r = run(PPL_RUN " --json", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    json *j = json_parse(r.out, strlen(r.out));
    cr_assert(j, "not one JSON object: %s", r.out);
    const char *fields[] = {"model", "file", "ctx", "chunks", "text_tokens", "tokens_scored",
                            "tokens_evaluated", "ppl", "ppl_error", "mean_nll", "running_ppl",
                            "seconds", "tokens_per_s"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_assert(json_get(j, fields[i]), "missing %s", fields[i]);
    cr_assert_eq(json_num(json_get(j, "ctx")), 64);
    cr_assert_eq(json_num(json_get(j, "chunks")), 3);
    cr_assert_eq(json_num(json_get(j, "text_tokens")), 22154);
    cr_assert_eq(json_num(json_get(j, "tokens_scored")), 93);
    cr_assert_eq(json_num(json_get(j, "tokens_evaluated")), 192);
    const json *run_ppl = json_get(j, "running_ppl");
    cr_assert_eq(json_len(run_ppl), 3);
    double jp = json_num(json_get(j, "ppl"));
    cr_assert_eq(json_num(json_at(run_ppl, 2)), jp);
    cr_assert(fabs(jp / ppl - 1) < 1e-5, "JSON %g, text %g", jp, ppl); /* 6 digits */
    cr_assert(fabs(log(jp) - json_num(json_get(j, "mean_nll"))) < 1e-4);
    json_free(j);
    done(&r);
}

/* Bad flag values exit 2 naming the flag; a file that cannot be read, is
 * empty or is shorter than one window exits 1 naming the file. */
Test(cli, perplexity_refuses_bad_windows_and_files) {
    cr_assert_eq(system("mkdir -p tests/tmp"), 0);
    char empty[64], shrt[64], nul[64];
    snprintf(empty, sizeof empty, "tests/tmp/ppl_empty.%d", (int)getpid());
    snprintf(shrt, sizeof shrt, "tests/tmp/ppl_short.%d", (int)getpid());
    snprintf(nul, sizeof nul, "tests/tmp/ppl_nul.%d", (int)getpid());
    const char *bodies[][2] = {{empty, "\n"}, {shrt, "Once upon a time there was a cat.\n"}};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(bodies[i][0], "w");
        cr_assert(f);
        fputs(bodies[i][1], f);
        fclose(f);
    }
    FILE *f = fopen(nul, "w");
    cr_assert(f);
    fwrite("ab\0cd", 1, 5, f);
    fclose(f);
    struct {
        const char *args, *msg;
        int rc;
    } cases[] = {
        {"--ctx 127", "--ctx: 127 is odd; --perplexity needs an even window", 2},
        {"--ctx 2", "--ctx: a window of 2 is too small for --perplexity (at least 4)", 2},
        {"--ctx 4096", "--ctx: a window of 4096 tokens is larger than the model's context_length "
                       "2048", 2},
        {"--chunks 0", "--chunks: 0 is out of range", 2},
        {"-p hi", "--perplexity reads its text from FILE: give no -p, -f or -i", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "-m " M "stories260K.gguf --perplexity README.md %s",
                 cases[i].args);
        run_out r = run(args, NULL);
        cr_assert_eq(r.rc, cases[i].rc, "%s: rc %d (%s)", args, r.rc, r.err);
        cr_assert(strstr(r.err, cases[i].msg), "%s: stderr '%s' lacks '%s'", args, r.err,
                  cases[i].msg);
        done(&r);
    }
    run_out r = run("-m " M "stories260K.gguf -p hi --chunks 2", NULL);
    cr_assert_eq(r.rc, 2);
    cr_assert(strstr(r.err, "--chunks needs --perplexity FILE"), "%s", r.err);
    done(&r);
    struct {
        const char *file, *msg;
    } files[] = {{"tests/data/none.txt", "tests/data/none.txt: cannot open"},
                 {"tests", "tests: is a directory"},
                 {empty, "the text is empty"},
                 {shrt, "tokens, fewer than one window of 512"},
                 {nul, "contains a NUL byte"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "-m " M "stories260K.gguf --perplexity %s", files[i].file);
        r = run(args, NULL);
        cr_assert_eq(r.rc, 1, "%s: rc %d (%s)", args, r.rc, r.err);
        cr_assert(strstr(r.err, files[i].file) && strstr(r.err, files[i].msg),
                  "%s: stderr '%s' lacks '%s'", args, r.err, files[i].msg);
        done(&r);
    }
    unlink(empty);
    unlink(shrt);
    unlink(nul);
}

static const char *golden_ids = "[432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337]";

Test(cli, json_output_has_the_contract_fields) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 16 --json", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    json *doc = json_parse(r.out, strlen(r.out));
    cr_assert(doc, "not one JSON document: %s", r.out);
    cr_assert_eq(json_num(json_get(json_get(doc, "settings"), "n_predict")), 16);
    cr_assert_eq(json_len(json_get(doc, "runs")), 1);
    const json *j = json_at(json_get(doc, "runs"), 0);
    const char *fields[] = {"strategy", "prompt_ids", "ids", "text", "new_tokens", "seconds",
                            "tokens_per_s", "drafted", "accepted", "acceptance_rate",
                            "target_calls", "draft_calls", "host_bytes", "host_bytes_per_round",
                            "speedup_vs_ar", "decode_speedup_vs_ar", "decode_tokens_per_s"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_assert(json_get(j, fields[i]), "missing %s", fields[i]);
    cr_assert_str_eq(json_str(json_get(j, "strategy"), NULL), "ar");
    cr_assert_eq(json_num(json_get(j, "new_tokens")), 16);
    cr_assert_str_eq(json_str(json_get(j, "sampler"), NULL), "greedy");
    /* greedy AR copies one id a step */
    cr_assert_eq(json_num(json_get(j, "host_bytes")), 4 * json_num(json_get(j, "target_calls")));
    cr_assert(strstr(r.out, golden_ids), "ids differ from the golden greedy ids: %s", r.out);
    cr_assert(strncmp(json_str(json_get(j, "text"), NULL), ", there was a little girl", 25) == 0);
    json_free(doc);
    done(&r);
}

Test(cli, strategies_side_by_side_are_lossless) {
    run_out r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -p 'Once upon a time' "
                    "-n 40 --ignore-eos --strategy ar,spec,nasd,beam,draft --jsonl",
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
            cr_assert(json_num(json_get(j, "decode_speedup_vs_ar")) > 0);
        }
        json_free(j);
        line = nl + 1;
    }
    done(&r);
}

/* A drafter limited to the first 64 token ids: speculative output equals
 * ar's, the drafter alone emits only those ids, JSON reports the limit,
 * and /draft_vocab changes it in the interactive mode. */
Test(cli, draft_vocab_keeps_speculative_lossless) {
    run_out r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -p 'Once upon a time' "
                    "-n 40 --ignore-eos --strategy ar,spec,draft --draft-vocab 60 --jsonl",
                    NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    char *line = r.out, *ar_ids = NULL;
    for (int i = 0; i < 3; i++) {
        char *nl = strchr(line, '\n');
        cr_assert(nl, "expected 3 JSON lines: %s", r.out);
        *nl = 0;
        json *j = json_parse(line, strlen(line));
        cr_assert(j, "bad JSON: %s", line);
        if (i > 0) cr_assert_eq(json_num(json_get(j, "draft_vocab")), 64, "%s", line);
        const json *ids = json_get(j, "ids");
        if (i == 2)
            for (size_t k = 0; k < json_len(ids); k++)
                cr_assert_lt(json_num(json_at(ids, k)), 64, "draft-only id %g", json_num(json_at(ids, k)));
        char *at = strstr(line, "\"ids\":");
        *strchr(at, ']') = 0;
        if (i == 0) ar_ids = at;
        if (i == 1) cr_assert_str_eq(at, ar_ids, "spec with --draft-vocab differs from ar");
        json_free(j);
        line = nl + 1;
    }
    done(&r);
    r = run("-m " M "stories260K.gguf --draft-layers 2 -i", "/draft_vocab 100\n/draft_vocab 9999\n/quit\n");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "draft_vocab: 100"), "%s", r.out);
    cr_assert(strstr(r.err, "error: /draft_vocab: 9999 is more than the vocabulary's 512 tokens"), "%s",
              r.err);
    done(&r);
}

/* beam search honours --no-cache (it recomputes every beam's prefix): the
 * same beams, the same ids */
Test(cli, beam_no_cache_gives_the_same_ids) {
    const char *cmd = "-m " M "stories260K.gguf -p 'Once upon a time' -n 12 --strategy beam --jsonl";
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
    cr_assert(strstr(r.err, "same as ar"), "%s", r.err);
    cr_assert(strstr(r.err, "prefill") && strstr(r.err, "tok/s"), "%s", r.err);
    cr_assert(strstr(r.err, "debug: [+"), "plain debug markers when not a tty: %s", r.err);
    done(&r);
}

Test(cli, interactive_mode_through_a_pipe) {
    const char *script =
        "/help\n/length 8\n/gamma 3\n/ngram\n/debug\n/no_cache\n/set_ngramstorage one 4\n"
        "/top_k_filler 2\n/keep_ngrams on\n/seed 7\n/gamma zero\n/bogus\n/processor nope\n"
        "/draft_p_min 0.4\n/draft_p_min 2\n"
        "/processor top_k top_k=5 temperature=0.5\nOnce upon a time\n/quit\nnot reached\n";
    run_out r = run("-m " M "stories260K.gguf -i", script);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *want[] = {"commands:", "n_predict: 8", "gamma: 3", "nasd: on", "debug: on",
                          "no_cache: on", "ngram storage: one, N 4", "filler_top_k: 2",
                          "keep_ngrams: on", "seed: 7", "--- ar ---", "--- nasd ---"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "missing '%s' in:\n%s", want[i], r.out);
    /* each bad command is one line on stderr naming it, not the command list */
    const char *errs = "error: /gamma: 'zero' is not an integer\n"
                       "error: unknown command '/bogus' (/help lists the commands)\n"
                       "error: /sampler nope: ";
    cr_assert(strstr(r.err, errs), "missing '%s' in:\n%s", errs, r.err);
    cr_assert(strstr(r.err, "error: /draft_p_min: 2 is out of range [0, 1]\n"), "%s", r.err);
    cr_assert_not(strstr(r.err, "commands:"), "%s", r.err);
    cr_assert_null(strstr(r.out, "not reached"));
    done(&r);
}

/* Chains through the CLI: per-stage arguments, the greedy fast path left
 * for a penalty, and the same ids from ar, spec (the target as its own
 * drafter, every draft accepted) and nasd; beam reports no sampler. */
Test(cli, sampler_chains_run_and_report) {
    run_out r = run("-m " M "stories260K.gguf --draft-layers 5 -p 'Once upon a time' -n 40 "
                    "--ignore-eos --strategy ar,spec,nasd --sampler penalty,greedy "
                    "--sampler-arg penalty.repeat=1.5 --sampler-arg window=32 --jsonl", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    char ids[3][1024];
    const char *line = r.out;
    for (int k = 0; k < 3; k++) {
        json *j = json_parse(line, strcspn(line, "\n"));
        cr_assert(j, "not JSON: %s", line);
        cr_assert_str_eq(json_str(json_get(j, "sampler"), NULL),
                         "penalty(repeat=1.5, frequency=0, presence=0, window=32),greedy()");
        if (k == 1)
            cr_assert_eq(json_num(json_get(j, "accepted")), json_num(json_get(j, "drafted")));
        /* rows cross to the host: the penalty needs them */
        cr_assert_gt(json_num(json_get(j, "host_bytes")), 4 * json_num(json_get(j, "target_calls")));
        const char *a = strstr(line, "\"ids\":");
        snprintf(ids[k], sizeof ids[k], "%.*s", (int)strcspn(a, "]"), a);
        json_free(j);
        line += strcspn(line, "\n") + 1;
    }
    cr_assert_str_eq(ids[0], ids[1]);
    cr_assert_str_eq(ids[0], ids[2]);
    cr_assert(!strstr(r.out, golden_ids), "the penalty changed nothing");
    done(&r);
    r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 8 --strategy beam --sampler greedy "
            "--jsonl", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"sampler\":\"none (beam search)\""), "%s", r.out);
    done(&r);
    const char *script = "/sampler penalty,top_k,nucleus top_k.top_k=5 repeat=1.2 top_p=0.8\n"
                         "/processor penalty,mirostat tau=3\n/sampler penalty\n/quit\n";
    r = run("-m " M "stories260K.gguf -i", script);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *want[] = {"sampler: penalty(repeat=1.2, frequency=0, presence=0, window=64),"
                          "top_k(temperature=1, top_k=5),nucleus(temperature=1, top_p=0.8)",
                          "sampler: penalty(repeat=1.1, frequency=0, presence=0, window=64),"
                          "mirostat(tau=3, eta=0.1, temperature=1)",
                          "error: /sampler penalty: sampler chain 'penalty': its last stage "
                          "'penalty' is a logits stage"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(i < 2 ? r.out : r.err, want[i]), "missing '%s' in:\n%s%s", want[i], r.out,
                  r.err);
    done(&r);
}

/* The prompt_ids array of a --json line, as text ("[1,2]"); "" when absent. */
static void prompt_ids_of(const char *line, char *out, size_t cap) {
    const char *p = strstr(line, "\"prompt_ids\":");
    const char *end = p ? strchr(p, ']') : NULL;
    out[0] = 0;
    if (!end) return;
    p += strlen("\"prompt_ids\":");
    snprintf(out, cap, "%.*s", (int)(end + 1 - p), p);
}

/* Prompt text parses control tokens by default (as llama.cpp's CLI does):
 * "</s>" is EOS; --no-parse-special and /parse_special make it text. */
Test(cli, prompt_control_tokens_and_no_parse_special) {
    struct {
        const char *args, *input, *want;
    } cases[] = {
        {"-p '</s>'", NULL, "[1,2]"},
        {"-p '</s>' --no-parse-special", NULL, "[1,410,504,492,419,505]"},
        {"-f %s", NULL, "[1,2]"},
        {"-f %s --no-parse-special", NULL, "[1,410,504,492,419,505]"},
        {"-i", "/no_parse_special\n</s>\n/quit\n", "[1,410,504,492,419,505]"},
    };
    char file[64], cmd[128];
    snprintf(file, sizeof file, "tests/tmp/cli_special.%d.txt", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p tests/tmp && printf '</s>' > %s", file);
    cr_assert_eq(system(cmd), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[128], args[256], ids[128];
        snprintf(flags, sizeof flags, cases[i].args, file);
        snprintf(args, sizeof args, "-m " M "stories260K.gguf -n 0 --jsonl %s", flags);
        run_out r = run(args, cases[i].input);
        cr_assert_eq(r.rc, 0, "%s: %s", args, r.err);
        prompt_ids_of(r.out, ids, sizeof ids);
        cr_assert_str_eq(ids, cases[i].want, "%s", args);
        if (cases[i].input) cr_assert(strstr(r.out, "no_parse_special: on"), "%s", r.out);
        done(&r);
    }
    unlink(file);
}

/* With --chat the user's text (and --system) is never control tokens, with
 * or without --no-parse-special: "<|im_end|>" in it is seven plain pieces
 * (as in the golden smollm2_tokenizer.jsonl), and only the template's
 * <|im_start|> (1) and <|im_end|> (2) markers are control ids. */
Test(cli, chat_user_text_is_never_control_tokens) {
    const char *smol = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(smol, R_OK) != 0) {
        cr_skip_test("SmolLM2 not fetched (%s missing; `make model` fetches it)", smol);
        return;
    }
    const char *sys = "[1,9690,198,2683,359,253,5356,5646,11173,3365,3511,308,34519,28,7018,411,"
                      "407,19712,8182,2,198,";
    const char *user = "1,4093,198,44,108,306,79,486,108,46,104,2,198,1,520,9531,198]";
    char want[512], ids[512], args[256];
    snprintf(want, sizeof want, "%s%s", sys, user);
    const char *flags[] = {"", "--no-parse-special"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "-m %s -n 0 --jsonl --chat -p '<|im_end|>x' %s", smol, flags[i]);
        run_out r = run(args, NULL);
        cr_assert_eq(r.rc, 0, "%s: %s", args, r.err);
        prompt_ids_of(r.out, ids, sizeof ids);
        cr_assert_str_eq(ids, want, "%s", args);
        done(&r);
    }
    snprintf(args, sizeof args, "-m %s -n 0 --jsonl --chat --system '<|im_end|>' -p hi", smol);
    run_out r = run(args, NULL);
    cr_assert_eq(r.rc, 0, "%s: %s", args, r.err);
    prompt_ids_of(r.out, ids, sizeof ids);
    cr_assert_str_eq(ids, "[1,9690,198,44,108,306,79,486,108,46,2,198,1,4093,198,6004,2,198,1,520,"
                          "9531,198]");
    done(&r);
}

/* -i -p TEXT runs the prompt first, then reads commands. */
/* NASD stops drafting at an unknown context unless --fill-unknown says
 * otherwise (the reference system's default). */
Test(cli, nasd_stops_at_unknown_contexts_by_default) {
    run_out a = run("-m " M "stories260K.gguf -i", "/stop_if_unknown\n/quit\n");
    run_out b = run("-m " M "stories260K.gguf -p hi -n 0 --json --fill-unknown", NULL);
    cr_assert_eq(a.rc, 0, "%s", a.err);
    cr_assert_eq(b.rc, 0, "%s", b.err);
    cr_assert(strstr(a.out, "stop_if_unknown: off"), "%s", a.out);
    cr_assert(strstr(b.out, "\"stop_if_unknown\":false"), "%s", b.out);
    done(&a), done(&b);
}

Test(cli, interactive_with_a_prompt_runs_it_first) {
    run_out r = run("-m " M "stories260K.gguf -n 8 -i -p 'Once upon a time'", "/length 4\n/quit\n");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *text = strstr(r.out, "Once upon a time, there was");
    const char *len = strstr(r.out, "n_predict: 4");
    cr_assert(text && len && text < len, "prompt output, then the command's:\n%s", r.out);
    done(&r);
}

/* The reference tool's names: /sampler (and /processor) with topk and
 * topknucleus, basic and onelevel stores; --sampler topk; escapes in a
 * typed prompt; the drafter hint of /speculative. */
Test(cli, interactive_aliases_and_escapes) {
    const char *script = "/sampler topk top_k=5\n/processor topknucleus\n/set_ngramstorage onelevel 4\n"
                         "/set_ngramstorage basic 3\n/sampler greedy\n/length 2\nOnce\\tupon\\na\\\\ntime\n"
                         "/speculative\nOnce\n/quit\n";
    run_out r = run("-m " M "stories260K.gguf -i", script);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *want[] = {"sampler: top_k(", "sampler: top_k_nucleus(", "ngram storage: one, N 4",
                          "ngram storage: multi, N 3", "Once\tupon\na\\ntime"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(r.out, want[i]), "missing '%s' in:\n%s", want[i], r.out);
    /* a strategy the session cannot run is refused when it is switched on */
    cr_assert(strstr(r.err, "error: /speculative: spec and draft need a drafter: /draft_layers K "
                            "first"), "%s", r.err);
    cr_assert_not(strstr(r.out, "spec: on"), "%s", r.out);
    done(&r);
    r = run("-m " M "stories260K.gguf -p hi -n 2 --sampler topknucleus --seed 1 --jsonl", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"sampler\":\"top_k_nucleus("), "%s", r.out);
    done(&r);
}

/* Ctrl-C during a generation in the interactive mode stops that generation
 * and the session goes on: a slow run (no KV cache, no EOS, a long length)
 * is interrupted once its text streams, then a command and /quit are
 * answered. Every wait is bounded, so a regression fails instead of hanging. */
Test(cli, interactive_ctrl_c_stops_the_generation_only) {
    int in[2], outp[2];
    cr_assert_eq(pipe(in), 0);
    cr_assert_eq(pipe(outp), 0);
    char errf[64];
    snprintf(errf, sizeof errf, "tests/tmp/sigint_err.%d", (int)getpid());
    cr_assert_eq(system("mkdir -p tests/tmp"), 0);
    const char *bin = getenv("SPECDEC_BIN") ? getenv("SPECDEC_BIN") : "./specdec";
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(outp[1], 1);
        FILE *ef = freopen(errf, "w", stderr);
        (void)ef;
        close(in[1]);
        close(outp[0]);
        execl(bin, bin, "-m", M "stories260K.gguf", "-i", "--no-cache", "--ignore-eos", "-n",
              "100000", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    const char *first = "Once upon a time\n";
    cr_assert(write(in[1], first, strlen(first)) == (ssize_t)strlen(first));
    /* wait (at most 60 s) for some generated text after the echoed prompt */
    char buf[65536];
    size_t n = 0;
    for (int waited = 0; waited < 600; waited++) {
        struct pollfd p = {outp[0], POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t k = read(outp[0], buf + n, sizeof buf - 1 - n);
            if (k <= 0) break;
            n += (size_t)k;
            buf[n] = 0;
            const char *t = strstr(buf, "Once upon a time");
            if (t && strlen(t) > 40) break;
        }
    }
    buf[n] = 0;
    const char *t = strstr(buf, "Once upon a time");
    int streaming = t && strlen(t) > 40;
    if (!streaming) kill(pid, SIGKILL);
    cr_assert(streaming, "no text streamed: '%s'", buf);
    cr_assert_eq(kill(pid, SIGINT), 0);
    const char *rest = "/n_predict 3\n/quit\n";
    cr_assert(write(in[1], rest, strlen(rest)) == (ssize_t)strlen(rest));
    close(in[1]);
    /* the rest of stdout until EOF, then the exit status (60 s at most) */
    for (int waited = 0; waited < 600 && n < sizeof buf - 1; waited++) {
        struct pollfd p = {outp[0], POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t k = read(outp[0], buf + n, sizeof buf - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    close(outp[0]);
    int st = 0, got = 0;
    for (int waited = 0; waited < 100 && !(got = waitpid(pid, &st, WNOHANG)); waited++)
        usleep(100000);
    if (!got) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    char *err = tu_slurp(errf);
    remove(errf);
    cr_assert(got, "specdec did not leave after /quit:\n%s", buf);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x; stderr: %s", st, err);
    cr_assert(err && strstr(err, "specdec: interrupted\n"), "stderr: %s", err);
    cr_assert(strstr(buf, "n_predict: 3"), "the session did not go on after Ctrl-C:\n%s", buf);
    free(err);
}

/* A chain with a stage that refuses the drafter role: autoregressive
 * decoding and NASD (no drafter samples) run; speculative decoding is
 * refused before any output, naming the stage and its reason. */
Test(cli, drafter_refused_by_a_stage_breaks_only_drafting, .timeout = 120) {
    cr_assert_eq(system("rm -rf tests/tmp/cli_no_drafter && mkdir -p tests/tmp/cli_no_drafter && "
                        "cc -std=c11 -O1 -fPIC -shared -I. tests/plugins/no_drafter.c -lm "
                        "-o tests/tmp/cli_no_drafter/no_drafter.so"),
                 0);
#define ND "-m " M "stories260K.gguf -p 'Once upon a time' -n 8 --seed 3 " \
           "--plugin-dir tests/tmp/cli_no_drafter --sampler no_drafter,multinomial "
    run_out r = run(ND "--strategy ar,nasd", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "--- nasd ---"), "%s", r.out);
    done(&r);
    r = run(ND "-d " M "stories260K-q8_0.gguf --strategy ar,spec", NULL);
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "stage 'no_drafter' refuses the drafter role: serves the target only"),
              "%s", r.err);
    cr_assert_str_eq(r.out, "");
    done(&r);
    /* interactively: /sampler warns while spec is on, /speculative refuses to turn it on */
    r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -i -n 4 "
            "--plugin-dir tests/tmp/cli_no_drafter --strategy ar,spec",
            "/sampler no_drafter,multinomial\n/speculative\n/speculative\n/quit\n");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "specdec: warning: sampler chain 'no_drafter,multinomial': stage "
                            "'no_drafter' refuses the drafter role"),
              "%s", r.err);
    cr_assert(strstr(r.out, "spec: off"), "%s", r.out);
    cr_assert(strstr(r.err, "error: /speculative: sampler chain 'no_drafter,multinomial': stage "
                            "'no_drafter' refuses the drafter role"),
              "%s", r.err);
    done(&r);
#undef ND
}

/* Verification runs report where their time went: the four parts add up
 * to the run's seconds, and after an autoregressive run the cost model's
 * prediction stands beside the realised speedup. */
Test(cli, verification_runs_report_their_time_split, .timeout = 120) {
    run_out r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -p 'Once upon a time' "
                    "-n 24 --ignore-eos --strategy ar,spec,nasd --json",
                    NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    json *doc = json_parse(r.out, strlen(r.out));
    cr_assert(doc, "not one JSON document: %s", r.out);
    const json *runs = json_get(doc, "runs");
    cr_assert_eq(json_len(runs), 3);
    cr_assert_null(json_get(json_at(runs, 0), "time_split"), "ar has no rounds");
    for (size_t i = 1; i < 3; i++) {
        const json *j = json_at(runs, i), *split = json_get(j, "time_split");
        cr_assert(split, "run %zu lacks time_split", i);
        const char *parts[] = {"draft_s", "catchup_s", "verify_s", "host_s"};
        double sum = 0;
        for (int k = 0; k < 4; k++) {
            cr_assert(json_get(split, parts[k]), "missing %s", parts[k]);
            sum += json_num(json_get(split, parts[k]));
        }
        const double total = json_num(json_get(j, "seconds"));
        cr_assert(fabs(sum - total) <= 0.05 * total, "parts %g s, run %g s", sum, total);
        cr_assert_gt(json_num(json_get(split, "verify_s")), 0);
        cr_assert_gt(json_num(json_get(j, "predicted_speedup")), 0);
        cr_assert_gt(json_num(json_get(j, "realised_speedup")), 0);
        cr_assert(json_get(j, "drafted_ngram"), "missing drafted_ngram");
    }
    json_free(doc);
    done(&r);
    r = run("-m " M "stories260K.gguf -d " M "stories260K-q8_0.gguf -p 'Once upon a time' -n 16 "
            "--strategy ar,spec --debug",
            NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    const char *line = strstr(r.err, "specdec: time split: drafting ");
    cr_assert(line, "%s", r.err);
    cr_assert(strstr(line, "%), catch-up ") && strstr(line, "%), verification ") &&
                  strstr(line, "%), host ") && strstr(line, "; speedup predicted "),
              "%s", line);
    cr_assert_null(strstr(line + 1, "specdec: time split:"), "one line per verification run");
    done(&r);
}
