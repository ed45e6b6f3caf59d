/* The --debug view of a verification round, one line on stderr: accepted
 * drafts, the rejected draft and the token that replaced it (or the bonus
 * token). Colour on a terminal, plain markers [+..] [-..] [>..] otherwise.
 * Newlines inside a piece print as \n so one round stays one line. */
#include <stdio.h>
#include <unistd.h>

#include "engine/cli/run.h"

static void piece(const sd_tokenizer *t, int32_t id, const char *open, const char *close) {
    char buf[128];
    sd_detok st = {{0}, 0, 0};
    sd_err e;
    int n = sd_detok_push(t, &st, id, buf, sizeof buf, &e);
    if (n < 0) n = 0;
    int held = st.n_pending;
    fprintf(stderr, "%s", open);
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else
            fputc(c, stderr);
    }
    if (held || n == 0) fprintf(stderr, "<%d>", id);
    fprintf(stderr, "%s", close);
}

void sd_step_view(const sd_tokenizer *t, const sd_step *s) {
    int tty = isatty(2);
    const char *acc_o = tty ? "\033[32m" : "[+", *acc_c = tty ? "\033[0m" : "]";
    const char *rej_o = tty ? "\033[31;9m" : "[-", *rej_c = tty ? "\033[0m" : "]";
    const char *nxt_o = tty ? "\033[34m" : "[>", *nxt_c = tty ? "\033[0m" : "]";
    fputs("debug: ", stderr);
    for (int i = 0; i < s->n_accepted; i++) piece(t, s->accepted[i], acc_o, acc_c);
    if (s->rejected >= 0) piece(t, s->rejected, rej_o, rej_c);
    if (s->next >= 0) piece(t, s->next, nxt_o, nxt_c);
    fputc('\n', stderr);
}
