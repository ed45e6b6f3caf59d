/* The specdec binary as a new user meets it: what goes to stdout and what
 * to stderr, the JSON forms, the interactive mode's errors and conflicts
 * and its Ctrl-D on a terminal, the words of the stats, the flag forms,
 * a perplexity that is no number, and the progress line. Runs ./specdec
 * (or $SPECDEC_BIN) from the repository root. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "engine/format/gguf.h"
#include "kernels/common/wtype.h"
#include "tests/util/json.h"
#include "tests/util/test_util.h"

#define M "tests/data/models/"

typedef tu_run run_out;

static run_out run(const char *args, const char *input) {
    run_out r = tu_specdec(args, input);
    cr_assert(r.out && r.err, "could not run specdec %s", args);
    return r;
}

static void done(run_out *r) { tu_run_free(r); }

/* stdout holds the prompt and the text only; the stats, the table and the
 * seed go to stderr, so `specdec ... > out.txt` keeps just the text. */
Test(cli_usage, stdout_holds_only_the_text) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 8 --strategy ar,nasd "
                    "--sampler top_k --seed 3", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(tu_matches("^--- ar ---\\nOnce upon a time[^\\n]*\\n--- nasd ---\\nOnce upon a "
                         "time[^\\n]*\\n$", r.out), "%s", r.out);
    cr_assert(strstr(r.err, "vs ar") && strstr(r.err, "specdec: seed 3"), "%s", r.err);
    done(&r);
}

/* --json with several strategies is one document (python's parser agrees),
 * --jsonl one object a line; --debug adds each run's verification rounds. */
Test(cli_usage, json_is_one_document_and_jsonl_one_object_a_line) {
    const char *base = "-m " M "stories260K.gguf --draft-layers 2 -p 'Once upon a time' -n 12 "
                       "--strategy ar,spec,nasd --debug";
    char args[512];
    snprintf(args, sizeof args, "%s --json", base);
    run_out r = run(args, NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_not(strstr(r.err, "debug: "), "the rounds go into the JSON: %s", r.err);
    json *doc = json_parse(r.out, strlen(r.out));
    cr_assert(doc, "not one JSON document: %s", r.out);
    const json *runs = json_get(doc, "runs");
    cr_assert_eq(json_len(runs), 3);
    cr_assert_str_eq(json_str(json_get(json_get(doc, "settings"), "strategy"), NULL), "ar,spec,nasd");
    const json *steps = json_get(json_at(runs, 1), "steps");
    cr_assert_gt(json_len(steps), 0, "%s", r.out);
    const json *step = json_at(steps, 0);
    cr_assert(json_get(step, "accepted") && json_get(step, "rejected") && json_get(step, "next"));
    cr_assert_eq(json_len(json_get(json_at(runs, 0), "steps")), 0, "ar has no rounds");
    json_free(doc);
    done(&r);
    char cmd[640];
    const char *bin = getenv("SPECDEC_BIN") ? getenv("SPECDEC_BIN") : "./specdec";
    snprintf(cmd, sizeof cmd, "%s %s --json 2>/dev/null | python3 -m json.tool >/dev/null", bin, base);
    if (system("python3 -c 1 2>/dev/null") == 0) cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(args, sizeof args, "%s --jsonl", base);
    r = run(args, NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    int lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        json *j = json_parse(line, strlen(line));
        cr_assert(j, "not one object: %s", line);
        cr_assert(json_get(j, "strategy") && json_get(j, "steps"), "%s", line);
        json_free(j);
    }
    cr_assert_eq(lines, 3);
    done(&r);
    r = run("-m " M "stories260K.gguf -p hi --json --jsonl", NULL);
    cr_assert_eq(r.rc, 2);
    cr_assert(strstr(r.err, "give either --json or --jsonl"), "%s", r.err);
    done(&r);
}

/* A conflict is refused when it is made, with the command that resolves
 * it, and the prompts after it still run. */
Test(cli_usage, interactive_conflicts_are_refused_when_made) {
    run_out r = run("-m " M "stories260K.gguf -n 2 -i",
                    "/beam\n/sampler top_k\nOnce\n/beam\n/sampler top_k top_k=5\n/beam\n/help\n/quit\n");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "error: /sampler top_k: beam search is on and applies no sampler: /beam "
                            "turns it off\n"), "%s", r.err);
    cr_assert(strstr(r.err, "error: /beam: beam search applies no sampler: /sampler greedy first\n"),
              "%s", r.err);
    cr_assert(strstr(r.out, "--- beam ---\nOnce"), "the prompt ran: %s", r.out);
    cr_assert(strstr(r.out, "sampler: top_k("), "%s", r.out);
    cr_assert(strstr(r.out, "(now top_k)\n"), "/help shows the chain set: %s", r.out);
    int errors = 0;
    for (const char *p = r.err; (p = strstr(p, "error: ")); p++) errors++;
    cr_assert_eq(errors, 2, "%s", r.err);
    done(&r);
}

/* Ctrl-D at the interactive prompt of a terminal ends the line it leaves. */
Test(cli_usage, interactive_ctrl_d_leaves_a_newline, .timeout = 60) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0);
    cr_assert_eq(grantpt(master), 0);
    cr_assert_eq(unlockpt(master), 0);
    const char *slave = ptsname(master);
    cr_assert(slave);
    const char *bin = getenv("SPECDEC_BIN") ? getenv("SPECDEC_BIN") : "./specdec";
    /* opened before the fork, so the master never sees the terminal closed
     * before the child holds it */
    int s = open(slave, O_RDWR | O_NOCTTY);
    cr_assert(s >= 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setsid();
        dup2(s, 0);
        dup2(s, 1);
        dup2(s, 2);
        execl(bin, bin, "-m", M "stories260K.gguf", "-i", (char *)NULL);
        _exit(127);
    }
    char buf[8192];
    size_t n = 0;
    int sent = 0;
    for (int waited = 0; waited < 300 && n < sizeof buf - 1; waited++) {
        struct pollfd p = {master, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
            ssize_t k = read(master, buf + n, sizeof buf - 1 - n);
            if (k <= 0) break;
            n += (size_t)k;
            buf[n] = 0;
        }
        /* libedit switches the terminal out of canonical mode after
         * printing the prompt; a Ctrl-D sent before that is read as a line
         * character, so wait for the switch */
        struct termios t;
        if (!sent && strstr(buf, "> ") && !tcgetattr(s, &t) && !(t.c_lflag & ICANON)) {
            cr_assert_eq(write(master, "\004", 1), 1);
            sent = 1;
            close(s); /* the child's exit now reads as the end of the terminal */
        }
    }
    buf[n] = 0;
    int st = 0, got = 0;
    for (int waited = 0; waited < 100 && !(got = waitpid(pid, &st, WNOHANG)); waited++)
        usleep(100000);
    if (!got) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    close(master);
    if (!sent) close(s);
    cr_assert(sent, "no prompt: '%s'", buf);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: '%s'", st, buf);
    const char *prompt = strrchr(buf, '>');
    cr_assert(prompt && strchr(prompt, '\n'), "no newline after the prompt: '%s'", buf);
}

/* Plural forms; a rate with nothing to count reads n/a, never 0.0. */
Test(cli_usage, words_and_rates_read_right) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n 1", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, ", 1 new token in "), "%s", r.err);
    cr_assert(strstr(r.err, "(decode n/a), 1 target call\n"), "%s", r.err);
    cr_assert_not(strstr(r.err, "0.0 tok/s"), "%s", r.err);
    done(&r);
    r = run("-m " M "stories260K.gguf --perplexity tests/data/text/GPL-3.txt --ctx 64 --chunks 1",
            NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, ", 1 chunk of 64 ") && strstr(r.err, "scored in 1 chunk of 64;"), "%s",
              r.err);
    done(&r);
    r = run("--help", NULL);
    cr_assert(strstr(r.out, "(llama or qwen2 architecture)"), "%s", r.out);
    done(&r);
}

/* --flag=value, a short flag's attached value, -f - (stdin), --version,
 * an integer too long for any type (out of range, not "not an integer"),
 * and the two NASD switches that contradict each other. */
Test(cli_usage, flag_forms_and_their_errors) {
    run_out r = run("-m " M "stories260K.gguf -p 'Once upon a time' -n8 --gamma=2 --jsonl", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"new_tokens\":8,"), "%s", r.out);
    done(&r);
    r = run("-m " M "stories260K.gguf -f - -n 4 --jsonl", "Once upon a time");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"prompt_tokens\":5,"), "%s", r.out);
    done(&r);
    r = run("--version", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(tu_matches("^specdec [0-9.]+( \\(git [^)\\n]+\\))?\\ncuda: [^\\n]+\\ncpu: SIMD levels "
                         "built in: scalar avx2 avx512 avx512vnni amx; this machine runs [a-z0-9]+",
                         r.out),
              "%s", r.out);
    /* the version is the Makefile's VERSION */
    char *mk = tu_slurp("Makefile"), version[64] = "";
    cr_assert(mk);
    const char *at = strstr(mk, "\nVERSION ");
    cr_assert(at && sscanf(strchr(at, '=') + 1, " %63s", version) == 1, "no VERSION in the Makefile");
    char want[96];
    snprintf(want, sizeof want, "specdec %s", version);
    cr_assert(!strncmp(r.out, want, strlen(want)) && strchr(" \n", r.out[strlen(want)]),
              "'%s' does not start with '%s'", r.out, want);
    free(mk);
    done(&r);
    struct {
        const char *args, *msg;
    } bad[] = {
        {"--gamma 99999999999999999999", "specdec: --gamma: 99999999999999999999 is out of range [0, 256]"},
        {"--gamma=-1", "specdec: --gamma: -1 is out of range [0, 256]"},
        {"-n-1", "specdec: -n: -1 is out of range [0, 16777216]"},
        {"--seed 99999999999999999999999", "specdec: --seed: 99999999999999999999999 is out of range"},
        {"--fill-unknown --stop-if-unknown", "--fill-unknown and --stop-if-unknown contradict"},
        {"-i -f -", "-f - reads the prompt from stdin, where -i reads its lines"},
        {"-hx", "unknown option '-hx'"},
        {"--chat=maybe", "--chat: 'maybe' is not on or off"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "-m " M "stories260K.gguf %s%s", bad[i].args,
                 strstr(bad[i].args, "-f -") ? "" : " -p hi");
        r = run(args, NULL);
        cr_assert_eq(r.rc, 2, "%s: rc %d (%s)", args, r.rc, r.err);
        cr_assert(strstr(r.err, bad[i].msg), "%s: '%s' lacks '%s'", args, r.err, bad[i].msg);
        done(&r);
    }
}

/* A model whose weights hold NaN gives a NaN perplexity: that is an error
 * (exit 1, naming the file and the model), not a result. */
Test(cli_usage, perplexity_nan_is_an_error) {
    cr_assert_eq(system("mkdir -p tests/tmp"), 0);
    char path[64];
    snprintf(path, sizeof path, "tests/tmp/nan_model.%d.gguf", (int)getpid());
    sd_err e = {{0}};
    gguf_file *f = gguf_open(M "stories260K.gguf", &e);
    cr_assert(f, "%s", e.msg);
    const gguf_tensor *t = gguf_find_tensor(f, "output_norm.weight");
    cr_assert(t && t->type == SD_F32);
    size_t at = (size_t)((const uint8_t *)t->data - f->base);
    FILE *out = fopen(path, "wb");
    cr_assert(out);
    cr_assert_eq(fwrite(f->base, 1, f->size, out), f->size);
    float nan = NAN;
    cr_assert_eq(fseek(out, (long)at, SEEK_SET), 0);
    cr_assert_eq(fwrite(&nan, sizeof nan, 1, out), 1);
    fclose(out);
    gguf_close(f);
    char args[256];
    snprintf(args, sizeof args, "-m %s --perplexity tests/data/text/GPL-3.txt --ctx 64 --chunks 1",
             path);
    run_out r = run(args, NULL);
    unlink(path);
    cr_assert_eq(r.rc, 1, "rc %d: %s", r.rc, r.err);
    cr_assert(strstr(r.err, "specdec: tests/data/text/GPL-3.txt: the perplexity is NaN"), "%s", r.err);
    cr_assert(strstr(r.err, path), "%s", r.err);
    done(&r);
}

/* Progress: a terminal on stderr sees each model's loading (a line that is
 * erased when done); a pipe or a file gets none of it, even for a prompt
 * long enough to prefill in several chunks. */
Test(cli_usage, progress_only_on_a_terminal, .timeout = 60) {
    char prompt[8192] = "'";
    for (int i = 0; i < 120; i++) strcat(prompt, "Once upon a time ");
    strcat(prompt, "'");
    char args[8448];
    snprintf(args, sizeof args, "-m " M "stories260K.gguf -n 2 -p %s", prompt);
    run_out r = run(args, NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert_not(strchr(r.err, '\r'), "%s", r.err);
    cr_assert_not(strstr(r.err, "loading") || strstr(r.err, "prefill:"), "%s", r.err);
    cr_assert(strncmp(r.err, "specdec: ar: prompt ", 20) == 0, "only the stats: %s", r.err);
    done(&r);

    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0);
    int s = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert(s >= 0);
    const char *bin = getenv("SPECDEC_BIN") ? getenv("SPECDEC_BIN") : "./specdec";
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(s, 2);
        execl(bin, bin, "-m", M "stories260K.gguf", "-n", "2", "-p", "Once", (char *)NULL);
        _exit(127);
    }
    /* the child holds the terminal's only other end: its exit ends the reads */
    close(s);
    char buf[8192];
    size_t n = 0;
    for (int waited = 0; waited < 300 && n < sizeof buf - 1; waited++) {
        struct pollfd p = {master, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t k = read(master, buf + n, sizeof buf - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    int st = 0;
    waitpid(pid, &st, 0);
    close(master);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x: %s", st, buf);
    cr_assert(strstr(buf, "\r\033[Kspecdec: loading " M "stories260K.gguf: weights "), "%s", buf);
    cr_assert(strstr(buf, "\r\033[Kspecdec: ar: prompt "), "the line is erased first: %s", buf);
}

/* docs/usage.md's flag list is `specdec --help` as the binary prints it
 * (the regeneration command is in the page). */
Test(cli_usage, usage_page_holds_the_help) {
    run_out r = run("--help", NULL);
    cr_assert_eq(r.rc, 0, "%s", r.err);
    char *page = tu_slurp("docs/usage.md");
    cr_assert(page, "cannot read docs/usage.md");
    const char *begin = strstr(page, "\n<!-- help: begin -->\n```text\n");
    const char *end = strstr(page, "```\n<!-- help: end -->\n");
    cr_assert(begin && end && end > begin, "docs/usage.md lacks the help markers");
    begin = strstr(begin, "```text\n") + 8;
    size_t n = (size_t)(end - begin);
    cr_assert(strlen(r.out) == n && !strncmp(r.out, begin, n),
              "docs/usage.md's flag list differs from specdec --help: regenerate it with the "
              "command given on that page");
    free(page);
    done(&r);
}
