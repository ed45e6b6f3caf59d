/* Chain instances at run time: creating the stages for one model role,
 * running a row through them with every output checked, sampling, and the
 * token history the stages are told. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sampling/call_guard.h"
#include "engine/sampling/chain_parse.h"
#include "engine/sampling/host_text.h"
#include "engine/sampling/row_guard.h"
#include "engine/sampling/stage_check.h"
#include "engine/sampling/stage_v1.h"

/* History a handle made by sd_sampler_create may hold. */
#define DEFAULT_HISTORY 4096

typedef struct stage {
    const stage_def *d;
    const char *file; /* the plugin's, owned by the set */
    void *handle;
    sd_sampler_value values[SD_SAMPLER_MAX_PARAMS];
    char *strings[SD_SAMPLER_MAX_PARAMS]; /* copies of the string values */
} stage;

/* A chain: logits stages, then one sampling stage. The history is the
 * engine's copy of what the stages were told, so that it can find the
 * common prefix with a new sequence and roll back only what differs. */
struct sd_sampler {
    stage st[SD_MAX_STAGES];
    int n;
    int max_vocab;
    int history;        /* some stage keeps history */
    int32_t *hist;      /* [max_history] */
    int n_hist, n_prompt, max_history;
    int last;           /* position of the row last processed at this history, or -1 */
    sd_guarded_row row[2]; /* stage outputs, alternately */
    float *catchup;        /* [max_vocab]: rows processed only to move the history */
};

static double rng_uniform(void *state) {
    return sd_rng_uniform(state);
}

sd_sampler *sd_sampler_create(const sd_sampler_set *s, const char *spec, const char *const *kv,
                              int n_kv, int max_vocab, sd_err *e) {
    sd_engine_info info = {.abi_version = SD_SAMPLER_ABI_VERSION_2,
                           .struct_size = sizeof info,
                           .n_vocab = max_vocab,
                           .max_history = DEFAULT_HISTORY,
                           .role = SD_ROLE_OTHER};
    return sd_sampler_create_for(s, spec, kv, n_kv, &info, e);
}

sd_sampler *sd_sampler_create_for(const sd_sampler_set *s, const char *spec,
                                  const char *const *kv, int n_kv, const sd_engine_info *info,
                                  sd_err *e) {
    const sd_plugin *pl[SD_MAX_STAGES];
    int n, bad;
    if (sd_chain_resolve(s, spec, pl, &n, e))
        return NULL;
    if (info->n_vocab < 1) {
        sd_fail(e, "%s: max_vocab must be >= 1, got %d", spec, (int)info->n_vocab);
        return NULL;
    }
    if (info->max_history < 1) {
        sd_fail(e, "%s: max_history must be >= 1, got %d", spec, (int)info->max_history);
        return NULL;
    }
    sd_sampler *p = calloc(1, sizeof *p);
    if (!p) {
        sd_fail(e, "out of memory");
        return NULL;
    }
    p->max_vocab = info->n_vocab;
    p->max_history = info->max_history;
    p->last = -1;
    sd_sampler_value values[SD_MAX_STAGES][SD_SAMPLER_MAX_PARAMS];
    if (sd_chain_parse_args(pl, n, kv, n_kv, values, &bad, e))
        goto fail;
    if (sd_row_alloc(&p->row[0], info->n_vocab) || sd_row_alloc(&p->row[1], info->n_vocab) ||
        !(p->catchup = malloc((size_t)info->n_vocab * sizeof *p->catchup)))
        goto oom;
    sd_call_guard_install();
    for (int i = 0; i < n; i++) {
        stage *st = &p->st[i];
        st->d = &pl[i]->d;
        st->file = pl[i]->file;
        memcpy(st->values, values[i], sizeof st->values);
        /* string values point into the caller's arguments: the stage keeps
         * its own copies (for describe), freed with it */
        for (int j = 0; j < st->d->d.n_params; j++)
            if (st->d->d.params[j].type == SD_SAMPLER_STRING &&
                !(st->values[j].s = st->strings[j] = sd_format("%s", values[i][j].s)))
                goto oom;
        char err[256] = "";
        sd_call_enter(st->d->d.name, st->file, "create");
        st->handle = sd_stage_create(st->d, info, st->values, err, sizeof err);
        sd_call_leave();
        if (!st->handle) {
            err[sizeof err - 1] = '\0';
            sd_fail(e, "%s: %s (plugin %s)", st->d->d.name, err[0] ? err : "create failed",
                    st->file);
            goto fail;
        }
        p->n++;
        p->history |= st->d->history;
    }
    if (p->history && !(p->hist = malloc((size_t)info->max_history * sizeof *p->hist)))
        goto oom;
    return p;
oom:
    sd_fail(e, "out of memory");
fail:
    sd_sampler_destroy(p);
    return NULL;
}

int sd_sampler_allows_drafter(const sd_sampler_set *s, const char *spec, const char *const *kv,
                              int n_kv, const sd_engine_info *info, sd_err *e) {
    const sd_plugin *pl[SD_MAX_STAGES];
    int n, bad;
    sd_sampler_value values[SD_MAX_STAGES][SD_SAMPLER_MAX_PARAMS];
    if (sd_chain_resolve(s, spec, pl, &n, e) ||
        sd_chain_parse_args(pl, n, kv, n_kv, values, &bad, e))
        return -1;
    sd_engine_info drafter = *info;
    drafter.role = SD_ROLE_DRAFTER;
    for (int i = 0; i < n; i++) {
        char err[256] = "";
        void *h = sd_stage_create(&pl[i]->d, &drafter, values[i], err, sizeof err);
        if (!h) {
            err[sizeof err - 1] = '\0';
            sd_fail(e, "sampler chain '%s': stage '%s' refuses the drafter role: %s (plugin %s); "
                       "strategies that draft with the chain (spec, draft) cannot use it",
                    spec, pl[i]->d.d.name, err[0] ? err : "create failed", pl[i]->file);
            return 0;
        }
        pl[i]->d.d.destroy(h);
    }
    return 1;
}

void sd_sampler_destroy(sd_sampler *p) {
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        sd_call_enter(p->st[i].d->d.name, p->st[i].file, "destroy");
        p->st[i].d->d.destroy(p->st[i].handle);
        sd_call_leave();
    }
    for (int i = 0; i < SD_MAX_STAGES; i++)
        for (int j = 0; j < SD_SAMPLER_MAX_PARAMS; j++)
            free(p->st[i].strings[j]);
    sd_row_free(&p->row[0]);
    sd_row_free(&p->row[1]);
    free(p->catchup);
    free(p->hist);
    free(p);
}

static const stage *final_stage(const sd_sampler *p) {
    return &p->st[p->n - 1];
}

const char *sd_sampler_name(const sd_sampler *p) {
    return final_stage(p)->d->d.name;
}

int sd_sampler_is_greedy(const sd_sampler *p) {
    return (final_stage(p)->d->d.flags & SD_SAMPLER_FLAG_ARGMAX) ? 1 : 0;
}

int sd_sampler_n_stages(const sd_sampler *p) {
    return p->n;
}

int sd_sampler_keeps_history(const sd_sampler *p) {
    return p->history;
}

int sd_sampler_describe(const sd_sampler *p, char *buf, size_t cap) {
    char tmp[SD_ERRLEN] = "";
    size_t used = 0;
    for (int s = 0; s < p->n; s++) {
        const stage_def *d = p->st[s].d;
        sd_appendf(tmp, sizeof tmp, &used, "%s%s(", s ? "," : "", d->d.name);
        for (int i = 0; i < d->d.n_params; i++) {
            const sd_sampler_param *q = &d->d.params[i];
            if (q->type == SD_SAMPLER_STRING)
                sd_appendf(tmp, sizeof tmp, &used, "%s%s=\"%s\"", i ? ", " : "", q->name,
                           p->st[s].values[i].s);
            else if (q->type == SD_SAMPLER_INT)
                sd_appendf(tmp, sizeof tmp, &used, "%s%s=%" PRId64, i ? ", " : "", q->name,
                        p->st[s].values[i].i);
            else
                sd_appendf(tmp, sizeof tmp, &used, "%s%s=%.15g", i ? ", " : "", q->name,
                        p->st[s].values[i].f);
        }
        sd_appendf(tmp, sizeof tmp, &used, ")");
    }
    return snprintf(buf, cap, "%s", tmp);
}

/* One row through the chain at the current history into out[n_vocab]:
 * each stage's output feeds the next; a sampling stage before the last
 * keeps the logits of its support; an argmax stage is computed here. Every
 * plugin writes into a guarded row (row_guard.h), checked after the call;
 * the final row is then copied to out. */
static int run_row(sd_sampler *p, const float *logits, float *out, int n_vocab, sd_err *e) {
    const float *in = logits;
    char why[160];
    for (int i = 0; i < p->n; i++) {
        const stage *st = &p->st[i];
        const stage_def *d = st->d;
        int final = i == p->n - 1;
        if (d->d.flags & SD_SAMPLER_FLAG_ARGMAX) {
            float *dst = final ? out : p->row[i & 1].p;
            memset(dst, 0, (size_t)n_vocab * sizeof *dst);
            dst[sd_first_max(in, n_vocab)] = 1.0f;
            in = dst;
            continue;
        }
        float *dst = p->row[i & 1].p;
        sd_row_arm(dst, n_vocab);
        sd_call_enter(d->d.name, st->file, "process");
        int rc = d->d.process(st->handle, in, dst, n_vocab);
        sd_call_leave();
        int past = sd_row_overrun(dst, n_vocab);
        if (past >= 0)
            return sd_fail(e, "%s: process wrote past the end of its row of %d values (value %d "
                              "after the end changed) (plugin %s)",
                           d->d.name, n_vocab, past, st->file);
        if (rc)
            return sd_fail(e, "%s: process failed: plugin %s returned an error on 1 row(s) of %d",
                           d->d.name, st->file, n_vocab);
        if (sd_check_stage_output(d, dst, n_vocab, why, sizeof why))
            return sd_fail(e, "%s: process returned an invalid %s: %s (plugin %s)", d->d.name,
                           d->d.kind == SD_STAGE_LOGITS ? "logits row" : "distribution", why,
                           st->file);
        if (!final && d->d.kind == SD_STAGE_SAMPLE)
            for (int j = 0; j < n_vocab; j++)
                dst[j] = dst[j] > 0 ? in[j] : -INFINITY;
        if (final)
            memcpy(out, dst, (size_t)n_vocab * sizeof *out);
        in = dst;
    }
    return 0;
}

static int check_shape(const sd_sampler *p, int n_rows, int n_vocab, sd_err *e) {
    if (n_rows < 1 || n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad shape %d x %d (n_vocab must be in [1, %d])", sd_sampler_name(p),
                       n_rows, n_vocab, p->max_vocab);
    return 0;
}

int sd_sampler_probs(sd_sampler *p, const float *logits, float *probs, int n_rows,
                     int n_vocab, sd_err *e) {
    if (check_shape(p, n_rows, n_vocab, e))
        return -1;
    for (int r = 0; r < n_rows; r++)
        if (run_row(p, logits + (size_t)r * n_vocab, probs + (size_t)r * n_vocab, n_vocab, e))
            return -1;
    p->last = p->n_hist;
    return 0;
}

int sd_sampler_sample(sd_sampler *p, const float *probs, int n_vocab, sd_rng *r,
                      int32_t *id, sd_err *e) {
    const stage *st = final_stage(p);
    const stage_def *d = st->d;
    if (n_vocab < 1 || n_vocab > p->max_vocab)
        return sd_fail(e, "%s: bad n_vocab %d (must be in [1, %d])", d->d.name, n_vocab,
                       p->max_vocab);
    int32_t t;
    if (d->d.flags & SD_SAMPLER_FLAG_ARGMAX) {
        t = sd_first_max(probs, n_vocab);
    } else {
        sd_sampler_rng lr = {rng_uniform, r};
        sd_call_enter(d->d.name, st->file, "sample");
        t = d->d.sample(st->handle, probs, n_vocab, &lr);
        sd_call_leave();
    }
    if (t < 0 || t >= n_vocab)
        return sd_fail(e, "%s: sample returned %" PRId32 ", outside [0, %d) (plugin %s)",
                       d->d.name, t, n_vocab, st->file);
    /* A token the distribution excludes would be emitted silently, and in
     * speculative decoding break the rejection sampling's exactness. */
    if (!(probs[t] > 0))
        return sd_fail(e, "%s: sample returned token %" PRId32 ", which has probability 0 (plugin %s)",
                       d->d.name, t, st->file);
    *id = t;
    return 0;
}

/* ---------------------------------------------------------------------------
 * History
 * ------------------------------------------------------------------------ */

/* A stage's history functions under the call guard. */
static int stage_reset(const stage *st, const int32_t *prompt, int n) {
    sd_call_enter(st->d->d.name, st->file, "reset");
    int rc = st->d->d.reset(st->handle, prompt, n);
    sd_call_leave();
    return rc;
}

static int stage_accept(const stage *st, int32_t token) {
    sd_call_enter(st->d->d.name, st->file, "accept");
    int rc = st->d->d.accept(st->handle, token);
    sd_call_leave();
    return rc;
}

static int stage_rollback(const stage *st, int n) {
    sd_call_enter(st->d->d.name, st->file, "rollback");
    int rc = st->d->d.rollback(st->handle, n);
    sd_call_leave();
    return rc;
}

int sd_sampler_reset(sd_sampler *p, const int32_t *prompt, int n, sd_err *e) {
    p->last = -1;
    if (!p->history)
        return 0;
    if (n < 0 || n > p->max_history)
        return sd_fail(e, "%s: prompt of %d tokens is longer than the history (%d)",
                       sd_sampler_name(p), n, p->max_history);
    memcpy(p->hist, prompt, (size_t)n * sizeof *p->hist);
    p->n_hist = p->n_prompt = n;
    for (int i = 0; i < p->n; i++)
        if (p->st[i].d->history && stage_reset(&p->st[i], prompt, n))
            return sd_fail(e, "%s: reset failed (plugin %s)", p->st[i].d->d.name, p->st[i].file);
    return 0;
}

int sd_sampler_need(sd_sampler *p, const int32_t *seq, int pos, sd_err *e) {
    if (!p->history)
        return pos;
    int l = 0, lim = p->n_hist < pos ? p->n_hist : pos;
    while (l < lim && p->hist[l] == seq[l])
        l++;
    if (l < p->n_prompt)
        return sd_fail(e, "%s: the sequence differs from the prompt at position %d (reset the "
                          "sampler for a new generation)", sd_sampler_name(p), l);
    if (pos > p->max_history)
        return sd_fail(e, "%s: position %d is past the sampler's history (%d tokens)",
                       sd_sampler_name(p), pos, p->max_history);
    if (l < p->n_hist) {
        for (int i = 0; i < p->n; i++)
            if (p->st[i].d->history && stage_rollback(&p->st[i], p->n_hist - l))
                return sd_fail(e, "%s: rollback(%d) failed (plugin %s)", p->st[i].d->d.name,
                               p->n_hist - l, p->st[i].file);
        p->n_hist = l;
        p->last = -1;
    }
    return p->last == l && l < pos ? l + 1 : l;
}

int sd_sampler_dist(sd_sampler *p, const int32_t *seq, int pos, const float *rows, int first,
                    float *probs, int n_vocab, sd_err *e) {
    if (check_shape(p, 1, n_vocab, e))
        return -1;
    if (!p->history)
        return probs ? sd_sampler_probs(p, rows + (size_t)(pos - first) * n_vocab, probs, 1,
                                        n_vocab, e)
                     : 0;
    int need = sd_sampler_need(p, seq, pos, e);
    if (need < 0)
        return -1;
    if (need < first)
        return sd_fail(e, "%s: the history needs the row of position %d, the rows given start "
                          "at %d", sd_sampler_name(p), need, first);
    for (int j = p->n_hist; j < pos; j++) {
        if (j != p->last &&
            run_row(p, rows + (size_t)(j - first) * n_vocab, p->catchup, n_vocab, e))
            return -1;
        for (int i = 0; i < p->n; i++)
            if (p->st[i].d->history && stage_accept(&p->st[i], seq[j]))
                return sd_fail(e, "%s: accept(%" PRId32 ") failed (plugin %s)", p->st[i].d->d.name,
                               seq[j], p->st[i].file);
        p->hist[p->n_hist++] = seq[j];
        p->last = -1;
    }
    if (!probs)
        return 0;
    if (run_row(p, rows + (size_t)(pos - first) * n_vocab, probs, n_vocab, e))
        return -1;
    p->last = pos;
    return 0;
}
