/* The row walk of a SIMD matrix product file, over its tiles: included last
 * by matmul_avx2.c, matmul_avx512.c and matmul_avx512vnni.c, each of which
 * defines mm_x16 (its tiles for the SD_*_X16 types) before it; the AVX-512
 * files' walk takes the 512-bit tiles for Q4_K, Q5_0, Q6_K and (two rows
 * and more) Q8_0. */
#ifndef SD_CPU_MM_ROWS_H
#define SD_CPU_MM_ROWS_H

#include "kernels/cpu/mm_tiles256.h"

/* Rows [r0, r1) of a weight in the file's layout: groups of 4 rows, the
 * activation rows in passes of at most SD_QA (SD_FA) through the tiles. */
static void mm_file_rows(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const sd_weight *w = j->w;
    const uint8_t *base = w->data;
    const size_t rb = w->row_bytes;
    const int64_t cols = w->cols, nb = cols / 32;
    const uint32_t type = w->type;
    const int quant = type == SD_Q8_0 || type == SD_Q4_0 || type == SD_Q4_1 || type == SD_Q5_0 ||
                      type == SD_Q4_K || type == SD_Q6_K;
    const int kind = type == SD_Q4_1 ? K_Q41 : type == SD_Q4_0 ? K_Q40 : type == SD_Q5_0 ? K_Q50 : 3;
    /* the paired layout exists only when such a weight is in the job (xqp
     * is NULL otherwise, and NULL + offset is undefined) */
    const int paired = type == SD_Q4_1 || type == SD_Q4_0 || type == SD_Q5_0 || type == SD_Q4_K;
    const int amax = quant ? SD_QA : SD_FA;
    float res[SD_QA > SD_FA ? SD_QA : SD_FA][4];
    if (SD_PF) {
        /* The tiles prefetch PF_ROW bytes ahead in each row stream (see
         * prefetch4); start that window here, or the range's first bytes
         * (a large share of a small matrix's slice) arrive one demand miss
         * at a time: the first PF_ROW bytes of each stream, rows within the
         * range only. */
        for (int k = 0; k < 4 && r0 + k < r1; k++)
            for (int64_t v = 0, m = 0; v < PF_ROW; v += 64) {
                while (v - m * (int64_t)rb >= (int64_t)rb) m++;
                if (r0 + k + 4 * m >= r1) break;
                _mm_prefetch((const char *)base + (size_t)(r0 + k + 4 * m) * rb + (v - m * (int64_t)rb), SD_PFH);
            }
    }
    for (int64_t r = r0; r < r1; r += 4) {
        const int nr = r1 - r < 4 ? (int)(r1 - r) : 4;
        const uint8_t *wp[4];
        for (int k = 0; k < 4; k++) wp[k] = base + (size_t)(r + (k < nr ? k : nr - 1)) * rb;
        for (int i = 0; i < j->n;) {
            int A = j->n - i < amax ? j->n - i : amax;
#if defined(__AVX512F__) && defined(__AVX512BW__)
            if (type == SD_Q4_K || type == SD_Q6_K || type == SD_Q8_0 || type == SD_Q5_0) { /* passes of balanced width */
                const int left = j->n - i, passes = (left + SD_QA - 1) / SD_QA;
                A = (left + passes - 1) / passes;
            }
#endif
            /* pf: the row stride when this pass streams the rows (later
             * activation groups find them in cache). Groups within SD_PF
             * plus one group of the range's end do not prefetch: the ones
             * before brought in all but the last group, and reaching past
             * the end would pull rows another thread reads. */
            const int pf = SD_PF && i == 0 && (size_t)(r1 - r) * rb > SD_PF + 4 * rb ? (int)rb : 0;
            if (quant) {
                const qx xq = {j->xq + (size_t)i * cols, j->xd + (size_t)i * nb,
                               j->xs + (size_t)i * nb, cols, nb};
                const int8_t *qp = paired ? j->xqp + (size_t)i * cols : NULL;
                const float *ds8 = paired ? j->xds8 + (size_t)i * (cols / 64) * 16 : NULL;
#if defined(__AVX512F__) && defined(__AVX512BW__)
                if (type == SD_Q4_K) run_q4k512(A, wp, &xq, res, pf);
                else if (type == SD_Q5_0) run_q50_512(A, wp, &xq, qp, ds8, res, pf);
                else if (type == SD_Q6_K) run_q6k512(A, wp, &xq, res, pf);
                else if (type == SD_Q8_0 && A > 1) run_q80_512(A, wp, &xq, res, pf); /* n = 1: the 256-bit tile is cheaper */
                else
#endif
                if (paired) run_pairs(A, kind, wp, &xq, qp, ds8, res, pf);
                else if (type == SD_Q6_K) run_q6k(A, wp, &xq, res, pf);
                else run_q80(A, wp, &xq, res, pf);
            } else {
                const float *xa = j->x + (size_t)i * cols;
                if (type == SD_F32) run_f32(A, wp, xa, cols, res, pf);
                else if (type == SD_F16) run_f16(A, wp, xa, cols, res, pf);
                else run_bf16(A, wp, xa, cols, res, pf);
            }
            for (int a = 0; a < A; a++) {
                float *o = j->out + (size_t)(i + a) * j->ldo + r;
                if (j->accumulate)
                    for (int k = 0; k < nr; k++) o[k] += res[a][k];
                else
                    for (int k = 0; k < nr; k++) o[k] = res[a][k];
            }
            i += A;
        }
    }
}

/* A job's rows [r0, r1): the including file's mm_x16 for the SD_*_X16 types
 * (r0, r1 multiples of 16), the file layout's walk for the others. */
static inline void mm_rows(const sd_mm_job *j, int64_t r0, int64_t r1) {
    if (sd_cpu_file_type(j->w->type) != j->w->type) mm_x16(j, r0, r1);
    else mm_file_rows(j, r0, r1);
}

#endif
