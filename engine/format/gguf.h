/* GGUF v2/v3 reader over a read-only mmap.
 *
 * Layout of a GGUF file (little endian):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to general.alignment (default 32) | tensor data
 * A string is u64 length + bytes (no NUL). Tensor offsets are relative to the
 * start of the data section and must be multiples of the alignment.
 *
 * Nothing is copied: strings and tensor data point into the mapping, which
 * lives until gguf_close. Every length, count and offset is checked against
 * the file size before it is used, so a forged file fails with a message
 * instead of reading out of bounds or allocating what it claims. */
#ifndef SD_GGUF_H
#define SD_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/error.h"
#include "kernels/common/wtype.h"

enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12,
    GGUF_VTYPE_COUNT
};

typedef struct gguf_str {
    const char *s; /* not NUL-terminated; points into the mapping */
    uint64_t len;
} gguf_str;

typedef struct gguf_value gguf_value;
struct gguf_value {
    uint32_t type; /* enum gguf_vtype */
    union {
        uint64_t u;   /* UINT8..UINT64 and BOOL */
        int64_t i;    /* INT8..INT64 */
        double f;     /* FLOAT32, FLOAT64 */
        gguf_str str; /* STRING */
        struct {
            uint32_t type;        /* element type */
            uint64_t n;           /* element count */
            const void *data;     /* numeric elements, raw little-endian in the map */
            gguf_str *strs;       /* STRING elements (allocated index), else NULL */
            gguf_value *vals;     /* ARRAY elements (nested), else NULL */
        } arr;
    } v;
};

typedef struct gguf_kv {
    gguf_str key;
    gguf_value val;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    uint64_t ne[4];   /* ne[0] is the row length; unused dims are 1 */
    uint32_t type;    /* enum sd_wtype */
    uint64_t offset;  /* relative to the data section */
    uint64_t nbytes;
    const void *data; /* into the mapping */
} gguf_tensor;

typedef struct gguf_file {
    const char *path;
    const uint8_t *base;
    uint64_t size;
    int mapped;       /* 1: munmap on close; 0: caller's memory */
    uint32_t version;
    uint64_t alignment;
    uint64_t n_kv;
    gguf_kv *kv;
    uint64_t n_tensors;
    gguf_tensor *tensors;
    uint64_t data_offset;
} gguf_file;

/* Opens and validates. On failure returns NULL and e->msg holds the reason
 * (without the file name; the caller prefixes it). */
gguf_file *gguf_open(const char *path, sd_err *e);
/* Same over caller-owned memory (tests, fuzzing); mem must outlive the file. */
gguf_file *gguf_open_mem(const void *mem, size_t size, const char *name, sd_err *e);
void gguf_close(gguf_file *f);

const gguf_value *gguf_get(const gguf_file *f, const char *key);
/* Typed getters: 0 found, 1 absent (out untouched), -1 present with the wrong
 * type or a value out of range (e filled, naming the key). */
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out, sd_err *e);
int gguf_get_float(const gguf_file *f, const char *key, double *out, sd_err *e);
int gguf_get_bool(const gguf_file *f, const char *key, int *out, sd_err *e);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, sd_err *e);
/* Array of the given element type (GGUF_STRING for string arrays). */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t elem_type,
                 const gguf_value **out, sd_err *e);

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

int gguf_str_eq(gguf_str a, const char *s);

#endif
