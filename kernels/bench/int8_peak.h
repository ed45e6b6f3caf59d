/* The machine's int8 multiply-add peak, for the benchmarks that report a
 * share of it (kernels/bench/bench_cpu_kernels.c, engine/bench/bench_model.c).
 * Header-only. sd_int8_peak(threads, sd_peak_thread): vpdpbusd (AVX-512
 * VNNI) or vpmaddubsw (AVX2), 0 below AVX2; sd_int8_peak(threads,
 * sd_peak_amx_thread): AMX tdpbusd, only where sd_cpu_isa_detect() reports
 * SD_ISA_AMX (the tile state must have been granted). */
#ifndef SD_INT8_PEAK_H
#define SD_INT8_PEAK_H

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "kernels/cpu/cpu.h"

/* ---- measurement ---------------------------------------------------------
 * 12 independent accumulators (more than the multiply latency x the ports),
 * 20000 iterations a window (~0.3 ms, under a scheduler slice), best of 60
 * windows. Returns int8 ops/s (2 per u8 x s8 product). */
enum { PEAK_IT = 20000, PEAK_WIN = 60 };
static double sd_peak_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* best = the shortest of PEAK_WIN timed runs of the statements given */
#define SD_PEAK_WINDOWS(best, ...)                                                                 \
    do {                                                                                           \
        best = 1e30;                                                                               \
        for (int r_ = 0; r_ < PEAK_WIN; r_++) {                                                    \
            const double t0_ = sd_peak_now();                                                      \
            __VA_ARGS__                                                                            \
            const double t_ = sd_peak_now() - t0_;                                                 \
            if (t_ < best) best = t_;                                                              \
        }                                                                                          \
    } while (0)
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double sd_peak_vnni(void) {
    __m512i a[12];
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_epi32(k);
    __m512i u = _mm512_set1_epi8(3), v = _mm512_set1_epi8(-2);
    double best;
    /* the empty asm keeps the loop a loop */
    SD_PEAK_WINDOWS(best, for (int i = 0; i < PEAK_IT; i++) {
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) a[k] = _mm512_dpbusd_epi32(a[k], u, v);
        __asm__ volatile("" : "+v"(u));
    });
    int sink = 0;
    for (int k = 0; k < 12; k++) sink += _mm512_reduce_add_epi32(a[k]);
    __asm__ volatile("" ::"r"(sink));
    return 12.0 * PEAK_IT * 64 * 2 / best;
}
__attribute__((target("avx2"))) static double sd_peak_avx2(void) {
    __m256i a[12];
    for (int k = 0; k < 12; k++) a[k] = _mm256_set1_epi16((short)k);
    __m256i u = _mm256_set1_epi8(3), v = _mm256_set1_epi8(-2);
    double best;
    SD_PEAK_WINDOWS(best, for (int i = 0; i < PEAK_IT; i++) {
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) a[k] = _mm256_add_epi16(a[k], _mm256_maddubs_epi16(u, v));
        __asm__ volatile("" : "+v"(u));
    });
    int sink = 0;
    for (int k = 0; k < 12; k++) sink += _mm256_extract_epi16(a[k], 0);
    __asm__ volatile("" ::"r"(sink));
    return 12.0 * PEAK_IT * 32 * 2 / best;
}
/* AMX-INT8: tdpbusd on 4 independent 16 x 64 accumulator tiles (16 x 16
 * x 64 products each), same windows. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} sd_peak_tilecfg;
static const sd_peak_tilecfg sd_peak_cfg __attribute__((aligned(64))) = {
    .palette = 1, .colsb = {64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16}};
__attribute__((target("amx-tile,amx-int8"))) static double sd_peak_amx(void) {
    static const uint8_t src[16 * 64] __attribute__((aligned(64))) = {3};
    _tile_loadconfig(&sd_peak_cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, src, 64);
    _tile_loadd(5, src, 64);
    double best;
    SD_PEAK_WINDOWS(best, for (int i = 0; i < PEAK_IT / 16; i++) {
        _tile_dpbusd(0, 4, 5);
        _tile_dpbusd(1, 4, 5);
        _tile_dpbusd(2, 4, 5);
        _tile_dpbusd(3, 4, 5);
    });
    _tile_release();
    return 4.0 * (PEAK_IT / 16) * 16 * 16 * 64 * 2 / best;
}
static void *sd_peak_amx_thread(void *arg) {
    *(double *)arg = sd_peak_amx();
    return NULL;
}
static void *sd_peak_thread(void *arg) {
    *(double *)arg = sd_cpu_isa_detect() >= SD_ISA_AVX512_VNNI ? sd_peak_vnni()
                     : sd_cpu_isa_detect() >= SD_ISA_AVX2      ? sd_peak_avx2()
                                                               : 0;
    return NULL;
}
/* peak of th threads running at once: the sum of their rates */
static double sd_int8_peak(int th, void *(*fn)(void *)) {
    pthread_t tid[2];
    double r[2] = {0, 0};
    for (int t = 1; t < th; t++) pthread_create(&tid[t], NULL, fn, &r[t]);
    fn(&r[0]);
    for (int t = 1; t < th; t++) pthread_join(tid[t], NULL);
    return r[0] + r[1];
}

#endif
