/* Whole-model checks against the independent reference in tests/data
 * (llama.cpp build 4748, F32 compute; see tests/data/README.md).
 *
 * Logit tolerances (max |ours - golden| over all 512 logits of a row):
 *   F32 file    2e-4  golden prints 6 significant digits; the reference and
 *                     we both compute in F32 (measured: 1.0e-4).
 *   F16 file    3e-2  the reference rounds activations to F16 before F16
 *                     products, we keep F32 (measured: 4.8e-3).
 *   Q8_0 file   0.5   both sides quantize activations to 8 bits, and that
 *                     rounding is discontinuous: in this 5-layer model any
 *                     rounding difference upstream (the reference also rounds
 *                     the F16 ffn_down inputs to F16 and keeps block scales
 *                     in F16) flips downstream int8 roundings. A float64
 *                     reference with unquantized activations (numpy, the same
 *                     weights) differs from the golden by 0.149 itself;
 *                     emulating the reference's roundings exactly in that
 *                     numpy model reproduces the golden to 5e-5. Over the
 *                     correct summation orders we have (the file layout on
 *                     all four ISA levels: 0.307; the repacked layout,
 *                     cpu.h: 0.307 scalar and AVX2, 0.395 AVX-512, whose
 *                     logits for an 8-token prompt differ from AVX2's by
 *                     4e-6 before any flip) the error spans 0.31-0.40; a
 *                     wrong sum moves logits by whole units.
 * Greedy ids must equal the golden 64 ids; a divergence is accepted only at
 * a step where our own top-2 logit gap is below the file's tolerance (then
 * either choice is within numerical noise) and the check stops there. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/decode/decode.h"
#include "engine/model/model.h"
#include "engine/session/device.h"
#include "tests/util/json.h"
#include "tests/util/synth_model.h"

#define GOLDEN "tests/data/greedy.jsonl"
#define MODELS "tests/data/models/"

static double tol_for(const char *model) {
    return strstr(model, "q8_0") ? 0.5 : strstr(model, "f16") ? 3e-2 : 2e-4;
}

static sd_model *load(const char *file, int threads) {
    char path[256];
    snprintf(path, sizeof path, MODELS "%s", file);
    sd_err e = {{0}};
    sd_model_opts o = {.n_ctx = 0};
    sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, threads, &e), &o, &e);
    cr_assert(m, "load %s: %s", path, e.msg);
    return m;
}

static int32_t *ids_of(const json *arr, int *n) {
    *n = (int)json_len(arr);
    int32_t *ids = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *ids);
    cr_assert(ids);
    for (int i = 0; i < *n; i++) ids[i] = (int32_t)json_num(json_at(arr, (size_t)i));
    return ids;
}

static double top2_gap(const float *x, int n) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (x[i] > a) {
            b = a;
            a = x[i];
        } else if (x[i] > b) {
            b = x[i];
        }
    }
    return (double)a - (double)b;
}

/* Golden logits: row 0 after the prompt, row i after greedy_ids[i-1]. */
static void check_logits(sd_model *m, const json *rec, double tol, double *worst) {
    int np, ng;
    int32_t *prompt = ids_of(json_get(rec, "prompt_ids"), &np);
    int32_t *greedy = ids_of(json_get(rec, "greedy_ids"), &ng);
    const json *gl = json_get(rec, "logits");
    int vocab = m->hp.vocab;
    float *logits = malloc((size_t)vocab * sizeof *logits);
    sd_err e = {{0}};
    for (size_t r = 0; r < json_len(gl); r++) {
        int rc = r == 0 ? sd_forward_ex(m, m->kv, prompt, np, 0, 0, logits, 1, &e)
                        : sd_forward_ex(m, m->kv, &greedy[r - 1], 1, np + (int)r - 1, 0, logits, 1, &e);
        cr_assert_eq(rc, 0, "forward: %s", e.msg);
        const json *row = json_at(gl, r);
        cr_assert_eq(json_len(row), (size_t)vocab);
        for (int i = 0; i < vocab; i++) {
            double d = fabs((double)logits[i] - json_num(json_at(row, (size_t)i)));
            if (d > *worst) *worst = d;
            cr_assert(d <= tol, "%s row %zu logit %d: %g vs %g (tol %g)",
                      json_str(json_get(rec, "prompt"), NULL), r, i, logits[i],
                      json_num(json_at(row, (size_t)i)), tol);
        }
    }
    free(logits);
    free(prompt);
    free(greedy);
}

/* Greedy ids vs golden, with the divergence rule above. */
static void check_greedy(sd_model *m, const json *rec, double tol, int use_cache) {
    int np, ng;
    int32_t *prompt = ids_of(json_get(rec, "prompt_ids"), &np);
    int32_t *want = ids_of(json_get(rec, "greedy_ids"), &ng);
    int32_t *got = malloc((size_t)ng * sizeof *got);
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = use_cache};
    sd_gen_stats st;
    sd_err e = {{0}};
    int n = sd_autoregressive_generate(prompt, np, m, ng, &cfg, got, &st, &e);
    cr_assert_eq(n, ng, "generate: %d (%s)", n, e.msg);
    for (int i = 0; i < ng; i++) {
        if (got[i] == want[i]) continue;
        /* recompute our logits at the divergence to judge the gap */
        int32_t *seq = malloc((size_t)(np + i) * sizeof *seq);
        memcpy(seq, prompt, (size_t)np * sizeof *seq);
        memcpy(seq + np, got, (size_t)i * sizeof *seq);
        float *logits = malloc((size_t)m->hp.vocab * sizeof *logits);
        cr_assert_eq(sd_forward_ex(m, m->kv, seq, np + i, 0, 0, logits, 1, &e), 0);
        double gap = top2_gap(logits, m->hp.vocab);
        cr_assert(gap < tol, "%s: greedy id %d differs (%d vs golden %d) with top-2 gap %g >= %g",
                  json_str(json_get(rec, "prompt"), NULL), i, got[i], want[i], gap, tol);
        cr_log_info("divergence at %d within tolerance (gap %g)", i, gap);
        free(seq);
        free(logits);
        break;
    }
    free(got);
    free(prompt);
    free(want);
}

static void golden_suite(const char *model_file) {
    json **recs;
    long n = jsonl_read(GOLDEN, &recs);
    cr_assert(n > 0, "cannot read " GOLDEN);
    sd_model *m = load(model_file, 2);
    double tol = tol_for(model_file), worst = 0;
    int seen = 0;
    for (long i = 0; i < n; i++) {
        if (strcmp(json_str(json_get(recs[i], "model"), NULL), model_file)) continue;
        seen++;
        check_logits(m, recs[i], tol, &worst);
        check_greedy(m, recs[i], tol, 1);
    }
    cr_assert_eq(seen, 6);
    cr_log_info("%s: max logit error %g (tolerance %g)", model_file, worst, tol);
    sd_model_free(m);
    jsonl_free(recs, n);
}

Test(golden, f32) { golden_suite("stories260K.gguf"); }
Test(golden, f16) { golden_suite("stories260K-f16.gguf"); }
Test(golden, q8_0) { golden_suite("stories260K-q8_0.gguf"); }

/* The no-cache path recomputes everything; its output must be identical. */
Test(golden, cache_off_equals_cache_on) {
    const char *files[] = {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"};
    int32_t prompt[] = {1, 403, 407, 261, 378};
    for (size_t f = 0; f < 3; f++) {
        sd_model *m = load(files[f], 1);
        int32_t a[40], b[40];
        sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
        sd_gen_stats st;
        sd_err e;
        cr_assert_eq(sd_autoregressive_generate(prompt, 5, m, 40, &cfg, a, &st, &e), 40);
        cfg.use_cache = 0;
        cr_assert_eq(sd_autoregressive_generate(prompt, 5, m, 40, &cfg, b, &st, &e), 40);
        cr_assert_arr_eq(a, b, sizeof a, "%s: cache on/off differ", files[f]);
        cr_assert_eq(st.target_calls, 40);
        sd_model_free(m);
    }
}

/* One call over n tokens equals n calls of one token (and the 1..n-1 rows
 * of a multi-row call equal the single-row calls). */
Test(forward, batched_equals_stepwise) {
    sd_model *m = load("stories260K.gguf", 2);
    int32_t toks[12] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315};
    int v = m->hp.vocab;
    float *all = malloc(12 * (size_t)v * sizeof(float));
    float *one = malloc((size_t)v * sizeof(float));
    sd_err e;
    cr_assert_eq(sd_forward(m, toks, 12, 0, all, &e), 0, "%s", e.msg);
    for (int i = 0; i < 12; i++) {
        cr_assert_eq(sd_forward_ex(m, m->kv, &toks[i], 1, i, 0, one, 1, &e), 0);
        for (int j = 0; j < v; j++)
            cr_assert_float_eq(one[j], all[(size_t)i * v + j], 1e-4, "row %d logit %d", i, j);
    }
    free(all);
    free(one);
    sd_model_free(m);
}

Test(forward, bad_inputs) {
    sd_model *m = load("stories260K.gguf", 1);
    float *lg = malloc((size_t)m->hp.vocab * sizeof(float));
    sd_err e;
    int32_t bad = 512, ok = 1;
    cr_assert_eq(sd_forward(m, &bad, 1, 0, lg, &e), -1);
    cr_assert(strstr(e.msg, "outside the vocabulary"), "%s", e.msg);
    cr_assert_eq(sd_forward(m, &ok, 1, 5, lg, &e), -1);
    cr_assert(strstr(e.msg, "cache holds"), "%s", e.msg);
    cr_assert_eq(sd_forward(m, &ok, 0, 0, lg, &e), -1);
    cr_assert_eq(sd_forward_ex(m, m->kv, &ok, 1, 0, 0, lg, 2, &e), -1);
    free(lg);
    sd_model_free(m);
}

Test(forward, context_full_stops_generation) {
    sd_err e;
    sd_model_opts o = {.n_ctx = 16};
    sd_model *m = sd_model_load(MODELS "stories260K.gguf", sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    int32_t prompt[] = {1, 403, 407, 261, 378};
    int32_t out[64];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_gen_stats st;
    int n = sd_autoregressive_generate(prompt, 5, m, 64, &cfg, out, &st, &e);
    cr_assert_eq(n, 12, "got %d: %s", n, e.msg);
    cr_assert(st.hit_context);
    int32_t longp[20] = {1};
    cr_assert_eq(sd_autoregressive_generate(longp, 20, m, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "longer than the context"), "%s", e.msg);
    sd_model_free(m);
}

Test(model, load_errors_name_the_file) {
    sd_err e;
    sd_model_opts o = {.n_ctx = 0};
    cr_assert_null(sd_model_load("tests/data/no-such.gguf", sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e));
    cr_assert(strstr(e.msg, "tests/data/no-such.gguf: cannot open"), "%s", e.msg);
    cr_assert_null(sd_model_load("Makefile", sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e));
    cr_assert(strstr(e.msg, "Makefile: not a GGUF file"), "%s", e.msg);
    o.n_ctx = 4096;
    cr_assert_null(sd_model_load(MODELS "stories260K.gguf", sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e));
    cr_assert(strstr(e.msg, "context_length 2048"), "%s", e.msg);
}

/* The architecture is read from general.architecture and names the keys;
 * anything but llama and qwen2 is refused by name. The synthetic llama
 * file is patched in place ("llama" has the length of both replacements). */
static sd_model *load_patched_arch(const char *arch, sd_err *e) {
    synth_cfg c = synth_default();
    uint8_t *bytes;
    size_t len;
    cr_assert_eq(synth_model_bytes(&c, &bytes, &len, e), 0, "%s", e->msg);
    uint8_t *v = memmem(bytes, len, "llama", 5); /* the first is the architecture's value */
    cr_assert(v);
    memcpy(v, arch, 5);
    gguf_file *f = gguf_open_mem(bytes, len, "patched", e);
    cr_assert(f, "%s", e->msg);
    sd_model_opts o = {.n_ctx = 16};
    sd_model *m = sd_model_from_gguf(f, sd_backend_open(SD_DEVICE_CPU, 1, e), &o, e);
    free(bytes);
    return m;
}

Test(model, architecture_is_named_when_refused) {
    sd_err e;
    cr_assert_null(load_patched_arch("mamba", &e));
    cr_assert(strstr(e.msg, "architecture 'mamba' is not supported (supported: llama, qwen2)"), "%s",
              e.msg);
    cr_assert_null(load_patched_arch("qwen2", &e));
    cr_assert(strstr(e.msg, "missing required key 'qwen2.embedding_length'"), "%s", e.msg);
}
