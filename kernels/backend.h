/* The op table both backends implement (kernels/cpu, kernels/cuda). The
 * forward pass in engine/model/model.c is a fixed sequence of these calls;
 * a backend decides how to fuse inside each.
 *
 * Memory: every float pointer passed to an op is backend memory (host memory
 * for the CPU, device memory for CUDA) obtained from alloc(); weights are
 * made resident once with upload_weight(), which rewrites w->data. Token ids
 * and logits cross to the host explicitly (embed takes host ids, to_host
 * copies logits back, top_k_rows copies only the ids of the best tokens),
 * so a CUDA backend copies one small buffer each way per step.
 *
 * Shapes: activations are row-major [n][dim]; the KV cache of one layer is
 * [position][kv_head][head_dim], so the K/V rows of positions pos..pos+n-1
 * are one contiguous [n][kv_dim] block that qkv_rope writes straight into.
 * Cache elements are F32, or F16 (sd_attn_shape.kv_type) on a backend that
 * takes it: half the bytes attention reads per position, at long contexts
 * a large share of a decode step. */
#ifndef SD_BACKEND_H
#define SD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/backend_opts.h"
#include "kernels/common/error.h"
#include "kernels/common/weight.h"

/* Limits of the ops below: rows of one qkv_rope_same_pos or top_k_rows call
 * (the model's chunk of positions, or the beams of one step), and the k of
 * top_k_rows. */
enum { SD_MAX_ROWS = 128, SD_TOP_K_MAX = 64 };

/* One layer's attention parameters: the head layout, the rotary embedding
 * and the optional Q/K/V biases. Rotation: neox = 0 turns pairs
 * (2j, 2j+1) of each head (llama), neox = 1 pairs (j, j + rope_dim/2)
 * (qwen2); pair j of position p turns by p * rope_base^(-2j/rope_dim), and
 * dims >= rope_dim are left alone. Biases (NULL: none) are F32 vectors in
 * backend memory, [n_head*head_dim] for bq and [n_kv*head_dim] for bk and
 * bv, added to the projections before the rotation. kv_type: SD_F32 or
 * SD_F16 (kernels/common/wtype.h), the element type of the cache rows the
 * ops write and read; a backend that cannot keep it fails the call. */
typedef struct sd_attn_shape {
    int n_head, n_kv, head_dim, rope_dim;
    float rope_base;
    int neox;
    const float *bq, *bk, *bv;
    uint32_t kv_type;
} sd_attn_shape;

typedef struct sd_backend sd_backend;
struct sd_backend {
    const char *name;
    void *ctx;
    /* 1: an uploaded weight with rows cut to a prefix that is a multiple
     * of 16 (same data, row_bytes) is a valid weight for matmul: a head
     * over the first token ids reads only their rows. 0: it is not (the
     * CUDA layout places a weight's sections by its full row count). */
    int row_prefix_views;
    void (*destroy)(sd_backend *b);

    void *(*alloc)(sd_backend *b, size_t bytes, sd_err *e); /* zero-filled */
    void (*release)(sd_backend *b, void *p);
    int (*upload_weight)(sd_backend *b, sd_weight *w, sd_err *e);
    void (*release_weight)(sd_backend *b, sd_weight *w);
    int (*to_host)(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e);
    int (*copy)(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e);

    /* x[n][dim] = rows ids[] of the embedding matrix (ids on the host). */
    int (*embed)(sd_backend *b, float *x, const sd_weight *emb, const int32_t *ids, int n,
                 sd_err *e);
    /* out = rmsnorm(x) * w (w: F32 weight of `dim`). */
    int (*rmsnorm)(sd_backend *b, float *out, const float *x, const sd_weight *w, int n, int dim,
                   float eps, sd_err *e);
    /* q = rope(Wq x + bq); k_rows = rope(Wk x + bk); v_rows = Wv x + bv, for
     * positions pos.. (biases and rotation as s describes them). */
    int (*qkv_rope)(sd_backend *b, const sd_attn_shape *s, float *q, void *k_rows, void *v_rows,
                    const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                    int n, int pos, sd_err *e);
    /* The same with every row at position pos, for n <= SD_MAX_ROWS
     * sequences that share a length but not a cache (beams): row i's key
     * and value go straight to k_dst[i] and v_dst[i] ([kv_dim] each, backend
     * memory: position pos of sequence i's layer cache). The pointer arrays
     * themselves are host memory, read during the call. */
    int (*qkv_rope_same_pos)(sd_backend *b, const sd_attn_shape *s, float *q,
                             void *const *k_dst, void *const *v_dst, const sd_weight *wq,
                             const sd_weight *wk, const sd_weight *wv, const float *x, int n,
                             int pos, sd_err *e);
    /* Causal GQA over the layer cache kc/vc holding positions 0..pos+n-1. */
    int (*attention)(sd_backend *b, const sd_attn_shape *s, float *out, const float *q,
                     const void *kc, const void *vc, int n, int pos, sd_err *e);
    /* out (+)= x W^T */
    int (*matmul)(sd_backend *b, float *out, const sd_weight *w, const float *x, int n,
                  int accumulate, sd_err *e);
    /* For each row r of x[n_rows][cols] (backend memory), the indices of
     * its k largest values, largest first, the lowest index first among
     * equal values, into ids_host[r*k .. r*k+k) (host memory): k = 1 is the
     * first maximum. Only the ids cross to the host, so greedy decoding and
     * verification copy n_rows*k ints instead of the rows. 1 <= n_rows <=
     * SD_MAX_ROWS, 1 <= k <= min(cols, SD_TOP_K_MAX); rows hold no NaN
     * (with one the order is unspecified). probs_host (NULL: not wanted)
     * gets [n_rows][k] softmax probabilities of those ids over their row,
     * exp(x_id - max) / sum_i exp(x_i - max): a speculative drafter's
     * confidence in its greedy draft without its logits row crossing.
     * Waits for queued work; while recording (graph_begin), the ids and
     * probabilities are in place once graph_end(ok = 1) has returned 0. */
    int (*top_k_rows)(sd_backend *b, const float *x, int n_rows, int cols, int k,
                      int32_t *ids_host, float *probs_host, sd_err *e);
    /* h = silu(W1 x) * (W3 x); tmp is [n][ffn] scratch. */
    int (*ffn_swiglu)(sd_backend *b, float *h, float *tmp, const sd_weight *w1,
                      const sd_weight *w3, const float *x, int n, sd_err *e);

    /* Optional (NULL: the backend has none; the CPU's): the ops called
     * between graph_begin and graph_end are recorded instead of run, and
     * graph_end(ok = 1) runs them as one unit (the CUDA backend: one CUDA
     * graph launch for a decode step instead of a launch per kernel).
     * graph_begin returns 1 when it records, 0 when it does not (switched
     * off), -1 on error. An op may fail while recording because it cannot
     * be recorded (the CUDA backend: scratch that must grow); then nothing
     * ran, and the caller ends with graph_end(ok = 0), which discards the
     * recording, and runs the same ops again without it. graph_end with
     * nothing recorded does nothing. The step's top_k_rows calls are
     * recorded with it, so its ids are made inside the step (the CUDA
     * backend: the argmax in the graph, or in the persistent launch). */
    int (*graph_begin)(sd_backend *b, sd_err *e);
    int (*graph_end)(sd_backend *b, int ok, sd_err *e);
};

#endif
