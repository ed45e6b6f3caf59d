/* CPU kernels against the naive double-precision references in
 * tests/util/ref_kernels.c, on every ISA level this CPU supports.
 *
 * Tolerances (err = |kernel - reference|, scale = sum_c |W[r][c] x[c]|):
 *  - matmul, every type, vs a reference using the same inputs the kernel
 *    multiplies (quantized types: the int8-quantized activations d*q; float
 *    types: the exact F32 activations): err <= 2e-5 * scale + 1e-6. The
 *    kernels accumulate in float, so this is float rounding only.
 *  - matmul, quantized types, vs the unquantized activations (loose):
 *    err <= sum_b (d_x[b]/2) * sum_{c in b} |W[r][c]| + 2e-5 * scale + 1e-6,
 *    the exact bound of int8 activation rounding (|x - d*q| <= d/2).
 *  - dequantize_row vs ref: Q8_0/Q4_0/Q5_0 products are exact in float,
 *    Q4_1 adds m once, Q4_K subtracts an exact dmin*mn from an exact
 *    d*sc*code, Q6_K rounds d*scale*(code-32) once: err <= 1e-6 * |ref|.
 *  - quantize round trip: err <= d/2 + qmax * 2^-11 * d + 2^-11 * |m| per
 *    element, qmax 128 (Q8_0), 16 (4-bit) or 32 (Q5_0): rounding to the
 *    grid plus the f16 rounding of d (times the code) and of m; Q4_0 and
 *    Q5_0 d instead of d/2 (their grids -8..7, -16..15 clip the side
 *    opposite the signed max by one step). K-quants (quant.c's direct fit):
 *    Q4_K range_s/30 + d + dmin per element of sub-block s (half a step of
 *    its ideal scale range_s/15, plus one step of each 6-bit super-block
 *    scale d = max_s(range_s/15)/63, dmin = max_s(-min(0, min_s))/63);
 *    Q6_K amax_s/32 + d (one step of the sub-block's grid, whose scale is
 *    rounded up by at most d = max_s(amax_s/32)/127); both plus
 *    2^-9 * max|x| of the super-block for the f16 rounding of d and dmin.
 *  - real tensors (the Qwen2.5-Coder GGUFs, skipped when absent): a few
 *    rows of Q5_0 / Q4_K / Q6_K weights against the double product of the
 *    reference-dequantized rows, the matmul tolerances above.
 *  - rmsnorm 1e-5 relative; swiglu 1e-6 relative + 1e-7;
 *  - rope: angles are built in float like llama.cpp, so the error grows with
 *    the position: err <= (2e-5 + 2e-7 * pos) * max|x|;
 *  - attention: err <= 2e-5 (inputs O(1), outputs are convex mixes of V);
 *  - top-k ids: exact, the selection reference's order. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/common/fp16.h"
#include "engine/format/gguf.h"
#include "engine/session/device.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/common/top_k.h"
#include "kernels/cpu/blocks.h"
#include "kernels/cpu/cpu_int.h"
#include "tests/util/ref_kernels.h"

/* ---- helpers ---------------------------------------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }
static void fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = frand(lo, hi);
}

static const uint32_t all_types[] = {SD_F32,  SD_F16,  SD_BF16, SD_Q8_0, SD_Q4_0,
                                     SD_Q4_1, SD_Q5_0, SD_Q4_K, SD_Q6_K};
enum { N_TYPES = sizeof all_types / sizeof *all_types };
static int is_q(uint32_t t) { return sd_wtype_block(t) > 1; }
static size_t row_bytes(uint32_t t, int64_t cols) { return sd_row_bytes(t, (uint64_t)cols); }
/* a row length every type accepts, at least `want` */
static int64_t cols_for(uint32_t t, int64_t want) {
    const int64_t bl = sd_wtype_block(t);
    return (want + bl - 1) / bl * bl;
}

/* A random weight; per-row scale varies so blocks differ in magnitude. */
static sd_weight make_weight(uint32_t type, int64_t rows, int64_t cols) {
    sd_weight w = {.type = type, .rows = rows, .cols = cols, .row_bytes = row_bytes(type, cols)};
    uint8_t *data = malloc(w.row_bytes * rows);
    float *tmp = malloc(sizeof(float) * cols);
    for (int64_t r = 0; r < rows; r++) {
        float s = 0.05f + (float)(r % 7) * 0.1f;
        for (int64_t c = 0; c < cols; c++) tmp[c] = frand(-s, s) + (c % 5 == 0 ? s * 0.3f : 0);
        cr_assert_eq(sd_quantize_row(type, tmp, data + r * w.row_bytes, cols), 0);
    }
    free(tmp);
    w.data = data;
    return w;
}

/* The highest level the suite runs: the CPU's, capped by SD_ISA as the
 * engine reads it (engine/session/device.c), so that the suite can be run
 * at each narrower level on its own. */
static int top_isa(void) {
    sd_backend_opts o;
    sd_err e = {{0}};
    cr_assert_eq(sd_backend_opts_from_env(&o, &e), 0, "%s", e.msg);
    const int hw = sd_cpu_isa_detect();
    return o.isa >= 0 && o.isa < hw ? o.isa : hw;
}
static int n_isas(void) { return top_isa() + 1; }
/* A context at top_isa(). */
static sd_cpu *new_cpu(int n_threads, sd_err *e) {
    sd_cpu *c = sd_cpu_create(n_threads, e);
    if (c) sd_cpu_set_isa(c, top_isa());
    return c;
}

/* ---- ISA / context ------------------------------------------------------------ */
Test(cpu, isa_and_threads) {
    sd_err e = {{0}};
    sd_cpu *c = sd_cpu_create(0, &e);
    cr_assert_not_null(c, "%s", e.msg);
    cr_assert_geq(sd_cpu_threads(c), 1);
    cr_assert_eq(sd_cpu_isa(c), sd_cpu_isa_detect());
    sd_cpu_set_isa(c, 99);
    cr_assert_eq(sd_cpu_isa(c), sd_cpu_isa_detect());
    sd_cpu_set_isa(c, SD_ISA_SCALAR);
    cr_assert_eq(sd_cpu_isa(c), SD_ISA_SCALAR);
    cr_assert_str_eq(sd_isa_name(SD_ISA_AVX2), "avx2");
    sd_cpu_destroy(c);
    c = sd_cpu_create(3, &e);
    cr_assert_eq(sd_cpu_threads(c), 3);
    sd_cpu_destroy(c);
    cr_assert_str_eq(sd_isa_name(SD_ISA_AVX512_VNNI), "avx512vnni");
    cr_assert_str_eq(sd_isa_name(SD_ISA_AMX), "amx");
}

/* Stream memory: 64-byte aligned below 2 MiB, on a 2 MiB boundary from
 * there (where huge pages can back it), every byte writable, free()d. */
Test(cpu, stream_alloc_alignment) {
    const size_t sizes[] = {1, 100, 4096, ((size_t)2 << 20) - 1, (size_t)2 << 20, ((size_t)5 << 20) + 7};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint8_t *p = sd_cpu_stream_alloc(sizes[k]);
        cr_assert_not_null(p, "%zu bytes", sizes[k]);
        const uintptr_t align = sizes[k] < ((size_t)2 << 20) ? 64 : (uintptr_t)2 << 20;
        cr_assert_eq((uintptr_t)p % align, 0, "%zu bytes at %p", sizes[k], (void *)p);
        memset(p, 0xa5, sizes[k]);
        cr_assert_eq(p[sizes[k] - 1], 0xa5);
        free(p);
    }
}

/* The backend's isa setting sets its context's level (a level above the
 * CPU's is the CPU's), and SD_ISA, read by the engine, names it; a name
 * that is no level is an error naming the variable. */
Test(cpu, isa_setting_caps_the_level) {
    sd_err e = {{0}};
    const int hw = sd_cpu_isa_detect();
    sd_backend_opts o = sd_backend_opts_default();
    for (int isa = SD_ISA_SCALAR; isa <= SD_ISA_AMX; isa++) {
        o.isa = isa;
        sd_backend *b = sd_backend_cpu(1, &o, &e);
        cr_assert_not_null(b, "%s", e.msg);
        cr_assert_eq(sd_cpu_isa(sd_backend_cpu_context(b)), isa < hw ? isa : hw);
        b->destroy(b);
        cr_assert_eq(setenv("SD_ISA", sd_isa_name(isa), 1), 0);
        cr_assert_eq(sd_backend_opts_from_env(&o, &e), 0, "%s", e.msg);
        cr_assert_eq(o.isa, isa);
    }
    o.isa = SD_ISA_AMX + 1;
    cr_assert_null(sd_backend_cpu(1, &o, &e));
    setenv("SD_ISA", "no-such-isa", 1);
    cr_assert_eq(sd_backend_opts_from_env(&o, &e), -1);
    cr_assert(strstr(e.msg, "SD_ISA=no-such-isa"), "%s", e.msg);
    unsetenv("SD_ISA");
    cr_assert_eq(sd_backend_opts_from_env(&o, &e), 0, "%s", e.msg);
    cr_assert_eq(o.isa, -1);
}

/* ---- quantize / dequantize -------------------------------------------------------- */
Test(cpu, dequantize_matches_reference) {
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = all_types[ti];
        const int64_t cols = cols_for(t, 96);
        sd_weight w = make_weight(t, 3, cols);
        float out[256];
        double ref[256];
        for (int r = 0; r < 3; r++) {
            const uint8_t *row = (const uint8_t *)w.data + r * w.row_bytes;
            cr_assert_eq(sd_dequantize_row(t, row, out, cols), 0);
            ref_dequant_row(t, row, ref, cols);
            for (int c = 0; c < cols; c++)
                cr_assert_leq(fabs(out[c] - ref[c]), 1e-6 * fabs(ref[c]), "%s [%d] %g vs %g",
                              sd_wtype_name(t), c, out[c], ref[c]);
        }
        free((void *)w.data);
    }
}

/* The round-trip bound of element i of a row x (see the top of the file). */
static double rt_tol(uint32_t t, const float *x, int64_t i) {
    if (t == SD_F32) return 0;
    /* the block of i; F16/BF16 (blocks of 1) take their budget from i's
     * 32-element neighbourhood */
    const int64_t bl = sd_wtype_block(t) == 256 ? 256 : 32, b0 = i / bl * bl;
    if (bl == 256) {
        const int sub = t == SD_Q4_K ? 32 : 16;
        double maxr = 0, maxm = 0, amaxall = 0, own = 0;
        for (int64_t s0 = b0; s0 < b0 + 256; s0 += sub) {
            double lo = 0, hi = -INFINITY, amax = 0;
            for (int k = 0; k < sub; k++) {
                lo = fmin(lo, x[s0 + k]);
                hi = fmax(hi, x[s0 + k]);
                amax = fmax(amax, fabs(x[s0 + k]));
            }
            amaxall = fmax(amaxall, amax);
            double v = t == SD_Q4_K ? (hi - lo) / 15 : amax / 32;
            maxr = fmax(maxr, v);
            maxm = fmax(maxm, -lo);
            if (i >= s0 && i < s0 + sub) own = v;
        }
        double slop = amaxall / 512 + 1e-30;
        return t == SD_Q4_K ? own / 2 + maxr / 63 + maxm / 63 + slop : own + maxr / 127 + slop;
    }
    float amax = 0, mn = INFINITY, mx = -INFINITY;
    for (int k = 0; k < 32; k++) {
        float v = x[b0 + k];
        amax = fmaxf(amax, fabsf(v));
        mn = fminf(mn, v);
        mx = fmaxf(mx, v);
    }
    double d, m = 0, qmax = 16;
    if (t == SD_Q8_0) d = amax / 127.0, qmax = 128;
    else if (t == SD_Q4_0) d = amax / 8.0;
    else if (t == SD_Q5_0) d = amax / 16.0, qmax = 32;
    else if (t == SD_Q4_1) d = (mx - mn) / 15.0, m = fabsf(mn);
    else return (t == SD_F16 ? 1.0 / 1024 : 1.0 / 128) * amax; /* 2 ulp budget */
    /* Q4_0's and Q5_0's grids are -8..7 / -16..15 around the signed max: the
     * far side clips one whole step short of the range */
    return (t == SD_Q4_0 || t == SD_Q5_0 ? d : d / 2) + qmax * d / 2048 + m / 2048 + 1e-30;
}

Test(cpu, quantize_round_trip) {
    const int64_t cols = 512;
    float x[512], y[512];
    uint8_t buf[2048];
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = all_types[ti];
        for (int trial = 0; trial < 20; trial++) {
            float s = trial == 0 ? 0.0f : frand(1e-3f, 10.0f);
            fill(x, cols, -s, s);
            if (trial == 1) x[5] = 3 * s; /* one outlier */
            if (trial == 2) fill(x, cols, s, 2 * s); /* all positive: Q4_1 offset */
            if (trial == 3) fill(x, cols, -2 * s, -s); /* all negative: Q4_K's min */
            if (trial == 4) /* sub-blocks of very different magnitude */
                for (int k = 0; k < cols; k++) x[k] *= (k / 16) % 3 == 0 ? 1e-3f : 1.0f;
            cr_assert_eq(sd_quantize_row(t, x, buf, cols), 0);
            cr_assert_eq(sd_dequantize_row(t, buf, y, cols), 0);
            for (int64_t k = 0; k < cols; k++)
                cr_assert_leq(fabs((double)y[k] - x[k]), rt_tol(t, x, k), "%s trial %d elem %d: %g -> %g",
                              sd_wtype_name(t), trial, (int)k, x[k], y[k]);
        }
    }
    /* Q8_0 values on the grid come back exactly */
    for (int k = 0; k < 32; k++) x[k] = (float)(k - 16) * 0.5f;
    x[0] = -63.5f; /* amax = 127 * 0.5 */
    sd_quantize_row(SD_Q8_0, x, buf, 32);
    sd_dequantize_row(SD_Q8_0, buf, y, 32);
    for (int k = 0; k < 32; k++) cr_assert_eq(x[k], y[k]);
    /* ggml's Q4_0: d = signed max / -8, so the largest-magnitude value maps to 0 */
    for (int k = 0; k < 32; k++) x[k] = (float)k / 4;
    sd_quantize_row(SD_Q4_0, x, buf, 32);
    cr_assert_float_eq(sd_f16_to_f32((uint16_t)(buf[0] | buf[1] << 8)), -31.0f / 4 / 8, 1e-3);
    cr_assert_eq(buf[2 + 15] >> 4, 0); /* element 31 */
    /* ggml's Q5_0: d = signed max / -16, element 31 (the max) has code 0 */
    sd_quantize_row(SD_Q5_0, x, buf, 32);
    cr_assert_float_eq(sd_f16_to_f32((uint16_t)(buf[0] | buf[1] << 8)), -31.0f / 4 / 16, 1e-3);
    cr_assert_eq(buf[6 + 15] >> 4, 0);
    cr_assert_eq(buf[5] >> 7, 0); /* its fifth bit (bit 31 of qh) */
    cr_assert_eq(sd_quantize_row(SD_Q4_1, x, buf, 31), -1);
    cr_assert_eq(sd_quantize_row(SD_Q4_K, x, buf, 32), -1);
    cr_assert_eq(sd_quantize_row(77, x, buf, 32), -1);
}

Test(cpu, activation_quantizer_same_on_every_isa) {
    const int64_t cols = 1536, nb = cols / 32;
    float *x = malloc(sizeof(float) * cols);
    fill(x, cols, -3, 3);
    for (int k = 0; k < 32; k++) x[64 + k] = 0; /* all-zero block */
    x[100] = 1e-30f;
    int8_t *q0 = aligned_alloc(64, cols), *q1 = aligned_alloc(64, cols);
    float d0[48], s0[48], d1[48], s1[48], dref[48];
    double *xq = malloc(sizeof(double) * cols);
    sd_cpu_qact_scalar(x, cols, q0, d0, s0);
    ref_quant_act(x, cols, xq, dref);
    for (int64_t b = 0; b < nb; b++) {
        cr_assert_eq(d0[b], dref[b]);
        int sum = 0;
        for (int k = 0; k < 32; k++) {
            cr_assert_eq((double)d0[b] * q0[32 * b + k], xq[32 * b + k]);
            sum += q0[32 * b + k];
        }
        cr_assert_eq(s0[b], d0[b] * (float)sum);
    }
    if (top_isa() >= SD_ISA_AVX2) {
        sd_cpu_qact_avx2(x, cols, q1, d1, s1);
        cr_assert_eq(memcmp(q0, q1, cols), 0);
        cr_assert_eq(memcmp(d0, d1, sizeof d0), 0);
        cr_assert_eq(memcmp(s0, s1, sizeof s0), 0);
    }
    if (top_isa() >= SD_ISA_AVX512) {
        sd_cpu_qact_avx512(x, cols, q1, d1, s1);
        cr_assert_eq(memcmp(q0, q1, cols), 0);
        cr_assert_eq(memcmp(d0, d1, sizeof d0), 0);
    }
    free(x), free(q0), free(q1), free(xq);
}

/* The VNNI and amx levels' k8 activations: codes and scales as the
 * reference's 256-element blocks, codes + 128, and the sums of 32 and
 * (times -32) 16 codes; an all-zero super-block and one tiny value
 * included. */
Test(cpu, k8_quantizer_matches_reference) {
    if (top_isa() < SD_ISA_AVX512_VNNI)
        cr_skip_test("the CPU has no VNNI level: the k8 quantizer is not used");
    const int64_t cols = 1536, nsb = cols / 256;
    float *x = malloc(sizeof(float) * cols), d[6], dref[6];
    fill(x, cols, -3, 3);
    for (int k = 0; k < 256; k++) x[512 + k] = 0;
    x[1000] = 1e-30f;
    int8_t *q = malloc(cols);
    uint8_t *u = malloc(cols);
    int16_t s32[48];
    int32_t o16[96];
    double *xq = malloc(sizeof(double) * cols);
    sd_cpu_qact_k8_avx512(x, cols, q, u, d, s32, o16);
    ref_quant_act_k8(x, cols, xq, dref);
    for (int64_t sb = 0; sb < nsb; sb++) cr_assert_eq(d[sb], dref[sb], "super-block %lld", (long long)sb);
    for (int64_t k = 0; k < cols; k++) {
        cr_assert_eq((double)d[k / 256] * q[k], xq[k], "element %lld", (long long)k);
        cr_assert_eq(u[k], (uint8_t)(q[k] + 128));
    }
    for (int64_t b = 0; b < cols / 16; b++) {
        int t = 0;
        for (int k = 0; k < 16; k++) t += q[16 * b + k];
        cr_assert_eq(o16[b], -32 * t);
        if (b & 1) {
            for (int k = 0; k < 16; k++) t += q[16 * b - 16 + k];
            cr_assert_eq(s32[b / 2], t);
        }
    }
    free(x), free(q), free(u), free(xq);
}

/* ---- matmul ----------------------------------------------------------------------- */
typedef struct refset {
    double *exact;  /* vs unquantized x */
    double *qexact; /* vs the quantized x the kernel sees (= exact for float types) */
    double *scale;  /* sum |W x| */
    double *loose;  /* activation rounding bound */
    /* K-quants: qexact and loose for the VNNI and amx levels' repacked products,
     * whose activations have one scale per 256 (cpu_int.h, k8); else NULL */
    double *qexact8, *loose8;
} refset;

static refset make_refs(const sd_weight *w, const float *x, int n) {
    const int64_t cols = w->cols, rows = w->rows;
    refset R;
    R.exact = malloc(sizeof(double) * n * rows);
    R.qexact = malloc(sizeof(double) * n * rows);
    R.scale = malloc(sizeof(double) * n * rows);
    R.loose = calloc((size_t)n * rows, sizeof(double));
    R.qexact8 = R.loose8 = NULL;
    double *xd = malloc(sizeof(double) * n * cols), *xq = malloc(sizeof(double) * n * cols);
    for (int64_t k = 0; k < n * cols; k++) xd[k] = x[k];
    ref_matmul(R.exact, w, xd, n);
    if (is_q(w->type)) {
        const int k8 = w->type == SD_Q4_K || w->type == SD_Q6_K;
        for (int pass = 0; pass < 1 + k8; pass++) {
            const int blk = pass ? 256 : 32;
            double *qex = R.qexact, *loose = R.loose;
            if (pass) {
                qex = R.qexact8 = malloc(sizeof(double) * n * rows);
                loose = R.loose8 = calloc((size_t)n * rows, sizeof(double));
            }
            float *dblk = malloc(sizeof(float) * n * (cols / blk));
            for (int i = 0; i < n; i++) {
                if (pass) ref_quant_act_k8(x + i * cols, cols, xq + i * cols, dblk + i * (cols / blk));
                else ref_quant_act(x + i * cols, cols, xq + i * cols, dblk + i * (cols / blk));
            }
            ref_matmul(qex, w, xq, n);
            double *row = malloc(sizeof(double) * cols);
            for (int64_t r = 0; r < rows; r++) {
                ref_dequant_row(w->type, (const uint8_t *)w->data + r * w->row_bytes, row, cols);
                for (int i = 0; i < n; i++)
                    for (int64_t c = 0; c < cols; c++)
                        loose[i * rows + r] += fabs(row[c]) * dblk[i * (cols / blk) + c / blk] / 2;
            }
            free(row), free(dblk);
        }
    } else {
        memcpy(R.qexact, R.exact, sizeof(double) * n * rows);
    }
    ref_matmul_abs(R.scale, w, xd, n);
    free(xd), free(xq);
    return R;
}
static void free_refs(refset *R) {
    free(R->exact), free(R->qexact), free(R->scale), free(R->loose), free(R->qexact8), free(R->loose8);
}
/* The references a run of weight w (as the kernels see it) on level isa
 * answers to: k8 ones for the VNNI and amx levels' repacked K-quants. */
static refset refs_for(const refset *R, const sd_weight *w, int isa) {
    refset r = *R;
    if (isa >= SD_ISA_AVX512_VNNI && (w->type == SD_Q4_K_X16 || w->type == SD_Q6_K_X16)) {
        cr_assert(R->qexact8, "no k8 references for %s", sd_wtype_name(sd_cpu_file_type(w->type)));
        r.qexact = R->qexact8, r.loose = R->loose8;
    }
    return r;
}

static void check_out(const float *out, const float *init, const refset *R, const sd_weight *w, int n,
                      int acc, const char *what) {
    const int64_t rows = w->rows;
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < rows; r++) {
            size_t k = (size_t)i * rows + r;
            double base = acc ? init[k] : 0;
            double got = out[k] - base;
            cr_assert(isfinite(out[k]), "%s: non-finite out[%d][%lld]", what, i, (long long)r);
            double tol = 2e-5 * R->scale[k] + 1e-6 + (acc ? 1e-6 * fabs(base) : 0);
            cr_assert_leq(fabs(got - R->qexact[k]), tol, "%s: out[%d][%lld] = %.9g, ref %.9g (scale %g)",
                          what, i, (long long)r, got, R->qexact[k], R->scale[k]);
            cr_assert_leq(fabs(got - R->exact[k]), tol + R->loose[k] * 1.0001,
                          "%s (loose): out[%d][%lld] = %.9g, exact %.9g", what, i, (long long)r, got,
                          R->exact[k]);
        }
    for (int g = 0; g < 16; g++)
        cr_assert_eq(out[n * rows + g], 12345.0f, "%s: wrote past the end", what);
}

/* run (the weight as the kernels see it) against the references R of the
 * file-layout weight ref on every ISA, 1 and 2 threads, with and without
 * accumulate. */
static void check_all_isas(sd_cpu *const *ctx, const sd_weight *run, const sd_weight *ref, const refset *R,
                           const float *x, int n, const char *tag) {
    size_t no = (size_t)n * run->rows;
    float *out = malloc(sizeof(float) * (no + 16)), *init = malloc(sizeof(float) * no);
    fill(init, no, -2, 2);
    sd_err e = {{0}};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int th = 0; th < 2; th++)
            for (int acc = 0; acc < 2; acc++) {
                sd_cpu *c = ctx[th];
                sd_cpu_set_isa(c, isa);
                if (acc) memcpy(out, init, sizeof(float) * no);
                else for (size_t k = 0; k < no; k++) out[k] = NAN;
                for (int g = 0; g < 16; g++) out[no + g] = 12345.0f;
                char what[160];
                snprintf(what, sizeof what, "%s %lldx%lld n=%d isa=%s threads=%d acc=%d", tag,
                         (long long)run->rows, (long long)run->cols, n, sd_isa_name(isa), th + 1, acc);
                cr_assert_eq(sd_cpu_matmul(c, out, run, x, n, acc, &e), 0, "%s: %s", what, e.msg);
                const refset Ri = refs_for(R, run, isa);
                check_out(out, init, &Ri, ref, n, acc, what);
            }
    free(out), free(init);
}

static void matmul_case(uint32_t t, int64_t rows, int64_t cols, int n, sd_cpu *const *ctx) {
    sd_weight w = make_weight(t, rows, cols);
    float *x = malloc(sizeof(float) * n * cols);
    fill(x, (size_t)n * cols, -1, 1);
    for (int64_t c = 0; c < cols; c += 13) x[c] *= 4; /* uneven block maxima */
    refset R = make_refs(&w, x, n);
    check_all_isas(ctx, &w, &w, &R, x, n, sd_wtype_name(t));
    free_refs(&R);
    free(x), free((void *)w.data);
}

/* ---- weights repacked in groups of 16 rows (blocks.h, SD_*_X16) -------------------------
 * The references come from the file layout before the repack; the scalar
 * path must give the same bits as the file layout's scalar path (the same
 * sums in the same order), every SIMD path the reference's tolerance. */
static void repacked_case(sd_weight w, int n, sd_cpu *const *ctx) {
    const int64_t rows = w.rows, cols = w.cols;
    float *x = malloc(sizeof(float) * n * cols);
    fill(x, (size_t)n * cols, -1, 1);
    for (int64_t c = 0; c < cols; c += 13) x[c] *= 4;
    refset R = make_refs(&w, x, n);
    size_t no = (size_t)n * rows;
    float *out = malloc(sizeof(float) * no), *plain = malloc(sizeof(float) * no);
    sd_err e = {{0}};
    sd_cpu_set_isa(ctx[0], SD_ISA_SCALAR);
    cr_assert_eq(sd_cpu_matmul(ctx[0], plain, &w, x, n, 0, &e), 0, "%s", e.msg);
    sd_weight x16 = w;
    const uint32_t want = 0x100 + w.type;
    const char *tn = sd_wtype_name(w.type);
    cr_assert_eq(sd_cpu_repack(ctx[1], &x16, &e), 0, "%s", e.msg);
    cr_assert_eq(x16.type, want, "%s %lldx%lld not repacked", tn, (long long)rows, (long long)cols);
    cr_assert_eq(sd_cpu_matmul(ctx[0], out, &x16, x, n, 0, &e), 0, "%s", e.msg);
    for (size_t k = 0; k < no; k++)
        cr_assert_eq(out[k], plain[k], "scalar %s x16 %lldx%lld n=%d: out[%zu] %.9g, file layout %.9g", tn,
                     (long long)rows, (long long)cols, n, k, out[k], plain[k]);
    char tag[32];
    snprintf(tag, sizeof tag, "%s x16", tn);
    check_all_isas(ctx, &x16, &w, &R, x, n, tag);
    /* A row of an n-row call (verification, beams) has the bits of the same
     * row alone (decode), on every ISA: greedy speculative decoding equals
     * AR only then, at every near-tie. */
    for (int isa = 0; n > 1 && isa < n_isas(); isa++) {
        sd_cpu_set_isa(ctx[1], isa);
        cr_assert_eq(sd_cpu_matmul(ctx[1], out, &x16, x, n, 0, &e), 0, "%s", e.msg);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(sd_cpu_matmul(ctx[1], plain, &x16, x + (size_t)i * cols, 1, 0, &e), 0, "%s", e.msg);
            cr_assert_eq(memcmp(out + (size_t)i * rows, plain, sizeof(float) * rows), 0,
                         "%s %lldx%lld isa %s: row %d of %d differs from a one-row call", tag, (long long)rows,
                         (long long)cols, sd_isa_name(isa), i, n);
        }
    }
    /* the embedding lookup reads the repacked rows */
    int32_t ids[3] = {0, (int32_t)rows / 2 + 1, (int32_t)rows - 1};
    float *emb = malloc(sizeof(float) * 3 * cols);
    double *ref = malloc(sizeof(double) * cols);
    cr_assert_eq(sd_cpu_embed(ctx[0], emb, &x16, ids, 3, &e), 0, "%s", e.msg);
    for (int i = 0; i < 3; i++) {
        ref_dequant_row(w.type, (const uint8_t *)w.data + ids[i] * w.row_bytes, ref, cols);
        for (int64_t c = 0; c < cols; c++)
            cr_assert_leq(fabs(emb[i * cols + c] - ref[c]), 1e-6 * fabs(ref[c]), "x16 embed row %d", ids[i]);
    }
    sd_cpu_repack_free(&x16);
    cr_assert_eq(x16.type, w.type);
    free_refs(&R);
    free(emb), free(ref), free(out), free(plain), free(x);
}

static void ctx_pair(sd_cpu *ctx[2]) {
    sd_err e = {{0}};
    ctx[0] = new_cpu(1, &e);
    ctx[1] = new_cpu(2, &e);
    cr_assert(ctx[0] && ctx[1], "%s", e.msg);
}

/* Every shape of rows x cols x n under a size cap (the double references
 * are slow), on every ISA, 1 and 2 threads, with and without accumulate. */
static void matmul_grid(uint32_t t, const int64_t *rows_l, int nr, const int64_t *cols_l, int nc,
                        const int *ns, int nn) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    for (int ri = 0; ri < nr; ri++)
        for (int ci = 0; ci < nc; ci++)
            for (int ni = 0; ni < nn; ni++) {
                /* keep the run short: the largest shapes only with a few n */
                if (rows_l[ri] * cols_l[ci] * ns[ni] > 333 * 576 * 8) continue;
                matmul_case(t, rows_l[ri], cols_l[ci], ns[ni], ctx);
            }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}

/* Block counts of the quantized columns: 1, 2, 3 (a pair and an odd
 * block), 18 (whole steps of four blocks, the AVX-512 Q4_1 tile, and a
 * pair left), 48, and 7 (a step of four, a pair, an odd block). */
static void matmul_type(uint32_t t) {
    static const int64_t rows_l[] = {1, 7, 64, 172, 333};
    static const int64_t cols_l[] = {32, 64, 96, 576, 1536, 224, 8, 172};
    static const int ns[] = {1, 3, 8, 17};
    matmul_grid(t, rows_l, 5, cols_l, is_q(t) ? 6 : 8, ns, 4);
}

/* The Qwen types: n = 1 (decode), 5 and 9 (verification, beams), 64
 * (prefill); odd row counts; Q5_0 with an odd block count (96: the pair
 * path's single-block tail; 224: a step of four blocks, a pair and an odd
 * block), the K-quants with 1, 3 and 6 super-blocks. */
static void matmul_qwen_type(uint32_t t) {
    static const int64_t rows_l[] = {1, 7, 61, 333};
    static const int64_t cols_q5[] = {32, 96, 576, 1536, 224}, cols_k[] = {256, 768, 1536};
    static const int ns[] = {1, 5, 9, 64};
    if (t == SD_Q5_0) matmul_grid(t, rows_l, 4, cols_q5, 5, ns, 4);
    else matmul_grid(t, rows_l, 4, cols_k, 3, ns, 4);
}

/* Every activation row count 1..10 (the AVX-512 K-quant tiles take up to
 * 8 rows a pass and balance the passes: 9 = 5 + 4, 10 = 5 + 5) with a
 * row count that leaves a tail of 1 after whole groups of 4 (13) and one
 * of 3 (7), for the types with 512-bit tiles and the Q8_0 head. */
static void matmul_rows_1_to_10(uint32_t t) {
    static const int64_t rows_l[] = {7, 13};
    static const int64_t cols_l[] = {512};
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    matmul_grid(t, rows_l, 2, cols_l, 1, ns, 10);
}
Test(matmul, q4_k_rows_1_to_10) { matmul_rows_1_to_10(SD_Q4_K); }
Test(matmul, q6_k_rows_1_to_10) { matmul_rows_1_to_10(SD_Q6_K); }
Test(matmul, q8_0_rows_1_to_10) { matmul_rows_1_to_10(SD_Q8_0); }
Test(matmul, q4_1_rows_1_to_10) { matmul_rows_1_to_10(SD_Q4_1); }
Test(matmul, q5_0_rows_1_to_10) { matmul_rows_1_to_10(SD_Q5_0); }

Test(matmul, f32) { matmul_type(SD_F32); }
Test(matmul, f16) { matmul_type(SD_F16); }
Test(matmul, bf16) { matmul_type(SD_BF16); }
Test(matmul, q8_0) { matmul_type(SD_Q8_0); }
Test(matmul, q4_0) { matmul_type(SD_Q4_0); }
Test(matmul, q4_1) { matmul_type(SD_Q4_1); }
Test(matmul, q5_0) { matmul_qwen_type(SD_Q5_0); }
Test(matmul, q4_k) { matmul_qwen_type(SD_Q4_K); }
Test(matmul, q6_k) { matmul_qwen_type(SD_Q6_K); }

/* Groups of 16 rows (1, 3, 21), 1, 3 and 6 super-blocks (1, 7 and 28
 * blocks for Q5_0 and Q8_0), every activation
 * row count 1..10 (the 512-bit tiles take up to 9 a pass, the 256-bit
 * ones 5, balanced) and
 * 17, 64 and 300 (prefill; AMX: 1 tile of 16 plus a VNNI row, 4 tiles,
 * and 18 tiles over two batches plus 12 VNNI rows), on every ISA, 1 and 2
 * threads, with and without accumulate. */
static void repacked_type(uint32_t t) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    static const int64_t rows_l[] = {16, 48, 336}, cols_k[] = {256, 768, 1536}, cols_32[] = {32, 224, 896};
    const int64_t *cols_l = sd_wtype_block(t) == 256 ? cols_k : cols_32;
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 64, 300};
    for (int ri = 0; ri < 3; ri++)
        for (int ci = 0; ci < 3; ci++)
            for (int ni = 0; ni < 13; ni++) {
                if (rows_l[ri] * cols_l[ci] * ns[ni] > 336 * 576 * 8) continue;
                sd_weight w = make_weight(t, rows_l[ri], cols_l[ci]);
                repacked_case(w, ns[ni], ctx);
                free((void *)w.data);
            }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}
/* Q6_K codes at their top (63) against activation codes of +-127: a
 * sub-block's 8 products per int16 lane sum to +-64008, past int16, and
 * only the -32 offset brings them back (+-31496). The 256-bit tile adds
 * them in int16 and must still give the exact sums: every level within
 * the tolerance of the scalar level's output. Each 16 elements of a row
 * are -1 and 15 x 31/32 (times the row's scale), which the quantizer maps
 * to codes 0 and 63, the element the test looks at (1) being a 63; the
 * activations alternate pairs of codes 127 and 16, so that an offset
 * split between the wrong int16 lanes leaves int16 and shows. */
Test(matmul, q6_k_repacked_int16_edge) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(1, &e);
    cr_assert(c, "%s", e.msg);
    enum { ROWS = 32, COLS = 512, N = 4 };
    sd_weight w = {.type = SD_Q6_K, .rows = ROWS, .cols = COLS, .row_bytes = row_bytes(SD_Q6_K, COLS)};
    uint8_t *data = malloc(w.row_bytes * ROWS);
    float row[COLS], x[N * COLS], ref[N * ROWS], out[N * ROWS];
    for (int r = 0; r < ROWS; r++) {
        const float sc = 0.1f + 0.05f * (float)(r % 5);
        for (int k = 0; k < COLS; k++) row[k] = sc * (k % 16 ? 31.0f / 32.0f : -1.0f);
        cr_assert_eq(sd_quantize_row(SD_Q6_K, row, data + r * w.row_bytes, COLS), 0);
        const uint8_t *blk = data + r * w.row_bytes; /* ql[128] | qh[64] | ... */
        cr_assert_eq((blk[1] & 0x0f) | (blk[128 + 1] & 3) << 4, 63, "row %d: element 1 is not code 63", r);
    }
    w.data = data;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < COLS; k++) x[i * COLS + k] = (i & 1 ? -2.0f : 1.5f) * (k % 4 < 2 ? 1.0f : 0.125f);
    cr_assert_eq(sd_cpu_repack(c, &w, &e), 0, "%s", e.msg);
    cr_assert_eq(w.type, (uint32_t)SD_Q6_K_X16);
    sd_cpu_set_isa(c, SD_ISA_SCALAR);
    cr_assert_eq(sd_cpu_matmul(c, ref, &w, x, N, 0, &e), 0, "%s", e.msg);
    for (int isa = 1; isa < n_isas(); isa++) {
        sd_cpu_set_isa(c, isa);
        cr_assert_eq(sd_cpu_matmul(c, out, &w, x, N, 0, &e), 0, "%s", e.msg);
        for (int k = 0; k < N * ROWS; k++)
            cr_assert_leq(fabs((double)out[k] - ref[k]), 1e-5 * fabs(ref[k]) + 1e-6, "isa %s out[%d]: %.9g, scalar %.9g",
                          sd_isa_name(isa), k, out[k], ref[k]);
    }
    sd_cpu_repack_free(&w);
    free(data);
    sd_cpu_destroy(c);
}
Test(matmul, q4_k_repacked) { repacked_type(SD_Q4_K); }
Test(matmul, q6_k_repacked) { repacked_type(SD_Q6_K); }
Test(matmul, q5_0_repacked) { repacked_type(SD_Q5_0); }
Test(matmul, q8_0_repacked) { repacked_type(SD_Q8_0); }
Test(matmul, q4_0_repacked) { repacked_type(SD_Q4_0); }
Test(matmul, q4_1_repacked) { repacked_type(SD_Q4_1); }

/* Only quantized weights of 16k rows are repacked; the others keep their data. */
Test(matmul, repack_leaves_others) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(1, &e);
    static const uint32_t types[] = {SD_Q4_K, SD_Q4_0, SD_Q4_1, SD_F16, SD_BF16, SD_F32};
    static const int64_t rows[] = {24, 8, 40, 32, 32, 32};
    for (int k = 0; k < 6; k++) {
        sd_weight w = make_weight(types[k], rows[k], 256), before = w;
        cr_assert_eq(sd_cpu_repack(c, &w, &e), 0, "%s", e.msg);
        cr_assert(w.type == before.type && w.data == before.data, "%s x %lld was repacked",
                  sd_wtype_name(types[k]), (long long)rows[k]);
        sd_cpu_repack_free(&w);
        cr_assert(w.type == before.type && w.data == before.data);
        free((void *)w.data);
    }
    sd_cpu_destroy(c);
}

/* The backend's repack setting: on (the default), upload_weight
 * interleaves a Q4_K weight of 16k rows; off, the weight keeps the file's
 * layout and data. */
Test(matmul, repack_setting) {
    sd_err e = {{0}};
    for (int on = 0; on <= 1; on++) {
        sd_backend_opts o = sd_backend_opts_default();
        o.repack = on;
        sd_backend *b = sd_backend_cpu(1, &o, &e);
        cr_assert_not_null(b, "%s", e.msg);
        sd_weight w = make_weight(SD_Q4_K, 32, 256);
        const void *file_data = w.data;
        cr_assert_eq(b->upload_weight(b, &w, &e), 0, "%s", e.msg);
        cr_assert_eq(w.type, on ? (uint32_t)SD_Q4_K_X16 : (uint32_t)SD_Q4_K, "repack %d", on);
        cr_assert_eq(w.data == file_data, !on, "repack %d", on);
        b->release_weight(b, &w);
        free((void *)file_data);
        b->destroy(b);
    }
}

/* sd_cpu_matmul_multi of nw weights (ws as the kernels see them, w the
 * file-layout originals the references R came from) on every ISA and 1 and
 * 2 threads, each output checked against its reference. */
static void multi_check(sd_cpu *const *ctx, int nw, float *const *outs, const sd_weight *const *ws,
                        const sd_weight *w, const refset *R, const float *x, int n, const char *tag) {
    sd_err e = {{0}};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int th = 0; th < 2; th++) {
            sd_cpu_set_isa(ctx[th], isa);
            for (int k = 0; k < nw; k++) {
                for (int64_t m = 0; m < n * w[k].rows; m++) outs[k][m] = NAN;
                for (int g = 0; g < 16; g++) outs[k][n * w[k].rows + g] = 12345.0f;
            }
            cr_assert_eq(sd_cpu_matmul_multi(ctx[th], nw, outs, ws, x, n, &e), 0, "%s", e.msg);
            for (int k = 0; k < nw; k++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s w%d n=%d isa=%s thr=%d", tag, sd_wtype_name(w[k].type), k, n,
                         sd_isa_name(isa), th + 1);
                const refset Ri = refs_for(&R[k], ws[k], isa);
                check_out(outs[k], NULL, &Ri, &w[k], n, 0, what);
            }
        }
}

/* A repacked weight in one call with file-layout ones (its chunks cut on
 * whole groups while the thread split crosses weights). */
Test(matmul, multi_with_repacked) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    sd_err e = {{0}};
    enum { NW = 8 };
    const uint32_t types[NW] = {SD_Q4_1, SD_Q4_K, SD_Q6_K, SD_Q6_K, SD_Q5_0, SD_Q8_0, SD_Q4_1, SD_Q4_0};
    const int64_t rows[NW] = {21, 64, 19, 32, 48, 16, 32, 16}, cols = 768;
    for (int n = 1; n <= 9; n += 4) {
        sd_weight w[NW], wr[NW];
        const sd_weight *wp[NW];
        float *outs[NW], *x = malloc(sizeof(float) * n * cols);
        refset R[NW];
        fill(x, (size_t)n * cols, -1, 1);
        for (int k = 0; k < NW; k++) {
            w[k] = wr[k] = make_weight(types[k], rows[k], cols);
            R[k] = make_refs(&w[k], x, n);
            cr_assert_eq(sd_cpu_repack(ctx[0], &wr[k], &e), 0, "%s", e.msg);
            wp[k] = &wr[k];
            outs[k] = malloc(sizeof(float) * (n * rows[k] + 16));
        }
        cr_assert(wr[1].type == SD_Q4_K_X16 && wr[2].type == SD_Q6_K && wr[3].type == SD_Q6_K_X16 &&
                  wr[4].type == SD_Q5_0_X16 && wr[5].type == SD_Q8_0_X16 && wr[0].type == SD_Q4_1 &&
                  wr[6].type == SD_Q4_1_X16 && wr[7].type == SD_Q4_0_X16);
        multi_check(ctx, NW, outs, wp, w, R, x, n, "multi+x16");
        for (int k = 0; k < NW; k++) {
            sd_cpu_repack_free(&wr[k]);
            free_refs(&R[k]), free(outs[k]), free((void *)w[k].data);
        }
        free(x);
    }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}

/* Q/K/V-like: three weights over one x, outputs compared one by one. */
Test(matmul, multi) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    const int64_t rows[3] = {64, 21, 22};
    for (size_t ti = 0; ti < N_TYPES; ti++)
        for (int n = 1; n <= 9; n += 8) {
            uint32_t t = all_types[ti];
            const int64_t cols = cols_for(t, 576);
            sd_weight w[3];
            const sd_weight *wp[3];
            float *outs[3], *x = malloc(sizeof(float) * n * cols);
            refset R[3];
            fill(x, (size_t)n * cols, -1, 1);
            for (int k = 0; k < 3; k++) {
                w[k] = make_weight(t, rows[k], cols);
                wp[k] = &w[k];
                R[k] = make_refs(&w[k], x, n);
                outs[k] = malloc(sizeof(float) * (n * rows[k] + 16));
            }
            multi_check(ctx, 3, outs, wp, w, R, x, n, "multi");
            for (int k = 0; k < 3; k++) free_refs(&R[k]), free(outs[k]), free((void *)w[k].data);
            free(x);
        }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}

Test(matmul, errors) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(1, &e);
    float x[64] = {0}, out[4];
    uint8_t data[256] = {0};
    sd_weight w = {.type = 10, .rows = 1, .cols = 32, .row_bytes = 64, .data = data}; /* Q2_K */
    cr_assert_eq(sd_cpu_matmul(c, out, &w, x, 1, 0, &e), -1);
    cr_assert(strstr(e.msg, "type"), "%s", e.msg);
    w.type = SD_Q4_0;
    w.cols = 48;
    cr_assert_eq(sd_cpu_matmul(c, out, &w, x, 1, 0, &e), -1);
    sd_weight a = {.type = SD_F32, .rows = 1, .cols = 32, .row_bytes = 128, .data = data};
    sd_weight b = {.type = SD_F32, .rows = 1, .cols = 16, .row_bytes = 64, .data = data};
    const sd_weight *ws[2] = {&a, &b};
    float *outs[2] = {out, out + 1};
    cr_assert_eq(sd_cpu_matmul_multi(c, 2, outs, ws, x, 1, &e), -1);
    cr_assert(strstr(e.msg, "cols"), "%s", e.msg);
    /* a repacked weight whose rows are not whole groups of 16 */
    sd_weight r = {.type = SD_Q8_0_X16, .rows = 3, .cols = 32, .row_bytes = 34, .data = data};
    cr_assert_eq(sd_cpu_matmul(c, out, &r, x, 1, 0, &e), -1);
    cr_assert(strstr(e.msg, "repacked weight of 3 rows (a multiple of 16)"), "%s", e.msg);
    sd_cpu_destroy(c);
}

/* ---- real tensors ------------------------------------------------------------------
 * A few rows of real Q5_0 / Q4_K / Q6_K tensors from the Qwen2.5-Coder
 * GGUFs (make model-pair; skipped when they are absent): matmul on every
 * ISA and thread count against the double product of the reference-
 * dequantized rows, and the embedding lookup against the reference. */
static const char *const qwen_files[] = {"models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                                         "models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"};
static const char *const qwen_tensors[] = {"token_embd.weight", "blk.0.attn_q.weight",
                                           "blk.0.attn_v.weight", "blk.0.ffn_down.weight",
                                           "blk.1.ffn_down.weight", "blk.0.ffn_gate.weight"};

Test(matmul, real_qwen_blocks) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    int seen[32] = {0}, files = 0;
    for (int f = 0; f < 2; f++) {
        sd_err e = {{0}};
        if (access(qwen_files[f], R_OK) != 0) continue;
        gguf_file *g = gguf_open(qwen_files[f], &e);
        cr_assert_not_null(g, "%s", e.msg);
        files++;
        for (size_t k = 0; k < sizeof qwen_tensors / sizeof *qwen_tensors; k++) {
            const gguf_tensor *gt = gguf_find_tensor(g, qwen_tensors[k]);
            cr_assert_not_null(gt, "%s: no %s", qwen_files[f], qwen_tensors[k]);
            if (gt->type != SD_Q5_0 && gt->type != SD_Q4_K && gt->type != SD_Q6_K) continue;
            seen[gt->type] = 1;
            const int64_t cols = (int64_t)gt->ne[0], rb = (int64_t)row_bytes(gt->type, cols);
            /* 13 rows from the middle of the tensor: an odd count, ordinary scales */
            const int64_t r0 = (int64_t)gt->ne[1] / 2;
            sd_weight w = {.type = gt->type, .rows = 13, .cols = cols, .row_bytes = (size_t)rb,
                           .data = (const uint8_t *)gt->data + r0 * rb};
            for (int ni = 0; ni < 2; ni++) {
                const int n = ni ? 5 : 1;
                float *x = malloc(sizeof(float) * n * cols), *out = malloc(sizeof(float) * (n * 13 + 16));
                fill(x, (size_t)n * cols, -1, 1);
                refset R = make_refs(&w, x, n);
                for (int isa = 0; isa < n_isas(); isa++)
                    for (int th = 0; th < 2; th++) {
                        sd_cpu_set_isa(ctx[th], isa);
                        for (int m = 0; m < n * 13; m++) out[m] = NAN;
                        for (int m = 0; m < 16; m++) out[n * 13 + m] = 12345.0f;
                        cr_assert_eq(sd_cpu_matmul(ctx[th], out, &w, x, n, 0, &e), 0, "%s", e.msg);
                        char what[160];
                        snprintf(what, sizeof what, "%s %s (%s) n=%d isa=%s threads=%d", qwen_files[f],
                                 qwen_tensors[k], sd_wtype_name(gt->type), n, sd_isa_name(isa), th + 1);
                        check_out(out, NULL, &R, &w, n, 0, what);
                    }
                free_refs(&R), free(x), free(out);
            }
            { /* 32 rows of it repacked, as the CPU backend loads them */
                sd_weight w32 = w;
                w32.rows = 32;
                for (int n = 1; n <= 5; n += 4) repacked_case(w32, n, ctx);
            }
            /* embedding rows 0, 5 and 12 of the slice */
            int32_t ids[3] = {0, 5, 12};
            float *emb = malloc(sizeof(float) * 3 * cols);
            double *ref = malloc(sizeof(double) * cols);
            cr_assert_eq(sd_cpu_embed(ctx[0], emb, &w, ids, 3, &e), 0, "%s", e.msg);
            for (int i = 0; i < 3; i++) {
                ref_dequant_row(w.type, (const uint8_t *)w.data + ids[i] * rb, ref, cols);
                for (int64_t c = 0; c < cols; c++)
                    cr_assert_leq(fabs(emb[i * cols + c] - ref[c]), 1e-6 * fabs(ref[c]), "%s %s embed",
                                  qwen_files[f], qwen_tensors[k]);
            }
            free(emb), free(ref);
        }
        gguf_close(g);
    }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
    if (!files) cr_skip_test("Qwen2.5-Coder GGUFs not in models/ (make model-pair)");
    cr_assert(seen[SD_Q5_0] && seen[SD_Q4_K] && seen[SD_Q6_K], "real tensors cover Q5_0 %d, Q4_K %d, Q6_K %d",
              seen[SD_Q5_0], seen[SD_Q4_K], seen[SD_Q6_K]);
}

/* ---- small ops ---------------------------------------------------------------------- */
Test(cpu, rmsnorm) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(2, &e);
    const int dims[] = {8, 64, 576}, ns[] = {3, 13, 37}; /* 13, 37: four-row groups, tails, pool tasks */
    for (int di = 0; di < 3; di++)
    for (int ni = 0; ni < 3; ni++) {
        int dim = dims[di], n = ns[ni];
        float *x = malloc(sizeof(float) * n * dim), *w = malloc(sizeof(float) * dim),
              *out = malloc(sizeof(float) * n * dim), *one = malloc(sizeof(float) * dim);
        double *ref = malloc(sizeof(double) * n * dim);
        fill(x, (size_t)n * dim, -2, 2);
        fill(w, dim, 0.5f, 1.5f);
        ref_rmsnorm(ref, x, w, n, dim, 1e-5);
        sd_cpu_rmsnorm(c, out, x, w, n, dim, 1e-5f);
        for (int k = 0; k < n * dim; k++) cr_assert_leq(fabs(out[k] - ref[k]), 1e-5 * fabs(ref[k]) + 1e-7);
        for (int i = 0; i < n; i++) { /* each row has the bits of a one-row call */
            sd_cpu_rmsnorm(c, one, x + (size_t)i * dim, w, 1, dim, 1e-5f);
            cr_assert_eq(memcmp(one, out + (size_t)i * dim, sizeof(float) * dim), 0, "n %d row %d", n, i);
        }
        sd_cpu_rmsnorm(c, x, x, w, n, dim, 1e-5f); /* in place */
        cr_assert_eq(memcmp(x, out, sizeof(float) * n * dim), 0);
        free(x), free(w), free(out), free(one), free(ref);
    }
    sd_cpu_destroy(c);
}

Test(cpu, rope) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(2, &e);
    const int n = 11, nh = 3, hd = 64; /* 11 rows: three pool tasks, the last short */
    const int rope_dims[] = {64, 32};
    const int poss[] = {0, 7, 100, 8000};
    float *x = malloc(sizeof(float) * n * nh * hd), *y = malloc(sizeof(float) * n * nh * hd);
    double *ref = malloc(sizeof(double) * n * nh * hd);
    for (int neox = 0; neox < 2; neox++)
    for (int ri = 0; ri < 2; ri++)
        for (int pi = 0; pi < 4; pi++) {
            int rd = rope_dims[ri], pos = poss[pi];
            fill(x, (size_t)n * nh * hd, -1, 1);
            memcpy(y, x, sizeof(float) * n * nh * hd);
            ref_rope(ref, x, n, pos, nh, hd, rd, 10000.0, neox);
            sd_cpu_rope(c, y, n, pos, nh, hd, rd, 10000.0f, neox);
            double tol = 2e-5 + 2e-7 * (pos + n);
            for (int k = 0; k < n * nh * hd; k++) {
                cr_assert_leq(fabs(y[k] - ref[k]), tol, "neox %d rope_dim %d pos %d [%d]: %g vs %g",
                              neox, rd, pos, k, y[k], ref[k]);
                if (k % hd >= rd) cr_assert_eq(y[k], x[k]); /* dims past rope_dim untouched */
            }
            for (int i = 0; i < n; i++) { /* each row has the bits of a one-row call at pos + i */
                float one[3 * 64];
                memcpy(one, x + (size_t)i * nh * hd, sizeof one);
                sd_cpu_rope(c, one, 1, pos + i, nh, hd, rd, 10000.0f, neox);
                cr_assert_eq(memcmp(one, y + (size_t)i * nh * hd, sizeof one), 0, "row %d", i);
            }
        }
    free(x), free(y), free(ref);
    sd_cpu_destroy(c);
}

static void attn_case(sd_cpu *c, int n, int pos, int nh, int nkv, int hd) {
    sd_err e = {{0}};
    int len = pos + n;
    float *q = malloc(sizeof(float) * n * nh * hd), *k = malloc(sizeof(float) * len * nkv * hd),
          *v = malloc(sizeof(float) * len * nkv * hd), *out = malloc(sizeof(float) * n * nh * hd);
    double *ref = malloc(sizeof(double) * n * nh * hd);
    fill(q, (size_t)n * nh * hd, -1, 1);
    fill(k, (size_t)len * nkv * hd, -1, 1);
    fill(v, (size_t)len * nkv * hd, -1, 1);
    for (int d = 0; d < hd; d++) q[d] *= 8; /* a peaked softmax for row 0 */
    /* the F16 cache: the same K/V rounded to half, its reference on the
     * rounded values */
    size_t kvn = (size_t)len * nkv * hd;
    uint16_t *k16 = malloc(2 * kvn), *v16 = malloc(2 * kvn);
    float *kr = malloc(sizeof(float) * kvn), *vr = malloc(sizeof(float) * kvn);
    double *ref16 = malloc(sizeof(double) * n * nh * hd);
    cr_assert(k16 && v16 && kr && vr && ref16);
    sd_quantize_row(SD_F16, k, k16, (int64_t)kvn);
    sd_quantize_row(SD_F16, v, v16, (int64_t)kvn);
    sd_dequantize_row(SD_F16, k16, kr, (int64_t)kvn);
    sd_dequantize_row(SD_F16, v16, vr, (int64_t)kvn);
    ref_attention(ref16, q, kr, vr, n, pos, nh, nkv, hd);
    ref_attention(ref, q, k, v, n, pos, nh, nkv, hd);
    for (int isa = 0; isa < n_isas(); isa++) {
        sd_cpu_set_isa(c, isa);
        for (int m = 0; m < n * nh * hd; m++) out[m] = NAN;
        cr_assert_eq(sd_cpu_attention(c, out, q, k, v, n, pos, nh, nkv, hd, &e), 0, "%s", e.msg);
        for (int m = 0; m < n * nh * hd; m++)
            cr_assert_leq(fabs(out[m] - ref[m]), 2e-5, "attn n=%d pos=%d heads %d/%d hd %d isa %s [%d]: %g vs %g",
                          n, pos, nh, nkv, hd, sd_isa_name(isa), m, out[m], ref[m]);
        for (int m = 0; m < n * nh * hd; m++) out[m] = NAN;
        cr_assert_eq(sd_cpu_attention_kv(c, out, q, k16, v16, SD_F16, n, pos, nh, nkv, hd, &e), 0,
                     "%s", e.msg);
        for (int m = 0; m < n * nh * hd; m++)
            cr_assert_leq(fabs(out[m] - ref16[m]), 2e-5,
                          "f16 attn n=%d pos=%d heads %d/%d hd %d isa %s [%d]: %g vs %g", n, pos, nh,
                          nkv, hd, sd_isa_name(isa), m, out[m], ref16[m]);
    }
    free(q), free(k), free(v), free(out), free(ref);
    free(k16), free(v16), free(kr), free(vr), free(ref16);
}

Test(cpu, attention) {
    sd_err e = {{0}};
    sd_cpu *c1 = new_cpu(1, &e), *c2 = new_cpu(2, &e);
    /* groups of 1, 2, 3 (SmolLM2), 7 (the Qwen 0.5B: sub-groups 4+3) and 8 */
    const int gqa[][2] = {{3, 3}, {4, 2}, {6, 2}, {9, 3}, {14, 2}, {8, 1}};
    for (int g = 0; g < 6; g++)
        for (int ci = 0; ci < 2; ci++) {
            sd_cpu *c = ci ? c2 : c1;
            attn_case(c, 1, 0, gqa[g][0], gqa[g][1], 64);
            attn_case(c, 1, 37, gqa[g][0], gqa[g][1], 64);
            attn_case(c, 5, 20, gqa[g][0], gqa[g][1], 64);
            attn_case(c, 17, 0, gqa[g][0], gqa[g][1], 32);
            attn_case(c, 3, 9, gqa[g][0], gqa[g][1], 12); /* not a multiple of 8 */
            attn_case(c, 4, 3, gqa[g][0], gqa[g][1], 40); /* not a multiple of 16 */
            attn_case(c, 2, 50, gqa[g][0], gqa[g][1], 128);
            attn_case(c, 3, 30, gqa[g][0], gqa[g][1], 112); /* V slices of 64, 32 and 16 columns */
        }
    attn_case(c2, 1, 300, 12, 2, 128); /* the Qwen 1.5B: sub-groups 3+3 */
    attn_case(c2, 2, 700, 9, 3, 64); /* longer context: scratch grows, two key ranges */
    attn_case(c1, 5, 509, 9, 3, 64); /* rows of one range and rows of two in one call */
    attn_case(c2, 1, 1500, 12, 2, 128); /* three ranges, the last one short */
    attn_case(c2, 2, 600, 4, 2, 40);    /* ranges through the scalar kernel */
    attn_case(c2, 130, 0, 9, 3, 64);
    attn_case(c2, 2, 40, 4, 2, 48);  /* a last column slice of 48 (AVX-512) */
    attn_case(c2, 1, 90, 4, 1, 256); /* head dims the 16-position scorer reads at run time */
    cr_assert_eq(sd_cpu_attention(c1, NULL, NULL, NULL, NULL, 1, 0, 3, 2, 64, &e), -1);
    sd_cpu_destroy(c1);
    sd_cpu_destroy(c2);
}

/* A position's attention output does not depend on the call: row i of a
 * 5-row call (verification) equals, bit for bit, a 1-row call at the same
 * position (decode), with 1 or 2 threads, below and across the key ranges
 * of long rows, over an F32 and an F16 cache (speculative decoding's
 * output equals autoregressive decoding's only if this holds). */
Test(cpu, attention_rows_agree) {
    sd_err e = {{0}};
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    enum { N = 5 };
    /* SmolLM2's heads (hd 64: queries in registers) and the Qwen 1.5B's
     * (hd 128: two heads a pass over K) */
    const int shapes[2][3] = {{9, 3, 64}, {12, 2, 128}}, poss[] = {100, 509, 1100};
    for (int c = 0; c < 6; c++) {
        const int NH = shapes[c / 3][0], NKV = shapes[c / 3][1], HD = shapes[c / 3][2];
        const int pos = poss[c % 3], len = pos + N;
        float *q = malloc(sizeof(float) * N * NH * HD), *k = malloc(sizeof(float) * len * NKV * HD),
              *v = malloc(sizeof(float) * len * NKV * HD), *o5 = malloc(sizeof(float) * N * NH * HD),
              *o1 = malloc(sizeof(float) * NH * HD);
        cr_assert(q && k && v && o5 && o1);
        fill(q, (size_t)N * NH * HD, -1, 1);
        fill(k, (size_t)len * NKV * HD, -1, 1);
        fill(v, (size_t)len * NKV * HD, -1, 1);
        const size_t kvn = (size_t)len * NKV * HD;
        uint16_t *k16 = malloc(2 * kvn), *v16 = malloc(2 * kvn);
        cr_assert(k16 && v16);
        sd_quantize_row(SD_F16, k, k16, (int64_t)kvn);
        sd_quantize_row(SD_F16, v, v16, (int64_t)kvn);
        for (int isa = 0; isa < n_isas(); isa++)
            for (int t = 0; t < 4; t++) {
                const int t5 = t & 1, f16 = t >> 1;
                const void *kc = f16 ? (const void *)k16 : k, *vc = f16 ? (const void *)v16 : v;
                const uint32_t kt = f16 ? SD_F16 : SD_F32;
                sd_cpu_set_isa(ctx[0], isa);
                sd_cpu_set_isa(ctx[1], isa);
                cr_assert_eq(sd_cpu_attention_kv(ctx[t5], o5, q, kc, vc, kt, N, pos, NH, NKV, HD, &e), 0, "%s",
                             e.msg);
                for (int i = 0; i < N; i++) {
                    cr_assert_eq(sd_cpu_attention_kv(ctx[1 - t5], o1, q + (size_t)i * NH * HD, kc, vc, kt, 1,
                                                     pos + i, NH, NKV, HD, &e),
                                 0, "%s", e.msg);
                    cr_assert_eq(memcmp(o1, o5 + (size_t)i * NH * HD, sizeof(float) * NH * HD), 0,
                                 "pos %d row %d isa %s cache %s: a 1-row call differs from the %d-row call", pos,
                                 i, sd_isa_name(isa), f16 ? "F16" : "F32", N);
                }
            }
        free(q), free(k), free(v), free(o5), free(o1), free(k16), free(v16);
    }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}

/* Every ISA, 1 and 2 threads; a tail after whole vectors (1003) and a count
 * of several pool chunks (40000); gates past the exp range (+-100). */
Test(cpu, swiglu) {
    sd_cpu *ctx[2];
    ctx_pair(ctx);
    enum { N = 40000 };
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * N);
    float *g2 = malloc(sizeof(float) * N);
    double *ref = malloc(sizeof(double) * N);
    cr_assert(g && u && o && g2 && ref);
    fill(g, N, -10, 10);
    fill(u, N, -3, 3);
    g[3] = 100, g[5] = -100, g[8] = 0;
    ref_swiglu(ref, g, u, N);
    const int counts[] = {7, 1003, N};
    for (int th = 0; th < 2; th++)
        for (int isa = 0; isa <= top_isa(); isa++)
            for (int ci = 0; ci < 3; ci++) {
                sd_cpu *c = ctx[th];
                sd_cpu_set_isa(c, isa);
                const int n = counts[ci];
                sd_cpu_swiglu(c, o, g, u, (size_t)n);
                for (int k = 0; k < n; k++)
                    cr_assert_leq(fabs(o[k] - ref[k]), 1e-6 * fabs(ref[k]) + 1e-7,
                                  "isa %s threads %d n %d [%d]: %g vs %g", sd_isa_name(isa), th + 1, n, k,
                                  o[k], ref[k]);
                memcpy(g2, g, sizeof(float) * (size_t)n);
                sd_cpu_swiglu(c, g2, g2, u, (size_t)n); /* out aliases gate */
                cr_assert_eq(memcmp(g2, o, sizeof(float) * (size_t)n), 0);
            }
    free(g), free(u), free(o), free(g2), free(ref);
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
}

Test(cpu, embed) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(1, &e);
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = all_types[ti];
        const int64_t cols = cols_for(t, 64);
        sd_weight w = make_weight(t, 10, cols);
        int32_t ids[4] = {3, 0, 9, 3};
        float x[4 * 256];
        double ref[256];
        cr_assert_eq(sd_cpu_embed(c, x, &w, ids, 4, &e), 0, "%s", e.msg);
        for (int i = 0; i < 4; i++) {
            ref_dequant_row(t, (const uint8_t *)w.data + ids[i] * w.row_bytes, ref, cols);
            for (int k = 0; k < cols; k++) cr_assert_leq(fabs(x[i * cols + k] - ref[k]), 1e-6 * fabs(ref[k]));
        }
        ids[1] = 10;
        cr_assert_eq(sd_cpu_embed(c, x, &w, ids, 4, &e), -1);
        cr_assert(strstr(e.msg, "range"), "%s", e.msg);
        free((void *)w.data);
    }
    sd_cpu_destroy(c);
}

/* Rows with ties (values from a few levels), -inf and ordinary random
 * values; k from 1 to 64; on every ISA, with the softmax probabilities of
 * the ids for k = 2 and 64 (2108 columns: two of exp_sum's chunks, then
 * one 8-wide step and a scalar tail). */
Test(cpu, top_k_rows) {
    sd_err e = {{0}};
    sd_cpu *c = new_cpu(2, &e);
    cr_assert(c, "%s", e.msg);
    enum { ROWS = 6, COLS = 2108 };
    static float x[ROWS * COLS];
    static int32_t got[ROWS * 64], ref[64];
    for (int r = 0; r < ROWS; r++) {
        float *row = x + r * COLS;
        fill(row, COLS, -5, 5);
        for (int i = 0; i < COLS; i++) {
            if (r == 1) row[i] = (float)(i % 4);           /* ties everywhere */
            if (r == 2 && i % 3) row[i] = -INFINITY;       /* -inf among values */
            if (r == 3) row[i] = -INFINITY;                /* only -inf */
            if (r == 4 && i % 7 == 0) row[i] = 5.0f;       /* a tie at the top */
        }
    }
    static const int ks[] = {1, 2, 5, 64};
    static float probs[ROWS * 64];
    for (int isa = 0; isa < n_isas(); isa++) {
        sd_cpu_set_isa(c, isa);
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            const int k = ks[ki];
            sd_cpu_top_k_rows(c, x, ROWS, COLS, k, got, ki % 2 ? probs : NULL);
            for (int r = 0; r < ROWS; r++) {
                const float *row = x + r * COLS;
                ref_top_k(row, COLS, k, ref);
                cr_assert_eq(memcmp(got + r * k, ref, (size_t)k * sizeof *ref), 0,
                             "row %d k %d: first id %d, reference %d", r, k, got[r * k], ref[0]);
                if (!(ki % 2)) continue;
                /* softmax in double; a row of -inf is uniform */
                const float mx = row[ref[0]];
                double sum = 0;
                for (int i = 0; i < COLS; i++) sum += row[i] == mx ? 1.0 : exp((double)row[i] - mx);
                for (int j = 0; j < k; j++) {
                    const double want = (row[ref[j]] == mx ? 1.0 : exp((double)row[ref[j]] - mx)) / sum;
                    cr_assert(fabs(probs[r * k + j] - want) <= 1e-5 * want + 1e-30,
                              "%s row %d k %d: probability of id %d %.9g, reference %.9g",
                              sd_isa_name(isa), r, k, ref[j], probs[r * k + j], want);
                }
            }
        }
    }
    const float small[3] = {1, 3, 3};
    int32_t all[3];
    cr_assert_eq(sd_top_k_scalar(small, 3, 64, all), 3); /* k > n: n ids */
    cr_assert(all[0] == 1 && all[1] == 2 && all[2] == 0);
    sd_cpu_destroy(c);
}

/* The SIMD top-k against the scalar loop it must equal id for id, on rows
 * the reference above leaves out: NaN entries (which the scalar loop lets
 * in at the k-th place), +-inf, a row that rises all the way (every
 * element enters), lengths around the 32- and 8-element steps. */
Test(cpu, top_k_simd_equals_scalar) {
    if (top_isa() < SD_ISA_AVX2) cr_skip_test("no AVX2 on this CPU");
    enum { N = 1000 };
    static float x[N];
    static const int ns[] = {0, 1, 7, 8, 31, 32, 33, 71, 1000};
    static const int ks[] = {1, 2, 3, 8, 64};
    for (int kind = 0; kind < 4; kind++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
                const int n = ns[ni], k = ks[ki];
                fill(x, N, -5, 5);
                for (int i = 0; i < N; i++) {
                    if (kind == 1 && i % 13 == 5) x[i] = NAN;
                    if (kind == 2) x[i] = i % 11 == 0 ? INFINITY : i % 7 == 0 ? -INFINITY : x[i];
                    if (kind == 3) x[i] = (float)i;
                }
                int32_t a[64], b[64];
                const int ma = sd_top_k_scalar(x, n, k, a), mb = sd_top_k_avx2(x, n, k, b);
                cr_assert_eq(ma, mb, "kind %d n %d k %d: %d ids, scalar %d", kind, n, k, mb, ma);
                cr_assert_eq(memcmp(a, b, (size_t)ma * sizeof *a), 0, "kind %d n %d k %d: ids differ", kind, n, k);
            }
    int32_t none[1] = {-7};
    cr_assert_eq(sd_top_k_avx2(x, N, 0, none), 0);
    cr_assert_eq(none[0], -7);
}
