/* Tokenizers built from a GGUF file's tokenizer.* metadata.
 *   "llama": SentencePiece BPE. Text gets one dummy-prefix space (unless
 *            tokenizer.ggml.add_space_prefix is false), spaces become U+2581,
 *            pieces merge by vocabulary score, uncovered bytes fall back to
 *            <0xNN> tokens.
 *   "gpt2":  byte-level BPE. The pre-tokenizer regex is picked by
 *            tokenizer.ggml.pre and run with PCRE2 (UTF + UCP); each chunk is
 *            mapped byte -> printable code point and merged by merge rank.
 * Token strings point into the GGUF mapping, which must outlive the tokenizer. */
#ifndef SD_TOKENIZER_H
#define SD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/error.h"
#include "engine/format/gguf.h"

typedef struct sd_tokenizer sd_tokenizer;

enum sd_tok_kind { SD_TOK_LLAMA = 1, SD_TOK_GPT2 = 2 };

sd_tokenizer *sd_tokenizer_load(const gguf_file *f, sd_err *e);
void sd_tokenizer_free(sd_tokenizer *t);

int sd_tokenizer_kind(const sd_tokenizer *t);
int sd_tokenizer_n_vocab(const sd_tokenizer *t);
int sd_tokenizer_bos(const sd_tokenizer *t);     /* -1 when the model has none */
int sd_tokenizer_eos(const sd_tokenizer *t);     /* -1 when the model has none */
int sd_tokenizer_pad(const sd_tokenizer *t);     /* -1 when the model has none */
int sd_tokenizer_add_bos(const sd_tokenizer *t); /* tokenizer.ggml.add_bos_token, default per kind */
/* Ids that end generation: eos, eot and the tokens named <|im_end|>,
 * <|eot_id|>, <|end_of_text|>, <end_of_turn> and <|endoftext|>, plus, as in
 * llama.cpp, Qwen's file-level markers <|fim_pad|>, <|repo_name|> and
 * <|file_sep|> (control tokens only): a code model that writes one has
 * finished the file it was asked for and would go on with another.
 * Returns the count (at most cap) written to ids. */
int sd_tokenizer_stop_ids(const sd_tokenizer *t, int32_t *ids, int cap);
/* The vocabulary string of id (raw: U+2581 / byte-level code points kept). */
gguf_str sd_tokenizer_piece(const sd_tokenizer *t, int32_t id);
/* Lookups shaped as callbacks (tok is the sd_tokenizer; samplers/sampler.h
 * sd_engine_info hands them to sampler stages). Not NUL-terminated; *len
 * the length; NULL past the vocabulary (then *len is left alone).
 *   sd_tokenizer_bytes  the bytes the token stands for, as the decoder
 *                       gives them before UTF-8 assembly: "\n" for "Ċ" and
 *                       "<0x0A>", " with" for "▁with" (with "Ġwith" alike);
 *                       a byte-level token may hold part of a UTF-8
 *                       sequence; control, unused and undefined tokens are
 *                       empty.
 *   sd_tokenizer_text   the vocabulary string, as sd_tokenizer_piece. */
const char *sd_tokenizer_bytes(const void *tok, int32_t id, size_t *len);
const char *sd_tokenizer_text(const void *tok, int32_t id, size_t *len);
/* Id of an exact vocabulary string, or -1. */
int32_t sd_tokenizer_find(const sd_tokenizer *t, const char *s, size_t len);

/* Encodes text. add_bos: put BOS first (when the model has one).
 * parse_special: text matching a control token (e.g. "<|im_start|>") becomes
 * that token; otherwise it is plain text. User-defined tokens (Qwen's
 * <tool_call>) are split out either way, as llama.cpp does.
 * *ids is malloc'd (caller frees), *n its length. */
int sd_tokenize(const sd_tokenizer *t, const char *text, size_t len, int add_bos,
                int parse_special, int32_t **ids, int *n, sd_err *e);

/* A byte range of a text that is someone's own words (a chat message). */
typedef struct sd_span {
    size_t off, len;
} sd_span;

/* sd_tokenize, except that a control token is never matched where it would
 * overlap one of the n_plain spans: there its text stays plain text even
 * with parse_special. Outside the spans the ids are those of sd_tokenize. */
int sd_tokenize_ex(const sd_tokenizer *t, const char *text, size_t len, int add_bos,
                   int parse_special, const sd_span *plain, int n_plain, int32_t **ids,
                   int *n, sd_err *e);

/* Streaming decoder: feed ids one at a time; bytes of a UTF-8 sequence that
 * is not complete yet are held back until the next call completes it. The
 * first piece of a llama-kind stream drops its dummy-prefix space when
 * state.strip_space is set. Control tokens (BOS/EOS/...) decode to nothing. */
typedef struct sd_detok {
    unsigned char pending[8];
    int n_pending;
    int strip_space; /* set to 1 before the first token to drop one leading space */
} sd_detok;

/* Writes the decoded bytes of id to out (at most cap bytes, NUL-terminated
 * when room remains) and returns the count, or -1 with e filled. */
int sd_detok_push(const sd_tokenizer *t, sd_detok *st, int32_t id, char *out,
                  size_t cap, sd_err *e);
/* Whatever is still held (an incomplete sequence at the end of a stream),
 * written as U+FFFD replacement characters. */
int sd_detok_flush(sd_detok *st, char *out, size_t cap);
/* Whole-sequence decode into a malloc'd NUL-terminated string. */
int sd_detokenize(const sd_tokenizer *t, const int32_t *ids, int n, int strip_space,
                  char **out, sd_err *e);

/* Formats one user message (and an optional system message, NULL for the
 * template's default) with the model's chat template and the generation
 * prompt appended. Known templates: ChatML (<|im_start|>...), Llama-2
 * [INST], Llama-3 header ids, Zephyr. A model without a template is an error,
 * except for the qwen2 pre-tokenizer, which gets Qwen's ChatML with its
 * default system message. An unknown template is an error that says so.
 * *out is malloc'd. */
int sd_chat_format(const sd_tokenizer *t, const gguf_file *f, const char *system,
                   const char *user, char **out, sd_err *e);
/* The ids of sd_chat_format's text: the template's markers become control
 * tokens, while the system and user text is plain text, so a message that
 * contains "<|im_end|>" cannot end its turn. add_bos as for sd_tokenize. */
int sd_chat_tokenize(const sd_tokenizer *t, const gguf_file *f, const char *system,
                     const char *user, int add_bos, int32_t **ids, int *n, sd_err *e);

#endif
