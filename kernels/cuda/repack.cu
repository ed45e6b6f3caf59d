/* Upload-time conversion of quantised GGUF rows (already on the device, raw,
 * row_bytes apart) into the kernels' layout (cuda_int.h): values of a row
 * end to end, high bits and scales in arrays of their own. One thread per
 * 32-element chunk t (row t / nb, chunk t % nb of the row), which writes
 * the chunk's 16 (Q8_0: 32) value bytes at 16t, its high-bit word(s) and
 * its scale; for the K-quants the first chunk of each super-block (8 chunks)
 * also writes the super-block's scale record. Reads are byte reads, since
 * GGUF blocks (34/18/20/22/144/210 bytes) have no alignment; writes of high
 * bits are aligned words (the arrays start on 256 bytes, rows are whole
 * words). */
#include "kernels/cuda/cuda_int.h"

/* Low and high nibble bytes of 32 elements given as values 0..15, into
 * Q4_0's order: byte j holds element j low and element j+16 high. */
__device__ __forceinline__ void rp_nibbles(uint8_t *dq, const uint8_t v[32]) {
    for (int j = 0; j < 16; j++) dq[j] = (uint8_t)(v[j] | v[j + 16] << 4);
}

/* Q5_0 {d, qh, q[16]}: d to the scales, q as is, qh's bit i (element i's
 * fifth bit) to bit 8(i%4) + i/4 of the high-bit word. */
__device__ __forceinline__ void rp_q5_0(const uint8_t *src, uint8_t *dq, uint32_t *dh, uint8_t *ds) {
    ds[0] = src[0], ds[1] = src[1];
    const uint32_t qh = src[2] | (uint32_t)src[3] << 8 | (uint32_t)src[4] << 16 | (uint32_t)src[5] << 24;
    uint32_t h = 0;
    for (int i = 0; i < 32; i++) h |= ((qh >> i) & 1u) << (8 * (i % 4) + i / 4);
    *dh = h;
    for (int k = 0; k < 16; k++) dq[k] = src[6 + k];
}

/* Q4_K super-block sb, sub-block s: GGUF keeps sub-blocks 2p and 2p+1 in
 * the low and high nibbles of bytes 32p..32p+31 (element i at byte i). */
__device__ __forceinline__ void rp_q4_k(const uint8_t *sb, int s, uint8_t *dq, uint8_t *rec) {
    const uint8_t *qs = sb + 16 + 32 * (s / 2);
    const int shift = 4 * (s & 1);
    uint8_t v[32];
    for (int i = 0; i < 32; i++) v[i] = (uint8_t)((qs[i] >> shift) & 15);
    rp_nibbles(dq, v);
    if (s == 0)
        for (int k = 0; k < 16; k++) rec[k] = sb[k]; /* d, dmin, scales[12] */
}

/* Q6_K super-block sb, chunk k (elements 32k..32k+31, all in quarter k%4 of
 * half k/4): element 32k+l has its low nibble in ql[64(k/4) + l + 32(k%2)]
 * (high nibble of that byte for quarters 2 and 3) and its bits 4-5 at bits
 * 2(k%4) of qh[32(k/4) + l]. The high bits go to bits 8(l%4) + 2((l%16)/4)
 * of word l/16. */
__device__ __forceinline__ void rp_q6_k(const uint8_t *sb, int k, uint8_t *dq, uint32_t *dh,
                                        uint8_t *rec) {
    const int half = k / 4, quarter = k % 4;
    const uint8_t *ql = sb + 64 * half + 32 * (quarter & 1), *qh = sb + 128 + 32 * half;
    uint8_t v[32];
    uint32_t h[2] = {0, 0};
    for (int l = 0; l < 32; l++) {
        v[l] = (uint8_t)((ql[l] >> (4 * (quarter >> 1))) & 15);
        h[l / 16] |= (uint32_t)((qh[l] >> (2 * quarter)) & 3) << (8 * (l % 4) + 2 * ((l % 16) / 4));
    }
    rp_nibbles(dq, v);
    dh[0] = h[0], dh[1] = h[1];
    if (k == 0) {
        for (int j = 0; j < 18; j++) rec[j] = sb[192 + j]; /* scales[16], d */
        rec[18] = rec[19] = 0;
    }
}

__global__ void repack_kernel(uint8_t *q, uint8_t *hi, uint8_t *sc, const uint8_t *raw,
                              int64_t rows, int64_t nb, size_t row_bytes, int type) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows * nb) return;
    const int64_t r = t / nb, b = t % nb;
    const uint8_t *row = raw + (size_t)r * row_bytes;
    uint8_t *dq = q + (size_t)t * 16;
    switch (type) {
    case SD_Q8_0: {
        const uint8_t *src = row + (size_t)b * 34;
        uint8_t *ds = sc + (size_t)t * 2;
        dq = q + (size_t)t * 32;
        ds[0] = src[0], ds[1] = src[1];
        for (int k = 0; k < 32; k++) dq[k] = src[2 + k];
        break;
    }
    case SD_Q4_0: {
        const uint8_t *src = row + (size_t)b * 18;
        uint8_t *ds = sc + (size_t)t * 2;
        ds[0] = src[0], ds[1] = src[1];
        for (int k = 0; k < 16; k++) dq[k] = src[2 + k];
        break;
    }
    case SD_Q4_1: { /* d and m stay together as one little-endian word */
        const uint8_t *src = row + (size_t)b * 20;
        uint8_t *ds = sc + (size_t)t * 4;
        for (int k = 0; k < 4; k++) ds[k] = src[k];
        for (int k = 0; k < 16; k++) dq[k] = src[4 + k];
        break;
    }
    case SD_Q5_0:
        rp_q5_0(row + (size_t)b * 22, dq, reinterpret_cast<uint32_t *>(hi) + t, sc + (size_t)t * 2);
        break;
    case SD_Q4_K:
        rp_q4_k(row + (size_t)(b / 8) * 144, (int)(b % 8), dq, sc + (size_t)(t / 8) * 16);
        break;
    default: /* Q6_K */
        rp_q6_k(row + (size_t)(b / 8) * 210, (int)(b % 8), dq,
                reinterpret_cast<uint32_t *>(hi) + 2 * t, sc + (size_t)(t / 8) * 20);
        break;
    }
}

int cu_repack(sd_cuda *c, void *dst, const void *raw, const sd_weight *w, sd_err *e) {
    const int64_t nb = w->cols / 32, total = w->rows * nb;
    uint8_t *q = (uint8_t *)dst, *hi = q + cu_high_offset(w->type, w->rows, w->cols),
            *sc = q + cu_scale_offset(w->type, w->rows, w->cols);
    const int64_t grid = (total + 255) / 256;
    repack_kernel<<<(unsigned)grid, 256, 0, c->stream>>>(q, hi, sc, (const uint8_t *)raw, w->rows,
                                                          nb, w->row_bytes, (int)w->type);
    return cu_check_launch(c, e, "upload %s %lldx%lld repack", sd_wtype_name(w->type),
                           (long long)w->rows, (long long)w->cols);
}
