/* The persistent step's kernel that stages weight rows in shared memory
 * (SD_CUDA_STAGE=1, stage.cuh; step.cu builds and launches the work list,
 * step.cuh is the loop). A block that takes a matrix-vector item of a
 * stage with waits copies the item's weight rows into its staging buffer
 * (cp.async) when they fit (sg_plan), then takes its waits, then waits for
 * its copies and runs the item on the copy of its arguments in the buffer,
 * whose matrices point at the staged rows; an item whose rows do not fit
 * asks L2 for them, as step_kernel does. The buffer is free for the block's
 * next item once the item has passed the barrier after its flag count.
 * The copies read only weights, which no stage writes, and complete without
 * any other block, so the progress argument of step.cu holds: a block
 * still takes one item at a time and waits only for earlier ones.
 *
 * Its products run on the __dp4a and float tiles alone, their rows built
 * with mv_row<1> (ordinary loads, valid for shared memory): step.cu
 * launches it only for work lists without tensor-core stages. Staging the
 * tensor-core stages too, in one kernel with them, made ptxas run for over
 * 20 CPU minutes on one file (against about 4 for step_kernel); kept apart,
 * each kernel compiles in its own nvcc process and neither carries the
 * other's registers. */
#include "kernels/cuda/stage.cuh"
#include "kernels/cuda/step.cuh"

/* Fetches virtual block b's weight rows before its waits: staged in buf
 * when they fit (returns the staged arguments), else towards L2 (returns
 * args). Every thread of the block calls it and gets the same answer. */
__device__ __noinline__ const unsigned char *st_fetch(int kind, int variant, const unsigned char *args,
                                                     unsigned b, uint8_t *buf) {
    WsRun r[WS_RUNS];
    const int n = ws_runs(kind, variant, args, b, r);
    if (n > WS_RUNS) return args;
    SgPlan p;
    if (sg_plan(kind, args, r, n, SG_BYTES, &p)) {
        sg_stage(p, args, buf);
        return buf;
    }
    st_l2(r, n);
    return args;
}

__device__ __noinline__ void st_item_staged(int kind, int variant, const unsigned char *args, unsigned b) {
    if (st_is_mv(kind)) st_mv_item<1>(kind, variant, args, b);
    else st_other(kind, variant, args, b);
}

struct StStagePolicy {
    static __device__ __forceinline__ const unsigned char *fetch(int kind, int variant,
                                                                const unsigned char *args,
                                                                unsigned b, uint8_t *buf) {
        return st_fetch(kind, variant, args, b, buf);
    }
    /* this thread's copies, then every thread's visible to the block */
    static __device__ __forceinline__ void arrive(void) {
        sg_wait_all();
        __syncthreads();
    }
    static __device__ __forceinline__ void item(int kind, int variant, const unsigned char *args,
                                                unsigned b) {
        st_item_staged(kind, variant, args, b);
    }
};

__global__ void __launch_bounds__(ST_THREADS, ST_MIN_BLOCKS) step_stage_kernel(const StArgs a) {
    __shared__ unsigned item;
    extern __shared__ __align__(16) uint8_t st_smem[];
    st_items<StStagePolicy>(a, &item, st_smem + a.stage_at);
}
