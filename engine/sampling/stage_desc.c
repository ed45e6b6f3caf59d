#include "engine/sampling/stage_desc.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int valid_name(const char *s, int param) {
    size_t n = strlen(s);
    if (n == 0 || n > SD_SAMPLER_MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int ok = param ? (islower(c) || c == '_' || (i > 0 && isdigit(c)))
                       : (isalnum(c) || c == '_' || c == '-');
        if (!ok)
            return 0;
    }
    return 1;
}

int sd_param_in_range(const sd_sampler_param *p, double x) {
    int lo = (p->flags & SD_SAMPLER_MIN_EXCLUSIVE) ? x > p->min : x >= p->min;
    int hi = (p->flags & SD_SAMPLER_MAX_EXCLUSIVE) ? x < p->max : x <= p->max;
    return lo && hi;
}

void sd_param_range(const sd_sampler_param *p, char *buf, size_t cap) {
    int lo_open = (p->flags & SD_SAMPLER_MIN_EXCLUSIVE) || isinf(p->min);
    int hi_open = (p->flags & SD_SAMPLER_MAX_EXCLUSIVE) || isinf(p->max);
    snprintf(buf, cap, "%c%.15g, %.15g%c", lo_open ? '(' : '[', p->min, p->max, hi_open ? ')' : ']');
}

static int integral(double x) {
    return fabs(x) <= 0x1p53 && x == floor(x);
}

static int check_param(const sd_sampler_param *t, int i, char *why, size_t len) {
    const sd_sampler_param *p = &t[i];
    if (!p->name || !valid_name(p->name, 1)) {
        snprintf(why, len, "bad parameter table: entry %d has an invalid name", i);
        return -1;
    }
    for (int j = 0; j < i; j++)
        if (!strcmp(t[j].name, p->name)) {
            snprintf(why, len, "bad parameter table: parameter '%s' appears twice", p->name);
            return -1;
        }
    if (p->type == SD_SAMPLER_STRING)
        return 0;
    if (p->type != SD_SAMPLER_INT && p->type != SD_SAMPLER_FLOAT) {
        snprintf(why, len, "bad parameter table: parameter '%s' has unknown type %d", p->name,
                 (int)p->type);
        return -1;
    }
    if (isnan(p->min) || isnan(p->max) || !isfinite(p->def) || p->min > p->max ||
        (p->type == SD_SAMPLER_INT &&
         (!integral(p->min) || !integral(p->max) || !integral(p->def)))) {
        snprintf(why, len,
                 "bad parameter table: parameter '%s' has invalid bounds or default "
                 "(min %g, max %g, default %g)",
                 p->name, p->min, p->max, p->def);
        return -1;
    }
    if (!sd_param_in_range(p, p->def)) {
        char r[96];
        sd_param_range(p, r, sizeof r);
        snprintf(why, len, "bad parameter table: default %.15g of '%s' is outside %s", p->def,
                 p->name, r);
        return -1;
    }
    return 0;
}

int sd_stage_check_common(const stage_def *def, char *why, size_t len) {
    const sd_stage_desc *d = &def->d;
    if (!d->name || !d->name[0]) {
        snprintf(why, len, "missing name");
        return -1;
    }
    if (!valid_name(d->name, 0)) {
        snprintf(why, len, "invalid name '%.40s' (letters, digits, '_', '-'; at most %d)",
                 d->name, SD_SAMPLER_MAX_NAME);
        return -1;
    }
    if (d->n_params < 0 || d->n_params > SD_SAMPLER_MAX_PARAMS || (d->n_params > 0 && !d->params)) {
        snprintf(why, len, "bad parameter table: n_params = %" PRId32 " (0..%d, table %s)",
                 d->n_params, SD_SAMPLER_MAX_PARAMS, d->params ? "present" : "missing");
        return -1;
    }
    for (int i = 0; i < d->n_params; i++) {
        if (check_param(d->params, i, why, len))
            return -1;
        if (d->params[i].type != SD_SAMPLER_STRING)
            continue;
        if (def->v1 || d->struct_size < SD_STAGE_V2_1_SIZE) {
            snprintf(why, len,
                     "bad parameter table: string parameter '%s' needs ABI v2.1 "
                     "(struct_size >= %zu)",
                     d->params[i].name, (size_t)SD_STAGE_V2_1_SIZE);
            return -1;
        }
        const char *t = d->str_defaults ? d->str_defaults[i] : NULL;
        if (t && strlen(t) > SD_SAMPLER_MAX_STRING) {
            snprintf(why, len, "bad parameter table: default of '%s' is longer than %d bytes",
                     d->params[i].name, SD_SAMPLER_MAX_STRING);
            return -1;
        }
    }
    return 0;
}

static int missing_function(const char *missing, char *why, size_t len) {
    if (!missing)
        return 0;
    snprintf(why, len, "missing %s function", missing);
    return -1;
}

int sd_stage_from_v2(const sd_stage_desc *d, stage_def *def, char *why, size_t len) {
    if (d->abi_version != SD_SAMPLER_ABI_VERSION_2) {
        snprintf(why, len,
                 "ABI version %" PRIu32 " from %s(), which is version 2 (version 1 is %s())",
                 d->abi_version, SD_SAMPLER_V2_ENTRY_SYMBOL, SD_SAMPLER_ENTRY_SYMBOL);
        return -1;
    }
    if (d->struct_size < SD_STAGE_V2_SIZE) {
        snprintf(why, len, "descriptor struct_size %" PRIu32 " is smaller than %zu (ABI v2)",
                 d->struct_size, (size_t)SD_STAGE_V2_SIZE);
        return -1;
    }
    int n_hist = !!d->reset + !!d->accept + !!d->rollback;
    /* A plugin built against an older header has a shorter descriptor:
     * the fields it lacks read as zero. */
    memset(def, 0, sizeof *def);
    memcpy(&def->d, d, d->struct_size < sizeof def->d ? d->struct_size : sizeof def->d);
    def->abi = 2;
    def->history = n_hist == 3;
    if (sd_stage_check_common(def, why, len))
        return -1;
    if (d->kind != SD_STAGE_LOGITS && d->kind != SD_STAGE_SAMPLE) {
        snprintf(why, len, "unknown stage kind %" PRIu32 " (SD_STAGE_LOGITS or SD_STAGE_SAMPLE)",
                 d->kind);
        return -1;
    }
    if (missing_function(!d->create    ? "create"
                         : !d->destroy ? "destroy"
                         : !d->process ? "process"
                         : (d->kind == SD_STAGE_SAMPLE && !d->sample) ? "sample"
                                                                       : NULL,
                         why, len))
        return -1;
    if (d->kind == SD_STAGE_LOGITS && d->sample) {
        snprintf(why, len, "a logits stage has no sample function (set it to NULL)");
        return -1;
    }
    if (n_hist != 0 && n_hist != 3) {
        snprintf(why, len, "reset, accept and rollback must be given together (all or none)");
        return -1;
    }
    if ((d->flags & SD_SAMPLER_FLAG_ARGMAX) && (d->kind != SD_STAGE_SAMPLE || n_hist)) {
        snprintf(why, len, "SD_SAMPLER_FLAG_ARGMAX is for sampling stages without history");
        return -1;
    }
    return 0;
}

void sd_stage_defaults(const stage_def *def, sd_sampler_value *v) {
    const sd_stage_desc *d = &def->d;
    for (int i = 0; i < d->n_params; i++) {
        if (d->params[i].type == SD_SAMPLER_STRING)
            v[i].s = d->str_defaults && d->str_defaults[i] ? d->str_defaults[i] : "";
        else if (d->params[i].type == SD_SAMPLER_INT)
            v[i].i = (int64_t)d->params[i].def;
        else
            v[i].f = d->params[i].def;
    }
}
