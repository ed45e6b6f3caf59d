/* N-gram store lookups on hand-made sequences. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/decode/ngram.h"

static sd_ngram *mk(int kind, int n) {
    sd_err e;
    sd_ngram *s = sd_ngram_create(kind, n, 4, &e);
    cr_assert(s, "%s", e.msg);
    return s;
}

Test(ngram, multi_level_longest_context_wins) {
    sd_ngram *s = mk(SD_NGRAM_MULTI, 3);
    sd_err e;
    /* 1 2 3 | 5 2 4 | 5 2 4 : after "2" the bigram says 4 (twice) but
     * after "1 2" the trigram says 3 */
    int32_t seq[] = {1, 2, 3, 5, 2, 4, 5, 2, 4};
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, 9, &e), 0);
    int32_t tok;
    int level;
    int32_t h1[] = {1, 2};
    cr_assert(sd_ngram_predict(s, h1, 2, 0, &tok, &level));
    cr_assert_eq(tok, 3);
    cr_assert_eq(level, 2);
    int32_t h2[] = {9, 2};
    cr_assert(sd_ngram_predict(s, h2, 2, 0, &tok, &level));
    cr_assert_eq(tok, 4);
    cr_assert_eq(level, 1);
    int32_t h3[] = {7, 8};
    cr_assert_eq(sd_ngram_predict(s, h3, 2, 0, &tok, &level), 0);
    cr_assert(sd_ngram_predict(s, h3, 2, 1, &tok, &level));
    cr_assert_eq(level, 0);
    cr_assert_eq(tok, 2, "most frequent token overall is 2, got %d", tok);
    sd_ngram_free(s);
}

Test(ngram, ties_go_to_the_earliest_seen) {
    sd_ngram *s = mk(SD_NGRAM_MULTI, 2);
    sd_err e;
    int32_t seq[] = {7, 9, 7, 8, 7, 8, 7, 9};
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, 8, &e), 0);
    int32_t tok, h[] = {7};
    cr_assert(sd_ngram_predict(s, h, 1, 0, &tok, NULL));
    cr_assert_eq(tok, 9, "9 and 8 both follow 7 twice; 9 came first");
    int32_t more[] = {7, 8};
    cr_assert_eq(sd_ngram_observe(s, more, 1, 8, &e), 0);
    cr_assert(sd_ngram_predict(s, h, 1, 0, &tok, NULL));
    cr_assert_eq(tok, 8);
    sd_ngram_free(s);
}

Test(ngram, one_level_uses_only_full_contexts) {
    sd_ngram *s = mk(SD_NGRAM_ONE, 3);
    sd_err e;
    int32_t seq[] = {1, 2, 3, 4};
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, 4, &e), 0);
    int32_t tok;
    int32_t h1[] = {2, 3};
    cr_assert(sd_ngram_predict(s, h1, 2, 0, &tok, NULL));
    cr_assert_eq(tok, 4);
    int32_t h2[] = {9, 3};
    cr_assert_eq(sd_ngram_predict(s, h2, 2, 0, &tok, NULL), 0, "no bigram level in a one-level store");
    int32_t h3[] = {3};
    cr_assert_eq(sd_ngram_predict(s, h3, 1, 0, &tok, NULL), 0, "history shorter than N-1");
    sd_ngram_free(s);
}

Test(ngram, grows_and_resets) {
    sd_ngram *s = mk(SD_NGRAM_MULTI, 4);
    sd_err e;
    static int32_t seq[20000];
    for (int i = 0; i < 20000; i++) seq[i] = (i * 7919) % 1009;
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, 20000, &e), 0);
    int32_t tok;
    cr_assert(sd_ngram_predict(s, seq, 100, 0, &tok, NULL));
    cr_assert_eq(tok, seq[100]);
    sd_ngram_reset(s);
    cr_assert_eq(sd_ngram_predict(s, seq, 100, 1, &tok, NULL), 0);
    sd_ngram_free(s);
}

Test(ngram, bad_order) {
    sd_err e;
    cr_assert_null(sd_ngram_create(SD_NGRAM_MULTI, 1, 4, &e));
    cr_assert(strstr(e.msg, "[2, 16]"), "%s", e.msg);
    cr_assert_null(sd_ngram_create(SD_NGRAM_MULTI, 17, 4, &e));
}

Test(ngram, seen_asks_every_level_from_the_lowest_given) {
    sd_ngram *s = mk(SD_NGRAM_MULTI, 4);
    sd_err e;
    /* after "5 6 7" came 8, after "6 7" also 9 (in "0 6 7 9") */
    int32_t seq[] = {5, 6, 7, 8, 0, 6, 7, 9};
    cr_assert_eq(sd_ngram_observe_seq(s, seq, 0, 8, &e), 0);
    int32_t h[] = {5, 6, 7};
    cr_assert(sd_ngram_seen(s, h, 3, 3, 8));
    cr_assert_eq(sd_ngram_seen(s, h, 3, 3, 9), 0, "9 never followed the whole context");
    cr_assert(sd_ngram_seen(s, h, 3, 2, 9), "9 followed its last two tokens");
    cr_assert_eq(sd_ngram_seen(s, h, 3, 1, 4), 0);
    sd_ngram_free(s);
}
