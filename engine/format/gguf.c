#include "engine/format/gguf.h"
#include "kernels/common/wtype.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Names of ggml types we do not support, so the refusal can say what it saw. */
static const char *ggml_type_name(uint32_t t) {
    static const char *names[] = {"F32", "F16", "Q4_0", "Q4_1", "Q4_2", "Q4_3", "Q5_0", "Q5_1",
                                  "Q8_0", "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K",
                                  "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",
                                  "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
                                  "BF16"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static const char *vtype_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t < GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

/* ---- bounds-checked cursor -------------------------------------------- */
typedef struct cursor {
    const uint8_t *base;
    uint64_t size, off;
    sd_err *e;
} cursor;

static uint64_t remaining(const cursor *c) { return c->size - c->off; }

static int need(cursor *c, uint64_t n, const char *what) {
    if (n > remaining(c))
        return sd_fail(c->e, "truncated %s at offset %" PRIu64 " (needs %" PRIu64
                             " bytes, %" PRIu64 " left)",
                       what, c->off, n, remaining(c));
    return 0;
}

static int rd(cursor *c, void *out, uint64_t n, const char *what) {
    if (need(c, n, what)) return -1;
    memcpy(out, c->base + c->off, n);
    c->off += n;
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what) { return rd(c, v, 4, what); }
static int rd_u64(cursor *c, uint64_t *v, const char *what) { return rd(c, v, 8, what); }

static int rd_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    if (rd_u64(c, &len, what)) return -1;
    if (len > remaining(c))
        return sd_fail(c->e, "%s: string length %" PRIu64 " at offset %" PRIu64
                             " runs past the end of the file (%" PRIu64 " bytes left)",
                       what, len, c->off - 8, remaining(c));
    s->s = (const char *)(c->base + c->off);
    s->len = len;
    c->off += len;
    return 0;
}

static uint64_t scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- metadata values ---------------------------------------------------
 * Arrays of numbers stay in the map (data points at the first element);
 * arrays of strings get an index of gguf_str, nested arrays an array of
 * gguf_value. Before allocating either, the count is checked against the
 * bytes left (a string costs at least its 8-byte length, an array at least
 * its 12-byte header), so a forged count cannot ask for more memory than a
 * small multiple of the file size. Nesting is capped to bound recursion. */
#define MAX_NESTING 8

static void value_free(gguf_value *v) {
    if (v->type != GGUF_ARRAY) return;
    free(v->v.arr.strs);
    if (v->v.arr.vals) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.vals[i]);
        free(v->v.arr.vals);
    }
}

static int rd_value(cursor *c, uint32_t type, gguf_value *v, int depth, const char *key);

static int rd_array(cursor *c, gguf_value *v, int depth, const char *key) {
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et, "array element type") || rd_u64(c, &n, "array length")) return -1;
    if (et >= GGUF_VTYPE_COUNT)
        return sd_fail(c->e, "key '%s': unknown array element type %" PRIu32, key, et);
    if (depth >= MAX_NESTING)
        return sd_fail(c->e, "key '%s': arrays nested deeper than %d", key, MAX_NESTING);
    v->v.arr.type = et;
    v->v.arr.n = n;
    uint64_t es = scalar_size(et);
    if (es) {
        if (n > remaining(c) / es)
            return sd_fail(c->e, "key '%s': array of %" PRIu64 " %s runs past the end of the file",
                           key, n, vtype_name(et));
        v->v.arr.data = c->base + c->off;
        c->off += n * es;
        return 0;
    }
    uint64_t min_elem = et == GGUF_STRING ? 8 : 12;
    if (n > remaining(c) / min_elem)
        return sd_fail(c->e, "key '%s': array of %" PRIu64 " %s runs past the end of the file", key,
                       n, vtype_name(et));
    if (n == 0) return 0;
    if (et == GGUF_STRING) {
        v->v.arr.strs = malloc(n * sizeof *v->v.arr.strs);
        if (!v->v.arr.strs) return sd_fail(c->e, "key '%s': out of memory", key);
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(c, &v->v.arr.strs[i], key)) return -1;
        return 0;
    }
    v->v.arr.vals = calloc(n, sizeof *v->v.arr.vals);
    if (!v->v.arr.vals) return sd_fail(c->e, "key '%s': out of memory", key);
    for (uint64_t i = 0; i < n; i++)
        if (rd_value(c, GGUF_ARRAY, &v->v.arr.vals[i], depth + 1, key)) return -1;
    return 0;
}

static int rd_value(cursor *c, uint32_t type, gguf_value *v, int depth, const char *key) {
    v->type = type;
    uint8_t b[8];
    switch (type) {
    case GGUF_UINT8:  if (rd(c, b, 1, key)) return -1; v->v.u = b[0]; return 0;
    case GGUF_INT8:   if (rd(c, b, 1, key)) return -1; v->v.i = (int8_t)b[0]; return 0;
    case GGUF_BOOL:
        if (rd(c, b, 1, key)) return -1;
        if (b[0] > 1) return sd_fail(c->e, "key '%s': bool value %u is not 0 or 1", key, b[0]);
        v->v.u = b[0];
        return 0;
    case GGUF_UINT16: { uint16_t x; if (rd(c, &x, 2, key)) return -1; v->v.u = x; return 0; }
    case GGUF_INT16:  { int16_t x;  if (rd(c, &x, 2, key)) return -1; v->v.i = x; return 0; }
    case GGUF_UINT32: { uint32_t x; if (rd(c, &x, 4, key)) return -1; v->v.u = x; return 0; }
    case GGUF_INT32:  { int32_t x;  if (rd(c, &x, 4, key)) return -1; v->v.i = x; return 0; }
    case GGUF_FLOAT32: { float x;   if (rd(c, &x, 4, key)) return -1; v->v.f = x; return 0; }
    case GGUF_UINT64: { uint64_t x; if (rd(c, &x, 8, key)) return -1; v->v.u = x; return 0; }
    case GGUF_INT64:  { int64_t x;  if (rd(c, &x, 8, key)) return -1; v->v.i = x; return 0; }
    case GGUF_FLOAT64: { double x;  if (rd(c, &x, 8, key)) return -1; v->v.f = x; return 0; }
    case GGUF_STRING: return rd_str(c, &v->v.str, key);
    case GGUF_ARRAY:  return rd_array(c, v, depth, key);
    default:
        return sd_fail(c->e, "key '%s': unknown value type %" PRIu32 " at offset %" PRIu64, key,
                       type, c->off - 4);
    }
}

/* ---- duplicate detection ----------------------------------------------
 * Open-addressing set of string views, sized to twice the count. */
static uint64_t str_hash(gguf_str s) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.s[i]) * 1099511628211ull;
    return h;
}

static int str_same(gguf_str a, gguf_str b) {
    return a.len == b.len && memcmp(a.s, b.s, a.len) == 0;
}

/* Returns 1 when a duplicate is found, 0 when none, -1 on out-of-memory. */
static int find_duplicate(const gguf_str *names, size_t stride, uint64_t n, uint64_t *dup) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    uint64_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return -1;
    int found = 0;
    for (uint64_t i = 0; i < n && !found; i++) {
        gguf_str s = *(const gguf_str *)((const char *)names + i * stride);
        uint64_t h = str_hash(s) & (cap - 1);
        while (slot[h]) {
            gguf_str o = *(const gguf_str *)((const char *)names + (slot[h] - 1) * stride);
            if (str_same(s, o)) { *dup = i; found = 1; break; }
            h = (h + 1) & (cap - 1);
        }
        if (!found) slot[h] = i + 1;
    }
    free(slot);
    return found;
}

/* Copies a name into a printable NUL-terminated buffer for messages. */
static const char *show(gguf_str s, char *buf, size_t cap) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.s[i];
        buf[i] = (ch >= 32 && ch < 127) ? (char)ch : '?';
    }
    buf[n] = 0;
    return buf;
}

/* ---- header, metadata, tensor table ------------------------------------ */
static int parse(gguf_file *f, sd_err *e) {
    cursor c = {f->base, f->size, 0, e};
    char name[96];
    uint8_t magic[4];
    if (f->size < 4 || memcmp(f->base, "GGUF", 4) != 0) {
        if (f->size < 4) return sd_fail(e, "not a GGUF file (only %" PRIu64 " bytes)", f->size);
        return sd_fail(e, "not a GGUF file (bad magic %02x %02x %02x %02x)", f->base[0],
                       f->base[1], f->base[2], f->base[3]);
    }
    if (rd(&c, magic, 4, "header")) return -1;
    if (rd_u32(&c, &f->version, "header")) return -1;
    if (f->version != 2 && f->version != 3) {
        if (f->version == 1) return sd_fail(e, "GGUF version 1 is not supported (need 2 or 3)");
        if ((f->version & 0xffff) == 0)
            return sd_fail(e, "GGUF version %" PRIu32 " looks big-endian; only little-endian files are supported",
                           f->version);
        return sd_fail(e, "unsupported GGUF version %" PRIu32 " (need 2 or 3)", f->version);
    }
    if (rd_u64(&c, &f->n_tensors, "header") || rd_u64(&c, &f->n_kv, "header")) return -1;
    /* a key costs at least 8 (length) + 4 (type) + 1 bytes */
    if (f->n_kv > remaining(&c) / 13)
        return sd_fail(e, "metadata count %" PRIu64 " cannot fit in the file", f->n_kv);
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    if (!f->kv) return sd_fail(e, "out of memory for %" PRIu64 " metadata entries", f->n_kv);
    f->alignment = 32;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        uint32_t type;
        if (rd_str(&c, &kv->key, "metadata key")) return -1;
        show(kv->key, name, sizeof name);
        if (rd_u32(&c, &type, name)) return -1;
        if (type >= GGUF_VTYPE_COUNT)
            return sd_fail(e, "key '%s': unknown value type %" PRIu32, name, type);
        if (rd_value(&c, type, &kv->val, 0, name)) return -1;
        if (gguf_str_eq(kv->key, "general.alignment")) {
            if (type != GGUF_UINT32)
                return sd_fail(e, "general.alignment has type %s, expected u32", vtype_name(type));
            uint64_t a = kv->val.v.u;
            if (a == 0 || (a & (a - 1)))
                return sd_fail(e, "general.alignment %" PRIu64 " is not a power of two", a);
            f->alignment = a;
        }
    }
    uint64_t dup;
    int d = find_duplicate(&f->kv[0].key, sizeof(gguf_kv), f->n_kv, &dup);
    if (d < 0) return sd_fail(e, "out of memory");
    if (d) return sd_fail(e, "duplicate metadata key '%s'", show(f->kv[dup].key, name, sizeof name));

    /* a tensor entry costs at least 8 + 4 + 8 + 4 + 8 bytes */
    if (f->n_tensors > remaining(&c) / 32)
        return sd_fail(e, "tensor count %" PRIu64 " cannot fit in the file", f->n_tensors);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors) return sd_fail(e, "out of memory for %" PRIu64 " tensors", f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (rd_str(&c, &t->name, "tensor name")) return -1;
        show(t->name, name, sizeof name);
        if (rd_u32(&c, &t->n_dims, "tensor table")) return -1;
        if (t->n_dims < 1 || t->n_dims > 4)
            return sd_fail(e, "tensor '%s': %" PRIu32 " dimensions (1 to 4 allowed)", name, t->n_dims);
        for (uint32_t j = 0; j < 4; j++) t->ne[j] = 1;
        for (uint32_t j = 0; j < t->n_dims; j++)
            if (rd_u64(&c, &t->ne[j], "tensor table")) return -1;
        if (rd_u32(&c, &t->type, "tensor table") || rd_u64(&c, &t->offset, "tensor table")) return -1;
    }
    d = find_duplicate(&f->tensors[0].name, sizeof(gguf_tensor), f->n_tensors, &dup);
    if (d < 0) return sd_fail(e, "out of memory");
    if (d) return sd_fail(e, "duplicate tensor name '%s'", show(f->tensors[dup].name, name, sizeof name));

    /* ---- data section: every tensor must lie inside the file ---- */
    uint64_t a = f->alignment;
    if (c.off > UINT64_MAX - a) return sd_fail(e, "tensor table end overflows");
    f->data_offset = (c.off + a - 1) / a * a;
    if (f->n_tensors && f->data_offset > f->size)
        return sd_fail(e, "truncated: data section would start at %" PRIu64 " past the end (%" PRIu64 " bytes)",
                       f->data_offset, f->size);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        show(t->name, name, sizeof name);
        if (!sd_wtype_supported(t->type))
            return sd_fail(e, "tensor '%s' has type %s (%" PRIu32 "), which is not supported (supported: " SD_WTYPE_LIST ")",
                           name, ggml_type_name(t->type), t->type);
        uint64_t count = 1;
        for (uint32_t j = 0; j < t->n_dims; j++) {
            if (t->ne[j] == 0) return sd_fail(e, "tensor '%s': dimension %" PRIu32 " is zero", name, j);
            if (t->ne[j] > INT64_MAX / count)
                return sd_fail(e, "tensor '%s': element count overflows", name);
            count *= t->ne[j];
        }
        uint32_t blk = sd_wtype_block(t->type);
        if (t->ne[0] % blk)
            return sd_fail(e, "tensor '%s': row length %" PRIu64 " is not a multiple of the %s block (%" PRIu32 ")",
                           name, t->ne[0], sd_wtype_name(t->type), blk);
        uint64_t bb = sd_wtype_block_bytes(t->type);
        if (count / blk > UINT64_MAX / bb) return sd_fail(e, "tensor '%s': byte size overflows", name);
        t->nbytes = count / blk * bb;
        if (t->offset % a)
            return sd_fail(e, "tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                           name, t->offset, a);
        uint64_t avail = f->size - f->data_offset;
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return sd_fail(e, "tensor '%s' (%" PRIu64 " bytes at data offset %" PRIu64 ") runs past the end of the file",
                           name, t->nbytes, t->offset);
        t->data = f->base + f->data_offset + t->offset;
    }
    return 0;
}

static void release(gguf_file *f) {
    if (f->kv) {
        for (uint64_t i = 0; i < f->n_kv; i++) value_free(&f->kv[i].val);
        free(f->kv);
    }
    free(f->tensors);
    if (f->mapped && f->base) munmap((void *)f->base, f->size);
    free((void *)f->path);
    free(f);
}

static gguf_file *finish(gguf_file *f, sd_err *e) {
    if (parse(f, e)) {
        release(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open_mem(const void *mem, size_t size, const char *name, sd_err *e) {
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) { sd_fail(e, "out of memory"); return NULL; }
    f->path = strdup(name ? name : "<memory>");
    if (!f->path) { free(f); sd_fail(e, "out of memory"); return NULL; }
    f->base = mem;
    f->size = size;
    return finish(f, e);
}

/* What a non-regular file is, for the error that refuses it. */
static const char *file_kind(mode_t m) {
    return S_ISFIFO(m)  ? "a FIFO"
           : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a plain file";
}

gguf_file *gguf_open(const char *path, sd_err *e) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever; anything but a regular file is refused below. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { sd_fail(e, "cannot open: %s", strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        sd_fail(e, "cannot stat: %s", strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) { sd_fail(e, "is a directory, not a GGUF file"); close(fd); return NULL; }
    if (!S_ISREG(st.st_mode)) {
        sd_fail(e, "not a regular file (%s)", file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    if (st.st_size < 24) {
        sd_fail(e, "not a GGUF file (%lld bytes, a header needs 24)", (long long)st.st_size);
        close(fd);
        return NULL;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { sd_fail(e, "cannot mmap: %s", strerror(errno)); return NULL; }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) { munmap(m, (size_t)st.st_size); sd_fail(e, "out of memory"); return NULL; }
    f->path = strdup(path);
    if (!f->path) { munmap(m, (size_t)st.st_size); free(f); sd_fail(e, "out of memory"); return NULL; }
    f->base = m;
    f->size = (uint64_t)st.st_size;
    f->mapped = 1;
    return finish(f, e);
}

void gguf_close(gguf_file *f) {
    if (f) release(f);
}

/* ---- lookups ------------------------------------------------------------ */
int gguf_str_eq(gguf_str a, const char *s) {
    size_t n = strlen(s);
    return a.len == n && memcmp(a.s, s, n) == 0;
}

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i].val;
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static int is_int_type(uint32_t t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 ||
           t == GGUF_UINT32 || t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}
static int is_signed(uint32_t t) {
    return t == GGUF_INT8 || t == GGUF_INT16 || t == GGUF_INT32 || t == GGUF_INT64;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, sd_err *e) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (!is_int_type(v->type))
        return sd_fail(e, "key '%s' has type %s, expected an integer", key, vtype_name(v->type));
    if (!is_signed(v->type) && v->v.u > INT64_MAX)
        return sd_fail(e, "key '%s': value %" PRIu64 " is out of range", key, v->v.u);
    *out = is_signed(v->type) ? v->v.i : (int64_t)v->v.u;
    return 0;
}

int gguf_get_float(const gguf_file *f, const char *key, double *out, sd_err *e) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_FLOAT32 && v->type != GGUF_FLOAT64)
        return sd_fail(e, "key '%s' has type %s, expected a float", key, vtype_name(v->type));
    *out = v->v.f;
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out, sd_err *e) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_BOOL)
        return sd_fail(e, "key '%s' has type %s, expected bool", key, vtype_name(v->type));
    *out = (int)v->v.u;
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, sd_err *e) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_STRING)
        return sd_fail(e, "key '%s' has type %s, expected string", key, vtype_name(v->type));
    *out = v->v.str;
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type, const gguf_value **out,
                 sd_err *e) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return 1;
    if (v->type != GGUF_ARRAY)
        return sd_fail(e, "key '%s' has type %s, expected an array", key, vtype_name(v->type));
    if (v->v.arr.type != elem_type)
        return sd_fail(e, "key '%s' is an array of %s, expected %s", key,
                       vtype_name(v->v.arr.type), vtype_name(elem_type));
    *out = v;
    return 0;
}
