/* Backend choice (engine/session/device.c): which backend a model gets for
 * each --device setting, with and without a usable GPU, and for heads wider
 * than the CUDA kernels take. The decision is a pure function, so every
 * case runs here without a GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/session/device.h"
#include "kernels/cuda/backend_cuda.h"

static int choose(int device, int gpu, int head_dim, char *notice, sd_err *e) {
    return sd_device_choose(device, gpu, head_dim, notice, 160, e);
}

Test(device, every_setting) {
    char notice[160];
    sd_err e = {{0}};
    cr_assert_eq(choose(SD_DEVICE_CPU, 1, 64, notice, &e), SD_DEVICE_CPU);
    cr_assert_eq(choose(SD_DEVICE_AUTO, 0, 64, notice, &e), SD_DEVICE_CPU);
    cr_assert_str_empty(notice);
    cr_assert_eq(choose(SD_DEVICE_AUTO, 1, 64, notice, &e), SD_DEVICE_CUDA);
    cr_assert_eq(choose(SD_DEVICE_AUTO, 1, SD_CUDA_MAX_HEAD_DIM, notice, &e), SD_DEVICE_CUDA);
    cr_assert_eq(choose(SD_DEVICE_CUDA, 1, 128, notice, &e), SD_DEVICE_CUDA);
    cr_assert_str_empty(notice);
}

Test(device, wide_heads_fall_back_or_are_refused) {
    char notice[160];
    sd_err e = {{0}};
    const int wide = SD_CUDA_MAX_HEAD_DIM * 2;
    cr_assert_eq(choose(SD_DEVICE_AUTO, 1, wide, notice, &e), SD_DEVICE_CPU);
    cr_assert(strstr(notice, "head size 256 is above the CUDA backend's 128: running on the CPU"),
              "%s", notice);
    cr_assert_eq(choose(SD_DEVICE_CUDA, 1, wide, notice, &e), -1);
    cr_assert(strstr(e.msg, "cuda: head size 256 is above the CUDA backend's 128"), "%s", e.msg);
    cr_assert_eq(choose(SD_DEVICE_CUDA, 0, 64, notice, &e), -1);
    cr_assert(strstr(e.msg, "no usable GPU"), "%s", e.msg);
    /* and a CPU run never opens CUDA, whatever the heads */
    cr_assert_eq(choose(SD_DEVICE_CPU, 1, wide, notice, &e), SD_DEVICE_CPU);
    cr_assert_str_empty(notice);
}
