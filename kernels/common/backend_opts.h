/* The kernel settings a backend takes when it is created (sd_backend_cpu,
 * sd_backend_cuda) and reads once there: no kernel reads the environment.
 * The engine fills them from the SD_* environment variables in one place
 * (engine/session/device.c, sd_backend_opts_from_env); tests and
 * benchmarks set them directly. A backend ignores the other backend's
 * fields. */
#ifndef SD_BACKEND_OPTS_H
#define SD_BACKEND_OPTS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Resident blocks a multiprocessor for the CUDA backend's folded norms:
 * 0 (off) to this. */
enum { SD_CUDA_FUSE_NORM_MAX = 32 };

typedef struct sd_backend_opts {
    /* CPU: the highest SIMD level its kernels use (enum sd_isa,
     * kernels/cpu/cpu.h; a level above the CPU's is the CPU's), or -1 for
     * the best this CPU has. */
    int isa;
    /* CPU: the worker pool to run on (kernels/cpu/pool.h), shared with the
     * other CPU backends made on it (the backend takes a reference and the
     * pool's thread count), or NULL for a pool of its own. */
    struct sd_pool *cpu_pool;
    /* CPU: 1 interleaves quantized weights of 16k rows in groups of 16 at
     * upload_weight (kernels/cpu/blocks.h); 0 keeps the file's layout. */
    int repack;
    /* CUDA: 1 synchronises after every launch, so a fault is reported by
     * the op that caused it. */
    int cuda_sync;
    /* CUDA: 1 runs decode steps as CUDA graphs (backend.h graph_begin). */
    int cuda_graph;
    /* CUDA: 1 merges attention's key splits in a launch of their own on
     * every call, as calls too large for the folded merge do (so tests
     * reach that path); 0 folds the merge into the kernel where it fits. */
    int cuda_attn_merge_launch;
    /* CUDA: 1 uses programmatic dependent launch where the device has it
     * (compute capability 9.0 or newer). */
    int cuda_pdl;
    /* CUDA: resident blocks a multiprocessor of the launches that fold an
     * RMSNorm into the matrix-vector op after it, 1 to
     * SD_CUDA_FUSE_NORM_MAX; 0 launches every norm on its own. */
    int cuda_fuse_norm;
    /* CUDA: 1 runs each recorded decode step as one persistent cooperative
     * launch (kernels/cuda/step.cu) where it can, else as a graph; 0 (the
     * default until a GPU run has measured it) always as a graph. */
    int cuda_persistent;
    /* CUDA: 1 runs the products with quantised weights on tensor cores
     * (kernels/cuda/mv_mma.cuh) for every row count; 0 (the default until
     * a GPU run has checked and timed it) on the __dp4a tiles
     * (kernels/cuda/mv.cuh). */
    int cuda_mma;
    /* CUDA: 1 has the persistent step's blocks copy an item's weight rows
     * into shared memory while they wait for its producers, and compute
     * from there (kernels/cuda/stage.cuh); 0 (the default until a GPU run
     * has timed it) only asks L2 for them. */
    int cuda_stage;
} sd_backend_opts;

/* Every setting at its default: the best SIMD level, a pool of the CPU
 * backend's own, repacking on, graphs and programmatic launch on, the
 * folded attention merge, no per-launch synchronisation, folded norms at 8
 * blocks a multiprocessor, quantised products on tensor cores, the
 * persistent step's weights prefetched to L2, not staged. */
sd_backend_opts sd_backend_opts_default(void);

#ifdef __cplusplus
}
#endif

#endif
