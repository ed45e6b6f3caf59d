/* The CUDA kernels' host-side planning (kernels/cuda/plan.h): the
 * matrix-vector row tiling and the attention key split, at the shapes of
 * the real models on an H200 (132 multiprocessors) and over a sweep of
 * shapes, against the properties the kernels rely on. Plain C: runs in
 * every build, GPU or not. */
#include <criterion/criterion.h>

#include "kernels/cuda/plan.h"

enum { H200_SMS = 132 };

/* What the kernels need of a row plan: tiles cover n, the grid covers every
 * row pair of every tile, and a K split leaves each slice a full step. */
static void check_mv(int n, int64_t units, int64_t nch, int sms) {
    sd_mv_plan p;
    cr_assert_eq(sd_mv_plan_make(n, units, nch, sms, &p), 0);
    cr_assert(p.nt == 1 || p.nt == 2 || p.nt == 4 || p.nt == 8, "nt %d", p.nt);
    cr_assert(p.nt <= SD_MV_MAX_NT && (p.nt >= n || p.nt == 8), "n %d nt %d", n, p.nt);
    cr_assert(p.ntiles * p.nt >= n && (p.ntiles - 1) * p.nt < n, "n %d: %d tiles of %d", n, p.ntiles, p.nt);
    cr_assert(p.ks == 1 || p.ks == 2 || p.ks == 4, "ks %d", p.ks);
    if (p.ks > 1) cr_assert(nch >= p.ks * 32 * SD_MV_UNROLL, "ks %d with %lld chunks", p.ks, (long long)nch);
    const int64_t per_block = SD_MV_WARPS / p.ks;
    cr_assert(p.blocks * per_block >= units * p.ntiles, "blocks %lld for %lld pairs x %d tiles",
              (long long)p.blocks, (long long)units, p.ntiles);
    cr_assert((p.blocks / p.ntiles - 1) * per_block < units, "a block with no rows");
}

Test(cuda_plan, mv_real_shapes) {
    /* Qwen2.5-Coder 1.5B Q4_K: q 1536x1536 (768 pairs, 48 chunks of 32), ffn 8960 rows */
    sd_mv_plan p;
    cr_assert_eq(sd_mv_plan_make(1, 768, 48, H200_SMS, &p), 0);
    cr_assert_eq(p.nt, 1);
    cr_assert_eq(p.ks, 1); /* 48 chunks: too few for a split */
    cr_assert_eq(p.blocks, 192);
    cr_assert_eq(sd_mv_plan_make(5, 8960, 48, H200_SMS, &p), 0);
    cr_assert_eq(p.nt, 8);
    cr_assert_eq(p.ntiles, 1);
    /* a 64-row F32 matrix of 4096 columns (1024 chunks of 4): split 4 ways */
    cr_assert_eq(sd_mv_plan_make(1, 32, 1024, H200_SMS, &p), 0);
    cr_assert_eq(p.ks, 4);
    cr_assert_eq(p.blocks, 32);
    /* LM head 151936 rows, 9 rows of verification: two tiles */
    cr_assert_eq(sd_mv_plan_make(9, 75968, 48, H200_SMS, &p), 0);
    cr_assert_eq(p.nt, 8);
    cr_assert_eq(p.ntiles, 2);
    cr_assert_eq(p.blocks, 2 * 18992);
}

Test(cuda_plan, mv_sweep) {
    const int ns[] = {1, 2, 3, 4, 5, 8, 9, 17, 64, 128};
    const int64_t units[] = {1, 2, 3, 31, 64, 128, 448, 768, 4480, 75968};
    const int64_t nchs[] = {1, 8, 48, 64, 127, 128, 256, 1024, 4096};
    const int sms[] = {1, 108, 132};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof units / sizeof *units; b++)
            for (size_t c = 0; c < sizeof nchs / sizeof *nchs; c++)
                for (size_t d = 0; d < sizeof sms / sizeof *sms; d++)
                    check_mv(ns[a], units[b], nchs[c], sms[d]);
}

Test(cuda_plan, mv_grid_too_large) {
    sd_mv_plan p;
    cr_assert_eq(sd_mv_plan_make(128, (int64_t)1 << 31, 1, H200_SMS, &p), -1);
}

/* What the kernel needs of a split: the splits cover the keys, none is
 * empty, each but a lone one is whole tiles of at least SD_AT_MIN_SPLIT. */
static void check_attn(int n, int pos, int n_kv, int group, int sms) {
    sd_attn_plan p;
    cr_assert_eq(sd_attn_plan_make(n, pos, n_kv, group, sms, &p), 0);
    const int64_t len = (int64_t)pos + n;
    cr_assert(p.qtiles * SD_AT_QV >= (int64_t)n * group && (p.qtiles - 1) * SD_AT_QV < (int64_t)n * group);
    cr_assert(p.n_splits >= 1);
    cr_assert((int64_t)p.n_splits * p.kps >= len && (int64_t)(p.n_splits - 1) * p.kps < len,
              "len %lld: %d splits of %d", (long long)len, p.n_splits, p.kps);
    if (p.n_splits > 1)
        cr_assert(p.kps % SD_AT_KEYS == 0 && p.kps >= SD_AT_MIN_SPLIT, "kps %d", p.kps);
    /* the grid stays about two blocks per multiprocessor */
    if (p.n_splits > 1) cr_assert((p.n_splits - 1) * n_kv * p.qtiles < 2 * (int64_t)sms + n_kv * p.qtiles);
}

Test(cuda_plan, attention_real_shapes) {
    sd_attn_plan p;
    /* Qwen2.5-Coder 0.5B decode at context 8191: 14 heads over 2 kv heads */
    cr_assert_eq(sd_attn_plan_make(1, 8190, 2, 7, H200_SMS, &p), 0);
    cr_assert_eq(p.qtiles, 1);
    cr_assert_eq(p.kps, 64);
    cr_assert_eq(p.n_splits, 128);
    /* short context: no split */
    cr_assert_eq(sd_attn_plan_make(1, 100, 2, 6, H200_SMS, &p), 0);
    cr_assert_eq(p.n_splits, 1);
    cr_assert_eq(p.kps, 101);
    /* a 512-row prefill of SmolLM2 (9 heads / 3 kv): the grid is full */
    cr_assert_eq(sd_attn_plan_make(512, 0, 3, 3, H200_SMS, &p), 0);
    cr_assert_eq(p.qtiles, 96);
    cr_assert_eq(p.n_splits, 1);
}

Test(cuda_plan, attention_sweep) {
    const int ns[] = {1, 2, 5, 9, 64, 128};
    const int poss[] = {0, 1, 63, 127, 128, 1000, 8190, 32767};
    const int kvs[] = {1, 2, 3, 8, 32};
    const int groups[] = {1, 3, 6, 7, 8};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof poss / sizeof *poss; b++)
            for (size_t c = 0; c < sizeof kvs / sizeof *kvs; c++)
                for (size_t d = 0; d < sizeof groups / sizeof *groups; d++) {
                    check_attn(ns[a], poss[b], kvs[c], groups[d], H200_SMS);
                    check_attn(ns[a], poss[b], kvs[c], groups[d], 1);
                }
}

/* The bucketed plan covers every length of its bucket with the same launch
 * shape, and the next bucket starts where it ends. */
Test(cuda_plan, attention_bucket) {
    const int ns[] = {1, 4, 128};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        const int n = ns[a];
        sd_attn_plan first, p;
        cr_assert_eq(sd_attn_plan_bucket(n, 0, 3, 3, H200_SMS, &first), 0);
        for (int pos = 0; pos + n <= SD_AT_BUCKET_MIN; pos++) {
            cr_assert_eq(sd_attn_plan_bucket(n, pos, 3, 3, H200_SMS, &p), 0);
            cr_assert(p.kps == first.kps && p.n_splits == first.n_splits && p.qtiles == first.qtiles,
                      "n %d pos %d: %d splits of %d, at 0 %d of %d", n, pos, p.n_splits, p.kps,
                      first.n_splits, first.kps);
            cr_assert((int64_t)p.n_splits * p.kps >= pos + n);
        }
        cr_assert_eq(sd_attn_plan_bucket(n, SD_AT_BUCKET_MIN - n + 1, 3, 3, H200_SMS, &p), 0);
        cr_assert((int64_t)p.n_splits * p.kps >= 2 * SD_AT_BUCKET_MIN);
    }
    /* Qwen2.5-Coder 0.5B decode at 8191: the bucket is 8192, as planned exactly */
    sd_attn_plan q;
    cr_assert_eq(sd_attn_plan_bucket(1, 8190, 2, 7, H200_SMS, &q), 0);
    cr_assert(q.n_splits == 128 && q.kps == 64, "%d splits of %d", q.n_splits, q.kps);
}

/* Up to SD_SAME_BITS_ROWS rows, a call plans the K split of a one-row
 * call, so each row sums its products in the same order. */
Test(cuda_plan, mv_rows_split_as_one_row) {
    const int64_t units[] = {1, 31, 128, 600, 768, 1024, 4480, 75968};
    const int64_t nchs[] = {48, 128, 256, 512, 1024};
    for (size_t b = 0; b < sizeof units / sizeof *units; b++)
        for (size_t c = 0; c < sizeof nchs / sizeof *nchs; c++) {
            sd_mv_plan one, p;
            cr_assert_eq(sd_mv_plan_make(1, units[b], nchs[c], H200_SMS, &one), 0);
            for (int n = 2; n <= SD_SAME_BITS_ROWS; n++) {
                cr_assert_eq(sd_mv_plan_make(n, units[b], nchs[c], H200_SMS, &p), 0);
                cr_assert_eq(p.ks, one.ks, "%lld pairs of %lld chunks, %d rows: ks %d, one row %d",
                             (long long)units[b], (long long)nchs[c], n, p.ks, one.ks);
                check_mv(n, units[b], nchs[c], H200_SMS);
            }
        }
}

/* Up to SD_SAME_BITS_ROWS rows, each row of a call whose bucket is the
 * one its own decode step would use gets that step's key split, at every
 * position below 33000, for the kv head and group counts of Qwen2.5 1.5B
 * and 0.5B, SmolLM2 and Llama-3.2-1B; the rows whose step would plan in the
 * smaller bucket are few (a call straddles a bucket boundary). */
static int64_t bucket_of(int64_t len) {
    int64_t b = SD_AT_BUCKET_MIN;
    while (b < len) b *= 2;
    return b;
}
Test(cuda_plan, attention_rows_split_as_decode) {
    const int shapes[][2] = {{2, 6}, {2, 7}, {3, 3}, {8, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int n = 2; n <= SD_SAME_BITS_ROWS; n++) {
            int straddle = 0;
            for (int pos = 0; pos < 33000; pos++) {
                sd_attn_plan p, one;
                cr_assert_eq(sd_attn_plan_bucket(n, pos, shapes[s][0], shapes[s][1], H200_SMS, &p), 0);
                for (int r = 0; r < n; r++) {
                    cr_assert_eq(sd_attn_plan_bucket(1, pos + r, shapes[s][0], shapes[s][1], H200_SMS, &one), 0);
                    if (bucket_of(pos + r + 1) < bucket_of(pos + n)) {
                        straddle += one.kps != p.kps;
                        continue;
                    }
                    cr_assert_eq(p.kps, one.kps, "%d kv heads of %d, %d rows at %d: row %d splits by %d, decode by %d",
                                 shapes[s][0], shapes[s][1], n, pos, r, p.kps, one.kps);
                    cr_assert_eq(p.n_splits, one.n_splits);
                }
            }
            cr_assert_leq(straddle, 8 * n * n, "%d kv heads of %d, %d rows: %d rows split otherwise",
                          shapes[s][0], shapes[s][1], n, straddle);
        }
}

Test(cuda_plan, attention_too_many_rows) {
    sd_attn_plan p;
    cr_assert_eq(sd_attn_plan_make(65536 * 16, 0, 1, 2, H200_SMS, &p), -1);
}
