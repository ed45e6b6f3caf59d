/* Decoding ids to text, as llama.cpp's token_to_piece does it (without
 * special tokens): llama-kind pieces turn U+2581 into spaces and <0xNN>
 * tokens into their byte; gpt2-kind pieces map byte-level code points back
 * to bytes; user-defined tokens are their text; control, unused and
 * undefined tokens are nothing; the unknown token of a llama vocabulary is
 * U+2585 as in llama.cpp.
 *
 * The bytes then pass through a UTF-8 assembler: a sequence that is valid
 * so far but incomplete is held in the state until later bytes complete it;
 * bytes that cannot be part of valid UTF-8 become U+FFFD, so the output is
 * always valid UTF-8. */
#include "engine/text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct wbuf {
    char *out;
    size_t cap, n;
    int overflow;
    int raw; /* the token's own bytes: no UTF-8 assembly, no dummy-prefix strip */
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        w->overflow = 1;
        return;
    }
    memcpy(w->out + w->n, p, n);
    w->n += n;
}

static const char replacement[3] = {'\xEF', '\xBF', '\xBD'};

static int seq_len(unsigned char c) {
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* May c follow the n bytes held (lead byte lead)? */
static int continues(unsigned char lead, int n, unsigned char c) {
    if (n == 1) {
        if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
        if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
        if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
        if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
    }
    return c >= 0x80 && c <= 0xBF;
}

static void feed(sd_detok *s, wbuf *w, unsigned char c) {
    if (s->n_pending) {
        if (continues(s->pending[0], s->n_pending, c)) {
            s->pending[s->n_pending++] = c;
            if (s->n_pending == seq_len(s->pending[0])) {
                put(w, s->pending, (size_t)s->n_pending);
                s->n_pending = 0;
            }
            return;
        }
        put(w, replacement, sizeof replacement);
        s->n_pending = 0;
    }
    if (c < 0x80) {
        put(w, &c, 1);
    } else if (seq_len(c)) {
        s->pending[0] = c;
        s->n_pending = 1;
    } else {
        put(w, replacement, sizeof replacement);
    }
}

/* The llama-kind dummy-prefix space goes with the first byte decoded. */
static void feed_first(const sd_tokenizer *t, sd_detok *s, wbuf *w, unsigned char c) {
    if (w->raw) {
        put(w, &c, 1);
        return;
    }
    if (s->strip_space) {
        s->strip_space = 0;
        if (c == ' ' && t->kind == SD_TOK_LLAMA) return;
    }
    feed(s, w, c);
}

static void feed_raw(const sd_tokenizer *t, sd_detok *s, wbuf *w, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) feed_first(t, s, w, (unsigned char)p[i]);
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static void decode_llama(const sd_tokenizer *t, sd_detok *s, wbuf *w, int type, gguf_str p) {
    switch (type) {
    case SD_TT_NORMAL:
        for (uint64_t i = 0; i < p.len; i++) {
            if (i + 2 < p.len && !memcmp(p.s + i, "\xE2\x96\x81", 3)) {
                feed_first(t, s, w, ' ');
                i += 2;
            } else {
                feed_first(t, s, w, (unsigned char)p.s[i]);
            }
        }
        break;
    case SD_TT_BYTE: {
        int hi = p.len == 6 ? hex_val(p.s[3]) : -1, lo = p.len == 6 ? hex_val(p.s[4]) : -1;
        if (hi >= 0 && lo >= 0 && !memcmp(p.s, "<0x", 3) && p.s[5] == '>')
            feed_first(t, s, w, (unsigned char)(hi * 16 + lo));
        else
            feed_raw(t, s, w, p.s, p.len);
        break;
    }
    case SD_TT_UNKNOWN: feed_raw(t, s, w, "\xE2\x96\x85", 3); break;
    case SD_TT_USER_DEFINED: feed_raw(t, s, w, p.s, p.len); break;
    default: break;
    }
}

/* Decodes one UTF-8 code point at p (n bytes left); returns its length, or
 * 0 when the bytes are not valid UTF-8. */
static int utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
    int len = seq_len(p[0]);
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (!len || (size_t)len > n) return 0;
    uint32_t v = p[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if (!continues(p[0], i, p[i])) return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    *cp = v;
    return len;
}

static void decode_gpt2(const sd_tokenizer *t, sd_detok *s, wbuf *w, int type, gguf_str p) {
    if (type == SD_TT_USER_DEFINED) {
        feed_raw(t, s, w, p.s, p.len);
        return;
    }
    if (type != SD_TT_NORMAL) return;
    const unsigned char *u = (const unsigned char *)p.s;
    for (uint64_t i = 0; i < p.len;) {
        uint32_t cp;
        int len = utf8_decode(u + i, p.len - i, &cp);
        int b = len ? sd_bpe_cp_to_byte(cp) : -1;
        if (b >= 0) {
            feed_first(t, s, w, (unsigned char)b);
        } else {
            int n = len ? len : 1;
            feed_raw(t, s, w, p.s + i, (size_t)n);
            len = n;
        }
        i += (uint64_t)len;
    }
}

int sd_detok_push(const sd_tokenizer *t, sd_detok *st, int32_t id, char *out, size_t cap,
                  sd_err *e) {
    if (id < 0 || id >= t->n_vocab)
        return sd_fail(e, "token id %d is out of range (vocabulary of %d)", (int)id, t->n_vocab);
    sd_detok s = *st;
    wbuf w = {out, cap, 0, 0, 0};
    if (t->kind == SD_TOK_LLAMA) decode_llama(t, &s, &w, t->types[id], t->tokens[id]);
    else decode_gpt2(t, &s, &w, t->types[id], t->tokens[id]);
    if (w.overflow)
        return sd_fail(e, "decoding token %d needs more than %zu bytes of output", (int)id, cap);
    if (w.n < cap) out[w.n] = 0;
    *st = s;
    return (int)w.n;
}

int sd_detok_flush(sd_detok *st, char *out, size_t cap) {
    size_t n = 0;
    if (st->n_pending) {
        if (cap < sizeof replacement) return -1;
        memcpy(out, replacement, sizeof replacement);
        n = sizeof replacement;
        st->n_pending = 0;
    }
    if (n < cap) out[n] = 0;
    return (int)n;
}

int sd_detokenize(const sd_tokenizer *t, const int32_t *ids, int n, int strip_space,
                  char **out, sd_err *e) {
    sd_detok st = {{0}, 0, strip_space};
    char *buf = NULL;
    size_t cap = 0, len = 0;
    *out = NULL;
    for (int i = 0; i <= n; i++) {
        /* Worst case per piece: every byte a U+FFFD, plus the held bytes. */
        uint64_t piece = i < n && ids[i] >= 0 && ids[i] < t->n_vocab ? t->tokens[ids[i]].len : 0;
        size_t need = len + 3 * (size_t)piece + 3 * sizeof st.pending + 1;
        if (sd_grow((void **)&buf, &cap, need, 1)) {
            free(buf);
            return sd_fail(e, "out of memory");
        }
        int k = i < n ? sd_detok_push(t, &st, ids[i], buf + len, cap - len, e)
                      : sd_detok_flush(&st, buf + len, cap - len);
        if (k < 0) {
            free(buf);
            return -1;
        }
        len += (size_t)k;
    }
    buf[len] = 0;
    *out = buf;
    return 0;
}

/* Every token's bytes back to back, the table of sd_tokenizer_bytes. A
 * token's bytes are never longer than its string, except the unknown
 * token's U+2585 (3 bytes), hence the room of at least 3 per token. */
int sd_detok_table_build(sd_tokenizer *t, sd_err *e) {
    size_t cap = 0;
    for (int i = 0; i < t->n_vocab; i++)
        cap += t->tokens[i].len > 3 ? (size_t)t->tokens[i].len : 3;
    if (!(t->bytes = malloc(cap ? cap : 1)) ||
        !(t->bytes_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->bytes_off)))
        return sd_fail(e, "out of memory");
    sd_detok st = {{0}, 0, 0};
    wbuf w = {t->bytes, cap, 0, 0, 1};
    for (int i = 0; i < t->n_vocab; i++) {
        t->bytes_off[i] = w.n;
        if (t->kind == SD_TOK_LLAMA) decode_llama(t, &st, &w, t->types[i], t->tokens[i]);
        else decode_gpt2(t, &st, &w, t->types[i], t->tokens[i]);
    }
    t->bytes_off[t->n_vocab] = w.n;
    return 0;
}

const char *sd_tokenizer_bytes(const void *tok, int32_t id, size_t *len) {
    const sd_tokenizer *t = tok;
    if (!t || id < 0 || id >= t->n_vocab) return NULL;
    *len = t->bytes_off[id + 1] - t->bytes_off[id];
    return t->bytes + t->bytes_off[id];
}
