/* Persistent worker threads for the CPU kernels.
 *
 * One parallel region (sd_pool_run) hands n_tasks tasks to the caller and
 * the pool's workers; every thread takes the next task index from a shared
 * counter until none is left, so a worker the OS has descheduled holds up
 * at most the task it had taken, and a worker that wakes late takes none.
 * The caller returns when every task has finished (not when every worker
 * has checked in). Between regions a worker spins for a short while (the
 * next op usually follows within microseconds), then sleeps on a futex;
 * the caller spins on the completion count, yielding the core after a
 * while so an oversubscribed machine keeps making progress.
 *
 * Sharing: a pool is reference-counted, so several CPU contexts (a
 * drafter's and its target's) can run on one set of workers; the caller's
 * thread then moves from one model's ops to the other's as from one op to
 * the next, with the workers still spinning for the next region. The
 * workers serve one caller at a time: a region asked for while another
 * caller's region is running runs its tasks on its own thread, in order
 * (correct, not parallel), so contexts sharing a pool are meant to be used
 * from one thread in turn. */
#ifndef SD_CPU_POOL_H
#define SD_CPU_POOL_H

#include <stdint.h>

#include "kernels/common/error.h"

typedef struct sd_pool sd_pool;

/* fn(arg, task, thread): thread is 0 for the caller, 1..n_threads-1 for
 * the workers; fixed for the life of the pool, so it can index
 * per-thread scratch. */
typedef void (*sd_pool_fn)(void *arg, int64_t task, int thread);

/* n_threads counts the caller: n_threads - 1 workers are started. The
 * pool starts with one reference, the creator's. */
sd_pool *sd_pool_create(int n_threads, sd_err *e);
/* Another reference to p (returned); each is dropped by sd_pool_destroy. */
sd_pool *sd_pool_retain(sd_pool *p);
/* Drops a reference; the last one stops and joins the workers and frees
 * the pool. */
void sd_pool_destroy(sd_pool *p);
int sd_pool_threads(const sd_pool *p);
/* Runs fn for tasks 0..n_tasks-1 on every thread of the pool; with
 * parallel == 0, one thread in the pool or one task, the caller runs them
 * in order (for work too small to be worth waking anyone), as it does
 * while another caller holds the workers (see Sharing above). */
void sd_pool_run(sd_pool *p, sd_pool_fn fn, void *arg, int64_t n_tasks, int parallel);

/* Nanoseconds callers spent waiting for workers' tasks to finish after
 * the counter ran out, summed since the pool was made (profiling; on a
 * shared pool, the waits of every context on it). */
uint64_t sd_pool_wait_ns(const sd_pool *p);

#endif
