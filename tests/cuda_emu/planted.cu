/* Kernels with planted bugs, for tests/cuda_emu/test_emu_misuse.c: each
 * case is a kernel and a launcher; the emulator (or ASan under it) must
 * stop every buggy one with a clear report. Built only for the emulator. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads one float past the end of x (n floats). */
__global__ void oob_read(float *out, const float *x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i % n] = x[i]; /* bug: <= */
}

/* A full-mask shuffle that only the lower half of the warp reaches. */
__global__ void divergent_shfl(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x < 16) v += __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

/* Two halves of a warp at two different shuffles. */
__global__ void diverged_sites(float *out) {
    float v = (float)threadIdx.x;
    if (threadIdx.x & 1)
        v = __shfl_xor_sync(0xffffffffu, v, 2);
    else
        v = __shfl_xor_sync(0xffffffffu, v, 4);
    out[threadIdx.x] = v;
}

/* A full-mask warp sum in a block of 16 threads. */
__global__ void absent_lanes(float *out) {
    float v = 1.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[threadIdx.x] = v;
}

/* One thread leaves before the barrier the others wait at. */
__global__ void exit_before_barrier(float *out) {
    __shared__ float s[64];
    if (threadIdx.x == 5) return;
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}

/* The two warps of a block wait at two different barriers. */
__global__ void divergent_barriers(float *out) {
    __shared__ float s[64];
    s[threadIdx.x] = 1.0f;
    if (threadIdx.x < 32)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = s[63 - threadIdx.x];
}

/* Thread 0 waits for lane 1 at __syncwarp while lane 1 waits at __syncthreads. */
__global__ void deadlock(float *out) {
    if (threadIdx.x == 0) __syncwarp(0x3u);
    else __syncthreads();
    out[threadIdx.x] = 0.f;
}

/* Thread 0 stages a value in shared memory and the block reads it without a
 * __syncthreads in between: in the blocks the emulator runs backwards, the
 * readers run first and see the 0xff fill (NaN). */
__global__ void missing_barrier(float *out) {
    extern __shared__ float stage[];
    if (threadIdx.x == 0) stage[0] = (float)blockIdx.x;
    /* bug: no __syncthreads() here */
    out[blockIdx.x * blockDim.x + threadIdx.x] = stage[0];
}

/* Launched with programmatic stream serialization: block 1 skips the wait. */
__global__ void pdl_wait(float *out) {
    if (blockIdx.x == 0) cudaGridDependencySynchronize();
    out[threadIdx.x] = 1.0f;
}

/* A producer, then a consumer launched with programmatic stream
 * serialization that reads the producer's output after its wait: through
 * the read-only path (the bug: on a GPU the consumer is alive while the
 * producer writes) or with a plain load. */
__global__ void produce(float *out) { out[threadIdx.x] = (float)threadIdx.x; }
__global__ void consume(float *out, const float *in, int nc) {
    cudaGridDependencySynchronize();
    out[threadIdx.x] = nc ? __ldg(in + threadIdx.x) : in[threadIdx.x];
}

__global__ void fine(float *out) {
    extern __shared__ float big[];
    big[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = big[blockDim.x - 1 - threadIdx.x];
}

/* Runs case `which`; returns the launch's error (0: none) and, for
 * missing_barrier, the number of NaN outputs in *nan. */
extern "C" int planted_run(const char *which, int *nan) {
    float *x = NULL, *out = NULL;
    const int n = 256;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&out, 4 * n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    if (!strcmp(which, "oob_read")) oob_read<<<3, 128>>>(out, x, n);
    else if (!strcmp(which, "divergent_shfl")) divergent_shfl<<<1, 32>>>(out);
    else if (!strcmp(which, "diverged_sites")) diverged_sites<<<1, 32>>>(out);
    else if (!strcmp(which, "absent_lanes")) absent_lanes<<<1, 16>>>(out);
    else if (!strcmp(which, "exit_before_barrier")) exit_before_barrier<<<1, 64>>>(out);
    else if (!strcmp(which, "deadlock")) deadlock<<<1, 2>>>(out);
    else if (!strcmp(which, "divergent_barriers")) divergent_barriers<<<1, 64>>>(out);
    else if (!strcmp(which, "block_too_large")) fine<<<1, 1025, 1025 * 4>>>(out);
    else if (!strcmp(which, "grid_too_large")) fine<<<dim3(1, 65536), 32, 128>>>(out);
    else if (!strcmp(which, "smem_without_opt_in")) fine<<<1, 64, 64 * 1024>>>(out);
    else if (!strcmp(which, "smem_opt_in")) {
        cudaFuncSetAttribute(fine, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
        fine<<<1, 64, 64 * 1024>>>(out);
    } else if (!strcmp(which, "smem_over_227k")) {
        cudaFuncSetAttribute(fine, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
        fine<<<1, 64, 228 * 1024>>>(out);
    } else if (!strcmp(which, "pdl_no_wait") || !strcmp(which, "pdl_waits")) {
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = !strcmp(which, "pdl_waits") ? 1 : 2;
        cfg.blockDim = 32;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, pdl_wait, out);
    } else if (!strcmp(which, "ldg_after_pdl") || !strcmp(which, "plain_after_pdl")) {
        setenv("CUDA_EMU_LDG_CHECK", "1", 1);
        cudaLaunchAttribute at;
        at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = 1;
        cfg.blockDim = 64;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        produce<<<1, 64>>>(x);
        cudaLaunchKernelEx(&cfg, consume, out, (const float *)x, !strcmp(which, "ldg_after_pdl") ? 1 : 0);
    } else if (!strcmp(which, "missing_barrier")) {
        missing_barrier<<<4, 64, sizeof(float)>>>(out);
        float h[4 * 64];
        cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
        *nan = 0;
        for (int i = 0; i < 4 * 64; i++) *nan += h[i] != h[i];
    } else {
        fprintf(stderr, "planted_run: no case %s\n", which);
        return -1;
    }
    const int err = (int)cudaGetLastError();
    cudaFree(x);
    cudaFree(out);
    return err;
}
