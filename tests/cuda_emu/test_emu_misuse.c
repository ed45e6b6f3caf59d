/* The emulator catches planted kernel bugs (tests/cuda_emu/planted.cu):
 * each case runs in a child process whose stderr is captured; a bug must
 * end the child abnormally with the expected report, a refused launch must
 * return the error a GPU would, and a correct kernel must run clean. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int planted_run(const char *which, int *nan);
int wspan_check(char *msg, size_t cap);
int stage_check(char *msg, size_t cap);

/* Runs case which in a child; its stderr into buf, its exit status. */
static int run_child(const char *which, char *buf, size_t cap) {
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        int nan = 0;
        int err = planted_run(which, &nan);
        fprintf(stderr, "planted_run: returned %d, %d NaN\n", err, nan);
        fflush(stderr);
        _exit(err == 0 ? 0 : 3);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < cap && (r = read(fd[0], buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    buf[len] = 0;
    char sink[256];
    while (read(fd[0], sink, sizeof sink) > 0) {}
    close(fd[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return st;
}

static void expect_report(const char *which, const char *want) {
    static char buf[1 << 16];
    int st = run_child(which, buf, sizeof buf);
    cr_expect(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "%s: ran to the end unnoticed", which);
    cr_expect(strstr(buf, want) != NULL, "%s: no '%s' in the report:\n%s", which, want, buf);
}

Test(emu_misuse, out_of_bounds_read) { expect_report("oob_read", "heap-buffer-overflow"); }
Test(emu_misuse, divergent_full_mask_shuffle) {
    expect_report("divergent_shfl", "exits while lane 0 waits for it in a warp collective");
}
Test(emu_misuse, lanes_at_different_shuffles) { expect_report("diverged_sites", "diverged lanes"); }
Test(emu_misuse, full_mask_with_absent_lanes) { expect_report("absent_lanes", "which does not exist"); }
Test(emu_misuse, exit_while_others_wait_at_barrier) {
    expect_report("exit_before_barrier", "this thread exits while 5 thread(s) of its block wait at __syncthreads");
}
Test(emu_misuse, threads_at_different_barriers) {
    expect_report("divergent_barriers", "threads of one block wait at different __syncthreads");
}
Test(emu_misuse, deadlock) { expect_report("deadlock", "deadlock: no thread of the block can go on"); }
Test(emu_misuse, block_over_1024_threads) {
    expect_report("block_too_large", "sm_90 takes at most 1024 threads");
    expect_report("block_too_large", "planted_run: returned 9"); /* cudaErrorInvalidConfiguration */
}
Test(emu_misuse, grid_y_over_65535) { expect_report("grid_too_large", "at most (2^31-1, 65535, 65535)"); }
Test(emu_misuse, smem_over_48k_needs_opt_in) {
    expect_report("smem_without_opt_in", "above 48 KiB needs cudaFuncSetAttribute");
    expect_report("smem_over_227k", "sm_90 has at most 232448 per block");
}
Test(emu_misuse, smem_with_opt_in_runs) {
    static char buf[4096];
    int st = run_child("smem_opt_in", buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
}
Test(emu_misuse, pdl_block_without_wait) {
    expect_report("pdl_no_wait", "block (1,0,0): launched with programmatic stream serialization, "
                                 "but no thread of the block called cudaGridDependencySynchronize");
    static char buf[4096];
    int st = run_child("pdl_waits", buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
}
Test(emu_misuse, ldcs_of_shared_memory) {
    expect_report("ldcs_shared", "kernel ldcs_shared, block (0,0,0)");
    expect_report("ldcs_shared", "__ldcs of 4 bytes at 0x");
    expect_report("ldcs_shared", "in the block's dynamic shared memory");
}
Test(emu_misuse, ldg_of_what_the_kernel_before_wrote) {
    expect_report("ldg_after_pdl", "kernel consume: __ldg of 4 bytes");
    static char buf[4096];
    int st = run_child("plain_after_pdl", buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
}
Test(emu_misuse, missing_barrier_shows_in_reversed_blocks) {
    static char buf[4096];
    int st = run_child("missing_barrier", buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
    /* blocks 1 and 3 run backwards: 63 readers each before thread 0 writes */
    cr_expect(strstr(buf, "returned 0, 126 NaN") != NULL, "%s", buf);
}

/* Persistent pipelines (planted.cu "pipeline"), cooperative launches. The
 * child's last line reports the launch's error and the wrong outputs. */
static void expect_clean(const char *which) {
    static char buf[1 << 16];
    int st = run_child(which, buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s:\n%s", which, buf);
    cr_expect(strstr(buf, "planted_run: returned 0, 0 NaN") != NULL, "%s:\n%s", which, buf);
}

Test(emu_misuse, persistent_pipeline_runs) {
    expect_clean("pipe_plain");
    expect_clean("pipe_small_grid");
    expect_clean("pipe_checked");
    expect_clean("pipe_small_grid_checked");
    expect_clean("pipe_coop_kernel");
    expect_clean("pipe_coop_graph");
}
Test(emu_misuse, persistent_pipeline_missing_wait) {
    /* the default order: no report, but outputs read before they were written */
    static char buf[1 << 16];
    int st = run_child("pipe_skip_wait", buf, sizeof buf);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", buf);
    cr_expect(strstr(buf, "planted_run: returned 0, ") && !strstr(buf, "returned 0, 0 NaN"),
              "no wrong output without the wait:\n%s", buf);
    expect_report("pipe_skip_wait_checked",
                  "ERROR: kernel pipeline (cooperative, CUDA_EMU_COOP_CHECK=1): the result depends "
                  "on the order of the blocks: allocation");
}
Test(emu_misuse, persistent_pipeline_deadlock) {
    expect_report("pipe_deadlock", "deadlock in cooperative kernel pipeline: no block of the 4 can go on;");
    expect_report("pipe_deadlock", "thread 0 spins on flag");
    expect_report("pipe_deadlock", " = 1, waiting for >= 2 (what 11) at kernels/cuda/persist.cuh:");
}
Test(emu_misuse, cooperative_grid_too_large) {
    expect_report("pipe_too_large", "cuda-emu: launch of pipeline refused (a GPU would refuse it too): "
                                    "cooperative grid of 33 blocks of 64 threads with 0 bytes of "
                                    "dynamic shared memory: at most 32 can be resident (16 per "
                                    "multiprocessor x 2 multiprocessors)");
    expect_report("pipe_too_large", "planted_run: returned 720"); /* cudaErrorCooperativeLaunchTooLarge */
}

/* Not a planted bug: the persistent step's prefetch spans (planted.cu,
 * kernels/cuda/wspan.cuh) are exactly the weight rows each virtual block
 * reads. */
Test(emu_misuse, prefetch_spans_are_the_rows_read) {
    char msg[256] = "";
    cr_expect_eq(wspan_check(msg, sizeof msg), 0, "%s", msg);
}

/* Not a planted bug: the bytes the persistent step stages in shared memory
 * for an item (planted.cu, kernels/cuda/stage.cuh) are exactly the weight
 * rows it reads. */
Test(emu_misuse, staged_bytes_are_the_rows_read) {
    char msg[256] = "";
    cr_expect_eq(stage_check(msg, sizeof msg), 0, "%s", msg);
}
