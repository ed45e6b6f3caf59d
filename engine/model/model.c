#include "engine/model/model.h"


#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Positions per chunk of a forward call and sequences per sd_forward_multi:
 * the most rows one backend op takes. */
#define MAX_BATCH SD_MAX_ROWS

/* ---- hyper-parameters ---------------------------------------------------
 * Keys are "<arch>.<name>"; only the llama architecture is read. Each value
 * is range-checked so a forged file cannot make the scratch sizes overflow. */
static int hp_int(const gguf_file *f, const char *key, int required, int64_t lo, int64_t hi,
                  int dflt, int *out, sd_err *e) {
    int64_t v;
    int r = gguf_get_int(f, key, &v, e);
    if (r < 0) return -1;
    if (r == 1) {
        if (required) return sd_fail(e, "missing required key '%s'", key);
        *out = dflt;
        return 0;
    }
    if (v < lo || v > hi)
        return sd_fail(e, "key '%s' = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", key,
                       v, lo, hi);
    *out = (int)v;
    return 0;
}

static int hp_float(const gguf_file *f, const char *key, int required, double lo, double hi,
                    float dflt, float *out, sd_err *e) {
    double v;
    int r = gguf_get_float(f, key, &v, e);
    if (r < 0) return -1;
    if (r == 1) {
        if (required) return sd_fail(e, "missing required key '%s'", key);
        *out = dflt;
        return 0;
    }
    if (!(v >= lo && v <= hi)) return sd_fail(e, "key '%s' = %g is out of range", key, v);
    *out = (float)v;
    return 0;
}

/* The architectures this engine runs. They share the Llama block; qwen2
 * adds F32 biases on Q, K and V and rotates NEOX pairs (x[j], x[j + d/2]),
 * the rotation llama.cpp applies to that architecture (the file has no key
 * for it). */
static const struct {
    const char *name;
    int arch, neox, qkv_bias;
} archs[] = {{"llama", SD_ARCH_LLAMA, 0, 0}, {"qwen2", SD_ARCH_QWEN2, 1, 1}}; /* by enum sd_arch */
#define N_ARCHS (int)(sizeof archs / sizeof archs[0])

static int read_hparams(const gguf_file *f, sd_hparams *hp, sd_err *e) {
    gguf_str arch;
    int r = gguf_get_str(f, "general.architecture", &arch, e);
    if (r < 0) return -1;
    if (r == 1) return sd_fail(e, "missing required key 'general.architecture'");
    int a = 0;
    while (a < N_ARCHS && !gguf_str_eq(arch, archs[a].name)) a++;
    if (a == N_ARCHS) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(arch.len < 63 ? arch.len : 63), arch.s);
        return sd_fail(e, "architecture '%s' is not supported (supported: llama, qwen2)", name);
    }
    hp->arch = archs[a].arch;
    hp->rope_neox = archs[a].neox;
    hp->qkv_bias = archs[a].qkv_bias;
    const char *p = archs[a].name;
    char k[7][96];
    snprintf(k[0], sizeof k[0], "%s.embedding_length", p);
    snprintf(k[1], sizeof k[1], "%s.block_count", p);
    snprintf(k[2], sizeof k[2], "%s.feed_forward_length", p);
    snprintf(k[3], sizeof k[3], "%s.attention.head_count", p);
    snprintf(k[4], sizeof k[4], "%s.context_length", p);
    snprintf(k[5], sizeof k[5], "%s.attention.layer_norm_rms_epsilon", p);
    snprintf(k[6], sizeof k[6], "%s.rope.freq_base", p);
    if (hp_int(f, k[0], 1, 1, 65536, 0, &hp->dim, e) ||
        hp_int(f, k[1], 1, 1, 1024, 0, &hp->n_layers, e) ||
        hp_int(f, k[2], 1, 1, 1 << 20, 0, &hp->ffn, e) ||
        hp_int(f, k[3], 1, 1, 1024, 0, &hp->n_heads, e) ||
        hp_int(f, k[4], 1, 1, 1 << 24, 0, &hp->ctx_train, e) ||
        hp_float(f, k[5], 1, 0.0, 1.0, 0, &hp->eps, e) ||
        hp_float(f, k[6], 0, 1.0, 1e12, 10000.0f, &hp->rope_base, e))
        return -1;
    snprintf(k[0], sizeof k[0], "%s.attention.head_count_kv", p);
    if (hp_int(f, k[0], 0, 1, hp->n_heads, hp->n_heads, &hp->n_kv_heads, e)) return -1;
    if (hp->dim % hp->n_heads)
        return sd_fail(e, "%s.embedding_length %d is not a multiple of head_count %d", p, hp->dim,
                       hp->n_heads);
    if (hp->n_heads % hp->n_kv_heads)
        return sd_fail(e, "head_count %d is not a multiple of head_count_kv %d", hp->n_heads,
                       hp->n_kv_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if (hp->head_dim % 2) return sd_fail(e, "head size %d is odd", hp->head_dim);
    snprintf(k[0], sizeof k[0], "%s.rope.dimension_count", p);
    if (hp_int(f, k[0], 0, 2, hp->head_dim, hp->head_dim, &hp->rope_dim, e)) return -1;
    if (hp->rope_dim % 2) return sd_fail(e, "%s %d is odd", k[0], hp->rope_dim);
    return 0;
}

/* ---- weights --------------------------------------------------------------
 * A matrix is a 2-d tensor [cols, rows] (GGUF ne0 = cols); a vector has one
 * dimension. The shape must equal what the hyper-parameters declare. */
static int bind(const gguf_file *f, const char *name, int64_t cols, int64_t rows, sd_weight *w,
                sd_err *e) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return sd_fail(e, "missing tensor '%s'", name);
    int64_t got_rows = (int64_t)t->ne[1];
    int vector = rows == 1;
    if ((int64_t)t->ne[0] != cols || got_rows != rows || t->ne[2] != 1 || t->ne[3] != 1 ||
        (vector && t->n_dims != 1) || (!vector && t->n_dims != 2))
        return sd_fail(e,
                       "tensor '%s' has shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                       "], the hyper-parameters say [%" PRId64 ", %" PRId64 "]",
                       name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], cols, rows);
    if (vector && t->type != SD_F32)
        return sd_fail(e, "tensor '%s' is %s; norm weights must be F32", name,
                       sd_wtype_name(t->type));
    w->type = t->type;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)sd_row_bytes(t->type, (uint64_t)cols);
    w->data = t->data;
    return 0;
}

static int bind_layer(const gguf_file *f, const sd_hparams *hp, int l, sd_layer *L, sd_err *e) {
    char n[96];
    int kv_dim = hp->n_kv_heads * hp->head_dim;
#define B(field, suffix, cols, rows)                                     \
    snprintf(n, sizeof n, "blk.%d." suffix ".weight", l);                \
    if (bind(f, n, cols, rows, &L->field, e)) return -1;
    B(attn_norm, "attn_norm", hp->dim, 1)
    B(wq, "attn_q", hp->dim, hp->dim)
    B(wk, "attn_k", hp->dim, kv_dim)
    B(wv, "attn_v", hp->dim, kv_dim)
    B(wo, "attn_output", hp->dim, hp->dim)
    B(ffn_norm, "ffn_norm", hp->dim, 1)
    B(w_gate, "ffn_gate", hp->dim, hp->ffn)
    B(w_up, "ffn_up", hp->dim, hp->ffn)
    B(w_down, "ffn_down", hp->ffn, hp->dim)
#undef B
    if (!hp->qkv_bias) return 0;
#define BIAS(field, suffix, len)                                         \
    snprintf(n, sizeof n, "blk.%d." suffix ".bias", l);                  \
    if (bind(f, n, len, 1, &L->field, e)) return -1;
    BIAS(bq, "attn_q", hp->dim)
    BIAS(bk, "attn_k", kv_dim)
    BIAS(bv, "attn_v", kv_dim)
#undef BIAS
    return 0;
}

static void report(const sd_model *m, const char *stage, long done, long total) {
    if (!m->progress) return;
    sd_progress p = {stage, m->file ? m->file->path : NULL, done, total};
    m->progress(m->progress_ud, &p);
}

/* fn over every weight; with stage set, a progress report before the
 * first and after each layer (the output head and embeddings count as one). */
static int for_each_weight(sd_model *m, int (*fn)(sd_model *, sd_weight *, sd_err *),
                           const char *stage, sd_err *e) {
    const long total = m->hp.n_layers + 1;
    if (stage) report(m, stage, 0, total);
    if (fn(m, &m->tok_embd, e) || fn(m, &m->out_norm, e)) return -1;
    if (!m->hp.tied_output && fn(m, &m->output, e)) return -1;
    if (stage) report(m, stage, 1, total);
    for (int l = 0; l < m->hp.n_layers; l++) {
        sd_layer *L = &m->layers[l];
        sd_weight *ws[] = {&L->attn_norm, &L->wq, &L->wk,       &L->wv,     &L->wo, &L->ffn_norm,
                           &L->w_gate,    &L->w_up, &L->w_down, &L->bq, &L->bk, &L->bv};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (ws[i]->data && fn(m, ws[i], e)) return -1;
        if (stage) report(m, stage, l + 2, total);
    }
    return 0;
}

static int upload_one(sd_model *m, sd_weight *w, sd_err *e) {
    return m->be->upload_weight(m->be, w, e);
}

/* A weight whose data still points into the file was never uploaded (an
 * upload that failed part way leaves the rest so): only the others are the
 * backend's to release. */
static int release_one(sd_model *m, sd_weight *w, sd_err *e) {
    (void)e;
    const uint8_t *p = w->data, *base = m->file->base;
    if (p && !(p >= base && p < base + m->file->size)) m->be->release_weight(m->be, w);
    return 0;
}

void sd_model_free(sd_model *m) {
    if (!m) return;
    if (m->be) {
        float *bufs[] = {m->x, m->xb, m->q, m->att, m->hb, m->hb2, m->logits};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) m->be->release(m->be, bufs[i]);
        sd_kv_free(m->kv);
        if (m->layers && m->be->release_weight) for_each_weight(m, release_one, NULL, NULL);
        m->be->destroy(m->be);
    }
    free(m->layers);
    sd_tokenizer_free(m->tok);
    gguf_close(m->file);
    free(m);
}

static void *scratch(sd_model *m, size_t floats, sd_err *e) {
    return m->be->alloc(m->be, floats * sizeof(float), e);
}

sd_model *sd_model_from_gguf(gguf_file *f, sd_backend *be, const sd_model_opts *o, sd_err *e) {
    if (!be) {
        gguf_close(f);
        return NULL;
    }
    sd_model *m = calloc(1, sizeof *m);
    if (!m) {
        be->destroy(be);
        gguf_close(f);
        sd_fail(e, "out of memory");
        return NULL;
    }
    m->file = f;
    m->be = be;
    if (o) {
        m->progress = o->progress;
        m->progress_ud = o->progress_ud;
    }
    sd_hparams *hp = &m->hp;
    if (read_hparams(f, hp, e)) goto fail;
    m->tok = sd_tokenizer_load(f, e);
    if (!m->tok) goto fail;
    hp->vocab = sd_tokenizer_n_vocab(m->tok);
    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) {
        sd_fail(e, "out of memory");
        goto fail;
    }
    if (bind(f, "token_embd.weight", hp->dim, hp->vocab, &m->tok_embd, e) ||
        bind(f, "output_norm.weight", hp->dim, 1, &m->out_norm, e))
        goto fail;
    hp->tied_output = gguf_find_tensor(f, "output.weight") == NULL;
    if (hp->tied_output)
        m->output = m->tok_embd;
    else if (bind(f, "output.weight", hp->dim, hp->vocab, &m->output, e))
        goto fail;
    for (int l = 0; l < hp->n_layers; l++)
        if (bind_layer(f, hp, l, &m->layers[l], e)) goto fail;

    if (for_each_weight(m, upload_one, "loading", e)) goto fail;
    if (hp->tied_output) m->output = m->tok_embd;

    m->n_ctx = sd_model_ctx(hp, o ? o->n_ctx : 0);
    if (m->n_ctx > hp->ctx_train) {
        sd_fail(e, "context %d is larger than the model's context_length %d", m->n_ctx,
                hp->ctx_train);
        goto fail;
    }
    m->max_batch = MAX_BATCH;
    size_t mb = (size_t)m->max_batch;
    m->kv_type = o ? o->kv_type : SD_F32;
    m->kv = sd_kv_create(m->be, hp->n_layers, hp->n_kv_heads * hp->head_dim, m->n_ctx, m->kv_type,
                         e);
    if (!m->kv || !(m->x = scratch(m, mb * hp->dim, e)) || !(m->xb = scratch(m, mb * hp->dim, e)) ||
        !(m->q = scratch(m, mb * hp->dim, e)) || !(m->att = scratch(m, mb * hp->dim, e)) ||
        !(m->hb = scratch(m, mb * hp->ffn, e)) || !(m->hb2 = scratch(m, mb * hp->ffn, e)) ||
        !(m->logits = scratch(m, mb * hp->vocab, e)))
        goto fail;
    return m;
fail:
    sd_model_free(m);
    return NULL;
}

int sd_model_ctx(const sd_hparams *hp, int n_ctx) {
    return n_ctx > 0 ? n_ctx : (hp->ctx_train < 4096 ? hp->ctx_train : 4096);
}

int sd_model_hparams(const char *path, sd_hparams *hp, sd_err *e) {
    gguf_file *f = gguf_open(path, e);
    int rc = f ? read_hparams(f, hp, e) : -1;
    gguf_close(f);
    if (rc) sd_wrap(e, path);
    return rc;
}

sd_model *sd_model_load(const char *path, sd_backend *be, const sd_model_opts *o, sd_err *e) {
    if (!be) return NULL;
    gguf_file *f = gguf_open(path, e);
    if (!f) {
        be->destroy(be);
        sd_wrap(e, path);
        return NULL;
    }
    sd_model *m = sd_model_from_gguf(f, be, o, e);
    if (!m) sd_wrap(e, path);
    return m;
}

/* ---- forward ----------------------------------------------------------------
 * One layer loop serves two layouts of the nb rows in m->x:
 *   - one sequence (n_seq = 1) at consecutive positions pos..pos+nb-1 of
 *     kvs[0]: qkv_rope writes the nb new K/V rows as one block at position
 *     pos of the layer cache, attention is causal over the block;
 *   - nb sequences (n_seq = nb) that all stand at position pos, each with
 *     its own cache (beams): qkv_rope_same_pos writes row i's K/V straight
 *     into position pos of kvs[i], attention runs per sequence.
 * Either way the matrix products run once over all nb rows. */
static int run_layers(sd_model *m, sd_kv *const *kvs, int n_seq, const int32_t *tokens, int nb,
                      int pos, int n_layers, sd_err *e) {
    sd_backend *b = m->be;
    const sd_hparams *hp = &m->hp;
    sd_attn_shape s = {.n_head = hp->n_heads, .n_kv = hp->n_kv_heads, .head_dim = hp->head_dim,
                       .rope_dim = hp->rope_dim, .rope_base = hp->rope_base,
                       .neox = hp->rope_neox, .kv_type = kvs[0]->type};
    size_t qd = (size_t)hp->dim;
    void *kd[SD_MAX_ROWS], *vd[SD_MAX_ROWS];
    if (b->embed(b, m->x, &m->tok_embd, tokens, nb, e)) return -1;
    for (int l = 0; l < n_layers; l++) {
        const sd_layer *L = &m->layers[l];
        s.bq = L->bq.data;
        s.bk = L->bk.data;
        s.bv = L->bv.data;
        if (b->rmsnorm(b, m->xb, m->x, &L->attn_norm, nb, hp->dim, hp->eps, e)) return -1;
        if (n_seq == 1) {
            sd_kv *kv = kvs[0];
            if (b->qkv_rope(b, &s, m->q, sd_kv_at(kv, kv->k[l], pos), sd_kv_at(kv, kv->v[l], pos),
                            &L->wq, &L->wk, &L->wv, m->xb, nb, pos, e) ||
                b->attention(b, &s, m->att, m->q, kv->k[l], kv->v[l], nb, pos, e))
                return -1;
        } else {
            for (int i = 0; i < nb; i++) {
                kd[i] = sd_kv_at(kvs[i], kvs[i]->k[l], pos);
                vd[i] = sd_kv_at(kvs[i], kvs[i]->v[l], pos);
            }
            if (b->qkv_rope_same_pos(b, &s, m->q, kd, vd, &L->wq, &L->wk, &L->wv, m->xb, nb, pos,
                                     e))
                return -1;
            for (int i = 0; i < nb; i++)
                if (b->attention(b, &s, m->att + i * qd, m->q + i * qd, kvs[i]->k[l], kvs[i]->v[l],
                                 1, pos, e))
                    return -1;
        }
        if (b->matmul(b, m->x, &L->wo, m->att, nb, 1, e) ||
            b->rmsnorm(b, m->xb, m->x, &L->ffn_norm, nb, hp->dim, hp->eps, e) ||
            b->ffn_swiglu(b, m->hb, m->hb2, &L->w_gate, &L->w_up, m->xb, nb, e) ||
            b->matmul(b, m->x, &L->w_down, m->hb, nb, 1, e))
            return -1;
    }
    return 0;
}

/* What comes back for the output rows of a call: their logits (host
 * [rows][vocab]; NULL: none, they stay in m->logits) or, when ids is set,
 * only the top k ids of each row (host [rows][k]) and, when probs is set,
 * their softmax probabilities (host [rows][k]). */
typedef struct fwd_out {
    float *logits;
    int k;
    int32_t *ids;
    float *probs;
    int graph;     /* 1: the backend records; head ends the recording and runs it */
    int head_rows; /* the head's rows in use (token ids below it); vocab: all */
} fwd_out;

/* A head over the first hr = o->head_rows token ids (a drafter's trimmed
 * vocabulary): where the backend takes row-prefix views, a weight view of
 * hr rows, one product per row so each row's logits keep the [vocab]
 * stride of m->logits (elsewhere the whole head, the same ids); ids come
 * from the hr leading logits, host logits get -inf past hr. */
static int head_trimmed(sd_model *m, int rows, const fwd_out *o, int r0, sd_err *e) {
    sd_backend *b = m->be;
    const int vocab = m->hp.vocab, hr = o->head_rows;
    sd_weight w = m->output;
    if (!b->row_prefix_views) {
        if (b->matmul(b, m->logits, &w, m->xb, rows, 0, e)) return -1;
    } else {
        w.rows = hr;
        for (int r = 0; r < rows; r++)
            if (b->matmul(b, m->logits + (size_t)r * vocab, &w, m->xb + (size_t)r * m->hp.dim, 1, 0, e))
                return -1;
    }
    for (int r = 0; r < rows; r++) {
        const float *src = m->logits + (size_t)r * vocab;
        if (o->ids) {
            const size_t at = (size_t)(r0 + r) * o->k;
            if (b->top_k_rows(b, src, 1, hr, o->k, o->ids + at, o->probs ? o->probs + at : NULL, e))
                return -1;
        } else if (o->logits) {
            float *dst = o->logits + (size_t)(r0 + r) * vocab;
            if (b->to_host(b, dst, src, (size_t)hr * sizeof(float), e)) return -1;
            for (int i = hr; i < vocab; i++) dst[i] = -INFINITY;
        }
    }
    return o->graph ? b->graph_end(b, 1, e) : 0;
}

/* The output head over rows of m->x starting at row x0, landing at output
 * row r0: logits in backend memory (m->logits), then what o asks for. */
static int head(sd_model *m, int x0, int rows, const fwd_out *o, int r0, sd_err *e) {
    sd_backend *b = m->be;
    const sd_hparams *hp = &m->hp;
    if (b->rmsnorm(b, m->xb, m->x + (size_t)x0 * hp->dim, &m->out_norm, rows, hp->dim, hp->eps,
                   e))
        return -1;
    if (o->head_rows < hp->vocab)
        return head_trimmed(m, rows, o, r0, e);
    if (b->matmul(b, m->logits, &m->output, m->xb, rows, 0, e)) return -1;
    const size_t at = (size_t)r0 * o->k;
    if (o->ids) {
        /* recorded (o->graph) with the step: graph_end runs it and brings the ids */
        if (b->top_k_rows(b, m->logits, rows, hp->vocab, o->k, o->ids + at, o->probs ? o->probs + at : NULL, e))
            return -1;
        return o->graph ? b->graph_end(b, 1, e) : 0;
    }
    if (!o->logits) return 0;
    return b->to_host(b, o->logits + (size_t)r0 * hp->vocab, m->logits,
                      (size_t)rows * hp->vocab * sizeof(float), e);
}

/* Tokens are processed in chunks of max_batch so scratch stays bounded; the
 * cache makes chunking exact (chunk c attends to everything before it).
 * m->logits holds one chunk's rows, so the output head runs per chunk on
 * the chunk's share of the last n_out positions. */
static int forward(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                   int n_out, const fwd_out *o, sd_err *e) {
    const sd_hparams *hp = &m->hp;
    if (n_layers <= 0 || n_layers > hp->n_layers) n_layers = hp->n_layers;
    if (n < 1) return sd_fail(e, "forward: no tokens");
    if (n_out < 0 || n_out > n)
        return sd_fail(e, "forward: %d logit rows asked for %d tokens", n_out, n);
    if (pos < 0 || pos > kv->n)
        return sd_fail(e, "forward: position %d but the cache holds %d", pos, kv->n);
    if (n > kv->n_ctx - pos)
        return sd_fail(e, "context full: %d tokens at position %d exceed the context of %d", n, pos,
                       kv->n_ctx);
    if (kv->n_layers < n_layers)
        return sd_fail(e, "forward: cache has %d layers, %d asked", kv->n_layers, n_layers);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->vocab)
            return sd_fail(e, "forward: token id %d is outside the vocabulary [0, %d)", tokens[i],
                           hp->vocab);
    kv->n = pos;
    /* A step of one chunk that returns only ids (a greedy decode step, a
     * verification of drafted tokens) is recorded and run as one unit where
     * the backend can (backend.h graph_begin: the CUDA backend's graphs);
     * when recording fails nothing has run, and the step runs again the
     * plain way. */
    sd_backend *b = m->be;
    if (n <= m->max_batch && n_out >= 1 && o->ids && b->graph_begin) {
        int g = b->graph_begin(b, e);
        if (g < 0) return -1;
        if (g == 1) {
            fwd_out og = *o;
            og.graph = 1;
            if (run_layers(m, &kv, 1, tokens, n, pos, n_layers, e) == 0 &&
                head(m, n - n_out, n_out, &og, 0, e) == 0) {
                kv->n = pos + n;
                return 0;
            }
            sd_err ignored;
            b->graph_end(b, 0, &ignored);
        }
    }
    int first_out = n - n_out;
    const int chunked = n > m->max_batch;
    for (int c = 0; c < n; c += m->max_batch) {
        int nb = n - c < m->max_batch ? n - c : m->max_batch;
        if (chunked) report(m, "prefill", c, n);
        if (run_layers(m, &kv, 1, tokens + c, nb, pos + c, n_layers, e)) return -1;
        kv->n = pos + c + nb;
        int lo = first_out > c ? first_out : c;
        if (lo < c + nb && head(m, lo - c, c + nb - lo, o, lo - first_out, e)) return -1;
    }
    if (chunked) report(m, "prefill", n, n);
    return 0;
}

int sd_head_rows(const sd_model *m, int vocab_limit) {
    const int vocab = m->hp.vocab;
    if (vocab_limit <= 0 || vocab_limit >= vocab) return vocab;
    const int r = (vocab_limit + 15) / 16 * 16;
    return r < vocab ? r : vocab;
}

int sd_forward_head(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                    int vocab_limit, float *logits, int n_logits, int k, int32_t *ids, float *probs,
                    sd_err *e) {
    const int hr = sd_head_rows(m, vocab_limit);
    if (ids && (n_logits < 1 || k < 1 || k > hr || k > SD_TOP_K_MAX))
        return sd_fail(e, "forward: top %d ids of %d rows (k 1 to %d, at least one row)", k,
                       n_logits, SD_TOP_K_MAX < hr ? SD_TOP_K_MAX : hr);
    fwd_out o = {ids ? NULL : logits, ids ? k : 0, ids, ids ? probs : NULL, 0, hr};
    return forward(m, kv, tokens, n, pos, n_layers, n_logits, &o, e);
}

int sd_forward_ex(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                  float *logits, int n_logits, sd_err *e) {
    return sd_forward_head(m, kv, tokens, n, pos, n_layers, 0, logits, n_logits, 0, NULL, NULL, e);
}

int sd_forward_top_k(sd_model *m, sd_kv *kv, const int32_t *tokens, int n, int pos, int n_layers,
                     int n_rows, int k, int32_t *ids, sd_err *e) {
    return sd_forward_head(m, kv, tokens, n, pos, n_layers, 0, NULL, n_rows, k, ids, NULL, e);
}

int sd_forward(sd_model *m, const int32_t *tokens, int n, int pos, float *logits, sd_err *e) {
    return sd_forward_ex(m, m->kv, tokens, n, pos, 0, logits, n, e);
}

int sd_forward_multi(sd_model *m, sd_kv *const *kvs, const int32_t *tokens, int n, int pos,
                     float *logits, sd_err *e) {
    const sd_hparams *hp = &m->hp;
    if (n < 1 || n > m->max_batch)
        return sd_fail(e, "forward: %d sequences (1 to %d supported)", n, m->max_batch);
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= hp->vocab)
            return sd_fail(e, "forward: token id %d is outside the vocabulary [0, %d)", tokens[i],
                           hp->vocab);
        if (pos < 0 || pos > kvs[i]->n || pos >= kvs[i]->n_ctx || kvs[i]->n_layers < hp->n_layers)
            return sd_fail(e, "forward: sequence %d cannot take position %d (cache holds %d of %d)",
                           i, pos, kvs[i]->n, kvs[i]->n_ctx);
    }
    if (run_layers(m, kvs, n, tokens, n, pos, hp->n_layers, e)) return -1;
    for (int i = 0; i < n; i++) kvs[i]->n = pos + 1;
    fwd_out o = {logits, 0, NULL, NULL, 0, m->hp.vocab};
    return head(m, 0, n, &o, 0, e);
}

uint64_t sd_model_weight_bytes(const sd_model *m) {
    uint64_t total = m->tok_embd.row_bytes + m->out_norm.row_bytes;
    total += (uint64_t)m->output.row_bytes * (uint64_t)m->output.rows;
    for (int l = 0; l < m->hp.n_layers; l++) {
        const sd_layer *L = &m->layers[l];
        const sd_weight *ws[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo,
                                 &L->ffn_norm, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            total += (uint64_t)ws[i]->row_bytes * (uint64_t)ws[i]->rows;
    }
    return total;
}

const char *sd_model_describe(const sd_model *m, char *buf, size_t cap) {
    const sd_hparams *hp = &m->hp;
    snprintf(buf, cap,
             "%s: dim %d, %d layers, %d heads (%d kv), ffn %d, vocab %d, context %d (model %d), "
             "layer weights %s, head %s%s",
             archs[hp->arch].name, hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->ffn,
             hp->vocab, m->n_ctx,
             hp->ctx_train, sd_wtype_name(m->layers[0].wq.type), sd_wtype_name(m->output.type),
             hp->tied_output ? " (tied)" : "");
    return buf;
}
