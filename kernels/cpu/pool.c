/* The worker pool of pool.h.
 *
 * Shared state, each word on its own cache line:
 *   claim  = generation (high 24 bits) | next task (20 bits) | task count (20
 *            bits). A thread takes task i by moving the word from i to i+1
 *            with a compare-and-swap that also checks the generation, so a
 *            worker still holding an old generation's view can never take
 *            (or skip) a task of the next region.
 *   done   = tasks finished in the current region; the caller returns when
 *            it reaches the count.
 *   gen    = the futex word workers sleep on; bumped once per region.
 *   caller = 1 while a caller's regions run; taken with an exchange, so
 *            a second caller finds it held and runs its tasks itself.
 * The job (fn, arg) is written before the release store that publishes a
 * generation and read only after a successful claim of that generation;
 * the caller cannot start another region while a claimed task is
 * unfinished, so the job a worker reads is the one it claimed for. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/pool.h"

#define TASK_BITS 20
#define TASK_MASK ((UINT64_C(1) << TASK_BITS) - 1)
#define GEN_MASK ((UINT64_C(1) << (64 - 2 * TASK_BITS)) - 1)

/* Waiting, both sides: spin with pause for SPIN_NS (the next region of a
 * decode step usually follows within a few microseconds), then keep
 * checking but yield the core between checks, so a worker that shares a
 * core with the caller (a loaded machine) does not take its time. A
 * worker gives up after WORKER_WAIT_NS and sleeps on the futex. */
enum { SPIN_NS = 5000, WORKER_WAIT_NS = 200000 };

typedef struct {
    sd_pool *p;
    int id;
} worker_arg;

struct sd_pool {
    _Alignas(64) _Atomic uint64_t claim;
    _Alignas(64) _Atomic int64_t done;
    _Alignas(64) _Atomic uint32_t gen;
    _Atomic int sleepers;
    _Atomic int stop;
    _Atomic int refs;
    _Alignas(64) _Atomic int caller;
    sd_pool_fn fn;
    void *arg;
    uint64_t wait_ns;
    int n_threads, started;
    pthread_t *threads;
    worker_arg *args;
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Takes and runs tasks of generation g until none is left or the word has
 * moved to another generation. */
static void work(sd_pool *p, uint64_t g, int id) {
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
        uint64_t next = (w >> TASK_BITS) & TASK_MASK, n = w & TASK_MASK;
        if (w >> (2 * TASK_BITS) != g || next >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &w, w + (UINT64_C(1) << TASK_BITS),
                                                   memory_order_acq_rel, memory_order_relaxed))
            continue;
        p->fn(p->arg, (int64_t)next, id);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void *worker_main(void *v) {
    worker_arg *a = v;
    sd_pool *p = a->p;
    uint32_t seen = atomic_load(&p->gen);
    for (;;) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen) {
            uint64_t t0 = now_ns(), dt = 0;
            for (int i = 0; g == seen && dt < WORKER_WAIT_NS; i++) {
                if (dt < SPIN_NS) cpu_relax();
                else sched_yield();
                g = atomic_load_explicit(&p->gen, memory_order_acquire);
                if ((i & 15) == 15 || dt >= SPIN_NS) dt = now_ns() - t0;
            }
        }
        while (g == seen && !atomic_load(&p->stop)) {
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            g = atomic_load(&p->gen);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        work(p, g & GEN_MASK, a->id);
    }
}

sd_pool *sd_pool_create(int n_threads, sd_err *e) {
    if (n_threads < 1) n_threads = 1;
    sd_pool *p = calloc(1, sizeof *p);
    if (!p) {
        sd_fail(e, "thread pool: out of memory");
        return NULL;
    }
    p->n_threads = n_threads;
    atomic_init(&p->refs, 1);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->args = calloc((size_t)n_threads - 1, sizeof *p->args);
        if (!p->threads || !p->args) {
            sd_fail(e, "thread pool: out of memory");
            sd_pool_destroy(p);
            return NULL;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        p->args[i] = (worker_arg){p, i + 1};
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]);
        if (rc != 0) {
            sd_fail(e, "thread pool: cannot start worker %d of %d (error %d)", i + 1,
                    n_threads - 1, rc);
            sd_pool_destroy(p);
            return NULL;
        }
        p->started++;
    }
    return p;
}

sd_pool *sd_pool_retain(sd_pool *p) {
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

/* The last reference's release is ordered after every other holder's use
 * of the pool (acq_rel on the count), so the join and free see it idle. */
void sd_pool_destroy(sd_pool *p) {
    if (!p || atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->args);
    free(p);
}

int sd_pool_threads(const sd_pool *p) { return p->n_threads; }

uint64_t sd_pool_wait_ns(const sd_pool *p) { return p->wait_ns; }

static void run_region(sd_pool *p, sd_pool_fn fn, void *arg, int64_t n_tasks) {
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint64_t g = ((atomic_load_explicit(&p->claim, memory_order_relaxed) >> (2 * TASK_BITS)) + 1) &
                 GEN_MASK;
    atomic_store_explicit(&p->claim, g << (2 * TASK_BITS) | (uint64_t)n_tasks,
                          memory_order_release);
    /* workers sleeping or spinning see gen move; the store and the load
     * of sleepers are sequentially consistent against the worker's
     * increment and re-check, so a worker about to sleep either sees the
     * new generation or is counted and woken */
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) futex_wake_all(&p->gen);
    work(p, g, 0);
    if (atomic_load_explicit(&p->done, memory_order_acquire) == n_tasks) return;
    uint64_t t0 = now_ns(), dt = 0;
    for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) != n_tasks; i++) {
        if (dt < SPIN_NS) cpu_relax();
        else sched_yield();
        if ((i & 15) == 15 || dt >= SPIN_NS) dt = now_ns() - t0;
    }
    p->wait_ns += now_ns() - t0;
}

/* Regions of more than TASK_MASK tasks run in slices through this. */
typedef struct {
    sd_pool_fn fn;
    void *arg;
    int64_t base;
} slice;

static void run_slice(void *v, int64_t task, int thread) {
    const slice *s = v;
    s->fn(s->arg, s->base + task, thread);
}

/* The caller word is taken with acquire and given back with release, so a
 * caller that takes it sees the job, counters and wait total the previous
 * caller left. */
void sd_pool_run(sd_pool *p, sd_pool_fn fn, void *arg, int64_t n_tasks, int parallel) {
    if (n_tasks <= 0) return;
    if (!parallel || p->n_threads == 1 || n_tasks == 1 ||
        atomic_exchange_explicit(&p->caller, 1, memory_order_acquire)) {
        for (int64_t i = 0; i < n_tasks; i++) fn(arg, i, 0);
        return;
    }
    if (n_tasks <= (int64_t)TASK_MASK) run_region(p, fn, arg, n_tasks);
    else
        for (int64_t base = 0; base < n_tasks; base += (int64_t)TASK_MASK) {
            slice s = {fn, arg, base};
            int64_t m = n_tasks - base;
            run_region(p, run_slice, &s, m < (int64_t)TASK_MASK ? m : (int64_t)TASK_MASK);
        }
    atomic_store_explicit(&p->caller, 0, memory_order_release);
}
