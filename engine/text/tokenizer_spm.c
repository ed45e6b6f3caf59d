/* SentencePiece BPE as llama.cpp's SPM tokenizer does it: the fragment
 * (with one dummy-prefix space when asked) has its spaces replaced by U+2581
 * and is split into UTF-8 characters; the adjacent pair whose concatenation
 * is the vocabulary token of highest score (leftmost on ties) merges, until
 * no pair is a token. A symbol left that is not a token falls back to its
 * bytes' <0xNN> tokens. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct spm_sym {
    int start, n;   /* bytes in the escaped text; n == 0 once merged away */
    int prev, next;
} spm_sym;

typedef struct spm_bigram {
    float score;
    int left, right, size;
} spm_bigram;

typedef struct spm_heap {
    spm_bigram *v;
    size_t n;
} spm_heap;

/* a comes out before b: higher score, then the leftmost pair. */
static int before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_heap *h, spm_bigram b) {
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
}

static spm_bigram heap_pop(spm_heap *h) {
    spm_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
        if (!before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int utf8_len(unsigned char c) {
    static const int len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

static void try_bigram(const sd_tokenizer *t, const char *buf, const spm_sym *sym,
                       spm_heap *h, int left, int right) {
    if (left < 0 || right < 0) return;
    int size = sym[left].n + sym[right].n;
    int32_t id = sd_tokenizer_find(t, buf + sym[left].start, (size_t)size);
    if (id < 0) return;
    heap_push(h, (spm_bigram){t->scores[id], left, right, size});
}

int sd_spm_encode(const sd_tokenizer *t, const char *text, size_t len, int add_prefix,
                  sd_ids *out, sd_err *e) {
    static const char sep[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */
    size_t cap = 3 * (len + 1);
    char *buf = malloc(cap);
    spm_sym *sym = malloc((len + 1) * sizeof *sym);
    spm_heap h = {malloc(3 * (len + 1) * sizeof *h.v), 0};
    int rc = -1;
    if (!buf || !sym || !h.v) {
        sd_fail(e, "out of memory");
        goto done;
    }
    size_t n = 0;
    if (add_prefix) {
        memcpy(buf, sep, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, sep, 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }
    int n_sym = 0;
    for (size_t off = 0; off < n;) {
        /* A lead byte takes only the continuation bytes that follow it: with
         * invalid UTF-8 (a lead byte before a space's U+2581) a symbol could
         * otherwise end inside the separator and leave its tail as extra
         * symbols, more than the len + 1 that sym and the heap are sized for. */
        size_t l = 1, want = (size_t)utf8_len((unsigned char)buf[off]);
        while (l < want && off + l < n && ((unsigned char)buf[off + l] & 0xC0) == 0x80) l++;
        sym[n_sym] = (spm_sym){(int)off, (int)l, n_sym - 1, off + l == n ? -1 : n_sym + 1};
        n_sym++;
        off += l;
    }
    for (int i = 1; i < n_sym; i++) try_bigram(t, buf, sym, &h, i - 1, i);
    while (h.n) {
        spm_bigram b = heap_pop(&h);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        try_bigram(t, buf, sym, &h, l->prev, b.left);
        try_bigram(t, buf, sym, &h, b.left, l->next);
    }
    for (int i = n_sym ? 0 : -1; i >= 0; i = sym[i].next) {
        const char *s = buf + sym[i].start;
        int32_t id = sd_tokenizer_find(t, s, (size_t)sym[i].n);
        if (id >= 0) {
            if (sd_ids_push(out, id)) {
                sd_fail(e, "out of memory");
                goto done;
            }
            continue;
        }
        for (int j = 0; j < sym[i].n; j++) {
            unsigned char c = (unsigned char)s[j];
            int32_t bt = t->byte_tok[c] >= 0 ? t->byte_tok[c] : t->unk;
            if (bt < 0) {
                sd_fail(e, "no byte token <0x%02X> and no unknown token for text outside the "
                           "vocabulary", c);
                goto done;
            }
            if (sd_ids_push(out, bt)) {
                sd_fail(e, "out of memory");
                goto done;
            }
        }
    }
    rc = 0;
done:
    free(buf);
    free(sym);
    free(h.v);
    return rc;
}
