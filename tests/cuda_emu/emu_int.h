/* cuda-emu: the runtime API's (emu_api.cpp) view of the launch and memory
 * state that emu.cpp keeps. */
#ifndef CUDA_EMU_INT_H
#define CUDA_EMU_INT_H

#include <stdint.h>

#include <map>

#include "cuda_runtime.h"

namespace emu {

/* sm_90's dynamic shared memory a block: without and with the opt-in */
enum : size_t { SMEM_DEFAULT = 48 * 1024, SMEM_OPTIN_MAX = 227 * 1024 };

extern std::map<uintptr_t, size_t> allocs; /* cudaMalloc'd: start -> bytes */
extern cudaError_t last_error;             /* for cudaGetLastError */

/* The launch limits of sm_90 (README.md); false with the error set. */
bool check_config(const Config &c, const char *name, const void *func);
/* True when [p, p+n) lies inside one device allocation. */
bool is_device(const void *p, size_t n);
/* Fails unless the device side of a copy lies inside one allocation. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind k, const char *what);
/* A copy, a memset or an allocation: every kernel before it has completed
 * (the __ldg check, CUDA_EMU_LDG_CHECK). */
void ldg_barrier(void);
/* The multiprocessors the device has (CUDA_EMU_SMS, default 132). */
int sm_count(void);

} /* namespace emu */

#endif
