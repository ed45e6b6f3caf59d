/* The flag protocol of the persistent step (kernels/cuda/persist.cuh) in the
 * microbenchmark's two shapes (kernels/bench/persist_flags.cuh), on the
 * emulator: a ping-pong between the first and the last block, and stages in
 * which every block adds to one flag and waits for all of them. Each must
 * end with its flags at the counts of its rounds and every payload seen
 * after its wait; a protocol that deadlocks ends the process with the
 * emulator's report. What the GPU's memory ordering does is the
 * microbenchmark's to check (bench_persist_cuda, gpu-check's persist step). */
#include <criterion/criterion.h>

int emu_flags_run(int stages, int grid, int n, unsigned got[3]);

static void pingpong(int grid, int n) {
    unsigned got[3] = {0, 0, 1};
    cr_assert_eq(emu_flags_run(0, grid, n, got), 0);
    cr_expect_eq(got[0], (unsigned)n, "grid %d: the first block released %u times, not %d", grid, got[0], n);
    cr_expect_eq(got[1], (unsigned)n, "grid %d: the last block released %u times, not %d", grid, got[1], n);
    cr_expect_eq(got[2], 0u, "grid %d: %u payloads not visible after their wait", grid, got[2]);
}

static void stages(int grid, int n) {
    unsigned got[3] = {0, 1, 1};
    cr_assert_eq(emu_flags_run(1, grid, n, got), 0);
    cr_expect_eq(got[0], (unsigned)(grid * n), "grid %d: the flag is %u, not %d", grid, got[0], grid * n);
    cr_expect_eq(got[1], 0u, "grid %d: the second flag was touched (%u)", grid, got[1]);
    cr_expect_eq(got[2], 0u, "grid %d: %u payloads not visible after their wait", grid, got[2]);
}

Test(emu_flags, pingpong_two_blocks) { pingpong(2, 25); }
Test(emu_flags, pingpong_first_and_last_of_five) { pingpong(5, 40); }
Test(emu_flags, stages_one_block) { stages(1, 10); }
Test(emu_flags, stages_six_blocks) { stages(6, 30); }
