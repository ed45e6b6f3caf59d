/* The GPU check's synthetic models (engine/bench/synth_gguf.c): every preset,
 * shrunk to 2 layers and a 4096-piece vocabulary, and SmolLM2-135M at full
 * size, load on the CPU backend with the preset's shapes, weight types and
 * biases, tokenize, and give finite logits of a sensible size for a
 * prefill and a decode step; the same seed gives the same bytes, another
 * seed other weights; bad usage exits 2. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "engine/model/model.h"
#include "engine/session/device.h"
#include "tests/util/test_util.h"

#ifndef SYNTH_GGUF_BIN
#define SYNTH_GGUF_BIN "build/bench/synth_gguf"
#endif

/* Runs the generator with args (a shell word list); its exit status. */
static int gen(const char *args) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>&1", SYNTH_GGUF_BIN, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void tmp_path(char *buf, size_t cap, const char *name) {
    cr_assert(system("mkdir -p tests/tmp") == 0);
    snprintf(buf, cap, "tests/tmp/synth_%d_%s.gguf", (int)getpid(), name);
}

/* Loads path on the CPU, runs a 5-token prefill and a decode step, and
 * checks the logits; returns the model for further checks. */
static sd_model *load_and_run(const char *path) {
    sd_err e;
    sd_model_opts o = {.n_ctx = 64};
    sd_model *m = sd_model_load(path, sd_backend_open(SD_DEVICE_CPU, 2, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    int32_t *ids = NULL;
    int n = 0;
    cr_assert(sd_tokenize(m->tok, "the cat ran", 11, 0, 0, &ids, &n, &e) == 0, "%s", e.msg);
    cr_assert(n > 0);
    int32_t t[5];
    for (int i = 0; i < 5; i++) t[i] = ids[i % n];
    free(ids);
    int V = m->hp.vocab;
    float *l = malloc((size_t)5 * V * sizeof *l); /* sd_forward: every position's row */
    cr_assert(l);
    cr_assert(sd_forward(m, t, 5, 0, l, &e) == 0, "%s", e.msg);
    cr_assert(sd_forward(m, t, 1, 5, l, &e) == 0, "%s", e.msg);
    double mx = 0;
    for (int i = 0; i < V; i++) {
        cr_assert(isfinite(l[i]), "%s: logit %d is %g", path, i, l[i]);
        if (fabs(l[i]) > mx) mx = fabs(l[i]);
    }
    /* random weights of amplitude 1/sqrt(cols): logits of order one */
    cr_expect(mx > 0.05 && mx < 50, "%s: max |logit| %g", path, mx);
    free(l);
    return m;
}

typedef struct expect {
    const char *preset;
    int arch, dim, n_heads, n_kv, ffn, tied, bias;
    uint32_t wq, wv0, down0, down3, output;
} expect;

static void check_preset(const expect *x) {
    char path[256], args[400];
    tmp_path(path, sizeof path, x->preset);
    snprintf(args, sizeof args, "%s %s --layers 4 --vocab 4096", x->preset, path);
    cr_assert(gen(args) == 0, "synth_gguf %s failed", args);
    sd_model *m = load_and_run(path);
    const sd_hparams *h = &m->hp;
    cr_expect(h->arch == x->arch && h->dim == x->dim && h->n_heads == x->n_heads &&
                  h->n_kv_heads == x->n_kv && h->ffn == x->ffn && h->n_layers == 4 &&
                  h->vocab == 4096,
              "%s: arch %d dim %d heads %d/%d ffn %d layers %d vocab %d", x->preset, h->arch,
              h->dim, h->n_heads, h->n_kv_heads, h->ffn, h->n_layers, h->vocab);
    cr_expect(h->tied_output == x->tied && h->qkv_bias == x->bias, "%s: tied %d bias %d",
              x->preset, h->tied_output, h->qkv_bias);
    cr_expect(h->rope_neox == (x->arch == SD_ARCH_QWEN2), "%s: neox %d", x->preset, h->rope_neox);
    /* the file's types: the CPU backend repacks Q4_K and Q6_K at load */
    const sd_layer *L = m->layers;
    const uint32_t wq = sd_cpu_file_type(L[0].wq.type), wv0 = sd_cpu_file_type(L[0].wv.type),
                   down0 = sd_cpu_file_type(L[0].w_down.type), down3 = sd_cpu_file_type(L[3].w_down.type),
                   out = sd_cpu_file_type(m->output.type);
    cr_expect(wq == x->wq && wv0 == x->wv0 && down0 == x->down0 && down3 == x->down3,
              "%s: types wq %s wv0 %s down0 %s down3 %s", x->preset, sd_wtype_name(wq),
              sd_wtype_name(wv0), sd_wtype_name(down0), sd_wtype_name(down3));
    cr_expect(out == x->output, "%s: output %s", x->preset, sd_wtype_name(out));
    sd_model_free(m);
    unlink(path);
}

/* With 4 layers, llama.cpp's Q4_K_M rule (i < n/8, i >= 7n/8 or
 * (i - n/8) % 3 == 2) gives layers 2 and 3 more bits, not layers 0 and 1.
 * Columns: arch, dim, heads, kv heads, ffn, tied, biases; then the types of
 * wq, layer 0's wv and ffn_down, layer 3's ffn_down, and the output. */
static const expect k_expect[] = {
    {"smollm2-135m-q4_1", SD_ARCH_LLAMA, 576, 9, 3, 1536, 1, 0,
     SD_Q4_1, SD_Q4_1, SD_Q4_1, SD_Q4_1, SD_Q8_0},
    {"llama-1b-bf16", SD_ARCH_LLAMA, 2048, 32, 8, 8192, 1, 0,
     SD_BF16, SD_BF16, SD_BF16, SD_BF16, SD_BF16},
    {"llama-1b-q4_1", SD_ARCH_LLAMA, 2048, 32, 8, 8192, 1, 0,
     SD_Q4_1, SD_Q4_1, SD_Q4_1, SD_Q4_1, SD_Q8_0},
    {"qwen-1.5b-q4_k_m", SD_ARCH_QWEN2, 1536, 12, 2, 8960, 0, 1,
     SD_Q4_K, SD_Q4_K, SD_Q4_K, SD_Q6_K, SD_Q6_K},
    {"qwen-0.5b-q4_k_m", SD_ARCH_QWEN2, 896, 14, 2, 4864, 1, 1,
     SD_Q5_0, SD_Q5_0, SD_Q4_K, SD_Q6_K, SD_Q5_0},
};

Test(synth_gguf, smollm2_small) { check_preset(&k_expect[0]); }
Test(synth_gguf, llama1b_bf16_small) { check_preset(&k_expect[1]); }
Test(synth_gguf, llama1b_q4_1_small) { check_preset(&k_expect[2]); }
Test(synth_gguf, qwen15_small) { check_preset(&k_expect[3]); }
Test(synth_gguf, qwen05_small) { check_preset(&k_expect[4]); }

Test(synth_gguf, smollm2_full_size) {
    char path[256], args[400];
    tmp_path(path, sizeof path, "smol_full");
    snprintf(args, sizeof args, "smollm2-135m-q4_1 %s", path);
    cr_assert(gen(args) == 0);
    sd_model *m = load_and_run(path);
    cr_expect(m->hp.n_layers == 30 && m->hp.vocab == 49152, "layers %d vocab %d",
              m->hp.n_layers, m->hp.vocab);
    /* the real file reads 96.6 MB per token */
    double mb = (double)sd_model_weight_bytes(m) / 1e6;
    cr_expect(mb > 90 && mb < 100, "%.1f MB per token", mb);
    sd_model_free(m);
    unlink(path);
}

Test(synth_gguf, seed_decides_the_bytes) {
    char a[256], b[256], c[256], args[400];
    tmp_path(a, sizeof a, "seed_a");
    tmp_path(b, sizeof b, "seed_b");
    tmp_path(c, sizeof c, "seed_c");
    snprintf(args, sizeof args, "qwen-0.5b-q4_k_m %s --layers 1 --vocab 300", a);
    cr_assert(gen(args) == 0);
    snprintf(args, sizeof args, "qwen-0.5b-q4_k_m %s --layers 1 --vocab 300", b);
    cr_assert(gen(args) == 0);
    snprintf(args, sizeof args, "qwen-0.5b-q4_k_m %s --layers 1 --vocab 300 --seed 2", c);
    cr_assert(gen(args) == 0);
    char *x = tu_slurp(a), *y = tu_slurp(b), *z = tu_slurp(c);
    cr_assert(x && y && z);
    FILE *f = fopen(a, "rb");
    cr_assert(f && fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    fclose(f);
    cr_expect(memcmp(x, y, (size_t)n) == 0, "same seed, different bytes");
    cr_expect(memcmp(x, z, (size_t)n) != 0, "another seed, the same bytes");
    free(x), free(y), free(z);
    unlink(a), unlink(b), unlink(c);
}

Test(synth_gguf, bad_usage) {
    cr_expect(gen("") == 2);
    cr_expect(gen("no-such-preset tests/tmp/x.gguf") == 2);
    cr_expect(gen("smollm2-135m-q4_1 tests/tmp/x.gguf --layers 0") == 2);
    cr_expect(gen("smollm2-135m-q4_1 tests/tmp/x.gguf --vocab 10") == 2);
    cr_expect(gen("--list") == 0);
}
