/* Block layouts the CPU kernel files share: the codes of the file's block
 * types (kernels/common/wtype.h) and the 16-row interleaved types the CPU
 * backend repacks weights into (cpu.h, repack.c). Inline accessors only,
 * for the scalar kernels, the row conversions and the repacker. */
#ifndef SD_CPU_BLOCKS_H
#define SD_CPU_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "kernels/common/fp16.h"

/* A little-endian 16-bit field of a block (an f16 scale). */
static inline uint16_t sd_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Block decoding shared by the scalar kernels and the row conversions
 * (layouts in kernels/common/wtype.h). The code of element i of a block:
 * Q5_0 0..31 (x = d*(code-16)), Q4_K 0..15 of a 256 super-block
 * (x = d*sc*code - dmin*mn), Q6_K 0..63 (x = d*scale*(code-32)). */
static inline int sd_q5_0_code(const uint8_t *blk, int i) {
    const uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 |
                        (uint32_t)blk[5] << 24;
    const int nib = i < 16 ? blk[6 + i] & 15 : blk[6 + i - 16] >> 4;
    return nib | (int)((qh >> i) & 1) << 4;
}
static inline int sd_q4_k_code(const uint8_t *blk, int i) {
    const uint8_t b = blk[16 + 32 * (i / 64) + i % 32];
    return i % 64 < 32 ? b & 15 : b >> 4;
}
static inline int sd_q6_k_code(const uint8_t *blk, int i) {
    const int h = i / 128, k = i % 128 / 32, l = i % 32;
    const uint8_t ql = blk[64 * h + 32 * (k & 1) + l], qh = blk[128 + 32 * h + l];
    return (k < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
}
/* Q4_K's 12 scale bytes to out[0..8) = sc[0..8), out[8..16) = mn[0..8):
 * four little-endian words, the 6-bit fields moved with masks (the low 6
 * bits of bytes 0..7 as they are, the high 4 of sub-blocks 4..7 from bytes
 * 8..11, their top 2 bits from the top 2 of bytes 0..7). */
static inline void sd_q4_k_scales(const uint8_t *s12, uint8_t out[16]) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t mn03 = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = mn03;
    u[0] &= 0x3f3f3f3fu;
    memcpy(out, u, 16);
}
/* ---- Q4_K repacked for the CPU (repack.c) ----------------------------------
 * SD_Q4_K_X16 (cpu.h) is a kernels-internal type: a Q4_K weight whose rows (a
 * multiple of 16) are interleaved in groups of 16 by the CPU backend's
 * upload_weight. The GGUF layout makes a multi-row product fold: one
 * integer dot product covers one row, and 4 rows' partial sums must be
 * transposed and added (vphaddd, unpacks) before a scale can apply, which
 * cost more than the multiplies themselves at n > 1. Here one 32-bit lane
 * is one row: a 64-byte load unpacks to 16 rows x 4 consecutive codes
 * (low nibbles) and 16 rows x the next 4 (high nibbles), and vpdpbusd
 * against 4 activation bytes broadcast to all lanes accumulates the 16
 * rows' sub-block sums in place, so a sub-block of 16 rows is 8 vpdpbusd
 * an activation row, then one convert and two FMAs. Same size as the 16
 * rows it replaces (2304 = 16 x 144 bytes a super-block), so decode reads
 * no more; group g (rows 16g..16g+15) starts at data + 16*g*row_bytes and
 * holds its super-blocks in order, each:
 *   [0, 32)      d of rows 0..15 (f16)
 *   [32, 64)     dmin of rows 0..15 (f16)
 *   [64, 192)    sub-block s (0..7) at 64 + 16s, byte r: low 4 bits of sc
 *                | low 4 bits of mn << 4 (row r)
 *   [192, 256)   sub-blocks (2k, 2k+1) at 192 + 16k, byte r: the top 2 bits
 *                of sc(2k), mn(2k), sc(2k+1), mn(2k+1) from bit 0 up
 *   [256, 2304)  sub-block s at 256 + 256s, 4 pieces of 64 bytes: piece q,
 *                byte 4r + e (e < 4) = code of element 8q+e of row r in its
 *                low nibble, of element 8q+4+e in its high nibble.
 * Values are Q4_K's: x = d*sc*code - dmin*mn.
 *
 * SD_Q6_K_X16 is Q6_K the same way: 16 sub-blocks of 16 elements, one
 * 32-bit lane per row, 3360 = 16 x 210 bytes a super-block:
 *   [0, 32)      d of rows 0..15 (f16)
 *   [32, 288)    sub-block j (0..15) at 32 + 16j, byte r: its int8 scale
 *   [288, 3360)  sub-block j at 288 + 192j: two pieces of 64 bytes of low
 *                4 bits of the codes (piece p, byte 4r + e: element 8p+e in
 *                the low nibble, 8p+4+e in the high one), then 64 bytes of
 *                top 2 bits (byte 4r + e: elements e, 4+e, 8+e, 12+e from
 *                bit 0 up).
 * Values are Q6_K's: x = d*scale*(code-32), codes 0..63; the kernels take
 * sum((code-32)*x) as sum(code*x) - 32*sum(x), the second term per
 * activation row and 16 elements (sd_mm_job.xo16, stored negated so that
 * a VNNI sum can start from it; on the avx2 level xo16h, its two int16
 * halves, see tile_q6kx in matmul_avx2.c).
 *
 * SD_Q4_0_X16, SD_Q4_1_X16, SD_Q5_0_X16 and SD_Q8_0_X16 are Q4_0, Q4_1,
 * Q5_0 and Q8_0 the same way, per block of 32 elements (288 = 16 x 18,
 * 320 = 16 x 20, 352 = 16 x 22 and 544 = 16 x 34 bytes):
 *   [0, 32)      d of rows 0..15 (f16)
 *   The 4-bit codes, at 32 (Q4_0), 64 (Q4_1) or 96 (Q5_0): 4 pieces of 64
 *         bytes as Q4_K's (piece q, byte 4r + e: element 8q+e low nibble,
 *         8q+4+e high).
 *   Q4_0: x = d*(code-8), taken as sum(code*x) - 8*sum(x) with the
 *         activation block's sum (s).
 *   Q4_1: [32, 64) m of rows 0..15 (f16); x = d*code + m.
 *   Q5_0: [32, 96) fifth bits: byte 4r + e holds elements 4j+e at bit j
 *         (j = 0..7); x = d*(code-16), taken as sum(code*x) - 16*sum(x).
 *   Q8_0: [32, 544) 8 pieces of 64 bytes: piece q, byte 4r + e = the int8
 *         code of element 4q+e. With VNNI the activations enter as
 *         unsigned x+128 (sd_mm_job.xu8) and 128*sum(code) comes off.
 *
 */
/* Fields of super-block G (its first byte) for lane r. */
static inline float sd_q4_kx_d(const uint8_t *G, int r) {
    uint16_t h;
    memcpy(&h, G + 2 * r, 2);
    return sd_f16_to_f32(h);
}
static inline float sd_q4_kx_dmin(const uint8_t *G, int r) {
    uint16_t h;
    memcpy(&h, G + 32 + 2 * r, 2);
    return sd_f16_to_f32(h);
}
static inline int sd_q4_kx_sc(const uint8_t *G, int r, int s) {
    return (G[64 + 16 * s + r] & 15) | ((G[192 + 16 * (s >> 1) + r] >> (4 * (s & 1))) & 3) << 4;
}
static inline int sd_q4_kx_mn(const uint8_t *G, int r, int s) {
    return (G[64 + 16 * s + r] >> 4) | ((G[192 + 16 * (s >> 1) + r] >> (4 * (s & 1) + 2)) & 3) << 4;
}
static inline int sd_q4_kx_code(const uint8_t *G, int r, int i) {
    const int s = i / 32, t = i % 32, e = t & 7;
    const uint8_t b = G[256 + 256 * s + 64 * (t >> 3) + 4 * r + (e & 3)];
    return e < 4 ? b & 15 : b >> 4;
}
static inline float sd_q6_kx_d(const uint8_t *G, int r) { return sd_q4_kx_d(G, r); }
/* 4-bit code of element i (0..31) of lane r, pieces at G + off */
static inline int sd_nib_x_code(const uint8_t *G, int off, int r, int i) {
    return (G[off + 64 * (i >> 3) + 4 * r + (i & 3)] >> ((i & 7) < 4 ? 0 : 4)) & 15;
}
static inline int sd_q5_0x_code(const uint8_t *G, int r, int i) {
    return sd_nib_x_code(G, 96, r, i) | ((G[32 + 4 * r + (i & 3)] >> (i >> 2)) & 1) << 4;
}
static inline int sd_q8_0x_code(const uint8_t *G, int r, int i) { return (int8_t)G[32 + 64 * (i >> 2) + 4 * r + (i & 3)]; }
static inline int sd_q6_kx_scale(const uint8_t *G, int r, int j) { return (int8_t)G[32 + 16 * j + r]; }
static inline int sd_q6_kx_code(const uint8_t *G, int r, int i) {
    const int j = i / 16, t = i % 16, k = t >> 2, e = t & 3;
    const uint8_t *P = G + 288 + 192 * j;
    return ((P[64 * (k >> 1) + 4 * r + e] >> (4 * (k & 1))) & 15) | ((P[128 + 4 * r + e] >> (2 * k)) & 3) << 4;
}

#endif
