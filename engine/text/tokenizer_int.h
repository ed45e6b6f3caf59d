/* Internals of engine/text, shared by vocab.c (tables and lookup),
 * tokenizer_spm.c, tokenizer_bpe.c, tokenizer.c (loading, special tokens,
 * encode), detok.c and chat.c. */
#ifndef SD_TOKENIZER_INT_H
#define SD_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/text/buf.h"
#include "engine/text/tokenizer.h"

/* tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
enum {
    SD_TT_UNDEFINED = 0, SD_TT_NORMAL = 1, SD_TT_UNKNOWN = 2, SD_TT_CONTROL = 3,
    SD_TT_USER_DEFINED = 4, SD_TT_UNUSED = 5, SD_TT_BYTE = 6, SD_TT_COUNT
};

#define SD_MAX_PRE_REGEX 6

typedef struct sd_merge_slot {
    uint64_t key;   /* (left id << 32) | right id; 0 with rank -1 = empty */
    int32_t rank;
    int32_t result; /* id of the merged token */
} sd_merge_slot;

struct sd_tokenizer {
    int kind;
    int n_vocab;
    const gguf_str *tokens; /* the GGUF file's string index */
    float *scores;          /* llama: merge priority per token */
    uint8_t *types;         /* token_type per token */
    int bos, eos, unk, pad, eot;
    int add_bos, add_space_prefix;

    int32_t *tok_hash;      /* open addressing: token id or -1 */
    uint32_t tok_mask;

    sd_merge_slot *merges;  /* gpt2: open addressing on (left, right) */
    uint32_t merge_mask;

    int32_t *specials;      /* control / user-defined / unknown ids, longest first */
    int n_specials;

    int32_t byte_tok[256];  /* token of each raw byte: <0xNN> (llama) or its byte-level char (gpt2) */

    pcre2_code *re[SD_MAX_PRE_REGEX]; /* gpt2 pre-tokenizer, applied in order */
    int n_re;
    int ignore_merges;      /* llama3: a chunk that is a whole token skips BPE */
    const char *pre;        /* gpt2: the pre-tokenizer's name ("qwen2", ...), else NULL */

    gguf_str chat_template; /* s == NULL when absent */

    char *bytes;            /* every token's bytes (detok.c), back to back */
    size_t *bytes_off;      /* [n_vocab + 1]: token i is bytes[off[i], off[i + 1]) */
};

/* vocab.c: the token strings, scores, types, string -> id hash and the
 * special tokens (longest first); released by sd_vocab_release. */
int sd_vocab_load(sd_tokenizer *t, const gguf_file *f, sd_err *e);
void sd_vocab_release(sd_tokenizer *t);

/* detok.c: fills bytes and bytes_off (freed by sd_tokenizer_free). */
int sd_detok_table_build(sd_tokenizer *t, sd_err *e);

/* Appends the SentencePiece encoding of one text fragment. */
int sd_spm_encode(const sd_tokenizer *t, const char *text, size_t len, int add_prefix,
                  sd_ids *out, sd_err *e);

/* gpt2 kind: byte-level maps, pre-tokenizer set-up and encoding. */
/* Reads tokenizer.ggml.pre and tokenizer.ggml.merges. */
int sd_bpe_init(sd_tokenizer *t, const gguf_file *f, sd_err *e);
void sd_bpe_release(sd_tokenizer *t);
int sd_bpe_encode(const sd_tokenizer *t, const char *text, size_t len, sd_ids *out,
                  sd_err *e);
/* Byte-level code point -> byte, or -1 when cp is not in the GPT-2 map. */
int sd_bpe_cp_to_byte(uint32_t cp);
/* UTF-8 of the byte-level code point of byte b; returns its length. */
int sd_bpe_byte_utf8(unsigned b, char out[2]);

#endif
