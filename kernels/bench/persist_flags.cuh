/* The persistent step's dependency flags (kernels/cuda/persist.cuh) in the
 * two shapes a step uses them, as cooperative launches: one producer and one
 * consumer (an item-level wait), and every block of the grid producing into
 * one flag and waiting for all of it (a stage-level wait). The
 * microbenchmark (kernels/bench/bench_persist_cuda.cu) times them on a GPU;
 * the emulator's suite (tests/cuda_emu/test_emu_flags.c) runs them with few
 * rounds and checks the counts and the payloads.
 *
 * Each release carries a payload written by another thread of the block
 * than the one that adds to the flag, and read after the wait by another
 * thread than the one that polled: a payload not yet visible after its wait
 * (the release or acquire, or the barriers that carry them to the block,
 * wrong) counts in *bad. */
#ifndef SD_BENCH_PERSIST_FLAGS_CUH
#define SD_BENCH_PERSIST_FLAGS_CUH

#include <cuda_runtime.h>

#include "kernels/cuda/persist.cuh"

enum { PF_THREADS = 128 };

/* n round trips between block 0 and the last block: flags[0] counts block
 * 0's releases, flags[1] the last block's. In round i block 0 writes i + 1
 * to data[0] and releases flags[0], then waits for flags[1] >= i + 1 and
 * finds i + 1 in data[1]; the last block waits for flags[0] >= i + 1, finds
 * i + 1 in data[0], writes it to data[1] and releases flags[1]. The other
 * blocks (the grid is one a multiprocessor, so the two are on different
 * ones) return at once. After the launch both flags are n. */
__global__ void pf_pingpong(unsigned *flags, unsigned *data, unsigned *bad, int n) {
    const unsigned last = gridDim.x - 1, me = threadIdx.x == PF_THREADS - 1;
    if (blockIdx.x != 0 && blockIdx.x != last) return;
    for (unsigned i = 1; i <= (unsigned)n; i++) {
        if (blockIdx.x == 0) {
            if (me) data[0] = i;
            cu_flag_add(&flags[0], 1);
            cu_flag_wait(&flags[1], i, 1);
            if (me && *(volatile unsigned *)&data[1] != i) atomicAdd(bad, 1u);
        } else {
            cu_flag_wait(&flags[0], i, 0);
            if (me) {
                if (*(volatile unsigned *)&data[0] != i) atomicAdd(bad, 1u);
                data[1] = i;
            }
            cu_flag_add(&flags[1], 1);
        }
    }
}

/* n stages of the whole grid (G blocks): in stage s (from 1) each block
 * writes s to data[its index], adds 1 to flags[0] and waits for it to reach
 * G * s, then finds s or s + 1 in the next block's data (s + 1 when that
 * block has already written its next stage; it cannot be further, since
 * stage s + 1 waits for this block's add). After the launch flags[0] is
 * G * n. */
__global__ void pf_stages(unsigned *flags, unsigned *data, unsigned *bad, int n) {
    const unsigned g = gridDim.x, next = (blockIdx.x + 1) % g, me = threadIdx.x == PF_THREADS - 1;
    for (unsigned s = 1; s <= (unsigned)n; s++) {
        if (me) data[blockIdx.x] = s;
        cu_flag_add(&flags[0], 1);
        cu_flag_wait(&flags[0], g * s, (int)s);
        if (me) {
            const unsigned v = *(volatile unsigned *)&data[next];
            if (v != s && v != s + 1) atomicAdd(bad, 1u);
        }
    }
}

/* The cooperative launches of the two kernels on grid blocks of PF_THREADS
 * (smem bytes of dynamic shared memory a block, which the kernels leave
 * unused: enough of it keeps one block a multiprocessor). flags (2), data
 * (2 for the ping-pong, grid for the stages) and *bad zeroed by the caller. */
static inline cudaError_t pf_pingpong_launch(int grid, size_t smem, unsigned *flags, unsigned *data,
                                             unsigned *bad, int n, cudaStream_t st) {
    void *args[] = {&flags, &data, &bad, &n};
    return cudaLaunchCooperativeKernel((void *)pf_pingpong, dim3(grid), dim3(PF_THREADS), args, smem, st);
}

static inline cudaError_t pf_stages_launch(int grid, size_t smem, unsigned *flags, unsigned *data,
                                           unsigned *bad, int n, cudaStream_t st) {
    void *args[] = {&flags, &data, &bad, &n};
    return cudaLaunchCooperativeKernel((void *)pf_stages, dim3(grid), dim3(PF_THREADS), args, smem, st);
}

#endif
