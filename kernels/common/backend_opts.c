#include "kernels/common/backend_opts.h"

#include <stddef.h>

/* 8 folded-norm blocks a multiprocessor: the residency of a 64-register
 * block of 128 threads, so a folding launch keeps as many warps streaming
 * as a plain one (kernels/cuda/mv.cuh). */
sd_backend_opts sd_backend_opts_default(void) {
    return (sd_backend_opts){.isa = -1,
                             .cpu_pool = NULL,
                             .repack = 1,
                             .cuda_sync = 0,
                             .cuda_graph = 1,
                             .cuda_attn_merge_launch = 0,
                             .cuda_pdl = 1,
                             .cuda_fuse_norm = 8,
                             .cuda_persistent = 0,
                             .cuda_mma = 0,
                             .cuda_stage = 0};
}
