/* The fault handlers and the watchdog. Each thread that calls into a
 * plugin takes a slot (a fixed table, so the signal handler and the
 * watchdog read it without locks); sd_call_enter writes the call's names
 * and start time there, sd_call_leave clears the start time.
 *
 * A fault signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) raised while
 * the thread's slot is active writes
 *     specdec: sampler stage 'NAME' crashed (SIGSEGV) in process() (plugin FILE)
 * and _exit()s with SD_SAMPLER_FAULT_EXIT: the handler only formats into a
 * stack buffer, write()s and _exit()s, all async-signal-safe. Outside
 * plugin calls it puts back the handler that was there before and lets the
 * signal take its course, so the engine's own faults (and sanitizers'
 * handlers) behave as without it.
 *
 * The watchdog wakes every 50 ms; a slot active for longer than the limit
 * ends the process with
 *     specdec: sampler stage 'NAME' did not return from process() within
 *     T ms (plugin FILE)
 * A hung plugin call cannot be interrupted safely in its own thread (it
 * may hold a lock or be half way through its state), so ending the process
 * is the one clean answer. */
#include "engine/sampling/call_guard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/sampling/sampler_host.h"

#define MAX_SLOTS 256
#define WATCH_PERIOD_NS 50000000LL

typedef struct slot {
    _Atomic(const char *) stage, file, call;
    _Atomic long long start_ns; /* 0: no call in progress */
} slot;

static slot slots[MAX_SLOTS];
static atomic_int n_slots;
static _Thread_local int my_slot = -1;
static atomic_int out_fd = 2;
static _Atomic long long limit_ns = (long long)SD_SAMPLER_TIMEOUT_MS * 1000000LL;

static const int fault_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_FAULT (sizeof fault_sigs / sizeof fault_sigs[0])
static struct sigaction previous[N_FAULT];

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Appends s to buf[cap] at *n (async-signal-safe). */
static void put(char *buf, size_t cap, size_t *n, const char *s) {
    while (s && *s && *n + 1 < cap)
        buf[(*n)++] = *s++;
}

static void put_num(char *buf, size_t cap, size_t *n, long long v) {
    char d[24];
    int k = 0;
    do {
        d[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && k < 23);
    while (k && *n + 1 < cap)
        buf[(*n)++] = d[--k];
}

static const char *sig_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "SIGABRT";
    }
}

/* "specdec: sampler stage 'NAME' <what> CALL() <tail> (plugin FILE)\n",
 * written to out_fd, then _exit. */
static void last_words(slot *s, const char *what, long long ms, const char *tail) {
    char buf[1024];
    size_t n = 0;
    put(buf, sizeof buf, &n, "specdec: sampler stage '");
    put(buf, sizeof buf, &n, atomic_load(&s->stage));
    put(buf, sizeof buf, &n, "' ");
    put(buf, sizeof buf, &n, what);
    put(buf, sizeof buf, &n, atomic_load(&s->call));
    put(buf, sizeof buf, &n, "()");
    if (ms >= 0) {
        put(buf, sizeof buf, &n, " within ");
        put_num(buf, sizeof buf, &n, ms);
        put(buf, sizeof buf, &n, " ms");
    }
    put(buf, sizeof buf, &n, tail);
    put(buf, sizeof buf, &n, " (plugin ");
    put(buf, sizeof buf, &n, atomic_load(&s->file));
    put(buf, sizeof buf, &n, ")\n");
    int fd = atomic_load(&out_fd);
    if (fd >= 0 && write(fd, buf, n) < 0)
        _exit(SD_SAMPLER_FAULT_EXIT);
    _exit(SD_SAMPLER_FAULT_EXIT);
}

static void on_fault(int sig) {
    int k = my_slot;
    if (k >= 0 && atomic_load(&slots[k].start_ns)) {
        char what[64] = "crashed (";
        size_t n = strlen(what);
        put(what, sizeof what, &n, sig_name(sig));
        put(what, sizeof what, &n, ") in ");
        what[n] = '\0';
        last_words(&slots[k], what, -1, "");
    }
    for (size_t i = 0; i < N_FAULT; i++)
        if (fault_sigs[i] == sig)
            sigaction(sig, &previous[i], NULL);
    /* a fault re-executes the instruction under the previous handler; an
     * abort() raises again by itself */
}

static void *watchdog(void *arg) {
    (void)arg;
    struct timespec period = {0, WATCH_PERIOD_NS};
    for (;;) {
        nanosleep(&period, NULL);
        long long limit = atomic_load(&limit_ns), now = now_ns();
        int n = atomic_load(&n_slots);
        for (int k = 0; k < n && limit > 0; k++) {
            long long t0 = atomic_load(&slots[k].start_ns);
            if (t0 && now - t0 > limit)
                last_words(&slots[k], "did not return from ", limit / 1000000, "");
        }
    }
    return NULL;
}

static int watchdog_failed;

static void install(void) {
    for (size_t i = 0; i < N_FAULT; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fault;
        sigemptyset(&sa.sa_mask);
        sigaction(fault_sigs[i], &sa, &previous[i]);
    }
    /* The watchdog blocks every signal, so signals meant for the engine's
     * threads never land on it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t at;
    pthread_t t;
    watchdog_failed = pthread_attr_init(&at) ||
                      pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) ||
                      pthread_create(&t, &at, watchdog, NULL);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int sd_call_guard_install(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install);
    return watchdog_failed ? -1 : 0;
}

int sd_sampler_guard(int fd, int timeout_ms, sd_err *e) {
    if (fd < -1)
        return sd_fail(e, "sampler guard: file descriptor %d (-1 for none, or an open one)", fd);
    if (timeout_ms < 0 || timeout_ms > 3600000)
        return sd_fail(e, "sampler call time limit %d ms is outside [0, 3600000] (0: none)",
                       timeout_ms);
    atomic_store(&out_fd, fd);
    atomic_store(&limit_ns, (long long)timeout_ms * 1000000LL);
    return 0;
}

void sd_call_enter(const char *stage, const char *file, const char *call) {
    if (my_slot < 0) {
        int k = atomic_fetch_add(&n_slots, 1);
        if (k >= MAX_SLOTS) {
            atomic_store(&n_slots, MAX_SLOTS);
            return; /* more threads than slots: this one goes unguarded */
        }
        my_slot = k;
    }
    slot *s = &slots[my_slot];
    atomic_store_explicit(&s->stage, stage, memory_order_relaxed);
    atomic_store_explicit(&s->file, file, memory_order_relaxed);
    atomic_store_explicit(&s->call, call, memory_order_relaxed);
    atomic_store_explicit(&s->start_ns, now_ns(), memory_order_release);
}

void sd_call_leave(void) {
    if (my_slot >= 0)
        atomic_store_explicit(&slots[my_slot].start_ns, 0, memory_order_release);
}
