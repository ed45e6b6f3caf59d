/* The amx level's products: the repacked Q4_K and Q6_K (SD_Q4_K_X16,
 * SD_Q6_K_X16) against k8 activations, every whole 16 activation rows of
 * them (prefill, long verifications) through the tile unit (amx_k8) and
 * the rest through the VNNI level's k8 tiles; every other weight takes
 * the VNNI level's products (matmul_avx512vnni.c, which also gives the k8
 * sums these tiles compute). Chosen at run time when the CPU has AMX-TILE
 * and AMX-INT8 and the kernel grants this process the tile state (ctx.c).
 *
 * The float steps run in the VNNI tiles' order, so a row has the same bits
 * in an n-row call as alone. The scales go into the B tiles. sc x code
 * does not fit a byte, so it is split: v = 2^sh h + l (Q4_K: sh = 3,
 * h = (sc >> 3) x code, l = (sc & 7) x code, both <= 105; Q6_K:
 * v = sc x (code - 32) in [-4064, 4096], sh = 6, h = v >> 6 in [-64, 64],
 * l = v & 63). Two C tiles take A . Bh and A . Bl over the whole
 * super-block (K = 64 bytes a step, four steps), and I = 2^sh Ch + Cl +
 * c0, where c0 = -128 x (2^sh sum(h) + sum(l)) removes the unsigned
 * activations' +128. Largest value: Q6_K 2^6 x 256 x 255 x 64 < 2^28. */
#include "kernels/cpu/mm_simd.h"

/* tdpbusd C += A . B over tiles: A is 16 activation rows x 64 bytes taken
 * as unsigned (k8 codes + 128), B 16 rows of 16 x 4 signed bytes (4
 * consecutive elements of each of 16 weight rows), C 16 x 16 int32
 * (activation row x weight row). B is the repacked groups' layout: a
 * 64-byte piece of Q4_K codes gives two B rows (low nibbles: elements
 * 8q..8q+3 of the sub-block, high: 8q+4..8q+7), Q6_K's four code
 * registers of a sub-block four rows; the unpacking multiplies in the
 * scales and splits (above). Loop: per group of 16 weight rows and batch
 * of up to AMX_ROWS activation rows, each super-block is unpacked once
 * and serves every 16-row tile of the batch; the batch's float sums wait
 * in amx_acc between super-blocks. Tiles: C 0 (h), 1 (l); A 2, 3 and B
 * 4/5, 6/7 alternate by step. */
enum { AMX_ROWS = 256 };
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tilecfg;
/* A static table: GCC 12 drops the stores into a local configuration as
 * dead before ldtilecfg reads it. */
static const amx_tilecfg amx_cfg __attribute__((aligned(64))) = {
    .palette = 1, .colsb = {64, 64, 64, 64, 64, 64, 64, 64}, .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

/* One super-block of 16 weight rows unpacked: the B rows of h and l, c0,
 * d (D) and Q4_K's dmin (M) and min pairs. */
typedef struct {
    uint8_t h[4096] __attribute__((aligned(64)));
    uint8_t l[4096] __attribute__((aligned(64)));
    __m512i c0, mp[4];
    __m512 D, M;
} amx_sb;

/* v in both 16-bit halves of each lane (codes of one weight row share a
 * lane's 4 bytes, so one vpmullw scales two byte codes at once while
 * every product stays below 256) */
AI __m512i amx_dup16(__m512i v) { return _mm512_or_si512(v, _mm512_slli_epi32(v, 16)); }

static void amx_unpack_q4k(const uint8_t *G, amx_sb *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), ones = _mm512_set1_epi8(1), s7 = _mm512_set1_epi32(7);
    __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
    for (int s = 0; s < 8; s++) {
        __m128i sc, mn;
        x16_scales(G, s, &sc, &mn);
        const __m512i sc32 = _mm512_cvtepu8_epi32(sc);
        const __m512i H = amx_dup16(_mm512_srli_epi32(sc32, 3)), L = amx_dup16(_mm512_and_si512(sc32, s7));
        for (int q = 0; q < 4; q++) {
            const __m512i c = _mm512_loadu_si512((const void *)(G + 256 + 256 * s + 64 * q));
            const __m512i lo = _mm512_and_si512(c, m4), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), m4);
            const __m512i hl = _mm512_mullo_epi16(lo, H), hh = _mm512_mullo_epi16(hi, H);
            const __m512i ll = _mm512_mullo_epi16(lo, L), lh = _mm512_mullo_epi16(hi, L);
            uint8_t *bh = u->h + 512 * s + 128 * q, *bl = u->l + 512 * s + 128 * q;
            _mm512_store_si512((void *)bh, hl);
            _mm512_store_si512((void *)(bh + 64), hh);
            _mm512_store_si512((void *)bl, ll);
            _mm512_store_si512((void *)(bl + 64), lh);
            sh = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sh, ones, hl), ones, hh);
            sl = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sl, ones, ll), ones, lh);
        }
    }
    u->c0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(sh, 3), sl), 7));
    q4k_min_pairs(G, u->mp);
    u->D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
    u->M = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(G + 32)));
}

static void amx_unpack_q6k(const uint8_t *G, amx_sb *u) {
    const __m512i ones = _mm512_set1_epi8(1), b32 = _mm512_set1_epi8(32);
    const __m512i lo8 = _mm512_set1_epi16(0xff), m63 = _mm512_set1_epi16(63), w16 = _mm512_set1_epi32(0xffff);
    __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
    for (int j = 0; j < 16; j++) {
        const uint8_t *P = G + 288 + 192 * j;
        const __m512i S = amx_dup16(_mm512_and_si512(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(G + 32 + 16 * j))), w16));
        __m512i c[4];
        q6x16_codes512(_mm512_loadu_si512((const void *)P), _mm512_loadu_si512((const void *)(P + 64)),
                       _mm512_loadu_si512((const void *)(P + 128)), c);
        for (int k = 0; k < 4; k++) {
            /* even and odd bytes as int16, scaled, split, put back */
            const __m512i cs = _mm512_sub_epi8(c[k], b32);
            const __m512i ve = _mm512_mullo_epi16(_mm512_srai_epi16(_mm512_slli_epi16(cs, 8), 8), S);
            const __m512i vo = _mm512_mullo_epi16(_mm512_srai_epi16(cs, 8), S);
            const __m512i h = _mm512_or_si512(_mm512_and_si512(_mm512_srai_epi16(ve, 6), lo8),
                                              _mm512_slli_epi16(_mm512_srai_epi16(vo, 6), 8));
            const __m512i l = _mm512_or_si512(_mm512_and_si512(ve, m63), _mm512_slli_epi16(_mm512_and_si512(vo, m63), 8));
            _mm512_store_si512((void *)(u->h + 256 * j + 64 * k), h);
            _mm512_store_si512((void *)(u->l + 256 * j + 64 * k), l);
            sh = _mm512_dpbusd_epi32(sh, ones, h);
            sl = _mm512_dpbusd_epi32(sl, ones, l);
        }
    }
    u->c0 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(sh, 6), sl), 7));
    u->D = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)G));
}

/* Step s (64 bytes) of a super-block for the 16 activation rows at row i
 * of the call (tile numbers are literals: the intrinsics paste them into
 * the instruction). */
#define AMX_STEP(A, BH, BL, s)                                                                     \
    do {                                                                                           \
        _tile_loadd(A, xu + (size_t)i * cols + 256 * sb + 64 * (s), cols);                         \
        _tile_loadd(BH, u.h + 1024 * (s), 64);                                                     \
        _tile_loadd(BL, u.l + 1024 * (s), 64);                                                     \
        _tile_dpbusd(0, A, BH);                                                                    \
        _tile_dpbusd(1, A, BL);                                                                    \
    } while (0)

/* Activation rows [0, n16) of job j (n16 a multiple of 16) over the
 * groups of rows [r0, r1). */
AI void amx_k8_type(const sd_mm_job *j, int64_t r0, int64_t r1, int64_t n16, const int q6) {
    const sd_weight *w = j->w;
    const int64_t cols = w->cols, nsb = cols / 256, ns = cols / 32;
    const size_t sbytes = q6 ? 3360 : 2304;
    const int shift = q6 ? 6 : 3;
    const uint8_t *xu = j->xku;
    float amx_acc[AMX_ROWS][16] __attribute__((aligned(64)));
    amx_sb u;
    int32_t cbuf[2][16][16] __attribute__((aligned(64)));
    _tile_loadconfig(&amx_cfg);
    for (int64_t b0 = 0; b0 < n16; b0 += AMX_ROWS) {
        const int64_t nr = n16 - b0 < AMX_ROWS ? n16 - b0 : AMX_ROWS;
        for (int64_t r = r0; r < r1; r += 16) {
            const uint8_t *g = w->data + (size_t)r * w->row_bytes;
            for (int64_t sb = 0; sb < nsb; sb++) {
                if (q6) amx_unpack_q6k(g + sbytes * sb, &u);
                else amx_unpack_q4k(g + sbytes * sb, &u);
                for (int64_t t = 0; t < nr; t += 16) {
                    const int64_t i = b0 + t;
                    _tile_zero(0);
                    _tile_zero(1);
                    AMX_STEP(2, 4, 5, 0);
                    AMX_STEP(3, 6, 7, 1);
                    AMX_STEP(2, 4, 5, 2);
                    AMX_STEP(3, 6, 7, 3);
                    _tile_stored(0, cbuf[0], 64);
                    _tile_stored(1, cbuf[1], 64);
#pragma GCC unroll 16
                    for (int a = 0; a < 16; a++) {
                        const __m512i ch = _mm512_load_si512((const void *)cbuf[0][a]);
                        const __m512i cl = _mm512_load_si512((const void *)cbuf[1][a]);
                        const __m512i I = _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(ch, shift), cl), u.c0);
                        const __m512 dx = _mm512_set1_ps(j->xkd[(i + a) * nsb + sb]);
                        __m512 acc = sb ? _mm512_load_ps(amx_acc[t + a]) : _mm512_setzero_ps();
                        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I), _mm512_mul_ps(u.D, dx), acc);
                        if (!q6) {
                            const __m512i I2 = q4k_min_sum(u.mp, j->xks + (i + a) * ns + 8 * sb);
                            acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(I2), _mm512_mul_ps(u.M, dx), acc);
                        }
                        _mm512_store_ps(amx_acc[t + a], acc);
                    }
                }
            }
            x16_put(j, b0, nr, r, amx_acc);
        }
    }
    _tile_release();
}
static void amx_k8(const sd_mm_job *j, int64_t r0, int64_t r1, int64_t n16) {
    if (j->w->type == SD_Q6_K_X16) amx_k8_type(j, r0, r1, n16, 1);
    else amx_k8_type(j, r0, r1, n16, 0);
}
#undef AMX_STEP

/* The k8 products' row walk: groups of 16 rows (r0, r1 multiples of 16);
 * whole 16 activation rows through the tile unit, the rest through the
 * VNNI level's k8 tiles. */
static void mm_k8(const sd_mm_job *j, int64_t r0, int64_t r1) {
    int i0 = 0;
    if (j->n >= 16) {
        i0 = j->n / 16 * 16;
        amx_k8(j, r0, r1, i0);
    }
    if (i0 < j->n) sd_cpu_mm_k8_vnni(j, r0, r1, i0);
}

void sd_cpu_mm_amx(const sd_mm_job *j, int64_t r0, int64_t r1) {
    const uint32_t t = j->w->type;
    if ((t == SD_Q4_K_X16 || t == SD_Q6_K_X16) && j->xk) mm_k8(j, r0, r1);
    else sd_cpu_mm_avx512vnni(j, r0, r1);
}
