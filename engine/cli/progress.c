#include "engine/cli/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

sd_progress_cb sd_cli_progress_cb(void) { return isatty(2) ? sd_cli_progress_report : NULL; }

void sd_cli_progress_report(void *ud, const sd_progress *p) {
    sd_cli_progress *s = ud;
    const int loading = p->stage[0] == 'l';
    if (p->done == 0) s->start = now();
    if (p->done >= p->total) {
        if (s->shown) fputs("\r\033[K", stderr);
        s->shown = 0;
        return;
    }
    if (!loading && now() - s->start < 1.0) return;
    if (loading)
        fprintf(stderr, "\r\033[Kspecdec: loading %s: weights %ld%% (mapped, repacked, uploaded)",
                p->path ? p->path : "the model", 100 * p->done / p->total);
    else
        fprintf(stderr, "\r\033[Kspecdec: prefill: %ld of %ld tokens", p->done, p->total);
    s->shown = 1;
}
