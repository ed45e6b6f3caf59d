/* A Llama-family model (architectures llama and qwen2): hyper-parameters
 * from the <arch>.* keys, weight views into the GGUF mapping (uploaded to
 * the backend once), the tokenizer, and the forward pass as a sequence of
 * backend ops. */
#ifndef SD_MODEL_H
#define SD_MODEL_H

#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/common/error.h"
#include "engine/format/gguf.h"
#include "engine/model/kvcache.h"
#include "engine/text/tokenizer.h"

enum sd_arch { SD_ARCH_LLAMA = 0, SD_ARCH_QWEN2 = 1 };

typedef struct sd_hparams {
    int arch; /* enum sd_arch */
    int dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, vocab, ctx_train, rope_dim;
    float rope_base, eps;
    int rope_neox; /* rotate pairs (j, j + rope_dim/2) instead of (2j, 2j+1) */
    int qkv_bias;  /* the layers have Q/K/V biases */
    int tied_output;
} sd_hparams;

/* One block's weights; bq/bk/bv are F32 vectors, data NULL when the
 * architecture has none. */
typedef struct sd_layer {
    sd_weight attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
    sd_weight bq, bk, bv;
} sd_layer;

/* What a long call reports while it runs, for a caller that shows
 * progress (the model itself never prints): loading a file's weights onto
 * the backend (which repacks some types), and a forward call over more
 * tokens than one chunk (a long prompt's prefill). done is 0 at the start
 * and total at the end. */
typedef struct sd_progress {
    const char *stage; /* "loading" or "prefill" */
    const char *path;  /* the GGUF file's path (its name for one opened from memory) */
    long done, total;  /* loading: layers uploaded of all; prefill: tokens run of all */
} sd_progress;
typedef void (*sd_progress_cb)(void *ud, const sd_progress *p);

typedef struct sd_model {
    gguf_file *file;
    sd_tokenizer *tok;
    sd_hparams hp;
    sd_backend *be;  /* owned */
    sd_weight tok_embd, out_norm, output;
    sd_layer *layers;
    int n_ctx;      /* positions the caches hold */
    uint32_t kv_type; /* element type of its caches: SD_F32 or SD_F16 */
    int max_batch;  /* tokens per internal chunk of one forward call */
    sd_kv *kv;      /* the model's own cache */
    sd_progress_cb progress; /* NULL, or told about loading and long forward calls */
    void *progress_ud;
    /* scratch, backend memory, [max_batch][...] */
    float *x, *xb, *q, *att, *hb, *hb2, *logits;
} sd_model;

typedef struct sd_model_opts {
    int n_ctx;        /* <= 0: min(context_length, 4096) */
    uint32_t kv_type; /* SD_F32 (0 means the same) or SD_F16: the caches' element type */
    sd_progress_cb progress; /* NULL: silent; else kept in sd_model.progress */
    void *progress_ud;
} sd_model_opts;

/* Loads path onto backend be (engine/session/device.h opens one). The model
 * owns be from here on, also on failure (a NULL be fails with the message
 * its opener left in e). On failure e->msg reads "<path>: <reason>". */
sd_model *sd_model_load(const char *path, sd_backend *be, const sd_model_opts *o, sd_err *e);
/* Same from an already-open file (takes ownership of f and be, also on
 * failure). */
sd_model *sd_model_from_gguf(gguf_file *f, sd_backend *be, const sd_model_opts *o, sd_err *e);
/* The positions a model of hp gets for a requested n_ctx (<= 0: the
 * default, min(context_length, 4096)); sd_model_load refuses more than its
 * context_length. */
int sd_model_ctx(const sd_hparams *hp, int n_ctx);
/* The hyper-parameters of the model at path, without loading it (what a
 * caller needs to pick a backend); errors read "<path>: <reason>". */
int sd_model_hparams(const char *path, sd_hparams *hp, sd_err *e);
/* Frees the model, its caches and its backend. */
void sd_model_free(sd_model *m);

/* Runs tokens[0..n) at positions pos..pos+n-1 through the first n_layers
 * layers (<= 0: all) using cache kv (which must hold at least pos positions;
 * it is truncated to pos first, then holds pos+n). Writes logits of the last
 * n_logits positions to logits (host, [n_logits][vocab]; NULL: they stay in
 * backend memory). */
int sd_forward_ex(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                  float *logits, int n_logits, sd_err *e);
/* Logits for all n positions with the model's own cache and every layer. */
int sd_forward(sd_model *m, const int32_t *tokens, int n, int pos, float *logits, sd_err *e);

/* One token for each of n sequences that all stand at position pos, each
 * with its own cache (beam search): the matrix products run once over all n
 * rows, attention per sequence. logits: [n][vocab] on the host. */
int sd_forward_multi(sd_model *m, sd_kv *const *kvs, const int32_t *tokens, int n, int pos,
                     float *logits, sd_err *e);

/* sd_forward_ex without copying logits off the backend: the logits of the
 * last n_rows positions stay in backend memory and only the k most likely
 * ids of each come back, ids[r*k .. r*k+k) for row r (host, [n_rows][k]),
 * largest first, lowest id first on ties (k = 1: the greedy argmax). 1 <= k
 * <= min(vocab, SD_TOP_K_MAX). */
int sd_forward_top_k(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                     int n_rows, int k, int32_t *ids, sd_err *e);

/* The output head restricted to token ids below vocab_limit (a drafter
 * with a trimmed vocabulary: the head's bytes shrink in proportion; ids
 * at or above the limit get logits -inf and are never among the top k).
 * The limit is rounded up to a multiple of 16 (the CPU backend's repacked
 * row groups); <= 0 or >= vocab: the whole head. Otherwise as
 * sd_forward_ex (ids NULL) or sd_forward_top_k (ids set, n_logits rows of k;
 * probs, NULL or [n_logits][k], gets the ids' softmax probabilities over the
 * head's rows). */
int sd_forward_head(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                    int vocab_limit, float *logits, int n_logits, int k, int32_t *ids, float *probs,
                    sd_err *e);
/* The head rows sd_forward_head uses for vocab_limit. */
int sd_head_rows(const sd_model *m, int vocab_limit);

/* Weight bytes one decode step reads (every matrix once, the norms, one
 * embedding row). */
uint64_t sd_model_weight_bytes(const sd_model *m);
const char *sd_model_describe(const sd_model *m, char *buf, size_t cap);

#endif
