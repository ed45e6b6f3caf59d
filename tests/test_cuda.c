/* CUDA backend vs CPU backend, op by op and through a whole (tiny, random)
 * model, on random data. Without a usable GPU every test is skipped and one
 * line says why.
 *
 * Error measure: max |cuda - cpu| / max |cpu| over the output (NaN or inf
 * in the CUDA output fails). Outputs are poisoned with NaN before each call,
 * so an element the kernel forgot to write fails too. Bounds and why:
 *   matmul, F32/F16/BF16 weights   1e-4  both sides convert the weights
 *                                        exactly and multiply F32
 *                                        activations: only the summation
 *                                        order differs (~1e-6 seen in theory)
 *   matmul, Q8_0/Q4_0/Q4_1/Q5_0,   1e-3  both quantise the activations to the
 *   Q4_K/Q6_K                            same int8 blocks of 32 and form the
 *                                        same integer block sums (the
 *                                        K-quants' sub-block scales d*sc,
 *                                        dmin*mn are exact in float);
 *                                        summation order again, with room
 *                                        for a rare activation rounding tie
 *   qkv_rope                       as matmul (the rotation is the CPU's
 *                                        arithmetic, cosf/sinf within 2 ulp)
 *   ffn_swiglu                     2x matmul's (product of two projections)
 *   attention                      1e-4  F32 throughout; online softmax and
 *                                        split combination reorder sums
 *   rmsnorm                        1e-6  the same double-precision scale
 *   embed                          exact the same dequantisation arithmetic
 *                                        (for the new types every partial
 *                                        product is exact, so any order)
 *   top_k_rows                     exact ids, the CPU backend's order
 *   qkv_rope_same_pos              as qkv_rope (the CPU op per row)
 *   whole model, float weights     1e-4; quantised weights 1e-2: a tiny
 *                                        difference in the residual stream
 *                                        can move one activation across an
 *                                        int8 rounding boundary in a later
 *                                        layer, worth ~1/127 of a block term
 *
 * Q5_0, Q4_K and Q6_K weights are random valid blocks
 * (kernels/bench/rand_blocks.h; the tiny model's come from a
 * tests/util/synth_model.c GGUF) rather than quantised floats: every bit of
 * the encodings is exercised and no quantiser for them is needed. Their
 * shapes include Qwen2.5-Coder 1.5B's (dim 1536, ffn 8960, kv 256) and
 * 0.5B's (dim 896, ffn 4864, kv 128; K-quant rows only where cols is a
 * multiple of 256, as in its 896x4864 ffn_down). */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/bench/rand_blocks.h"
#include "kernels/common/fp16.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cuda/backend_cuda.h"
#include "engine/format/gguf.h"
#include "engine/session/device.h"
#include "kernels/cpu/cpu.h"
#include "tests/util/synth_model.h"
#include "tests/util/test_util.h"

static sd_backend *cpu, *gpu;

static void setup(void) {
    char why[256];
    if (!sd_cuda_available(why, sizeof why)) cr_skip_test("%s", why);
    sd_err e = {{0}};
    tu_cpu_as_cuda_reference();
    cpu = sd_backend_open(SD_DEVICE_CPU, 0, &e);
    cr_assert(cpu, "cpu backend: %s", e.msg);
    gpu = sd_backend_open(SD_DEVICE_CUDA, 0, &e);
    cr_assert(gpu, "%s", e.msg);
    /* the kernel tests take the quantised, BF16 and F16 products on
     * tensor cores (SD_CUDA_MMA, off by default): on a GPU they are the
     * check of the mma fragment layouts; the __dp4a and float tiles have
     * mma_rows, mma_off_ffn_qkv
     * and the model_* tests, which open backends at the defaults */
    cr_assert(sd_cuda_set_mma(gpu, 1) == 0);
}

static void teardown(void) {
    if (gpu) gpu->destroy(gpu);
    if (cpu) cpu->destroy(cpu);
    gpu = cpu = NULL;
}

TestSuite(cuda, .init = setup, .fini = teardown);

/* One line for the whole suite when it was skipped for want of a GPU (runs
 * in the runner process after every test process has exited, so touching
 * CUDA here cannot disturb a forked test). Tests left out by --filter count
 * as skipped too; with a GPU there is nothing to say about them. */
ReportHook(POST_ALL)(struct criterion_global_stats *st) {
    char why[256];
    if (!st->tests_skipped || sd_cuda_available(why, sizeof why)) return;
    fprintf(stderr, "[SKIP] test_cuda: %zu of %zu tests skipped: %s\n", st->tests_skipped,
            st->nb_tests, why);
}

/* ---- helpers ------------------------------------------------------------------ */
#define OK(call)                                                 \
    do {                                                         \
        sd_err e_ = {{0}};                                       \
        sd_err *e = &e_;                                         \
        cr_assert((call) == 0, "%s: %s", #call, e_.msg);         \
    } while (0)

static uint64_t rng_state;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *hrand(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = scale * frand();
    return p;
}

/* n floats of device memory holding init, or NaN when init is NULL. */
static float *dbuf(size_t n, const float *init) {
    sd_err e = {{0}};
    float *d = gpu->alloc(gpu, n * sizeof *d, &e);
    cr_assert(d, "alloc: %s", e.msg);
    float *h = malloc((n ? n : 1) * sizeof *h);
    cr_assert(h);
    for (size_t i = 0; i < n; i++) h[i] = init ? init[i] : NAN;
    OK(sd_cuda_from_host(gpu, d, h, n * sizeof *h, e));
    free(h);
    return d;
}

static float *hcopy(const float *src, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static float *fetch(const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    cr_assert(h);
    OK(gpu->to_host(gpu, h, d, n * sizeof *h, e));
    return h;
}

static double rel_err(const float *got, const float *ref, size_t n) { return tu_rel_err(got, ref, n); }

static int is_quant(uint32_t t) {
    return t == SD_Q8_0 || t == SD_Q4_0 || t == SD_Q4_1 || synth_block_type(t);
}

/* 1 when rows of cols elements of t exist (whole blocks). */
static int fits(uint32_t t, int cols) { return cols % (int)sd_wtype_block(t) == 0; }

/* A weight in both backends: the CPU's points at host rows quantised with
 * sd_quantize_row (random blocks for Q5_0/Q4_K/Q6_K), the CUDA one is the
 * same rows uploaded. */
typedef struct wpair {
    sd_weight c, g;
    void *host;
} wpair;

static void wpair_upload(wpair *p, uint32_t type, int64_t rows, int64_t cols) {
    p->c = (sd_weight){type, rows, cols, (size_t)sd_row_bytes(type, (uint64_t)cols), p->host};
    p->g = p->c;
    OK(gpu->upload_weight(gpu, &p->g, e));
}

static void wpair_from(wpair *p, uint32_t type, int64_t rows, int64_t cols, const float *f) {
    size_t rb = (size_t)sd_row_bytes(type, (uint64_t)cols);
    p->host = malloc(rb * (size_t)rows);
    cr_assert(p->host);
    for (int64_t r = 0; r < rows; r++)
        cr_assert(sd_quantize_row(type, f + r * cols, (uint8_t *)p->host + r * rb, cols) == 0);
    wpair_upload(p, type, rows, cols);
}

static void wpair_rand(wpair *p, uint32_t type, int64_t rows, int64_t cols, float scale) {
    if (synth_block_type(type)) {
        const size_t n = (size_t)rows * (size_t)cols;
        uint64_t seed = rng_state;
        frand(); /* the next weight gets other blocks */
        p->host = malloc((size_t)sd_row_bytes(type, n));
        cr_assert(p->host);
        cr_assert(sd_rand_blocks(type, p->host, n / sd_wtype_block(type), scale, &seed) == 0);
        wpair_upload(p, type, rows, cols);
        return;
    }
    float *f = hrand((size_t)rows * (size_t)cols, scale);
    wpair_from(p, type, rows, cols, f);
    free(f);
}

static void wpair_free(wpair *p) {
    gpu->release_weight(gpu, &p->g);
    free(p->host);
}

static const uint32_t all_types[] = {SD_F32,  SD_F16,  SD_BF16, SD_Q8_0, SD_Q4_0,
                                     SD_Q4_1, SD_Q5_0, SD_Q4_K, SD_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static double mm_tol(uint32_t t) { return is_quant(t) ? 1e-3 : 1e-4; }

/* ---- matmul --------------------------------------------------------------------- */
static void check_matmul(uint32_t type, int rows, int cols, int n, int accumulate) {
    wpair w;
    wpair_rand(&w, type, rows, cols, 1.0f);
    float *x = hrand((size_t)n * cols, 1.0f);
    float *init = hrand((size_t)n * rows, 4.0f);
    float *ref = hcopy(init, (size_t)n * rows);
    OK(cpu->matmul(cpu, ref, &w.c, x, n, accumulate, e));
    float *dx = dbuf((size_t)n * cols, x), *dout = dbuf((size_t)n * rows, accumulate ? init : NULL);
    OK(gpu->matmul(gpu, dout, &w.g, dx, n, accumulate, e));
    float *got = fetch(dout, (size_t)n * rows);
    double err = rel_err(got, ref, (size_t)n * rows);
    cr_expect(err <= mm_tol(type), "matmul %s %dx%d n=%d accumulate=%d: error %.3g > %.1g",
              sd_wtype_name(type), rows, cols, n, accumulate, err, mm_tol(type));
    gpu->release(gpu, dx);
    gpu->release(gpu, dout);
    free(x), free(init), free(ref), free(got);
    wpair_free(&w);
}

static void matmul_type(uint32_t type) {
    rng_state = 0x9e3779b97f4a7c15ull ^ type;
    static const int shapes[][2] = {{1, 32}, {7, 96}, {192, 576}, {576, 1536}, {1000, 576},
                                    {64, 4096}, {130, 172}, {3, 256}, {130, 768}};
    /* Qwen2.5-Coder 1.5B (wq, wk/wv, gate/up, down) and 0.5B (wq, wk/wv,
     * gate/up, down), for the types those models hold */
    static const int qwen[][2] = {{1536, 1536}, {256, 1536}, {8960, 1536}, {1536, 8960},
                                  {896, 896},   {128, 896},  {4864, 896},  {896, 4864}};
    static const int ns[] = {1, 3, 9, 64};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        if (!fits(type, shapes[s][1])) continue; /* no such quantised row */
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int acc = 0; acc < 2; acc++) check_matmul(type, shapes[s][0], shapes[s][1], ns[k], acc);
    }
    for (size_t s = 0; synth_block_type(type) && s < sizeof qwen / sizeof qwen[0]; s++) {
        if (!fits(type, qwen[s][1])) continue;
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) check_matmul(type, qwen[s][0], qwen[s][1], ns[k], k % 2);
    }
}

Test(cuda, matmul_f32) { matmul_type(SD_F32); }
Test(cuda, matmul_f16) { matmul_type(SD_F16); }
Test(cuda, matmul_bf16) { matmul_type(SD_BF16); }
Test(cuda, matmul_q8_0) { matmul_type(SD_Q8_0); }
Test(cuda, matmul_q4_0) { matmul_type(SD_Q4_0); }
Test(cuda, matmul_q4_1) { matmul_type(SD_Q4_1); }
Test(cuda, matmul_q5_0) { matmul_type(SD_Q5_0); }
Test(cuda, matmul_q4_k) { matmul_type(SD_Q4_K); }
Test(cuda, matmul_q6_k) { matmul_type(SD_Q6_K); }

/* ---- tensor cores (kernels/cuda/mma.cuh, mv_mma.cuh) ------------------------------ */
/* The primitives on random int8 matrices against a scalar product: exact,
 * the extremes -128 and 127 included. */
Test(cuda, mma_primitive) {
    rng_state = 71;
    for (int k = 16; k <= 32; k += 16)
        for (int rep = 0; rep < 3; rep++) {
            int8_t a[16 * 32], b[8 * 32];
            int32_t c[16 * 8], want[16 * 8], got[16 * 8];
            for (int i = 0; i < 16 * k; i++) a[i] = rep == 0 ? (i % 3 ? -128 : 127) : (int8_t)(frand() * 128);
            for (int i = 0; i < 8 * k; i++) b[i] = rep == 0 ? (i % 5 ? -128 : 127) : (int8_t)(frand() * 128);
            for (int i = 0; i < 16 * 8; i++) c[i] = (int32_t)(frand() * 100000);
            for (int r = 0; r < 16; r++)
                for (int n = 0; n < 8; n++) {
                    int32_t s = c[r * 8 + n];
                    for (int q = 0; q < k; q++) s += (int32_t)a[r * k + q] * b[n * k + q];
                    want[r * 8 + n] = s;
                }
            sd_err e = {{0}};
            int8_t *da = gpu->alloc(gpu, sizeof a, &e), *db = gpu->alloc(gpu, sizeof b, &e);
            int32_t *dc = gpu->alloc(gpu, sizeof c, &e);
            cr_assert(da && db && dc, "alloc: %s", e.msg);
            OK(sd_cuda_from_host(gpu, da, a, sizeof a, e));
            OK(sd_cuda_from_host(gpu, db, b, sizeof b, e));
            OK(sd_cuda_from_host(gpu, dc, c, sizeof c, e));
            OK(sd_cuda_mma_check(gpu, da, db, dc, k, e));
            OK(gpu->to_host(gpu, got, dc, sizeof got, e));
            for (int i = 0; i < 16 * 8; i++)
                cr_expect_eq(got[i], want[i], "mma k%d case %d: row %d column %d: %d, expected %d", k,
                             rep, i / 8, i % 8, got[i], want[i]);
            gpu->release(gpu, da), gpu->release(gpu, db), gpu->release(gpu, dc);
        }
}

/* The bf16 and f16 primitives on 16 x 16 and 16 x 8 matrices against a
 * sum in double: within the f32 rounding of a 16-term sum (17 additions,
 * each off by at most an ulp, 2^-23, of the magnitudes summed: the
 * instruction may truncate where the emulator rounds). Case 0 holds fixed
 * values of alternating sign, case 1 uniform ones in [-1, 1), case 2 those
 * scaled by 2^-6 to 2^6. */
Test(cuda, mma_primitive_h) {
    rng_state = 79;
    for (int bf = 0; bf < 2; bf++)
        for (int rep = 0; rep < 3; rep++) {
            uint16_t a[16 * 16], b[8 * 16];
            float af[16 * 16], bfl[8 * 16], c[16 * 8], got[16 * 8];
            for (int i = 0; i < 16 * 16 + 8 * 16; i++) {
                float v = rep == 0   ? ((i & 1) ? -1.5f : 1.25f)
                          : rep == 1 ? frand()
                                     : frand() * ldexpf(1.f, i % 13 - 6);
                const uint16_t h = bf ? sd_f32_to_bf16(v) : sd_f32_to_f16(v);
                v = bf ? sd_bf16_to_f32(h) : sd_f16_to_f32(h);
                if (i < 16 * 16)
                    a[i] = h, af[i] = v;
                else
                    b[i - 16 * 16] = h, bfl[i - 16 * 16] = v;
            }
            for (int i = 0; i < 16 * 8; i++) c[i] = frand() * 4;
            sd_err e = {{0}};
            uint16_t *da = gpu->alloc(gpu, sizeof a, &e), *db = gpu->alloc(gpu, sizeof b, &e);
            float *dc = gpu->alloc(gpu, sizeof c, &e);
            cr_assert(da && db && dc, "alloc: %s", e.msg);
            OK(sd_cuda_from_host(gpu, da, a, sizeof a, e));
            OK(sd_cuda_from_host(gpu, db, b, sizeof b, e));
            OK(sd_cuda_from_host(gpu, dc, c, sizeof c, e));
            OK(sd_cuda_mma_check_h(gpu, bf, da, db, dc, e));
            OK(gpu->to_host(gpu, got, dc, sizeof got, e));
            for (int r = 0; r < 16; r++)
                for (int n = 0; n < 8; n++) {
                    double want = c[r * 8 + n], mag = fabs(c[r * 8 + n]);
                    for (int k = 0; k < 16; k++) {
                        const double pk = (double)af[r * 16 + k] * bfl[n * 16 + k];
                        want += pk, mag += fabs(pk);
                    }
                    const double err = fabs(got[r * 8 + n] - want), tol = 17 * ldexp(mag, -23);
                    cr_expect(err <= tol, "mma %s case %d: row %d column %d: %.9g, expected %.9g",
                              bf ? "bf16" : "f16", rep, r, n, got[r * 8 + n], want);
                }
            gpu->release(gpu, da), gpu->release(gpu, db), gpu->release(gpu, dc);
        }
}

/* Products of n rows on tensor cores and on the __dp4a tiles against the
 * CPU, and with each setting every row of an n-row call has the bits of a
 * one-row call (plan.h SD_SAME_BITS_ROWS): row counts that fill a tile,
 * leave part of one, and take two; a matrix whose rows end inside a row
 * group of 16, and one split over K. */
static void check_mma_rows(uint32_t type, int rows, int cols) {
    enum { N = 16 };
    static const int ns[] = {2, 5, 8, 9, 16};
    wpair w;
    wpair_rand(&w, type, rows, cols, 1.0f);
    float *x = hrand((size_t)N * cols, 1.0f), *ref = malloc((size_t)N * rows * 4),
          *ones = malloc((size_t)N * rows * 4);
    cr_assert(ref && ones);
    OK(cpu->matmul(cpu, ref, &w.c, x, N, 0, e));
    float *dx = dbuf((size_t)N * cols, x), *dout = dbuf((size_t)N * rows, NULL);
    for (int mma = 0; mma < 2; mma++) {
        cr_assert(sd_cuda_set_mma(gpu, mma) == 0);
        for (int r = 0; r < N; r++) {
            OK(gpu->matmul(gpu, dout, &w.g, dx + (size_t)r * cols, 1, 0, e));
            float *got = fetch(dout, (size_t)rows);
            memcpy(ones + (size_t)r * rows, got, (size_t)rows * 4);
            free(got);
        }
        const double err1 = rel_err(ones, ref, (size_t)N * rows);
        cr_expect(err1 <= mm_tol(type), "matmul %s %dx%d one row (mma %d): error %.3g",
                  sd_wtype_name(type), rows, cols, mma, err1);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            const int n = ns[k];
            OK(gpu->matmul(gpu, dout, &w.g, dx, n, 0, e));
            float *got = fetch(dout, (size_t)n * rows);
            const double err = rel_err(got, ref, (size_t)n * rows);
            cr_expect(err <= mm_tol(type), "matmul %s %dx%d n=%d (mma %d): error %.3g > %.1g",
                      sd_wtype_name(type), rows, cols, n, mma, err, mm_tol(type));
            cr_expect(!memcmp(got, ones, (size_t)n * rows * 4),
                      "matmul %s %dx%d n=%d (mma %d): rows differ from one-row calls",
                      sd_wtype_name(type), rows, cols, n, mma);
            free(got);
        }
    }
    cr_assert(sd_cuda_set_mma(gpu, 1) == 0);
    gpu->release(gpu, dx), gpu->release(gpu, dout);
    free(x), free(ref), free(ones);
    wpair_free(&w);
}

Test(cuda, mma_rows) {
    rng_state = 73;
    static const uint32_t types[] = {SD_BF16, SD_F16,  SD_Q8_0, SD_Q4_0,
                                     SD_Q4_1, SD_Q5_0, SD_Q4_K, SD_Q6_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        check_mma_rows(types[t], 40, 512);
        check_mma_rows(types[t], 24, 2048);
    }
}

/* ---- rmsnorm -------------------------------------------------------------------- */
Test(cuda, rmsnorm) {
    rng_state = 11;
    /* every register tiling of norm.cu (1, 4, 8, 16 elements a thread),
     * the loop past it (4099), and a row of no whole blocks (100) */
    static const int dims[] = {64, 100, 576, 2048, 3072, 4099};
    static const int ns[] = {1, 9, 64};
    for (size_t d = 0; d < 6; d++)
        for (size_t k = 0; k < 3; k++)
            for (int in_place = 0; in_place < 2; in_place++) {
                const int dim = dims[d], n = ns[k];
                float *wf = hrand((size_t)dim, 0.5f);
                for (int i = 0; i < dim; i++) wf[i] += 1.0f;
                wpair w;
                wpair_from(&w, SD_F32, 1, dim, wf);
                float *x = hrand((size_t)n * dim, 3.0f), *ref = malloc((size_t)n * dim * 4);
                cr_assert(ref);
                OK(cpu->rmsnorm(cpu, ref, x, &w.c, n, dim, 1e-5f, e));
                float *dx = dbuf((size_t)n * dim, x), *dout = in_place ? dx : dbuf((size_t)n * dim, NULL);
                OK(gpu->rmsnorm(gpu, dout, dx, &w.g, n, dim, 1e-5f, e));
                float *got = fetch(dout, (size_t)n * dim);
                double err = rel_err(got, ref, (size_t)n * dim);
                cr_expect(err <= 1e-6, "rmsnorm n=%d dim=%d in_place=%d: error %.3g", n, dim,
                          in_place, err);
                if (!in_place) gpu->release(gpu, dout);
                gpu->release(gpu, dx);
                free(wf), free(x), free(ref), free(got);
                wpair_free(&w);
            }
}

/* RMSNorm quantises the rows it writes, and a quantised matmul right after
 * takes those blocks (qact.cu): its result is bit for bit the one of the
 * same matmul over a copy of the rows (quantised by its own launch), and
 * within the usual bound of the CPU's rmsnorm + matmul. */
Test(cuda, rmsnorm_fused_qact) {
    rng_state = 12;
    static const int dims[] = {64, 576};
    static const int ns[] = {1, 9};
    static const uint32_t types[] = {SD_Q8_0, SD_Q4_0};
    for (size_t d = 0; d < 2; d++)
        for (size_t k = 0; k < 2; k++)
            for (size_t t = 0; t < 2; t++) {
                const int dim = dims[d], n = ns[k], rows = 96;
                float *wf = hrand((size_t)dim, 0.5f);
                for (int i = 0; i < dim; i++) wf[i] += 1.0f;
                wpair nw, mw;
                wpair_from(&nw, SD_F32, 1, dim, wf);
                wpair_rand(&mw, types[t], rows, dim, 1.0f);
                float *x = hrand((size_t)n * dim, 3.0f), *xn = malloc((size_t)n * dim * 4),
                      *ref = malloc((size_t)n * rows * 4);
                cr_assert(xn && ref);
                OK(cpu->rmsnorm(cpu, xn, x, &nw.c, n, dim, 1e-5f, e));
                OK(cpu->matmul(cpu, ref, &mw.c, xn, n, 0, e));
                float *dx = dbuf((size_t)n * dim, x), *dn = dbuf((size_t)n * dim, NULL),
                      *dcopy = dbuf((size_t)n * dim, NULL), *fused = dbuf((size_t)n * rows, NULL),
                      *plain = dbuf((size_t)n * rows, NULL);
                OK(gpu->rmsnorm(gpu, dn, dx, &nw.g, n, dim, 1e-5f, e));
                OK(gpu->matmul(gpu, fused, &mw.g, dn, n, 0, e));
                OK(gpu->copy(gpu, dcopy, dn, (size_t)n * dim * 4, e));
                OK(gpu->matmul(gpu, plain, &mw.g, dcopy, n, 0, e));
                float *a = fetch(fused, (size_t)n * rows), *b = fetch(plain, (size_t)n * rows);
                cr_expect(!memcmp(a, b, (size_t)n * rows * 4),
                          "rmsnorm + matmul %s n=%d dim=%d: the fused blocks differ from qact's",
                          sd_wtype_name(types[t]), n, dim);
                const double err = rel_err(a, ref, (size_t)n * rows);
                cr_expect(err <= mm_tol(types[t]), "rmsnorm + matmul %s n=%d dim=%d: error %.3g",
                          sd_wtype_name(types[t]), n, dim, err);
                gpu->release(gpu, dx), gpu->release(gpu, dn), gpu->release(gpu, dcopy);
                gpu->release(gpu, fused), gpu->release(gpu, plain);
                free(wf), free(x), free(xn), free(ref), free(a), free(b);
                wpair_free(&nw), wpair_free(&mw);
            }
}

/* A llama-style attention shape (no biases, rotation of (2j, 2j+1) pairs). */
#define SHAPE(heads, kv, hd, rd, base) \
    {.n_head = heads, .n_kv = kv, .head_dim = hd, .rope_dim = rd, .rope_base = base}
/* A qwen2 shape: NEOX rotation over the whole head, base 1e6 (biases are
 * added by the tests that want them). */
#define QWEN_SHAPE(heads, kv, hd) \
    {.n_head = heads, .n_kv = kv, .head_dim = hd, .rope_dim = hd, .rope_base = 1e6f, .neox = 1}

/* ---- qkv_rope --------------------------------------------------------------------- */
/* Writes K/V rows at positions pos.. of a cache whose other rows hold a
 * sentinel that must survive. with_bias: random Q/K/V biases, the K ones in
 * the hundreds as in Qwen2's first layers. */
static void check_qkv_with(const uint32_t types[3], sd_attn_shape s, int n, int pos,
                           int with_bias) {
    const int dim = s.n_head * s.head_dim, kv = s.n_kv * s.head_dim, len = pos + n;
    float *hb[3] = {NULL, NULL, NULL}, *db[3] = {NULL, NULL, NULL};
    sd_attn_shape gs = s;
    if (with_bias) {
        const int len_b[3] = {dim, kv, kv};
        const float scale[3] = {2.0f, 300.0f, 1.0f};
        for (int j = 0; j < 3; j++) {
            hb[j] = hrand((size_t)len_b[j], scale[j]);
            db[j] = dbuf((size_t)len_b[j], hb[j]);
        }
        s.bq = hb[0], s.bk = hb[1], s.bv = hb[2];
        gs.bq = db[0], gs.bk = db[1], gs.bv = db[2];
    }
    wpair wq, wk, wv;
    wpair_rand(&wq, types[0], dim, dim, 1.0f);
    wpair_rand(&wk, types[1], kv, dim, 1.0f);
    wpair_rand(&wv, types[2], kv, dim, 1.0f);
    float *x = hrand((size_t)n * dim, 1.0f);
    float *q_ref = malloc((size_t)n * dim * 4), *kc_ref = malloc((size_t)len * kv * 4),
          *vc_ref = malloc((size_t)len * kv * 4);
    cr_assert(q_ref && kc_ref && vc_ref);
    for (size_t i = 0; i < (size_t)len * kv; i++) kc_ref[i] = vc_ref[i] = 12345.0f;
    OK(cpu->qkv_rope(cpu, &s, q_ref, kc_ref + (size_t)pos * kv, vc_ref + (size_t)pos * kv, &wq.c,
                     &wk.c, &wv.c, x, n, pos, e));
    float *sentinel = malloc((size_t)len * kv * 4);
    cr_assert(sentinel);
    for (size_t i = 0; i < (size_t)len * kv; i++) sentinel[i] = i < (size_t)pos * kv ? 12345.0f : NAN;
    float *dx = dbuf((size_t)n * dim, x), *dq = dbuf((size_t)n * dim, NULL);
    float *dk = dbuf((size_t)len * kv, sentinel), *dv = dbuf((size_t)len * kv, sentinel);
    OK(gpu->qkv_rope(gpu, &gs, dq, dk + (size_t)pos * kv, dv + (size_t)pos * kv, &wq.g, &wk.g,
                     &wv.g, dx, n, pos, e));
    float *q = fetch(dq, (size_t)n * dim), *k = fetch(dk, (size_t)len * kv), *v = fetch(dv, (size_t)len * kv);
    const double tol = is_quant(types[0]) || is_quant(types[1]) || is_quant(types[2]) ? 1e-3 : 1e-4;
    double eq = rel_err(q, q_ref, (size_t)n * dim), ek = rel_err(k, kc_ref, (size_t)len * kv),
           ev = rel_err(v, vc_ref, (size_t)len * kv);
    cr_expect(eq <= tol && ek <= tol && ev <= tol,
              "qkv_rope %s/%s/%s heads %d/%d dim %d rope %d base %g neox %d bias %d n=%d pos=%d: "
              "errors q %.3g k %.3g v %.3g > %.1g",
              sd_wtype_name(types[0]), sd_wtype_name(types[1]), sd_wtype_name(types[2]), s.n_head,
              s.n_kv, s.head_dim, s.rope_dim, s.rope_base, s.neox, with_bias, n, pos, eq, ek, ev,
              tol);
    for (int j = 0; j < 3; j++) {
        if (db[j]) gpu->release(gpu, db[j]);
        free(hb[j]);
    }
    gpu->release(gpu, dx), gpu->release(gpu, dq), gpu->release(gpu, dk), gpu->release(gpu, dv);
    free(x), free(q_ref), free(kc_ref), free(vc_ref), free(sentinel), free(q), free(k), free(v);
    wpair_free(&wq), wpair_free(&wk), wpair_free(&wv);
}

static void check_qkv(const uint32_t types[3], sd_attn_shape s, int n, int pos) {
    check_qkv_with(types, s, n, pos, 0);
}

/* qwen2: NEOX pairs (j, j + rope_dim/2) and Q/K/V biases added before the
 * rotation, at both Qwen2.5-Coder shapes and with a partial rotary. */
Test(cuda, qkv_rope_neox_bias) {
    rng_state = 31;
    static const sd_attn_shape shapes[] = {
        QWEN_SHAPE(12, 2, 128),
        QWEN_SHAPE(14, 2, 64),
        {.n_head = 4, .n_kv = 4, .head_dim = 64, .rope_dim = 32, .rope_base = 1e4f, .neox = 1},
    };
    static const int ns[] = {1, 5}, poss[] = {0, 300};
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t s = 0; s < 3; s++) {
            if (!fits(all_types[t], shapes[s].n_head * shapes[s].head_dim)) continue;
            for (size_t k = 0; k < 2; k++)
                for (int b = 0; b < 2; b++) {
                    const uint32_t types[3] = {all_types[t], all_types[t], all_types[t]};
                    check_qkv_with(types, shapes[s], ns[k], poss[k], b);
                }
        }
}

Test(cuda, qkv_rope) {
    rng_state = 23;
    static const sd_attn_shape shapes[] = {
        SHAPE(9, 3, 64, 64, 10000.0f),    /* SmolLM2-135M */
        SHAPE(6, 2, 128, 128, 500000.0f), /* Llama-3 style, GQA 3 */
        SHAPE(4, 4, 64, 32, 10000.0f),    /* partial rotary */
        SHAPE(8, 4, 8, 8, 10000.0f),      /* stories260K's tiny heads */
        QWEN_SHAPE(12, 2, 128),           /* Qwen2.5-Coder 1.5B */
        QWEN_SHAPE(14, 2, 64),            /* Qwen2.5-Coder 0.5B */
    };
    static const int ns[] = {1, 3, 9}, poss[] = {0, 17, 1000};
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (!fits(all_types[t], shapes[s].n_head * shapes[s].head_dim)) continue;
            for (size_t k = 0; k < 3; k++)
                for (size_t p = 0; p < 3; p++) {
                    const uint32_t types[3] = {all_types[t], all_types[t], all_types[t]};
                    check_qkv(types, shapes[s], ns[k], poss[p]);
                }
        }
}

Test(cuda, qkv_rope_mixed_types) {
    rng_state = 29;
    const uint32_t types[3] = {SD_Q8_0, SD_Q4_1, SD_F16};
    const sd_attn_shape s = SHAPE(9, 3, 64, 64, 10000.0f);
    check_qkv(types, s, 9, 17);
    check_qkv(types, s, 1, 0);
    /* the Qwen2.5-Coder Q4_K_M mixes: 1.5B Q4_K q/k with a Q6_K v, 0.5B
     * Q5_0 q/k with a Q8_0 v */
    const uint32_t q15[3] = {SD_Q4_K, SD_Q4_K, SD_Q6_K}, q05[3] = {SD_Q5_0, SD_Q5_0, SD_Q8_0};
    const sd_attn_shape s15 = QWEN_SHAPE(12, 2, 128), s05 = QWEN_SHAPE(14, 2, 64);
    check_qkv(q15, s15, 9, 17);
    check_qkv(q15, s15, 1, 1000);
    check_qkv(q05, s05, 9, 17);
    check_qkv(q05, s05, 1, 1000);
}

/* ---- attention -------------------------------------------------------------------- */
static void check_attention(sd_attn_shape s, int n, int pos) {
    const int qd = s.n_head * s.head_dim, kv = s.n_kv * s.head_dim, len = pos + n;
    float *q = hrand((size_t)n * qd, 1.0f), *kc = hrand((size_t)len * kv, 1.0f),
          *vc = hrand((size_t)len * kv, 1.0f), *ref = malloc((size_t)n * qd * 4);
    cr_assert(ref);
    OK(cpu->attention(cpu, &s, ref, q, kc, vc, n, pos, e));
    float *dq = dbuf((size_t)n * qd, q), *dk = dbuf((size_t)len * kv, kc),
          *dv = dbuf((size_t)len * kv, vc), *dout = dbuf((size_t)n * qd, NULL);
    OK(gpu->attention(gpu, &s, dout, dq, dk, dv, n, pos, e));
    float *got = fetch(dout, (size_t)n * qd);
    double err = rel_err(got, ref, (size_t)n * qd);
    cr_expect(err <= 1e-4, "attention heads %d/%d dim %d n=%d pos=%d: error %.3g", s.n_head,
              s.n_kv, s.head_dim, n, pos, err);
    gpu->release(gpu, dq), gpu->release(gpu, dk), gpu->release(gpu, dv), gpu->release(gpu, dout);
    free(q), free(kc), free(vc), free(ref), free(got);
}

static const sd_attn_shape attn_shapes[] = {
    SHAPE(4, 4, 64, 64, 1e4f),   /* GQA ratio 1 */
    SHAPE(6, 2, 128, 128, 1e4f), /* GQA ratio 3, Llama-3.2-3B's head */
    SHAPE(9, 3, 64, 64, 1e4f),   /* SmolLM2 */
    SHAPE(32, 8, 64, 64, 1e4f),  /* Llama-3.2-1B */
    SHAPE(8, 4, 8, 8, 1e4f),     /* stories260K */
};

Test(cuda, attention) {
    rng_state = 31;
    static const int poss[] = {0, 17, 1000};
    for (size_t s = 0; s < sizeof attn_shapes / sizeof attn_shapes[0]; s++)
        for (int n = 1; n <= 9; n++)
            for (size_t p = 0; p < 3; p++) check_attention(attn_shapes[s], n, poss[p]);
}

Test(cuda, attention_long_and_prefill) {
    rng_state = 37;
    check_attention(attn_shapes[1], 1, 4000); /* many splits */
    check_attention(attn_shapes[1], 9, 4000);
    check_attention(attn_shapes[3], 64, 0);   /* prefill: many query tiles */
    check_attention(attn_shapes[3], 128, 300);
}

/* The key split covers the length bucket (plan.h), so some of its splits
 * lie past the context: only the live ones (keys the query tile sees) run
 * and merge. Contexts where 2 of 4 splits (bucket 256) and 10 of 16
 * (bucket 1024) are live, and rows whose tiles see different counts. */
Test(cuda, attention_live_splits) {
    rng_state = 47;
    static const int poss[] = {64, 100, 191, 600};
    for (size_t s = 0; s < 4; s++)
        for (size_t p = 0; p < 4; p++) {
            check_attention(attn_shapes[s], 1, poss[p]);
            check_attention(attn_shapes[s], 9, poss[p] - 5);
        }
}

/* The rows of one call keep the bits of one-row calls at their positions
 * (plan.h, SD_SAME_BITS_ROWS), so a speculative round judges its drafts by
 * the logits the target's own decode steps give. Two cases whose plans
 * differed while the split followed the call's own tiles: attention over
 * the Qwen2.5 1.5B's heads for 5 rows at position 4100 (keys split in 128s,
 * decode steps in 64s), and a 9-row BF16 product of 1200x2048, Llama-1B's
 * column count (K split 2 ways, one row 4 ways). */
Test(cuda, rows_keep_the_bits_of_one_row_calls) {
    rng_state = 59;
    const sd_attn_shape s = SHAPE(12, 2, 128, 128, 1e6f);
    enum { N = 5, POS = 4100 };
    const int qd = s.n_head * s.head_dim, kv = s.n_kv * s.head_dim;
    float *q = hrand((size_t)N * qd, 1.0f), *kc = hrand((size_t)(POS + N) * kv, 1.0f),
          *vc = hrand((size_t)(POS + N) * kv, 1.0f);
    float *dq = dbuf((size_t)N * qd, q), *dk = dbuf((size_t)(POS + N) * kv, kc),
          *dv = dbuf((size_t)(POS + N) * kv, vc), *dn = dbuf((size_t)N * qd, NULL), *d1 = dbuf((size_t)qd, NULL);
    OK(gpu->attention(gpu, &s, dn, dq, dk, dv, N, POS, e));
    float *all = fetch(dn, (size_t)N * qd);
    for (int r = 0; r < N; r++) {
        OK(gpu->attention(gpu, &s, d1, dq + (size_t)r * qd, dk, dv, 1, POS + r, e));
        float *one = fetch(d1, (size_t)qd);
        cr_expect(!memcmp(one, all + (size_t)r * qd, (size_t)qd * sizeof *one),
                  "attention row %d of %d at position %d differs from a one-row call", r, N, POS);
        free(one);
    }
    gpu->release(gpu, dq), gpu->release(gpu, dk), gpu->release(gpu, dv), gpu->release(gpu, dn);
    gpu->release(gpu, d1);
    free(q), free(kc), free(vc), free(all);

    enum { ROWS = 1200, COLS = 2048, M = 9 };
    wpair w;
    wpair_rand(&w, SD_BF16, ROWS, COLS, 1.0f);
    float *x = hrand((size_t)M * COLS, 1.0f);
    float *dx = dbuf((size_t)M * COLS, x), *dm = dbuf((size_t)M * ROWS, NULL), *dr = dbuf(ROWS, NULL);
    OK(gpu->matmul(gpu, dm, &w.g, dx, M, 0, e));
    float *rows = fetch(dm, (size_t)M * ROWS);
    for (int r = 0; r < M; r++) {
        OK(gpu->matmul(gpu, dr, &w.g, dx + (size_t)r * COLS, 1, 0, e));
        float *one = fetch(dr, ROWS);
        cr_expect(!memcmp(one, rows + (size_t)r * ROWS, ROWS * sizeof *one),
                  "matmul BF16 %dx%d: row %d of %d differs from a one-row call", ROWS, COLS, r, M);
        free(one);
    }
    gpu->release(gpu, dx), gpu->release(gpu, dm), gpu->release(gpu, dr);
    free(x), free(rows);
    wpair_free(&w);
}

/* Attention then a quantised output projection: the int8 blocks the
 * attention kernel leaves (head dims that are multiples of 32) must be the
 * bits qact makes of the same rows: the projection right after attention
 * takes the attention's blocks, a second one (another op in between)
 * quantises the rows itself, and the two results are compared bit for bit,
 * then against the CPU backend. */
static void check_attention_qact(sd_attn_shape s, int n, int pos, uint32_t type) {
    const int qd = s.n_head * s.head_dim, kv = s.n_kv * s.head_dim, len = pos + n, rows = 64;
    float *q = hrand((size_t)n * qd, 1.0f), *kc = hrand((size_t)len * kv, 1.0f),
          *vc = hrand((size_t)len * kv, 1.0f), *att = malloc((size_t)n * qd * 4),
          *ref = malloc((size_t)n * rows * 4);
    cr_assert(att && ref);
    wpair wo;
    wpair_rand(&wo, type, rows, qd, 1.0f);
    OK(cpu->attention(cpu, &s, att, q, kc, vc, n, pos, e));
    OK(cpu->matmul(cpu, ref, &wo.c, att, n, 0, e));
    float *dq = dbuf((size_t)n * qd, q), *dk = dbuf((size_t)len * kv, kc),
          *dv = dbuf((size_t)len * kv, vc), *dout = dbuf((size_t)n * qd, NULL),
          *fused = dbuf((size_t)n * rows, NULL), *plain = dbuf((size_t)n * rows, NULL);
    OK(gpu->attention(gpu, &s, dout, dq, dk, dv, n, pos, e));
    OK(gpu->matmul(gpu, fused, &wo.g, dout, n, 0, e));
    OK(gpu->matmul(gpu, plain, &wo.g, dout, n, 0, e));
    float *a = fetch(fused, (size_t)n * rows), *b = fetch(plain, (size_t)n * rows);
    cr_expect(!memcmp(a, b, (size_t)n * rows * 4),
              "attention %d/%d dim %d n=%d pos=%d + matmul %s: the attention's int8 blocks "
              "differ from qact's",
              s.n_head, s.n_kv, s.head_dim, n, pos, sd_wtype_name(type));
    const double err = rel_err(a, ref, (size_t)n * rows);
    cr_expect(err <= mm_tol(type), "attention %d/%d dim %d n=%d pos=%d + matmul %s: error %.3g",
              s.n_head, s.n_kv, s.head_dim, n, pos, sd_wtype_name(type), err);
    gpu->release(gpu, dq), gpu->release(gpu, dk), gpu->release(gpu, dv), gpu->release(gpu, dout);
    gpu->release(gpu, fused), gpu->release(gpu, plain);
    free(q), free(kc), free(vc), free(att), free(ref), free(a), free(b);
    wpair_free(&wo);
}

Test(cuda, attention_fused_qact) {
    rng_state = 43;
    check_attention_qact(attn_shapes[2], 1, 17, SD_Q4_1);   /* one split */
    check_attention_qact(attn_shapes[2], 5, 1000, SD_Q8_0); /* splits, merged by the last */
    check_attention_qact(attn_shapes[1], 9, 300, SD_Q4_K);  /* head dim 128 */
    check_attention_qact(attn_shapes[4], 3, 40, SD_Q8_0);   /* head dim 8: qact's own blocks */
}

/* The merge as a launch of its own (attn_combine), the path of calls with
 * more (kv head, tile) pairs than the split counters cover. */
Test(cuda, attention_merge_launch) {
    rng_state = 41;
    sd_err e = {{0}};
    sd_backend_opts o;
    cr_assert(sd_backend_opts_from_env(&o, &e) == 0, "%s", e.msg);
    o.cuda_attn_merge_launch = 1;
    gpu->destroy(gpu);
    gpu = sd_backend_cuda(0, &o, &e);
    cr_assert(gpu, "%s", e.msg);
    check_attention(attn_shapes[2], 1, 1000);
    check_attention(attn_shapes[1], 9, 4000);
    check_attention(attn_shapes[3], 5, 300);
    check_attention(attn_shapes[4], 3, 200);
    check_attention(attn_shapes[2], 1, 100); /* 2 of 4 splits live */
    check_attention(attn_shapes[2], 1, 30);  /* one live split: no merge to launch */
    check_attention_qact(attn_shapes[2], 5, 1000, SD_Q4_0);
}

/* A norm folded into the product after it (kernels/cuda/cuda_int.h,
 * "pending norm") gives the bits of the norm launched on its own, for the
 * product and for the norm's output, through matmul, ffn_swiglu and
 * qkv_rope (qwen2's biased shape); float and quantised weights; one row, a
 * tile of 5 and two tiles (9 rows); and (norm_folded_loop) with one block
 * a multiprocessor, so that blocks take several of the plan's blocks. Each
 * folding call counts one fold; a norm whose output is also its input (in
 * place) is launched on its own and still gives the same bits. */
enum { FOLD_MM, FOLD_FFN, FOLD_QKV };

/* rmsnorm(x) then op with folding per_sm (0: off): the norm's output and the
 * op's, end to end, into *xn and *y (host); bh: qkv_rope's biases */
static void fold_run(int per_sm, int op, const wpair *nw, const wpair *w, const float *x,
                     const float *bh, int n, int dim, int rows, int in_place, float **xn,
                     float **y, size_t *ylen) {
    cr_assert(sd_cuda_set_fuse_norm(gpu, per_sm) == 0);
    size_t len[3] = {0, 0, 0};
    if (op == FOLD_QKV) len[0] = (size_t)n * dim, len[1] = len[2] = (size_t)n * 128;
    else len[0] = (size_t)n * rows;
    if (op == FOLD_FFN) len[1] = len[0]; /* tmp: scratch, not compared */
    float *out[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++)
        if (len[k]) out[k] = dbuf(len[k], NULL);
    float *dx = dbuf((size_t)n * dim, x), *dn = in_place ? dx : dbuf((size_t)n * dim, NULL);
    float *bias = op == FOLD_QKV ? dbuf((size_t)dim + 256, bh) : NULL;
    const long f0 = sd_cuda_norms_folded(gpu);
    /* nothing between the two ops: an op in between launches the norm */
    OK(gpu->rmsnorm(gpu, dn, dx, &nw->g, n, dim, 1e-5f, e));
    if (op == FOLD_MM) {
        OK(gpu->matmul(gpu, out[0], &w[0].g, dn, n, 0, e));
    } else if (op == FOLD_FFN) {
        OK(gpu->ffn_swiglu(gpu, out[0], out[1], &w[0].g, &w[1].g, dn, n, e));
        len[1] = 0;
    } else {
        sd_attn_shape s = QWEN_SHAPE(dim / 64, 2, 64);
        s.bq = bias, s.bk = bias + dim, s.bv = bias + dim + 128;
        OK(gpu->qkv_rope(gpu, &s, out[0], out[1], out[2], &w[0].g, &w[1].g, &w[2].g, dn, n, 7, e));
    }
    cr_expect(sd_cuda_norms_folded(gpu) == f0 + (per_sm > 0 && !in_place),
              "folds counted: %ld, expected %ld", sd_cuda_norms_folded(gpu) - f0,
              (long)(per_sm > 0 && !in_place));
    *ylen = len[0] + len[1] + len[2];
    *y = malloc(*ylen * 4);
    cr_assert(*y);
    for (int k = 0, at = 0; k < 3; at += (int)len[k], k++) {
        if (!len[k]) continue;
        float *h = fetch(out[k], len[k]);
        memcpy(*y + at, h, len[k] * 4);
        free(h);
    }
    *xn = fetch(dn, (size_t)n * dim);
    for (int k = 0; k < 3; k++)
        if (out[k]) gpu->release(gpu, out[k]);
    if (!in_place) gpu->release(gpu, dn);
    if (bias) gpu->release(gpu, bias);
    gpu->release(gpu, dx);
}

static void check_fold(int op, uint32_t type, int dim, int rows, int n, int per_sm, int in_place) {
    float *g = hrand((size_t)dim, 0.5f);
    for (int i = 0; i < dim; i++) g[i] += 1.0f;
    wpair nw, w[3];
    wpair_from(&nw, SD_F32, 1, dim, g);
    const int nw_ = op == FOLD_MM ? 1 : op == FOLD_FFN ? 2 : 3;
    for (int k = 0; k < nw_; k++)
        wpair_rand(&w[k], type, op == FOLD_QKV ? (k ? 128 : dim) : rows, dim, 1.0f);
    float *x = hrand((size_t)n * dim, 3.0f), *bh = hrand((size_t)dim + 256, 0.2f), *xa, *xb, *ya,
          *yb;
    size_t la, lb;
    fold_run(per_sm, op, &nw, w, x, bh, n, dim, rows, in_place, &xa, &ya, &la);
    fold_run(0, op, &nw, w, x, bh, n, dim, rows, in_place, &xb, &yb, &lb);
    static const char *ops[] = {"matmul", "ffn_swiglu", "qkv_rope"};
    cr_expect(!memcmp(xa, xb, (size_t)n * dim * 4), "%s %s dim %d n=%d per_sm %d: the norm's output differs",
              ops[op], sd_wtype_name(type), dim, n, per_sm);
    cr_expect(la == lb && !memcmp(ya, yb, la * 4), "%s %s dim %d rows %d n=%d per_sm %d: folded differs from launched",
              ops[op], sd_wtype_name(type), dim, rows, n, per_sm);
    free(g), free(x), free(bh), free(xa), free(xb), free(ya), free(yb);
    wpair_free(&nw);
    for (int k = 0; k < nw_; k++) wpair_free(&w[k]);
}

Test(cuda, norm_folded) {
    rng_state = 71;
    static const uint32_t types[] = {SD_F32, SD_BF16, SD_Q8_0, SD_Q4_1, SD_Q4_K, SD_Q6_K};
    static const int ns[] = {1, 5, 9};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t k = 0; k < 3; k++) {
            check_fold(FOLD_MM, types[t], 256, 96, ns[k], 4, 0);
            check_fold(FOLD_FFN, types[t], 256, 160, ns[k], 4, 0);
            check_fold(FOLD_QKV, types[t], 256, 0, ns[k], 4, 0);
        }
}

/* More plan blocks than blocks (1024 row pairs on one block a
 * multiprocessor), one tile, a tile of 5 and two tiles; and an in-place
 * norm, which is not folded. Short enough for compute-sanitizer's
 * memcheck and racecheck (scripts/gpu-check.sh). */
Test(cuda, norm_folded_loop) {
    rng_state = 73;
    check_fold(FOLD_MM, SD_Q4_K, 512, 2048, 1, 1, 0);
    check_fold(FOLD_FFN, SD_Q8_0, 256, 4096, 5, 1, 0);
    check_fold(FOLD_QKV, SD_BF16, 512, 0, 9, 1, 0);
    check_fold(FOLD_MM, SD_Q4_0, 256, 96, 5, 4, 1);
}

/* The fold setting takes 0 to SD_CUDA_FUSE_NORM_MAX: another value stops the
 * backend, and SD_CUDA_FUSE_NORM's reader names the variable and value. */
Test(cuda, fuse_norm_env) {
    sd_err e = {{0}};
    sd_backend_opts o = sd_backend_opts_default();
    o.cuda_fuse_norm = SD_CUDA_FUSE_NORM_MAX + 1;
    sd_backend *b = sd_backend_cuda(0, &o, &e);
    cr_expect(!b && strstr(e.msg, "fuse_norm 33"), "got %s", b ? "a backend" : e.msg);
    if (b) b->destroy(b);
    cr_assert(setenv("SD_CUDA_FUSE_NORM", "4x", 1) == 0);
    cr_expect(sd_backend_opts_from_env(&o, &e) == -1 && strstr(e.msg, "SD_CUDA_FUSE_NORM=4x"),
              "got %s", e.msg);
    cr_assert(setenv("SD_CUDA_FUSE_NORM", "0", 1) == 0);
    cr_assert(sd_backend_opts_from_env(&o, &e) == 0 && o.cuda_fuse_norm == 0, "%s", e.msg);
    cr_assert(unsetenv("SD_CUDA_FUSE_NORM") == 0);
    b = sd_backend_cuda(0, &o, &e);
    cr_assert(b, "%s", e.msg);
    cr_expect(sd_cuda_set_fuse_norm(b, SD_CUDA_FUSE_NORM_MAX + 1) == -1 && sd_cuda_set_fuse_norm(b, 2) == 0);
    b->destroy(b);
}

/* ---- ffn ------------------------------------------------------------------------------ */
static void check_ffn(uint32_t t1, uint32_t t3, int ffn, int dim, int n) {
    wpair w1, w3;
    wpair_rand(&w1, t1, ffn, dim, 1.0f);
    wpair_rand(&w3, t3, ffn, dim, 1.0f);
    float *x = hrand((size_t)n * dim, 0.3f);
    float *ref = malloc((size_t)n * ffn * 4), *tmp = malloc((size_t)n * ffn * 4);
    cr_assert(ref && tmp);
    OK(cpu->ffn_swiglu(cpu, ref, tmp, &w1.c, &w3.c, x, n, e));
    float *dx = dbuf((size_t)n * dim, x), *dh = dbuf((size_t)n * ffn, NULL),
          *dt = dbuf((size_t)n * ffn, NULL);
    OK(gpu->ffn_swiglu(gpu, dh, dt, &w1.g, &w3.g, dx, n, e));
    float *got = fetch(dh, (size_t)n * ffn);
    const double tol = 2 * (is_quant(t1) || is_quant(t3) ? 1e-3 : 1e-4);
    double err = rel_err(got, ref, (size_t)n * ffn);
    cr_expect(err <= tol, "ffn_swiglu %s/%s %dx%d n=%d: error %.3g > %.1g", sd_wtype_name(t1),
              sd_wtype_name(t3), ffn, dim, n, err, tol);
    gpu->release(gpu, dx), gpu->release(gpu, dh), gpu->release(gpu, dt);
    free(x), free(ref), free(tmp), free(got);
    wpair_free(&w1), wpair_free(&w3);
}

Test(cuda, ffn_swiglu) {
    rng_state = 41;
    static const int ns[] = {1, 3, 9, 64};
    for (size_t t = 0; t < N_TYPES; t++) {
        const uint32_t ty = all_types[t];
        for (size_t k = 0; k < 4; k++) {
            if (fits(ty, 576)) check_ffn(ty, ty, 1536, 576, ns[k]);
            if (fits(ty, 64)) check_ffn(ty, ty, 172, 64, ns[k]);
            if (fits(ty, 256)) check_ffn(ty, ty, 172, 256, ns[k]);
            if (synth_block_type(ty)) { /* Qwen2.5-Coder 1.5B and 0.5B */
                check_ffn(ty, ty, 8960, 1536, ns[k]);
                if (fits(ty, 896)) check_ffn(ty, ty, 4864, 896, ns[k]);
            }
        }
    }
}

/* With SD_CUDA_MMA off the quantised SwiGLU and Q/K/V launches run on the
 * __dp4a tiles (the other tests take the tensor cores, setup): the
 * same comparisons with the CPU for a tile of one row, of several and two
 * tiles. */
Test(cuda, mma_off_ffn_qkv) {
    rng_state = 79;
    static const uint32_t types[] = {SD_Q8_0, SD_Q4_1, SD_Q4_K, SD_Q6_K};
    static const int ns[] = {1, 5, 9};
    cr_assert(sd_cuda_set_mma(gpu, 0) == 0);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            const uint32_t three[3] = {types[t], types[t], types[t]};
            check_ffn(types[t], types[t], 256, 256, ns[k]);
            const sd_attn_shape sh = SHAPE(4, 2, 64, 64, 10000.0f);
            check_qkv(three, sh, ns[k], 17);
        }
    cr_assert(sd_cuda_set_mma(gpu, 1) == 0);
}

Test(cuda, ffn_swiglu_mixed_types) {
    rng_state = 43;
    check_ffn(SD_Q8_0, SD_Q4_0, 1536, 576, 1);
    check_ffn(SD_BF16, SD_Q4_1, 1536, 576, 9);
    check_ffn(SD_Q4_K, SD_Q6_K, 8960, 1536, 1);
    check_ffn(SD_Q5_0, SD_Q8_0, 4864, 896, 9);
}

/* SwiGLU then a quantised down projection: the int8 blocks of h that the
 * ffn kernel's last block of each group of 32 units leaves must be the bits
 * qact makes of h. As for attention_fused_qact, the projection right after
 * takes them and a second one quantises h itself; bit for bit, then
 * against the CPU backend. Shapes reach 1, 2 and 4 warps a unit (units per
 * block 4, 2, 1: 8, 16 or 32 blocks count into a group) and 1 or 2
 * activation tiles. */
static void check_ffn_qact(uint32_t t, uint32_t td, int ffn, int dim, int n) {
    wpair w1, w3, wd;
    wpair_rand(&w1, t, ffn, dim, 1.0f);
    wpair_rand(&w3, t, ffn, dim, 1.0f);
    wpair_rand(&wd, td, 64, ffn, 1.0f);
    float *x = hrand((size_t)n * dim, 0.3f), *h = malloc((size_t)n * ffn * 4),
          *tmp = malloc((size_t)n * ffn * 4), *ref = malloc((size_t)n * 64 * 4);
    cr_assert(h && tmp && ref);
    OK(cpu->ffn_swiglu(cpu, h, tmp, &w1.c, &w3.c, x, n, e));
    OK(cpu->matmul(cpu, ref, &wd.c, h, n, 0, e));
    float *dx = dbuf((size_t)n * dim, x), *dh = dbuf((size_t)n * ffn, NULL),
          *dt = dbuf((size_t)n * ffn, NULL), *fused = dbuf((size_t)n * 64, NULL),
          *plain = dbuf((size_t)n * 64, NULL);
    OK(gpu->ffn_swiglu(gpu, dh, dt, &w1.g, &w3.g, dx, n, e));
    OK(gpu->matmul(gpu, fused, &wd.g, dh, n, 0, e));
    OK(gpu->matmul(gpu, plain, &wd.g, dh, n, 0, e));
    float *a = fetch(fused, (size_t)n * 64), *b = fetch(plain, (size_t)n * 64);
    cr_expect(!memcmp(a, b, (size_t)n * 64 * 4),
              "ffn_swiglu %s %dx%d n=%d + matmul %s: the ffn's int8 blocks differ from qact's",
              sd_wtype_name(t), ffn, dim, n, sd_wtype_name(td));
    const double err = rel_err(a, ref, (size_t)n * 64);
    cr_expect(err <= 2 * mm_tol(td), "ffn_swiglu %s %dx%d n=%d + matmul %s: error %.3g",
              sd_wtype_name(t), ffn, dim, n, sd_wtype_name(td), err);
    gpu->release(gpu, dx), gpu->release(gpu, dh), gpu->release(gpu, dt);
    gpu->release(gpu, fused), gpu->release(gpu, plain);
    free(x), free(h), free(tmp), free(ref), free(a), free(b);
    wpair_free(&w1), wpair_free(&w3), wpair_free(&wd);
}

Test(cuda, ffn_fused_qact) {
    rng_state = 53;
    check_ffn_qact(SD_Q4_1, SD_Q8_0, 1536, 576, 1); /* 4 units a block */
    check_ffn_qact(SD_Q4_K, SD_Q4_0, 96, 256, 5);
    check_ffn_qact(SD_Q8_0, SD_Q4_1, 64, 2048, 9); /* 2 warps a unit, 2 tiles */
    check_ffn_qact(SD_Q8_0, SD_Q8_0, 64, 4096, 1); /* 4 warps a unit */
}

/* ---- embed ------------------------------------------------------------------------------ */
Test(cuda, embed) {
    rng_state = 47;
    const int vocab = 1000, n = 9;
    const int32_t ids[9] = {0, 999, 17, 17, 512, 3, 998, 1, 640};
    static const int dims[] = {64, 576, 896, 1536};
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int dim = dims[di];
            if (!fits(all_types[t], dim)) continue;
            wpair w;
            wpair_rand(&w, all_types[t], vocab, dim, 2.0f);
            float *ref = malloc((size_t)n * dim * 4);
            cr_assert(ref);
            OK(cpu->embed(cpu, ref, &w.c, ids, n, e));
            float *dx = dbuf((size_t)n * dim, NULL);
            OK(gpu->embed(gpu, dx, &w.g, ids, n, e));
            float *got = fetch(dx, (size_t)n * dim);
            cr_expect(memcmp(got, ref, (size_t)n * dim * 4) == 0, "embed %s dim %d differs",
                      sd_wtype_name(all_types[t]), dim);
            const int32_t bad = vocab;
            sd_err e = {{0}};
            cr_expect(gpu->embed(gpu, dx, &w.g, &bad, 1, &e) != 0 && strstr(e.msg, "out of range"),
                      "embed of id %d: '%s'", bad, e.msg);
            gpu->release(gpu, dx);
            free(ref), free(got);
            wpair_free(&w);
        }
}

/* ---- top_k_rows ----------------------------------------------------------------------------- */
/* Both backends on the same rows: the ids must match exactly; with_p asks
 * both for the ids' probabilities too, which must agree to 2e-5 (float sums
 * of up to 128K terms in different orders). */
static void check_top_k_p(const float *x, int n_rows, int cols, int k, int with_p, const char *what) {
    float *d = dbuf((size_t)n_rows * cols, x);
    const size_t n = (size_t)n_rows * k;
    int32_t *got = malloc(n * sizeof *got), *ref = malloc(n * sizeof *ref);
    float *pg = malloc(n * sizeof *pg), *pr = malloc(n * sizeof *pr);
    cr_assert(got && ref && pg && pr);
    OK(cpu->top_k_rows(cpu, x, n_rows, cols, k, ref, with_p ? pr : NULL, e));
    OK(gpu->top_k_rows(gpu, d, n_rows, cols, k, got, with_p ? pg : NULL, e));
    for (size_t i = 0; i < n; i++)
        if (got[i] != ref[i]) {
            cr_expect(0, "top_k_rows %s (%d rows of %d, k %d): row %zu rank %zu is %d, cpu says %d",
                      what, n_rows, cols, k, i / k, i % k, got[i], ref[i]);
            break;
        } else if (with_p && !(fabsf(pg[i] - pr[i]) <= 2e-5f * pr[i])) {
            cr_expect(0, "top_k_rows %s (%d rows of %d, k %d): row %zu rank %zu probability %.9g, cpu says %.9g",
                      what, n_rows, cols, k, i / k, i % k, pg[i], pr[i]);
            break;
        }
    gpu->release(gpu, d);
    free(got), free(ref), free(pg), free(pr);
}
static void check_top_k(const float *x, int n_rows, int cols, int k, const char *what) {
    check_top_k_p(x, n_rows, cols, k, 0, what);
}

Test(cuda, top_k_rows) {
    rng_state = 53;
    const int n = 128256, rows = 5, cols = 49152;
    float *x = hrand((size_t)n, 10.0f);
    check_top_k(x, 1, n, 1, "random, argmax");
    check_top_k_p(x, 1, n, 1, 1, "random, argmax and its probability");
    check_top_k(x, 1, n, 64, "random, k 64");
    check_top_k(x, 1, 1, 1, "one element");
    check_top_k(x, 1, 1000, 7, "short row");
    check_top_k_p(x, 1, 1000, 7, 1, "short row, probabilities");
    x[n - 1] = 100.0f;
    check_top_k(x, 1, n, 1, "last");
    /* the multi-block argmax (top_k.cu: 128256 columns are 62 slices of
     * 2069): equal maxima in different slices, the lowest index wins; a
     * maximum first in its slice; 4097 columns are 2 slices of 2049, the
     * maximum last in the second */
    x[n - 2] = 150.0f;
    x[60000] = 150.0f;
    check_top_k(x, 1, n, 1, "tie across slices (lowest index first)");
    check_top_k_p(x, 1, n, 1, 1, "tie across slices, probability");
    x[10 * 2069] = 200.0f;
    check_top_k(x, 1, n, 1, "first in its slice");
    x[2 * 2048] = 300.0f;
    check_top_k(x, 1, 2 * 2048 + 1, 1, "two slices, last element");
    x[77] = 100.0f;
    x[3] = 100.0f;
    check_top_k(x, 1, n, 4, "tie (lowest index first)");
    for (int i = 0; i < 200; i++) x[1000 + i] = (float)(i % 3); /* many equal values */
    check_top_k(x + 1000, 1, 200, 64, "ties within the top 64");
    for (int i = 0; i < n; i++) x[i] = -INFINITY;
    check_top_k(x, 1, n, 8, "all -inf");
    check_top_k_p(x, 1, n, 1, 1, "all -inf, argmax probability");
    check_top_k_p(x, 1, 3000, 2, 1, "all -inf, probabilities");
    x[500] = 1.0f;
    check_top_k(x, 1, n, 3, "one value among -inf");
    check_top_k_p(x, 1, n, 1, 1, "one value among -inf, probability");
    free(x);
    float *y = hrand((size_t)rows * cols, 5.0f);
    check_top_k(y, rows, cols, 1, "rows, argmax");
    check_top_k(y, rows, cols, 10, "rows, k 10");
    check_top_k_p(y, rows, cols, 1, 1, "rows, argmax probabilities");
    check_top_k_p(y, 2, cols, 3, 1, "rows, top 3 probabilities");
    float *z = hrand((size_t)SD_MAX_ROWS * 300, 1.0f);
    check_top_k(z, SD_MAX_ROWS, 300, SD_TOP_K_MAX, "the most rows and the largest k");
    free(y), free(z);
}

/* ---- qkv_rope_same_pos -------------------------------------------------------------------------
 * n sequences at position pos, each with its own cache: the CUDA op against
 * the CPU one, K/V rows read back from each cache (sentinels elsewhere). */
static void check_qkv_same_pos(uint32_t type, sd_attn_shape s, int n, int pos) {
    const int dim = s.n_head * s.head_dim, kv = s.n_kv * s.head_dim, len = pos + 1;
    wpair wq, wk, wv;
    wpair_rand(&wq, type, dim, dim, 1.0f);
    wpair_rand(&wk, type, kv, dim, 1.0f);
    wpair_rand(&wv, type, kv, dim, 1.0f);
    float *x = hrand((size_t)n * dim, 1.0f), *q_ref = malloc((size_t)n * dim * 4);
    float *kv_ref = malloc(2 * (size_t)n * len * kv * 4), *kv_init = malloc((size_t)len * kv * 4);
    float **hk = malloc((size_t)n * sizeof *hk), **hv = malloc((size_t)n * sizeof *hv);
    void **dk = malloc((size_t)n * sizeof *dk), **dv = malloc((size_t)n * sizeof *dv);
    void **ck = malloc((size_t)n * sizeof *ck), **cv = malloc((size_t)n * sizeof *cv);
    cr_assert(q_ref && kv_ref && kv_init && hk && hv && dk && dv && ck && cv);
    for (size_t i = 0; i < (size_t)len * kv; i++) kv_init[i] = 12345.0f;
    for (int i = 0; i < n; i++) {
        hk[i] = kv_ref + (size_t)(2 * i) * len * kv;
        hv[i] = hk[i] + (size_t)len * kv;
        memcpy(hk[i], kv_init, (size_t)len * kv * 4);
        memcpy(hv[i], kv_init, (size_t)len * kv * 4);
        ck[i] = hk[i] + (size_t)pos * kv;
        cv[i] = hv[i] + (size_t)pos * kv;
    }
    OK(cpu->qkv_rope_same_pos(cpu, &s, q_ref, ck, cv, &wq.c, &wk.c, &wv.c, x, n, pos, e));
    float *dx = dbuf((size_t)n * dim, x), *dq = dbuf((size_t)n * dim, NULL);
    float **dcache = malloc(2 * (size_t)n * sizeof *dcache);
    cr_assert(dcache);
    for (int i = 0; i < 2 * n; i++) dcache[i] = dbuf((size_t)len * kv, kv_init);
    for (int i = 0; i < n; i++) {
        dk[i] = dcache[2 * i] + (size_t)pos * kv;
        dv[i] = dcache[2 * i + 1] + (size_t)pos * kv;
    }
    OK(gpu->qkv_rope_same_pos(gpu, &s, dq, dk, dv, &wq.g, &wk.g, &wv.g, dx, n, pos, e));
    float *q = fetch(dq, (size_t)n * dim);
    double worst = rel_err(q, q_ref, (size_t)n * dim);
    for (int i = 0; i < 2 * n; i++) {
        float *c = fetch(dcache[i], (size_t)len * kv);
        double err = rel_err(c, i % 2 ? hv[i / 2] : hk[i / 2], (size_t)len * kv);
        if (err > worst) worst = err;
        free(c);
        gpu->release(gpu, dcache[i]);
    }
    const double tol = is_quant(type) ? 1e-3 : 1e-4;
    cr_expect(worst <= tol, "qkv_rope_same_pos %s n=%d pos=%d: error %.3g > %.1g",
              sd_wtype_name(type), n, pos, worst, tol);
    gpu->release(gpu, dx), gpu->release(gpu, dq);
    free(x), free(q_ref), free(kv_ref), free(kv_init), free(hk), free(hv), free(dk), free(dv);
    free(ck), free(cv), free(dcache), free(q);
    wpair_free(&wq), wpair_free(&wk), wpair_free(&wv);
}

Test(cuda, qkv_rope_same_pos) {
    rng_state = 31;
    /* SmolLM2's heads, or Qwen2.5-Coder 1.5B's for the K-quants */
    const sd_attn_shape s = SHAPE(9, 3, 64, 64, 10000.0f), sk = QWEN_SHAPE(12, 2, 128);
    static const int ns[] = {1, 4, SD_MAX_ROWS};
    for (size_t t = 0; t < N_TYPES; t++)
        for (size_t k = 0; k < 3; k++)
            check_qkv_same_pos(all_types[t], fits(all_types[t], 576) ? s : sk, ns[k], 17);
}

/* The same op recorded in graph steps (backend_cuda.cu "graphs"): captured at
 * position 17, replayed at 18 with the same buffers, each step's K/V rows
 * land at its position of each beam's cache and match the CPU op. */
Test(cuda, qkv_rope_same_pos_graph) {
    rng_state = 32;
    const sd_attn_shape s = SHAPE(9, 3, 64, 64, 10000.0f);
    enum { N = 4, DIM = 576, KV = 192, LEN = 20 };
    wpair wq, wk, wv;
    wpair_rand(&wq, SD_Q8_0, DIM, DIM, 1.0f);
    wpair_rand(&wk, SD_Q8_0, KV, DIM, 1.0f);
    wpair_rand(&wv, SD_Q8_0, KV, DIM, 1.0f);
    float *x = hrand((size_t)N * DIM, 1.0f), *q_ref = malloc((size_t)N * DIM * 4);
    float *href = malloc(2 * (size_t)N * KV * 4);
    cr_assert(q_ref && href);
    float *dx = dbuf((size_t)N * DIM, x), *dq = dbuf((size_t)N * DIM, NULL), *dcache[2 * N];
    for (int i = 0; i < 2 * N; i++) dcache[i] = dbuf((size_t)LEN * KV, NULL);
    cr_assert(sd_cuda_set_graph(gpu, 1) == 0);
    for (int step = 0; step < 2; step++) {
        const int pos = 17 + step;
        void *dk[N], *dv[N], *hk[N], *hv[N];
        for (int i = 0; i < N; i++) {
            dk[i] = dcache[2 * i] + (size_t)pos * KV;
            dv[i] = dcache[2 * i + 1] + (size_t)pos * KV;
            hk[i] = href + (size_t)(2 * i) * KV;
            hv[i] = href + (size_t)(2 * i + 1) * KV;
        }
        sd_err err = {{0}};
        cr_assert_eq(gpu->graph_begin(gpu, &err), 1, "graph_begin: %s", err.msg);
        OK(gpu->qkv_rope_same_pos(gpu, &s, dq, dk, dv, &wq.g, &wk.g, &wv.g, dx, N, pos, e));
        OK(gpu->graph_end(gpu, 1, e));
        OK(cpu->qkv_rope_same_pos(cpu, &s, q_ref, hk, hv, &wq.c, &wk.c, &wv.c, x, N, pos, e));
        float *q = fetch(dq, (size_t)N * DIM);
        double worst = rel_err(q, q_ref, (size_t)N * DIM);
        for (int i = 0; i < 2 * N; i++) {
            float *row = fetch(dcache[i] + (size_t)pos * KV, KV);
            const double r = rel_err(row, href + (size_t)i * KV, KV);
            if (r > worst) worst = r;
            free(row);
        }
        cr_expect(worst <= 1e-3, "graphed qkv_rope_same_pos at %d: error %.3g", pos, worst);
        free(q);
    }
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(gpu, &st) == 0);
    cr_expect(st.captures == 1 && st.replays == 1, "%ld captures, %ld replays", st.captures,
              st.replays);
    cr_assert(sd_cuda_set_graph(gpu, 0) == 0);
    for (int i = 0; i < 2 * N; i++) gpu->release(gpu, dcache[i]);
    gpu->release(gpu, dx), gpu->release(gpu, dq);
    free(x), free(q_ref), free(href);
    wpair_free(&wq), wpair_free(&wk), wpair_free(&wv);
}

/* ---- errors --------------------------------------------------------------------------------- */
Test(cuda, errors_name_the_op) {
    sd_err e = {{0}};
    const sd_attn_shape s = SHAPE(2, 2, 256, 256, 1e4f); /* head dim over the kernel's 128 */
    float *d = dbuf(4096, NULL);
    cr_expect(gpu->attention(gpu, &s, d, d, d, d, 1, 0, &e) != 0 && strstr(e.msg, "cuda: attention"),
              "'%s'", e.msg);
    uint8_t raw[34] = {0};
    sd_weight w = {SD_F32, 1, 8, 32, raw};
    sd_weight bad = {99, 1, 32, 128, raw};
    cr_expect(gpu->upload_weight(gpu, &bad, &e) != 0 && strstr(e.msg, "cuda: upload"), "'%s'",
              e.msg);
    cr_expect(gpu->rmsnorm(gpu, d, d, &w, 1, 16, 1e-5f, &e) != 0 && strstr(e.msg, "cuda: rmsnorm"),
              "'%s'", e.msg);
    int32_t ids[4];
    cr_expect(gpu->top_k_rows(gpu, d, 1, 4, 5, ids, NULL, &e) != 0 && strstr(e.msg, "cuda: top_k_rows"),
              "'%s'", e.msg);
    gpu->release(gpu, d);
}

/* ---- whole model ---------------------------------------------------------------------------------
 * A 2-layer random Llama run through the op table exactly as
 * engine/model.c's forward pass does (embed, per layer norm, qkv_rope
 * into the cache, attention, wo accumulate, norm, swiglu, w2 accumulate;
 * final norm and LM head), on any backend. compare_backends runs the same
 * weights on two backends for a prefill, a gamma+1 verification and a
 * decode step and compares the logits. */
enum { TL = 2, TDIM = 256, THEAD = 8, TKV = 2, THD = 32, TFFN = 512, TVOCAB = 1024, TCTX = 64 };

typedef struct tiny_host { /* F32 master weights, scaled for unit-size activations */
    float *emb, *norm[2 * TL + 1], *wq[TL], *wk[TL], *wv[TL], *wo[TL], *w1[TL], *w3[TL], *w2[TL], *out;
} tiny_host;

typedef struct tiny {
    sd_backend *b;
    sd_weight emb, out_norm, output, attn_norm[TL], ffn_norm[TL], wq[TL], wk[TL], wv[TL], wo[TL],
        w1[TL], w3[TL], w2[TL];
    void *host[64];
    int n_host;
    float *kc[TL], *vc[TL], *x, *xb, *q, *att, *hb, *hb2, *logits;
} tiny;

/* Weight `name` (GGUF name without ".weight", "%d" for the layer l): from
 * the synth GGUF g when there is one, else f quantised to type. */
static void tiny_weight(tiny *t, sd_weight *w, const gguf_file *g, const char *name, int l,
                        uint32_t type, int rows, int cols, const float *f) {
    if (g) {
        char full[64];
        snprintf(full, sizeof full - 7, name, l);
        strcat(full, ".weight");
        const gguf_tensor *x = gguf_find_tensor(g, full);
        cr_assert(x && x->ne[0] == (uint64_t)cols && x->ne[1] == (uint64_t)rows, "synth %s", full);
        *w = (sd_weight){x->type, rows, cols, (size_t)sd_row_bytes(x->type, (uint64_t)cols), x->data};
        OK(t->b->upload_weight(t->b, w, e));
        return;
    }
    size_t rb = (size_t)sd_row_bytes(type, (uint64_t)cols);
    uint8_t *h = malloc(rb * (size_t)rows);
    cr_assert(h && t->n_host < 64);
    for (int r = 0; r < rows; r++) cr_assert(sd_quantize_row(type, f + (size_t)r * cols, h + r * rb, cols) == 0);
    t->host[t->n_host++] = h;
    *w = (sd_weight){type, rows, cols, rb, h};
    OK(t->b->upload_weight(t->b, w, e));
}

static float *tiny_buf(tiny *t, size_t n) {
    sd_err e = {{0}};
    float *p = t->b->alloc(t->b, n * sizeof(float), &e);
    cr_assert(p, "%s alloc: %s", t->b->name, e.msg);
    return p;
}

/* The weights come from g (a synth GGUF) when it is not NULL, else from m
 * quantised to type. */
static void tiny_make(tiny *t, sd_backend *b, const tiny_host *m, const gguf_file *g,
                      uint32_t type) {
    memset(t, 0, sizeof *t);
    t->b = b;
    const int kv = TKV * THD;
    tiny_weight(t, &t->emb, g, "token_embd", 0, type, TVOCAB, TDIM, m->emb);
    tiny_weight(t, &t->out_norm, g, "output_norm", 0, SD_F32, 1, TDIM, m->norm[2 * TL]);
    tiny_weight(t, &t->output, g, "output", 0, type, TVOCAB, TDIM, m->out);
    for (int l = 0; l < TL; l++) {
        tiny_weight(t, &t->attn_norm[l], g, "blk.%d.attn_norm", l, SD_F32, 1, TDIM, m->norm[2 * l]);
        tiny_weight(t, &t->ffn_norm[l], g, "blk.%d.ffn_norm", l, SD_F32, 1, TDIM, m->norm[2 * l + 1]);
        tiny_weight(t, &t->wq[l], g, "blk.%d.attn_q", l, type, TDIM, TDIM, m->wq[l]);
        tiny_weight(t, &t->wk[l], g, "blk.%d.attn_k", l, type, kv, TDIM, m->wk[l]);
        tiny_weight(t, &t->wv[l], g, "blk.%d.attn_v", l, type, kv, TDIM, m->wv[l]);
        tiny_weight(t, &t->wo[l], g, "blk.%d.attn_output", l, type, TDIM, TDIM, m->wo[l]);
        tiny_weight(t, &t->w1[l], g, "blk.%d.ffn_gate", l, type, TFFN, TDIM, m->w1[l]);
        tiny_weight(t, &t->w3[l], g, "blk.%d.ffn_up", l, type, TFFN, TDIM, m->w3[l]);
        tiny_weight(t, &t->w2[l], g, "blk.%d.ffn_down", l, type, TDIM, TFFN, m->w2[l]);
        t->kc[l] = tiny_buf(t, (size_t)TCTX * kv);
        t->vc[l] = tiny_buf(t, (size_t)TCTX * kv);
    }
    t->x = tiny_buf(t, (size_t)TCTX * TDIM);
    t->xb = tiny_buf(t, (size_t)TCTX * TDIM);
    t->q = tiny_buf(t, (size_t)TCTX * TDIM);
    t->att = tiny_buf(t, (size_t)TCTX * TDIM);
    t->hb = tiny_buf(t, (size_t)TCTX * TFFN);
    t->hb2 = tiny_buf(t, (size_t)TCTX * TFFN);
    t->logits = tiny_buf(t, (size_t)TCTX * TVOCAB);
}

static void tiny_free(tiny *t) {
    sd_backend *b = t->b;
    sd_weight *ws[] = {&t->emb, &t->out_norm, &t->output};
    for (int i = 0; i < 3; i++) b->release_weight(b, ws[i]);
    for (int l = 0; l < TL; l++) {
        sd_weight *lw[] = {&t->attn_norm[l], &t->ffn_norm[l], &t->wq[l], &t->wk[l], &t->wv[l],
                           &t->wo[l], &t->w1[l], &t->w3[l], &t->w2[l]};
        for (int i = 0; i < 9; i++) b->release_weight(b, lw[i]);
        b->release(b, t->kc[l]);
        b->release(b, t->vc[l]);
    }
    float *bufs[] = {t->x, t->xb, t->q, t->att, t->hb, t->hb2, t->logits};
    for (int i = 0; i < 7; i++) b->release(b, bufs[i]);
    for (int i = 0; i < t->n_host; i++) free(t->host[i]);
}

/* logits_host[n][vocab] for tokens at positions pos..pos+n-1 (engine/model.c's order). */
static void tiny_forward(tiny *t, const int32_t *tok, int n, int pos, float *logits_host) {
    sd_backend *b = t->b;
    const sd_attn_shape s = SHAPE(THEAD, TKV, THD, THD, 10000.0f);
    const size_t off = (size_t)pos * TKV * THD;
    const float eps = 1e-5f;
    OK(b->embed(b, t->x, &t->emb, tok, n, e));
    for (int l = 0; l < TL; l++) {
        OK(b->rmsnorm(b, t->xb, t->x, &t->attn_norm[l], n, TDIM, eps, e));
        OK(b->qkv_rope(b, &s, t->q, t->kc[l] + off, t->vc[l] + off, &t->wq[l], &t->wk[l], &t->wv[l],
                       t->xb, n, pos, e));
        OK(b->attention(b, &s, t->att, t->q, t->kc[l], t->vc[l], n, pos, e));
        OK(b->matmul(b, t->x, &t->wo[l], t->att, n, 1, e));
        OK(b->rmsnorm(b, t->xb, t->x, &t->ffn_norm[l], n, TDIM, eps, e));
        OK(b->ffn_swiglu(b, t->hb, t->hb2, &t->w1[l], &t->w3[l], t->xb, n, e));
        OK(b->matmul(b, t->x, &t->w2[l], t->hb, n, 1, e));
    }
    OK(b->rmsnorm(b, t->xb, t->x, &t->out_norm, n, TDIM, eps, e));
    OK(b->matmul(b, t->logits, &t->output, t->xb, n, 0, e));
    OK(b->to_host(b, logits_host, t->logits, (size_t)n * TVOCAB * sizeof(float), e));
}

static void tiny_host_make(tiny_host *m) {
    const float sd = 1.0f / sqrtf((float)TDIM), sf = 1.0f / sqrtf((float)TFFN);
    const size_t kv = (size_t)TKV * THD;
    m->emb = hrand((size_t)TVOCAB * TDIM, 1.0f);
    m->out = hrand((size_t)TVOCAB * TDIM, sd);
    for (int i = 0; i < 2 * TL + 1; i++) {
        m->norm[i] = hrand(TDIM, 0.2f);
        for (int k = 0; k < TDIM; k++) m->norm[i][k] += 1.0f;
    }
    for (int l = 0; l < TL; l++) {
        m->wq[l] = hrand((size_t)TDIM * TDIM, 2 * sd);
        m->wk[l] = hrand(kv * TDIM, 2 * sd);
        m->wv[l] = hrand(kv * TDIM, sd);
        m->wo[l] = hrand((size_t)TDIM * TDIM, sd);
        m->w1[l] = hrand((size_t)TFFN * TDIM, sd);
        m->w3[l] = hrand((size_t)TFFN * TDIM, sd);
        m->w2[l] = hrand((size_t)TDIM * TFFN, sf);
    }
}

static void tiny_host_free(tiny_host *m) {
    free(m->emb), free(m->out);
    for (int i = 0; i < 2 * TL + 1; i++) free(m->norm[i]);
    for (int l = 0; l < TL; l++)
        free(m->wq[l]), free(m->wk[l]), free(m->wv[l]), free(m->wo[l]), free(m->w1[l]),
            free(m->w3[l]), free(m->w2[l]);
}

/* The tiny model's shape as a synth_model GGUF of type (random blocks). */
static gguf_file *tiny_synth(uint32_t type, uint8_t **bytes) {
    synth_cfg c = synth_default();
    c.dim = TDIM, c.n_layers = TL, c.n_heads = THEAD, c.n_kv_heads = TKV, c.ffn = TFFN;
    c.vocab = TVOCAB, c.ctx = TCTX, c.wtype = type, c.seed = 0x5eed ^ type;
    size_t n;
    sd_err e = {{0}};
    cr_assert(synth_model_bytes(&c, bytes, &n, &e) == 0, "synth %s: %s", sd_wtype_name(type), e.msg);
    gguf_file *g = gguf_open_mem(*bytes, n, "synth", &e);
    cr_assert(g, "synth %s: %s", sd_wtype_name(type), e.msg);
    return g;
}

/* Same weights, same tokens on ref and dut: max relative logit error over a
 * 7-token prefill, a 4-token verification at 7 and a decode step at 11.
 * Also checks top_k_rows on dut's last logits row against the CPU op on
 * the host copy. The weights of the synth_model types come from a synth
 * GGUF, the others' from F32 masters. */
static double compare_backends(sd_backend *ref, sd_backend *dut, uint32_t type) {
    tiny_host m = {0};
    gguf_file *g = NULL;
    uint8_t *bytes = NULL;
    if (synth_block_type(type))
        g = tiny_synth(type, &bytes);
    else
        tiny_host_make(&m);
    tiny a, b;
    tiny_make(&a, ref, &m, g, type);
    tiny_make(&b, dut, &m, g, type);
    const int32_t toks[12] = {1, 900, 33, 512, 7, 1023, 64, 2, 77, 300, 5, 811};
    const int steps[3][2] = {{0, 7}, {7, 4}, {11, 1}}; /* pos, n */
    float *la = malloc((size_t)7 * TVOCAB * 4), *lb = malloc((size_t)7 * TVOCAB * 4);
    cr_assert(la && lb);
    double worst = 0;
    for (int s = 0; s < 3; s++) {
        const int pos = steps[s][0], n = steps[s][1];
        tiny_forward(&a, toks + pos, n, pos, la);
        tiny_forward(&b, toks + pos, n, pos, lb);
        double err = rel_err(lb, la, (size_t)n * TVOCAB);
        if (err > worst) worst = err;
    }
    int32_t ids[4], host[4];
    OK(dut->top_k_rows(dut, b.logits, 1, TVOCAB, 4, ids, NULL, e));
    OK(cpu->top_k_rows(cpu, lb, 1, TVOCAB, 4, host, NULL, e));
    cr_expect(!memcmp(ids, host, sizeof ids), "model top 4 %d %d %d %d, host %d %d %d %d", ids[0],
              ids[1], ids[2], ids[3], host[0], host[1], host[2], host[3]);
    free(la), free(lb);
    tiny_free(&a), tiny_free(&b);
    tiny_host_free(&m);
    if (g) gguf_close(g);
    free(bytes);
    return worst;
}

static void model_type(uint32_t type) {
    rng_state = 0x5eed ^ type;
    const double tol = is_quant(type) ? 1e-2 : 1e-4;
    double err = compare_backends(cpu, gpu, type);
    cr_expect(err <= tol, "tiny model %s: logits error %.3g > %.1g", sd_wtype_name(type), err, tol);
}

Test(cuda, model_f32) { model_type(SD_F32); }
Test(cuda, model_bf16) { model_type(SD_BF16); }
Test(cuda, model_q8_0) { model_type(SD_Q8_0); }
Test(cuda, model_q4_1) { model_type(SD_Q4_1); }
Test(cuda, model_q5_0) { model_type(SD_Q5_0); }
Test(cuda, model_q4_k) { model_type(SD_Q4_K); }
Test(cuda, model_q6_k) { model_type(SD_Q6_K); }

/* ---- decode steps as CUDA graphs (backend.h graph_begin/graph_end) --------------------------
 * A synthetic model decoded greedily, with two verification steps of 4 rows
 * in between (as speculative decoding makes them), gives the same ids with
 * graphs on as with plain launches; and with graphs on each shape is
 * captured once, when it first runs (the 3-token prompt, the decode step,
 * the verification), every other step is a replay of a kept graph at its
 * new position, and nothing falls back (the plain run grew the scratch). */
enum { GR_STEPS = 40, GR_VERIFY = 4, GR_CALLS = GR_STEPS + 3, GR_IDS = GR_STEPS + 2 * GR_VERIFY };

/* The ids of the script into out; the graph captures after each of its
 * GR_CALLS forward calls into caps, and the nodes of the decode step's
 * graph into nodes. */
static void decode_script(sd_model *m, int32_t *out, long *caps, long *nodes) {
    sd_err e = {{0}};
    const int32_t prompt[3] = {1, 300, 301};
    int32_t tok;
    sd_cuda_graph_stats st;
    int call = 0, k = 0, pos = 3;
    cr_assert(sd_forward_top_k(m, m->kv, prompt, 3, 0, 0, 1, 1, &tok, &e) == 0, "%s", e.msg);
    cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
    caps[call++] = st.captures;
    for (int i = 0; i < GR_STEPS; i++) {
        if (i == 15 || i == 30) {
            const int32_t draft[GR_VERIFY] = {tok, 5, 6, 7};
            cr_assert(sd_forward_top_k(m, m->kv, draft, GR_VERIFY, pos, 0, GR_VERIFY, 1, out + k,
                                       &e) == 0, "%s", e.msg);
            cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
            caps[call++] = st.captures;
            tok = out[k + GR_VERIFY - 1];
            k += GR_VERIFY;
            pos += GR_VERIFY;
        }
        cr_assert(sd_forward_top_k(m, m->kv, &tok, 1, pos, 0, 1, 1, &out[k], &e) == 0, "%s", e.msg);
        cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
        if (i == 0) *nodes = st.nodes;
        caps[call++] = st.captures;
        tok = out[k++];
        pos++;
    }
}

/* A synth_model GGUF of c (its bytes in *bytes, freed by the caller after
 * the model) loaded on the CUDA backend with a cache of n_ctx, with
 * programmatic dependent launch (cuda_int.h cu_launch_cfg), which the
 * emulator checks every block of the launched kernels waits for, and
 * recorded steps run as persistent launches when persistent is set. */
static sd_model *persist_model(const synth_cfg *c, int n_ctx, int persistent, uint8_t **bytes) {
    size_t n = 0;
    sd_err e = {{0}};
    cr_assert(synth_model_bytes(c, bytes, &n, &e) == 0, "%s", e.msg);
    gguf_file *f = gguf_open_mem(*bytes, n, "synth", &e);
    cr_assert(f, "%s", e.msg);
    sd_model_opts o = {.n_ctx = n_ctx};
    sd_backend_opts bo = sd_backend_opts_default();
    bo.cuda_pdl = 1;
    bo.cuda_persistent = persistent;
    sd_model *m = sd_model_from_gguf(f, sd_backend_cuda(0, &bo, &e), &o, &e);
    cr_assert(m, "%s", e.msg);
    return m;
}

static sd_model *graph_model(const synth_cfg *c, int n_ctx, uint8_t **bytes) {
    return persist_model(c, n_ctx, 0, bytes);
}

Test(cuda, decode_graph) {
    /* in the emulator, also that no kernel reads through __ldg what a
     * kernel it may run beside wrote (tests/cuda_emu/emu.cpp) */
    cr_assert(setenv("CUDA_EMU_LDG_CHECK", "1", 1) == 0);
    synth_cfg c = synth_default();
    c.wtype = SD_Q4_K;
    c.dim = 256;
    c.ffn = 512;
    c.n_layers = 3;
    uint8_t *bytes = NULL;
    sd_model *m = graph_model(&c, 200, &bytes);
    int32_t plain[GR_IDS], graphed[GR_IDS];
    long caps[GR_CALLS], nodes = 0;
    cr_assert(sd_cuda_set_graph(m->be, 0) == 0);
    decode_script(m, plain, caps, &nodes);
    cr_assert(sd_cuda_set_graph(m->be, 1) == 0);
    decode_script(m, graphed, caps, &nodes);
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
    cr_expect(!memcmp(plain, graphed, sizeof plain), "graphed decode gave other ids");
    /* captures: the prompt, the first decode step, the first verification (call 16) */
    for (int i = 0; i < GR_CALLS; i++) {
        const long want = i == 0 ? 1 : i < 16 ? 2 : 3;
        cr_expect(caps[i] == want, "after forward call %d: %ld captures, expected %ld", i, caps[i],
                  want);
    }
    cr_expect(st.launched == GR_CALLS && st.captures == 3 && st.replays == GR_CALLS - 3 &&
                  st.fallbacks == 0 && st.updated + st.instantiated == st.captures,
              "graphs: %ld launched (%ld captured: %ld updated, %ld instantiated; %ld replayed), "
              "%ld fallbacks",
              st.launched, st.captures, st.updated, st.instantiated, st.replays, st.fallbacks);
    /* the decode step's launches: the position and id copies, embed; per
     * layer qkv_rope, attention, wo, ffn_swiglu, w_down (the two norms
     * folded into qkv_rope and ffn_swiglu, norm.cu; attention (head dim 64)
     * and ffn_swiglu (Q4_K) quantise what they write, so no qact of its
     * own); the head's matmul with its norm folded; the argmax (a vocabulary
     * of 320: one block a row, top_k.cu) */
    cr_expect(nodes == 3 + 5 * c.n_layers + 1 + 1, "decode step of %d layers: %ld graph nodes",
              c.n_layers, nodes);
    sd_model_free(m);
    free(bytes);
}

/* The same script with every recorded step one persistent launch
 * (kernels/cuda/step.cu) on a model of config c: the prompt, the decode
 * steps and the verifications give the ids of plain launches, and no step
 * goes the graph way. In the emulator on 4 multiprocessors (the grid is
 * every resident block), whose blocks it runs round robin, so that each
 * item runs beside the ones taken before it (tests/cuda_emu/
 * test_emu_forward.c, persist_type); a GPU ignores the setting. */
static void persistent_script(const synth_cfg *c) {
    cr_assert(setenv("CUDA_EMU_SMS", "4", 1) == 0);
    uint8_t *bytes = NULL;
    sd_model *m = persist_model(c, 200, 1, &bytes);
    int32_t plain[GR_IDS], persistent[GR_IDS];
    long caps[GR_CALLS], nodes = 0;
    cr_assert(sd_cuda_set_graph(m->be, 0) == 0);
    decode_script(m, plain, caps, &nodes);
    cr_assert(sd_cuda_set_graph(m->be, 1) == 0);
    decode_script(m, persistent, caps, &nodes);
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
    cr_expect(!memcmp(plain, persistent, sizeof plain), "persistent decode gave other ids");
    cr_expect(st.persistent == GR_CALLS && st.persist_fallbacks == 0 && st.launched == 0,
              "%ld steps persistent, %ld not (%s), %ld graphs launched", st.persistent,
              st.persist_fallbacks, st.persist_why, st.launched);
    sd_model_free(m);
    free(bytes);
}

Test(cuda, decode_persistent) {
    synth_cfg c = synth_default();
    c.wtype = SD_Q4_K;
    c.dim = 256;
    c.ffn = 512;
    c.n_layers = 3;
    persistent_script(&c);
}

/* With a vocabulary whose argmax is split over blocks (top_k.cu
 * cu_argmax_split: 3 slices a row): the slices and their merge are stages
 * of the persistent step; a top-k launched while the step is built would
 * read the logits before the step ran. */
Test(cuda, decode_persistent_split_argmax) {
    synth_cfg c = synth_default();
    c.wtype = SD_Q8_0;
    c.vocab = 3 * 2048 + 100; /* CU_ARGMAX_MIN_SLICE (cuda_int.h) is 2048 */
    persistent_script(&c);
}

/* Attention's key split holds for a length bucket (plan.h): decode steps
 * across the bucket boundary at 256 give the plain path's ids, and the
 * graph is captured at the first step and at the first step of the next
 * bucket, the others replayed. The 250-token prompt runs plainly (more
 * rows than one graph step takes). */
enum { GB_PROMPT = 250, GB_STEPS = 12 };

static void bucket_script(sd_model *m, int32_t *out) {
    sd_err e = {{0}};
    int32_t prompt[GB_PROMPT], tok;
    for (int i = 0; i < GB_PROMPT; i++) prompt[i] = 1 + i * 7 % 300;
    cr_assert(sd_forward_top_k(m, m->kv, prompt, GB_PROMPT, 0, 0, 1, 1, &tok, &e) == 0, "%s",
              e.msg);
    for (int i = 0; i < GB_STEPS; i++) {
        cr_assert(sd_forward_top_k(m, m->kv, &tok, 1, GB_PROMPT + i, 0, 1, 1, &out[i], &e) == 0,
                  "%s", e.msg);
        tok = out[i];
    }
}

Test(cuda, decode_graph_bucket) {
    synth_cfg c = synth_default();
    c.wtype = SD_Q8_0;
    c.dim = 128;
    c.ffn = 256;
    c.ctx = 512;
    uint8_t *bytes = NULL;
    sd_model *m = graph_model(&c, 300, &bytes);
    int32_t plain[GB_STEPS], graphed[GB_STEPS];
    cr_assert(sd_cuda_set_graph(m->be, 0) == 0);
    bucket_script(m, plain);
    cr_assert(sd_cuda_set_graph(m->be, 1) == 0);
    bucket_script(m, graphed);
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(m->be, &st) == 0);
    cr_expect(!memcmp(plain, graphed, sizeof plain), "graphed decode across 256 gave other ids");
    cr_expect(st.captures == 2 && st.replays == GB_STEPS - 2 && st.fallbacks == 0,
              "graphs: %ld captured, %ld replayed, %ld fallbacks", st.captures, st.replays,
              st.fallbacks);
    sd_model_free(m);
    free(bytes);
}

/* Two embeds in one recorded step stage their ids apart in the pinned
 * staging (backend_cuda.cu, "graph recording"): captured, then replayed with
 * other ids, each gives the rows of plain embeds. */
Test(cuda, graph_two_embeds) {
    rng_state = 48;
    const int dim = 64;
    wpair w;
    wpair_rand(&w, SD_F32, 50, dim, 1.0f);
    float *x1 = dbuf(2 * (size_t)dim, NULL), *x2 = dbuf(dim, NULL), *y1 = dbuf(2 * (size_t)dim, NULL),
          *y2 = dbuf(dim, NULL);
    const int32_t ids[2][3] = {{3, 7, 11}, {40, 2, 49}};
    cr_assert(sd_cuda_set_graph(gpu, 1) == 0);
    for (int step = 0; step < 2; step++) {
        const int32_t *a = ids[step], *b = ids[step] + 2;
        sd_err err = {{0}};
        cr_assert_eq(gpu->graph_begin(gpu, &err), 1, "graph_begin: %s", err.msg);
        OK(gpu->embed(gpu, x1, &w.g, a, 2, e));
        OK(gpu->embed(gpu, x2, &w.g, b, 1, e));
        OK(gpu->graph_end(gpu, 1, e));
        OK(gpu->embed(gpu, y1, &w.g, a, 2, e));
        OK(gpu->embed(gpu, y2, &w.g, b, 1, e));
        float *g1 = fetch(x1, 2 * (size_t)dim), *g2 = fetch(x2, dim), *p1 = fetch(y1, 2 * (size_t)dim),
              *p2 = fetch(y2, dim);
        cr_expect(!memcmp(g1, p1, 2 * (size_t)dim * 4) && !memcmp(g2, p2, (size_t)dim * 4),
                  "step %d: recorded embeds differ from plain ones", step);
        free(g1), free(g2), free(p1), free(p2);
    }
    sd_cuda_graph_stats st;
    cr_assert(sd_cuda_graph_stats_get(gpu, &st) == 0);
    cr_expect(st.captures == 1 && st.replays == 1, "%ld captures, %ld replays", st.captures,
              st.replays);
    cr_assert(sd_cuda_set_graph(gpu, 0) == 0);
    gpu->release(gpu, x1), gpu->release(gpu, x2), gpu->release(gpu, y1), gpu->release(gpu, y2);
    wpair_free(&w);
}
