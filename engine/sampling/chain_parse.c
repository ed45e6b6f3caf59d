#include "engine/sampling/chain_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling/host_text.h"

/* "temperature, top_k" into buf, or "none". */
static void param_names(const sd_stage_desc *d, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    if (d->n_params == 0)
        sd_appendf(buf, cap, &used, "none");
    for (int i = 0; i < d->n_params; i++)
        sd_appendf(buf, cap, &used, "%s%s", i ? ", " : "", d->params[i].name);
}

static int parse_value(const char *sampler, const sd_sampler_param *p, const char *text,
                       sd_sampler_value *out, sd_err *e) {
    if (p->type == SD_SAMPLER_STRING) {
        if (strlen(text) > SD_SAMPLER_MAX_STRING)
            return sd_fail(e, "%s: %s is longer than %d bytes", sampler, p->name,
                           SD_SAMPLER_MAX_STRING);
        out->s = text;
        return 0;
    }
    char range[96];
    sd_param_range(p, range, sizeof range);
    const char *kind = p->type == SD_SAMPLER_INT ? "an integer" : "a number";
    char *end;
    errno = 0;
    double x;
    if (p->type == SD_SAMPLER_INT) {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end || isspace((unsigned char)text[0]))
            return sd_fail(e, "%s: %s = '%s' is not an integer (expected %s in %s)", sampler,
                           p->name, text, kind, range);
        x = (double)v;
        if (errno == ERANGE || !sd_param_in_range(p, x))
            return sd_fail(e, "%s: %s = %s is out of range %s", sampler, p->name, text, range);
        out->i = v;
        return 0;
    }
    x = strtod(text, &end);
    if (end == text || *end || isspace((unsigned char)text[0]))
        return sd_fail(e, "%s: %s = '%s' is not a number (expected %s in %s)", sampler, p->name,
                       text, kind, range);
    if (!isfinite(x))
        return sd_fail(e, "%s: %s = '%s' is not a finite number (expected %s in %s)", sampler,
                       p->name, text, kind, range);
    if (!sd_param_in_range(p, x))
        return sd_fail(e, "%s: %s = %s is out of range %s", sampler, p->name, text, range);
    out->f = x;
    return 0;
}

typedef struct chain_spec {
    int n;
    char names[SD_MAX_STAGES][SD_SAMPLER_MAX_NAME + 1];
} chain_spec;

/* The reference tool's names for two of the built-ins. */
static const char *alias(const char *name) {
    if (!strcmp(name, "topk"))
        return "top_k";
    if (!strcmp(name, "topknucleus"))
        return "top_k_nucleus";
    return name;
}

static int split_chain(const char *spec, chain_spec *c, sd_err *e) {
    c->n = 0;
    const char *p = spec;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (len == 0)
            return sd_fail(e, "sampler chain '%s': stage %d is empty", spec, c->n + 1);
        if (c->n == SD_MAX_STAGES)
            return sd_fail(e, "sampler chain '%s': more than %d stages", spec, SD_MAX_STAGES);
        if (len > SD_SAMPLER_MAX_NAME)
            return sd_fail(e, "unknown sampler '%.*s' (names have at most %d characters)",
                           (int)(len > 40 ? 40 : len), p, SD_SAMPLER_MAX_NAME);
        char name[SD_SAMPLER_MAX_NAME + 1];
        memcpy(name, p, len);
        name[len] = '\0';
        snprintf(c->names[c->n], sizeof c->names[0], "%s", alias(name));
        for (int i = 0; i < c->n; i++)
            if (!strcmp(c->names[i], c->names[c->n]))
                return sd_fail(e, "sampler chain '%s': stage '%s' appears twice", spec,
                               c->names[i]);
        c->n++;
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

int sd_samplers_load_chain(sd_sampler_set *s, const char *spec, sd_err *e) {
    chain_spec c;
    if (split_chain(spec, &c, e))
        return -1;
    for (int i = 0; i < c.n; i++) {
        int r = sd_samplers_load(s, c.names[i], e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The plugins of the chain's stages, checked for its shape. */
int sd_chain_resolve(const sd_sampler_set *s, const char *spec, const sd_plugin **pl,
                         int *n, sd_err *e) {
    chain_spec c;
    if (split_chain(spec, &c, e))
        return -1;
    for (int i = 0; i < c.n; i++)
        if (!(pl[i] = sd_set_plugin(s, c.names[i], e)))
            return -1;
    const sd_stage_desc *last = &pl[c.n - 1]->d.d;
    if (last->kind != SD_STAGE_SAMPLE)
        return sd_fail(e, "sampler chain '%s': its last stage '%s' is a logits stage; end the "
                          "chain with a sampling stage (greedy, multinomial, top_k, nucleus, "
                          "mirostat, ...)", spec, last->name);
    *n = c.n;
    return 0;
}

static int has_param(const sd_stage_desc *d, const char *key, size_t klen) {
    for (int j = 0; j < d->n_params; j++)
        if (strlen(d->params[j].name) == klen && !strncmp(d->params[j].name, key, klen))
            return j;
    return -1;
}

/* The stage a "key=value" or "stage.key=value" string is for: *stage, *param
 * (index in the stage's table), *val (the text after '='). */
static int route_arg(const sd_plugin *const *pl, int n, const char *arg, int *stage, int *param,
                     const char **val, sd_err *e) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return sd_fail(e, "%s: sampler argument '%s' is not key=value", pl[n - 1]->d.d.name, arg);
    *val = eq + 1;
    const char *key = arg;
    size_t klen = (size_t)(eq - arg);
    const char *dot = memchr(arg, '.', klen);
    if (dot) {
        size_t slen = (size_t)(dot - arg);
        *stage = -1;
        for (int i = 0; i < n; i++)
            if (strlen(pl[i]->d.d.name) == slen && !strncmp(pl[i]->d.d.name, arg, slen))
                *stage = i;
        if (*stage < 0) {
            char names[SD_ERRLEN / 2] = "";
            size_t used = 0;
            for (int i = 0; i < n; i++)
                sd_appendf(names, sizeof names, &used, "%s%s", i ? ", " : "", pl[i]->d.d.name);
            return sd_fail(e, "sampler argument '%s': no stage '%.*s' in the chain (stages: %s)",
                           arg, (int)slen, arg, names);
        }
        key = dot + 1;
        klen = (size_t)(eq - key);
    } else {
        /* unqualified: the last stage when it has the key, else the one
         * stage that has it */
        *stage = has_param(&pl[n - 1]->d.d, key, klen) >= 0 ? n - 1 : -1;
        for (int i = 0; i < n - 1 && *stage < 0; i++)
            if (has_param(&pl[i]->d.d, key, klen) >= 0) {
                for (int j = i + 1; j < n - 1; j++)
                    if (has_param(&pl[j]->d.d, key, klen) >= 0)
                        return sd_fail(e, "sampler argument '%s': stages %s and %s both have "
                                          "'%.*s'; write %s.%.*s=... or %s.%.*s=...",
                                       arg, pl[i]->d.d.name, pl[j]->d.d.name, (int)klen, key,
                                       pl[i]->d.d.name, (int)klen, key, pl[j]->d.d.name, (int)klen,
                                       key);
                *stage = i;
            }
        if (*stage < 0)
            *stage = n - 1; /* reported as unknown there */
    }
    const sd_stage_desc *d = &pl[*stage]->d.d;
    if ((*param = has_param(d, key, klen)) < 0) {
        char names[SD_ERRLEN / 2];
        param_names(d, names, sizeof names);
        return sd_fail(e, "%s: unknown parameter '%.*s' (accepted: %s)", d->name, (int)klen, key,
                       names);
    }
    return 0;
}

/* values[i] = the defaults of stage i overridden by the n_kv strings. On
 * failure *bad is the index of the string at fault. */
int sd_chain_parse_args(const sd_plugin *const *pl, int n, const char *const *kv, int n_kv,
                      sd_sampler_value (*values)[SD_SAMPLER_MAX_PARAMS], int *bad, sd_err *e) {
    for (int i = 0; i < n; i++)
        sd_stage_defaults(&pl[i]->d, values[i]);
    for (int k = 0; k < n_kv; k++) {
        *bad = k;
        int st, j;
        const char *val;
        if (route_arg(pl, n, kv[k], &st, &j, &val, e) ||
            parse_value(pl[st]->d.d.name, &pl[st]->d.d.params[j], val, &values[st][j], e))
            return -1;
    }
    return 0;
}

int sd_sampler_check(const sd_sampler_set *s, const char *spec, const char *const *kv, int n_kv,
                     int *bad_kv, sd_err *e) {
    *bad_kv = -1;
    const sd_plugin *pl[SD_MAX_STAGES];
    int n;
    sd_sampler_value values[SD_MAX_STAGES][SD_SAMPLER_MAX_PARAMS];
    if (sd_chain_resolve(s, spec, pl, &n, e))
        return -1;
    return sd_chain_parse_args(pl, n, kv, n_kv, values, bad_kv, e);
}

