/* Synthetic GGUF models at real shapes, for the GPU check
 * (scripts/gpu-check.sh) on a machine the real files cannot travel to.
 *
 * Each preset has the hyper-parameters, tensor names, shapes and weight types
 * of a real file (the K-quant mixes follow llama.cpp's Q4_K_M rule: Q6_K for
 * attn_v and ffn_down of the layers it gives more bits, and for the output),
 * and random weights: valid random blocks (kernels/bench/rand_blocks.h) of
 * amplitude 1/sqrt(cols), so each matrix-vector product keeps activations of
 * order one, BF16 values uniform in the same range, norm weights 1 +- 0.1,
 * biases +- 0.1. The vocabulary is a SentencePiece ("llama") one the loader
 * accepts: <unk>, <s>, </s>, the 256 byte tokens, the letters, then "▁" +
 * every lowercase word of 1..4 letters in order, as many as the preset's
 * vocabulary needs (each such piece is an earlier piece plus a letter).
 *
 * The file is streamed through the GGUF writer (engine/format/gguf_writer.h,
 * gw_write_with): header and tensor table first, then each tensor as it is
 * generated (on the kernels' worker pool over chunks, each chunk seeded from
 * the tensor and chunk index), so a 2.5 GB model needs one tensor's memory
 * and the same seed gives the same bytes whatever the thread count.
 *
 *   usage: synth_gguf PRESET OUT.gguf [--layers N] [--vocab N] [--seed S]
 *          synth_gguf --list
 * --layers and --vocab shrink a preset (tests, quick checks); the other
 * shapes stay. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/gguf_writer.h"
#include "kernels/bench/rand_blocks.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"

typedef struct preset {
    const char *name, *arch, *what;
    int dim, n_layers, n_heads, n_kv, ffn, vocab, ctx;
    float rope_base, eps;
    int tied, bias;
    /* weight types: embedding, output (when untied), matrices, and the
     * Q4_K_M "more bits" types for attn_v and ffn_down (0: same as mat) */
    uint32_t t_embd, t_out, t_mat, t_v_more, t_down, t_down_more, t_v;
} preset;

static const preset k_presets[] = {
    {"smollm2-135m-q4_1", "llama", "SmolLM2-135M-Instruct Q4_1 (Q8_0 tied embedding)", 576, 30, 9,
     3, 1536, 49152, 8192, 100000.0f, 1e-5f, 1, 0, SD_Q8_0, 0, SD_Q4_1, 0, 0, 0, 0},
    {"llama-1b-bf16", "llama", "Llama-3.2-1B shapes, BF16 (tied embedding)", 2048, 16, 32, 8,
     8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, SD_BF16, 0, SD_BF16, 0, 0, 0, 0},
    {"llama-1b-q4_1", "llama", "Llama-3.2-1B shapes, Q4_1 (Q8_0 tied embedding)", 2048, 16, 32, 8,
     8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, SD_Q8_0, 0, SD_Q4_1, 0, 0, 0, 0},
    {"qwen-1.5b-q4_k_m", "qwen2", "Qwen2.5-Coder-1.5B shapes, Q4_K_M (Q4_K, Q6_K, biases)", 1536,
     28, 12, 2, 8960, 151936, 32768, 1000000.0f, 1e-6f, 0, 1, SD_Q4_K, SD_Q6_K, SD_Q4_K, SD_Q6_K,
     SD_Q4_K, SD_Q6_K, SD_Q4_K},
    {"qwen-0.5b-q4_k_m", "qwen2", "Qwen2.5-Coder-0.5B shapes, Q4_K_M (Q5_0, Q8_0, Q4_K, Q6_K)",
     896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, 1, 1, SD_Q5_0, 0, SD_Q5_0, SD_Q8_0,
     SD_Q4_K, SD_Q6_K, SD_Q5_0},
};
#define N_PRESETS ((int)(sizeof k_presets / sizeof k_presets[0]))

/* ---- vocabulary ---------------------------------------------------------- */

#define FIRST_WORD (3 + 256 + 26 + 1) /* specials, bytes, letters, "▁" */
#define PIECE_MAX 16

/* The piece of id into buf; 0, or -1 past the last 4-letter word. */
static int piece(int id, char buf[PIECE_MAX]) {
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    if (id < 3) return snprintf(buf, PIECE_MAX, "%s", special[id]), 0;
    if (id < 259) return snprintf(buf, PIECE_MAX, "<0x%02X>", id - 3), 0;
    if (id < 259 + 26) return snprintf(buf, PIECE_MAX, "%c", 'a' + (id - 259)), 0;
    if (id == FIRST_WORD - 1) return snprintf(buf, PIECE_MAX, "\xe2\x96\x81"), 0;
    int r = id - FIRST_WORD, len = 1, span = 26;
    while (len <= 4 && r >= span) r -= span, span *= 26, len++;
    if (len > 4) return -1;
    char w[5] = {0};
    for (int i = len - 1; i >= 0; i--) w[i] = (char)('a' + r % 26), r /= 26;
    snprintf(buf, PIECE_MAX, "\xe2\x96\x81%s", w);
    return 0;
}

/* ---- tensors ------------------------------------------------------------ */

#define ALIGN 32

typedef struct tensor {
    char name[48];
    uint32_t type;
    int n_dims;
    uint64_t ne[2];
    uint64_t bytes;
    int kind; /* 0 matrix, 1 norm, 2 bias */
} tensor;

typedef struct plan {
    tensor *t;
    int n, cap;
} plan;

static void add(plan *p, const char *name, uint32_t type, uint64_t cols, uint64_t rows, int kind) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->t = realloc(p->t, (size_t)p->cap * sizeof *p->t);
        if (!p->t) {
            fprintf(stderr, "synth_gguf: out of memory\n");
            exit(1);
        }
    }
    tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = rows > 1 ? 2 : 1;
    t->ne[0] = cols;
    t->ne[1] = rows;
    t->bytes = sd_row_bytes(type, cols) * rows;
    t->kind = kind;
}

/* llama.cpp's Q4_K_M rule for attn_v and ffn_down of layer i of n. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static void make_plan(const preset *c, plan *p) {
    int hd = c->dim / c->n_heads, kv = hd * c->n_kv;
    add(p, "token_embd.weight", c->t_embd, (uint64_t)c->dim, (uint64_t)c->vocab, 0);
    add(p, "output_norm.weight", SD_F32, (uint64_t)c->dim, 1, 1);
    if (!c->tied) add(p, "output.weight", c->t_out, (uint64_t)c->dim, (uint64_t)c->vocab, 0);
    for (int l = 0; l < c->n_layers; l++) {
        char n[48];
        int mb = more_bits(l, c->n_layers);
        uint32_t tv = c->t_v ? (mb && c->t_v_more ? c->t_v_more : c->t_v) : c->t_mat;
        uint32_t td = c->t_down ? (mb && c->t_down_more ? c->t_down_more : c->t_down) : c->t_mat;
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        add(p, T("attn_norm.weight"), SD_F32, (uint64_t)c->dim, 1, 1);
        add(p, T("attn_q.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->dim, 0);
        add(p, T("attn_k.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)kv, 0);
        add(p, T("attn_v.weight"), tv, (uint64_t)c->dim, (uint64_t)kv, 0);
        if (c->bias) {
            add(p, T("attn_q.bias"), SD_F32, (uint64_t)c->dim, 1, 2);
            add(p, T("attn_k.bias"), SD_F32, (uint64_t)kv, 1, 2);
            add(p, T("attn_v.bias"), SD_F32, (uint64_t)kv, 1, 2);
        }
        add(p, T("attn_output.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->dim, 0);
        add(p, T("ffn_norm.weight"), SD_F32, (uint64_t)c->dim, 1, 1);
        add(p, T("ffn_gate.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->ffn, 0);
        add(p, T("ffn_up.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->ffn, 0);
        add(p, T("ffn_down.weight"), td, (uint64_t)c->ffn, (uint64_t)c->dim, 0);
#undef T
    }
}

static uint64_t mix(uint64_t a, uint64_t b) {
    uint64_t s = a ^ (b * 0x9e3779b97f4a7c15ull);
    return sd_rb_next(&s);
}

static float uniform(uint64_t *s, float a) {
    return (float)(((double)(sd_rb_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0) * a);
}

/* Chunks of CHUNK elements (a multiple of every block size) are generated
 * independently, each from its own seed. */
#define CHUNK 65536

typedef struct {
    const tensor *t;
    uint8_t *dst;
    uint64_t seed, n;
    float amp;
    size_t bs, bb;
} fill_job;

static void fill_chunk(void *v, int64_t task, int thread) {
    const fill_job *j = v;
    const tensor *t = j->t;
    (void)thread;
    uint64_t c = (uint64_t)task, s = mix(j->seed, c);
    uint64_t i0 = c * CHUNK, m = j->n - i0 < CHUNK ? j->n - i0 : CHUNK;
    if (t->kind == 1 || t->kind == 2) {
        float *f = (float *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) f[i] = (t->kind == 1 ? 1.0f : 0.0f) + uniform(&s, 0.1f);
    } else if (t->type == SD_BF16) {
        uint16_t *h = (uint16_t *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) h[i] = sd_f32_to_bf16(uniform(&s, j->amp));
    } else if (t->type == SD_F32) {
        float *f = (float *)j->dst + i0;
        for (uint64_t i = 0; i < m; i++) f[i] = uniform(&s, j->amp);
    } else {
        sd_rand_blocks(t->type, j->dst + i0 / j->bs * j->bb, m / j->bs, j->amp, &s);
    }
}

/* The chunks on the kernels' worker pool (every core): a chunk's bytes
 * depend only on its seed, so the file does not depend on the threads. */
static void fill(sd_pool *pool, const tensor *t, uint8_t *dst, uint64_t seed) {
    fill_job j = {t, dst, seed, t->ne[0] * t->ne[1], 1.0f / sqrtf((float)t->ne[0]),
                  sd_wtype_block(t->type), sd_wtype_block_bytes(t->type)};
    sd_pool_run(pool, fill_chunk, &j, (int64_t)((j.n + CHUNK - 1) / CHUNK), 1);
}

typedef struct fill_ctx {
    const plan *p;
    sd_pool *pool;
    uint64_t seed;
} fill_ctx;

/* gw_write_with's source of tensor idx's bytes. */
static int fill_tensor(void *ud, size_t idx, uint8_t *buf) {
    const fill_ctx *f = ud;
    fill(f->pool, &f->p->t[idx], buf, mix(f->seed, (uint64_t)idx + 1));
    return 0;
}

/* The vocabulary's pieces, in one block of vocab x PIECE_MAX bytes. */
static int add_vocab(gw *w, int vocab) {
    char *text = malloc((size_t)vocab * PIECE_MAX);
    const char **pieces = malloc((size_t)vocab * sizeof *pieces);
    float *scores = malloc((size_t)vocab * sizeof *scores);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    int rc = text && pieces && scores && types ? 0 : -1;
    for (int i = 0; !rc && i < vocab; i++) {
        pieces[i] = text + (size_t)i * PIECE_MAX;
        piece(i, text + (size_t)i * PIECE_MAX);
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    if (!rc) {
        gw_str(w, "tokenizer.ggml.model", "llama");
        gw_arr_str(w, "tokenizer.ggml.tokens", pieces, (size_t)vocab);
        gw_arr_f32(w, "tokenizer.ggml.scores", scores, (size_t)vocab);
        gw_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)vocab);
    }
    free(text);
    free(pieces);
    free(scores);
    free(types);
    return rc;
}

static int write_model(const preset *c, const char *path, uint64_t seed) {
    plan p = {0};
    make_plan(c, &p);
    gw *w = gw_new(3);
    char k[64];
    int hd = c->dim / c->n_heads;
#define K(s) (snprintf(k, sizeof k, "%s.%s", c->arch, s), k)
    gw_str(w, "general.architecture", c->arch);
    gw_str(w, "general.name", c->what);
    gw_alignment(w, ALIGN);
    gw_u32(w, K("context_length"), (uint32_t)c->ctx);
    gw_u32(w, K("embedding_length"), (uint32_t)c->dim);
    gw_u32(w, K("block_count"), (uint32_t)c->n_layers);
    gw_u32(w, K("feed_forward_length"), (uint32_t)c->ffn);
    gw_u32(w, K("attention.head_count"), (uint32_t)c->n_heads);
    gw_u32(w, K("attention.head_count_kv"), (uint32_t)c->n_kv);
    gw_u32(w, K("rope.dimension_count"), (uint32_t)hd);
    gw_f32(w, K("rope.freq_base"), c->rope_base);
    gw_f32(w, K("attention.layer_norm_rms_epsilon"), c->eps);
#undef K
    int rc = add_vocab(w, c->vocab);
    gw_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_u32(w, "tokenizer.ggml.eos_token_id", 2);
    for (int i = 0; i < p.n; i++)
        gw_tensor_later(w, p.t[i].name, p.t[i].type, p.t[i].n_dims, p.t[i].ne, p.t[i].bytes);
    sd_err e;
    fill_ctx f = {&p, sd_pool_create(sd_cpu_physical_cores(), &e), seed};
    if (!f.pool) {
        fprintf(stderr, "synth_gguf: %s\n", e.msg);
        rc = -1;
    } else if (rc || !w || gw_write_with(w, path, fill_tensor, &f)) {
        fprintf(stderr, "synth_gguf: cannot write %s (out of memory or an I/O error)\n", path);
        rc = -1;
    }
    sd_pool_destroy(f.pool);
    gw_free(w);
    free(p.t);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < N_PRESETS; i++) printf("%-20s %s\n", k_presets[i].name, k_presets[i].what);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: synth_gguf PRESET OUT.gguf [--layers N] [--vocab N] [--seed S]\n"
                        "       synth_gguf --list\n");
        return 2;
    }
    const preset *c = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(argv[1], k_presets[i].name)) c = &k_presets[i];
    if (!c) {
        fprintf(stderr, "synth_gguf: unknown preset '%s' (synth_gguf --list)\n", argv[1]);
        return 2;
    }
    preset cfg = *c;
    uint64_t seed = 1;
    for (int i = 3; i < argc; i += 2) {
        long v = i + 1 < argc ? strtol(argv[i + 1], NULL, 10) : 0;
        if (!strcmp(argv[i], "--layers") && v > 0 && v <= 256) cfg.n_layers = (int)v;
        else if (!strcmp(argv[i], "--vocab") && v >= FIRST_WORD && v <= c->vocab) cfg.vocab = (int)v;
        else if (!strcmp(argv[i], "--seed") && v > 0) seed = (uint64_t)v;
        else {
            fprintf(stderr, "synth_gguf: bad option '%s'%s%s\n", argv[i], i + 1 < argc ? " " : "",
                    i + 1 < argc ? argv[i + 1] : "");
            return 2;
        }
    }
    return write_model(&cfg, argv[2], seed) ? 1 : 0;
}
