/* Limits: every input that is too big, too small or out of range gets a
 * clear error naming what was wrong, or a documented clamp (README
 * "## Errors"). Each limit is checked where a library caller meets it and,
 * where a user meets it, through the binary ($SPECDEC_BIN, default
 * ./specdec, as in test_cli.c). */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/decode/decode.h"
#include "engine/decode/ngram.h"
#include "engine/model/model.h"
#include "engine/session/device.h"
#include "engine/sampling/sampler_host.h"
#include "engine/format/gguf_writer.h"
#include "tests/util/json.h"
#include "tests/util/test_util.h"
#include "tests/util/synth_model.h"

#define M "tests/data/models/"
#define TMP "tests/tmp/limits"

/* ---- the binary ---------------------------------------------------------- */
typedef tu_run run_out;

static run_out run(const char *args) {
    run_out r = tu_specdec(args, NULL);
    cr_assert(r.out && r.err, "could not run specdec %s", args);
    return r;
}

static void done(run_out *r) { tu_run_free(r); }

/* The binary fails with exit code rc and msg on stderr. */
static void expect_error(const char *args, int rc, const char *msg) {
    run_out r = run(args);
    cr_assert_eq(r.rc, rc, "%s: exit %d, stderr: %s", args, r.rc, r.err);
    cr_assert(strstr(r.err, msg), "%s: stderr lacks '%s':\n%s", args, msg, r.err);
    done(&r);
}

static sd_model *load(const char *name, int n_ctx) {
    sd_err e;
    sd_model_opts o = {.n_ctx = n_ctx};
    sd_model *m = sd_model_load(name, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

/* ---- prompt and generation length against the context ------------------- */
static const int32_t prompt[] = {1, 403, 407, 261, 378};
#define NP 5

Test(limits, prompt_longer_than_the_context) {
    /* every strategy refuses it the same way */
    sd_model *m = load(M "stories260K.gguf", 4);
    sd_lm lm = {m, m->kv, 0, 0};
    sd_err e;
    sd_gen_stats st;
    int32_t out[4];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    cr_assert_eq(sd_autoregressive_generate(prompt, NP, m, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "prompt of 5 tokens is longer than the context (4)"), "%s", e.msg);
    sd_spec_opts so = {{2, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &lm, &lm, &so, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "longer than the context"), "%s", e.msg);
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, 4, &e);
    cr_assert(store, "%s", e.msg);
    sd_nasd_opts no = {{2, 0, 1, 0}, 1, 0};
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &lm, &no, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "longer than the context"), "%s", e.msg);
    sd_beam_opts bo = {2, 2, 5.0, 1.2};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &bo, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "longer than the context"), "%s", e.msg);
    sd_ngram_free(store);
    sd_model_free(m);

    /* the binary says so before it echoes anything */
    run_out r = run("-m " M "stories260K.gguf -t 1 --ctx 8 -p 'Once upon a time there was a "
                    "little girl named Lily who'");
    cr_assert_eq(r.rc, 1, "%s", r.err);
    cr_assert(strstr(r.err, "prompt of 17 tokens is longer than the context (8; --ctx, at most "
                            "2048 for this model)"),
              "%s", r.err);
    cr_assert_str_empty(r.out);
    done(&r);
}

/* Past the context, generation stops (documented clamp): the last token is
 * the one the logits of the last position give, so a context of n_ctx ends
 * at n_ctx + 1 tokens, in every strategy alike, with gamma clamped to what
 * is left. */
Test(limits, generation_stops_at_the_context_end) {
    run_out r = run("-m " M "stories260K.gguf -t 1 --ctx 16 -p 'Once upon a time' -n 100 "
                    "--strategy ar,spec,nasd,beam --draft-layers 1 --gamma 200 --jsonl");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    int lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        json *j = json_parse(line, strlen(line));
        cr_assert(j, "not JSON: %s", line);
        const char *name = json_str(json_get(j, "strategy"), NULL);
        int prompt_tokens = (int)json_num(json_get(j, "prompt_tokens"));
        cr_assert_eq(json_num(json_get(j, "hit_context")), 1, "%s", line);
        cr_assert_eq((int)json_num(json_get(j, "new_tokens")), 16 - prompt_tokens + 1, "%s", line);
        if (strcmp(name, "ar")) cr_assert_eq(json_num(json_get(j, "same_as_ar")), 1, "%s", line);
        json_free(j);
    }
    cr_assert_eq(lines, 4);
    done(&r);

    r = run("-m " M "stories260K.gguf -t 1 --ctx 16 -p 'Once upon a time' -n 100");
    cr_assert_eq(r.rc, 0, "%s", r.err);
    cr_assert(strstr(r.err, "(context full)"), "%s", r.err);
    done(&r);
}

/* ---- strategy parameters --------------------------------------------------- */
Test(limits, gamma_beams_and_ngram_order) {
    expect_error("-m " M "stories260K.gguf -p hi --gamma 257", 2, "--gamma: 257 is out of range [0, 256]");
    expect_error("-m " M "stories260K.gguf -p hi --gamma -3", 2, "--gamma: -3 is out of range");
    expect_error("-m " M "stories260K.gguf -p hi --beams 0", 2, "--beams: 0 is out of range [1, 128]");
    expect_error("-m " M "stories260K.gguf -p hi --ngram-n 1", 2, "--ngram-n: 1 is out of range [2, ");

    sd_model *m = load(M "stories260K.gguf", 64);
    sd_lm lm = {m, m->kv, 0, 0};
    sd_err e;
    sd_gen_stats st;
    int32_t out[4];
    sd_gen_cfg cfg = {.pad_id = -1, .use_cache = 1};
    sd_spec_opts so = {{0, 0, 1, 0}, 0, 0};
    cr_assert_eq(sd_speculative_generate(prompt, NP, &lm, &lm, &so, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "gamma 0 must be at least 1"), "%s", e.msg);
    sd_ngram *store = sd_ngram_create(SD_NGRAM_MULTI, 3, 64, &e);
    cr_assert(store, "%s", e.msg);
    sd_nasd_opts no = {{0, 0, 1, 0}, 1, 0};
    cr_assert_eq(sd_ngram_assisted_generate(prompt, NP, store, &lm, &no, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "gamma 0 must be at least 1"), "%s", e.msg);
    sd_ngram_free(store);
    sd_beam_opts bo = {0, 2, 5.0, 1.2};
    cr_assert_eq(sd_beam_search_generate(prompt, NP, m, &bo, 4, &cfg, out, &st, &e), -1);
    cr_assert(strstr(e.msg, "num_beams 0 must be at least 1"), "%s", e.msg);
    for (int n = -1; n < 2; n++) {
        cr_assert_null(sd_ngram_create(SD_NGRAM_ONE, n, 64, &e));
        cr_assert(strstr(e.msg, "n-gram N must be in [2, "), "%s", e.msg);
    }
    sd_model_free(m);
}

/* ---- sampler parameters ---------------------------------------------------- */
Test(limits, sampler_parameters) {
    static const struct {
        const char *sampler, *arg, *msg;
    } bad[] = {
        {"multinomial", "temperature=0", "multinomial: temperature = 0 is out of range (0, inf)"},
        {"multinomial", "temperature=-1", "temperature = -1 is out of range (0, inf)"},
        {"multinomial", "temperature=nan", "temperature = 'nan' is not a finite number"},
        {"top_k", "temperature=NaN", "temperature = 'NaN' is not a finite number"},
        {"nucleus", "top_p=0", "nucleus: top_p = 0 is out of range (0, 1]"},
        {"nucleus", "top_p=1.5", "top_p = 1.5 is out of range (0, 1]"},
        {"nucleus", "top_p=-0.1", "top_p = -0.1 is out of range (0, 1]"},
        {"top_k_nucleus", "top_p=nan", "top_p = 'nan' is not a finite number"},
        {"top_k", "top_k=0", "top_k: top_k = 0 is out of range [1, "},
        {"top_k", "top_k=-5", "top_k = -5 is out of range [1, "},
        {"top_k_nucleus", "top_k=0", "top_k = 0 is out of range [1, "},
    };
    const char *dirs[] = {"plugins"};
    sd_err e;
    sd_sampler_set *s = sd_samplers_open(dirs, 1, &e);
    cr_assert(s, "%s", e.msg);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kv[] = {bad[i].arg};
        cr_assert_null(sd_sampler_create(s, bad[i].sampler, kv, 1, 512, &e), "%s %s accepted",
                       bad[i].sampler, bad[i].arg);
        cr_assert(strstr(e.msg, bad[i].msg), "%s %s: '%s'", bad[i].sampler, bad[i].arg, e.msg);
    }
    /* the edges that are allowed */
    const char *ok[] = {"top_p=1", "temperature=1e-3"};
    sd_sampler *p = sd_sampler_create(s, "nucleus", ok, 2, 512, &e);
    cr_assert(p, "%s", e.msg);
    sd_sampler_destroy(p);
    sd_samplers_close(s);

    /* A bad value is a usage error, found before the model is opened (this
     * one does not exist): exit 2, the flag and the value named. */
    expect_error("-m tests/data/none.gguf -p hi --sampler nucleus --sampler-arg top_p=0", 2,
                 "specdec: --sampler-arg top_p=0: nucleus: top_p = 0 is out of range (0, 1]");
    expect_error("-m " M "stories260K.gguf -p hi --sampler multinomial --sampler-arg temperature=nan",
                 2, "specdec: --sampler-arg temperature=nan: multinomial: temperature = 'nan' is "
                    "not a finite number");
}

/* A plugin that passes the loader's self-test (64-token rows) and then
 * misbehaves on the model's real rows: NaN probabilities or an id past the
 * vocabulary. Generation stops with the plugin named; nothing crashes. */
static const char bad_plugin_src[] =
    "#include \"samplers/sampler.h\"\n"
    "#include \"samplers/sampler_util.h\"\n"
    "#define STR2(x) #x\n"
    "#define STR(x) STR2(x)\n"
    "static const sd_sampler_param params[1] = {\n"
    "    {\"temperature\", SD_SAMPLER_FLOAT, SD_SAMPLER_MIN_EXCLUSIVE, 1.0, 0.0, 10.0, \"t\"}};\n"
    "static void *create(const sd_sampler_value *v, int max_vocab, char *err, size_t errlen) {\n"
    "    (void)v; (void)max_vocab; (void)err; (void)errlen;\n"
    "    static int handle;\n"
    "    return &handle;\n"
    "}\n"
    "static void destroy(void *h) { (void)h; }\n"
    "static int process(void *h, const float *l, float *p, int rows, int n) {\n"
    "    (void)h;\n"
    "    for (int r = 0; r < rows; r++)\n"
    "        if (sd_su_softmax(l + (size_t)r * n, p + (size_t)r * n, n, 1.0)) return -1;\n"
    "#ifdef BAD_NAN\n"
    "    if (n > 64) p[0] = NAN;\n"
    "#endif\n"
    "    return 0;\n"
    "}\n"
    "static int32_t sample(void *h, const float *p, int n, sd_sampler_rng *rng) {\n"
    "    (void)h;\n"
    "#ifdef BAD_ID\n"
    "    if (n > 64) return n + 7;\n"
    "#endif\n"
    "    return sd_su_sample_cdf(p, n, rng);\n"
    "}\n"
    "static const sd_sampler_desc d = {SD_SAMPLER_ABI_VERSION, sizeof(sd_sampler_desc),\n"
    "    STR(NAME), \"misbehaves past 64 tokens\", 0, 1, params, create, destroy, process, sample};\n"
    "const sd_sampler_desc *sd_logits_processor_v1(void) { return &d; }\n";

static void build_plugin(const char *dir, const char *name, const char *defs) {
    char src[256], cmd[1024];
    snprintf(src, sizeof src, "%s/%s.c", dir, name);
    FILE *f = fopen(src, "w");
    cr_assert(f, "cannot write %s: %s", src, strerror(errno));
    fputs(bad_plugin_src, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -O1 -fPIC -shared -I. -DNAME=%s %s '%s' -lm -o '%s/%s.so'", name,
             defs, src, dir, name);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(limits, plugin_returning_nan_or_a_bad_id) {
    char dir[64], cmd[256], args[512];
    snprintf(dir, sizeof dir, TMP "_plugins.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    build_plugin(dir, "nan_probs", "-DBAD_NAN");
    build_plugin(dir, "bad_id", "-DBAD_ID");

    snprintf(args, sizeof args, "-m " M "stories260K.gguf -p hi -n 4 --plugin-dir %s --sampler nan_probs", dir);
    expect_error(args, 1,
                 "specdec: ar: nan_probs: process returned an invalid distribution: row 0: "
                 "probs[0] = nan");
    snprintf(args, sizeof args, "-m " M "stories260K.gguf -p hi -n 4 --plugin-dir %s --sampler bad_id", dir);
    expect_error(args, 1, "specdec: ar: bad_id: sample returned 519, outside [0, 512)");
    /* speculative decoding checks the draft and target rows the same way */
    snprintf(args, sizeof args,
             "-m " M "stories260K.gguf -p hi -n 4 --plugin-dir %s --sampler nan_probs "
             "--strategy spec --draft-layers 1", dir);
    expect_error(args, 1, "specdec: spec: nan_probs: process returned an invalid distribution");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ---- forged files ---------------------------------------------------------- */
/* A header with n_kv = 1 and the raw bytes of that one entry. */
static gguf_file *open_one_kv(const void *kv, size_t n, uint8_t **mem, sd_err *e) {
    gw *w = gw_new(3);
    gw_raw_kv(w, kv, n);
    size_t len;
    cr_assert_eq(gw_bytes(w, mem, &len), 0);
    gw_free(w);
    return gguf_open_mem(*mem, len, "forged", e);
}

static size_t put_key(uint8_t *p, const char *key, uint32_t type) {
    uint64_t n = strlen(key);
    memcpy(p, &n, 8);
    memcpy(p + 8, key, n);
    memcpy(p + 8 + n, &type, 4);
    return 12 + n;
}

Test(limits, metadata_claiming_gigabytes) {
    uint8_t kv[128], *mem;
    sd_err e;
    /* a string of 4 GiB */
    size_t n = put_key(kv, "general.name", GGUF_STRING);
    uint64_t big = 4ull << 30;
    memcpy(kv + n, &big, 8);
    memcpy(kv + n + 8, "tiny", 4);
    cr_assert_null(open_one_kv(kv, n + 12, &mem, &e));
    cr_assert(strstr(e.msg, "general.name: string length 4294967296 at offset"), "%s", e.msg);
    cr_assert(strstr(e.msg, "runs past the end of the file"), "%s", e.msg);
    free(mem);
    /* arrays of 2^40 numbers and 2^30 strings */
    static const struct {
        uint32_t elem;
        uint64_t count;
        const char *msg;
    } arrays[] = {
        {GGUF_UINT32, 1ull << 40, "key 'a': array of 1099511627776 u32 runs past the end of the file"},
        {GGUF_STRING, 1ull << 30, "key 'a': array of 1073741824 string runs past the end of the file"},
        {GGUF_ARRAY, 1ull << 32, "key 'a': array of 4294967296 array runs past the end of the file"},
    };
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        n = put_key(kv, "a", GGUF_ARRAY);
        memcpy(kv + n, &arrays[i].elem, 4);
        memcpy(kv + n + 4, &arrays[i].count, 8);
        memset(kv + n + 12, 0, 16);
        cr_assert_null(open_one_kv(kv, n + 28, &mem, &e));
        cr_assert(strstr(e.msg, arrays[i].msg), "%s", e.msg);
        free(mem);
    }
    /* a metadata count of 2^60 */
    gw *w = gw_new(3);
    gw_str(w, "general.name", "x");
    gw_set_n_kv(w, 1ull << 60);
    size_t len;
    cr_assert_eq(gw_bytes(w, &mem, &len), 0);
    gw_free(w);
    cr_assert_null(gguf_open_mem(mem, len, "forged", &e));
    cr_assert(strstr(e.msg, "metadata count 1152921504606846976 cannot fit in the file"), "%s", e.msg);
    free(mem);

    /* through the binary: the file name, then the reason */
    n = put_key(kv, "general.name", GGUF_STRING);
    memcpy(kv + n, &big, 8);
    memcpy(kv + n + 8, "tiny", 4);
    w = gw_new(3);
    gw_raw_kv(w, kv, n + 12);
    char path[64], args[128];
    snprintf(path, sizeof path, TMP "_huge.%d.gguf", (int)getpid());
    cr_assert_eq(gw_write(w, path), 0);
    gw_free(w);
    snprintf(args, sizeof args, "-m %s -p hi", path);
    char want[256];
    snprintf(want, sizeof want, "specdec: %s: general.name: string length 4294967296", path);
    expect_error(args, 1, want);
    remove(path);
}

/* Writes the synthetic model with the u32 value of one llama.* key replaced
 * (the keys are written as u32 by synth_model.c). */
static uint8_t *synth_with(const char *key, uint32_t value, size_t *len) {
    synth_cfg c = synth_default();
    uint8_t *b;
    sd_err e;
    cr_assert_eq(synth_model_bytes(&c, &b, len, &e), 0, "%s", e.msg);
    size_t k = strlen(key);
    for (size_t i = 8; i + k + 8 <= *len; i++) {
        uint64_t kl;
        memcpy(&kl, b + i - 8, 8);
        uint32_t type;
        memcpy(&type, b + i + k, 4);
        if (kl == k && !memcmp(b + i, key, k) && type == GGUF_UINT32) {
            memcpy(b + i + k + 4, &value, 4);
            return b;
        }
    }
    cr_assert_fail("%s not found in the synthetic model", key);
    return NULL;
}

Test(limits, declared_shapes_disagree_with_the_tensors) {
    static const struct {
        const char *key;
        uint32_t value;
        const char *msg;
    } cases[] = {
        {"llama.embedding_length", 128,
         "tensor 'token_embd.weight' has shape [64, 320, 1, 1], the hyper-parameters say [128, 320]"},
        {"llama.feed_forward_length", 64,
         "tensor 'blk.0.ffn_gate.weight' has shape [64, 96, 1, 1], the hyper-parameters say [64, 64]"},
        {"llama.attention.head_count_kv", 4,
         "tensor 'blk.0.attn_k.weight' has shape [64, 32, 1, 1], the hyper-parameters say [64, 64]"},
        {"llama.block_count", 3, "missing tensor 'blk.2.attn_norm.weight'"},
        {"llama.attention.head_count", 3, "llama.embedding_length 64 is not a multiple of head_count 3"},
        {"llama.embedding_length", 0, "key 'llama.embedding_length' = 0 is out of range [1, 65536]"},
        {"llama.block_count", 1u << 31, "key 'llama.block_count' = 2147483648 is out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *b = synth_with(cases[i].key, cases[i].value, &len);
        sd_err e;
        gguf_file *f = gguf_open_mem(b, len, "synth", &e);
        cr_assert(f, "%s", e.msg);
        sd_model_opts o = {.n_ctx = 16};
        cr_assert_null(sd_model_from_gguf(f, sd_backend_open(SD_DEVICE_CPU, 1, &e), &o, &e), "%s = %u accepted", cases[i].key,
                       cases[i].value);
        cr_assert(strstr(e.msg, cases[i].msg), "%s = %u: '%s'", cases[i].key, cases[i].value,
                  e.msg);
        free(b);
    }

    /* through the binary */
    size_t len;
    uint8_t *b = synth_with("llama.embedding_length", 128, &len);
    char path[64], args[128], want[256];
    snprintf(path, sizeof path, TMP "_shape.%d.gguf", (int)getpid());
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    free(b);
    snprintf(args, sizeof args, "-m %s -p hi", path);
    snprintf(want, sizeof want, "specdec: %s: tensor 'token_embd.weight' has shape [64, 320, 1, 1]", path);
    expect_error(args, 1, want);
    remove(path);
}
