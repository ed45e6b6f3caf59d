/* The CPU kernel context: SIMD level, worker pool, scratch and profile.
 *
 * Threads: a context holds a reference to a worker pool (pool.h), its own
 * or one it shares with other contexts; each op is one region
 * (a matrix product two: activation quantization, then rows) whose tasks
 * are contiguous ranges, so each thread streams its own memory.
 * Scratch: a context owns a few growable 64-byte-aligned buffers (one per
 * use, see SD_SCRATCH_*); after the first call of the largest shape no
 * kernel allocates. */
#include <cpuid.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/cpu_int.h"

struct sd_cpu {
    int n_threads;
    int isa;
    sd_pool *pool;
    int profiling;
    uint64_t wait0; /* the pool's wait counter when profiling started */
    sd_cpu_profile prof;
    void *scratch[SD_SCRATCH_N];
    size_t scratch_size[SD_SCRATCH_N];
};

/* ---- ISA detection ------------------------------------------------------
 * F16C is read from CPUID leaf 1 (ECX bit 29) directly: clang's
 * __builtin_cpu_supports does not know the name (the fuzz build uses clang). */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

/* AMX: CPUID leaf 7 EDX bits 24 (AMX-TILE) and 25 (AMX-INT8), the OS
 * saving the tile state (XCR0 bits 17 and 18), and Linux's per-process
 * permission for it (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, feature
 * 18): without that grant the first tile instruction is a fatal signal.
 * Asked for once (sd_cpu_isa_detect); the answer holds for the process. */
static int amx_granted;
static void amx_request(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return;
    amx_granted = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18) == 0;
}

static int isa_hw(void) {
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (!avx2) return SD_ISA_SCALAR;
    if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
        return SD_ISA_AVX2;
    if (!__builtin_cpu_supports("avx512vnni")) return SD_ISA_AVX512;
    amx_request();
    return amx_granted ? SD_ISA_AMX : SD_ISA_AVX512_VNNI;
}

/* Detected once: the AMX request is made a single time per process. */
static int isa_best;
static void isa_once(void) { isa_best = isa_hw(); }

int sd_cpu_isa_detect(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, isa_once);
    return isa_best;
}

const char *sd_isa_name(int isa) {
    switch (isa) {
    case SD_ISA_SCALAR: return "scalar";
    case SD_ISA_AVX2: return "avx2";
    case SD_ISA_AVX512: return "avx512";
    case SD_ISA_AVX512_VNNI: return "avx512vnni";
    case SD_ISA_AMX: return "amx";
    default: return "unknown";
    }
}

int sd_isa_from_name(const char *name) {
    for (int k = SD_ISA_SCALAR; name && k <= SD_ISA_AMX; k++)
        if (strcmp(name, sd_isa_name(k)) == 0) return k;
    return -1;
}

/* ---- context ------------------------------------------------------------ */
static sd_cpu *context(sd_pool *pool, sd_err *e) {
    sd_cpu *c = calloc(1, sizeof *c);
    if (!c) {
        sd_fail(e, "cpu backend: out of memory");
        return NULL;
    }
    c->n_threads = sd_pool_threads(pool);
    c->isa = sd_cpu_isa_detect();
    c->pool = pool;
    return c;
}

sd_cpu *sd_cpu_create(int n_threads, sd_err *e) {
    if (n_threads <= 0) n_threads = sd_cpu_physical_cores();
    if (n_threads > 1024) n_threads = 1024;
    sd_pool *pool = sd_pool_create(n_threads, e);
    if (!pool) return NULL;
    sd_cpu *c = context(pool, e);
    if (!c) sd_pool_destroy(pool);
    return c;
}

sd_cpu *sd_cpu_create_on(sd_pool *pool, sd_err *e) {
    sd_cpu *c = context(sd_pool_retain(pool), e);
    if (!c) sd_pool_destroy(pool);
    return c;
}

/* Distinct (package, core) pairs among the CPUs this process may run on:
 * a second hardware thread of a core shares its load ports and caches, so
 * it adds little to a memory-bound decode and costs a barrier partner. */
int sd_cpu_physical_cores(void) {
    cpu_set_t set;
    int n_online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_online < 1) n_online = 1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return n_online;
    enum { MAX_CORES = 1024 };
    long seen[MAX_CORES];
    int n = 0, allowed = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < MAX_CORES; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        allowed++;
        char path[96];
        long core = -1, pkg = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &core) != 1) core = -1;
            fclose(f);
        }
        snprintf(path, sizeof path,
                 "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pkg) != 1) pkg = 0;
            fclose(f);
        }
        if (core < 0) return allowed > 0 ? CPU_COUNT(&set) : n_online;
        long key = pkg << 20 | core;
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = seen[i] == key;
        if (!dup) seen[n++] = key;
    }
    return n > 0 ? n : n_online;
}

void sd_cpu_destroy(sd_cpu *c) {
    if (!c) return;
    sd_pool_destroy(c->pool);
    for (int i = 0; i < SD_SCRATCH_N; i++) free(c->scratch[i]);
    free(c);
}

int sd_cpu_threads(const sd_cpu *c) { return c->n_threads; }
sd_pool *sd_cpu_pool(sd_cpu *c) { return c->pool; }
int sd_cpu_isa(const sd_cpu *c) { return c->isa; }

void sd_cpu_set_isa(sd_cpu *c, int isa) {
    int best = sd_cpu_isa_detect();
    if (isa < SD_ISA_SCALAR) isa = SD_ISA_SCALAR;
    if (isa > best) isa = best;
    c->isa = isa;
}

/* ---- profile ------------------------------------------------------------ */
static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void sd_cpu_profile_enable(sd_cpu *c, int on) {
    if (on) {
        memset(&c->prof, 0, sizeof c->prof);
        c->wait0 = sd_pool_wait_ns(c->pool);
    }
    c->profiling = on;
}

void sd_cpu_profile_read(const sd_cpu *c, sd_cpu_profile *out) {
    *out = c->prof;
    out->wait_ns = (double)(sd_pool_wait_ns(c->pool) - c->wait0);
}

const char *sd_cpu_op_name(int op) {
    static const char *const names[SD_OP_N] = {"matmul",  "quantize x", "attention",
                                               "rmsnorm", "rope",       "swiglu",
                                               "embed",   "top-k"};
    return op >= 0 && op < SD_OP_N ? names[op] : "?";
}

uint64_t sd_cpu_prof_start(const sd_cpu *c) { return c->profiling ? mono_ns() : 0; }

double sd_cpu_prof_add(sd_cpu *c, int op, uint64_t t0) {
    if (!t0) return 0;
    double ns = (double)(mono_ns() - t0);
    c->prof.op_ns[op] += ns;
    return ns;
}

void sd_cpu_prof_matmul_type(sd_cpu *c, uint32_t type, double ns) {
    if (c->profiling && type < SD_PROF_TYPES) c->prof.matmul_type_ns[type] += ns;
}

void *sd_cpu_scratch(sd_cpu *c, int slot, size_t bytes, sd_err *e) {
    if (slot < 0 || slot >= SD_SCRATCH_N) {
        sd_fail(e, "cpu backend: bad scratch slot %d", slot);
        return NULL;
    }
    if (bytes <= c->scratch_size[slot] && c->scratch[slot]) return c->scratch[slot];
    /* grow by at least 1.5x so a slowly growing context length does not
     * reallocate on every step */
    size_t want = bytes + bytes / 2;
    want = (want + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0 || !p) {
        sd_fail(e, "cpu backend: cannot allocate %zu bytes of scratch", want);
        return NULL;
    }
    free(c->scratch[slot]);
    c->scratch[slot] = p;
    c->scratch_size[slot] = want;
    return p;
}

