/* Warp-level integer matrix multiply-accumulate: D = A . B + C over int8
 * operands with int32 accumulators, one warp computing a 16x8 tile
 * (mv_mma.cuh builds the multi-row products on it).
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
 * Every lane of the warp calls them together, converged.
 *
 * On the device (sm_80 and newer, the only targets the Makefile builds) they
 * are one mma.sync instruction each. Elsewhere (the CPU emulator,
 * tests/cuda_emu, which compiles the kernels with g++ and runs no inline
 * PTX) the warp stages its fragments in shared memory and each lane forms
 * its four sums from the rows and columns it owns: the integer result is
 * the instruction's, exactly (int32 sums of at most 32 products of int8
 * cannot overflow, so the order does not matter). Staging costs two warp
 * barriers a call where shuffles would cost one collective a register. */
#ifndef SD_CUDA_MMA_CUH
#define SD_CUDA_MMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "kernels/cuda/mma.cuh: mma.sync with int8 operands needs sm_80 or newer"
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

#endif
