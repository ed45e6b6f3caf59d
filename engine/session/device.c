#include "engine/session/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_cpu.h"
#include "kernels/cuda/backend_cuda.h"

/* ---- the kernel settings users give through the environment ---------------
 * Read here and nowhere else, each time a backend is opened, into the
 * sd_backend_opts the backend is created with (kernels/common/backend_opts.h).
 * Unset or empty: the default. A value outside the list is an error naming
 * the variable and the value.
 *
 *   SD_ISA=scalar|avx2|avx512|avx512vnni|amx   CPU: the highest SIMD level
 *        the kernels use (a level above the CPU's is the CPU's); default
 *        the best the CPU has.
 *   SD_REPACK=0|1          CPU: 0 keeps quantized weights in the file's
 *        layout instead of 16-row groups (for comparisons); default 1.
 *   SD_CUDA_SYNC=0|1       CUDA: 1 synchronises after every kernel, so a
 *        fault is reported by the op that caused it; default 0.
 *   SD_CUDA_GRAPH=0|1      CUDA: decode steps as CUDA graphs; default 1.
 *   SD_CUDA_ATTN_MERGE=launch|fold   CUDA: "launch" merges attention's key
 *        splits in a launch of their own on every call; default fold.
 *   SD_CUDA_PDL=0|1        CUDA: programmatic dependent launch (sm_90 and
 *        newer); default 1.
 *   SD_CUDA_FUSE_NORM=0-32 CUDA: resident blocks a multiprocessor of the
 *        launches that fold an RMSNorm into the next matrix-vector op, 0
 *        launching every norm on its own; default 8.
 *   SD_CUDA_PERSISTENT=0|1 CUDA: 1 runs each decode step as one persistent
 *        launch where it can (else as a graph); default 0.
 *   SD_CUDA_MMA=0|1        CUDA: products with quantised weights on tensor
 *        cores (1) or on the __dp4a tiles (0); default 0.
 *   SD_CUDA_STAGE=0|1      CUDA: 1 has the persistent step stage an item's
 *        weight rows in shared memory while it waits; default 0. */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int env_bool(const char *name, int *out, sd_err *e) {
    const char *v = env(name);
    if (!v) return 0;
    if (strcmp(v, "0") && strcmp(v, "1")) return sd_fail(e, "%s=%.40s: expected 0 or 1", name, v);
    *out = v[0] == '1';
    return 0;
}

int sd_backend_opts_from_env(sd_backend_opts *o, sd_err *e) {
    *o = sd_backend_opts_default();
    const char *v = env("SD_ISA");
    if (v && (o->isa = sd_isa_from_name(v)) < 0)
        return sd_fail(e, "SD_ISA=%.40s: expected scalar, avx2, avx512, avx512vnni or amx", v);
    if (env_bool("SD_REPACK", &o->repack, e) || env_bool("SD_CUDA_SYNC", &o->cuda_sync, e) ||
        env_bool("SD_CUDA_GRAPH", &o->cuda_graph, e) || env_bool("SD_CUDA_PDL", &o->cuda_pdl, e) ||
        env_bool("SD_CUDA_PERSISTENT", &o->cuda_persistent, e) ||
        env_bool("SD_CUDA_MMA", &o->cuda_mma, e) || env_bool("SD_CUDA_STAGE", &o->cuda_stage, e))
        return -1;
    v = env("SD_CUDA_ATTN_MERGE");
    if (v && strcmp(v, "launch") && strcmp(v, "fold"))
        return sd_fail(e, "SD_CUDA_ATTN_MERGE=%.40s: expected launch or fold", v);
    o->cuda_attn_merge_launch = v && !strcmp(v, "launch");
    v = env("SD_CUDA_FUSE_NORM");
    if (v) {
        char *end;
        const long n = strtol(v, &end, 10);
        if (end == v || *end || n < 0 || n > SD_CUDA_FUSE_NORM_MAX)
            return sd_fail(e, "SD_CUDA_FUSE_NORM=%.40s: expected 0 (norms launched on their own) "
                              "or 1-%d (folded, resident blocks a multiprocessor)", v,
                           SD_CUDA_FUSE_NORM_MAX);
        o->cuda_fuse_norm = (int)n;
    }
    return 0;
}

const char *sd_device_name(int device) {
    switch (device) {
    case SD_DEVICE_CPU: return "cpu";
    case SD_DEVICE_CUDA: return "cuda";
    default: return "auto";
    }
}

sd_backend *sd_backend_open_opts(int device, int n_threads, const sd_backend_opts *o, sd_err *e) {
    char why[256];
    int gpu = device != SD_DEVICE_CPU && sd_cuda_available(why, sizeof why);
    if (device == SD_DEVICE_CUDA && !gpu) {
        sd_fail(e, "cuda: %s", why);
        return NULL;
    }
    return gpu ? sd_backend_cuda(0, o, e) : sd_backend_cpu(n_threads, o, e);
}

sd_backend *sd_backend_open(int device, int n_threads, sd_err *e) {
    sd_backend_opts o;
    if (sd_backend_opts_from_env(&o, e)) return NULL;
    return sd_backend_open_opts(device, n_threads, &o, e);
}

int sd_device_choose(int device, int gpu, int head_dim, char *notice, size_t cap, sd_err *e) {
    if (cap) notice[0] = 0;
    if (device == SD_DEVICE_CPU || (device == SD_DEVICE_AUTO && !gpu)) return SD_DEVICE_CPU;
    if (!gpu) return sd_fail(e, "cuda: no usable GPU");
    if (head_dim <= SD_CUDA_MAX_HEAD_DIM) return SD_DEVICE_CUDA;
    if (device == SD_DEVICE_CUDA)
        return sd_fail(e, "cuda: head size %d is above the CUDA backend's %d (use --device cpu)",
                       head_dim, SD_CUDA_MAX_HEAD_DIM);
    if (cap)
        snprintf(notice, cap, "head size %d is above the CUDA backend's %d: running on the CPU",
                 head_dim, SD_CUDA_MAX_HEAD_DIM);
    return SD_DEVICE_CPU;
}

sd_backend *sd_backend_open_for(int device, int n_threads, int head_dim, sd_backend *beside,
                                char *notice, size_t cap, sd_err *e) {
    char why[256];
    int gpu = device != SD_DEVICE_CPU && sd_cuda_available(why, sizeof why);
    if (device == SD_DEVICE_CUDA && !gpu) {
        sd_fail(e, "cuda: %s", why);
        return NULL;
    }
    int d = sd_device_choose(device, gpu, head_dim, notice, cap, e);
    sd_backend_opts o;
    if (d < 0 || sd_backend_opts_from_env(&o, e)) return NULL;
    o.cpu_pool = sd_backend_cpu_pool(beside);
    return sd_backend_open_opts(d, n_threads, &o, e);
}
