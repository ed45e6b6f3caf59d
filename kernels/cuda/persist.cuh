/* Dependency flags between the blocks of one persistent (cooperative)
 * launch: a block that produced a work item adds to the item's flag, a
 * block that reads the item waits until the flag reaches the count it needs.
 * Flags are unsigned counters in device memory that only grow: zeroed
 * before a launch, or, as the persistent step keeps them (step.cu
 * "Epochs"), waited for at the value the launch's producers bring them to.
 *
 * Memory model: the producer's release (a gpu-scope fence before the add)
 * orders every write before it, and the consumer's acquire load that sees
 * the added value makes those writes visible to the loading thread. Only
 * thread 0 of a block touches the flag, so the __syncthreads on either side
 * carries the ordering to the rest of the block: before the release it makes
 * every thread's writes precede thread 0's, after the acquire it makes
 * thread 0's view everyone's.
 *
 * Under the CUDA emulator (tests/cuda_emu/README.md) the wait is a load and
 * emu::spin, which lets the other blocks' fibers run until the flag changes
 * and reports a deadlock (with `what`) when no block can go on. */
#ifndef SD_CUDA_PERSIST_CUH
#define SD_CUDA_PERSIST_CUH

#include <cuda_runtime.h>

/* Every thread of the block calls it: thread 0 waits until *flag >= target,
 * then the block meets at a barrier. what labels the wait in the emulator's
 * deadlock report (the work item, say). */
__device__ __forceinline__ void cu_flag_wait(const unsigned *flag, unsigned target, int what) {
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        unsigned v;
#ifdef CUDA_EMU
        while ((v = *(const volatile unsigned *)flag) < target)
            emu::spin(flag, v, target, what, __FILE__, __LINE__);
#else
        (void)what;
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
            if (v >= target) break;
            __nanosleep(100);
        }
#endif
    }
    __syncthreads();
}

/* Every thread of the block calls it after its writes: the block meets at a
 * barrier, then thread 0 adds v to *flag with release semantics. */
__device__ __forceinline__ void cu_flag_add(unsigned *flag, unsigned v) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
#ifdef CUDA_EMU
        atomicAdd(flag, v);
#else
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" : : "l"(flag), "r"(v) : "memory");
#endif
    }
}

/* cu_flag_add to two flags at once (one barrier): an item counted both in
 * its stage and in a chunk of it. */
__device__ __forceinline__ void cu_flag_add2(unsigned *f0, unsigned *f1, unsigned v) {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
#ifdef CUDA_EMU
        atomicAdd(f0, v);
        atomicAdd(f1, v);
#else
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" : : "l"(f0), "r"(v) : "memory");
        asm volatile("red.release.gpu.global.add.u32 [%0], %1;" : : "l"(f1), "r"(v) : "memory");
#endif
    }
}

#endif
