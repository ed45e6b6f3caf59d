#include <stdio.h>
#include <unistd.h>

#include "generate.h"

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

void sd_debug_step(const sd_tokenizer *t, const int32_t *accepted, int n_accepted,
                   int32_t rejected, int32_t next) {
    int tty = isatty(2);
    const char *acc_o = tty ? "\033[32m" : "[+", *acc_c = tty ? "\033[0m" : "]";
    const char *rej_o = tty ? "\033[31;9m" : "[-", *rej_c = tty ? "\033[0m" : "]";
    const char *nxt_o = tty ? "\033[34m" : "[>", *nxt_c = tty ? "\033[0m" : "]";
    fputs("debug: ", stderr);
    for (int i = 0; i < n_accepted; i++) piece(t, accepted[i], acc_o, acc_c);
    if (rejected >= 0) piece(t, rejected, rej_o, rej_c);
    if (next >= 0) piece(t, next, nxt_o, nxt_c);
    fputc('\n', stderr);
}
