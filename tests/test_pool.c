/* The CPU kernels' worker pool (kernels/cpu/pool.h): every task runs
 * exactly once per region, thread ids are distinct among tasks running at
 * the same time, regions follow each other without leaking tasks, workers
 * that slept on the futex wake for the next region, and regions larger
 * than the claim word's count run in slices. Shared pools: the pool lives
 * until its last holder lets go, whichever goes first; two contexts on one
 * pool, used in turn, compute what contexts with pools of their own do;
 * two callers at once each still run every task once. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu.h"
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

Test(pool, a_shared_pool_lives_until_its_last_holder_lets_go) {
    for (int creator_first = 0; creator_first < 2; creator_first++) {
        tally *t;
        sd_pool *p = make_pool(THREADS, &t);
        sd_pool *other = sd_pool_retain(p);
        cr_assert_eq(other, p);
        run_and_check(p, t, 300, 1);
        sd_pool_destroy(creator_first ? p : other);
        /* the remaining holder still has every worker */
        run_and_check(p, t, 300, 1);
        cr_assert_eq(sd_pool_threads(p), THREADS);
        sd_pool_destroy(creator_first ? other : p);
        free(t);
    }
}

/* Two callers on one pool at once, started together: each runs its own
 * regions and counts what went wrong (no assertion off the test's
 * thread); the one that finds the workers busy runs its tasks on its own
 * thread. */
typedef struct {
    sd_pool *p;
    pthread_barrier_t *start;
    tally t;
    int failures;
} caller;

static void *call_regions(void *v) {
    caller *c = v;
    pthread_barrier_wait(c->start);
    for (int rep = 0; rep < 2000; rep++) {
        int64_t n = 1 + rep % 200;
        for (int64_t i = 0; i < n; i++) atomic_store(&c->t.runs[i], 0);
        sd_pool_run(c->p, count_task, &c->t, n, 1);
        for (int64_t i = 0; i < n; i++) c->failures += atomic_load(&c->t.runs[i]) != 1;
    }
    c->failures += atomic_load(&c->t.overlap) + atomic_load(&c->t.bad_thread);
    return NULL;
}

Test(pool, two_callers_at_once_each_run_every_task_once) {
    sd_err e;
    sd_pool *p = sd_pool_create(THREADS, &e);
    cr_assert(p, "%s", e.msg);
    caller *c = calloc(2, sizeof *c);
    cr_assert(c);
    pthread_barrier_t start;
    cr_assert_eq(pthread_barrier_init(&start, NULL, 2), 0);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        c[i].p = p;
        c[i].start = &start;
        cr_assert_eq(pthread_create(&th[i], NULL, call_regions, &c[i]), 0);
    }
    /* callers that corrupted each other's counts would wait forever: a
     * deadline turns that into a failure */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_timedjoin_np(th[i], NULL, &deadline), 0,
                     "caller %d still running after 60 s", i);
    pthread_barrier_destroy(&start);
    cr_assert_eq(c[0].failures + c[1].failures, 0, "tasks lost, repeated or overlapping: %d, %d",
                 c[0].failures, c[1].failures);
    free(c);
    sd_pool_destroy(p);
}

/* Rows of rmsnorm on a context; enough rows that the op is a parallel region. */
enum { ROWS = 64, DIM = 96 };

static void norm_rows(sd_cpu *c, float *out, const float *x, const float *w) {
    sd_cpu_rmsnorm(c, out, x, w, ROWS, DIM, 1e-5f);
}

Test(pool, contexts_sharing_a_pool_in_turn_match_contexts_on_their_own) {
    static float x[ROWS * DIM], w[DIM], want[ROWS * DIM], got[2][ROWS * DIM];
    for (int i = 0; i < ROWS * DIM; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < DIM; i++) w[i] = 0.5f + (float)i / DIM;
    sd_err e;
    sd_cpu *alone = sd_cpu_create(3, &e);
    cr_assert(alone, "%s", e.msg);
    norm_rows(alone, want, x, w);
    sd_cpu_destroy(alone);
    for (int order = 0; order < 2; order++) {
        sd_pool *p = sd_pool_create(3, &e);
        cr_assert(p, "%s", e.msg);
        sd_cpu *c[2] = {sd_cpu_create_on(p, &e), sd_cpu_create_on(p, &e)};
        cr_assert(c[0] && c[1], "%s", e.msg);
        sd_pool_destroy(p); /* the contexts hold it now */
        cr_assert_eq(sd_cpu_threads(c[0]), 3);
        cr_assert_eq(sd_cpu_threads(c[1]), 3);
        for (int rep = 0; rep < 50; rep++)
            for (int k = 0; k < 2; k++) {
                memset(got[k], 0, sizeof got[k]);
                norm_rows(c[k], got[k], x, w);
                cr_assert_arr_eq(got[k], want, sizeof want, "context %d, turn %d", k, rep);
            }
        sd_cpu_destroy(c[order]);
        sd_cpu_destroy(c[1 - order]);
    }
}
