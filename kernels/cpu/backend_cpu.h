/* The CPU backend: the op table of kernels/backend.h over the kernels of
 * kernels/cpu/cpu.h, with its own thread team and scratch. */
#ifndef SD_BACKEND_CPU_H
#define SD_BACKEND_CPU_H

#include "kernels/backend.h"

#include "kernels/cpu/cpu.h"

/* n_threads <= 0: the physical cores this process may run on. o: the
 * settings (isa, repack; kernels/common/backend_opts.h), NULL for the
 * defaults. */
sd_backend *sd_backend_cpu(int n_threads, const sd_backend_opts *o, sd_err *e);
/* The kernel context of a CPU backend (its profile, threads); NULL for any
 * other backend. */
sd_cpu *sd_backend_cpu_context(sd_backend *b);

#endif
