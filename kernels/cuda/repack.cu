/* Upload-time conversion of quantised GGUF rows (already on the device, raw,
 * row_bytes apart) into the kernels' layout (cuda_int.h): values of a row
 * end to end, scales in their own array. One thread per 32-element block;
 * byte copies, since GGUF blocks (34/18/20 bytes) have no alignment. */
#include "kernels/cuda/cuda_int.h"

__global__ void repack_kernel(uint8_t *q, uint8_t *sc, const uint8_t *raw, int64_t rows,
                              int64_t nb, size_t row_bytes, int type) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows * nb) return;
    const int64_t r = t / nb, b = t % nb;
    if (type == SD_Q8_0) {
        const uint8_t *src = raw + (size_t)r * row_bytes + (size_t)b * 34;
        uint8_t *dq = q + (size_t)t * 32, *ds = sc + (size_t)t * 2;
        ds[0] = src[0], ds[1] = src[1];
        for (int k = 0; k < 32; k++) dq[k] = src[2 + k];
    } else if (type == SD_Q4_0) {
        const uint8_t *src = raw + (size_t)r * row_bytes + (size_t)b * 18;
        uint8_t *dq = q + (size_t)t * 16, *ds = sc + (size_t)t * 2;
        ds[0] = src[0], ds[1] = src[1];
        for (int k = 0; k < 16; k++) dq[k] = src[2 + k];
    } else { /* Q4_1: d and m stay together as one little-endian word */
        const uint8_t *src = raw + (size_t)r * row_bytes + (size_t)b * 20;
        uint8_t *dq = q + (size_t)t * 16, *ds = sc + (size_t)t * 4;
        for (int k = 0; k < 4; k++) ds[k] = src[k];
        for (int k = 0; k < 16; k++) dq[k] = src[4 + k];
    }
}

int cu_repack(sd_cuda *c, void *dst, const void *raw, const sd_weight *w, sd_err *e) {
    const int64_t nb = w->cols / 32, total = w->rows * nb;
    uint8_t *q = (uint8_t *)dst, *sc = q + cu_scale_offset(w->type, w->rows, w->cols);
    const int64_t grid = (total + 255) / 256;
    repack_kernel<<<(unsigned)grid, 256, 0, c->stream>>>(q, sc, (const uint8_t *)raw, w->rows, nb,
                                                          w->row_bytes, (int)w->type);
    return cu_check_launch(c, e, "upload %s %lldx%lld repack", sd_wtype_name(w->type),
                           (long long)w->rows, (long long)w->cols);
}
