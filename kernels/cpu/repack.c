/* Weight repacking at load: Q4_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q8_0 into the 16-row
 * interleaved layouts that the products read without a horizontal fold
 * (blocks.h, SD_*_X16). Groups of 16 rows are independent, so they are
 * repacked in parallel on the context's pool. The copy replaces the mmap'd
 * rows for the CPU kernels: same byte count, so decode reads no more. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/common/wtype.h"

/* Q4_K super-block blk of row r (0..15) into super-block G of the group. */
static void put_row_q4k(uint8_t *G, int r, const uint8_t *blk) {
    uint8_t sm[16];
    sd_q4_k_scales(blk + 4, sm);
    memcpy(G + 2 * r, blk, 2);
    memcpy(G + 32 + 2 * r, blk + 2, 2);
    for (int s = 0; s < 8; s++) {
        const int sc = sm[s], mn = sm[8 + s];
        G[64 + 16 * s + r] = (uint8_t)((sc & 15) | (mn & 15) << 4);
        G[192 + 16 * (s >> 1) + r] |= (uint8_t)(((sc >> 4) | (mn >> 4) << 2) << (4 * (s & 1)));
        for (int t = 0; t < 32; t++) {
            const int q = t >> 3, e = t & 7;
            uint8_t *b = G + 256 + 256 * s + 64 * q + 4 * r + (e & 3);
            *b |= (uint8_t)(sd_q4_k_code(blk, 32 * s + t) << (e < 4 ? 0 : 4));
        }
    }
}

/* Q6_K super-block blk of row r into super-block G (3360 bytes) of the group. */
static void put_row_q6k(uint8_t *G, int r, const uint8_t *blk) {
    memcpy(G + 2 * r, blk + 208, 2);
    for (int j = 0; j < 16; j++) {
        G[32 + 16 * j + r] = blk[192 + j];
        uint8_t *P = G + 288 + 192 * j;
        for (int t = 0; t < 16; t++) {
            const int code = sd_q6_k_code(blk, 16 * j + t), k = t >> 2, e = t & 3;
            P[64 * (k >> 1) + 4 * r + e] |= (uint8_t)((code & 15) << (4 * (k & 1)));
            P[128 + 4 * r + e] |= (uint8_t)((code >> 4) << (2 * k));
        }
    }
}

/* 4-bit code c of element i (0..31) of lane r into the pieces at P */
static void put_nib(uint8_t *P, int r, int i, int c) {
    P[64 * (i >> 3) + 4 * r + (i & 3)] |= (uint8_t)((c & 15) << ((i & 7) < 4 ? 0 : 4));
}

/* Q4_0 block blk of row r into block-group G (288 bytes); file codes:
 * byte k holds element k (low nibble) and k+16 (high). */
static void put_row_q40(uint8_t *G, int r, const uint8_t *blk) {
    memcpy(G + 2 * r, blk, 2);
    for (int i = 0; i < 32; i++) put_nib(G + 32, r, i, i < 16 ? blk[2 + i] : blk[2 + i - 16] >> 4);
}

/* Q4_1 block blk of row r into block-group G (320 bytes). */
static void put_row_q41(uint8_t *G, int r, const uint8_t *blk) {
    memcpy(G + 2 * r, blk, 2);
    memcpy(G + 32 + 2 * r, blk + 2, 2);
    for (int i = 0; i < 32; i++) put_nib(G + 64, r, i, i < 16 ? blk[4 + i] : blk[4 + i - 16] >> 4);
}

/* Q5_0 block blk of row r into block-group G (352 bytes). */
static void put_row_q50(uint8_t *G, int r, const uint8_t *blk) {
    memcpy(G + 2 * r, blk, 2);
    for (int i = 0; i < 32; i++) {
        const int code = sd_q5_0_code(blk, i);
        G[32 + 4 * r + (i & 3)] |= (uint8_t)((code >> 4) << (i >> 2));
        put_nib(G + 96, r, i, code);
    }
}

/* Q8_0 block blk of row r into block-group G (544 bytes). */
static void put_row_q80(uint8_t *G, int r, const uint8_t *blk) {
    memcpy(G + 2 * r, blk, 2);
    for (int i = 0; i < 32; i++) G[32 + 64 * (i >> 2) + 4 * r + (i & 3)] = blk[2 + i];
}

typedef struct {
    const uint8_t *src;
    uint8_t *dst;
    size_t rb, sbb; /* row bytes; bytes of one block (super-block) of one row */
    int64_t nsb, groups_per_task, groups;
    void (*put)(uint8_t *, int, const uint8_t *);
} repack_job;

static void repack_task(void *v, int64_t t, int thread) {
    const repack_job *j = v;
    (void)thread;
    const int64_t g0 = t * j->groups_per_task;
    const int64_t g1 = g0 + j->groups_per_task < j->groups ? g0 + j->groups_per_task : j->groups;
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *out = j->dst + (size_t)g * 16 * j->rb;
        memset(out, 0, 16 * j->rb);
        for (int r = 0; r < 16; r++) {
            const uint8_t *row = j->src + (size_t)(16 * g + r) * j->rb;
            for (int64_t sb = 0; sb < j->nsb; sb++) j->put(out + 16 * j->sbb * sb, r, row + j->sbb * sb);
        }
    }
}

/* Weights of 2 MiB and more start on a 2 MiB boundary with transparent
 * huge pages asked for (where the kernel offers them, madvise mode): a
 * 4 KiB page costs a TLB walk every 4 KiB of a stream that reads each byte
 * once. Advice only: where it is refused, the pages are ordinary ones. */
enum { HUGE_PAGE = 2 << 20 };
void *sd_cpu_stream_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes < HUGE_PAGE) return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

int sd_cpu_repack(sd_cpu *c, sd_weight *w, sd_err *e) {
    static const struct {
        uint32_t type, x16;
        int el, by;
        void (*put)(uint8_t *, int, const uint8_t *);
    } kinds[] = {{SD_Q4_K, SD_Q4_K_X16, 256, 144, put_row_q4k}, {SD_Q6_K, SD_Q6_K_X16, 256, 210, put_row_q6k},
                 {SD_Q5_0, SD_Q5_0_X16, 32, 22, put_row_q50}, {SD_Q8_0, SD_Q8_0_X16, 32, 34, put_row_q80},
                 {SD_Q4_0, SD_Q4_0_X16, 32, 18, put_row_q40}, {SD_Q4_1, SD_Q4_1_X16, 32, 20, put_row_q41}};
    const int nk = (int)(sizeof kinds / sizeof kinds[0]);
    int k = 0;
    while (k < nk && kinds[k].type != w->type) k++;
    if (k == nk || w->rows % 16 || w->cols <= 0 || w->cols % kinds[k].el ||
        w->row_bytes != (size_t)(w->cols / kinds[k].el) * kinds[k].by)
        return 0;
    const size_t bytes = (size_t)w->rows * w->row_bytes;
    uint8_t *dst = sd_cpu_stream_alloc(bytes);
    if (!dst)
        return sd_fail(e, "cpu: out of memory repacking a %lld x %lld %s weight (%zu bytes)",
                       (long long)w->rows, (long long)w->cols, sd_wtype_name(w->type), bytes);
    repack_job j = {.src = w->data, .dst = dst, .rb = w->row_bytes, .sbb = (size_t)kinds[k].by,
                    .nsb = w->cols / kinds[k].el, .groups = w->rows / 16, .put = kinds[k].put};
    j.groups_per_task = j.groups / 64 > 0 ? j.groups / 64 : 1;
    sd_pool_run(sd_cpu_pool(c), repack_task, &j, (j.groups + j.groups_per_task - 1) / j.groups_per_task,
                sd_cpu_threads(c) > 1);
    w->data = dst;
    w->type = kinds[k].x16;
    return 0;
}

void sd_cpu_repack_free(sd_weight *w) {
    if (sd_cpu_file_type(w->type) == w->type) return;
    free((void *)w->data);
    w->data = NULL;
    w->type = sd_cpu_file_type(w->type);
}

/* Same formulas as sd_dequantize_row, so the same values. */
int sd_repacked_row(const sd_weight *w, int64_t r, float *out) {
    if (sd_cpu_file_type(w->type) == w->type || r < 0 || r >= w->rows) return -1;
    const uint8_t *g = (const uint8_t *)w->data + (size_t)(r & ~(int64_t)15) * w->row_bytes;
    const int lane = (int)(r & 15);
    if (w->type == SD_Q4_1_X16) {
        for (int64_t b = 0; b < w->cols / 32; b++, out += 32) {
            const uint8_t *G = g + 16 * w->row_bytes / (size_t)(w->cols / 32) * b;
            const float d = sd_q4_kx_d(G, lane), m = sd_q4_kx_dmin(G, lane);
            for (int i = 0; i < 32; i++) out[i] = d * (float)sd_nib_x_code(G, 64, lane, i) + m;
        }
        return 0;
    }
    if (w->type == SD_Q4_0_X16 || w->type == SD_Q5_0_X16 || w->type == SD_Q8_0_X16) {
        const size_t gb = 16 * w->row_bytes / (size_t)(w->cols / 32); /* a group's bytes per block */
        for (int64_t b = 0; b < w->cols / 32; b++, out += 32) {
            const uint8_t *G = g + gb * b;
            const float d = sd_q4_kx_d(G, lane);
            for (int i = 0; i < 32; i++)
                out[i] = d * (float)(w->type == SD_Q8_0_X16   ? sd_q8_0x_code(G, lane, i)
                                     : w->type == SD_Q5_0_X16 ? sd_q5_0x_code(G, lane, i) - 16
                                                              : sd_nib_x_code(G, 32, lane, i) - 8);
        }
        return 0;
    }
    for (int64_t sb = 0; sb < w->cols / 256; sb++, out += 256) {
        if (w->type == SD_Q6_K_X16) {
            const uint8_t *G = g + 3360 * sb;
            const float d = sd_q6_kx_d(G, lane);
            for (int i = 0; i < 256; i++)
                out[i] = d * (float)sd_q6_kx_scale(G, lane, i / 16) * (float)(sd_q6_kx_code(G, lane, i) - 32);
            continue;
        }
        const uint8_t *G = g + 2304 * sb;
        const float d = sd_q4_kx_d(G, lane), dmin = sd_q4_kx_dmin(G, lane);
        for (int s = 0; s < 8; s++)
            for (int t = 0; t < 32; t++)
                out[32 * s + t] = d * (float)sd_q4_kx_sc(G, lane, s) * (float)sd_q4_kx_code(G, lane, 32 * s + t) -
                                  dmin * (float)sd_q4_kx_mn(G, lane, s);
    }
    return 0;
}
