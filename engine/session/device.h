/* Backend selection: which op table a model runs on. The caller (the
 * session, a test, a benchmark) opens a backend here and hands it to
 * sd_model_load; the model never names a concrete backend. */
#ifndef SD_DEVICE_H
#define SD_DEVICE_H

#include "kernels/backend.h"

enum sd_device { SD_DEVICE_AUTO = 0, SD_DEVICE_CPU = 1, SD_DEVICE_CUDA = 2 };

/* "auto", "cpu", "cuda". */
const char *sd_device_name(int device);

/* The kernel settings the SD_* environment variables ask for (the list is
 * in device.c), the defaults where unset; -1 with e naming the variable
 * and its value when one is not a value it takes. */
int sd_backend_opts_from_env(sd_backend_opts *o, sd_err *e);

/* AUTO: the CUDA backend when a usable GPU exists, else the CPU backend
 * with n_threads threads (<= 0: the physical cores). CUDA: the CUDA backend or NULL
 * with the reason ("cuda: no CUDA device: ..."). CPU: the CPU backend.
 * Created with the settings of o (NULL: the defaults). */
sd_backend *sd_backend_open_opts(int device, int n_threads, const sd_backend_opts *o, sd_err *e);
/* sd_backend_open_opts with the environment's settings (sd_backend_opts_from_env). */
sd_backend *sd_backend_open(int device, int n_threads, sd_err *e);

/* Which backend a model with heads of head_dim gets when `device` is asked
 * for and a GPU is (gpu = 1) or is not usable: SD_DEVICE_CPU or
 * SD_DEVICE_CUDA, or -1 with the reason in e. AUTO falls back to the CPU for
 * heads the CUDA kernels do not take, with a one-line notice in notice
 * (empty otherwise); CUDA refuses them. */
int sd_device_choose(int device, int gpu, int head_dim, char *notice, size_t cap, sd_err *e);

/* sd_backend_open for a model with heads of head_dim (see sd_device_choose).
 * beside: a backend the caller already has open for the same work (the
 * target, when this one is for its drafter), or NULL. When both are CPU
 * backends the new one runs on beside's worker pool, with its thread
 * count, so switching from one model to the other wakes no second set of
 * threads; the two are then meant to be used from one thread in turn
 * (kernels/cpu/pool.h). */
sd_backend *sd_backend_open_for(int device, int n_threads, int head_dim, sd_backend *beside,
                                char *notice, size_t cap, sd_err *e);

#endif
