#include "engine/format/gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/format/gguf.h"

#define GW_DEFAULT_ALIGN 32
#define GW_HEADER_BYTES 24 /* magic, u32 version, u64 n_tensors, u64 n_kv */

/* ---- growable byte buffer ------------------------------------------------
 * Everything is serialised byte by byte in little-endian order, so the files
 * are the same whatever the host's byte order. */

typedef struct gwbuf {
    uint8_t *p;
    size_t n, cap;
} gwbuf;

typedef struct gw_tinfo {
    char *name;
    uint32_t type;
    int n_dims;
    uint64_t ne[GW_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
    int later;         /* 1: gw_write_with's fill supplies the data */
    int forged_offset; /* 1: write `offset` instead of the real one */
    uint64_t offset;
} gw_tinfo;

struct gw {
    int failed;
    uint32_t version;
    uint64_t align;
    gwbuf kv;
    uint64_t n_kv;
    gw_tinfo *t;
    size_t n_t, cap_t;
    int forged_n_tensors, forged_n_kv;
    uint64_t n_tensors_hdr, n_kv_hdr;
};

static int buf_reserve(gw *w, gwbuf *b, size_t more) {
    if (w->failed) return -1;
    if (b->cap - b->n >= more) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        w->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void put(gw *w, gwbuf *b, const void *src, size_t n) {
    if (n == 0 || buf_reserve(w, b, n) < 0) return;
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_le(gw *w, gwbuf *b, uint64_t v, int bytes) {
    uint8_t tmp[8];
    for (int i = 0; i < bytes; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    put(w, b, tmp, (size_t)bytes);
}

static void put_str(gw *w, gwbuf *b, const char *s) {
    size_t n = strlen(s);
    put_le(w, b, n, 8);
    put(w, b, s, n);
}

static uint64_t align_up(uint64_t x, uint64_t a) {
    return a <= 1 ? x : (x + a - 1) / a * a;
}

/* ---- builder ------------------------------------------------------------- */

gw *gw_new(uint32_t version) {
    gw *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->version = version;
    w->align = GW_DEFAULT_ALIGN;
    return w;
}

void gw_free(gw *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w->kv.p);
    free(w);
}

/* A kv entry is the key, the u32 value type, then the value; the scalar
 * setters share this prologue. */
static void kv_begin(gw *w, const char *key, uint32_t type) {
    put_str(w, &w->kv, key);
    put_le(w, &w->kv, type, 4);
    w->n_kv++;
}

static void kv_scalar(gw *w, const char *key, uint32_t type, uint64_t bits, int bytes) {
    if (!w) return;
    kv_begin(w, key, type);
    put_le(w, &w->kv, bits, bytes);
}

void gw_alignment(gw *w, uint32_t align) {
    if (!w) return;
    w->align = align;
    gw_u32(w, "general.alignment", align);
}

void gw_u8(gw *w, const char *key, uint8_t v) { kv_scalar(w, key, GGUF_UINT8, v, 1); }
void gw_i8(gw *w, const char *key, int8_t v) { kv_scalar(w, key, GGUF_INT8, (uint8_t)v, 1); }
void gw_u16(gw *w, const char *key, uint16_t v) { kv_scalar(w, key, GGUF_UINT16, v, 2); }
void gw_i16(gw *w, const char *key, int16_t v) {
    kv_scalar(w, key, GGUF_INT16, (uint16_t)v, 2);
}
void gw_u32(gw *w, const char *key, uint32_t v) { kv_scalar(w, key, GGUF_UINT32, v, 4); }
void gw_i32(gw *w, const char *key, int32_t v) {
    kv_scalar(w, key, GGUF_INT32, (uint32_t)v, 4);
}
void gw_u64(gw *w, const char *key, uint64_t v) { kv_scalar(w, key, GGUF_UINT64, v, 8); }
void gw_i64(gw *w, const char *key, int64_t v) {
    kv_scalar(w, key, GGUF_INT64, (uint64_t)v, 8);
}
void gw_bool(gw *w, const char *key, int v) { kv_scalar(w, key, GGUF_BOOL, v ? 1 : 0, 1); }

void gw_f32(gw *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    kv_scalar(w, key, GGUF_FLOAT32, bits, 4);
}

void gw_f64(gw *w, const char *key, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    kv_scalar(w, key, GGUF_FLOAT64, bits, 8);
}

void gw_str(gw *w, const char *key, const char *v) {
    if (!w) return;
    kv_begin(w, key, GGUF_STRING);
    put_str(w, &w->kv, v);
}

static void arr_begin(gw *w, const char *key, uint32_t elem_type, uint64_t n) {
    kv_begin(w, key, GGUF_ARRAY);
    put_le(w, &w->kv, elem_type, 4);
    put_le(w, &w->kv, n, 8);
}

void gw_arr_str(gw *w, const char *key, const char *const *v, size_t n) {
    if (!w) return;
    arr_begin(w, key, GGUF_STRING, n);
    for (size_t i = 0; i < n; i++) put_str(w, &w->kv, v[i]);
}

void gw_arr_f32(gw *w, const char *key, const float *v, size_t n) {
    if (!w) return;
    arr_begin(w, key, GGUF_FLOAT32, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        put_le(w, &w->kv, bits, 4);
    }
}

void gw_arr_i32(gw *w, const char *key, const int32_t *v, size_t n) {
    if (!w) return;
    arr_begin(w, key, GGUF_INT32, n);
    for (size_t i = 0; i < n; i++) put_le(w, &w->kv, (uint32_t)v[i], 4);
}

void gw_arr_raw(gw *w, const char *key, uint32_t elem_type, uint64_t n, const void *payload,
                size_t nbytes) {
    if (!w) return;
    arr_begin(w, key, elem_type, n);
    put(w, &w->kv, payload, nbytes);
}

void gw_raw_kv(gw *w, const void *bytes, size_t n) {
    if (!w) return;
    put(w, &w->kv, bytes, n);
    w->n_kv++;
}

static void add_tensor(gw *w, const char *name, uint32_t type, int n_dims, const uint64_t *ne,
                       const void *data, size_t nbytes, int later) {
    if (!w || w->failed) return;
    if (n_dims < 0 || n_dims > GW_MAX_DIMS) {
        w->failed = 1;
        return;
    }
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 16;
        gw_tinfo *t = realloc(w->t, cap * sizeof *t);
        if (!t) {
            w->failed = 1;
            return;
        }
        w->t = t;
        w->cap_t = cap;
    }
    gw_tinfo ti = {0};
    ti.type = type;
    ti.n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) ti.ne[d] = ne[d];
    ti.nbytes = nbytes;
    ti.later = later;
    ti.name = strdup(name);
    ti.data = nbytes && !later ? malloc(nbytes) : NULL;
    if (!ti.name || (nbytes && !later && !ti.data)) {
        free(ti.name);
        free(ti.data);
        w->failed = 1;
        return;
    }
    if (ti.data) memcpy(ti.data, data, nbytes);
    w->t[w->n_t++] = ti;
}

void gw_tensor(gw *w, const char *name, uint32_t type, int n_dims, const uint64_t *ne,
               const void *data, size_t nbytes) {
    add_tensor(w, name, type, n_dims, ne, data, nbytes, 0);
}

void gw_tensor_later(gw *w, const char *name, uint32_t type, int n_dims, const uint64_t *ne,
                     size_t nbytes) {
    add_tensor(w, name, type, n_dims, ne, NULL, nbytes, 1);
}

void gw_set_n_tensors(gw *w, uint64_t n) {
    if (!w) return;
    w->forged_n_tensors = 1;
    w->n_tensors_hdr = n;
}

void gw_set_n_kv(gw *w, uint64_t n) {
    if (!w) return;
    w->forged_n_kv = 1;
    w->n_kv_hdr = n;
}

void gw_tensor_offset(gw *w, size_t idx, uint64_t offset) {
    if (!w) return;
    if (idx >= w->n_t) {
        w->failed = 1;
        return;
    }
    w->t[idx].forged_offset = 1;
    w->t[idx].offset = offset;
}

/* ---- serialisation ------------------------------------------------------- */

int gw_layout(const gw *w, size_t *tensor_info_at, size_t *data_at) {
    if (!w || w->failed) return -1;
    size_t info = GW_HEADER_BYTES + w->kv.n;
    size_t end = info;
    for (size_t i = 0; i < w->n_t; i++)
        end += 8 + strlen(w->t[i].name) + 4 + 8 * (size_t)w->t[i].n_dims + 4 + 8;
    if (tensor_info_at) *tensor_info_at = info;
    if (data_at) *data_at = (size_t)align_up(end, w->align);
    return 0;
}

/* The data section's layout: each tensor starts aligned, and the section
 * ends padded, as ggml writes it. *off ([n_t], malloc'd) gets the offsets,
 * *size the section's length. */
static int data_layout(gw *w, uint64_t **off, uint64_t *size) {
    *off = malloc((w->n_t ? w->n_t : 1) * sizeof **off);
    if (!*off) {
        w->failed = 1;
        return -1;
    }
    uint64_t end = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        (*off)[i] = align_up(end, w->align);
        end = (*off)[i] + w->t[i].nbytes;
    }
    *size = align_up(end, w->align);
    return 0;
}

/* Header, kv entries and tensor table. */
static void put_head(gw *w, gwbuf *b, const uint64_t *off) {
    put(w, b, "GGUF", 4);
    put_le(w, b, w->version, 4);
    put_le(w, b, w->forged_n_tensors ? w->n_tensors_hdr : w->n_t, 8);
    put_le(w, b, w->forged_n_kv ? w->n_kv_hdr : w->n_kv, 8);
    put(w, b, w->kv.p, w->kv.n);
    for (size_t i = 0; i < w->n_t; i++) {
        const gw_tinfo *t = &w->t[i];
        put_str(w, b, t->name);
        put_le(w, b, (uint32_t)t->n_dims, 4);
        for (int d = 0; d < t->n_dims; d++) put_le(w, b, t->ne[d], 8);
        put_le(w, b, t->type, 4);
        put_le(w, b, t->forged_offset ? t->offset : off[i], 8);
    }
}

int gw_bytes(gw *w, uint8_t **out, size_t *len) {
    size_t data_at;
    uint64_t *off, end;
    if (gw_layout(w, NULL, &data_at) < 0 || data_layout(w, &off, &end) < 0) return -1;
    gwbuf b = {0};
    if (buf_reserve(w, &b, data_at + (size_t)end) < 0) {
        free(off);
        return -1;
    }
    put_head(w, &b, off);
    /* The whole file was reserved above, so these never reallocate. */
    memset(b.p + b.n, 0, data_at + (size_t)end - b.n);
    for (size_t i = 0; i < w->n_t; i++)
        if (w->t[i].data) memcpy(b.p + data_at + off[i], w->t[i].data, w->t[i].nbytes);
    free(off);
    *out = b.p;
    *len = data_at + (size_t)end;
    return 0;
}

/* n zero bytes to fp; 0 or -1. */
static int put_zeros(FILE *fp, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (fwrite(zeros, 1, k, fp) != k) return -1;
        n -= k;
    }
    return 0;
}

int gw_write_with(gw *w, const char *path, int (*fill)(void *ud, size_t idx, uint8_t *buf),
                  void *ud) {
    size_t data_at, biggest = 0;
    uint64_t *off, end;
    if (gw_layout(w, NULL, &data_at) < 0 || data_layout(w, &off, &end) < 0) return -1;
    gwbuf head = {0};
    put_head(w, &head, off);
    for (size_t i = 0; i < w->n_t; i++)
        if (w->t[i].later && fill && w->t[i].nbytes > biggest) biggest = w->t[i].nbytes;
    uint8_t *buf = biggest ? malloc(biggest) : NULL;
    FILE *fp = w->failed || (biggest && !buf) ? NULL : fopen(path, "wb");
    int rc = fp && fwrite(head.p, 1, head.n, fp) == head.n &&
             !put_zeros(fp, data_at - head.n) ? 0 : -1;
    uint64_t written = 0;
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        const gw_tinfo *t = &w->t[i];
        const uint8_t *src = t->data;
        if (t->later && fill) {
            if (fill(ud, i, buf)) rc = -1;
            src = buf;
        }
        if (rc || put_zeros(fp, off[i] - written) ||
            (src ? fwrite(src, 1, t->nbytes, fp) != t->nbytes : put_zeros(fp, t->nbytes)))
            rc = -1;
        written = off[i] + t->nbytes;
    }
    if (!rc && put_zeros(fp, end - written)) rc = -1;
    if (fp && fclose(fp) != 0) rc = -1;
    free(buf);
    free(head.p);
    free(off);
    return rc;
}

int gw_write(gw *w, const char *path) { return gw_write_with(w, path, NULL, NULL); }
