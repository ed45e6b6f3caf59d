/* Warp-level matrix multiply-accumulate, one warp computing a 16x8 tile
 * (mv_mma.cuh builds the multi-row products on it): D = A . B + C over int8
 * operands with int32 accumulators, and over bf16 or f16 operands with f32
 * accumulators.
 *
 * Fragment layouts (PTX ISA, mma.m16n8k32 / m16n8k16 with .s8 operands).
 * Lane l is g = l / 4 ("group") and t = l % 4 (its place in the group); a
 * 32-bit register holds four consecutive int8 elements, the lowest byte
 * first.
 *   m16n8k32  A, 16 x 32 row-major, four registers:
 *               a[0] row g,     k 4t..4t+3       a[2] row g,     k 16+4t..16+4t+3
 *               a[1] row g + 8, k 4t..4t+3       a[3] row g + 8, k 16+4t..16+4t+3
 *             B, 32 x 8 column-major, two registers:
 *               b[0] column g, k 4t..4t+3        b[1] column g,  k 16+4t..16+4t+3
 *   m16n8k16  A two registers: a[0] row g, a[1] row g + 8, both k 4t..4t+3;
 *             B one register: b[0] column g, k 4t..4t+3
 *   C/D, 16 x 8 int32, four registers (both shapes):
 *               c[0] row g, column 2t            c[1] row g, column 2t + 1
 *               c[2] row g + 8, column 2t        c[3] row g + 8, column 2t + 1
 * 16-bit floats (mma.m16n8k16 with .bf16 or .f16 operands, .f32 C/D): a
 * 32-bit register holds two consecutive elements, the lower k in the low
 * half.
 *   A, 16 x 16 row-major, four registers:
 *               a[0] row g,     k 2t, 2t+1       a[2] row g,     k 8+2t, 8+2t+1
 *               a[1] row g + 8, k 2t, 2t+1       a[3] row g + 8, k 8+2t, 8+2t+1
 *   B, 16 x 8 column-major, two registers:
 *               b[0] column g, k 2t, 2t+1        b[1] column g, k 8+2t, 8+2t+1
 *   C/D, 16 x 8 float, four registers, placed as the int32 ones.
 * Every lane of the warp calls them together, converged.
 *
 * On the device (sm_80 and newer, the only targets the Makefile builds) they
 * are one mma.sync instruction each. Elsewhere (the CPU emulator,
 * tests/cuda_emu, which compiles the kernels with g++ and runs no inline
 * PTX) the warp stages its fragments in shared memory and each lane forms
 * its four sums from the rows and columns it owns: the integer result is
 * the instruction's, exactly (int32 sums of at most 32 products of int8
 * cannot overflow, so the order does not matter). For 16-bit floats each
 * output is c + s, s the f32 sum of its 16 products in k order (0 + p0 +
 * p1 + ... + p15): a product of two bf16 or two f16 is exact in f32 (8 + 8
 * or 11 + 11 significant bits; bf16 products below f32's range aside), so
 * only the sum rounds. The instruction adds them in an order and with an
 * internal width of its own: the two agree to the f32 rounding of a
 * 16-term sum, not bit for bit. Staging costs two warp barriers a call
 * where shuffles would cost one collective a register. */
#ifndef SD_CUDA_MMA_CUH
#define SD_CUDA_MMA_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "kernels/cuda/mma.cuh: mma.sync with int8 and bf16 operands needs sm_80 or newer"
#endif

#if !defined(__CUDA_ARCH__)
/* Warps of the largest block CUDA allows (1024 threads): a stage for each. */
enum { MMA_EMU_WARPS = 32 };

/* Sum of the four int8 products of words a and b. */
__device__ __forceinline__ int mma_dot4(unsigned a, unsigned b) {
    int s = 0;
    for (int i = 0; i < 4; i++) s += (int)(int8_t)(a >> 8 * i) * (int)(int8_t)(b >> 8 * i);
    return s;
}

/* The portable form of both shapes: ka registers of A and kb of B a lane
 * (4 and 2 for k32, 2 and 1 for k16), staged per warp. */
template <int K32>
__device__ __forceinline__ void mma_s8_emu(int c[4], const unsigned *a, const unsigned *b) {
    __shared__ unsigned mma_stage[MMA_EMU_WARPS][32][6];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    unsigned(*s)[6] = mma_stage[warp];
    for (int r = 0; r < (K32 ? 4 : 2); r++) s[lane][r] = a[r];
    for (int r = 0; r < (K32 ? 2 : 1); r++) s[lane][4 + r] = b[r];
    __syncwarp();
    for (int q = 0; q < 4; q++) { /* the k words lane 4x + q holds */
        const unsigned *ar = s[4 * g + q], *b0 = s[4 * (2 * t) + q], *b1 = s[4 * (2 * t + 1) + q];
        c[0] += mma_dot4(ar[0], b0[4]);
        c[1] += mma_dot4(ar[0], b1[4]);
        c[2] += mma_dot4(ar[1], b0[4]);
        c[3] += mma_dot4(ar[1], b1[4]);
        if (K32) {
            c[0] += mma_dot4(ar[2], b0[5]);
            c[1] += mma_dot4(ar[2], b1[5]);
            c[2] += mma_dot4(ar[3], b0[5]);
            c[3] += mma_dot4(ar[3], b1[5]);
        }
    }
    __syncwarp(); /* the stage is read before the next call writes it */
}

/* The 16-bit float at the low half of h as a float (BF: bf16, else f16). */
template <int BF>
__device__ __forceinline__ float mma_h2f(unsigned h) {
    if (BF) return __uint_as_float(h << 16);
    return __half2float(__ushort_as_half((unsigned short)(h & 0xffffu)));
}

/* Element k of one row of A or column of B from the stage of the lane that
 * holds it (lane 4x + k % 8 / 2): slot r for k 0..7, r + 1 for k 8..15,
 * odd k in the high half. */
template <int BF>
__device__ __forceinline__ float mma_elem(const unsigned *staged, int r, int k) {
    const unsigned w = staged[r + (k >= 8 ? 1 : 0)];
    return mma_h2f<BF>((k & 1) ? w >> 16 : w);
}

/* The portable form of the 16-bit float shapes (BF: bf16, else f16). */
template <int BF>
__device__ __forceinline__ void mma_h_emu(float c[4], const unsigned a[4], const unsigned b[2]) {
    __shared__ unsigned mma_hstage[MMA_EMU_WARPS][32][6];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    unsigned(*s)[6] = mma_hstage[warp];
    /* stage the A registers in the order row g k lo, row g k hi, row g+8
     * k lo, row g+8 k hi: slots 0, 1 for row g, 2, 3 for row g + 8 */
    s[lane][0] = a[0], s[lane][1] = a[2], s[lane][2] = a[1], s[lane][3] = a[3];
    s[lane][4] = b[0], s[lane][5] = b[1];
    __syncwarp();
    for (int o = 0; o < 4; o++) {
        const int rs = o >> 1, n = 2 * t + (o & 1); /* row g + 8 rs, column n */
        float sum = 0.f;
        for (int k = 0; k < 16; k++) {
            const int q = (k & 7) >> 1; /* the lane in the group that holds k */
            sum += mma_elem<BF>(s[4 * g + q], 2 * rs, k) * mma_elem<BF>(s[4 * n + q], 4, k);
        }
        c[o] += sum;
    }
    __syncwarp(); /* the stage is read before the next call writes it */
}
#endif

/* c += A . B, m16n8k32 (layouts above). */
__device__ __forceinline__ void mma_s8_k32(int c[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    mma_s8_emu<1>(c, a, b);
#endif
}

/* c += A . B, m16n8k16 (layouts above). */
__device__ __forceinline__ void mma_s8_k16(int c[4], const unsigned a[2], unsigned b) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b));
#else
    mma_s8_emu<0>(c, a, &b);
#endif
}

/* c += A . B, m16n8k16 with bf16 operands (layouts above). */
__device__ __forceinline__ void mma_bf16_k16(float c[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    mma_h_emu<1>(c, a, b);
#endif
}

/* c += A . B, m16n8k16 with f16 operands (layouts above). */
__device__ __forceinline__ void mma_f16_k16(float c[4], const unsigned a[4], const unsigned b[2]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    mma_h_emu<0>(c, a, b);
#endif
}

#endif
