/* The hybrid drafter's renames (engine/decode/renames.c) on hand-made
 * token sequences: a copy whose span 10 became 20 21 is learnt as a rename
 * once the output follows the source again, and from then on the store,
 * seen through it, predicts the new span and the copy after it. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/decode/renames.h"

#define MIN_CTX 3

static sd_ngram *store_of(const int32_t *seq, int n) {
    sd_err e;
    sd_ngram *s = sd_ngram_create(SD_NGRAM_MULTI, 8, 64, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, n, &e), 0, "%s", e.msg);
    return s;
}

/* Runs the output seq[prompt..n) through learn as speculative.c does
 * (every miss a candidate) and observes it. */
static void learn_all(sd_renames *r, sd_ngram *s, const int32_t *seq, int prompt, int n) {
    sd_err e;
    for (int i = prompt; i < n; i++) {
        int32_t x = -1;
        const int known = sd_renames_predict(r, s, seq, i, MIN_CTX, &x);
        sd_renames_learn(r, s, seq, i, MIN_CTX, known, x);
        cr_assert_eq(sd_ngram_observe(s, seq, i, seq[i], &e), 0, "%s", e.msg);
    }
}

/* source: 1 2 3 10 4 5 6 | 7 8 9 10 11 12 13 (then copied with 10 -> 20 21) */
static const int32_t source[] = {1, 2, 3, 10, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 99};
#define N_SOURCE 15

Test(renames, a_changed_span_followed_by_the_source_is_learnt) {
    int32_t seq[64];
    memcpy(seq, source, sizeof source);
    const int32_t out[] = {1, 2, 3, 20, 21, 4, 5, 6, 7};
    memcpy(seq + N_SOURCE, out, sizeof out);
    sd_ngram *s = store_of(seq, N_SOURCE);
    sd_renames r;
    sd_renames_init(&r);
    learn_all(&r, s, seq, N_SOURCE, N_SOURCE + 9);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.r[0].n_from, 1);
    cr_assert_eq(r.r[0].from[0], 10);
    cr_assert_eq(r.r[0].n_to, 2);
    cr_assert(r.r[0].to[0] == 20 && r.r[0].to[1] == 21);
    /* the next occurrence: after 7 8 9 the store says 10, the rename 20 21,
     * and after 20 21 the source's 11 */
    int n = N_SOURCE + 9;
    seq[n++] = 8;
    seq[n++] = 9;
    int32_t x;
    cr_assert(sd_renames_predict(&r, s, seq, n, MIN_CTX, &x));
    cr_assert_eq(x, 20);
    seq[n++] = 20;
    cr_assert(sd_renames_predict(&r, s, seq, n, MIN_CTX, &x));
    cr_assert_eq(x, 21, "inside the new span: its next token");
    seq[n++] = 21;
    cr_assert(sd_renames_predict(&r, s, seq, n, MIN_CTX, &x));
    cr_assert_eq(x, 11, "after the new span: the copy goes on as the source did");
    sd_ngram_free(s);
}

Test(renames, an_insertion_and_a_seen_continuation_are_no_renames) {
    int32_t seq[64];
    memcpy(seq, source, sizeof source);
    /* 1 2 3 10 | inserted 30 31 | 4 5 6: one side empty */
    const int32_t out[] = {1, 2, 3, 10, 30, 31, 4, 5, 6, 7};
    memcpy(seq + N_SOURCE, out, sizeof out);
    sd_ngram *s = store_of(seq, N_SOURCE);
    sd_renames r;
    sd_renames_init(&r);
    learn_all(&r, s, seq, N_SOURCE, N_SOURCE + 10);
    cr_assert_eq(r.n, 0, "an insertion is found again by the store, not renamed");
    sd_ngram_free(s);
}

Test(renames, nothing_learnt_predicts_as_the_store) {
    sd_ngram *s = store_of(source, N_SOURCE);
    sd_renames r;
    sd_renames_init(&r);
    const int32_t h[] = {7, 8, 9};
    int32_t x;
    cr_assert(sd_renames_predict(&r, s, h, 3, MIN_CTX, &x));
    cr_assert_eq(x, 10);
    cr_assert_eq(sd_renames_predict(&r, s, h, 2, MIN_CTX, &x), 0, "a context shorter than min_ctx");
    sd_ngram_free(s);
}

/* Before a changed span is learnt (the output has not followed the source
 * again for long enough), the store does not know the contexts holding
 * it; the open miss's source goes on in their place: after one changed
 * token the source's next, after a longer new span the source from where
 * the output follows it (an old span as long as the new one while nothing
 * tells them apart). */
Test(renames, an_open_miss_predicts_the_source_after_it) {
    int32_t seq[64];
    memcpy(seq, source, sizeof source);
    const int32_t out[] = {1, 2, 3, 20};
    memcpy(seq + N_SOURCE, out, sizeof out);
    sd_ngram *s = store_of(seq, N_SOURCE);
    sd_renames r;
    sd_renames_init(&r);
    learn_all(&r, s, seq, N_SOURCE, N_SOURCE + 4);
    cr_assert_eq(r.miss, N_SOURCE + 3, "the miss at 20 is open");
    int n = N_SOURCE + 4;
    int32_t x;
    cr_assert(sd_renames_predict(&r, s, seq, n, MIN_CTX, &x));
    cr_assert_eq(x, 4, "one token for one: the source after 10");
    seq[n] = 4;
    cr_assert(sd_renames_predict(&r, s, seq, n + 1, MIN_CTX, &x));
    cr_assert_eq(x, 5);
    seq[n] = 21;
    cr_assert(sd_renames_predict(&r, s, seq, n + 1, MIN_CTX, &x));
    cr_assert_eq(x, 5, "two new tokens: first taken for two old ones (10 4)");
    seq[n + 1] = 4;
    cr_assert(sd_renames_predict(&r, s, seq, n + 2, MIN_CTX, &x));
    cr_assert_eq(x, 5, "then 4 realigns them: 10 became 20 21");
    sd_renames_init(&r);
    cr_assert_eq(sd_renames_predict(&r, s, seq, n + 1, MIN_CTX, &x), 0, "no miss open: unknown");
    sd_ngram_free(s);
}

/* A changed number keeps its digits' count: 3 0 0 0 -> 4 5 0 0 is learnt
 * as 3 0 -> 4 5 (a span as long as the new one), not as 3 -> 4 5, so the
 * next occurrence is predicted with its two zeros, not three. */
Test(renames, a_changed_span_of_equal_length_is_preferred) {
    /* source: 7 8 9 3 0 0 0 11 12 13 | 7 8 9 3 0 0 0 11 */
    static const int32_t src[] = {7, 8, 9, 3, 0, 0, 0, 11, 12, 13, 99};
    int32_t seq[64];
    memcpy(seq, src, sizeof src);
    int n = (int)(sizeof src / sizeof src[0]);
    const int prompt = n;
    const int32_t out[] = {7, 8, 9, 4, 5, 0, 0, 11, 12};
    memcpy(seq + n, out, sizeof out);
    n += (int)(sizeof out / sizeof out[0]);
    sd_ngram *s = store_of(seq, prompt);
    sd_renames r;
    sd_renames_init(&r);
    learn_all(&r, s, seq, prompt, n);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.r[0].n_from, 2, "3 0 -> 4 5, not 3 -> 4 5");
    cr_assert_eq(r.r[0].n_to, 2);
    const int32_t again[] = {7, 8, 9, 4, 5, 0, 0};
    memcpy(seq + n, again, sizeof again);
    int32_t x;
    cr_assert(sd_renames_predict(&r, s, seq, n + 7, MIN_CTX, &x));
    cr_assert_eq(x, 11, "after 4 5 0 0 the source's 11");
    sd_ngram_free(s);
}
