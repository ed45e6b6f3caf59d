/* Backend choice (engine/session/device.c): which backend a model gets for
 * each --device setting, with and without a usable GPU, and for heads wider
 * than the CUDA kernels take. The decision is a pure function, so every
 * case runs here without a GPU. A CPU backend opened beside another runs
 * on that one's worker pool and thread count, and either may be closed
 * first. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/session/device.h"
#include "kernels/cpu/backend_cpu.h"
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

static sd_backend *open_cpu(int threads, sd_backend *beside) {
    char notice[160];
    sd_err e = {{0}};
    sd_backend *b =
        sd_backend_open_for(SD_DEVICE_CPU, threads, 64, beside, notice, sizeof notice, &e);
    cr_assert(b, "%s", e.msg);
    return b;
}

Test(device, a_cpu_backend_beside_another_shares_its_pool) {
    for (int target_first = 0; target_first < 2; target_first++) {
        sd_backend *target = open_cpu(3, NULL), *drafter = open_cpu(2, target);
        sd_backend *apart = open_cpu(2, NULL);
        cr_assert_not_null(sd_backend_cpu_pool(target));
        cr_assert_eq(sd_backend_cpu_pool(drafter), sd_backend_cpu_pool(target));
        cr_assert_neq(sd_backend_cpu_pool(apart), sd_backend_cpu_pool(target));
        /* the shared pool's thread count is the one both contexts split work by */
        cr_assert_eq(sd_cpu_threads(sd_backend_cpu_context(drafter)), 3);
        cr_assert_eq(sd_cpu_threads(sd_backend_cpu_context(apart)), 2);
        sd_backend *first = target_first ? target : drafter;
        sd_backend *second = target_first ? drafter : target;
        first->destroy(first);
        /* the one left still runs ops on every worker */
        float x[16 * 8], w[8], out[16 * 8];
        for (int i = 0; i < 16 * 8; i++) x[i] = (float)(i % 7) - 3.0f;
        for (int i = 0; i < 8; i++) w[i] = 1.0f;
        sd_weight wn = {.data = w, .rows = 1, .cols = 8, .type = SD_F32};
        sd_err e = {{0}};
        cr_assert_eq(second->rmsnorm(second, out, x, &wn, 16, 8, 1e-5f, &e), 0, "%s", e.msg);
        for (int r = 0; r < 16; r++) { /* each row normalised: mean square 1 */
            float ss = 0;
            for (int i = 0; i < 8; i++) ss += out[r * 8 + i] * out[r * 8 + i];
            cr_assert_float_eq(ss, 8.0f, 1e-3f, "row %d", r);
        }
        second->destroy(second);
        apart->destroy(apart);
    }
}
