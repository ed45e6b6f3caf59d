#include "engine/session/device.h"

#include <stdio.h>

#include "kernels/cpu/backend_cpu.h"
#include "kernels/cuda/backend_cuda.h"

const char *sd_device_name(int device) {
    switch (device) {
    case SD_DEVICE_CPU: return "cpu";
    case SD_DEVICE_CUDA: return "cuda";
    default: return "auto";
    }
}

sd_backend *sd_backend_open(int device, int n_threads, sd_err *e) {
    char why[256];
    int gpu = device != SD_DEVICE_CPU && sd_cuda_available(why, sizeof why);
    if (device == SD_DEVICE_CUDA && !gpu) {
        sd_fail(e, "cuda: %s", why);
        return NULL;
    }
    return gpu ? sd_backend_cuda(0, e) : sd_backend_cpu(n_threads, e);
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

sd_backend *sd_backend_open_for(int device, int n_threads, int head_dim, char *notice,
                                size_t cap, sd_err *e) {
    char why[256];
    int gpu = device != SD_DEVICE_CPU && sd_cuda_available(why, sizeof why);
    if (device == SD_DEVICE_CUDA && !gpu) {
        sd_fail(e, "cuda: %s", why);
        return NULL;
    }
    int d = sd_device_choose(device, gpu, head_dim, notice, cap, e);
    if (d < 0) return NULL;
    return sd_backend_open(d, n_threads, e);
}
