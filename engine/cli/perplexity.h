/* specdec --perplexity FILE: the running value after each window as it
 * comes, then PPL +/- error, the tokens scored and the speed, on stderr
 * (or, with --json, one object holding all of it on stdout). */
#ifndef SD_CLI_PERPLEXITY_H
#define SD_CLI_PERPLEXITY_H

#include <stdio.h>

#include "engine/cli/args.h"

/* Evaluates text (the contents of a->perplexity) on a->c.model. Returns the
 * exit status: 0, 1 when the model or the text is at fault (a perplexity
 * that is NaN or infinite included), 2 for a bad flag value (a --ctx the
 * model cannot take); the message is in e. */
int sd_cli_perplexity(const sd_args *a, const char *text, FILE *out, sd_err *e);

#endif
