/* Every setting of the specdec binary, once: its flags, its interactive
 * command (the long flag without dashes, '-' written '_'), the field it
 * fills, its type and range, its help text and whether the JSON settings
 * echo carries it. The flag parser (args.c), the interactive mode
 * (repl.c), both help texts and the JSON echo all read this table, so a
 * range or a name cannot differ between them. Defaults stay where the
 * session declares them (sd_config_defaults); the help reads them from a
 * defaults-filled struct. */
#ifndef SD_CLI_SETTINGS_H
#define SD_CLI_SETTINGS_H

#include <stddef.h>
#include <stdio.h>

#include "engine/cli/args.h"

typedef enum sd_set_kind {
    SD_SET_ON,    /* the flag sets an int to 1 */
    SD_SET_OFF,   /* the flag sets an int to 0 (--no-parse-special) */
    SD_SET_INT,   /* int in [lo, hi] */
    SD_SET_NUM,   /* finite double in [lo, hi] */
    SD_SET_U64,   /* unsigned 64-bit (--seed; sets have_seed) */
    SD_SET_STR,   /* const char *, pointing into argv (or the interactive line) */
    SD_SET_LIST,  /* repeatable: const char *[SD_MAX_LIST] plus its count at count_off */
    SD_SET_CHOICE, /* one word of choices, stored as its int value */
    SD_SET_STRATEGIES /* comma list of strategy names, stored as bits */
} sd_set_kind;

typedef struct sd_choice {
    const char *word;
    int value;
} sd_choice;

/* Help sections, in the order --help prints them. */
enum {
    SD_SEC_MODEL,
    SD_SEC_GEN,
    SD_SEC_SPEC,
    SD_SEC_BEAM,
    SD_SEC_SAMPLING,
    SD_SEC_PPL,
    SD_SEC_OUTPUT,
    SD_N_SECTIONS
};

typedef struct sd_setting {
    const char *flag;  /* long spelling, "--gamma" */
    char short_flag;   /* 'n' for -n, 0 for none */
    sd_set_kind kind;
    size_t off;        /* offsetof(sd_args, ...) */
    double lo, hi;     /* INT and NUM */
    const sd_choice *choices; /* CHOICE: NULL-terminated */
    size_t count_off;  /* LIST: offsetof(sd_args, ...) of the count */
    const char *arg;   /* the value's name in the help ("N"); NULL for ON/OFF */
    const char *help;  /* one line or several ('\n' between them) */
    const char *deflt; /* the default as the help words it; NULL: read from the defaults */
    /* NULL: the interactive mode sets it with /name. Otherwise why it has
     * no command there (the model is loaded once, ...). */
    const char *no_command;
    int echo;          /* part of the JSON settings echo */
    int section;
} sd_setting;

extern const sd_setting sd_settings[];
extern const size_t sd_n_settings;

/* The interactive (and JSON) name of s: its long flag without the
 * leading dashes, every '-' written '_' ("--n-predict" -> "n_predict"). */
const char *sd_setting_name(const sd_setting *s, char *buf, size_t cap);
/* The setting whose long flag is arg ("--gamma") or whose short flag is
 * arg ("-n"); NULL if none. */
const sd_setting *sd_setting_by_flag(const char *arg);
/* The setting whose interactive name is name, spelled with '_' or '-'
 * ("draft_layers", "draft-layers"); NULL if none. */
const sd_setting *sd_setting_by_name(const char *name);

/* Parses value into s's field of a. who names the setting in messages
 * ("--gamma" or "/gamma"). ON/OFF take "on"/"off"/"1"/"0" here (the flag
 * parser sets them without a value). Returns 0, or -1 with
 * "<who>: <value> is out of range [lo, hi]" or "<who>: '<value>' is not
 * <what>". */
int sd_setting_parse(const sd_setting *s, sd_args *a, const char *value, const char *who,
                     sd_err *e);
/* The field's value as text ("4", "on", "multi", "ar,spec"). */
const char *sd_setting_format(const sd_setting *s, const sd_args *a, char *buf, size_t cap);
/* The range or the accepted words, as the help and the messages write
 * them ("1 to 256", "multi or one"); "" when there is none to state. */
const char *sd_setting_range(const sd_setting *s, char *buf, size_t cap);

/* a with every default: sd_config_defaults, the rest zero. */
void sd_args_defaults(sd_args *a);

/* --help: every setting by section, with its range and default. */
void sd_settings_usage(FILE *out);
/* The interactive mode's list of settings: /name VALUE, the range, the
 * help's first line and the value in a. */
void sd_settings_commands(FILE *out, const sd_args *a);

#endif
