/* The CPU kernels' worker pool (kernels/cpu/pool.h): every task runs
 * exactly once per region, thread ids are distinct among tasks running at
 * the same time, regions follow each other without leaking tasks, workers
 * that slept on the futex wake for the next region, and regions larger
 * than the claim word's count run in slices. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/pool.h"

enum { MAX_TASKS = 4096, THREADS = 4 };

typedef struct {
    _Atomic int runs[MAX_TASKS];
    _Atomic int busy[THREADS]; /* tasks running on thread t now */
    _Atomic int overlap;       /* a thread id seen twice at once */
    _Atomic int bad_thread;
    int region;                /* which region wrote last, per task */
    int last[MAX_TASKS];
    int thread_of[MAX_TASKS];
    _Atomic int64_t order; /* tasks started so far in the region */
    int64_t started[MAX_TASKS];
    int yield_every;
} tally;

static void count_task(void *v, int64_t task, int thread) {
    tally *t = v;
    if (thread < 0 || thread >= THREADS) {
        atomic_store(&t->bad_thread, 1);
        return;
    }
    if (atomic_fetch_add(&t->busy[thread], 1) != 0) atomic_store(&t->overlap, 1);
    atomic_fetch_add(&t->runs[task], 1);
    t->last[task] = t->region;
    t->thread_of[task] = thread;
    t->started[task] = atomic_fetch_add(&t->order, 1);
    if (t->yield_every && task % t->yield_every == 0) sched_yield();
    atomic_fetch_sub(&t->busy[thread], 1);
}

static void run_and_check(sd_pool *p, tally *t, int64_t n, int parallel) {
    for (int64_t i = 0; i < n; i++) atomic_store(&t->runs[i], 0);
    t->region++;
    atomic_store(&t->order, 0);
    sd_pool_run(p, count_task, t, n, parallel);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(atomic_load(&t->runs[i]), 1, "region %d: task %lld of %lld ran %d times",
                     t->region, (long long)i, (long long)n, atomic_load(&t->runs[i]));
        cr_assert_eq(t->last[i], t->region);
    }
    cr_assert_eq(atomic_load(&t->overlap), 0, "two tasks ran at once with one thread id");
    cr_assert_eq(atomic_load(&t->bad_thread), 0, "a thread id outside 0..%d", THREADS - 1);
}

static sd_pool *make_pool(int threads, tally **t) {
    sd_err e;
    sd_pool *p = sd_pool_create(threads, &e);
    cr_assert(p, "%s", e.msg);
    *t = calloc(1, sizeof **t);
    cr_assert(*t);
    return p;
}

Test(pool, every_task_once_over_many_regions) {
    tally *t;
    sd_pool *p = make_pool(THREADS, &t);
    cr_assert_eq(sd_pool_threads(p), THREADS);
    /* back-to-back regions of every size from 0 to 67 tasks, then a few
     * with yields so workers are descheduled mid-region */
    for (int rep = 0; rep < 20; rep++)
        for (int64_t n = 0; n < 68; n++) run_and_check(p, t, n, 1);
    t->yield_every = 3;
    for (int rep = 0; rep < 50; rep++) run_and_check(p, t, MAX_TASKS, 1);
    free(t);
    sd_pool_destroy(p);
}

static void check_serial(const tally *t, int n) {
    for (int i = 0; i < n; i++) {
        cr_assert_eq(t->thread_of[i], 0, "task %d ran on thread %d, not the caller", i,
                     t->thread_of[i]);
        cr_assert_eq(t->started[i], i, "task %d ran as number %lld", i, (long long)t->started[i]);
    }
}

Test(pool, serial_runs_in_order_on_the_caller) {
    tally *t;
    sd_pool *p = make_pool(THREADS, &t);
    run_and_check(p, t, 100, 0);
    check_serial(t, 100);
    /* a single-thread pool does the same with parallel on */
    sd_err e;
    sd_pool *one = sd_pool_create(1, &e);
    cr_assert(one, "%s", e.msg);
    run_and_check(one, t, 100, 1);
    check_serial(t, 100);
    sd_pool_destroy(one);
    free(t);
    sd_pool_destroy(p);
}

Test(pool, workers_wake_after_sleeping) {
    tally *t;
    sd_pool *p = make_pool(THREADS, &t);
    /* long enough between regions that every worker has gone to the futex */
    struct timespec gap = {0, 3 * 1000 * 1000};
    for (int rep = 0; rep < 10; rep++) {
        nanosleep(&gap, NULL);
        run_and_check(p, t, 512, 1);
    }
    free(t);
    sd_pool_destroy(p); /* joins sleeping workers */
}

/* More tasks than one claim word counts: a shifted index per slice. */
static void bit_task(void *v, int64_t task, int thread) {
    (void)thread;
    _Atomic unsigned char *seen = v;
    atomic_fetch_add(&seen[task], 1);
}

Test(pool, regions_beyond_the_claim_word_run_in_slices) {
    sd_err e;
    sd_pool *p = sd_pool_create(2, &e);
    cr_assert(p, "%s", e.msg);
    const int64_t n = (1 << 20) + 12345;
    _Atomic unsigned char *seen = calloc((size_t)n, 1);
    cr_assert(seen);
    sd_pool_run(p, bit_task, (void *)seen, n, 1);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(atomic_load(&seen[i]), 1, "task %lld", (long long)i);
    free((void *)seen);
    sd_pool_destroy(p);
}
