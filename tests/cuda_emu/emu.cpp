/* cuda-emu: runs the CUDA backend's kernels on the CPU (README.md here):
 * the fibers, barriers and collectives, launches and their checks; the
 * runtime API around them is emu_api.cpp's.
 *
 * A launch runs its blocks one after another on the calling thread. A block
 * is one fiber per CUDA thread, each on its own stack, switched by a small
 * hand-written x86-64 context switch (callee-saved registers, MXCSR and the
 * x87 control word). A fiber runs until it reaches __syncthreads, a warp
 * collective, a dependency-flag wait or its end; the scheduler then resumes
 * the next runnable fiber in order, forward in even blocks and backward in
 * odd ones, so a result that depends on the order of threads between two
 * barriers differs between blocks (and a read of shared memory nobody wrote
 * yet sees the 0xff fill). A cooperative launch has all its blocks' fibers
 * at once and interleaves the blocks ("cooperative launches" below).
 *
 * Checks, each a "cuda-emu: ERROR ..." line and abort(): a barrier reached
 * with threads of the block exited, or a thread exiting while others wait at
 * one; threads of a block waiting at different __syncthreads; a warp
 * collective whose mask names exited, absent (past the block's last thread)
 * or diverged lanes (at another collective, another call site, with another
 * mask); a collective reading a lane outside its mask; nothing runnable
 * (deadlock, in a cooperative launch with every waiting block); a
 * cooperative result that depends on the order of the blocks
 * (CUDA_EMU_COOP_CHECK=1). Launches that break sm_90's limits fail as a
 * GPU's would (cudaErrorInvalidConfiguration / cudaErrorInvalidValue /
 * cudaErrorCooperativeLaunchTooLarge for cudaGetLastError) with a line on
 * stderr naming the limit. Memory copies check that their device side lies
 * inside one cudaMalloc allocation. */
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <vector>

#include "cuda_runtime.h"
#include "tests/cuda_emu/emu_int.h"
#undef warpSize /* a field of cudaDeviceProp here */

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ---- context switch -------------------------------------------------------- */
extern "C" void emu_switch(void **save_sp, void *to_sp);
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");

namespace emu {

enum State { RUNNABLE, AT_BARRIER, AT_WARP, SPINNING, EXITED };

struct Fiber {
    uint3 tid;
    int linear, lane, warp;
    State state;
    void *sp;
    char *stack_lo;
    size_t stack_size;
    void *fake; /* ASan's fake stack while switched out */
    /* where it waits */
    const char *file;
    int line;
    Op op;
    unsigned mask;
    int arg, width;
    uint64_t value, result;
};

/* A fiber spinning on a dependency flag: it read seen, waits for >= target. */
struct Spin {
    const unsigned *flag;
    unsigned seen, target;
    int what;
};

struct Warp {
    unsigned present; /* lanes that exist */
    unsigned exited, at_barrier, at_warp;
};

struct Block {
    std::vector<Fiber> f;
    std::vector<Warp> w;
    int n, live, arrived, exited;
    const char *bar_file;
    int bar_line;
    uint3 idx;
    bool backward;   /* its fibers' order: backward in odd blocks */
    bool pdl_waited; /* a thread called cudaGridDependencySynchronize */
    void *smem;      /* dynamic shared memory */
    size_t smem_bytes;
    std::vector<uint8_t> statics; /* cooperative: its copy of the static __shared__ variables */
    std::vector<Spin> spin;       /* by thread, once one spins */
};

uint3 t_block, t_bdim, t_gdim;
Fiber *t_cur;
static Block blk; /* the running block (a cooperative launch swaps its blocks in) */
static Body cur_body;
static void *cur_ctx;
static const char *cur_name;
static void *sched_sp;
static std::vector<char *> stacks; /* reused between blocks and launches */
static size_t stack_bytes;
cudaError_t last_error = cudaSuccess;
#ifdef EMU_ASAN
static void *sched_fake;
static const void *main_lo;
static size_t main_size;
#endif

const uint3 &thread_idx(void) {
    if (!t_cur) fail("threadIdx read outside a kernel");
    return t_cur->tid;
}

void fail(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (t_cur)
        fprintf(stderr,
                "cuda-emu: ERROR in kernel %s, block (%u,%u,%u) of (%u,%u,%u), thread (%u,%u,%u) "
                "of (%u,%u,%u) (warp %d lane %d): %s\n",
                cur_name, t_block.x, t_block.y, t_block.z, t_gdim.x, t_gdim.y, t_gdim.z,
                t_cur->tid.x, t_cur->tid.y, t_cur->tid.z, t_bdim.x, t_bdim.y, t_bdim.z, t_cur->warp,
                t_cur->lane, msg);
    else
        fprintf(stderr, "cuda-emu: ERROR: %s\n", msg);
    fflush(stderr);
    abort();
}

/* ---- fibers ------------------------------------------------------------------ */
/* The next runnable fiber after f in the block's order, or NULL. */
static Fiber *next_runnable(const Fiber *f) {
    if (blk.backward) {
        for (int i = f->linear - 1; i >= 0; i--)
            if (blk.f[i].state == RUNNABLE) return &blk.f[i];
    } else {
        for (int i = f->linear + 1; i < blk.n; i++)
            if (blk.f[i].state == RUNNABLE) return &blk.f[i];
    }
    return NULL;
}

/* Leaves fiber f for the next runnable one in order (directly, saving the
 * trip through the scheduler), or for the scheduler at the end of a pass. */
static void to_scheduler(bool exiting) {
    Fiber *f = t_cur, *n = next_runnable(f);
    void *to = n ? n->sp : sched_sp;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? NULL : &f->fake, n ? n->stack_lo : main_lo,
                                   n ? n->stack_size : main_size);
#else
    (void)exiting;
#endif
    t_cur = n;
    emu_switch(&f->sp, to);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, NULL, NULL);
#endif
}

/* Waits (switching to other fibers) until this fiber is released. */
static void wait_released(void) {
    while (t_cur->state != RUNNABLE) to_scheduler(false);
}

static void fiber_exit_checks(Fiber *f) {
    if (blk.arrived > 0)
        fail("this thread exits while %d thread(s) of its block wait at __syncthreads (%s:%d); "
             "every thread must reach the barrier",
             blk.arrived, blk.bar_file, blk.bar_line);
    const int base = f->warp * 32;
    for (unsigned m = blk.w[f->warp].at_warp; m; m &= m - 1) {
        const int l = __builtin_ctz(m);
        const Fiber &o = blk.f[base + l];
        if (o.mask >> f->lane & 1)
            fail("this lane exits while lane %d waits for it in a warp collective with mask 0x%08x "
                 "(%s:%d)",
                 l, o.mask, o.file, o.line);
    }
}

static void fiber_entry(void) {
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    cur_body(cur_ctx);
    Fiber *f = t_cur;
    fiber_exit_checks(f);
    f->state = EXITED;
    blk.w[f->warp].exited |= 1u << f->lane;
    blk.exited++;
    blk.live--;
    to_scheduler(true);
    fail("an exited fiber was resumed");
}

static void fiber_init(Fiber *f, char *lo, size_t size) {
    f->stack_lo = lo;
    f->stack_size = size;
    f->fake = NULL;
#ifdef EMU_ASAN
    /* frames left by the previous block's fibers returned (and unpoisoned
     * themselves) but fiber_entry's, at the top */
    const size_t top_bytes = size < 16384 ? size : 16384;
    __asan_unpoison_memory_region(lo + size - top_bytes, top_bytes);
#endif
    uintptr_t top = ((uintptr_t)lo + size) & ~(uintptr_t)15;
    uint64_t *s = (uint64_t *)top;
    *--s = 0;                        /* fiber_entry's return address: never used */
    *--s = (uint64_t)&fiber_entry;   /* emu_switch returns here */
    for (int k = 0; k < 6; k++) *--s = 0; /* rbp rbx r12-r15 */
    uint32_t ctl[2];
    asm volatile("stmxcsr %0" : "=m"(ctl[0]));
    asm volatile("fnstcw %0" : "=m"(ctl[1]));
    *--s = (uint64_t)ctl[0] | (uint64_t)(ctl[1] & 0xffff) << 32;
    f->sp = s;
}

static void resume(Fiber *f) {
    t_cur = f;
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&sched_fake, f->stack_lo, f->stack_size);
#endif
    emu_switch(&sched_sp, f->sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(sched_fake, NULL, NULL);
#endif
    t_cur = NULL;
}

static const char *state_name(State s) {
    return s == RUNNABLE ? "runnable" : s == AT_BARRIER ? "at __syncthreads" : s == AT_WARP ? "in a warp collective" : s == SPINNING ? "spinning" : "exited";
}

/* " thread T <where it waits>;" appended to msg at len; the new length. */
static int describe(char *msg, size_t cap, int len, const Block &b, const Fiber &f) {
    if (len >= (int)cap) return len;
    if (f.state == SPINNING) {
        const Spin &p = b.spin[f.linear];
        return len + snprintf(msg + len, cap - (size_t)len,
                              " thread %d spins on flag %p = %u, waiting for >= %u (what %d) at "
                              "%s:%d;",
                              f.linear, (const void *)p.flag, *(const volatile unsigned *)p.flag,
                              p.target, p.what, f.file, f.line);
    }
    return len + snprintf(msg + len, cap - (size_t)len, " thread %d %s (%s:%d, mask 0x%08x);",
                          f.linear, state_name(f.state), f.file, f.line, f.mask);
}

[[noreturn]] static void deadlock(void) {
    char msg[1200];
    int len = snprintf(msg, sizeof msg, "deadlock: no thread of the block can go on;");
    int shown = 0;
    for (int i = 0; i < blk.n && shown < 6 && len < (int)sizeof msg; i++) {
        const Fiber &f = blk.f[i];
        if (f.state == EXITED) continue;
        if (i > 0 && blk.f[i - 1].state == f.state && blk.f[i - 1].line == f.line &&
            blk.f[i - 1].mask == f.mask)
            continue;
        len = describe(msg, sizeof msg, len, blk, f);
        shown++;
    }
    t_cur = NULL;
    fail("in kernel %s block (%u,%u,%u): %s (%d exited)", cur_name, t_block.x, t_block.y,
         t_block.z, msg, blk.exited);
}

/* Every fiber of b at its start, on the stacks from stk on. */
static void block_reset(Block &b, char *const *stk) {
    for (int i = 0; i < b.n; i++) {
        Fiber *f = &b.f[i];
        f->state = RUNNABLE;
        f->file = "";
        f->line = 0;
        f->mask = 0;
        fiber_init(f, stk[i], stack_bytes);
    }
    for (Warp &w : b.w) w.exited = w.at_barrier = w.at_warp = 0;
    b.live = b.n;
    b.arrived = b.exited = 0;
}

/* A spinning fiber becomes runnable once its flag changed: only another
 * fiber can change it, so one whose flag did not change cannot go on. */
static inline bool ready(Fiber *f) {
    if (f->state == SPINNING &&
        *(const volatile unsigned *)blk.spin[f->linear].flag != blk.spin[f->linear].seen)
        f->state = RUNNABLE;
    return f->state == RUNNABLE;
}

/* Resumes every fiber of the running block that can go on, once, in the
 * block's order; false when none could. */
static bool block_pass(void) {
    bool ran = false;
    for (int k = 0; k < blk.n; k++) {
        Fiber *f = &blk.f[blk.backward ? blk.n - 1 - k : k];
        if (!ready(f)) continue;
        resume(f);
        ran = true;
    }
    return ran;
}

static void run_block(bool backward) {
    blk.backward = backward;
    block_reset(blk, stacks.data());
    while (blk.live > 0)
        if (!block_pass() && blk.live > 0) deadlock();
}

void spin(const unsigned *flag, unsigned value, unsigned target, int what, const char *file,
          int line) {
    Fiber *f = t_cur;
    if (!f) fail("a dependency-flag wait outside a kernel");
    if (blk.spin.size() < (size_t)blk.n) blk.spin.resize(blk.n);
    blk.spin[f->linear] = Spin{flag, value, target, what};
    f->state = SPINNING;
    f->file = file;
    f->line = line;
    f->mask = 0;
    wait_released();
}

/* ---- barriers and collectives ----------------------------------------------------- */
void syncthreads(const char *file, int line) {
    Fiber *f = t_cur;
    if (!f) fail("__syncthreads outside a kernel");
    if (blk.exited > 0)
        fail("__syncthreads (%s:%d) reached after %d thread(s) of the block exited; every thread "
             "must reach the barrier",
             file, line, blk.exited);
    if (blk.arrived == 0) {
        blk.bar_file = file;
        blk.bar_line = line;
    } else if (blk.bar_line != line || (blk.bar_file != file && strcmp(blk.bar_file, file) != 0)) {
        fail("threads of one block wait at different __syncthreads: %s:%d and %s:%d (divergent "
             "barrier)",
             blk.bar_file, blk.bar_line, file, line);
    }
    f->state = AT_BARRIER;
    f->file = file;
    f->line = line;
    f->mask = 0;
    blk.w[f->warp].at_barrier |= 1u << f->lane;
    if (++blk.arrived == blk.n) {
        for (Fiber &o : blk.f) o.state = RUNNABLE;
        for (Warp &w : blk.w) w.at_barrier = 0;
        blk.arrived = 0;
        return;
    }
    wait_released();
}

static const char *op_name(Op op) {
    static const char *n[] = {"__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync",
                              "__shfl_up_sync", "__reduce_add_sync", "__reduce_min_sync",
                              "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
                              "__reduce_xor_sync", "__ballot_sync", "__any_sync", "__all_sync",
                              "__syncwarp"};
    return n[op];
}

static void complete(Fiber *w, unsigned mask) {
    const Fiber &me = *t_cur;
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        const Fiber &o = w[l];
        if (o.op != me.op || o.mask != me.mask || o.line != me.line || o.width != me.width ||
            (o.file != me.file && strcmp(o.file, me.file)))
            fail("diverged lanes: lane %d is in %s (%s:%d, mask 0x%08x) while lane %d is in %s "
                 "(%s:%d, mask 0x%08x)",
                 me.lane, op_name(me.op), me.file, me.line, me.mask, l, op_name(o.op), o.file,
                 o.line, o.mask);
    }
    const bool sgn = me.arg != 0;
    uint64_t red = 0;
    int first = 1;
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        const uint64_t v = w[l].value;
        const int32_t s = (int32_t)(uint32_t)v;
        switch (me.op) {
        case OP_ADD: red = (uint32_t)(red + v); break;
        case OP_MIN:
            if (first || (sgn ? s < (int32_t)(uint32_t)red : (uint32_t)v < (uint32_t)red)) red = (uint32_t)v;
            break;
        case OP_MAX:
            if (first || (sgn ? s > (int32_t)(uint32_t)red : (uint32_t)v > (uint32_t)red)) red = (uint32_t)v;
            break;
        case OP_AND: red = first ? (uint32_t)v : red & v; break;
        case OP_OR: red |= (uint32_t)v; break;
        case OP_XOR: red ^= (uint32_t)v; break;
        case OP_BALLOT: case OP_ANY: case OP_ALL: red |= (uint64_t)(v != 0) << l; break;
        default: break;
        }
        first = 0;
    }
    for (int l = 0; l < 32; l++) {
        if (!(mask >> l & 1)) continue;
        Fiber &o = w[l];
        const int wd = o.width, seg = l & ~(wd - 1), in = l & (wd - 1);
        int src = l;
        switch (o.op) {
        case OP_SHFL: src = seg + (o.arg & (wd - 1)); break;
        case OP_SHFL_XOR: src = l ^ o.arg; if ((src & ~(wd - 1)) != seg) src = l; break;
        case OP_SHFL_DOWN: src = in + o.arg < wd ? l + o.arg : l; break;
        case OP_SHFL_UP: src = in >= o.arg ? l - o.arg : l; break;
        default: break;
        }
        if (o.op <= OP_SHFL_UP) {
            if (src < 0 || src > 31 || !(mask >> src & 1))
                fail("lane %d's %s (%s:%d) reads lane %d, which is not in its mask 0x%08x", l,
                     op_name(o.op), o.file, o.line, src, mask);
            o.result = w[src].value;
        } else if (o.op == OP_BALLOT) {
            o.result = red;
        } else if (o.op == OP_ANY) {
            o.result = red != 0;
        } else if (o.op == OP_ALL) {
            o.result = red == mask;
        } else {
            o.result = red;
        }
        o.state = RUNNABLE;
    }
    blk.w[me.warp].at_warp &= ~mask;
}

uint64_t warp_op(Op op, unsigned mask, uint64_t v, int arg, int width, const char *file, int line) {
    Fiber *f = t_cur;
    if (!f) fail("%s outside a kernel", op_name(op));
    if (!(mask >> f->lane & 1))
        fail("%s (%s:%d) with mask 0x%08x, which leaves out the calling lane %d", op_name(op), file,
             line, mask, f->lane);
    if (width < 1 || width > 32 || (width & (width - 1)))
        fail("%s (%s:%d): width %d is not a power of two up to 32", op_name(op), file, line, width);
    Fiber *w = &blk.f[f->warp * 32];
    Warp &wm = blk.w[f->warp];
    if (mask & (~wm.present | wm.exited | wm.at_barrier)) {
        const int present = __builtin_popcount(wm.present);
        for (int l = 0; l < 32; l++) {
            if (!(mask >> l & 1)) continue;
            if (!(wm.present >> l & 1))
                fail("%s (%s:%d) with mask 0x%08x names lane %d, which does not exist (the block "
                     "has %d threads, this warp %d lanes)",
                     op_name(op), file, line, mask, l, blk.n, present);
            if (wm.exited >> l & 1)
                fail("%s (%s:%d) with mask 0x%08x names lane %d, which has exited", op_name(op),
                     file, line, mask, l);
            if (wm.at_barrier >> l & 1)
                fail("%s (%s:%d) with mask 0x%08x names lane %d, which waits at __syncthreads "
                     "(%s:%d) (diverged lanes)",
                     op_name(op), file, line, mask, l, w[l].file, w[l].line);
        }
    }
    f->op = op;
    f->mask = mask;
    f->value = v;
    f->arg = arg;
    f->width = width;
    f->file = file;
    f->line = line;
    f->state = AT_WARP;
    wm.at_warp |= 1u << f->lane;
    if ((wm.at_warp & mask) == mask)
        complete(w, mask);
    else
        wait_released();
    return f->result;
}

unsigned active_mask(void) {
    Fiber *f = t_cur;
    if (!f) fail("__activemask outside a kernel");
    unsigned m = 0;
    for (int l = 0; l < 32 && f->warp * 32 + l < blk.n; l++)
        if (blk.f[f->warp * 32 + l].state != EXITED) m |= 1u << l;
    return m;
}

void *dynamic_smem(void) {
    if (!t_cur) fail("dynamic shared memory outside a kernel");
    return blk.smem;
}

void global_only(const void *p, size_t n, const char *what) {
    const uintptr_t a = (uintptr_t)p, s = (uintptr_t)blk.smem;
    if (t_cur && blk.smem && a + n > s && a < s + blk.smem_bytes)
        fail("%s of %zu bytes at %p, in the block's dynamic shared memory (%p, %zu bytes): it is a "
             "global-memory load (ld.global), which faults on a shared-memory address on a GPU",
             what, n, p, blk.smem, blk.smem_bytes);
}

/* ---- launches ----------------------------------------------------------------------- */
static std::map<const void *, int> max_dyn_smem; /* cudaFuncSetAttribute */

static bool refuse(cudaError_t err, const char *name, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-emu: launch of %s refused (a GPU would refuse it too): %s\n", name, msg);
    last_error = err;
    return false;
}

static size_t stack_size(void) {
    const char *s = getenv("CUDA_EMU_STACK_KB");
    const long kb = s ? atol(s) : 0;
    return (size_t)(kb >= 16 ? kb : 256) * 1024;
}

bool check_config(const Config &c, const char *name, const void *func) {
    if (t_cur) fail("kernel %s launched from inside a kernel", name);
    static pthread_t owner;
    static bool owned;
    if (!owned) owner = pthread_self(), owned = true;
    if (!pthread_equal(owner, pthread_self()))
        fail("kernel %s launched from a second host thread; the emulator runs on one", name);
    const dim3 g = c.grid, b = c.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z)
        return refuse(cudaErrorInvalidConfiguration, name, "grid (%u,%u,%u) or block (%u,%u,%u) has a zero dimension", g.x, g.y, g.z, b.x, b.y, b.z);
    if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024)
        return refuse(cudaErrorInvalidConfiguration, name, "block (%u,%u,%u): sm_90 takes at most 1024 threads (x, y <= 1024, z <= 64)", b.x, b.y, b.z);
    if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
        return refuse(cudaErrorInvalidConfiguration, name, "grid (%u,%u,%u): at most (2^31-1, 65535, 65535)", g.x, g.y, g.z);
    if (c.smem > SMEM_OPTIN_MAX)
        return refuse(cudaErrorInvalidValue, name, "%zu bytes of dynamic shared memory: sm_90 has at most %zu per block", c.smem, (size_t)SMEM_OPTIN_MAX);
    if (c.smem > SMEM_DEFAULT) {
        auto it = max_dyn_smem.find(func);
        if (it == max_dyn_smem.end() || (size_t)it->second < c.smem)
            return refuse(cudaErrorInvalidValue, name, "%zu bytes of dynamic shared memory: above 48 KiB needs cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, >= %zu) first", c.smem, c.smem);
    }
    return true;
}

void grid_dependency_sync(void) {
    if (!t_cur) fail("cudaGridDependencySynchronize outside a kernel");
    blk.pdl_waited = true;
}

void grid_trigger(void) {
    if (!t_cur) fail("cudaTriggerProgrammaticLaunchCompletion outside a kernel");
}

static void ldg_kernel_start(bool pdl);

void fail_attr(const char *name, int id) {
    fail("launch of %s: launch attribute %d is not emulated", name, id);
}

/* Fiber stacks for n threads, the ASan bounds of the launching thread's. */
static void prepare_stacks(unsigned long long n) {
    if (!stack_bytes) stack_bytes = stack_size();
#ifdef EMU_ASAN
    if (!main_lo) { /* the launching thread's stack, for ASan's fiber switches */
        pthread_attr_t at;
        void *lo = NULL;
        size_t sz = 0;
        if (pthread_getattr_np(pthread_self(), &at) == 0) {
            pthread_attr_getstack(&at, &lo, &sz);
            pthread_attr_destroy(&at);
        }
        main_lo = lo;
        main_size = sz;
    }
#endif
    while (stacks.size() < n) {
        const long page = sysconf(_SC_PAGESIZE);
        char *m = (char *)mmap(NULL, stack_bytes + (size_t)page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) fail("no memory for a fiber stack");
        mprotect(m, (size_t)page, PROT_NONE); /* guard: an overflow faults */
        stacks.push_back(m + page);
    }
}

/* b's fibers and warps for blocks of shape bd. */
static void block_shape(Block &b, dim3 bd) {
    const unsigned long long threads = (unsigned long long)bd.x * bd.y * bd.z;
    b.n = (int)threads;
    b.f.assign(threads, Fiber());
    b.w.assign((threads + 31) / 32, Warp());
    for (size_t k = 0; k < b.w.size(); k++) {
        const unsigned long long left = threads - 32 * k;
        b.w[k].present = left >= 32 ? 0xffffffffu : (1u << left) - 1;
    }
    for (int i = 0; i < b.n; i++) {
        Fiber &f = b.f[i];
        f.linear = i;
        f.lane = i & 31;
        f.warp = i >> 5;
        f.tid = uint3{(unsigned)i % bd.x, (unsigned)i / bd.x % bd.y, (unsigned)i / (bd.x * bd.y)};
    }
}

static bool launch_coop(const Config &c, const char *name, const void *func);

bool launch(const Config &c, const char *name, const void *func, Body body, void *ctx) {
    if (!check_config(c, name, func)) return false;
    const dim3 g = c.grid, b = c.block;
    cur_body = body;
    cur_ctx = ctx;
    cur_name = name;
    t_bdim = uint3{b.x, b.y, b.z};
    t_gdim = uint3{g.x, g.y, g.z};
    if (c.coop) {
        const bool ok = launch_coop(c, name, func);
        cur_name = NULL;
        return ok;
    }
    ldg_kernel_start(c.pdl);
    prepare_stacks((unsigned long long)b.x * b.y * b.z);
    block_shape(blk, b);
    unsigned long long nblock = 0;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++, nblock++) {
                t_block = uint3{x, y, z};
                void *smem = NULL;
                if (c.smem) {
                    smem = malloc(c.smem);
                    if (!smem) fail("no memory for %zu bytes of shared memory", c.smem);
                    memset(smem, 0xff, c.smem);
                }
                blk.smem = smem;
                blk.smem_bytes = c.smem;
                blk.pdl_waited = false;
                run_block(nblock & 1);
                if (c.pdl && !blk.pdl_waited)
                    fail("kernel %s, block (%u,%u,%u): launched with programmatic stream "
                         "serialization, but no thread of the block called "
                         "cudaGridDependencySynchronize", name, x, y, z);
                free(smem);
                blk.smem = NULL;
            }
    cur_name = NULL;
    return true;
}

/* ---- memory ---------------------------------------------------------------------------- */
std::map<uintptr_t, size_t> allocs;

bool is_device(const void *p, size_t n) {
    auto it = allocs.upper_bound((uintptr_t)p);
    if (it == allocs.begin()) return false;
    --it;
    return (uintptr_t)p >= it->first && (uintptr_t)p + n <= it->first + it->second;
}

/* ---- the read-only path under programmatic dependent launch ---------------------------
 * __ldg (ld.global.nc) requires data that does not change while the kernel
 * lives. A kernel launched with programmatic stream serialization lives
 * beside the kernels before it, back to the last launch without the
 * attribute or the last copy or memset (each kernel triggers its
 * successor at its start, so a chain of them may all be resident), and
 * those may still be writing. The emulator runs kernels one after another,
 * so the stale read never happens here; with CUDA_EMU_LDG_CHECK=1 it is
 * caught anyway: at each kernel's start the device memory is compared with
 * a copy taken at the previous one, the bytes that changed are added to
 * the chain's written set (emptied by a plain launch, a copy, a memset, an
 * allocation), and an __ldg of any of them fails. Every allocation is
 * copied at every launch, so the check is for small models. */
static std::map<uintptr_t, std::vector<uint8_t>> ldg_snap;  /* allocation -> its bytes at the last point */
static std::map<uintptr_t, std::vector<uint8_t>> ldg_chain; /* allocation -> 1 per byte the chain wrote */
static bool ldg_pdl;                                         /* the running kernel has the attribute */

static bool ldg_on(void) {
    const char *v = getenv("CUDA_EMU_LDG_CHECK");
    return v && !strcmp(v, "1");
}

static void ldg_take(void) {
    ldg_snap.clear();
    for (const auto &a : allocs) ldg_snap[a.first].assign((const uint8_t *)a.first, (const uint8_t *)a.first + a.second);
}

/* A copy, a memset or an allocation: the stream waits for every kernel before it. */
void ldg_barrier(void) {
    ldg_chain.clear();
    if (ldg_on()) ldg_take();
    else ldg_snap.clear();
}

static void ldg_kernel_start(bool pdl) {
    ldg_pdl = pdl;
    if (!ldg_on()) {
        ldg_snap.clear();
        ldg_chain.clear();
        return;
    }
    if (!pdl) ldg_chain.clear(); /* it waits for the kernels before it to complete */
    for (const auto &a : allocs) {
        auto it = ldg_snap.find(a.first);
        if (it == ldg_snap.end() || it->second.size() != a.second) continue;
        const uint8_t *now = (const uint8_t *)a.first, *was = it->second.data();
        if (!memcmp(now, was, a.second)) continue;
        std::vector<uint8_t> &w = ldg_chain[a.first];
        if (w.size() != a.second) w.assign(a.second, 0);
        for (size_t i = 0; i < a.second; i++) w[i] |= now[i] != was[i];
    }
    ldg_take();
}

void ldg_read(const void *p, size_t n) {
    if (!ldg_pdl || ldg_chain.empty() || !t_cur) return;
    auto it = ldg_chain.upper_bound((uintptr_t)p);
    if (it == ldg_chain.begin()) return;
    --it;
    const size_t off = (uintptr_t)p - it->first;
    if (off >= it->second.size()) return;
    for (size_t i = 0; i < n && off + i < it->second.size(); i++)
        if (it->second[off + i])
            fail("kernel %s: __ldg of %zu bytes at %p (allocation %p + %zu), which a kernel before it "
                 "wrote: launched with programmatic stream serialization, this kernel runs beside "
                 "that one, and the read-only path may return the old bytes (use a plain load)",
                 cur_name, n, p, (void *)it->first, off);
}

cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind k, const char *what) {
    const bool dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    const bool sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (n && dd && !is_device(dst, n))
        fail("%s of %zu bytes: destination %p is not inside one cudaMalloc allocation", what, n, dst);
    if (n && sd && !is_device(src, n))
        fail("%s of %zu bytes: source %p is not inside one cudaMalloc allocation", what, n, src);
    return cudaSuccess;
}

/* ---- cooperative launches ------------------------------------------------------------
 * Every block of a cooperative launch is resident at once: all its fibers
 * exist together. The block that runs is in blk, as a plain launch's block
 * is (so the barriers and collectives, and plain launches, are unchanged);
 * the others wait in coop_blocks, and enter_block swaps one for another
 * (their vectors trade owners, so fibers do not move). A pass over a block
 * resumes each of its runnable fibers once (each runs until a barrier, a
 * collective, a flag wait or its end). By default the scheduler goes round
 * the blocks, first to last, a pass each; the schedule-dependence check
 * instead runs by priority, always the first block (in increasing or
 * decreasing index) that can go on, so a block runs as far as its
 * dependencies let it before any block after it. A fiber spinning on a
 * dependency flag (persist.cuh) is passed over until the flag changes; when
 * no block can go on, that is a deadlock. Static __shared__ variables are
 * the running block's: each block keeps its own copy (statics, in the order
 * of coop_statics), swapped by enter_block too. */
bool coop_running;
static std::vector<std::pair<void *, size_t>> coop_statics; /* address, bytes */
static std::vector<Block> coop_blocks; /* the slot of the block in blk holds blk's old content */
static size_t coop_cur;                /* the block in blk */

int sm_count(void) {
    const char *sms = getenv("CUDA_EMU_SMS"); /* the planners size grids by it */
    return sms && atoi(sms) > 0 ? atoi(sms) : 132;
}

static Block &coop_block(size_t k) { return k == coop_cur ? blk : coop_blocks[k]; }

void shared_static_coop(void *p, size_t n) {
    for (const auto &v : coop_statics)
        if (v.first == p) return;
    coop_statics.push_back({p, n});
    for (size_t k = 0; k < coop_blocks.size(); k++)
        coop_block(k).statics.resize(coop_block(k).statics.size() + n, 0xff);
    memset(p, 0xff, n); /* the running block's fresh copy: never written, like shared memory */
}

static void enter_block(size_t k) {
    if (k == coop_cur) return;
    Block &in = coop_blocks[k];
    size_t off = 0;
    for (const auto &v : coop_statics) {
        memcpy(blk.statics.data() + off, v.first, v.second);
        memcpy(v.first, in.statics.data() + off, v.second);
        off += v.second;
    }
    std::swap(blk, coop_blocks[coop_cur]);
    std::swap(blk, in);
    coop_cur = k;
    t_block = blk.idx;
}

[[noreturn]] static void coop_deadlock(void) {
    char msg[3000];
    int len = snprintf(msg, sizeof msg,
                       "deadlock in cooperative kernel %s: no block of the %zu can go on;",
                       cur_name, coop_blocks.size());
    size_t shown = 0, waiting = 0, done = 0;
    for (size_t k = 0; k < coop_blocks.size(); k++) {
        const Block &b = coop_block(k);
        if (!b.live) {
            done++;
            continue;
        }
        waiting++;
        if (shown == 12 || len >= (int)sizeof msg) continue;
        const Fiber *w = NULL; /* a spinner, else the first waiting fiber */
        for (const Fiber &f : b.f) {
            if (f.state == SPINNING) {
                w = &f;
                break;
            }
            if (f.state != EXITED && !w) w = &f;
        }
        len += snprintf(msg + len, sizeof msg - (size_t)len, " block (%u,%u,%u):", b.idx.x,
                        b.idx.y, b.idx.z);
        len = describe(msg, sizeof msg, len, b, *w);
        shown++;
    }
    t_cur = NULL;
    fail("%s %zu block(s) waiting%s, %zu finished", msg, waiting,
         waiting > shown ? " (the first 12 shown)" : "", done);
}

enum Order { ROUND_ROBIN, PRIORITY_UP, PRIORITY_DOWN };

/* Runs the launch's blocks to their end, interleaved, from every block's
 * start, in the given order. */
static void coop_run(const Config &c, Order order) {
    const bool backward = order == PRIORITY_DOWN;
    const size_t nb = coop_blocks.size();
    coop_statics.clear();
    for (size_t i = 0; i < nb; i++) {
        Block &b = coop_blocks[i];
        block_reset(b, stacks.data() + i * (size_t)b.n);
        b.statics.clear();
        b.pdl_waited = false;
        if (c.smem) memset(b.smem, 0xff, c.smem);
    }
    coop_cur = backward ? nb - 1 : 0;
    std::swap(blk, coop_blocks[coop_cur]);
    t_block = blk.idx;
    coop_running = true;
    for (;;) {
        bool ran = false, live = false;
        for (size_t k = 0; k < nb && !(ran && order != ROUND_ROBIN); k++) {
            const size_t i = backward ? nb - 1 - k : k;
            if (!coop_block(i).live) continue;
            enter_block(i);
            ran |= block_pass();
            live = true;
        }
        if (!live) break;
        if (!ran) coop_deadlock();
    }
    coop_running = false;
    std::swap(blk, coop_blocks[coop_cur]);
    for (const Block &b : coop_blocks)
        if (c.pdl && !b.pdl_waited)
            fail("kernel %s, block (%u,%u,%u): launched with programmatic stream serialization, "
                 "but no thread of the block called cudaGridDependencySynchronize",
                 cur_name, b.idx.x, b.idx.y, b.idx.z);
}

typedef std::vector<std::pair<uintptr_t, std::vector<uint8_t>>> Image; /* every allocation's bytes */

static Image device_image(void) {
    Image m;
    for (const auto &a : allocs)
        m.push_back({a.first, std::vector<uint8_t>((const uint8_t *)a.first,
                                                   (const uint8_t *)a.first + a.second)});
    return m;
}

/* CUDA_EMU_COOP_CHECK=1: the launch runs from the same device memory by
 * increasing block priority, by decreasing priority and round the blocks;
 * a byte that differs between the first result and a later one is a
 * result that depends on the order of the blocks. The two priority orders
 * catch blocks given fixed items; round the blocks catches blocks that
 * take items from a shared counter (the persistent step), where by either
 * priority one block takes every item in turn. */
static const char *order_name(Order o) {
    return o == PRIORITY_UP ? "increasing block priority"
           : o == PRIORITY_DOWN ? "decreasing block priority" : "round the blocks";
}

static void coop_checked(const Config &c) {
    const Image before = device_image();
    coop_run(c, PRIORITY_UP);
    const Image first = device_image();
    for (const Order o : {PRIORITY_DOWN, ROUND_ROBIN}) {
        for (const auto &a : before) memcpy((void *)a.first, a.second.data(), a.second.size());
        coop_run(c, o);
        for (const auto &a : first) {
            const uint8_t *now = (const uint8_t *)a.first;
            const size_t n = a.second.size();
            if (!memcmp(now, a.second.data(), n)) continue;
            size_t i = 0;
            while (now[i] == a.second[i]) i++;
            const size_t w = i & ~(size_t)3;
            uint32_t u = 0, v = 0;
            if (w + 4 <= n) {
                memcpy(&u, a.second.data() + w, 4);
                memcpy(&v, now + w, 4);
            }
            fail("kernel %s (cooperative, CUDA_EMU_COOP_CHECK=1): the result depends on the order "
                 "of the blocks: allocation %p (%zu bytes) differs at offset %zu: 0x%02x by %s, "
                 "0x%02x by %s (the 32-bit word at offset %zu: 0x%08x / 0x%08x); a block reads "
                 "what another has not written yet (a missing flag wait?)",
                 cur_name, (void *)a.first, n, i, a.second[i], order_name(PRIORITY_UP), now[i],
                 order_name(o), w, u, v);
        }
    }
}

static bool launch_coop(const Config &c, const char *name, const void *func) {
    const dim3 g = c.grid, bd = c.block;
    const int threads = (int)(bd.x * bd.y * bd.z);
    const unsigned long long nb = (unsigned long long)g.x * g.y * g.z;
    int per_sm = 0;
    emu_occupancy(&per_sm, func, threads, c.smem);
    const int sms = sm_count();
    if (nb > (unsigned long long)per_sm * sms)
        return refuse(cudaErrorCooperativeLaunchTooLarge, name,
                      "cooperative grid of %llu blocks of %d threads with %zu bytes of dynamic "
                      "shared memory: at most %d can be resident (%d per multiprocessor x %d "
                      "multiprocessors)",
                      nb, threads, c.smem, per_sm * sms, per_sm, sms);
    ldg_kernel_start(c.pdl);
    prepare_stacks(nb * threads);
    coop_blocks.resize(nb);
    size_t i = 0;
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++, i++) {
                Block &b = coop_blocks[i];
                block_shape(b, bd);
                b.idx = uint3{x, y, z};
                b.backward = i & 1;
                b.smem = NULL;
                b.smem_bytes = c.smem;
                if (c.smem && !(b.smem = malloc(c.smem)))
                    fail("no memory for %zu bytes of shared memory", c.smem);
            }
    const char *chk = getenv("CUDA_EMU_COOP_CHECK");
    if (chk && !strcmp(chk, "1"))
        coop_checked(c);
    else
        coop_run(c, ROUND_ROBIN);
    for (Block &b : coop_blocks) free(b.smem);
    coop_blocks.clear();
    return true;
}

} /* namespace emu */

using namespace emu;

/* ---- occupancy and function attributes (cuda_runtime.h) ------------------------------- */
cudaError_t emu_occupancy(int *blocks, const void *func, int block, size_t smem) {
    if (!blocks || !func || block <= 0 || block > 1024) return last_error = cudaErrorInvalidValue;
    auto it = max_dyn_smem.find(func);
    const size_t cap = it != max_dyn_smem.end() ? (size_t)it->second : (size_t)SMEM_DEFAULT;
    if (smem > cap) {
        *blocks = 0;
        return cudaSuccess;
    }
    /* sm_90: 2048 threads, 32 blocks, 64K registers (64 a thread assumed),
     * 228 KiB of shared memory with 1 KiB reserved a block */
    const int warps = (block + 31) / 32;
    int n = 2048 / (32 * warps);
    n = std::min(n, 32);
    n = std::min(n, 65536 / (64 * 32 * warps));
    n = std::min(n, (int)((228 * 1024) / (smem + 1024)));
    *blocks = n;
    return cudaSuccess;
}

cudaError_t emu_func_set_attribute(const void *func, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || (size_t)value > SMEM_OPTIN_MAX) return last_error = cudaErrorInvalidValue;
        max_dyn_smem[func] = value;
    }
    return cudaSuccess;
}
