/* The synthetic models at real shapes that the GPU check generates
 * (engine/bench/synth_gguf.c) and the step ledger counts
 * (engine/bench/ledger/): each preset's hyper-parameters, weight types,
 * tensor table and vocabulary, declared here once for both.
 *
 * A preset has the hyper-parameters, tensor names, shapes and weight types
 * of a real file (the K-quant mixes follow llama.cpp's Q4_K_M rule: Q6_K
 * for attn_v and ffn_down of the layers it gives more bits, and for the
 * output). The vocabulary is a SentencePiece ("llama") one the loader
 * accepts: <unk>, <s>, </s>, the 256 byte tokens, the letters, then "▁" +
 * every lowercase word of 1..4 letters in order, as many as the preset's
 * vocabulary needs (each such piece is an earlier piece plus a letter). */
#ifndef SD_SYNTH_PRESETS_H
#define SD_SYNTH_PRESETS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/gguf_writer.h"
#include "kernels/common/wtype.h"

typedef struct synth_preset {
    const char *name, *arch, *what;
    int dim, n_layers, n_heads, n_kv, ffn, vocab, ctx;
    float rope_base, eps;
    int tied, bias;
    /* weight types: embedding, output (when untied), matrices, and the
     * Q4_K_M "more bits" types for attn_v and ffn_down (0: same as mat) */
    uint32_t t_embd, t_out, t_mat, t_v_more, t_down, t_down_more, t_v;
} synth_preset;

static const synth_preset k_synth_presets[] = {
    {"smollm2-135m-q4_1", "llama", "SmolLM2-135M-Instruct Q4_1 (Q8_0 tied embedding)", 576, 30, 9,
     3, 1536, 49152, 8192, 100000.0f, 1e-5f, 1, 0, SD_Q8_0, 0, SD_Q4_1, 0, 0, 0, 0},
    {"llama-1b-bf16", "llama", "Llama-3.2-1B shapes, BF16 (tied embedding)", 2048, 16, 32, 8,
     8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, SD_BF16, 0, SD_BF16, 0, 0, 0, 0},
    {"llama-1b-q4_1", "llama", "Llama-3.2-1B shapes, Q4_1 (Q8_0 tied embedding)", 2048, 16, 32, 8,
     8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, SD_Q8_0, 0, SD_Q4_1, 0, 0, 0, 0},
    {"llama-3b-bf16", "llama", "Llama-3.2-3B shapes, BF16 (tied embedding)", 3072, 28, 24, 8,
     8192, 128256, 131072, 500000.0f, 1e-5f, 1, 0, SD_BF16, 0, SD_BF16, 0, 0, 0, 0},
    {"qwen-1.5b-q4_k_m", "qwen2", "Qwen2.5-Coder-1.5B shapes, Q4_K_M (Q4_K, Q6_K, biases)", 1536,
     28, 12, 2, 8960, 151936, 32768, 1000000.0f, 1e-6f, 0, 1, SD_Q4_K, SD_Q6_K, SD_Q4_K, SD_Q6_K,
     SD_Q4_K, SD_Q6_K, SD_Q4_K},
    {"qwen-0.5b-q4_k_m", "qwen2", "Qwen2.5-Coder-0.5B shapes, Q4_K_M (Q5_0, Q8_0, Q4_K, Q6_K)",
     896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, 1, 1, SD_Q5_0, 0, SD_Q5_0, SD_Q8_0,
     SD_Q4_K, SD_Q6_K, SD_Q5_0},
};
#define SYNTH_N_PRESETS ((int)(sizeof k_synth_presets / sizeof k_synth_presets[0]))

/* The preset called name, or NULL. */
static inline const synth_preset *synth_find(const char *name) {
    for (int i = 0; i < SYNTH_N_PRESETS; i++)
        if (!strcmp(name, k_synth_presets[i].name)) return &k_synth_presets[i];
    return NULL;
}

/* ---- vocabulary ---------------------------------------------------------- */

#define SYNTH_FIRST_WORD (3 + 256 + 26 + 1) /* specials, bytes, letters, "▁" */
#define SYNTH_PIECE_MAX 16

/* The piece of id into buf; 0, or -1 past the last 4-letter word. */
static inline int synth_piece(int id, char buf[SYNTH_PIECE_MAX]) {
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    if (id < 3) return snprintf(buf, SYNTH_PIECE_MAX, "%s", special[id]), 0;
    if (id < 259) return snprintf(buf, SYNTH_PIECE_MAX, "<0x%02X>", id - 3), 0;
    if (id < 259 + 26) return snprintf(buf, SYNTH_PIECE_MAX, "%c", 'a' + (id - 259)), 0;
    if (id == SYNTH_FIRST_WORD - 1) return snprintf(buf, SYNTH_PIECE_MAX, "\xe2\x96\x81"), 0;
    int r = id - SYNTH_FIRST_WORD, len = 1, span = 26;
    while (len <= 4 && r >= span) r -= span, span *= 26, len++;
    if (len > 4) return -1;
    char w[5] = {0};
    for (int i = len - 1; i >= 0; i--) w[i] = (char)('a' + r % 26), r /= 26;
    snprintf(buf, SYNTH_PIECE_MAX, "\xe2\x96\x81%s", w);
    return 0;
}

/* The vocabulary's pieces, scores and types as tokenizer keys of w. 0, or
 * -1 when out of memory. */
static inline int synth_add_vocab(gw *w, int vocab) {
    char *text = malloc((size_t)vocab * SYNTH_PIECE_MAX);
    const char **pieces = malloc((size_t)vocab * sizeof *pieces);
    float *scores = malloc((size_t)vocab * sizeof *scores);
    int32_t *types = malloc((size_t)vocab * sizeof *types);
    int rc = text && pieces && scores && types ? 0 : -1;
    for (int i = 0; !rc && i < vocab; i++) {
        pieces[i] = text + (size_t)i * SYNTH_PIECE_MAX;
        synth_piece(i, text + (size_t)i * SYNTH_PIECE_MAX);
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    if (!rc) {
        gw_str(w, "tokenizer.ggml.model", "llama");
        gw_arr_str(w, "tokenizer.ggml.tokens", pieces, (size_t)vocab);
        gw_arr_f32(w, "tokenizer.ggml.scores", scores, (size_t)vocab);
        gw_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)vocab);
        gw_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        gw_u32(w, "tokenizer.ggml.bos_token_id", 1);
        gw_u32(w, "tokenizer.ggml.eos_token_id", 2);
    }
    free(text);
    free(pieces);
    free(scores);
    free(types);
    return rc;
}

/* The model's keys (architecture, name, alignment, hyper-parameters). */
static inline void synth_add_keys(gw *w, const synth_preset *c, uint32_t align) {
    char k[64];
    const int hd = c->dim / c->n_heads;
#define K(s) (snprintf(k, sizeof k, "%s.%s", c->arch, s), k)
    gw_str(w, "general.architecture", c->arch);
    gw_str(w, "general.name", c->what);
    gw_alignment(w, align);
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
}

/* ---- tensors ------------------------------------------------------------ */

typedef struct synth_tensor {
    char name[48];
    uint32_t type;
    int n_dims;
    uint64_t ne[2];
    uint64_t bytes;
    int kind; /* 0 matrix, 1 norm, 2 bias */
} synth_tensor;

typedef struct synth_plan {
    synth_tensor *t;
    int n, cap;
    int failed; /* out of memory on the way: the plan is incomplete */
} synth_plan;

static inline void synth_add(synth_plan *p, const char *name, uint32_t type, uint64_t cols,
                             uint64_t rows, int kind) {
    if (p->failed) return;
    if (p->n == p->cap) {
        const int cap = p->cap ? 2 * p->cap : 64;
        synth_tensor *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) {
            p->failed = 1;
            return;
        }
        p->t = t;
        p->cap = cap;
    }
    synth_tensor *t = &p->t[p->n++];
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
static inline int synth_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The tensor table of c, in file order; p->failed when out of memory. */
static inline void synth_make_plan(const synth_preset *c, synth_plan *p) {
    const int hd = c->dim / c->n_heads, kv = hd * c->n_kv;
    synth_add(p, "token_embd.weight", c->t_embd, (uint64_t)c->dim, (uint64_t)c->vocab, 0);
    synth_add(p, "output_norm.weight", SD_F32, (uint64_t)c->dim, 1, 1);
    if (!c->tied) synth_add(p, "output.weight", c->t_out, (uint64_t)c->dim, (uint64_t)c->vocab, 0);
    for (int l = 0; l < c->n_layers; l++) {
        char n[48];
        const int mb = synth_more_bits(l, c->n_layers);
        const uint32_t tv = c->t_v ? (mb && c->t_v_more ? c->t_v_more : c->t_v) : c->t_mat;
        const uint32_t td =
            c->t_down ? (mb && c->t_down_more ? c->t_down_more : c->t_down) : c->t_mat;
#define T(s) (snprintf(n, sizeof n, "blk.%d.%s", l, s), n)
        synth_add(p, T("attn_norm.weight"), SD_F32, (uint64_t)c->dim, 1, 1);
        synth_add(p, T("attn_q.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->dim, 0);
        synth_add(p, T("attn_k.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)kv, 0);
        synth_add(p, T("attn_v.weight"), tv, (uint64_t)c->dim, (uint64_t)kv, 0);
        if (c->bias) {
            synth_add(p, T("attn_q.bias"), SD_F32, (uint64_t)c->dim, 1, 2);
            synth_add(p, T("attn_k.bias"), SD_F32, (uint64_t)kv, 1, 2);
            synth_add(p, T("attn_v.bias"), SD_F32, (uint64_t)kv, 1, 2);
        }
        synth_add(p, T("attn_output.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->dim, 0);
        synth_add(p, T("ffn_norm.weight"), SD_F32, (uint64_t)c->dim, 1, 1);
        synth_add(p, T("ffn_gate.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->ffn, 0);
        synth_add(p, T("ffn_up.weight"), c->t_mat, (uint64_t)c->dim, (uint64_t)c->ffn, 0);
        synth_add(p, T("ffn_down.weight"), td, (uint64_t)c->ffn, (uint64_t)c->dim, 0);
#undef T
    }
}

#endif
