/* See ref_kernels.h. Everything in double, one output at a time. */
#include "tests/util/ref_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_half(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0) v = ldexp((double)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexp((double)(man + 1024), exp - 25);
    return sign ? -v : v;
}

double ref_bf16(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

int ref_dequant_row(uint32_t type, const void *row, double *out, int64_t cols) {
    const uint8_t *p = row;
    switch (type) {
    case 0: /* F32 */
        for (int64_t c = 0; c < cols; c++) {
            float f;
            memcpy(&f, p + 4 * c, 4);
            out[c] = f;
        }
        return 0;
    case 1: /* F16 */
        for (int64_t c = 0; c < cols; c++) out[c] = ref_half(u16(p + 2 * c));
        return 0;
    case 30: /* BF16 */
        for (int64_t c = 0; c < cols; c++) out[c] = ref_bf16(u16(p + 2 * c));
        return 0;
    case 8: /* Q8_0: d, 32 x int8 */
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = p + 34 * b;
            double d = ref_half(u16(blk));
            for (int k = 0; k < 32; k++) out[32 * b + k] = d * (int8_t)blk[2 + k];
        }
        return 0;
    case 2: /* Q4_0: d, 16 bytes; element k low nibble of byte k, k+16 high */
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = p + 18 * b;
            double d = ref_half(u16(blk));
            for (int k = 0; k < 32; k++) {
                int nib = k < 16 ? (blk[2 + k] & 15) : (blk[2 + k - 16] >> 4);
                out[32 * b + k] = d * (nib - 8);
            }
        }
        return 0;
    case 3: /* Q4_1: d, m, 16 bytes */
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = p + 20 * b;
            double d = ref_half(u16(blk)), m = ref_half(u16(blk + 2));
            for (int k = 0; k < 32; k++) {
                int nib = k < 16 ? (blk[4 + k] & 15) : (blk[4 + k - 16] >> 4);
                out[32 * b + k] = d * nib + m;
            }
        }
        return 0;
    case 6: /* Q5_0: d, qh (u32 LE), 16 bytes; fifth bit of element k is bit k of qh */
        for (int64_t b = 0; b < cols / 32; b++) {
            const uint8_t *blk = p + 22 * b;
            double d = ref_half(u16(blk));
            uint32_t qh = (uint32_t)u16(blk + 2) | (uint32_t)u16(blk + 4) << 16;
            for (int k = 0; k < 32; k++) {
                int nib = k < 16 ? (blk[6 + k] & 15) : (blk[6 + k - 16] >> 4);
                out[32 * b + k] = d * ((nib | (int)((qh >> k) & 1) * 16) - 16);
            }
        }
        return 0;
    case 12: /* Q4_K: d, dmin, 12 scale bytes, 128 bytes in 4 chunks of 32 */
        for (int64_t b = 0; b < cols / 256; b++) {
            const uint8_t *blk = p + 144 * b, *sc = blk + 4;
            double d = ref_half(u16(blk)), dmin = ref_half(u16(blk + 2));
            for (int s = 0; s < 8; s++) {
                int scale, mn;
                if (s < 4) {
                    scale = sc[s] & 63;
                    mn = sc[s + 4] & 63;
                } else {
                    scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
                    mn = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
                }
                const uint8_t *chunk = blk + 16 + 32 * (s / 2);
                for (int i = 0; i < 32; i++) {
                    int nib = s % 2 ? chunk[i] >> 4 : chunk[i] & 15;
                    out[256 * b + 32 * s + i] = d * scale * nib - dmin * mn;
                }
            }
        }
        return 0;
    case 14: /* Q6_K: ql[128], qh[64], int8 scales[16], d */
        for (int64_t b = 0; b < cols / 256; b++) {
            const uint8_t *blk = p + 210 * b;
            double d = ref_half(u16(blk + 208));
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
                for (int l = 0; l < 32; l++) {
                    int q[4] = {(ql[l] & 15) | (qh[l] & 3) << 4, (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4,
                                (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4, (ql[l + 32] >> 4) | (qh[l] >> 6) << 4};
                    for (int k = 0; k < 4; k++) {
                        int e = 128 * h + l + 32 * k;
                        out[256 * b + e] = d * (int8_t)blk[192 + e / 16] * (q[k] - 32);
                    }
                }
            }
        }
        return 0;
    default: return -1;
    }
}

static void quant_act_blocks(const float *x, int64_t cols, int blk, double *xq, float *dblk) {
    for (int64_t b = 0; b < cols / blk; b++) {
        float amax = 0;
        for (int k = 0; k < blk; k++) {
            float a = fabsf(x[blk * b + k]);
            if (a > amax) amax = a;
        }
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        for (int k = 0; k < blk; k++) {
            float t = x[blk * b + k] * id;
            xq[blk * b + k] = (double)d * nearbyint((double)t);
        }
        if (dblk) dblk[b] = d;
    }
}
void ref_quant_act(const float *x, int64_t cols, double *xq, float *dblk) {
    quant_act_blocks(x, cols, 32, xq, dblk);
}
void ref_quant_act_k8(const float *x, int64_t cols, double *xq, float *dblk) {
    quant_act_blocks(x, cols, 256, xq, dblk);
}

static void matmul_impl(double *out, const sd_weight *w, const double *x, int n, int absval) {
    double *row = malloc(sizeof(double) * (size_t)w->cols);
    for (int64_t r = 0; r < w->rows; r++) {
        ref_dequant_row(w->type, (const uint8_t *)w->data + (size_t)r * w->row_bytes, row, w->cols);
        for (int i = 0; i < n; i++) {
            double s = 0;
            const double *xi = x + (size_t)i * w->cols;
            for (int64_t c = 0; c < w->cols; c++)
                s += absval ? fabs(row[c] * xi[c]) : row[c] * xi[c];
            out[(size_t)i * w->rows + r] = s;
        }
    }
    free(row);
}

void ref_matmul(double *out, const sd_weight *w, const double *x, int n) {
    matmul_impl(out, w, x, n, 0);
}
void ref_matmul_abs(double *out, const sd_weight *w, const double *x, int n) {
    matmul_impl(out, w, x, n, 1);
}

void ref_rmsnorm(double *out, const float *x, const float *w, int n, int dim, double eps) {
    for (int i = 0; i < n; i++) {
        double ss = 0;
        for (int k = 0; k < dim; k++) ss += (double)x[i * dim + k] * x[i * dim + k];
        double sc = 1.0 / sqrt(ss / dim + eps);
        for (int k = 0; k < dim; k++) out[i * dim + k] = x[i * dim + k] * sc * w[k];
    }
}

void ref_rope(double *out, const float *x, int n, int pos, int n_heads, int head_dim,
              int rope_dim, double base, int neox) {
    for (int i = 0; i < n; i++)
        for (int h = 0; h < n_heads; h++) {
            const float *v = x + ((size_t)i * n_heads + h) * head_dim;
            double *o = out + ((size_t)i * n_heads + h) * head_dim;
            for (int d = 0; d < head_dim; d++) o[d] = v[d];
            for (int j = 0; j < rope_dim / 2; j++) {
                double th = (pos + i) * pow(base, -2.0 * j / rope_dim);
                int d0 = neox ? j : 2 * j, d1 = neox ? j + rope_dim / 2 : 2 * j + 1;
                double a = v[d0], b = v[d1];
                o[d0] = a * cos(th) - b * sin(th);
                o[d1] = a * sin(th) + b * cos(th);
            }
        }
}

void ref_attention(double *out, const float *q, const float *kc, const float *vc, int n,
                   int pos, int n_head, int n_kv, int head_dim) {
    int group = n_head / n_kv, len_max = pos + n;
    double *sc = malloc(sizeof(double) * (size_t)len_max);
    for (int i = 0; i < n; i++)
        for (int h = 0; h < n_head; h++) {
            const float *qi = q + ((size_t)i * n_head + h) * head_dim;
            int kh = h / group, len = pos + i + 1;
            double mx = -INFINITY, sum = 0;
            for (int t = 0; t < len; t++) {
                const float *k = kc + ((size_t)t * n_kv + kh) * head_dim;
                double s = 0;
                for (int d = 0; d < head_dim; d++) s += (double)qi[d] * k[d];
                sc[t] = s / sqrt((double)head_dim);
                if (sc[t] > mx) mx = sc[t];
            }
            for (int t = 0; t < len; t++) sum += (sc[t] = exp(sc[t] - mx));
            double *o = out + ((size_t)i * n_head + h) * head_dim;
            for (int d = 0; d < head_dim; d++) {
                double s = 0;
                for (int t = 0; t < len; t++) s += sc[t] * vc[((size_t)t * n_kv + kh) * head_dim + d];
                o[d] = s / sum;
            }
        }
    free(sc);
}

void ref_swiglu(double *out, const float *gate, const float *up, size_t count) {
    for (size_t i = 0; i < count; i++) {
        double g = gate[i];
        out[i] = g / (1.0 + exp(-g)) * up[i];
    }
}

/* a comes before b: larger value, or the same value at a lower index */
static int before(const float *x, int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); }

void ref_top_k(const float *x, int n, int k, int32_t *ids) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if ((j == 0 || before(x, ids[j - 1], i)) && (best < 0 || before(x, i, best))) best = i;
        ids[j] = best;
    }
}
