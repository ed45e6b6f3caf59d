/* The ledger's recording backend: an sd_backend whose ops compute nothing
 * and append what they were asked (lg_op) to the trace being taken, under a
 * model of a preset's shape loaded from a GGUF image built in memory. The
 * image is the header and tensor table of synth_presets.h's plan followed by
 * an anonymous mapping as large as the weights (MAP_NORESERVE: never
 * touched, so never backed), so a 6 GB shape costs its vocabulary and
 * scratch, not its weights. The backend also has graph_begin/graph_end,
 * always recording, so the trace marks which ops a CUDA graph step holds. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/bench/ledger/ledger.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"

typedef struct rec_ctx {
    lg_trace *t; /* the trace being taken; NULL while loading */
    int recording;
    sd_err *e;
} rec_ctx;

static rec_ctx *ctx_of(sd_backend *b) { return (rec_ctx *)b->ctx; }

/* A zeroed op appended to the trace; NULL when out of memory or no trace. */
static lg_op *rec_add(sd_backend *b, int kind, int n, sd_err *e) {
    rec_ctx *c = ctx_of(b);
    lg_trace *t = c->t;
    if (!t) {
        sd_fail(e, "ledger: op %d called outside a traced step", kind);
        return NULL;
    }
    if (t->n == t->cap) {
        const int cap = t->cap ? 2 * t->cap : 512;
        lg_op *o = realloc(t->op, (size_t)cap * sizeof *o);
        if (!o) {
            sd_fail(e, "ledger: out of memory for %d ops", cap);
            return NULL;
        }
        t->op = o;
        t->cap = cap;
    }
    lg_op *o = &t->op[t->n++];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->n = n;
    o->graph = c->recording;
    return o;
}

static void put_w(lg_op *o, const sd_weight *w) {
    lg_w *d = &o->w[o->nw++];
    d->type = w->type;
    d->rows = w->rows;
    d->cols = w->cols;
}

static void put_shape(lg_op *o, const sd_attn_shape *s) {
    o->n_head = s->n_head;
    o->n_kv = s->n_kv;
    o->head_dim = s->head_dim;
}

static void rec_destroy(sd_backend *b) {
    free(b->ctx);
    free(b);
}

static void *rec_alloc(sd_backend *b, size_t bytes, sd_err *e) {
    (void)b;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) sd_fail(e, "ledger: out of memory for %zu bytes of scratch", bytes);
    return p;
}

static void rec_release(sd_backend *b, void *p) {
    (void)b;
    free(p);
}

static int rec_upload(sd_backend *b, sd_weight *w, sd_err *e) {
    (void)b, (void)w, (void)e;
    return 0;
}

static void rec_release_weight(sd_backend *b, sd_weight *w) {
    (void)b;
    w->data = NULL;
}

static int rec_to_host(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    (void)b, (void)src, (void)e;
    memset(dst, 0, bytes);
    return 0;
}

static int rec_copy(sd_backend *b, void *dst, const void *src, size_t bytes, sd_err *e) {
    (void)b, (void)dst, (void)src, (void)bytes;
    return sd_fail(e, "ledger: copy is not part of a step");
}

static int rec_embed(sd_backend *b, float *x, const sd_weight *emb, const int32_t *ids, int n,
                     sd_err *e) {
    (void)ids;
    lg_op *o = rec_add(b, LG_EMBED, n, e);
    if (!o) return -1;
    o->out = x;
    o->cols = emb->cols;
    put_w(o, emb);
    return 0;
}

static int rec_rmsnorm(sd_backend *b, float *out, const float *x, const sd_weight *w, int n,
                       int dim, float eps, sd_err *e) {
    (void)w, (void)eps;
    lg_op *o = rec_add(b, LG_RMSNORM, n, e);
    if (!o) return -1;
    o->out = out;
    o->x = x;
    o->cols = dim;
    return 0;
}

static int rec_qkv(sd_backend *b, const sd_attn_shape *s, float *q, void *k_rows, void *v_rows,
                   const sd_weight *wq, const sd_weight *wk, const sd_weight *wv, const float *x,
                   int n, int pos, sd_err *e) {
    (void)k_rows, (void)v_rows;
    lg_op *o = rec_add(b, LG_QKV, n, e);
    if (!o) return -1;
    o->out = q;
    o->x = x;
    o->pos = pos;
    o->cols = wq->cols;
    put_w(o, wq);
    put_w(o, wk);
    put_w(o, wv);
    put_shape(o, s);
    return 0;
}

static int rec_qkv_same_pos(sd_backend *b, const sd_attn_shape *s, float *q, void *const *k_dst,
                            void *const *v_dst, const sd_weight *wq, const sd_weight *wk,
                            const sd_weight *wv, const float *x, int n, int pos, sd_err *e) {
    (void)k_dst, (void)v_dst;
    return rec_qkv(b, s, q, NULL, NULL, wq, wk, wv, x, n, pos, e);
}

static int rec_attention(sd_backend *b, const sd_attn_shape *s, float *out, const float *q,
                         const void *kc, const void *vc, int n, int pos, sd_err *e) {
    (void)kc, (void)vc;
    lg_op *o = rec_add(b, LG_ATTN, n, e);
    if (!o) return -1;
    o->out = out;
    o->x = q;
    o->pos = pos;
    o->cols = (int64_t)s->n_head * s->head_dim;
    put_shape(o, s);
    return 0;
}

static int rec_matmul(sd_backend *b, float *out, const sd_weight *w, const float *x, int n,
                      int accumulate, sd_err *e) {
    lg_op *o = rec_add(b, LG_MATMUL, n, e);
    if (!o) return -1;
    o->out = out;
    o->x = x;
    o->cols = w->cols;
    o->accumulate = accumulate;
    put_w(o, w);
    return 0;
}

static int rec_top_k(sd_backend *b, const float *x, int n_rows, int cols, int k, int32_t *ids_host,
                     float *probs_host, sd_err *e) {
    lg_op *o = rec_add(b, LG_TOPK, n_rows, e);
    if (!o) return -1;
    o->x = x;
    o->cols = cols;
    o->k = k;
    memset(ids_host, 0, (size_t)n_rows * (size_t)k * sizeof *ids_host);
    if (probs_host) memset(probs_host, 0, (size_t)n_rows * (size_t)k * sizeof *probs_host);
    return 0;
}

static int rec_ffn(sd_backend *b, float *h, float *tmp, const sd_weight *w1, const sd_weight *w3,
                   const float *x, int n, sd_err *e) {
    (void)tmp;
    lg_op *o = rec_add(b, LG_FFN, n, e);
    if (!o) return -1;
    o->out = h;
    o->x = x;
    o->cols = w1->cols;
    put_w(o, w1);
    put_w(o, w3);
    return 0;
}

static int rec_graph_begin(sd_backend *b, sd_err *e) {
    (void)e;
    ctx_of(b)->recording = 1;
    return 1;
}

static int rec_graph_end(sd_backend *b, int ok, sd_err *e) {
    (void)ok, (void)e;
    ctx_of(b)->recording = 0;
    return 0;
}

static sd_backend *rec_backend(sd_err *e) {
    sd_backend *b = calloc(1, sizeof *b);
    rec_ctx *c = calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        sd_fail(e, "ledger: out of memory");
        return NULL;
    }
    b->name = "ledger";
    b->ctx = c;
    b->destroy = rec_destroy;
    b->alloc = rec_alloc;
    b->release = rec_release;
    b->upload_weight = rec_upload;
    b->release_weight = rec_release_weight;
    b->to_host = rec_to_host;
    b->copy = rec_copy;
    b->embed = rec_embed;
    b->rmsnorm = rec_rmsnorm;
    b->qkv_rope = rec_qkv;
    b->qkv_rope_same_pos = rec_qkv_same_pos;
    b->attention = rec_attention;
    b->matmul = rec_matmul;
    b->top_k_rows = rec_top_k;
    b->ffn_swiglu = rec_ffn;
    b->graph_begin = rec_graph_begin;
    b->graph_end = rec_graph_end;
    return b;
}

/* ---- the model ------------------------------------------------------------ */

struct lg_model {
    sd_model *m;
    void *image; /* the GGUF image: header, then the untouched weights */
    size_t image_bytes;
};

#define IMAGE_ALIGN 32

/* The GGUF image of preset c: the header serialised with every tensor
 * empty and its offset set where its data would lie, then a mapping of
 * header + data bytes with the header copied in. */
static int build_image(const synth_preset *c, lg_model *lm, sd_err *e) {
    synth_plan p = {0};
    synth_make_plan(c, &p);
    gw *w = gw_new(3);
    int rc = -1;
    uint8_t *hdr = NULL;
    size_t hdr_len = 0, data_at = 0;
    if (p.failed || !w || synth_add_vocab(w, c->vocab)) {
        sd_fail(e, "ledger: out of memory for the %s image", c->name);
        goto done;
    }
    synth_add_keys(w, c, IMAGE_ALIGN);
    uint64_t off = 0;
    for (int i = 0; i < p.n; i++) {
        gw_tensor_later(w, p.t[i].name, p.t[i].type, p.t[i].n_dims, p.t[i].ne, 0);
        gw_tensor_offset(w, (size_t)i, off);
        off += (p.t[i].bytes + IMAGE_ALIGN - 1) / IMAGE_ALIGN * IMAGE_ALIGN;
    }
    if (gw_layout(w, NULL, &data_at) || gw_bytes(w, &hdr, &hdr_len) || hdr_len > data_at + off) {
        sd_fail(e, "ledger: cannot serialise the %s header", c->name);
        goto done;
    }
    lm->image_bytes = data_at + off;
    void *img = mmap(NULL, lm->image_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (img == MAP_FAILED) {
        sd_fail(e, "ledger: cannot map %zu bytes for the %s image", lm->image_bytes, c->name);
        goto done;
    }
    memcpy(img, hdr, hdr_len);
    lm->image = img;
    rc = 0;
done:
    free(hdr);
    gw_free(w);
    free(p.t);
    return rc;
}

lg_model *lg_model_open(const synth_preset *c, int n_ctx, sd_err *e) {
    lg_model *lm = calloc(1, sizeof *lm);
    if (!lm) {
        sd_fail(e, "ledger: out of memory");
        return NULL;
    }
    if (build_image(c, lm, e)) {
        free(lm);
        return NULL;
    }
    gguf_file *f = gguf_open_mem(lm->image, lm->image_bytes, c->name, e);
    sd_backend *b = f ? rec_backend(e) : NULL;
    if (!b) {
        gguf_close(f);
        lg_model_close(lm);
        return NULL;
    }
    sd_model_opts o = {.n_ctx = n_ctx};
    lm->m = sd_model_from_gguf(f, b, &o, e);
    if (!lm->m) {
        sd_wrap(e, c->name);
        lg_model_close(lm);
        return NULL;
    }
    return lm;
}

int lg_model_trace(lg_model *lm, int n, int pos, lg_trace *t, sd_err *e) {
    sd_model *m = lm->m;
    if (n < 1 || n > SD_TOP_K_MAX || pos < 0 || pos + n > m->n_ctx)
        return sd_fail(e, "ledger: %d rows at position %d (1 to %d rows within %d positions)", n,
                       pos, SD_TOP_K_MAX, m->n_ctx);
    int32_t tok[SD_TOP_K_MAX], ids[SD_TOP_K_MAX];
    for (int i = 0; i < n; i++) tok[i] = 3 + i;
    rec_ctx *c = ctx_of(m->be);
    t->n = 0;
    c->t = t;
    c->recording = 0;
    m->kv->n = pos;
    const int rc = sd_forward_top_k(m, m->kv, tok, n, pos, 0, n, 1, ids, e);
    c->t = NULL;
    return rc;
}

uint64_t lg_model_weight_bytes(const lg_model *lm) { return sd_model_weight_bytes(lm->m); }

void lg_model_close(lg_model *lm) {
    if (!lm) return;
    sd_model_free(lm->m);
    if (lm->image) munmap(lm->image, lm->image_bytes);
    free(lm);
}

void lg_trace_free(lg_trace *t) {
    free(t->op);
    t->op = NULL;
    t->n = t->cap = 0;
}
