#include "engine/session/device.h"

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
