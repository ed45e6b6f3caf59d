#include "engine/decode/renames.h"

#include <string.h>

/* The store's contexts are at most SD_NGRAM_MAX_N - 1 tokens; a view holds
 * that many translated tokens and the span checks appended after them. */
#define VIEW_CTX (SD_NGRAM_MAX_N - 1)
#define VIEW_CAP (VIEW_CTX + 2 * SD_RENAME_SPAN + SD_RENAME_RESYNC)

void sd_renames_init(sd_renames *r) {
    memset(r, 0, sizeof *r);
    r->miss = -1;
}

static int ends_with(const int32_t *seq, int at, const int32_t *span, int n) {
    return n <= at && !memcmp(seq + at - n, span, (size_t)n * sizeof *span);
}

/* The tail of seq[0..at) translated back (each `to` span ending at a
 * position replaced by its `from` span, the longest `to` first), at most
 * VIEW_CTX tokens, into buf[0..return). */
static int view(const sd_renames *r, const int32_t *seq, int at, int32_t *buf) {
    int32_t rev[VIEW_CTX + SD_RENAME_SPAN];
    int n = 0, k = at;
    while (n < VIEW_CTX && k > 0) {
        const sd_rename *best = NULL;
        for (int j = 0; j < r->n; j++)
            if (ends_with(seq, k, r->r[j].to, r->r[j].n_to) && (!best || r->r[j].n_to > best->n_to))
                best = &r->r[j];
        if (best) {
            for (int t = best->n_from - 1; t >= 0; t--) rev[n++] = best->from[t];
            k -= best->n_to;
        } else {
            rev[n++] = seq[--k];
        }
    }
    if (n > VIEW_CTX) n = VIEW_CTX;
    for (int t = 0; t < n; t++) buf[t] = rev[n - 1 - t];
    return n;
}

static int lookup(const sd_ngram *store, const int32_t *buf, int n, int min_ctx, int32_t *x) {
    int level = 0;
    return sd_ngram_predict(store, buf, n, 0, x, &level) && level >= min_ctx;
}

/* Whether the store continues buf[0..n) with span[0..len) (buf has room
 * for len more tokens). */
static int continues(const sd_ngram *store, int32_t *buf, int n, int min_ctx, const int32_t *span,
                     int len) {
    for (int t = 0; t < len; t++) {
        int32_t x;
        if (!lookup(store, buf, n, min_ctx, &x) || x != span[t]) return 0;
        buf[n++] = x;
    }
    return 1;
}

/* While a miss is open and the store does not know the context (the
 * changed span is in it), the source after the miss: the output took a
 * new span of t tokens where the source had one of b, and what it took
 * since matches the source after those b; the longest such match (the
 * shortest new span) wins, then an old span as long as the new one (see
 * resync), then the shortest, so right after the changed token the guess
 * is a substitution of one token for one. */
static int source_after_miss(const sd_renames *r, const int32_t *seq, int at, int32_t *x) {
    const int m = r->miss, a = at - m;
    if (m < 0 || a < 1) return 0;
    for (int t = 1; t <= a && t <= SD_RENAME_SPAN; t++)
        for (int k = 0; k <= SD_RENAME_SPAN; k++) {
            const int b = k ? k : t;
            if ((k && k == t) || b + a - t >= r->n_src) continue;
            if (!memcmp(seq + m + t, r->src + b, (size_t)(a - t) * sizeof *seq)) {
                *x = r->src[b + a - t];
                return 1;
            }
        }
    return 0;
}

int sd_renames_predict(const sd_renames *r, const sd_ngram *store, const int32_t *seq, int at,
                       int min_ctx, int32_t *x) {
    int32_t buf[VIEW_CAP];
    /* inside a `to` span: its next token, where the source had the `from` span */
    for (int j = 0; j < r->n; j++) {
        const sd_rename *w = &r->r[j];
        for (int p = w->n_to - 1; p >= 1; p--) {
            if (!ends_with(seq, at, w->to, p)) continue;
            const int n = view(r, seq, at - p, buf);
            if (continues(store, buf, n, min_ctx, w->from, w->n_from)) {
                *x = w->to[p];
                return 1;
            }
        }
    }
    const int n = view(r, seq, at, buf);
    if (!lookup(store, buf, n, min_ctx, x)) return source_after_miss(r, seq, at, x);
    const sd_rename *best = NULL;
    for (int j = 0; j < r->n; j++) {
        const sd_rename *w = &r->r[j];
        if (w->from[0] != *x || (best && w->n_from <= best->n_from)) continue;
        int32_t tmp[VIEW_CAP];
        memcpy(tmp, buf, (size_t)n * sizeof *buf);
        if (continues(store, tmp, n, min_ctx, w->from, w->n_from)) best = w;
    }
    if (best) *x = best->to[0];
    return 1;
}

static void add(sd_renames *r, const int32_t *from, int n_from, const int32_t *to, int n_to) {
    for (int j = 0; j < r->n; j++)
        if (r->r[j].n_from == n_from && r->r[j].n_to == n_to &&
            !memcmp(r->r[j].from, from, (size_t)n_from * sizeof *from) &&
            !memcmp(r->r[j].to, to, (size_t)n_to * sizeof *to))
            return;
    sd_rename *w = &r->r[r->next];
    memcpy(w->from, from, (size_t)n_from * sizeof *from);
    memcpy(w->to, to, (size_t)n_to * sizeof *to);
    w->n_from = n_from;
    w->n_to = n_to;
    r->next = (r->next + 1) % SD_RENAMES_MAX;
    if (r->n < SD_RENAMES_MAX) r->n++;
}

/* With seq[i] the last token of a resync window: the `to` span of a = i -
 * m - RESYNC + 1 tokens, then RESYNC tokens matching the source after a
 * `from` span of b tokens: b = a first (a changed number keeps its digits'
 * count, 3000 -> 4500 is 3 0 -> 4 5, not 3 -> 4 5), then the shortest b.
 * 1 when a rename closed the miss. */
static int resync(sd_renames *r, const int32_t *seq, int i) {
    const int m = r->miss, a = i - m - SD_RENAME_RESYNC + 1;
    if (a < 1) return 0;
    for (int k = 0; k <= SD_RENAME_SPAN; k++) {
        const int b = k ? k : a;
        if ((k && k == a) || b > SD_RENAME_SPAN || b + SD_RENAME_RESYNC > r->n_src) continue;
        /* spans ending alike are an insertion or a removal before a copy */
        if (memcmp(seq + m + a, r->src + b, SD_RENAME_RESYNC * sizeof *seq) ||
            seq[m + a - 1] == r->src[b - 1])
            continue;
        add(r, r->src, b, seq + m, a);
        return 1;
    }
    return 0;
}

void sd_renames_learn(sd_renames *r, const sd_ngram *store, const int32_t *seq, int i,
                      int min_ctx, int known, int32_t predicted) {
    if (r->miss >= 0) {
        if (resync(r, seq, i) || i - r->miss + 1 >= SD_RENAME_SPAN + SD_RENAME_RESYNC)
            r->miss = -1;
        return;
    }
    if (!known || predicted == seq[i]) return;
    /* the source: the store's continuation from the translated context */
    int32_t buf[VIEW_CAP];
    int n = view(r, seq, i, buf);
    r->n_src = 0;
    while (r->n_src < SD_RENAME_SPAN + SD_RENAME_RESYNC &&
           lookup(store, buf, n, min_ctx, &r->src[r->n_src]))
        buf[n++] = r->src[r->n_src++];
    /* a continuation the store has seen after this context is the store's
     * ambiguity (a copy of code repeats contexts), not a change */
    if (r->n_src >= 1 + SD_RENAME_RESYNC && !sd_ngram_seen(store, buf, view(r, seq, i, buf), min_ctx, seq[i]))
        r->miss = i;
}
