/* Matrix products: argument checks, activation quantization, thread split,
 * ISA dispatch, and the scalar kernels (the fallback for any x86-64 and the
 * baseline the SIMD paths are tested against).
 *
 * Work split: the rows of all weights of one call (several for
 * sd_cpu_matmul_multi) are laid end to end and cut into groups of 16 (a
 * repacked weight's row group, blocks.h; 4 of the file layout's 4-row SIMD
 * tiles), and the groups into chunks: about CHUNKS_PER_THREAD
 * per thread, none under MIN_CHUNK_BYTES of weights. Threads take chunks
 * from the pool's counter, so each streams contiguous slices of weight and
 * writes its own output columns, and a thread the OS has descheduled leaves
 * the remaining chunks to the others. The activations are quantized once
 * per call, before the row split (in parallel over activation rows when
 * there are several). */
#include <string.h>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"

enum { MAX_MULTI = 16, GROUP = 16, CHUNKS_PER_THREAD = 4, MIN_CHUNK_BYTES = 16384 };

static int is_quant(uint32_t t) {
    return t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q4_1 || t == SD_Q5_0 || t == SD_Q4_K ||
           t == SD_Q6_K || sd_cpu_file_type(t) != t;
}
/* Types whose SIMD kernels read the pair layout of the activations (cpu_int.h). */
static int uses_pairs(uint32_t t) {
    return t == SD_Q4_0 || t == SD_Q4_1 || t == SD_Q5_0 || t == SD_Q4_K;
}

/* ---- scalar kernels --------------------------------------------------------
 * One output at a time: weight row r against activation row i. Quantized
 * types use int32 block sums scaled in float, like the SIMD paths: one
 * integer sum per activation block of 32 (Q4_K: per sub-block, which is
 * one activation block, its min term from the block sum s; Q6_K: the two
 * sub-blocks of 16 in an activation block summed with their int8 scales,
 * codes taken as code-32). */

/* Signed code of element k of a Q8_0, Q4_0 or Q5_0 block. */
static inline int sym_code(uint32_t type, const uint8_t *blk, int k) {
    if (type == SD_Q8_0) return (int8_t)blk[2 + k];
    if (type == SD_Q4_0) return (k < 16 ? blk[2 + k] & 15 : blk[2 + k - 16] >> 4) - 8;
    return sd_q5_0_code(blk, k) - 16;
}

/* Q6_K, one activation block: its two sub-blocks' sums of (code-32)*q,
 * each times its int8 scale. */
static int q6_sum(const int *c, int sc0, int sc1, const int8_t *q) {
    int t0 = 0, t1 = 0;
    for (int k = 0; k < 16; k++) t0 += (c[k] - 32) * q[k];
    for (int k = 16; k < 32; k++) t1 += (c[k] - 32) * q[k];
    return sc0 * t0 + sc1 * t1;
}

static float dot_row_scalar(const sd_mm_job *j, const uint8_t *row, int i) {
    const sd_weight *w = j->w;
    const int64_t cols = w->cols, nb = cols / 32;
    float acc = 0;
    switch (w->type) {
    case SD_F32: {
        const float *x = j->x + (size_t)i * cols;
        for (int64_t c = 0; c < cols; c++) {
            float v;
            memcpy(&v, row + 4 * c, 4);
            acc += v * x[c];
        }
        break;
    }
    case SD_F16: {
        const float *x = j->x + (size_t)i * cols;
        for (int64_t c = 0; c < cols; c++) acc += sd_f16_to_f32(sd_ld16(row + 2 * c)) * x[c];
        break;
    }
    case SD_BF16: {
        const float *x = j->x + (size_t)i * cols;
        for (int64_t c = 0; c < cols; c++) acc += sd_bf16_to_f32(sd_ld16(row + 2 * c)) * x[c];
        break;
    }
    case SD_Q8_0:
    case SD_Q4_0:
    case SD_Q5_0: { /* x = d*code, codes signed: one scale a block */
        const int8_t *q = j->xq + (size_t)i * cols;
        const float *xd = j->xd + (size_t)i * nb;
        const int bs = w->type == SD_Q8_0 ? 34 : w->type == SD_Q4_0 ? 18 : 22;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + bs * b;
            int s = 0;
            for (int k = 0; k < 32; k++) s += sym_code(w->type, blk, k) * q[32 * b + k];
            acc += sd_f16_to_f32(sd_ld16(blk)) * xd[b] * (float)s;
        }
        break;
    }
    case SD_Q4_1: {
        const int8_t *q = j->xq + (size_t)i * cols;
        const float *xd = j->xd + (size_t)i * nb, *xs = j->xs + (size_t)i * nb;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + 20 * b;
            const int8_t *qb = q + 32 * b;
            int s = 0;
            for (int k = 0; k < 16; k++)
                s += (blk[4 + k] & 15) * qb[k] + (blk[4 + k] >> 4) * qb[k + 16];
            acc += sd_f16_to_f32(sd_ld16(blk)) * xd[b] * (float)s +
                   sd_f16_to_f32(sd_ld16(blk + 2)) * xs[b];
        }
        break;
    }
    case SD_Q4_K: {
        const int8_t *q = j->xq + (size_t)i * cols;
        const float *xd = j->xd + (size_t)i * nb, *xs = j->xs + (size_t)i * nb;
        for (int64_t sb = 0; sb < cols / 256; sb++) {
            const uint8_t *blk = row + 144 * sb;
            const float d = sd_f16_to_f32(sd_ld16(blk)), dmin = sd_f16_to_f32(sd_ld16(blk + 2));
            uint8_t sm[16];
            sd_q4_k_scales(blk + 4, sm);
            for (int sub = 0; sub < 8; sub++) {
                const int64_t b = 8 * sb + sub;
                int s = 0;
                for (int k = 0; k < 32; k++) s += sd_q4_k_code(blk, 32 * sub + k) * q[32 * b + k];
                acc += d * (float)sm[sub] * xd[b] * (float)s - dmin * (float)sm[8 + sub] * xs[b];
            }
        }
        break;
    }
    case SD_Q6_K: {
        const int8_t *q = j->xq + (size_t)i * cols;
        const float *xd = j->xd + (size_t)i * nb;
        for (int64_t sb = 0; sb < cols / 256; sb++) {
            const uint8_t *blk = row + 210 * sb;
            const float d = sd_f16_to_f32(sd_ld16(blk + 208));
            for (int a = 0; a < 8; a++) {
                const int64_t b = 8 * sb + a;
                int c[32];
                for (int k = 0; k < 32; k++) c[k] = sd_q6_k_code(blk, 32 * a + k);
                acc += d * xd[b] * (float)q6_sum(c, (int8_t)blk[192 + 2 * a], (int8_t)blk[193 + 2 * a], q + 32 * b);
            }
        }
        break;
    }
    default: break;
    }
    return acc;
}

/* Row `lane` of the SD_Q4_K_X16 group at g (blocks.h): the Q4_K sums above
 * in the same order, so the two layouts give the same bits. */
static float dot_row_q4kx(const sd_mm_job *j, const uint8_t *g, int lane, int i) {
    const int64_t cols = j->w->cols, nb = cols / 32;
    const int8_t *q = j->xq + (size_t)i * cols;
    const float *xd = j->xd + (size_t)i * nb, *xs = j->xs + (size_t)i * nb;
    float acc = 0;
    for (int64_t sb = 0; sb < cols / 256; sb++) {
        const uint8_t *G = g + 2304 * sb;
        const float d = sd_q4_kx_d(G, lane), dmin = sd_q4_kx_dmin(G, lane);
        for (int sub = 0; sub < 8; sub++) {
            const int64_t b = 8 * sb + sub;
            int s = 0;
            for (int k = 0; k < 32; k++) s += sd_q4_kx_code(G, lane, 32 * sub + k) * q[32 * b + k];
            acc += d * (float)sd_q4_kx_sc(G, lane, sub) * xd[b] * (float)s -
                   dmin * (float)sd_q4_kx_mn(G, lane, sub) * xs[b];
        }
    }
    return acc;
}

static float dot_row_q6kx(const sd_mm_job *j, const uint8_t *g, int lane, int i) {
    const int64_t cols = j->w->cols, nb = cols / 32;
    const int8_t *q = j->xq + (size_t)i * cols;
    const float *xd = j->xd + (size_t)i * nb;
    float acc = 0;
    for (int64_t sb = 0; sb < cols / 256; sb++) {
        const uint8_t *G = g + 3360 * sb;
        const float d = sd_q6_kx_d(G, lane);
        for (int a = 0; a < 8; a++) {
            const int64_t b = 8 * sb + a;
            int c[32];
            for (int k = 0; k < 32; k++) c[k] = sd_q6_kx_code(G, lane, 32 * a + k);
            acc += d * xd[b] *
                   (float)q6_sum(c, sd_q6_kx_scale(G, lane, 2 * a), sd_q6_kx_scale(G, lane, 2 * a + 1), q + 32 * b);
        }
    }
    return acc;
}

/* Row `lane` of an SD_Q4_0_X16, SD_Q4_1_X16, SD_Q5_0_X16 or SD_Q8_0_X16
 * group: the file layout's sums. */
static float dot_row_x16_32(const sd_mm_job *j, const uint8_t *g, int lane, int i) {
    const int64_t cols = j->w->cols, nb = cols / 32;
    const uint32_t t = j->w->type;
    const size_t gb = 16 * j->w->row_bytes / (size_t)nb; /* a group's bytes per block of 32 */
    const int8_t *q = j->xq + (size_t)i * cols;
    const float *xd = j->xd + (size_t)i * nb, *xs = j->xs + (size_t)i * nb;
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *G = g + gb * b;
        int s = 0;
        for (int k = 0; k < 32; k++)
            s += (t == SD_Q8_0_X16   ? sd_q8_0x_code(G, lane, k)
                  : t == SD_Q5_0_X16 ? sd_q5_0x_code(G, lane, k) - 16
                  : t == SD_Q4_0_X16 ? sd_nib_x_code(G, 32, lane, k) - 8
                                     : sd_nib_x_code(G, 64, lane, k)) *
                 q[32 * b + k];
        if (t == SD_Q4_1_X16)
            acc += sd_q4_kx_d(G, lane) * xd[b] * (float)s + sd_q4_kx_dmin(G, lane) * xs[b];
        else
            acc += sd_q4_kx_d(G, lane) * xd[b] * (float)s;
    }
    return acc;
}

void sd_cpu_mm_scalar(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const uint8_t *base = j->w->data;
    const int x16 = sd_cpu_file_type(j->w->type) != j->w->type;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = base + (size_t)(x16 ? r & ~(int64_t)15 : r) * j->w->row_bytes;
        for (int i = 0; i < j->n; i++) {
            float v = !x16 ? dot_row_scalar(j, row, i)
                      : j->w->type == SD_Q4_K_X16 ? dot_row_q4kx(j, row, (int)(r & 15), i)
                      : j->w->type == SD_Q6_K_X16 ? dot_row_q6kx(j, row, (int)(r & 15), i)
                                                  : dot_row_x16_32(j, row, (int)(r & 15), i);
            float *o = j->out + (size_t)i * j->ldo + r;
            *o = j->accumulate ? *o + v : v;
        }
    }
}

/* ---- driver ---------------------------------------------------------------- */
static int check_weight(const sd_weight *w, int64_t cols, sd_err *e) {
    int el, by;
    if (!w || !w->data) return sd_fail(e, "matmul: missing weight");
    if (sd_cpu_file_type(w->type) != w->type) {
        if (!sd_cpu_type_block(sd_cpu_file_type(w->type), &el, &by))
            return sd_fail(e, "matmul: unsupported weight type %u", w->type);
        if (w->rows % 16)
            return sd_fail(e, "matmul: repacked weight of %lld rows (a multiple of 16)",
                           (long long)w->rows);
    } else if (!sd_cpu_type_block(w->type, &el, &by))
        return sd_fail(e, "matmul: unsupported weight type %u", w->type);
    if (w->rows <= 0 || w->cols <= 0 || w->cols % el)
        return sd_fail(e, "matmul: bad weight shape %lld x %lld for type %u",
                       (long long)w->rows, (long long)w->cols, w->type);
    if (w->cols != cols)
        return sd_fail(e, "matmul: weights of one call must share cols (%lld vs %lld)",
                       (long long)w->cols, (long long)cols);
    if (w->row_bytes < (size_t)(w->cols / el) * (size_t)by)
        return sd_fail(e, "matmul: row_bytes %zu too small for %lld elements", w->row_bytes,
                       (long long)w->cols);
    return 0;
}

/* One call's plan, shared by the tasks of its two regions. */
typedef struct {
    int n_w;
    const sd_weight *const *ws;
    sd_mm_job jobs[MAX_MULTI];
    int64_t gstart[MAX_MULTI + 1]; /* first row group of each weight */
    int64_t groups, chunk;         /* groups in all, groups per task */
    void (*mm)(const sd_mm_job *, int64_t, int64_t);
    void (*qa)(const float *, int64_t, int8_t *, float *, float *);
    void (*pair)(const int8_t *, const float *, const float *, int64_t, int8_t *, float *);
    const float *x;
    int64_t cols;
    int8_t *xq, *xqp;
    float *xd, *xs, *xds8;
    int32_t *xo16, *xo16h;
    uint8_t *xu8;
    int8_t *xk; /* k8 (sd_mm_job): NULL when no product of the call reads it */
    uint8_t *xku;
    float *xkd;
    int16_t *xks;
    int32_t *xko;
    int64_t ku_rows; /* rows with xku (the AMX tiles' whole 16s) */
} mm_plan;

/* Activation row i: 8-bit blocks, then the pair layout when a kernel
 * of this call reads it. */
static void quant_task(void *v, int64_t i, int thread) {
    const mm_plan *p = v;
    const int64_t nb = p->cols / 32, npair = p->cols / 64;
    (void)thread;
    if (p->xk)
        sd_cpu_qact_k8_avx512(p->x + i * p->cols, p->cols, p->xk + i * p->cols,
                              i < p->ku_rows ? p->xku + i * p->cols : NULL,
                              p->xkd + i * (p->cols / 256), p->xks + i * nb,
                              p->xko + i * (p->cols / 16));
    if (!p->xq) return;
    p->qa(p->x + i * p->cols, p->cols, p->xq + i * p->cols, p->xd + i * nb, p->xs + i * nb);
    if (p->pair)
        p->pair(p->xq + i * p->cols, p->xd + i * nb, p->xs + i * nb, p->cols, p->xqp + i * p->cols,
                p->xds8 + i * npair * 16);
    if (p->xu8) {
        /* q + 128 as a byte is q with its top bit flipped: 8 bytes a step
         * (cols is a multiple of 32) */
        const int8_t *q = p->xq + i * p->cols;
        uint8_t *u = p->xu8 + i * p->cols;
        for (int64_t k = 0; k < p->cols; k += 8) {
            uint64_t v;
            memcpy(&v, q + k, 8);
            v ^= UINT64_C(0x8080808080808080);
            memcpy(u + k, &v, 8);
        }
    }
    if (p->xo16) {
        const int8_t *q = p->xq + i * p->cols;
        int32_t *o = p->xo16 + i * (p->cols / 16);
        for (int64_t k = 0; k < p->cols / 16; k++) {
            int32_t t = 0;
            for (int m = 0; m < 16; m++) t += q[16 * k + m];
            o[k] = -32 * t;
        }
    }
    if (p->xo16h) {
        const int8_t *q = p->xq + i * p->cols;
        int32_t *o = p->xo16h + i * (p->cols / 16);
        for (int64_t k = 0; k < p->cols / 16; k++, q += 16) {
            const int32_t lo = q[0] + q[1] + q[4] + q[5] + q[8] + q[9] + q[12] + q[13];
            const int32_t hi = q[2] + q[3] + q[6] + q[7] + q[10] + q[11] + q[14] + q[15];
            o[k] = (int32_t)((uint32_t)(uint16_t)(-32 * lo) | (uint32_t)(uint16_t)(-32 * hi) << 16);
        }
    }
}

/* Chunk t: groups [t*chunk, (t+1)*chunk), cut where one weight ends and
 * the next begins. */
static void mm_task(void *v, int64_t t, int thread) {
    const mm_plan *p = v;
    (void)thread;
    const int64_t g0 = t * p->chunk, g1 = g0 + p->chunk < p->groups ? g0 + p->chunk : p->groups;
    for (int k = 0; k < p->n_w; k++) {
        int64_t a = g0 > p->gstart[k] ? g0 : p->gstart[k];
        int64_t b = g1 < p->gstart[k + 1] ? g1 : p->gstart[k + 1];
        if (a >= b) continue;
        int64_t r0 = (a - p->gstart[k]) * GROUP, r1 = (b - p->gstart[k]) * GROUP;
        if (r1 > p->ws[k]->rows) r1 = p->ws[k]->rows;
        p->mm(&p->jobs[k], r0, r1);
    }
}

static int mm_run(sd_cpu *c, int n_w, float *const *outs, const sd_weight *const *ws,
                  const float *x, int n, int accumulate, sd_err *e) {
    if (n <= 0) return 0;
    if (n_w <= 0 || n_w > MAX_MULTI)
        return sd_fail(e, "matmul: %d weights in one call (1..%d)", n_w, MAX_MULTI);
    const int64_t cols = ws[0] ? ws[0]->cols : 0;
    int need_q = 0;
    for (int k = 0; k < n_w; k++) {
        if (check_weight(ws[k], cols, e)) return -1;
        need_q |= is_quant(ws[k]->type);
    }
    const int isa = sd_cpu_isa(c);
    /* which activations the call's products read: k8 (the VNNI and amx
     * levels' repacked K-quants) and/or the 32-element blocks (every other
     * quantized product) */
    int need_k8 = 0, need_q32 = 0;
    for (int k = 0; k < n_w; k++) {
        const uint32_t t = ws[k]->type;
        const int k8 = isa >= SD_ISA_AVX512_VNNI && (t == SD_Q4_K_X16 || t == SD_Q6_K_X16);
        need_k8 |= k8;
        need_q32 |= is_quant(t) && !k8;
    }
    void (*mm)(const sd_mm_job *, int64_t, int64_t) =
        isa == SD_ISA_AMX         ? sd_cpu_mm_amx
        : isa == SD_ISA_AVX512_VNNI ? sd_cpu_mm_avx512vnni
        : isa == SD_ISA_AVX512    ? sd_cpu_mm_avx512
        : isa == SD_ISA_AVX2      ? sd_cpu_mm_avx2
                                  : sd_cpu_mm_scalar;
    /* the quantized activations are the same bits on every path; VNNI
     * changes only the products */
    void (*qa)(const float *, int64_t, int8_t *, float *, float *) =
        isa >= SD_ISA_AVX512 ? sd_cpu_qact_avx512
        : isa == SD_ISA_AVX2 ? sd_cpu_qact_avx2 : sd_cpu_qact_scalar;

    /* quantized activations: q [n][cols] | d [n][nb] | s [n][nb], then for
     * the SIMD pair-layout kernels qp [n][cols] | ds8 [n][cols/64][16],
     * then for the SIMD SD_Q6_K_X16 kernels xo16 or (avx2) xo16h
     * [n][cols/16], then for
     * the VNNI SD_Q8_0_X16 kernel xu8 [n][cols], then k8: xk [n][cols] |
     * xku [n/16*16][cols] | xkd [n][cols/256] | xks [n][nb] | xko
     * [n][cols/16], each part 64-byte aligned */
    const int64_t nb = cols / 32, npair = cols / 64;
    int need_pair = 0;
    for (int k = 0; k < n_w; k++)
        need_pair |= need_q32 && isa != SD_ISA_SCALAR && uses_pairs(ws[k]->type);
    void (*pair)(const int8_t *, const float *, const float *, int64_t, int8_t *, float *) =
        isa >= SD_ISA_AVX512 ? sd_cpu_qact_pair_avx512 : sd_cpu_qact_pair_avx2;
    int need_o16 = 0;
    int need_u8 = 0;
    for (int k = 0; k < n_w; k++) {
        need_o16 |= !need_k8 && isa != SD_ISA_SCALAR && ws[k]->type == SD_Q6_K_X16;
        need_u8 |= isa >= SD_ISA_AVX512_VNNI && ws[k]->type == SD_Q8_0_X16;
    }
    int8_t *xq = NULL, *xqp = NULL;
    float *xd = NULL, *xs = NULL, *xds8 = NULL;
    int32_t *xo16 = NULL, *xo16h = NULL, *xko = NULL;
    uint8_t *xu8 = NULL, *xku = NULL;
    int8_t *xk = NULL;
    float *xkd = NULL;
    int16_t *xks = NULL;
    const int64_t ku_rows = need_k8 && isa == SD_ISA_AMX ? n / 16 * 16 : 0;
    if (need_q) {
#define AL64(b) (((size_t)(b) + 63) & ~(size_t)63)
        const size_t qbytes = need_q32 ? AL64((size_t)n * (size_t)cols) : 0;
        const size_t dsbytes = need_q32 ? AL64(2 * (size_t)n * nb * 4) : 0;
        const size_t pbytes = need_pair ? qbytes + (size_t)n * npair * 64 : 0;
        const size_t obytes = need_o16 ? AL64((size_t)n * (size_t)(cols / 16) * 4) : 0;
        const size_t ubytes = need_u8 ? qbytes : 0;
        const size_t kq = need_k8 ? AL64((size_t)n * (size_t)cols) : 0,
                     ku = need_k8 ? AL64((size_t)ku_rows * (size_t)cols) : 0,
                     kd = need_k8 ? AL64((size_t)n * (size_t)(cols / 256) * 4) : 0,
                     ks = need_k8 ? AL64((size_t)n * (size_t)nb * 2) : 0,
                     ko = need_k8 ? AL64((size_t)n * (size_t)(cols / 16) * 4) : 0;
#undef AL64
        const size_t k0 = qbytes + dsbytes + pbytes + obytes + ubytes;
        uint8_t *buf = sd_cpu_scratch(c, SD_SCRATCH_QACT, k0 + kq + ku + kd + ks + ko, e);
        if (!buf) return -1;
        if (need_o16 && isa == SD_ISA_AVX2) xo16h = (int32_t *)(buf + qbytes + dsbytes + pbytes);
        else if (need_o16) xo16 = (int32_t *)(buf + qbytes + dsbytes + pbytes);
        if (need_u8) xu8 = buf + qbytes + dsbytes + pbytes + obytes;
        if (need_q32) {
            xq = (int8_t *)buf;
            xd = (float *)(buf + qbytes);
            xs = xd + (size_t)n * nb;
        }
        if (need_pair) {
            xqp = (int8_t *)(buf + qbytes + dsbytes);
            xds8 = (float *)(buf + 2 * qbytes + dsbytes);
        }
        if (need_k8) {
            xk = (int8_t *)(buf + k0);
            xku = ku_rows ? buf + k0 + kq : NULL;
            xkd = (float *)(buf + k0 + kq + ku);
            xks = (int16_t *)(buf + k0 + kq + ku + kd);
            xko = (int32_t *)(buf + k0 + kq + ku + kd + ks);
        }
    }
    mm_plan pl = {.n_w = n_w, .ws = ws, .mm = mm, .qa = qa, .pair = need_pair ? pair : NULL,
                  .x = x, .cols = cols, .xq = xq, .xd = xd, .xs = xs, .xqp = xqp, .xds8 = xds8,
                  .xo16 = xo16, .xo16h = xo16h, .xu8 = xu8, .xk = xk, .xku = xku, .xkd = xkd,
                  .xks = xks, .xko = xko, .ku_rows = ku_rows};
    pl.gstart[0] = 0;
    double work = 0;
    for (int k = 0; k < n_w; k++) {
        pl.jobs[k] = (sd_mm_job){.out = outs[k], .ldo = ws[k]->rows, .accumulate = accumulate,
                                 .n = n, .w = ws[k], .x = x, .xq = xq, .xd = xd, .xs = xs,
                                 .xqp = xqp, .xds8 = xds8, .xo16 = xo16, .xo16h = xo16h, .xu8 = xu8, .xk = xk,
                                 .xku = xku, .xkd = xkd, .xks = xks, .xko = xko};
        pl.gstart[k + 1] = pl.gstart[k] + (ws[k]->rows + GROUP - 1) / GROUP;
        work += (double)ws[k]->rows * (double)ws[k]->row_bytes * n;
    }
    const int64_t groups = pl.gstart[n_w];
    sd_pool *pool = sd_cpu_pool(c);
    const int nt = sd_cpu_threads(c);
    const int par = nt > 1 && work >= 32768; /* below this, waking a worker costs more */
    uint64_t t0 = sd_cpu_prof_start(c);
    if (need_q) sd_pool_run(pool, quant_task, &pl, n, par && n >= 4);
    sd_cpu_prof_add(c, SD_OP_QACT, t0);
    t0 = sd_cpu_prof_start(c);
    /* chunk = enough groups for CHUNKS_PER_THREAD chunks per thread, but
     * at least MIN_CHUNK_BYTES of weight rows (one claim per chunk) */
    const double bytes_per_group = work / (double)n / (double)groups;
    int64_t cg = (groups + (int64_t)nt * CHUNKS_PER_THREAD - 1) / ((int64_t)nt * CHUNKS_PER_THREAD);
    int64_t min_g = (int64_t)(MIN_CHUNK_BYTES / bytes_per_group) + 1;
    if (cg < min_g) cg = min_g;
    pl.chunk = cg;
    pl.groups = groups;
    sd_pool_run(pool, mm_task, &pl, (groups + cg - 1) / cg, par);
    const double ns = sd_cpu_prof_add(c, SD_OP_MATMUL, t0);
    for (int k = 0; k < n_w && ns > 0; k++)
        sd_cpu_prof_matmul_type(c, sd_cpu_file_type(ws[k]->type),
                                ns * (double)ws[k]->rows * (double)ws[k]->row_bytes * n / work);
    return 0;
}

int sd_cpu_matmul(sd_cpu *c, float *out, const sd_weight *w, const float *x, int n,
                  int accumulate, sd_err *e) {
    return mm_run(c, 1, &out, &w, x, n, accumulate, e);
}

int sd_cpu_matmul_multi(sd_cpu *c, int n_w, float *const *outs, const sd_weight *const *ws,
                        const float *x, int n, sd_err *e) {
    return mm_run(c, n_w, outs, ws, x, n, 0, e);
}
