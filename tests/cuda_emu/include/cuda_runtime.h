/* cuda-emu: what the kernels of kernels/cuda see in place of the CUDA toolkit's
 * cuda_runtime.h when they are built as C++ for the CPU emulator
 * (tests/cuda_emu/README.md). It defines the CUDA keywords, the built-in
 * variables, the vector types, the device intrinsics the kernels use, the
 * warp collectives and __syncthreads (all of them calls into the fiber
 * scheduler in emu.cpp), and declares the runtime API the backend calls.
 *
 * Every CUDA thread is a fiber; threadIdx is the running fiber's, blockIdx,
 * blockDim and gridDim the running block's. Static __shared__ variables
 * become function statics: blocks of a plain launch run one after another,
 * so one copy per kernel is one copy per block; translate.py registers each
 * with emu::shared_static, and while a cooperative launch runs (its blocks
 * interleaved) the emulator swaps every block's own copy in and out of the
 * statics as it moves between blocks. extern __shared__ arrays are
 * rewritten by translate.py into a pointer to the block's dynamic shared
 * memory (a fresh heap buffer per block, filled with 0xff bytes, so ASan
 * sees overruns and a read before any write gives NaN). */
#ifndef CUDA_EMU_RUNTIME_H
#define CUDA_EMU_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define CUDA_EMU 1
#define CUDART_VERSION 13000

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __grid_constant__
#define __restrict__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static

/* ---- vector types ------------------------------------------------------- */
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(8) int2 { int x, y; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
static inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

/* ---- runtime API ---------------------------------------------------------- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorCooperativeLaunchTooLarge = 720,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorGraphExecUpdateFailure = 910,
};
typedef enum cudaError cudaError_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
/* Stream capture: between cudaStreamBeginCapture and cudaStreamEndCapture
 * the stream's launches, copies and memsets are recorded as graph nodes
 * (a kernel's arguments copied, as a GPU's graph keeps them) instead of
 * run; cudaStreamSynchronize on it fails and invalidates the capture, as
 * on a GPU. An executable graph runs its nodes in order at
 * cudaGraphLaunch; a copy node reads its source then, so pinned staging
 * written between launches is what a replay sees. cudaGraphExecUpdate
 * takes a graph of the same node kinds and kernels, else fails with
 * cudaErrorGraphExecUpdateFailure. */
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph_exec *cudaGraphExec_t;
typedef struct emu_graph_node *cudaGraphNode_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1 };
struct cudaGraphExecUpdateResultInfo {
    int result;
};
/* Launch attributes (cudaLaunchKernelEx, which translate.py turns into
 * emu::launch_kernel_ex to pass the kernel's name): programmatic stream
 * serialization and cooperative. Kernels run one after another, so the
 * dependency programmatic serialization relaxes always holds; the emulator
 * checks that every block of a kernel launched with it calls
 * cudaGridDependencySynchronize. A cooperative launch has all its blocks
 * resident at once (README.md, "Cooperative launches"). */
enum cudaLaunchAttributeID {
    cudaLaunchAttributeCooperative = 2,
    cudaLaunchAttributeProgrammaticStreamSerialization = 6,
};
union cudaLaunchAttributeValue {
    int programmaticStreamSerializationAllowed;
    int cooperative;
    char pad[64];
};
struct cudaLaunchAttribute {
    cudaLaunchAttributeID id;
    cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned numAttrs;
};
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin, sharedMemPerMultiprocessor;
    int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
    int major, minor, multiProcessorCount, maxThreadsPerMultiProcessor;
    int l2CacheSize, memoryBusWidth;
};

const char *cudaGetErrorString(cudaError_t err);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
template <class T>
static inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
template <class T>
static inline cudaError_t cudaMallocHost(T **p, size_t bytes) { return cudaMallocHost((void **)p, bytes); }
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind k,
                            cudaStream_t s = 0);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind k, cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s = 0);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *ev);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g,
                                cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t emu_func_set_attribute(const void *func, cudaFuncAttribute attr, int value);
template <class F>
static inline cudaError_t cudaFuncSetAttribute(F *func, cudaFuncAttribute attr, int value) {
    return emu_func_set_attribute((const void *)func, attr, value);
}
/* Blocks of `block` threads with smem bytes of dynamic shared memory that
 * one sm_90 multiprocessor holds, for a kernel of 64 registers a thread
 * (the emulator does not know a kernel's registers; that is a 128-thread
 * matrix-vector block of mv.cuh); 0 for a block it cannot hold. */
cudaError_t emu_occupancy(int *blocks, const void *func, int block, size_t smem);
template <class F>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, F *func,
                                                                       int block, size_t smem) {
    return emu_occupancy(blocks, (const void *)func, block, smem);
}

/* ---- the emulator's side (emu.cpp) ------------------------------------------ */
namespace emu {

struct Fiber; /* one CUDA thread */
/* one OS thread runs every kernel (launches from two threads are refused) */
extern uint3 t_block, t_bdim, t_gdim;
extern Fiber *t_cur;
const uint3 &thread_idx(void);

/* Misuse: prints "cuda-emu: ERROR: ..." with the kernel, block and thread,
 * and aborts (the test runner reports the crash with the message). */
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void syncthreads(const char *file, int line);
enum Op { OP_SHFL, OP_SHFL_XOR, OP_SHFL_DOWN, OP_SHFL_UP, OP_ADD, OP_MIN, OP_MAX, OP_AND, OP_OR,
          OP_XOR, OP_BALLOT, OP_ANY, OP_ALL, OP_SYNCWARP };
/* One warp collective on 64-bit payloads; returns this lane's result. */
uint64_t warp_op(Op op, unsigned mask, uint64_t v, int arg, int width, const char *file, int line);
unsigned active_mask(void);
void *dynamic_smem(void);
/* The global-memory loads (__ldg, __ldcs, __ldcg: ld.global.*) of n bytes at
 * p: fails when p lies in the running block's dynamic shared memory, where
 * such a load faults on a GPU. */
void global_only(const void *p, size_t n, const char *what);
/* Cooperative launches: thread 0 of a block waiting for a dependency flag
 * (kernels/cuda/persist.cuh) read value < target at flag; the fiber sleeps
 * until the flag changes, other blocks running meanwhile. */
void spin(const unsigned *flag, unsigned value, unsigned target, int what, const char *file,
          int line);
/* The static __shared__ variable at p (translate.py adds the call after
 * its declaration): while a cooperative launch runs it becomes per block. */
extern bool coop_running;
void shared_static_coop(void *p, size_t n);
static inline void shared_static(void *p, size_t n) {
    if (coop_running) shared_static_coop(p, n);
}

struct Config {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
    bool pdl;  /* programmatic stream serialization: each block must wait */
    bool coop; /* cooperative: every block resident at once */
};
static inline Config cfg(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0) { return {g, b, smem, s, false, false}; }
/* cudaGridDependencySynchronize: marks the running block as having waited. */
void grid_dependency_sync(void);
/* cudaTriggerProgrammaticLaunchCompletion: kernels run one after another,
 * so the next one cannot start early; only a call outside a kernel fails. */
void grid_trigger(void);
/* __ldg's check (emu.cpp, CUDA_EMU_LDG_CHECK=1): fails when the n bytes at
 * p were written by a kernel that may still run beside the current one. */
void ldg_read(const void *p, size_t n);
[[noreturn]] void fail_attr(const char *name, int id);

/* Runs body once per thread of every block (blocks one after another, or
 * interleaved in a cooperative launch);
 * false (with the error set for cudaGetLastError) when the configuration
 * breaks a launch limit of sm_90. */
typedef void (*Body)(void *);
bool launch(const Config &c, const char *name, const void *func, Body body, void *ctx);
/* While c.stream is captured: checks the configuration as launch does and
 * appends a kernel node that owns ctx. */
bool capturing(cudaStream_t s);
void record(const Config &c, const char *name, const void *func, Body body,
            std::shared_ptr<void> ctx);

template <class... P, class... A>
void launch_kernel(const Config &c, const char *name, void (*k)(P...), A &&...args) {
    /* the arguments are evaluated once and copied, as kernel parameters are */
    struct Ctx {
        void (*k)(P...);
        std::tuple<typename std::decay<P>::type...> a;
    };
    const Body body = [](void *p) {
        Ctx *x = (Ctx *)p;
        std::apply(x->k, x->a);
    };
    if (capturing(c.stream)) {
        std::shared_ptr<Ctx> ctx = std::make_shared<Ctx>(
            Ctx{k, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)});
        record(c, name, (const void *)k, body, ctx);
        return;
    }
    Ctx ctx{k, std::tuple<typename std::decay<P>::type...>(std::forward<A>(args)...)};
    launch(c, name, (const void *)k, body, &ctx);
}

template <class... P, class... A>
cudaError_t launch_kernel_ex(const cudaLaunchConfig_t *c, const char *name, void (*k)(P...),
                             A &&...args) {
    Config x = cfg(c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream);
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if (c->attrs[i].id == cudaLaunchAttributeProgrammaticStreamSerialization)
            x.pdl = c->attrs[i].val.programmaticStreamSerializationAllowed != 0;
        else if (c->attrs[i].id == cudaLaunchAttributeCooperative)
            x.coop = c->attrs[i].val.cooperative != 0;
        else
            fail_attr(name, (int)c->attrs[i].id);
    }
    launch_kernel(x, name, k, std::forward<A>(args)...);
    return cudaPeekAtLastError();
}

/* cudaLaunchCooperativeKernel(kernel, grid, block, args, smem, stream), which
 * translate.py turns into this call: args[i] points at the i-th parameter. */
template <class... P, size_t... I>
void launch_cooperative_args(const char *name, void (*k)(P...), const Config &c, void **args,
                             std::index_sequence<I...>) {
    launch_kernel(c, name, k, *(const typename std::decay<P>::type *)args[I]...);
}
template <class... P>
cudaError_t launch_cooperative(const char *name, void (*k)(P...), dim3 grid, dim3 block,
                               void **args, size_t smem = 0, cudaStream_t s = 0) {
    Config x = cfg(grid, block, smem, s);
    x.coop = true;
    launch_cooperative_args(name, k, x, args, std::index_sequence_for<P...>{});
    return cudaPeekAtLastError();
}

} /* namespace emu */

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::t_block)
/* references, not macros: cudaLaunchConfig_t has members of these names */
inline const uint3 &blockDim = emu::t_bdim;
inline const uint3 &gridDim = emu::t_gdim;
#define warpSize 32

#define __syncthreads() emu::syncthreads(__FILE__, __LINE__)
static inline void cudaGridDependencySynchronize(void) { emu::grid_dependency_sync(); }
static inline void cudaTriggerProgrammaticLaunchCompletion(void) { emu::grid_trigger(); }
#define __syncwarp(...) ((void)emu::warp_op(emu::OP_SYNCWARP, emu_mask_or_full(__VA_ARGS__), 0, 0, 32, __FILE__, __LINE__))
static inline unsigned emu_mask_or_full(unsigned m = 0xffffffffu) { return m; }

template <class T>
static inline uint64_t emu_bits(T v) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <class T>
static inline T emu_from_bits(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
#define EMU_SHFL(op, m, v, a, w) \
    emu_from_bits<std::decay<decltype(v)>::type>(emu::warp_op(op, m, emu_bits(v), a, w, __FILE__, __LINE__))
#define EMU_W(...) emu_width(__VA_ARGS__)
static inline int emu_width(int w = 32) { return w; }
#define __shfl_sync(m, v, lane, ...) EMU_SHFL(emu::OP_SHFL, m, v, lane, EMU_W(__VA_ARGS__))
#define __shfl_xor_sync(m, v, lm, ...) EMU_SHFL(emu::OP_SHFL_XOR, m, v, lm, EMU_W(__VA_ARGS__))
#define __shfl_down_sync(m, v, d, ...) EMU_SHFL(emu::OP_SHFL_DOWN, m, v, d, EMU_W(__VA_ARGS__))
#define __shfl_up_sync(m, v, d, ...) EMU_SHFL(emu::OP_SHFL_UP, m, v, d, EMU_W(__VA_ARGS__))
#define EMU_RED(op, m, v) \
    emu_from_bits<std::decay<decltype(v)>::type>(emu::warp_op(op, m, emu_bits(v), std::is_signed<decltype(v)>::value, 32, __FILE__, __LINE__))
#define __reduce_add_sync(m, v) EMU_RED(emu::OP_ADD, m, v)
#define __reduce_min_sync(m, v) EMU_RED(emu::OP_MIN, m, v)
#define __reduce_max_sync(m, v) EMU_RED(emu::OP_MAX, m, v)
#define __reduce_and_sync(m, v) EMU_RED(emu::OP_AND, m, v)
#define __reduce_or_sync(m, v) EMU_RED(emu::OP_OR, m, v)
#define __reduce_xor_sync(m, v) EMU_RED(emu::OP_XOR, m, v)
#define __ballot_sync(m, p) ((unsigned)emu::warp_op(emu::OP_BALLOT, m, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __any_sync(m, p) ((int)emu::warp_op(emu::OP_ANY, m, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __all_sync(m, p) ((int)emu::warp_op(emu::OP_ALL, m, (p) != 0, 0, 32, __FILE__, __LINE__))
#define __activemask() emu::active_mask()

/* ---- device functions ------------------------------------------------------ */
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }

template <class T> static inline T __ldg(const T *p) {
    emu::global_only(p, sizeof(T), "__ldg");
    emu::ldg_read(p, sizeof(T));
    return *p;
}
template <class T> static inline T __ldcs(const T *p) {
    emu::global_only(p, sizeof(T), "__ldcs");
    return *p;
}
template <class T> static inline T __ldcg(const T *p) {
    emu::global_only(p, sizeof(T), "__ldcg");
    return *p;
}
template <class T> static inline void __stcs(T *p, T v) { *p = v; }

static inline float __uint_as_float(unsigned u) { return emu_from_bits<float>(u); }
static inline float __int_as_float(int u) { return emu_from_bits<float>((uint64_t)(uint32_t)u); }
static inline unsigned __float_as_uint(float f) { return (unsigned)emu_bits(f); }
static inline int __float_as_int(float f) { return (int)(unsigned)emu_bits(f); }
/* the _rn operations are single IEEE operations; the emulator is built with
 * -ffp-contract=off, so no expression here or in a kernel is fused */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline int __float2int_rn(float f) { return (int)nearbyintf(f); }
static inline int __float2int_rz(float f) { return (int)f; }
static inline float __frcp_rn(float f) { return 1.0f / f; }
static inline float rsqrtf(float f) { return 1.0f / sqrtf(f); }
static inline int __dp4a(int a, int b, int c) {
    for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> 8 * k) * (int)(int8_t)(b >> 8 * k);
    return c;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
    for (int k = 0; k < 4; k++) c += (uint8_t)(a >> 8 * k) * (unsigned)(uint8_t)(b >> 8 * k);
    return c;
}
static inline unsigned __vsub4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int k = 0; k < 4; k++) r |= ((((a >> 8 * k) & 255u) - ((b >> 8 * k) & 255u)) & 255u) << 8 * k;
    return r;
}
static inline unsigned __vadd4(unsigned a, unsigned b) {
    unsigned r = 0;
    for (int k = 0; k < 4; k++) r |= ((((a >> 8 * k) & 255u) + ((b >> 8 * k) & 255u)) & 255u) << 8 * k;
    return r;
}
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }
static inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }

/* Atomics: blocks and fibers run on one OS thread, one at a time, so a
 * plain read-modify-write is atomic. */
template <class T> static inline T atomicAdd(T *p, T v) { T o = *p; *p = o + v; return o; }
template <class T> static inline T atomicMax(T *p, T v) { T o = *p; if (v > o) *p = v; return o; }
template <class T> static inline T atomicMin(T *p, T v) { T o = *p; if (v < o) *p = v; return o; }
template <class T> static inline T atomicExch(T *p, T v) { T o = *p; *p = v; return o; }
template <class T> static inline T atomicCAS(T *p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

#endif
