/* The token bytes sampler stages see as sd_engine_info's piece
 * (sd_tokenizer_bytes) and the stored strings of vocab_text
 * (sd_tokenizer_text), on a SentencePiece vocabulary (stories260K) and a
 * byte-level BPE one (SmolLM2; skipped when models/ lacks it):
 *   - the stored forms of the space, the newline and byte tokens become
 *     their bytes, control tokens are empty;
 *   - a byte-level token holding part of a UTF-8 sequence gives that byte
 *     alone (the decoder would hold it back);
 *   - the bytes of a tokenized text, put together, are the text (after the
 *     SentencePiece dummy-prefix space). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/format/gguf.h"
#include "engine/text/tokenizer.h"

#define STORIES "tests/data/models/stories260K.gguf"
#define SMOLLM2 "models/SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct loaded {
    gguf_file *f;
    sd_tokenizer *t;
} loaded;

static loaded load(const char *path) {
    sd_err e = {""};
    loaded l = {gguf_open(path, &e), NULL};
    cr_assert(l.f, "%s: %s", path, e.msg);
    l.t = sd_tokenizer_load(l.f, &e);
    cr_assert(l.t, "%s: %s", path, e.msg);
    return l;
}

static void unload(loaded *l) {
    sd_tokenizer_free(l->t);
    gguf_close(l->f);
}

static int32_t id_of(const sd_tokenizer *t, const char *stored) {
    int32_t id = sd_tokenizer_find(t, stored, strlen(stored));
    cr_assert_geq(id, 0, "no token \"%s\" in the vocabulary", stored);
    return id;
}

static void expect_bytes(const sd_tokenizer *t, const char *stored, const char *want, size_t n) {
    int32_t id = id_of(t, stored);
    size_t len = 99, tlen = 99;
    const char *b = sd_tokenizer_bytes(t, id, &len);
    cr_assert(b, "%s", stored);
    cr_assert(len == n && !memcmp(b, want, n), "\"%s\": %zu bytes \"%.*s\"", stored, len,
              (int)len, b);
    const char *s = sd_tokenizer_text(t, id, &tlen);
    cr_assert(tlen == strlen(stored) && !memcmp(s, stored, tlen), "text of \"%s\"", stored);
}

/* The bytes of text's tokens put together equal prefix + text. */
static void expect_round_trip(const sd_tokenizer *t, const char *text, const char *prefix) {
    sd_err e = {""};
    int32_t *ids;
    int n;
    cr_assert_eq(sd_tokenize(t, text, strlen(text), 0, 0, &ids, &n, &e), 0, "%s", e.msg);
    char got[256];
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *b = sd_tokenizer_bytes(t, ids[i], &len);
        cr_assert(b && k + len < sizeof got);
        memcpy(got + k, b, len);
        k += len;
    }
    got[k] = '\0';
    free(ids);
    char want[256];
    snprintf(want, sizeof want, "%s%s", prefix, text);
    cr_assert_str_eq(got, want);
}

Test(token_bytes, sentencepiece) {
    loaded l = load(STORIES);
    expect_bytes(l.t, "<0x0A>", "\n", 1);
    expect_bytes(l.t, "\xe2\x96\x81the", " the", 4);
    size_t len = 99;
    cr_assert_not_null(sd_tokenizer_bytes(l.t, sd_tokenizer_bos(l.t), &len));
    cr_assert_eq(len, 0, "BOS is a control token: no bytes");
    cr_assert_null(sd_tokenizer_bytes(l.t, -1, &len));
    cr_assert_null(sd_tokenizer_bytes(l.t, sd_tokenizer_n_vocab(l.t), &len));
    cr_assert_null(sd_tokenizer_text(l.t, sd_tokenizer_n_vocab(l.t), &len));
    expect_round_trip(l.t, "Once upon a time,\nthere was a cat.", " ");
    unload(&l);
}

Test(token_bytes, byte_level_bpe) {
    if (access(SMOLLM2, R_OK))
        cr_skip_test("%s is absent", SMOLLM2);
    loaded l = load(SMOLLM2);
    expect_bytes(l.t, "\xc4\x8a", "\n", 1);
    expect_bytes(l.t, "\xc4\xa0with", " with", 5);
    expect_bytes(l.t, "\xc3\x83", "\xc3", 1); /* U+00C3 stands for the byte 0xC3 */
    size_t len = 99;
    cr_assert_not_null(sd_tokenizer_bytes(l.t, id_of(l.t, "<|im_end|>"), &len));
    cr_assert_eq(len, 0, "<|im_end|> is a control token: no bytes");
    expect_round_trip(l.t, "Hello,\n with caf\xc3\xa9 and \xe2\x82\xac 12.", "");
    unload(&l);
}
