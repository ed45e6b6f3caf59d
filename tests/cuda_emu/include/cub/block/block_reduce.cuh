/* cuda-emu: cub::BlockReduce as the kernels use it. Every thread stores its
 * value in the shared TempStorage, a __syncthreads, then thread 0 folds them
 * in thread order; as in CUB, only thread 0's result is defined (the others
 * get their own input back), and reusing the storage needs a __syncthreads
 * first. */
#ifndef CUDA_EMU_CUB_BLOCK_REDUCE_CUH
#define CUDA_EMU_CUB_BLOCK_REDUCE_CUH

#include "cuda_runtime.h"

namespace cub {

struct Sum {
    template <class T>
    T operator()(const T &a, const T &b) const { return a + b; }
};

template <class T, int THREADS>
class BlockReduce {
  public:
    struct TempStorage {
        T v[THREADS];
    };
    explicit BlockReduce(TempStorage &t) : t_(t) {}
    template <class Op>
    T Reduce(T x, Op op) {
        const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
        if (blockDim.x * blockDim.y * blockDim.z != THREADS)
            emu::fail("cub::BlockReduce<%d threads> used in a block of %u threads", THREADS,
                      blockDim.x * blockDim.y * blockDim.z);
        t_.v[tid] = x;
        __syncthreads();
        if (tid != 0) return x;
        T acc = t_.v[0];
        for (int i = 1; i < THREADS; i++) acc = op(acc, t_.v[i]);
        return acc;
    }
    T Sum(T x) { return Reduce(x, cub::Sum()); }

  private:
    TempStorage &t_;
};

} /* namespace cub */

#endif
