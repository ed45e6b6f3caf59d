/* Synthetic Llama models for tests: a GGUF with llama.cpp's tensor names and
 * keys, random weights from a seeded generator (the same config gives the
 * same bytes), and a small SentencePiece ("llama") vocabulary:
 *   0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..258 the byte tokens <0x00>..<0xFF>,
 *   then plain pieces up to cfg.vocab: "▁", the letters, punctuation,
 *   "▁a".."▁z", common pairs ("th", "he", ...), a few words ("▁the",
 *   "▁and", ...), then generated "▁aa".."▁zz", "▁aaa".."▁zzz".
 * Every plain piece of more than one character is the concatenation of two
 * earlier pieces, so a score-driven SentencePiece merge can reach it; scores
 * are 0 for the special and byte tokens and -k for the k-th plain piece.
 * Token types follow llama.cpp: 1 normal, 2 unknown, 3 control, 6 byte.
 *
 * Matrices are uniform in +-1/sqrt(cols) (rows of cols elements, so every
 * matrix-vector product keeps O(1) activations), norm weights 1 +- 0.1;
 * Q5_0, Q4_K and Q6_K matrices are random valid blocks of that order
 * (kernels/bench/rand_blocks.h: |w| <= 2/sqrt(cols)). */
#ifndef SD_TEST_SYNTH_MODEL_H
#define SD_TEST_SYNTH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/model/model.h"
#include "kernels/common/error.h"

#define SYNTH_FIRST_PIECE 259 /* first plain piece after <unk>, <s>, </s>, bytes */
#define SYNTH_NORM_EPS 1e-5f

typedef struct synth_cfg {
    int dim;        /* embedding length; n_heads * head_dim */
    int n_layers;
    int n_heads;
    int n_kv_heads; /* divides n_heads */
    int ffn;        /* feed-forward hidden size */
    int vocab;      /* >= SYNTH_FIRST_PIECE, <= synth_max_vocab() */
    int ctx;        /* llama.context_length */
    float rope_base;
    uint32_t wtype; /* matrices: SD_F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q4_K/Q6_K
                       (dim and ffn multiples of its block); norms are F32 */
    int tied;       /* 1: no output.weight, token_embd is reused */
    uint64_t seed;
    int qwen2;      /* 1: architecture qwen2 (NEOX rotation, F32 Q/K/V biases) */
} synth_cfg;

/* 1 for the types whose matrices are random valid blocks (Q5_0, Q4_K,
 * Q6_K) rather than quantised floats. */
int synth_block_type(uint32_t t);

/* A small valid config (dim 64, 2 layers, 4/2 heads, ffn 96, vocab 320, F32). */
synth_cfg synth_default(void);
int synth_max_vocab(void);

/* Writes the piece of token id (UTF-8, NUL-terminated) into buf. 0, or -1
 * if id is outside [0, synth_max_vocab()). */
#define SYNTH_PIECE_MAX 16 /* bytes, NUL included */
int synth_piece(int id, char buf[SYNTH_PIECE_MAX]);

/* Builds the whole file in memory (*out malloc'd) or writes it to path.
 * 0, or -1 with the reason in e (bad config, quantize failure, no memory). */
int synth_model_bytes(const synth_cfg *cfg, uint8_t **out, size_t *len, sd_err *e);
int synth_model_write(const synth_cfg *cfg, const char *path, sd_err *e);

/* A synthetic model and its file bytes, which the model reads in place. */
typedef struct synth_model {
    uint8_t *bytes;
    sd_model *m;
} synth_model;

/* Builds the file in memory and loads it on the CPU backend with `threads`
 * threads and a cache of n_ctx positions. 0, or -1 (s zeroed) with the
 * reason in e. */
int synth_model_load(const synth_cfg *cfg, int n_ctx, int threads, synth_model *s, sd_err *e);
/* Frees the model, then the bytes. */
void synth_model_free(synth_model *s);

#endif
