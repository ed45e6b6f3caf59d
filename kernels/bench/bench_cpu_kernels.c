/* CPU kernel microbenchmark: one row per kernel, shape and thread count.
 *
 * Shapes are SmolLM2-135M's (dim 576, kv dim 192, ffn 1536, vocab 49152;
 * Q4_1 layers, Q8_0 head; F16/BF16/Q4_0 at 576x1536 for comparison), then
 * the Qwen2.5-Coder pair's: 1.5B (dim 1536, kv dim 256, ffn 8960, vocab
 * 151936; Q4_K layers, Q6_K down and head) and 0.5B (dim 896, ffn 4864;
 * Q5_0). Q4Kx, Q6Kx, Q50x, Q80x, Q41x and Q40x rows: shapes of those types in the
 * 16-row interleaved layouts the CPU backend repacks them into at load
 * (kernels/cpu/blocks.h), next to the same weights in the file's layout.
 *  n=1   (decode): time per matvec with the weights cold, i.e. streamed
 *        from DRAM as in a real decode step (98 MB of weights a token do
 *        not fit in L3): each call uses the next of enough copies of the
 *        weight to fill 256 MiB. Reported as GB/s of weight bytes.
 *  n=4, 5, 9 (verifying 3, 4 or 8 drafts): cold like n=1, one pass over the
 *        weights; "(x1.76)" after a row is its time over the n=1 time.
 *  n=128 (prefill): weights warm, reported as GFLOP/s (2*rows*cols*n);
 *        for the quantized types also as a share of the int8 peak.
 * int8_peak: the machine's integer multiply-add peak, one independent
 *        vpdpbusd (AVX-512 VNNI) or vpmaddubsw (AVX2) stream per register
 *        in a loop, per thread count (ops = 2 per byte product), best of
 *        short windows so a busy neighbour costs little; on an AMX CPU a
 *        second pair of rows, tdpbusd on 4 accumulator tiles, and the
 *        n=128 rows give their share of both peaks.
 * Times are medians of repeated calls (best_us: the fastest call, a guide
 * when other processes share the cores). The last rows estimate SmolLM2
 * decode tok/s = 1 / (sum of the per-layer matvec times x 30 + head), and
 * prefill tok/s for a 128-token prompt from the n=128 times, next to the
 * machine's memcpy bandwidth over 256 MiB. Runs in well under a minute.
 *   usage: bench_cpu_kernels [ROW...]   ROW a type as the type column
 *   prints it (Q4_K, Q4Kx, ...) or a kernel column name among multi
 *   (qkv_multi, gateup_multi), attention, top_k_rows, elementwise: only
 *   those rows, for timing one kernel while changing it (the estimates at
 *   the end need every row and are left out); an unknown ROW is an error.
 *   SD_ISA=LEVEL in the environment runs the kernels at that SIMD level. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <immintrin.h>

#include "kernels/bench/int8_peak.h"
#include "kernels/common/wtype.h"
#include "kernels/cpu/cpu.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *t, int n) {
    qsort(t, n, sizeof *t, cmpd);
    return t[n / 2];
}

static uint64_t rs = 88172645463325252ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 40) / 16777216.0) * 2 - 1;
}

static size_t row_bytes(uint32_t t, int64_t cols) {
    int el, by;
    sd_cpu_type_block(sd_cpu_file_type(t), &el, &by);
    return (size_t)(cols / el) * by;
}

static const char *tname(uint32_t t) {
    return t == SD_Q4_K_X16 ? "Q4Kx" : t == SD_Q6_K_X16 ? "Q6Kx" : t == SD_Q5_0_X16 ? "Q50x"
           : t == SD_Q8_0_X16 ? "Q80x" : t == SD_Q4_1_X16 ? "Q41x" : t == SD_Q4_0_X16 ? "Q40x"
           : sd_wtype_name(t);
}

#define POOL (256ull << 20)
#define MAXT 64

typedef struct shape {
    const char *name;
    uint32_t type;
    int64_t rows, cols;
} shape;

static const shape shapes[] = {
    {"attn_q/o", SD_Q4_1, 576, 576},    {"attn_k/v", SD_Q4_1, 192, 576},
    {"ffn_gate/up", SD_Q4_1, 1536, 576}, {"ffn_down", SD_Q4_1, 576, 1536},
    {"output", SD_Q8_0, 49152, 576},     {"ffn_down", SD_F16, 576, 1536},
    {"ffn_down", SD_BF16, 576, 1536},    {"ffn_down", SD_Q4_0, 576, 1536},
    {"1.5B_q/o", SD_Q4_K, 1536, 1536},   {"1.5B_k/v", SD_Q4_K, 256, 1536},
    {"1.5B_gate/up", SD_Q4_K, 8960, 1536}, {"1.5B_q/o", SD_Q4_K_X16, 1536, 1536},
    {"1.5B_k/v", SD_Q4_K_X16, 256, 1536}, {"1.5B_gate/up", SD_Q4_K_X16, 8960, 1536},
    {"1.5B_down", SD_Q6_K, 1536, 8960},   {"1.5B_down", SD_Q6_K_X16, 1536, 8960},
    {"1.5B_output", SD_Q6_K, 151936, 1536}, {"0.5B_q/o", SD_Q5_0, 896, 896},
    {"0.5B_gate/up", SD_Q5_0, 4864, 896}, {"0.5B_gate/up", SD_Q5_0_X16, 4864, 896},
    {"output", SD_Q8_0_X16, 49152, 576}, {"attn_q/o", SD_Q4_1_X16, 576, 576},
    {"attn_k/v", SD_Q4_1_X16, 192, 576}, {"ffn_gate/up", SD_Q4_1_X16, 1536, 576},
    {"ffn_down", SD_Q4_1_X16, 576, 1536}, {"ffn_down", SD_Q4_0_X16, 576, 1536},
};
enum { NSHAPES = sizeof shapes / sizeof *shapes };


static const char *const sections[] = {"multi", "attention", "top_k_rows", "elementwise"};

/* 1 if the rows named `name` are selected (all are when there are no arguments) */
static int selected(const char *name, int argc, char **argv) {
    for (int k = 1; k < argc; k++)
        if (!strcmp(argv[k], name)) return 1;
    return argc < 2;
}

int main(int argc, char **argv) {
    sd_err e = {{0}};
    for (int k = 1; k < argc; k++) {
        int known = 0;
        for (int s = 0; s < NSHAPES; s++) known |= !strcmp(argv[k], tname(shapes[s].type));
        for (size_t s = 0; s < sizeof sections / sizeof *sections; s++) known |= !strcmp(argv[k], sections[s]);
        if (!known) {
            fprintf(stderr, "bench_cpu_kernels: unknown row '%s' (a type as the type column prints it: Q4_1, "
                            "Q4Kx, ...; or multi, attention, top_k_rows, elementwise)\n", argv[k]);
            return 2;
        }
    }
    double t_dec[NSHAPES][2], t_pre[NSHAPES][2];

    /* copy bandwidth */
    uint8_t *a = malloc(POOL), *b = malloc(POOL);
    if (!a || !b) return fprintf(stderr, "out of memory\n"), 1;
    memset(a, 1, POOL);
    memset(b, 2, POOL);
    double ts[5];
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        memcpy(r & 1 ? a : b, r & 1 ? b : a, POOL);
        ts[r] = now() - t0;
    }
    double tc = median(ts, 5);
    printf("%-12s %-5s %6s %6s %4s %3s %10s %9s %9s %10s\n", "kernel", "type", "rows", "cols", "n", "thr",
           "time_us", "GB/s", "GFLOP/s", "best_us");
    printf("%-12s %-5s %6s %6s %4s %3d %10.0f %9.2f %9s   (bytes copied/s; read+write %.2f GB/s)\n",
           "memcpy", "-", "-", "-", "-", 1, tc * 1e6, POOL / tc / 1e9, "-", 2 * POOL / tc / 1e9);
    free(b);

    float *x = malloc(sizeof(float) * 128 * 8960);
    float *out = malloc(sizeof(float) * 128 * 151936);
    if (!x || !out) return fprintf(stderr, "out of memory\n"), 1;
    for (int k = 0; k < 128 * 8960; k++) x[k] = frand();
    sd_cpu *ctx[2] = {sd_cpu_create(1, &e), sd_cpu_create(2, &e)};
    if (!ctx[0] || !ctx[1]) return fprintf(stderr, "%s\n", e.msg), 1;
    /* SD_ISA, as the engine reads it, runs the rows at a narrower level */
    const char *isa = getenv("SD_ISA");
    if (isa && sd_isa_from_name(isa) < 0)
        return fprintf(stderr, "bench_cpu_kernels: SD_ISA=%s: expected scalar, avx2, avx512, avx512vnni or amx\n", isa), 1;
    for (int th = 0; isa && th < 2; th++) sd_cpu_set_isa(ctx[th], sd_isa_from_name(isa));
    printf("# isa %s\n", sd_isa_name(sd_cpu_isa(ctx[0])));
    double peak[2], peak_tile[2] = {0, 0};
    for (int th = 0; th < 2; th++) {
        peak[th] = sd_int8_peak(th + 1, sd_peak_thread);
        printf("%-12s %-5s %6s %6s %4s %3d %10s %9s %9.2f   (GOP/s, %s)\n", "int8_peak", "-", "-", "-", "-",
               th + 1, "-", "-", peak[th] / 1e9,
               sd_cpu_isa_detect() >= SD_ISA_AVX512_VNNI ? "vpdpbusd zmm" : "vpmaddubsw ymm");
    }
    for (int th = 0; th < 2 && sd_cpu_isa_detect() >= SD_ISA_AMX; th++) {
        peak_tile[th] = sd_int8_peak(th + 1, sd_peak_amx_thread);
        printf("%-12s %-5s %6s %6s %4s %3d %10s %9s %9.2f   (GOP/s, AMX tdpbusd)\n", "int8_peak", "-", "-", "-",
               "-", th + 1, "-", "-", peak_tile[th] / 1e9);
    }

    for (int s = 0; s < NSHAPES; s++) {
        const shape *sh = &shapes[s];
        if (!selected(tname(sh->type), argc, argv)) continue;
        size_t rb = row_bytes(sh->type, sh->cols), wbytes = rb * sh->rows;
        /* one random weight, then copies of it across the pool */
        float *tmp = malloc(sizeof(float) * sh->cols);
        for (int64_t r = 0; r < sh->rows; r++) {
            for (int64_t c = 0; c < sh->cols; c++) tmp[c] = frand() * 0.1f;
            sd_quantize_row(sd_cpu_file_type(sh->type), tmp, a + r * rb, sh->cols);
        }
        free(tmp);
        if (sh->type != sd_cpu_file_type(sh->type)) { /* the layout the CPU backend loads it into */
            sd_weight wr = {sd_cpu_file_type(sh->type), sh->rows, sh->cols, rb, a};
            if (sd_cpu_repack(ctx[0], &wr, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
            memcpy(a, wr.data, wbytes);
            sd_cpu_repack_free(&wr);
        }
        size_t stride = (wbytes + 4095) & ~(size_t)4095;
        int copies = (int)(POOL / stride);
        if (copies < 1) copies = 1;
        for (int k = 1; k < copies; k++) memcpy(a + k * stride, a, wbytes);
        for (int th = 0; th < 2; th++) {
            sd_cpu *c = ctx[th];
            sd_weight w = {sh->type, sh->rows, sh->cols, rb, a};
            /* n = 1, 4, 5 and 9, cold: cycle through the copies */
            enum { REP = 400 };
            static double tt[REP];
            double t_one = 0;
            static const int ns[] = {1, 4, 5, 9};
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                const int n = ns[ni];
                int reps = 0, k = 0;
                double tend = now() + 0.25;
                sd_cpu_matmul(c, out, &w, x, n, 0, &e);
                while (reps < REP && (now() < tend || reps < 5)) {
                    w.data = a + (size_t)k * stride;
                    k = (k + 1) % copies;
                    double t0 = now();
                    if (sd_cpu_matmul(c, out, &w, x, n, 0, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
                    tt[reps++] = now() - t0;
                }
                double t1 = median(tt, reps);
                if (n == 1) t_dec[s][th] = t_one = t1;
                printf("%-12s %-5s %6lld %6lld %4d %3d %10.1f %9.2f %9.2f %10.1f", sh->name,
                       tname(sh->type), (long long)sh->rows, (long long)sh->cols, n, th + 1,
                       t1 * 1e6, wbytes / t1 / 1e9, 2.0 * sh->rows * sh->cols * n / t1 / 1e9, tt[0] * 1e6);
                if (n > 1) printf("   (x%.2f)", t1 / t_one);
                printf("\n");
            }
            /* n = 128, warm */
            w.data = a;
            int reps = 0;
            double tend = now() + (sh->rows > 10000 ? 1.5 : 0.4);
            sd_cpu_matmul(c, out, &w, x, 128, 0, &e);
            while (reps < REP && (now() < tend || reps < 3)) {
                double t0 = now();
                sd_cpu_matmul(c, out, &w, x, 128, 0, &e);
                tt[reps++] = now() - t0;
            }
            double t2 = median(tt, reps);
            t_pre[s][th] = t2;
            const double gops = 2.0 * sh->rows * sh->cols * 128 / t2;
            printf("%-12s %-5s %6lld %6lld %4d %3d %10.1f %9.2f %9.2f %10.1f", sh->name, tname(sh->type),
                   (long long)sh->rows, (long long)sh->cols, 128, th + 1, t2 * 1e6, wbytes / t2 / 1e9,
                   gops / 1e9, tt[0] * 1e6);
            if (sd_wtype_block(sd_cpu_file_type(sh->type)) > 1 && peak[th] > 0)
                printf("   (%.0f%% of int8 peak)", 100.0 * gops / peak[th]);
            if (sd_wtype_block(sd_cpu_file_type(sh->type)) > 1 && peak_tile[th] > 0)
                printf(" (%.0f%% of AMX peak)", 100.0 * gops / peak_tile[th]);
            printf("\n");
        }
    }

    /* the fused calls the forward pass makes: Q/K/V and gate/up through
     * sd_cpu_matmul_multi (one activation quantization, one thread split) */
    double t_multi[2][2][2]; /* [qkv, gateup][n=1, n=128][threads] */
    if (selected("multi", argc, argv)) {
        const int64_t mrows[2][3] = {{576, 192, 192}, {1536, 1536, 0}};
        const int nws[2] = {3, 2};
        const char *names[2] = {"qkv_multi", "gateup_multi"};
        size_t rb = row_bytes(SD_Q4_1, 576);
        for (int m = 0; m < 2; m++) {
            size_t set = 0;
            for (int k = 0; k < nws[m]; k++) set += rb * mrows[m][k];
            size_t stride = (set + 4095) & ~(size_t)4095;
            int copies = (int)(POOL / stride);
            float *tmp = malloc(sizeof(float) * 576);
            for (size_t r = 0; r < set / rb; r++) {
                for (int c2 = 0; c2 < 576; c2++) tmp[c2] = frand() * 0.1f;
                sd_quantize_row(SD_Q4_1, tmp, a + r * rb, 576);
            }
            free(tmp);
            for (int k = 1; k < copies; k++) memcpy(a + k * stride, a, set);
            float *outs[3] = {out, out + 128 * 1536, out + 2 * 128 * 1536};
            for (int ni = 0; ni < 2; ni++)
                for (int th = 0; th < 2; th++) {
                    int n = ni ? 128 : 1, reps = 0, k = 0;
                    static double tt[400];
                    double tend = now() + 0.3;
                    while (reps < 400 && (now() < tend || reps < 3)) {
                        sd_weight w[3];
                        const sd_weight *wp[3];
                        size_t off = ni ? 0 : (size_t)k * stride;
                        k = (k + 1) % copies;
                        for (int q = 0; q < nws[m]; q++) {
                            w[q] = (sd_weight){SD_Q4_1, mrows[m][q], 576, rb, a + off};
                            off += rb * mrows[m][q];
                            wp[q] = &w[q];
                        }
                        double t0 = now();
                        if (sd_cpu_matmul_multi(ctx[th], nws[m], outs, wp, x, n, &e))
                            return fprintf(stderr, "%s\n", e.msg), 1;
                        tt[reps++] = now() - t0;
                    }
                    double t = median(tt, reps);
                    t_multi[m][ni][th] = t;
                    printf("%-12s %-5s %6lld %6d %4d %3d %10.1f %9.2f %9.2f %10.1f\n", names[m], "Q4_1",
                           (long long)(set / rb), 576, n, th + 1, t * 1e6, set / t / 1e9,
                           2.0 * (set / rb) * 576 * n / t / 1e9, tt[0] * 1e6);
                }
        }
    }

    /* attention, cache warm (one layer's K and V reused call after call):
     * SmolLM2's shape (9 heads / 3 kv, hd 64) decoding at position 511
     * (one key range), at 2047 (four ranges and their merge) and a
     * 128-token prefill; Qwen2.5-1.5B's (12 / 2, hd 128) decoding at
     * position 256, verifying 5 rows there (bench_model's verification)
     * and decoding at 2047 */
    if (selected("attention", argc, argv)) {
        const int maxlen = 2048, maxq = 128 * 12 * 128;
        float *q = malloc(sizeof(float) * maxq), *kc = malloc(sizeof(float) * maxlen * 2 * 128),
              *vc = malloc(sizeof(float) * maxlen * 2 * 128), *o = malloc(sizeof(float) * maxq);
        for (int k = 0; k < maxq; k++) q[k] = frand();
        for (int k = 0; k < maxlen * 2 * 128; k++) kc[k] = frand(), vc[k] = frand();
        const int cfg[6][5] = {{9, 3, 64, 1, 511}, {9, 3, 64, 1, 2047}, {9, 3, 64, 128, 0},
                               {12, 2, 128, 1, 256}, {12, 2, 128, 5, 256}, {12, 2, 128, 1, 2047}};
        for (int ci = 0; ci < 6; ci++)
            for (int th = 0; th < 2; th++) {
                double tt[101];
                const int nh = cfg[ci][0], nkv = cfg[ci][1], hd = cfg[ci][2], n = cfg[ci][3], pos = cfg[ci][4];
                sd_cpu_attention(ctx[th], o, q, kc, vc, n, pos, nh, nkv, hd, &e);
                for (int r = 0; r < 101; r++) {
                    double t0 = now();
                    sd_cpu_attention(ctx[th], o, q, kc, vc, n, pos, nh, nkv, hd, &e);
                    tt[r] = now() - t0;
                }
                double t = median(tt, 101), fl = 0;
                for (int i = 0; i < n; i++) fl += 4.0 * nh * hd * (pos + i + 1);
                printf("%-12s %-5s %6d %6d %4d %3d %10.1f %9s %9.2f   (pos %d, %d kv heads)\n", "attention", "F32",
                       nh, hd, n, th + 1, t * 1e6, "-", fl / t / 1e9, pos, nkv);
            }
        free(q), free(kc), free(vc), free(o);
    }

    /* top-k ids of logits rows (SmolLM2's vocabulary): one row with k = 1
     * (greedy decoding), 5 rows with k = 1 (verifying 4 drafts) and k = 8
     * (NASD with fillers), and one row with k = 1 and its probability (a
     * greedy draft with --draft-p-min: one more pass over the row, exp on
     * each value); cols = vocab, n = rows, GFLOP/s column = Gvalues/s */
    if (selected("top_k_rows", argc, argv)) {
        const int vocab = 49152, cfg[4][3] = {{1, 1, 0}, {5, 1, 0}, {5, 8, 0}, {1, 1, 1}};
        float *lg = malloc(sizeof(float) * 5 * vocab);
        int32_t ids[5 * 8];
        float probs[5 * 8];
        for (int k = 0; k < 5 * vocab; k++) lg[k] = frand() * 10.0f;
        for (int ci = 0; ci < 4; ci++)
            for (int th = 0; th < 2; th++) {
                double tt[101];
                int n = cfg[ci][0], k = cfg[ci][1];
                for (int r = 0; r < 101; r++) {
                    double t0 = now();
                    sd_cpu_top_k_rows(ctx[th], lg, n, vocab, k, ids, cfg[ci][2] ? probs : NULL);
                    tt[r] = now() - t0;
                }
                double t = median(tt, 101);
                printf("%-12s %-5s %6d %6d %4d %3d %10.1f %9.2f %9.2f   (k %d%s)\n", "top_k_rows", "F32",
                       vocab, vocab, n, th + 1, t * 1e6, 4.0 * n * vocab / t / 1e9,
                       (double)n * vocab / t / 1e9, k, cfg[ci][2] ? ", probabilities" : "");
            }
        free(lg);
    }

    /* The element-wise ops at SmolLM2's shapes, decode (n = 1) and a
     * 128-token prefill: rmsnorm over dim 576, rope on 9 query heads of 64,
     * swiglu over ffn 1536, embed of n rows of the Q8_0 576-wide table.
     * GB/s counts the activation bytes read and written (embed: the rows
     * read); the GFLOP/s column is Gelements/s. */
    if (selected("elementwise", argc, argv)) {
        const int dim = 576, ffn = 1536, hd = 64, nh = 9, vocab = 49152;
        float *xa = malloc(sizeof(float) * 128 * ffn), *xb = malloc(sizeof(float) * 128 * ffn),
              *xc = malloc(sizeof(float) * 128 * ffn), *wn = malloc(sizeof(float) * dim);
        size_t erb = row_bytes(SD_Q8_0, dim);
        uint8_t *table = malloc(erb * vocab);
        float *tmp = malloc(sizeof(float) * dim);
        int32_t ids[128];
        for (int k = 0; k < 128 * ffn; k++) xa[k] = frand(), xb[k] = frand();
        for (int k = 0; k < dim; k++) wn[k] = frand(), tmp[k] = frand();
        for (int r = 0; r < vocab; r++) sd_quantize_row(SD_Q8_0, tmp, table + r * erb, dim);
        for (int k = 0; k < 128; k++) ids[k] = (k * 7919) % vocab;
        sd_weight emb = {SD_Q8_0, vocab, dim, erb, table};
        const char *ops[4] = {"rmsnorm", "rope", "swiglu", "embed"};
        for (int op = 0; op < 4; op++)
            for (int ni = 0; ni < 2; ni++)
                for (int th = 0; th < 2; th++) {
                    int n = ni ? 128 : 1;
                    double tt[101], bytes = 0, elems = 0;
                    for (int r = 0; r < 101; r++) {
                        double t0 = now();
                        switch (op) {
                        case 0: sd_cpu_rmsnorm(ctx[th], xc, xa, wn, n, dim, 1e-5f); break;
                        case 1: sd_cpu_rope(ctx[th], xc, n, 511, nh, hd, hd, 10000.0f, 0); break;
                        case 2: sd_cpu_swiglu(ctx[th], xc, xa, xb, (size_t)n * ffn); break;
                        default: sd_cpu_embed(ctx[th], xc, &emb, ids, n, &e); break;
                        }
                        tt[r] = now() - t0;
                    }
                    switch (op) {
                    case 0: elems = (double)n * dim, bytes = 8.0 * elems; break;
                    case 1: elems = (double)n * nh * hd, bytes = 8.0 * elems; break;
                    case 2: elems = (double)n * ffn, bytes = 12.0 * elems; break;
                    default: elems = (double)n * dim, bytes = (double)n * erb + 4.0 * elems; break;
                    }
                    double t = median(tt, 101);
                    printf("%-12s %-5s %6d %6d %4d %3d %10.1f %9.2f %9.2f\n", ops[op],
                           op == 3 ? "Q8_0" : "F32", op == 3 ? vocab : 1, op == 2 ? ffn : dim, n,
                           th + 1, t * 1e6, bytes / t / 1e9, elems / t / 1e9);
                }
        free(xa), free(xb), free(xc), free(wn), free(table), free(tmp);
    }

    /* SmolLM2-135M estimates: per layer q,o (576x576), k,v (192x576),
     * gate,up (1536x576), down (576x1536); 30 layers; Q8_0 head. */
    for (int th = 0; th < 2 && argc < 2; th++) {
        double layer = 2 * t_dec[0][th] + 2 * t_dec[1][th] + 2 * t_dec[2][th] + t_dec[3][th];
        double tok = 30 * layer + t_dec[4][th];
        double bytes = 30.0 * (2 * 576 * 576 + 2 * 192 * 576 + 3 * 1536 * 576) / 32 * 20 +
                       49152.0 * 576 / 32 * 34;
        double pl = 2 * t_pre[0][th] + 2 * t_pre[1][th] + 2 * t_pre[2][th] + t_pre[3][th];
        double pre_all = 30 * pl + t_pre[4][th];
        double lm = t_multi[0][0][th] + t_dec[0][th] + t_multi[1][0][th] + t_dec[3][th];
        double tokm = 30 * lm + t_dec[4][th];
        double plm = t_multi[0][1][th] + t_pre[0][th] + t_multi[1][1][th] + t_pre[3][th];
        printf("# SmolLM2-135M Q4_1, %d thread%s, fused calls (qkv, o, gate+up, down; head): decode "
               "%.0f us/token -> %.1f tok/s (%.2f GB/s); prefill 128: %.0f tok/s (head on the last row "
               "only: %.0f tok/s)\n",
               th + 1, th ? "s" : "", tokm * 1e6, 1 / tokm, bytes / tokm / 1e9,
               128 / (30 * plm + t_pre[4][th]), 128 / (30 * plm + t_dec[4][th]));
        printf("# SmolLM2-135M Q4_1, %d thread%s: decode matvecs %.0f us/token -> %.1f tok/s (%.2f GB/s "
               "of %.1f MB weights); prefill 128 matmuls %.1f ms -> %.0f tok/s (%.0f tok/s if the head "
               "runs on the last row only)\n",
               th + 1, th ? "s" : "", tok * 1e6, 1 / tok, bytes / tok / 1e9, bytes / 1e6, pre_all * 1e3,
               128 / pre_all, 128 / (30 * pl + t_dec[4][th]));
    }
    sd_cpu_destroy(ctx[0]);
    sd_cpu_destroy(ctx[1]);
    free(a), free(x), free(out);
    return 0;
}
