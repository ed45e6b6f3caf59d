/* CPU backend context and the small ops: ISA detection, threads, scratch,
 * rmsnorm, rope, swiglu, attention, embedding lookup. The matrix products
 * live in matmul*.c, row conversions in quant.c.
 *
 * Threads: a context owns a worker pool (pool.h); each op is one region
 * (a matrix product two: activation quantization, then rows) whose tasks
 * are contiguous ranges, so each thread streams its own memory.
 * Scratch: a context owns a few growable 64-byte-aligned buffers (one per
 * use, see SD_SCRATCH_*); after the first call of the largest shape no
 * kernel allocates. */
#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/pool.h"
#include "kernels/common/fp16.h"
#include "kernels/common/wtype.h"

/* Per-ISA grouped attention kernel (attn*.c): one query row, the G query
 * heads q[G][hd] of one kv head, out[G][hd]; sc: G rows of scores, ldsc
 * floats apart; lse (NULL: not wanted): each head's log sum_t e^(s_t), the
 * weight of this key range when ranges are merged. */
typedef void attn_group_fn(float *out, const float *q, const void *k, const void *v, int f16,
                           int len, int64_t stride, int hd, int G, float scale, float *sc,
                           int64_t ldsc, float *lse);
attn_group_fn sd_cpu_attn_group_scalar, sd_cpu_attn_group_avx2, sd_cpu_attn_group_avx512;

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
 * Asked for once; the answer holds for the process. */
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
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_request);
    return amx_granted ? SD_ISA_AMX : SD_ISA_AVX512_VNNI;
}

/* The hardware level, capped by SD_ISA when it names a level. */
int sd_cpu_isa_detect(void) {
    int isa = isa_hw();
    const char *env = getenv("SD_ISA");
    for (int k = SD_ISA_SCALAR; env && k <= SD_ISA_AMX; k++)
        if (strcmp(env, sd_isa_name(k)) == 0 && k < isa) isa = k;
    return isa;
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

/* ---- context ------------------------------------------------------------ */
sd_cpu *sd_cpu_create(int n_threads, sd_err *e) {
    sd_cpu *c = calloc(1, sizeof *c);
    if (!c) {
        sd_fail(e, "cpu backend: out of memory");
        return NULL;
    }
    if (n_threads <= 0) n_threads = sd_cpu_physical_cores();
    if (n_threads > 1024) n_threads = 1024;
    c->n_threads = n_threads;
    c->isa = sd_cpu_isa_detect();
    c->pool = sd_pool_create(n_threads, e);
    if (!c->pool) {
        free(c);
        return NULL;
    }
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

/* ---- rmsnorm: one pass for the sum of squares (double), one to scale ----
 * Each row's sum runs in element order, as the reference does, so every
 * row has the bits of a one-row call. The sum is a chain of dependent
 * double adds: four rows go side by side (four chains in flight), and
 * tasks of NORM_ROWS rows go to the pool. The 1.5B's 128-token prefill
 * spent 15.8 ms here at 2 threads before (all on the caller), 5.5 after. */
enum { NORM_ROWS = 8 };
typedef struct {
    float *out;
    const float *x, *w;
    int n, dim;
    float eps;
} norm_job;
static void norm_scale(const norm_job *j, int i, double ss) {
    const float *xr = j->x + (size_t)i * j->dim, *w = j->w;
    float *o = j->out + (size_t)i * j->dim;
    const float scale = (float)(1.0 / sqrt(ss / j->dim + j->eps));
    for (int k = 0; k < j->dim; k++) o[k] = xr[k] * scale * w[k];
}
static void norm_task(void *v, int64_t t, int thread) {
    const norm_job *j = v;
    (void)thread;
    const int dim = j->dim, i1 = (int)(t + 1) * NORM_ROWS < j->n ? (int)(t + 1) * NORM_ROWS : j->n;
    int i = (int)t * NORM_ROWS;
    for (; i + 4 <= i1; i += 4) {
        const float *x0 = j->x + (size_t)i * dim, *x1 = x0 + dim, *x2 = x1 + dim, *x3 = x2 + dim;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int k = 0; k < dim; k++) {
            s0 += (double)x0[k] * x0[k];
            s1 += (double)x1[k] * x1[k];
            s2 += (double)x2[k] * x2[k];
            s3 += (double)x3[k] * x3[k];
        }
        norm_scale(j, i, s0);
        norm_scale(j, i + 1, s1);
        norm_scale(j, i + 2, s2);
        norm_scale(j, i + 3, s3);
    }
    for (; i < i1; i++) {
        const float *xr = j->x + (size_t)i * dim;
        double ss = 0;
        for (int k = 0; k < dim; k++) ss += (double)xr[k] * xr[k];
        norm_scale(j, i, ss);
    }
}
void sd_cpu_rmsnorm(sd_cpu *c, float *out, const float *x, const float *w, int n, int dim,
                    float eps) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const norm_job j = {out, x, w, n, dim, eps};
    const int64_t tasks = (n + NORM_ROWS - 1) / NORM_ROWS;
    sd_pool_run(c->pool, norm_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_RMSNORM, t0);
}

/* ---- rope ----------------------------------------------------------------
 * llama.cpp's "normal" rope: pair (2j, 2j+1) turns by theta_j = p*s^j with
 * s = base^(-2/rope_dim), theta built by repeated float multiplication as
 * ggml_rope_cache_init does, so angles match llama.cpp bit for bit. */
enum { ROPE_ROWS = 4 }; /* rows a pool task: each computes its own angles */
typedef struct {
    float *x;
    int n, pos, n_heads, head_dim, half, step, other;
    float theta_scale;
} rope_job;
static void rope_task(void *v, int64_t t, int thread) {
    const rope_job *j = v;
    (void)thread;
    const int half = j->half, step = j->step, other = j->other;
    enum { MAXP = 512 };
    float cs[MAXP], sn[MAXP];
    const int i1 = (int)(t + 1) * ROPE_ROWS < j->n ? (int)(t + 1) * ROPE_ROWS : j->n;
    for (int i = (int)t * ROPE_ROWS; i < i1; i++) {
        float *row = j->x + (size_t)i * j->n_heads * j->head_dim;
        float theta = (float)(j->pos + i);
        int cached = half <= MAXP;
        if (cached) {
            for (int k = 0; k < half; k++) {
                cs[k] = cosf(theta);
                sn[k] = sinf(theta);
                theta *= j->theta_scale;
            }
        }
        for (int h = 0; h < j->n_heads; h++) {
            float *v = row + (size_t)h * j->head_dim;
            float th = (float)(j->pos + i);
            for (int k = 0; k < half; k++) {
                float co, si;
                if (cached) {
                    co = cs[k];
                    si = sn[k];
                } else {
                    co = cosf(th);
                    si = sinf(th);
                    th *= j->theta_scale;
                }
                float *p0 = v + step * k, *p1 = p0 + other;
                float a = *p0, b = *p1;
                *p0 = a * co - b * si;
                *p1 = a * si + b * co;
            }
        }
    }
}
void sd_cpu_rope(sd_cpu *c, float *x, int n, int pos, int n_heads, int head_dim, int rope_dim,
                 float freq_base, int neox) {
    uint64_t t0 = sd_cpu_prof_start(c);
    if (rope_dim > head_dim) rope_dim = head_dim;
    const int half = rope_dim / 2;
    /* element offsets of pair j: (2j, 2j+1), or (j, j+half) for neox */
    const rope_job j = {.x = x, .n = n, .pos = pos, .n_heads = n_heads, .head_dim = head_dim,
                        .half = half, .step = neox ? 1 : 2, .other = neox ? half : 1,
                        .theta_scale = powf(freq_base, -2.0f / (float)rope_dim)};
    const int64_t tasks = (n + ROPE_ROWS - 1) / ROPE_ROWS;
    sd_pool_run(c->pool, rope_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_ROPE, t0);
}

void sd_cpu_add_bias(float *x, const float *b, int n, int dim) {
    for (int i = 0; i < n; i++) {
        float *row = x + (size_t)i * dim;
        for (int r = 0; r < dim; r++) row[r] += b[r];
    }
}

/* ---- top-k ----------------------------------------------------------------
 * idx[0..m) stays sorted (value desc, index asc). A new value enters only
 * when it beats the last kept one strictly, and moves up only past strictly
 * smaller values, so among equal values the earlier index stays first. */
int sd_cpu_top_k(const float *x, int n, int k, int32_t *idx) {
    int m = 0;
    for (int i = 0; i < n && k > 0; i++) m = sd_top_k_push(x, i, k, idx, m);
    return m;
}

/* The softmax probabilities of a row's top ids need its denominator, one
 * more pass over the row (sd_cpu_exp_sum_*; the AVX2 one on every SIMD
 * level). */
double sd_cpu_exp_sum_scalar(const float *x, size_t n, float m) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] == m) sum += 1;
        else if (!isnan(x[i])) sum += expf(x[i] - m);
    return sum;
}

typedef struct {
    int (*top_k)(const float *, int, int, int32_t *);
    double (*exp_sum)(const float *, size_t, float);
    const float *x;
    int cols, k;
    int32_t *ids;
    float *probs;
} top_k_job;

static void top_k_task(void *v, int64_t r, int thread) {
    const top_k_job *j = v;
    (void)thread;
    const float *x = j->x + (size_t)r * j->cols;
    int32_t *ids = j->ids + (size_t)r * j->k;
    j->top_k(x, j->cols, j->k, ids);
    if (!j->probs) return;
    const float m = x[ids[0]];
    const double sum = j->exp_sum(x, (size_t)j->cols, m);
    for (int i = 0; i < j->k; i++)
        j->probs[(size_t)r * j->k + i] = (float)((x[ids[i]] == m ? 1.0 : exp((double)x[ids[i]] - m)) / sum);
}

void sd_cpu_top_k_rows(sd_cpu *c, const float *x, int n_rows, int cols, int k, int32_t *ids,
                       float *probs) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const int simd = c->isa >= SD_ISA_AVX2;
    top_k_job j = {simd ? sd_cpu_top_k_avx2 : sd_cpu_top_k, simd ? sd_cpu_exp_sum_avx2 : sd_cpu_exp_sum_scalar,
                   x, cols, k, ids, probs};
    sd_pool_run(c->pool, top_k_task, &j, n_rows, 1);
    sd_cpu_prof_add(c, SD_OP_TOP_K, t0);
}

/* ---- swiglu --------------------------------------------------------------- */
/* SwiGLU: the scalar loop is the reference; the AVX2 one (swiglu_avx2.c)
 * runs on every SIMD level. Chunks of SWIGLU_CHUNK elements go to the pool
 * (prefill: rows x ffn elements; one decode row is a single chunk). */
enum { SWIGLU_CHUNK = 16384 };
void sd_cpu_swiglu_range_scalar(float *out, const float *gate, const float *up, size_t count) {
    for (size_t i = 0; i < count; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
typedef struct {
    void (*fn)(float *, const float *, const float *, size_t);
    float *out;
    const float *gate, *up;
    size_t count;
} swiglu_job;
static void swiglu_task(void *v, int64_t t, int thread) {
    const swiglu_job *j = v;
    (void)thread;
    const size_t i0 = (size_t)t * SWIGLU_CHUNK;
    const size_t n = j->count - i0 < SWIGLU_CHUNK ? j->count - i0 : SWIGLU_CHUNK;
    j->fn(j->out + i0, j->gate + i0, j->up + i0, n);
}
void sd_cpu_swiglu(sd_cpu *c, float *out, const float *gate, const float *up, size_t count) {
    uint64_t t0 = sd_cpu_prof_start(c);
    const swiglu_job j = {.fn = c->isa >= SD_ISA_AVX2 ? sd_cpu_swiglu_range_avx2
                                                       : sd_cpu_swiglu_range_scalar,
                          .out = out, .gate = gate, .up = up, .count = count};
    const int64_t tasks = (int64_t)((count + SWIGLU_CHUNK - 1) / SWIGLU_CHUNK);
    sd_pool_run(c->pool, swiglu_task, (void *)&j, tasks, tasks > 1);
    sd_cpu_prof_add(c, SD_OP_SWIGLU, t0);
}

/* ---- attention -------------------------------------------------------------
 * One task is one query row, one kv head with the G = n_head/n_kv query
 * heads that read it (the kernels load each K/V row once for all of them)
 * and one range of ATTN_SPLIT keys: scores for the range into the thread's
 * slice of the scores scratch, max-subtracted softmax, then the weighted
 * sum of V rows. Tasks come from the pool's counter in order, so the
 * longer causal rows of later i balance themselves. The scalar kernel is
 * the reference: one head at a time, in the order of the definition.
 *
 * Why key ranges: a decode step has one task per kv head, and 3 kv heads
 * (SmolLM2) on 2 threads leave one thread idle a third of the time; at
 * 2048 positions attention is most of the step. A row whose keys 0..pos+i
 * span several ranges writes each range's normalised output and its
 * log-sum-exp to the partials scratch ([n][n_kv][S][G][hd] and
 * [n][n_kv][S][G], S the ranges of the call's longest row), and a second
 * pass merges them: out = sum_s e^(lse_s - L) out_s, L = log sum_s
 * e^(lse_s). The ranges depend only on the row's position, never on the
 * thread count or the rows of the call, so a position's output is the
 * same in a decode step, a verification and a prefill (speculative
 * decoding's output equals autoregressive decoding's only if it is); a row
 * of at most ATTN_SPLIT keys is one range, written directly. */
enum { ATTN_SPLIT = 512 };
static inline float kv_at(const void *p, int f16, size_t i) {
    return f16 ? sd_f16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

void sd_cpu_attn_group_scalar(float *out, const float *q, const void *k, const void *v, int f16,
                              int len, int64_t stride, int hd, int G, float scale, float *sc,
                              int64_t ldsc, float *lse) {
    (void)ldsc;
    for (int g = 0; g < G; g++) {
        const float *qg = q + (size_t)g * hd;
        float *og = out + (size_t)g * hd;
        float mx = -INFINITY;
        for (int t = 0; t < len; t++) {
            const size_t kr = (size_t)t * stride;
            float s = 0;
            for (int d = 0; d < hd; d++) s += qg[d] * kv_at(k, f16, kr + d);
            s *= scale;
            sc[t] = s;
            if (s > mx) mx = s;
        }
        float sum = 0;
        for (int t = 0; t < len; t++) {
            float p = expf(sc[t] - mx);
            sc[t] = p;
            sum += p;
        }
        float inv = 1.0f / sum;
        if (lse) lse[g] = mx + logf(sum);
        for (int d = 0; d < hd; d++) og[d] = 0;
        for (int t = 0; t < len; t++) {
            const size_t vr = (size_t)t * stride;
            float p = sc[t] * inv;
            for (int d = 0; d < hd; d++) og[d] += p * kv_at(v, f16, vr + d);
        }
    }
}

typedef struct {
    attn_group_fn *group;
    float *out;
    const float *q;
    const uint8_t *kc, *vc; /* elem bytes per element */
    int f16;
    size_t elem;
    float *sc;
    size_t slice;   /* scratch floats per thread */
    int64_t ldsc;   /* floats between a group's score rows */
    float *part;    /* [n][n_kv][ns][G][hd] range outputs (ns > 1) */
    float *lse;     /* [n][n_kv][ns][G] */
    int ns;         /* key ranges of the call's longest row */
    int pos, n_kv, n_head, group_size, head_dim;
    int64_t qdim, kvdim;
    float scale;
} attn_job;

static void attn_task(void *v, int64_t t, int thread) {
    const attn_job *j = v;
    const int s = (int)(t % j->ns), kh = (int)(t / j->ns % j->n_kv), i = (int)(t / j->ns / j->n_kv);
    const int len = j->pos + i + 1, t0 = s * ATTN_SPLIT;
    if (t0 >= len) return; /* a shorter row of the call */
    const int64_t off = i * j->qdim + (int64_t)kh * j->group_size * j->head_dim;
    const size_t kvoff = ((size_t)t0 * (size_t)j->kvdim + (size_t)kh * (size_t)j->head_dim) * j->elem;
    float *out = j->out + off, *lse = NULL;
    if (len > ATTN_SPLIT) {
        const int64_t r = ((int64_t)i * j->n_kv + kh) * j->ns + s; /* [i][kh][s] */
        out = j->part + r * j->group_size * j->head_dim;
        lse = j->lse + r * j->group_size;
    }
    j->group(out, j->q + off, j->kc + kvoff, j->vc + kvoff, j->f16,
             len - t0 < ATTN_SPLIT ? len - t0 : ATTN_SPLIT, j->kvdim, j->head_dim, j->group_size,
             j->scale, j->sc + j->slice * (size_t)thread, j->ldsc, lse);
}

/* Row i of a split call: each head's ranges merged into out. */
static void attn_merge_task(void *v, int64_t i, int thread) {
    (void)thread;
    const attn_job *j = v;
    const int len = j->pos + (int)i + 1, ns = (len + ATTN_SPLIT - 1) / ATTN_SPLIT;
    const int hd = j->head_dim, G = j->group_size;
    if (ns == 1) return; /* written directly */
    for (int h = 0; h < j->n_head; h++) {
        const int kh = h / G, g = h % G;
        const int64_t r0 = (i * j->n_kv + kh) * j->ns; /* range 0 of [i][kh] */
        float mx = -INFINITY, sum = 0;
        for (int s = 0; s < ns; s++) {
            const float l = j->lse[(r0 + s) * G + g];
            mx = l > mx ? l : mx;
        }
        for (int s = 0; s < ns; s++) sum += expf(j->lse[(r0 + s) * G + g] - mx);
        float *o = j->out + i * j->qdim + (int64_t)h * hd;
        for (int d = 0; d < hd; d++) o[d] = 0;
        for (int s = 0; s < ns; s++) {
            const float w = expf(j->lse[(r0 + s) * G + g] - mx) / sum;
            const float *p = j->part + ((r0 + s) * G + g) * hd;
            for (int d = 0; d < hd; d++) o[d] += w * p[d];
        }
    }
}

int sd_cpu_attention(sd_cpu *c, float *out, const float *q, const float *kc, const float *vc,
                     int n, int pos, int n_head, int n_kv, int head_dim, sd_err *e) {
    return sd_cpu_attention_kv(c, out, q, kc, vc, SD_F32, n, pos, n_head, n_kv, head_dim, e);
}

int sd_cpu_attention_kv(sd_cpu *c, float *out, const float *q, const void *kc, const void *vc,
                        uint32_t kv_type, int n, int pos, int n_head, int n_kv, int head_dim,
                        sd_err *e) {
    if (n <= 0) return 0;
    if (kv_type != SD_F32 && kv_type != SD_F16)
        return sd_fail(e, "attention: cache type %s (F32 or F16)", sd_wtype_name(kv_type));
    if (pos < 0 || n_head <= 0 || n_kv <= 0 || head_dim <= 0 || n_head % n_kv != 0)
        return sd_fail(e, "attention: bad shape (pos %d, heads %d, kv heads %d, head dim %d)",
                       pos, n_head, n_kv, head_dim);
    const int group = n_head / n_kv;
    /* per thread: one score row per head of a sub-group (at most 4 rows in
     * the SIMD kernels, 1 in the scalar one) of one key range, each a
     * 64-byte multiple */
    const int64_t ldsc = (((int64_t)pos + n < ATTN_SPLIT ? (int64_t)pos + n : ATTN_SPLIT) + 15) & ~(int64_t)15;
    const size_t slice = (size_t)ldsc * (size_t)(group < 4 ? group : 4);
    float *sc = sd_cpu_scratch(c, SD_SCRATCH_ATTN, slice * sizeof(float) * (size_t)c->n_threads, e);
    if (!sc) return -1;
    const int ns = (pos + n + ATTN_SPLIT - 1) / ATTN_SPLIT;
    float *part = NULL;
    if (ns > 1) {
        const size_t ranges = (size_t)n * (size_t)n_head * (size_t)ns;
        part = sd_cpu_scratch(c, SD_SCRATCH_ATTN_PART, ranges * ((size_t)head_dim + 1) * sizeof(float), e);
        if (!part) return -1;
    }
    attn_job j = {.group = sd_cpu_attn_group_scalar,
                  .out = out,
                  .q = q,
                  .kc = kc,
                  .vc = vc,
                  .f16 = kv_type == SD_F16,
                  .elem = kv_type == SD_F16 ? 2 : 4,
                  .sc = sc,
                  .slice = slice,
                  .ldsc = ldsc,
                  .part = part,
                  .lse = part ? part + (size_t)n * n_head * ns * head_dim : NULL,
                  .ns = ns,
                  .pos = pos,
                  .n_kv = n_kv,
                  .n_head = n_head,
                  .group_size = group,
                  .head_dim = head_dim,
                  .qdim = (int64_t)n_head * head_dim,
                  .kvdim = (int64_t)n_kv * head_dim,
                  .scale = 1.0f / sqrtf((float)head_dim)};
    if (c->isa == SD_ISA_AVX2) j.group = sd_cpu_attn_group_avx2;
    else if (c->isa >= SD_ISA_AVX512) j.group = sd_cpu_attn_group_avx512;
    uint64_t t0 = sd_cpu_prof_start(c);
    const int par = (int64_t)n * n_head * (pos + n) * head_dim > 16384;
    sd_pool_run(c->pool, attn_task, &j, (int64_t)n * n_kv * ns, par);
    if (ns > 1) sd_pool_run(c->pool, attn_merge_task, &j, n, n > 1);
    sd_cpu_prof_add(c, SD_OP_ATTENTION, t0);
    return 0;
}

/* ---- embedding ------------------------------------------------------------ */
int sd_cpu_embed(sd_cpu *c, float *x, const sd_weight *emb, const int32_t *ids, int n,
                 sd_err *e) {
    uint64_t t0 = sd_cpu_prof_start(c);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= emb->rows)
            return sd_fail(e, "embed: token id %d out of range [0, %lld)", (int)ids[i],
                           (long long)emb->rows);
        const uint8_t *row = (const uint8_t *)emb->data + (size_t)ids[i] * emb->row_bytes;
        if (sd_cpu_file_type(emb->type) != emb->type) {
            sd_repacked_row(emb, ids[i], x + (size_t)i * emb->cols);
            continue;
        }
        if (sd_dequantize_row(emb->type, row, x + (size_t)i * emb->cols, emb->cols) != 0)
            return sd_fail(e, "embed: unsupported weight type %u or bad row length %lld",
                           emb->type, (long long)emb->cols);
    }
    sd_cpu_prof_add(c, SD_OP_EMBED, t0);
    return 0;
}
