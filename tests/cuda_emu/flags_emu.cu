/* The persistent step's flag protocol as the microbenchmark runs it
 * (kernels/bench/persist_flags.cuh), launched on the emulator for
 * tests/cuda_emu/test_emu_flags.c. */
#include <string.h>

#include "kernels/bench/persist_flags.cuh"

/* Runs the ping-pong (stages 0) or the stage waits (stages 1) cooperatively
 * on grid blocks for n rounds; got[0..1] the two flags after it, got[2] the
 * payloads not visible after their wait. The launch's error, 0 for none. */
extern "C" int emu_flags_run(int stages, int grid, int n, unsigned got[3]) {
    unsigned *flags = NULL, *data = NULL, *bad = NULL;
    cudaError_t err = cudaMalloc(&flags, 2 * sizeof(unsigned));
    if (!err) err = cudaMalloc(&data, (size_t)grid * sizeof(unsigned));
    if (!err) err = cudaMalloc(&bad, sizeof(unsigned));
    if (!err) err = cudaMemset(flags, 0, 2 * sizeof(unsigned));
    if (!err) err = cudaMemset(data, 0, (size_t)grid * sizeof(unsigned));
    if (!err) err = cudaMemset(bad, 0, sizeof(unsigned));
    if (!err) err = (stages ? pf_stages_launch : pf_pingpong_launch)(grid, 0, flags, data, bad, n, 0);
    if (!err) err = cudaMemcpy(got, flags, 2 * sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (!err) err = cudaMemcpy(&got[2], bad, sizeof(unsigned), cudaMemcpyDeviceToHost);
    cudaFree(flags);
    cudaFree(data);
    cudaFree(bad);
    return (int)err;
}
