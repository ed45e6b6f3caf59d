/* The CPU backend: the op table of kernels/backend.h over the kernels of
 * kernels/cpu/cpu.h, with its own thread team and scratch. */
#ifndef SD_BACKEND_CPU_H
#define SD_BACKEND_CPU_H

#include "kernels/backend.h"

/* n_threads <= 0: all cores. */
sd_backend *sd_backend_cpu(int n_threads, sd_err *e);

#endif
