/* A GGUF writer: keys and tensors are appended in call order and
 * serialised by gw_bytes / gw_write / gw_write_with in the layout
 * engine/format/gguf.h describes (v2 and v3 share it). The writer checks
 * nothing about what it is given: duplicate keys or tensor names, odd
 * alignments, unknown types, more than four dims and forged counts or
 * offsets are all written as asked, so the same builder makes the tests'
 * good files and their malformed ones. Models at real shapes (the GPU
 * check's generator, engine/bench/synth_gguf.c) stream their tensors
 * through gw_write_with, one tensor in memory at a time.
 *
 * Allocation failure is sticky: the builder stops recording and the
 * serialisers return -1. Every function accepts a NULL builder (what gw_new
 * returns when out of memory) and then does nothing. */
#ifndef SD_GGUF_WRITER_H
#define SD_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* gw_tensor takes up to this many dims, so n_dims > 4 can be forged. */
#define GW_MAX_DIMS 8

typedef struct gw gw;

/* Any version number is written as given (1 and 4 forge bad versions). */
gw *gw_new(uint32_t version);
void gw_free(gw *w);

/* Sets the padding used for the data section and each tensor, and writes
 * general.alignment (u32). 0 means no padding at all. */
void gw_alignment(gw *w, uint32_t align);

/* Scalars. */
void gw_u8(gw *w, const char *key, uint8_t v);
void gw_i8(gw *w, const char *key, int8_t v);
void gw_u16(gw *w, const char *key, uint16_t v);
void gw_i16(gw *w, const char *key, int16_t v);
void gw_u32(gw *w, const char *key, uint32_t v);
void gw_i32(gw *w, const char *key, int32_t v);
void gw_u64(gw *w, const char *key, uint64_t v);
void gw_i64(gw *w, const char *key, int64_t v);
void gw_f32(gw *w, const char *key, float v);
void gw_f64(gw *w, const char *key, double v);
void gw_bool(gw *w, const char *key, int v);
void gw_str(gw *w, const char *key, const char *v);

/* Arrays. */
void gw_arr_str(gw *w, const char *key, const char *const *v, size_t n);
void gw_arr_f32(gw *w, const char *key, const float *v, size_t n);
void gw_arr_i32(gw *w, const char *key, const int32_t *v, size_t n);
/* Any element type: n elements whose serialised form is the nbytes of
 * payload (little endian). For elem_type GGUF_ARRAY the payload is the
 * inner arrays, each { u32 type, u64 count, elements }. */
void gw_arr_raw(gw *w, const char *key, uint32_t elem_type, uint64_t n, const void *payload,
                size_t nbytes);

/* Appends bytes verbatim as one kv entry (key, type and value all up to the
 * caller); the kv count still increments. */
void gw_raw_kv(gw *w, const void *bytes, size_t n);

/* Appends a tensor. data (nbytes, copied; may be NULL when nbytes is 0) is
 * placed at the next aligned offset of the data section; the writer does not
 * relate nbytes to type or dims. n_dims <= GW_MAX_DIMS. */
void gw_tensor(gw *w, const char *name, uint32_t type, int n_dims, const uint64_t *ne,
               const void *data, size_t nbytes);

/* Appends a tensor of nbytes whose data gw_write_with asks its fill
 * callback for; gw_bytes and gw_write write zeros for it. */
void gw_tensor_later(gw *w, const char *name, uint32_t type, int n_dims, const uint64_t *ne,
                     size_t nbytes);

/* Forging hooks. The header counts, and the offset written in the info of
 * tensor idx (call order), replace the true ones; the data itself stays
 * where it would be. */
void gw_set_n_tensors(gw *w, uint64_t n);
void gw_set_n_kv(gw *w, uint64_t n);
void gw_tensor_offset(gw *w, size_t idx, uint64_t offset);

/* Where sections start in what gw_bytes would produce now: the tensor info
 * table, and the data section (after the padding). Either may be NULL.
 * Returns -1 if the builder failed. */
int gw_layout(const gw *w, size_t *tensor_info_at, size_t *data_at);

/* Serialises into a malloc'd buffer the caller frees. 0 or -1. */
int gw_bytes(gw *w, uint8_t **out, size_t *len);
int gw_write(gw *w, const char *path);
/* Streams the file to path: header and tables, then each tensor's data,
 * where a gw_tensor_later tensor's comes from fill(ud, idx, buf) (idx: its
 * place in call order; buf: room for its nbytes; 0 or -1). 0, or -1 when
 * the builder failed, memory ran out, fill failed or the file could not be
 * written. */
int gw_write_with(gw *w, const char *path, int (*fill)(void *ud, size_t idx, uint8_t *buf),
                  void *ud);

#endif
