/* Interactive mode: prompts and slash commands on stdin, line editing and
 * history through libedit when stdin is a terminal, plain reads otherwise. */
#ifndef SD_REPL_H
#define SD_REPL_H

#include <stdio.h>

#include "engine/cli/run.h"

/* Executes one line (a /command or a prompt): output on stdout, errors as
 * one "error: ..." line on stderr. Returns 1 on /quit, 0 to go on; errors
 * never end the session. */
int sd_repl_line(sd_cli *cli, char *line);
/* Runs first (when not NULL; -i -p TEXT or -i -f FILE), then reads lines
 * until /quit or the end of stdin. -1 (e set) only when first fails. A
 * Ctrl-C stops the prompt that is running and returns to the loop. */
int sd_repl_run(sd_cli *cli, const char *first, sd_err *e);

#endif
