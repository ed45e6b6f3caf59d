/* A progress line on stderr while a model loads or a long prompt's
 * prefill runs, for a person watching a terminal: nothing when stderr is
 * not one, so pipes and logs get no carriage returns. */
#ifndef SD_CLI_PROGRESS_H
#define SD_CLI_PROGRESS_H

#include "engine/model/model.h"

typedef struct sd_cli_progress {
    double start;  /* when the current stage began (seconds, monotonic) */
    int shown;     /* a line is on the terminal and must be cleared */
} sd_cli_progress;

/* The callback for sd_model_opts / sd_config (ud: a sd_cli_progress), or
 * NULL when stderr is not a terminal. Loading shows at once; a prefill
 * only once it has run for a second. The line is erased when the stage
 * ends. */
sd_progress_cb sd_cli_progress_cb(void);
void sd_cli_progress_report(void *ud, const sd_progress *p);

#endif
