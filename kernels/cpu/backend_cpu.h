/* The CPU backend: the op table of kernels/backend.h over the kernels of
 * kernels/cpu/cpu.h, with its own scratch and a worker pool of its own or
 * shared with other CPU backends (sd_backend_opts.cpu_pool). */
#ifndef SD_BACKEND_CPU_H
#define SD_BACKEND_CPU_H

#include "kernels/backend.h"

#include "kernels/cpu/cpu.h"

/* n_threads <= 0: the physical cores this process may run on; ignored
 * when o names a pool to share (the pool's count holds). o: the settings
 * (isa, repack, cpu_pool; kernels/common/backend_opts.h), NULL for the
 * defaults. */
sd_backend *sd_backend_cpu(int n_threads, const sd_backend_opts *o, sd_err *e);
/* The kernel context of a CPU backend (its profile, threads); NULL for any
 * other backend. */
sd_cpu *sd_backend_cpu_context(sd_backend *b);
/* The worker pool of a CPU backend, to share with another (cpu_pool);
 * NULL for any other backend. */
sd_pool *sd_backend_cpu_pool(sd_backend *b);

#endif
