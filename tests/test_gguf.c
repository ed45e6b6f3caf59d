/* GGUF reader tests: the three stories260K files, files built with the test
 * writer (v2, alignment 64, every metadata type), forged files that must be
 * refused with a specific reason, and exhaustive truncation / corruption of
 * a small valid file under a guard page, so any read past the end crashes
 * the test instead of passing silently. The synthetic models the other
 * suites use are checked here too: they must parse, with the shapes, types,
 * keys and vocabulary that synth_model.h promises. */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#include "kernels/common/fp16.h"
#include "engine/format/gguf.h"
#include "tests/util/test_util.h"
#include "engine/format/gguf_writer.h"
#include "tests/util/synth_model.h"

#define MODEL_DIR "tests/data/models/"
#define TMP_DIR "tests/tmp"

/* ---- helpers ------------------------------------------------------------ */

static int matches(const char *pattern, const char *s) {
    int r = tu_matches(pattern, s);
    cr_assert(r >= 0, "bad test regex '%s'", pattern);
    return r;
}

static void serialise(gw *w, uint8_t **b, size_t *n) {
    cr_assert(w, "gw_new failed");
    cr_assert_eq(gw_bytes(w, b, n), 0, "gw_bytes failed");
}

/* The forged file must be refused, with a message matching `reason`. */
static void expect_reject(const uint8_t *b, size_t n, const char *reason) {
    sd_err e = {{0}};
    gguf_file *f = gguf_open_mem(b, n, "forged", &e);
    if (f) gguf_close(f);
    cr_assert_null(f, "forged file (%zu bytes) was accepted; expected /%s/", n, reason);
    cr_assert(matches(reason, e.msg), "message \"%s\" does not match /%s/", e.msg, reason);
}

static void reject_writer(gw *w, const char *reason) {
    uint8_t *b;
    size_t n;
    serialise(w, &b, &n);
    gw_free(w);
    expect_reject(b, n, reason);
    free(b);
}

static gguf_file *open_ok(const uint8_t *b, size_t n) {
    sd_err e = {{0}};
    gguf_file *f = gguf_open_mem(b, n, "test", &e);
    cr_assert(f, "gguf_open_mem failed: %s", e.msg);
    return f;
}

static gguf_file *open_model(const char *file) {
    sd_err e = {{0}};
    gguf_file *f = gguf_open(file, &e);
    cr_assert(f, "%s: %s", file, e.msg);
    return f;
}

static int64_t get_int(const gguf_file *f, const char *key) {
    sd_err e = {{0}};
    int64_t v = 0;
    cr_assert_eq(gguf_get_int(f, key, &v, &e), 0, "%s: %s", key, e.msg);
    return v;
}

static double get_float(const gguf_file *f, const char *key) {
    sd_err e = {{0}};
    double v = 0;
    cr_assert_eq(gguf_get_float(f, key, &v, &e), 0, "%s: %s", key, e.msg);
    return v;
}

static void expect_str(const gguf_file *f, const char *key, const char *want) {
    sd_err e = {{0}};
    gguf_str s = {0};
    cr_assert_eq(gguf_get_str(f, key, &s, &e), 0, "%s: %s", key, e.msg);
    cr_assert(gguf_str_eq(s, want), "%s = '%.*s', expected '%s'", key, (int)s.len, s.s, want);
}

static const gguf_tensor *tensor(const gguf_file *f, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    cr_assert(t, "tensor %s missing", name);
    return t;
}

/* Raw little-endian bytes for entries the writer's typed calls cannot
 * express (bad lengths, unknown types, forged counts). */
typedef struct raw {
    uint8_t b[256];
    size_t n;
} raw;

static void raw_le(raw *r, uint64_t v, int bytes) {
    cr_assert(r->n + (size_t)bytes <= sizeof r->b);
    for (int i = 0; i < bytes; i++) r->b[r->n++] = (uint8_t)(v >> (8 * i));
}

static void raw_str(raw *r, const char *s) {
    size_t n = strlen(s);
    raw_le(r, n, 8);
    cr_assert(r->n + n <= sizeof r->b);
    memcpy(r->b + r->n, s, n);
    r->n += n;
}

/* A small valid file: a few keys and two 2-D F32 tensors of 8 floats each.
 * 32-byte tensors at alignment 32 leave no padding after the last one, so
 * every proper prefix of the file cuts real content. */
static const float k_a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
static const float k_b[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
static const uint64_t k_ne[2] = {4, 2};

static gw *small_writer(void) {
    gw *w = gw_new(3);
    gw_str(w, "general.architecture", "llama");
    gw_u32(w, "test.u32", 7);
    gw_f32(w, "test.f32", 0.5f);
    return w;
}

static void small_tensors(gw *w) {
    gw_tensor(w, "a.weight", SD_F32, 2, k_ne, k_a, sizeof k_a);
    gw_tensor(w, "b.weight", SD_F32, 2, k_ne, k_b, sizeof k_b);
}

static gw *small_file(void) {
    gw *w = small_writer();
    small_tensors(w);
    return w;
}

/* ---- the stories260K files ---------------------------------------------- */

static const char *const k_matrices[] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                         "ffn_gate", "ffn_up", "ffn_down"};

/* Facts shared by all three files (models README). */
static void check_stories_common(const gguf_file *f) {
    cr_assert_eq(f->version, 3);
    cr_assert_eq(f->n_tensors, 48);
    expect_str(f, "general.architecture", "llama");
    expect_str(f, "tokenizer.ggml.model", "llama");
    cr_assert_eq(get_int(f, "llama.embedding_length"), 64);
    cr_assert_eq(get_int(f, "llama.feed_forward_length"), 172);
    cr_assert_eq(get_int(f, "llama.block_count"), 5);
    cr_assert_eq(get_int(f, "llama.attention.head_count"), 8);
    cr_assert_eq(get_int(f, "llama.attention.head_count_kv"), 4);
    cr_assert_eq(get_int(f, "llama.rope.dimension_count"), 8);
    cr_assert_eq(get_int(f, "llama.context_length"), 2048);
    cr_assert_eq(get_int(f, "tokenizer.ggml.bos_token_id"), 1);
    cr_assert_eq(get_int(f, "tokenizer.ggml.eos_token_id"), 2);
    cr_assert_eq(get_int(f, "tokenizer.ggml.unknown_token_id"), 0);
    cr_assert_float_eq(get_float(f, "llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
    cr_assert_null(gguf_get(f, "llama.rope.freq_base"));
    cr_assert_eq(f->alignment, 32);
    cr_assert_eq(f->data_offset % 32, 0);

    sd_err e = {{0}};
    const gguf_value *v;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 512);
    cr_assert(gguf_str_eq(v->v.arr.strs[0], "<unk>"));
    cr_assert(gguf_str_eq(v->v.arr.strs[1], "<s>"));
    cr_assert(gguf_str_eq(v->v.arr.strs[2], "</s>"));
    cr_assert(gguf_str_eq(v->v.arr.strs[3], "<0x00>"));
    cr_assert(gguf_str_eq(v->v.arr.strs[258], "<0xFF>"));
    cr_assert(gguf_str_eq(v->v.arr.strs[259], "\xe2\x96\x81t"));
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_FLOAT32, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 512);
    float s260;
    memcpy(&s260, (const uint8_t *)v->v.arr.data + 4 * 260, 4);
    cr_assert_float_eq(s260, -1.0f, 0.0f);
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_INT32, &v, &e), 0, "%s",
                 e.msg);
    int32_t tt[4];
    memcpy(tt, v->v.arr.data, sizeof tt);
    cr_assert(tt[0] == 2 && tt[1] == 3 && tt[2] == 3 && tt[3] == 6);
    /* A present key of the wrong type is an error naming the key. */
    gguf_str s;
    cr_assert_eq(gguf_get_str(f, "llama.block_count", &s, &e), -1);
    cr_assert(matches("llama\\.block_count", e.msg), "%s", e.msg);
    cr_assert_eq(gguf_get_str(f, "no.such.key", &s, &e), 1);

    /* Shapes, and every tensor lying aligned inside the file. */
    cr_assert_eq(tensor(f, "token_embd.weight")->ne[0], 64);
    cr_assert_eq(tensor(f, "token_embd.weight")->ne[1], 512);
    cr_assert_eq(tensor(f, "output.weight")->ne[1], 512);
    cr_assert_eq(tensor(f, "output_norm.weight")->n_dims, 1);
    cr_assert_eq(tensor(f, "blk.4.attn_k.weight")->ne[1], 32);
    cr_assert_eq(tensor(f, "blk.0.ffn_down.weight")->ne[0], 172);
    cr_assert_eq(tensor(f, "blk.0.ffn_down.weight")->ne[1], 64);
    cr_assert_eq(tensor(f, "blk.3.ffn_up.weight")->ne[1], 172);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        cr_assert_eq(t->offset % 32, 0);
        cr_assert_eq((const uint8_t *)t->data, f->base + f->data_offset + t->offset);
        cr_assert_leq(f->data_offset + t->offset + t->nbytes, f->size);
        cr_assert_eq(t->nbytes, sd_row_bytes(t->type, t->ne[0]) * t->ne[1] * t->ne[2] * t->ne[3]);
    }
}

/* Type of every matrix (token_embd, output and the per-layer seven), with
 * ffn_down's given separately for the mixed Q8_0 file. */
static void check_stories_types(const gguf_file *f, uint32_t mat, uint32_t down) {
    cr_assert_eq(tensor(f, "token_embd.weight")->type, mat);
    cr_assert_eq(tensor(f, "output.weight")->type, mat);
    cr_assert_eq(tensor(f, "output_norm.weight")->type, SD_F32);
    char name[64];
    for (int l = 0; l < 5; l++) {
        for (size_t m = 0; m < sizeof k_matrices / sizeof k_matrices[0]; m++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, k_matrices[m]);
            uint32_t want = strcmp(k_matrices[m], "ffn_down") == 0 ? down : mat;
            cr_assert_eq(tensor(f, name)->type, want, "%s has type %u, expected %u", name,
                         tensor(f, name)->type, want);
        }
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        cr_assert_eq(tensor(f, name)->type, SD_F32);
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        cr_assert_eq(tensor(f, name)->type, SD_F32);
    }
}

Test(stories, f32) {
    gguf_file *f = open_model(MODEL_DIR "stories260K.gguf");
    check_stories_common(f);
    cr_assert_eq(f->n_kv, 19);
    cr_assert_null(gguf_get(f, "general.file_type"));
    cr_assert(gguf_str_eq(f->tensors[0].name, "token_embd.weight"));
    cr_assert_eq(f->data_offset, 14176);
    check_stories_types(f, SD_F32, SD_F32);
    /* First embedding values (from the file, checked with gguf-py). */
    const float *x = tensor(f, "token_embd.weight")->data;
    cr_assert_float_eq(x[0], -0.29474878f, 1e-7f);
    cr_assert_float_eq(x[1], 0.5618956f, 1e-7f);
    gguf_close(f);
}

Test(stories, f16_matches_f32) {
    gguf_file *f = open_model(MODEL_DIR "stories260K-f16.gguf");
    gguf_file *ref = open_model(MODEL_DIR "stories260K.gguf");
    check_stories_common(f);
    cr_assert_eq(get_int(f, "general.file_type"), 1);
    cr_assert(gguf_str_eq(f->tensors[0].name, "output.weight"));
    check_stories_types(f, SD_F16, SD_F16);
    /* Each F16 matrix is the F32 one rounded to nearest: a wrong data
     * pointer or offset anywhere shows up here. */
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.s);
        const gguf_tensor *r = tensor(ref, name);
        uint64_t n = t->ne[0] * t->ne[1];
        const float *rx = r->data;
        for (uint64_t k = 0; k < n; k++) {
            if (t->type == SD_F32) {
                cr_assert_eq(memcmp(&((const float *)t->data)[k], &rx[k], 4), 0, "%s[%lu]", name,
                             (unsigned long)k);
            } else {
                uint16_t h;
                memcpy(&h, (const uint8_t *)t->data + 2 * k, 2);
                cr_assert_eq(h, sd_f32_to_f16(rx[k]), "%s[%lu]", name, (unsigned long)k);
            }
        }
    }
    gguf_close(ref);
    gguf_close(f);
}

Test(stories, q8_0_mixed) {
    gguf_file *f = open_model(MODEL_DIR "stories260K-q8_0.gguf");
    gguf_file *ref = open_model(MODEL_DIR "stories260K.gguf");
    check_stories_common(f);
    /* The file type claims Q6_K (18); the tensors say what they are. */
    cr_assert_eq(get_int(f, "general.file_type"), 18);
    check_stories_types(f, SD_Q8_0, SD_F16);
    /* Q8_0 blocks dequantize to the F32 weights within half a step (plus the
     * scale's own f16 rounding). */
    const gguf_tensor *t = tensor(f, "token_embd.weight");
    const float *rx = tensor(ref, "token_embd.weight")->data;
    cr_assert_eq(t->nbytes, 512 * 2 * 34);
    for (uint64_t blk = 0; blk < t->nbytes / 34; blk++) {
        const uint8_t *p = (const uint8_t *)t->data + 34 * blk;
        uint16_t dh;
        memcpy(&dh, p, 2);
        float d = sd_f16_to_f32(dh);
        for (int j = 0; j < 32; j++) {
            float x = d * (float)(int8_t)p[2 + j];
            cr_assert(fabsf(x - rx[blk * 32 + (uint64_t)j]) <= 0.6f * d + 1e-7f,
                      "block %lu elem %d: %g vs %g", (unsigned long)blk, j, x, rx[blk * 32 + j]);
        }
    }
    gguf_close(ref);
    gguf_close(f);
}

/* ---- files from the writer ---------------------------------------------- */

Test(writer, v2_file) {
    gw *w = gw_new(2);
    gw_str(w, "general.architecture", "llama");
    gw_u32(w, "llama.block_count", 3);
    small_tensors(w);
    mkdir(TMP_DIR, 0755);
    char path[64];
    snprintf(path, sizeof path, TMP_DIR "/gguf_v2_%ld.gguf", (long)getpid());
    cr_assert_eq(gw_write(w, path), 0);
    gw_free(w);
    gguf_file *f = open_model(path);
    cr_assert_eq(f->version, 2);
    cr_assert_eq(get_int(f, "llama.block_count"), 3);
    cr_assert_eq(f->n_tensors, 2);
    const gguf_tensor *b = tensor(f, "b.weight");
    cr_assert_eq(b->nbytes, sizeof k_b);
    cr_assert_eq(memcmp(b->data, k_b, sizeof k_b), 0);
    gguf_close(f);
    cr_assert_eq(unlink(path), 0);
}

Test(writer, alignment_64) {
    gw *w = gw_new(3);
    gw_alignment(w, 64);
    gw_str(w, "x", "y"); /* so the table does not end on a 64-byte boundary */
    small_tensors(w);
    uint8_t *bytes;
    size_t n;
    serialise(w, &bytes, &n);
    gw_free(w);
    gguf_file *f = open_ok(bytes, n);
    cr_assert_eq(f->alignment, 64);
    cr_assert_eq(get_int(f, "general.alignment"), 64);
    cr_assert_eq(f->data_offset % 64, 0);
    const gguf_tensor *a = tensor(f, "a.weight"), *b = tensor(f, "b.weight");
    cr_assert_eq(a->offset, 0);
    cr_assert_eq(b->offset, 64); /* 32 bytes of a, padded to 64 */
    cr_assert_eq(memcmp(a->data, k_a, sizeof k_a), 0);
    cr_assert_eq(memcmp(b->data, k_b, sizeof k_b), 0);
    gguf_close(f);
    free(bytes);
}

Test(writer, zero_tensors) {
    gw *w = small_writer();
    uint8_t *bytes;
    size_t n;
    serialise(w, &bytes, &n);
    gw_free(w);
    gguf_file *f = open_ok(bytes, n);
    cr_assert_eq(f->n_tensors, 0);
    cr_assert_eq(f->n_kv, 3);
    cr_assert_null(gguf_find_tensor(f, "a.weight"));
    gguf_close(f);
    free(bytes);
}

/* Tensors streamed through gw_write_with's fill give the file gw_bytes
 * makes from the same data, odd sizes and an alignment of 64 included. */
static const uint8_t *stream_src[3];

static int stream_fill(void *ud, size_t idx, uint8_t *buf) {
    int *calls = ud;
    (*calls)++;
    memcpy(buf, stream_src[idx], idx == 0 ? 40 : idx == 1 ? 7 : 300);
    return 0;
}

static int stream_fail(void *ud, size_t idx, uint8_t *buf) {
    (void)ud, (void)idx, (void)buf;
    return -1;
}

Test(writer, streamed_tensors_equal_in_memory) {
    static const size_t sizes[3] = {40, 7, 300};
    static uint8_t data[3][300];
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < sizes[t]; i++) data[t][i] = (uint8_t)(t * 31 + i * 7 + 1);
        stream_src[t] = data[t];
    }
    gw *mem = gw_new(3), *later = gw_new(3);
    gw *both[2] = {mem, later};
    for (int k = 0; k < 2; k++) {
        gw_alignment(both[k], 64);
        gw_str(both[k], "general.architecture", "llama");
        for (int t = 0; t < 3; t++) {
            char name[16];
            snprintf(name, sizeof name, "t%d", t);
            uint64_t ne[1] = {sizes[t]};
            if (k == 0) gw_tensor(mem, name, 0, 1, ne, data[t], sizes[t]);
            else gw_tensor_later(later, name, 0, 1, ne, sizes[t]);
        }
    }
    uint8_t *want;
    size_t n_want;
    serialise(mem, &want, &n_want);
    char path[64];
    snprintf(path, sizeof path, "/tmp/sd_test_gguf_stream_%d.gguf", (int)getpid());
    int calls = 0;
    cr_assert_eq(gw_write_with(later, path, stream_fill, &calls), 0);
    cr_assert_eq(calls, 3);
    char *got = tu_slurp(path);
    struct stat sb;
    cr_assert(got && stat(path, &sb) == 0);
    cr_assert_eq((size_t)sb.st_size, n_want);
    cr_assert_arr_eq(got, want, n_want);
    cr_assert_eq(gw_write_with(later, path, stream_fail, NULL), -1, "a failing fill fails the write");
    remove(path);
    free(got);
    free(want);
    gw_free(mem);
    gw_free(later);
}

/* Every value type, the extremes of each integer width, and nested arrays. */
Test(writer, every_value_type) {
    static const char *const strs[] = {"", "one", "\xe2\x96\x81two"};
    static const float f32s[] = {1.5f, -0.25f};
    static const int32_t i32s[] = {INT32_MIN, -1, INT32_MAX};
    static const uint8_t u8s[] = {0, 1, 255};
    /* [[1, 2, 3], [], [9]] as u8 arrays, then ["ab", "c"] as one string array. */
    static const uint8_t nested_u8[] = {
        0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, /* u8 x3 */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,          /* u8 x0 */
        0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9,       /* u8 x1 */
    };
    static const uint8_t nested_str[] = {
        8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,        /* string x2 */
        2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 1, 0, 0, 0, 0, 0, 0, 0, 'c',
    };
    gw *w = gw_new(3);
    gw_u8(w, "u8", 255);
    gw_i8(w, "i8", -128);
    gw_u16(w, "u16", 65535);
    gw_i16(w, "i16", -32768);
    gw_u32(w, "u32", UINT32_MAX);
    gw_i32(w, "i32", INT32_MIN);
    gw_u64(w, "u64", UINT64_MAX);
    gw_i64(w, "i64", INT64_MIN);
    gw_f32(w, "f32", -3.25f);
    gw_f64(w, "f64", 1e300);
    gw_bool(w, "true", 1);
    gw_bool(w, "false", 0);
    gw_str(w, "str", "h\xc3\xa9llo");
    gw_str(w, "empty", "");
    gw_arr_str(w, "arr.str", strs, 3);
    gw_arr_f32(w, "arr.f32", f32s, 2);
    gw_arr_i32(w, "arr.i32", i32s, 3);
    gw_arr_raw(w, "arr.u8", GGUF_UINT8, 3, u8s, sizeof u8s);
    gw_arr_raw(w, "arr.empty", GGUF_UINT64, 0, NULL, 0);
    gw_arr_raw(w, "arr.arr.u8", GGUF_ARRAY, 3, nested_u8, sizeof nested_u8);
    gw_arr_raw(w, "arr.arr.str", GGUF_ARRAY, 1, nested_str, sizeof nested_str);
    uint8_t *bytes;
    size_t n;
    serialise(w, &bytes, &n);
    gw_free(w);
    gguf_file *f = open_ok(bytes, n);
    cr_assert_eq(f->n_kv, 21);

    cr_assert_eq(gguf_get(f, "u8")->type, GGUF_UINT8);
    cr_assert_eq(get_int(f, "u8"), 255);
    cr_assert_eq(gguf_get(f, "i8")->type, GGUF_INT8);
    cr_assert_eq(get_int(f, "i8"), -128);
    cr_assert_eq(get_int(f, "u16"), 65535);
    cr_assert_eq(get_int(f, "i16"), -32768);
    cr_assert_eq(get_int(f, "u32"), UINT32_MAX);
    cr_assert_eq(get_int(f, "i32"), INT32_MIN);
    cr_assert_eq(gguf_get(f, "u64")->v.u, UINT64_MAX);
    cr_assert_eq(get_int(f, "i64"), INT64_MIN);
    cr_assert_eq(get_float(f, "f32"), -3.25);
    cr_assert_eq(get_float(f, "f64"), 1e300);
    sd_err e = {{0}};
    int bv = -1;
    cr_assert_eq(gguf_get_bool(f, "true", &bv, &e), 0);
    cr_assert_eq(bv, 1);
    cr_assert_eq(gguf_get_bool(f, "false", &bv, &e), 0);
    cr_assert_eq(bv, 0);
    expect_str(f, "str", "h\xc3\xa9llo");
    expect_str(f, "empty", "");

    /* u64 beyond INT64_MAX cannot be read as a signed integer. */
    int64_t iv;
    cr_assert_eq(gguf_get_int(f, "u64", &iv, &e), -1);
    cr_assert(matches("u64.*range", e.msg), "%s", e.msg);
    cr_assert_eq(gguf_get_int(f, "f32", &iv, &e), -1);
    cr_assert_eq(gguf_get_bool(f, "u8", &bv, &e), -1);

    const gguf_value *v;
    cr_assert_eq(gguf_get_arr(f, "arr.str", GGUF_STRING, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 3);
    for (int i = 0; i < 3; i++) cr_assert(gguf_str_eq(v->v.arr.strs[i], strs[i]));
    cr_assert_eq(gguf_get_arr(f, "arr.str", GGUF_INT32, &v, &e), -1);

    cr_assert_eq(gguf_get_arr(f, "arr.f32", GGUF_FLOAT32, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 2);
    cr_assert_eq(memcmp(v->v.arr.data, f32s, sizeof f32s), 0);
    cr_assert_eq(gguf_get_arr(f, "arr.i32", GGUF_INT32, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(v->v.arr.data, i32s, sizeof i32s), 0);
    cr_assert_eq(gguf_get_arr(f, "arr.u8", GGUF_UINT8, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(v->v.arr.data, u8s, sizeof u8s), 0);
    cr_assert_eq(gguf_get_arr(f, "arr.empty", GGUF_UINT64, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 0);

    cr_assert_eq(gguf_get_arr(f, "arr.arr.u8", GGUF_ARRAY, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 3);
    const gguf_value *in = v->v.arr.vals;
    cr_assert(in);
    static const uint64_t lens[] = {3, 0, 1};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(in[i].type, GGUF_ARRAY);
        cr_assert_eq(in[i].v.arr.type, GGUF_UINT8);
        cr_assert_eq(in[i].v.arr.n, lens[i]);
    }
    cr_assert_eq(memcmp(in[0].v.arr.data, "\x01\x02\x03", 3), 0);
    cr_assert_eq(((const uint8_t *)in[2].v.arr.data)[0], 9);

    cr_assert_eq(gguf_get_arr(f, "arr.arr.str", GGUF_ARRAY, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, 1);
    in = v->v.arr.vals;
    cr_assert_eq(in[0].v.arr.type, GGUF_STRING);
    cr_assert_eq(in[0].v.arr.n, 2);
    cr_assert(gguf_str_eq(in[0].v.arr.strs[0], "ab"));
    cr_assert(gguf_str_eq(in[0].v.arr.strs[1], "c"));
    gguf_close(f);
    free(bytes);
}

/* ---- malformed files: each refused, for the right reason -------------------
 * Most start from small_file() and forge one thing; the expected reason is a
 * regex over the message. */

Test(malformed, bad_magic) {
    uint8_t *b;
    size_t n;
    gw *w = small_file();
    serialise(w, &b, &n);
    gw_free(w);
    b[0] = 'X';
    expect_reject(b, n, "magic");
    free(b);
}

Test(malformed, version_1) { reject_writer(gw_new(1), "version 1\\b"); }
Test(malformed, version_4) { reject_writer(gw_new(4), "version 4\\b"); }

Test(malformed, truncated_header) {
    uint8_t *b;
    size_t n;
    gw *w = small_file();
    serialise(w, &b, &n);
    gw_free(w);
    expect_reject(b, 16, "truncated.*header|header.*truncated"); /* n_kv missing */
    free(b);
}

Test(malformed, truncated_metadata) {
    uint8_t *b;
    size_t n, info;
    gw *w = small_writer(); /* last key is test.f32, a 4-byte value */
    small_tensors(w);
    serialise(w, &b, &n);
    cr_assert_eq(gw_layout(w, &info, NULL), 0);
    gw_free(w);
    expect_reject(b, info - 2, "truncated"); /* cuts test.f32's value */
    free(b);
}

Test(malformed, truncated_tensor_table) {
    uint8_t *b;
    size_t n, info, data;
    gw *w = small_file();
    serialise(w, &b, &n);
    cr_assert_eq(gw_layout(w, &info, &data), 0);
    gw_free(w);
    /* Each entry is name (8 + 8) + n_dims 4 + ne 16 + type 4 + offset 8 = 48:
     * cut inside the second tensor's offset. */
    cr_assert_leq(info + 96, data);
    cr_assert_gt(info + 96 + 32, data);
    expect_reject(b, info + 92, "truncated|past the end");
    free(b);
}

Test(malformed, truncated_data) {
    uint8_t *b;
    size_t n;
    gw *w = small_file();
    serialise(w, &b, &n);
    gw_free(w);
    expect_reject(b, n - 1, "b\\.weight.*past the end");
    free(b);
}

Test(malformed, data_section_past_eof) {
    uint8_t *b;
    size_t n, data;
    gw *w = gw_new(3);
    gw_str(w, "k", "v"); /* tensor table ends unaligned: padding follows */
    small_tensors(w);
    serialise(w, &b, &n);
    cr_assert_eq(gw_layout(w, NULL, &data), 0);
    gw_free(w);
    expect_reject(b, data - 1, "truncated|past the end");
    free(b);
}

Test(malformed, key_length_past_eof) {
    raw r = {{0}, 0};
    raw_le(&r, 1000, 8); /* key length; only a few bytes follow */
    raw_le(&r, GGUF_UINT32, 4);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "string length 1000\\b.*past the end");
}

Test(malformed, huge_string_length) {
    raw r = {{0}, 0};
    raw_str(&r, "big");
    raw_le(&r, GGUF_STRING, 4);
    raw_le(&r, 1ull << 63, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "string length 9223372036854775808\\b");
}

Test(malformed, unknown_value_type) {
    raw r = {{0}, 0};
    raw_str(&r, "odd");
    raw_le(&r, 13, 4);
    raw_le(&r, 0, 4);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'odd'.*unknown value type 13\\b");
}

Test(malformed, unknown_array_element_type) {
    raw r = {{0}, 0};
    raw_str(&r, "odd");
    raw_le(&r, GGUF_ARRAY, 4);
    raw_le(&r, 99, 4);
    raw_le(&r, 1, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'odd'.*element type 99\\b");
}

/* 2^32 u32 = 16 GiB of claimed payload: refused before anything is read. */
Test(malformed, array_count_gigabytes) {
    raw r = {{0}, 0};
    raw_str(&r, "huge");
    raw_le(&r, GGUF_ARRAY, 4);
    raw_le(&r, GGUF_UINT32, 4);
    raw_le(&r, 1ull << 32, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'huge'.*4294967296\\b.*past the end");
}

/* A string array's index is allocated: its count must be checked first. */
Test(malformed, string_array_count_huge) {
    raw r = {{0}, 0};
    raw_str(&r, "huge");
    raw_le(&r, GGUF_ARRAY, 4);
    raw_le(&r, GGUF_STRING, 4);
    raw_le(&r, 1ull << 40, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'huge'.*1099511627776\\b.*past the end");
}

Test(malformed, nested_array_count_huge) {
    raw r = {{0}, 0};
    raw_str(&r, "huge");
    raw_le(&r, GGUF_ARRAY, 4);
    raw_le(&r, GGUF_ARRAY, 4);
    raw_le(&r, 1ull << 40, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'huge'.*1099511627776\\b.*past the end");
}

/* Arrays nested without end must stop at a depth cap, not blow the stack. */
Test(malformed, nesting_too_deep) {
    raw r = {{0}, 0};
    raw_str(&r, "deep");
    raw_le(&r, GGUF_ARRAY, 4);
    for (int i = 0; i < 16; i++) {
        raw_le(&r, GGUF_ARRAY, 4);
        raw_le(&r, 1, 8);
    }
    raw_le(&r, GGUF_UINT8, 4);
    raw_le(&r, 0, 8);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'deep'.*nest");
}

Test(malformed, bool_not_0_or_1) {
    raw r = {{0}, 0};
    raw_str(&r, "flag");
    raw_le(&r, GGUF_BOOL, 4);
    raw_le(&r, 2, 1);
    gw *w = small_file();
    gw_raw_kv(w, r.b, r.n);
    reject_writer(w, "'flag'.*bool");
}

Test(malformed, tensor_offset_past_eof) {
    gw *w = small_file();
    gw_tensor_offset(w, 1, 1u << 20);
    reject_writer(w, "b\\.weight.*past the end");
}

/* Offset inside the file but the data would wrap a 64-bit sum. */
Test(malformed, tensor_offset_wraps) {
    gw *w = small_file();
    gw_tensor_offset(w, 1, UINT64_MAX - 31);
    reject_writer(w, "b\\.weight.*past the end");
}

Test(malformed, dims_element_count_overflow) {
    static const uint64_t ne[3] = {1ull << 32, 1ull << 32, 16};
    gw *w = small_writer();
    gw_tensor(w, "big.weight", SD_F32, 3, ne, NULL, 0);
    reject_writer(w, "big\\.weight.*overflow");
}

/* 2^62 elements fit in 64 bits; their 2^64 bytes do not. */
Test(malformed, dims_byte_size_overflow) {
    static const uint64_t ne[2] = {1ull << 31, 1ull << 31};
    gw *w = small_writer();
    gw_tensor(w, "big.weight", SD_F32, 2, ne, NULL, 0);
    reject_writer(w, "big\\.weight.*(overflow|past the end)");
}

Test(malformed, zero_dim) {
    static const uint64_t ne[2] = {8, 0};
    gw *w = small_writer();
    gw_tensor(w, "z.weight", SD_F32, 2, ne, NULL, 0);
    reject_writer(w, "z\\.weight.*zero");
}

Test(malformed, five_dims) {
    static const uint64_t ne[5] = {1, 1, 1, 1, 8};
    gw *w = small_writer();
    gw_tensor(w, "t5.weight", SD_F32, 5, ne, k_a, sizeof k_a);
    reject_writer(w, "t5\\.weight.*\\b5 dimensions");
}

Test(malformed, zero_dims) {
    gw *w = small_writer();
    gw_tensor(w, "t0.weight", SD_F32, 0, NULL, k_a, sizeof k_a);
    reject_writer(w, "t0\\.weight.*\\b0 dimensions");
}

Test(malformed, misaligned_offset) {
    gw *w = small_file();
    gw_tensor_offset(w, 1, 36);
    reject_writer(w, "b\\.weight.*offset 36\\b.*alignment 32\\b");
}

Test(malformed, duplicate_tensor_name) {
    gw *w = small_writer();
    gw_tensor(w, "a.weight", SD_F32, 2, k_ne, k_a, sizeof k_a);
    gw_tensor(w, "a.weight", SD_F32, 2, k_ne, k_b, sizeof k_b);
    reject_writer(w, "duplicate.*'a\\.weight'");
}

Test(malformed, duplicate_key) {
    gw *w = small_file();
    gw_u32(w, "test.u32", 8);
    reject_writer(w, "duplicate.*'test\\.u32'");
}

Test(malformed, unsupported_type_q2_k) {
    static const uint64_t ne[2] = {256, 1};
    static const uint8_t blk[84] = {0}; /* one Q2_K super-block */
    gw *w = small_writer();
    gw_tensor(w, "k.weight", 10, 2, ne, blk, sizeof blk);
    reject_writer(w, "'k\\.weight'.*Q2_K.*F32.*F16.*BF16.*Q8_0.*Q4_0.*Q4_1.*Q5_0.*Q4_K.*Q6_K");
}

Test(malformed, row_not_block_multiple) {
    static const uint64_t ne[2] = {33, 1};
    static const uint8_t blk[68] = {0};
    gw *w = small_writer();
    gw_tensor(w, "q.weight", SD_Q8_0, 2, ne, blk, sizeof blk);
    reject_writer(w, "q\\.weight.*33\\b.*block");
}

Test(malformed, alignment_not_power_of_two) {
    gw *w = small_writer();
    gw_alignment(w, 48);
    small_tensors(w);
    reject_writer(w, "alignment 48\\b.*power of two");
}

Test(malformed, alignment_zero) {
    gw *w = small_writer();
    gw_alignment(w, 0);
    small_tensors(w);
    reject_writer(w, "alignment 0\\b");
}

Test(malformed, alignment_wrong_type) {
    gw *w = small_writer();
    gw_u64(w, "general.alignment", 32);
    small_tensors(w);
    reject_writer(w, "general\\.alignment.*u64");
}

Test(malformed, tensor_count_2e40) {
    gw *w = small_file();
    gw_set_n_tensors(w, 1ull << 40);
    reject_writer(w, "tensor count 1099511627776\\b");
}

Test(malformed, kv_count_2e40) {
    gw *w = small_file();
    gw_set_n_kv(w, 1ull << 40);
    reject_writer(w, "(metadata|key|kv).*count 1099511627776\\b|1099511627776.*(metadata|key)");
}

/* ---- exhaustive damage to a small valid file -------------------------------
 * The bytes are placed so they end exactly at a PROT_NONE page: reading even
 * one byte past the end faults, and Criterion reports the test as crashed. */

typedef struct guarded {
    uint8_t *map;
    size_t map_len;
    uint8_t *at; /* where the copy starts; at + len is the guard page */
} guarded;

static guarded guard_copy(const uint8_t *b, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (len + page - 1) / page;
    guarded g;
    g.map_len = (pages + 1) * page;
    g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(g.map, MAP_FAILED, "mmap: %s", strerror(errno));
    cr_assert_eq(mprotect(g.map + pages * page, page, PROT_NONE), 0);
    g.at = g.map + pages * page - len;
    memcpy(g.at, b, len);
    return g;
}

/* A file that exercises every reader path: all scalar types, strings,
 * numeric, string and nested arrays, and two tensors. */
static void rich_file(uint8_t **b, size_t *n) {
    static const char *const strs[] = {"x", "yz"};
    static const int32_t i32s[] = {1, 2};
    static const uint8_t nested[] = {0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7, 8};
    gw *w = small_writer();
    gw_u8(w, "u8", 1);
    gw_i16(w, "i16", -2);
    gw_u64(w, "u64", 3);
    gw_f64(w, "f64", 4.0);
    gw_bool(w, "b", 1);
    gw_arr_str(w, "as", strs, 2);
    gw_arr_i32(w, "ai", i32s, 2);
    gw_arr_raw(w, "aa", GGUF_ARRAY, 1, nested, sizeof nested);
    small_tensors(w);
    serialise(w, b, n);
    gw_free(w);
}

Test(damage, every_truncation_fails_cleanly) {
    uint8_t *b;
    size_t n;
    rich_file(&b, &n);
    for (size_t len = 0; len <= n; len++) {
        guarded g = guard_copy(b, len);
        sd_err e = {{0}};
        gguf_file *f = gguf_open_mem(g.at, len, "prefix", &e);
        if (len == n) {
            cr_assert(f, "the whole file must open: %s", e.msg);
            cr_assert_eq(memcmp(tensor(f, "b.weight")->data, k_b, sizeof k_b), 0);
            gguf_close(f);
        } else {
            if (f) gguf_close(f);
            cr_assert_null(f, "prefix of %zu of %zu bytes was accepted", len, n);
            cr_assert_neq(e.msg[0], 0, "prefix of %zu bytes: empty message", len);
        }
        munmap(g.map, g.map_len);
    }
    free(b);
}

/* Any single byte set to 0x00, 0x7f, 0x80 or 0xff: the reader may accept
 * or refuse, but must neither crash nor read out of bounds, and a refusal
 * must say why. */
Test(damage, every_byte_corruption_is_safe) {
    static const uint8_t vals[] = {0x00, 0x7f, 0x80, 0xff};
    uint8_t *b;
    size_t n;
    rich_file(&b, &n);
    guarded g = guard_copy(b, n);
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            g.at[i] = vals[k];
            sd_err e = {{0}};
            gguf_file *f = gguf_open_mem(g.at, n, "corrupt", &e);
            if (f)
                gguf_close(f);
            else
                cr_assert_neq(e.msg[0], 0, "byte %zu = %#x: empty message", i, vals[k]);
        }
        g.at[i] = b[i];
    }
    munmap(g.map, g.map_len);
    free(b);
}

/* ---- gguf_open on things that are not GGUF files ------------------------- */

Test(open, missing_file) {
    sd_err e = {{0}};
    cr_assert_null(gguf_open(TMP_DIR "/definitely-not-here.gguf", &e));
    cr_assert(matches("no such file", e.msg), "%s", e.msg);
}

Test(open, directory) {
    sd_err e = {{0}};
    cr_assert_null(gguf_open("tests", &e));
    cr_assert(matches("directory", e.msg), "%s", e.msg);
}

/* A FIFO with no writer: opening it for reading would block forever, so it
 * must be refused by type. .timeout turns a regression into a failure
 * instead of a hang. */
Test(open, fifo_is_refused_not_waited_on, .timeout = 10) {
    mkdir(TMP_DIR, 0755);
    char path[64];
    snprintf(path, sizeof path, TMP_DIR "/gguf_fifo_%ld", (long)getpid());
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
    sd_err e = {{0}};
    gguf_file *f = gguf_open(path, &e);
    unlink(path);
    cr_assert_null(f);
    cr_assert(matches("not a regular file \\(a FIFO\\)", e.msg), "%s", e.msg);
}

Test(open, character_device) {
    sd_err e = {{0}};
    cr_assert_null(gguf_open("/dev/null", &e));
    cr_assert(matches("not a regular file \\(a character device\\)", e.msg), "%s", e.msg);
}

Test(open, empty_file) {
    mkdir(TMP_DIR, 0755);
    char path[64];
    snprintf(path, sizeof path, TMP_DIR "/gguf_empty_%ld.gguf", (long)getpid());
    FILE *fp = fopen(path, "wb");
    cr_assert(fp, "%s: %s", path, strerror(errno));
    cr_assert_eq(fclose(fp), 0);
    sd_err e = {{0}};
    gguf_file *f = gguf_open(path, &e);
    unlink(path);
    cr_assert_null(f);
    cr_assert(matches("\\b0 bytes|empty", e.msg), "%s", e.msg);
}

/* ---- synthetic models ---------------------------------------------------- */

static gguf_file *open_synth(const synth_cfg *c, uint8_t **bytes) {
    size_t n;
    sd_err e = {{0}};
    cr_assert_eq(synth_model_bytes(c, bytes, &n, &e), 0, "synth: %s", e.msg);
    return open_ok(*bytes, n);
}

static void check_synth(uint32_t type, int tied) {
    synth_cfg c = synth_default();
    c.wtype = type;
    c.tied = tied;
    if (c.dim % (int)sd_wtype_block(type)) c.dim = c.ffn = 256; /* the K-quants' super-blocks */
    uint8_t *bytes;
    gguf_file *f = open_synth(&c, &bytes);
    int kv_dim = c.dim / c.n_heads * c.n_kv_heads;
    cr_assert_eq(f->n_tensors, (uint64_t)(2 + !tied + 9 * c.n_layers));
    expect_str(f, "general.architecture", "llama");
    expect_str(f, "tokenizer.ggml.model", "llama");
    cr_assert_eq(get_int(f, "llama.embedding_length"), c.dim);
    cr_assert_eq(get_int(f, "llama.block_count"), c.n_layers);
    cr_assert_eq(get_int(f, "llama.feed_forward_length"), c.ffn);
    cr_assert_eq(get_int(f, "llama.attention.head_count"), c.n_heads);
    cr_assert_eq(get_int(f, "llama.attention.head_count_kv"), c.n_kv_heads);
    cr_assert_eq(get_int(f, "llama.rope.dimension_count"), c.dim / c.n_heads);
    cr_assert_eq(get_int(f, "llama.context_length"), c.ctx);
    cr_assert_eq(get_int(f, "tokenizer.ggml.bos_token_id"), 1);
    cr_assert_eq(get_int(f, "tokenizer.ggml.eos_token_id"), 2);
    cr_assert_float_eq(get_float(f, "llama.rope.freq_base"), c.rope_base, 1e-3);
    cr_assert_float_eq(get_float(f, "llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
    sd_err e = {{0}};
    const gguf_value *v;
    cr_assert_eq(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_STRING, &v, &e), 0, "%s", e.msg);
    cr_assert_eq(v->v.arr.n, (uint64_t)c.vocab);
    cr_assert(gguf_str_eq(v->v.arr.strs[SYNTH_FIRST_PIECE], "\xe2\x96\x81"));

    cr_assert_eq(gguf_find_tensor(f, "output.weight") == NULL, tied);
    const gguf_tensor *t = tensor(f, "token_embd.weight");
    cr_assert(t->ne[0] == (uint64_t)c.dim && t->ne[1] == (uint64_t)c.vocab);
    cr_assert_eq(t->type, type);
    cr_assert_eq(tensor(f, "output_norm.weight")->type, SD_F32);
    t = tensor(f, "blk.1.attn_k.weight");
    cr_assert(t->ne[0] == (uint64_t)c.dim && t->ne[1] == (uint64_t)kv_dim);
    t = tensor(f, "blk.1.ffn_down.weight");
    cr_assert(t->ne[0] == (uint64_t)c.ffn && t->ne[1] == (uint64_t)c.dim);
    cr_assert_eq(t->type, type);
    cr_assert_eq(tensor(f, "blk.0.ffn_norm.weight")->ne[0], (uint64_t)c.dim);
    gguf_close(f);
    free(bytes);
}

Test(synth, f32) { check_synth(SD_F32, 0); }
Test(synth, f16_tied) { check_synth(SD_F16, 1); }
Test(synth, bf16) { check_synth(SD_BF16, 0); }
Test(synth, q8_0) { check_synth(SD_Q8_0, 0); }
Test(synth, q4_0) { check_synth(SD_Q4_0, 1); }
Test(synth, q4_1) { check_synth(SD_Q4_1, 0); }
Test(synth, q5_0) { check_synth(SD_Q5_0, 0); }
Test(synth, q4_k_tied) { check_synth(SD_Q4_K, 1); }
Test(synth, q6_k) { check_synth(SD_Q6_K, 0); }

/* F32 weights lie in +-1/sqrt(cols); norms in 1 +- 0.1. */
Test(synth, weight_scale) {
    synth_cfg c = synth_default();
    uint8_t *bytes;
    gguf_file *f = open_synth(&c, &bytes);
    const gguf_tensor *t = tensor(f, "blk.0.ffn_down.weight");
    const float *x = t->data;
    float lim = 1.0f / sqrtf((float)c.ffn), amax = 0;
    for (uint64_t i = 0; i < t->ne[0] * t->ne[1]; i++) amax = fmaxf(amax, fabsf(x[i]));
    cr_assert(amax <= lim && amax > 0.9f * lim, "max |w| %g, limit %g", amax, lim);
    x = tensor(f, "output_norm.weight")->data;
    for (int i = 0; i < c.dim; i++) cr_assert(fabsf(x[i] - 1.0f) <= 0.1f);
    gguf_close(f);
    free(bytes);
}

Test(synth, deterministic) {
    synth_cfg c = synth_default();
    c.wtype = SD_Q4_1;
    uint8_t *a, *b, *d;
    size_t na, nb, nd;
    sd_err e = {{0}};
    cr_assert_eq(synth_model_bytes(&c, &a, &na, &e), 0, "%s", e.msg);
    cr_assert_eq(synth_model_bytes(&c, &b, &nb, &e), 0, "%s", e.msg);
    c.seed = 2;
    cr_assert_eq(synth_model_bytes(&c, &d, &nd, &e), 0, "%s", e.msg);
    cr_assert(na == nb && memcmp(a, b, na) == 0, "same seed, different bytes");
    cr_assert(na == nd && memcmp(a, d, na) != 0, "different seeds, same bytes");
    free(a);
    free(b);
    free(d);
}

Test(synth, bad_configs) {
    sd_err e = {{0}};
    uint8_t *b;
    size_t n;
    synth_cfg c = synth_default();
    c.vocab = SYNTH_FIRST_PIECE - 1;
    cr_assert_eq(synth_model_bytes(&c, &b, &n, &e), -1);
    cr_assert(matches("vocab", e.msg), "%s", e.msg);
    c = synth_default();
    c.n_kv_heads = 3;
    cr_assert_eq(synth_model_bytes(&c, &b, &n, &e), -1);
    cr_assert(matches("n_kv_heads", e.msg), "%s", e.msg);
    c = synth_default();
    c.wtype = SD_Q8_0;
    c.ffn = 100;
    cr_assert_eq(synth_model_bytes(&c, &b, &n, &e), -1);
    cr_assert(matches("multiple", e.msg), "%s", e.msg);
}

typedef struct piece {
    char s[SYNTH_PIECE_MAX];
    int id;
} piece;

static int cmp_piece(const void *a, const void *b) {
    return strcmp(((const piece *)a)->s, ((const piece *)b)->s);
}

/* Id of s in the sorted vocabulary, or -1. */
static int piece_id(const piece *sorted, int nv, const char *s) {
    piece key;
    snprintf(key.s, sizeof key.s, "%s", s);
    const piece *hit = bsearch(&key, sorted, (size_t)nv, sizeof *sorted, cmp_piece);
    return hit ? hit->id : -1;
}

/* The whole vocabulary: distinct pieces, and every plain piece longer than
 * one character is two earlier plain pieces joined, so SentencePiece merges
 * can reach it. */
Test(synth, vocabulary) {
    int nv = synth_max_vocab();
    piece *p = malloc((size_t)nv * sizeof *p);
    piece *sorted = malloc((size_t)nv * sizeof *sorted);
    cr_assert(p && sorted);
    for (int i = 0; i < nv; i++) {
        cr_assert_eq(synth_piece(i, p[i].s), 0, "piece %d", i);
        p[i].id = i;
    }
    char buf[SYNTH_PIECE_MAX];
    cr_assert_eq(synth_piece(nv, buf), -1);
    cr_assert_eq(synth_piece(-1, buf), -1);
    cr_assert_str_eq(p[0].s, "<unk>");
    cr_assert_str_eq(p[2].s, "</s>");
    cr_assert_str_eq(p[3 + 0x41].s, "<0x41>");
    memcpy(sorted, p, (size_t)nv * sizeof *p);
    qsort(sorted, (size_t)nv, sizeof *sorted, cmp_piece);
    for (int i = 1; i < nv; i++)
        cr_assert_str_neq(sorted[i - 1].s, sorted[i].s, "duplicate piece '%s'", sorted[i].s);
    for (int i = SYNTH_FIRST_PIECE; i < nv; i++) {
        const char *s = p[i].s;
        size_t len = strlen(s);
        int chars = 0, split = 0;
        for (size_t k = 0; k < len; k++) chars += ((unsigned char)s[k] & 0xc0) != 0x80;
        for (size_t k = 1; chars > 1 && k < len && !split; k++) {
            if (((unsigned char)s[k] & 0xc0) == 0x80) continue; /* inside a character */
            char head[SYNTH_PIECE_MAX];
            snprintf(head, sizeof head, "%.*s", (int)k, s);
            int hi = piece_id(sorted, nv, head), ti = piece_id(sorted, nv, s + k);
            split = hi >= SYNTH_FIRST_PIECE && hi < i && ti >= SYNTH_FIRST_PIECE && ti < i;
        }
        cr_assert(chars == 1 || split, "piece %d '%s' is not two earlier pieces", i, s);
    }
    free(p);
    free(sorted);
}
