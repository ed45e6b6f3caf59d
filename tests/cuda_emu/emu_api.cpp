/* cuda-emu: the runtime API the backend calls (cuda_runtime.h): errors,
 * the device's properties, memory, streams and events (all synchronous),
 * stream capture and graphs. Launches and the memory checks are emu.cpp's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <vector>

#include "cuda_runtime.h"
#include "tests/cuda_emu/emu_int.h"
#undef warpSize /* a field of cudaDeviceProp here */

using namespace emu;

/* ---- graphs (cuda_runtime.h: stream capture) ------------------------------------------ */
namespace emu {
enum NodeKind { NODE_KERNEL, NODE_COPY, NODE_SET };
struct Node {
    NodeKind kind;
    Config cfg; /* kernel */
    const char *name;
    const void *func;
    Body body;
    std::shared_ptr<void> ctx;
    void *dst; /* copy, memset */
    const void *src;
    size_t n;
    int value;
    cudaMemcpyKind k;
};
} /* namespace emu */

struct emu_graph { std::vector<emu::Node> nodes; };
struct emu_graph_exec { std::vector<emu::Node> nodes; };
struct emu_stream {
    int flags;
    emu_graph *cap; /* capturing into it */
    bool invalid;   /* the capture broke: EndCapture fails */
};

bool emu::capturing(cudaStream_t s) { return s && s->cap; }

void emu::record(const Config &c, const char *name, const void *func, Body body,
                 std::shared_ptr<void> ctx) {
    if (!check_config(c, name, func)) {
        c.stream->invalid = true;
        return;
    }
    Node n{};
    n.kind = NODE_KERNEL;
    n.cfg = c;
    n.name = name;
    n.func = func;
    n.body = body;
    n.ctx = ctx;
    c.stream->cap->nodes.push_back(n);
}

static void record_copy(cudaStream_t s, NodeKind kind, void *dst, const void *src, size_t n,
                        int value, cudaMemcpyKind k) {
    Node x{};
    x.kind = kind;
    x.dst = dst;
    x.src = src;
    x.n = n;
    x.value = value;
    x.k = k;
    s->cap->nodes.push_back(x);
}
struct emu_event { int recorded; };

static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

const char *cudaGetErrorString(cudaError_t err) {
    switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorGraphExecUpdateFailure: return "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorCooperativeLaunchTooLarge: return "too many blocks in cooperative launch";
    default: return "unknown error (cuda-emu)";
    }
}

cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_error; }
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : ret(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int *d) { *d = 0; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d != 0) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuda-emu (H200-like sm_90 on the CPU)");
    p->totalGlobalMem = 143771000832ull;
    p->sharedMemPerBlock = SMEM_DEFAULT;
    p->sharedMemPerBlockOptin = SMEM_OPTIN_MAX;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = sm_count();
    p->maxThreadsPerMultiProcessor = 2048;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->memoryBusWidth = 6144;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    if (!bytes) return cudaSuccess;
    void *m = NULL;
    if (posix_memalign(&m, 256, bytes)) return ret(cudaErrorMemoryAllocation);
    memset(m, 0xff, bytes); /* device memory starts as garbage: NaN floats */
    allocs[(uintptr_t)m] = bytes;
    *p = m;
    ldg_barrier();
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end()) return ret(cudaErrorInvalidValue);
    allocs.erase(it);
    free(p);
    ldg_barrier();
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k) {
    check_copy(dst, src, n, k, "cudaMemcpy");
    if (n) memmove(dst, src, n);
    ldg_barrier();
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    check_copy(dst, src, n, k, "cudaMemcpyAsync");
    if (capturing(s)) {
        record_copy(s, NODE_COPY, dst, src, n, 0, k);
        return cudaSuccess;
    }
    if (n) memmove(dst, src, n);
    ldg_barrier();
    return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height, cudaMemcpyKind k, cudaStream_t) {
    if (width > dpitch || width > spitch) return ret(cudaErrorInvalidValue);
    if (!height || !width) return cudaSuccess;
    check_copy(dst, src, dpitch * (height - 1) + width, k, "cudaMemcpy2DAsync");
    for (size_t r = 0; r < height; r++)
        memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    ldg_barrier();
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    if (n && !is_device(p, n)) fail("cudaMemset of %zu bytes at %p: not inside one cudaMalloc allocation", n, p);
    memset(p, v, n);
    ldg_barrier();
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    if (!capturing(s)) return cudaMemset(p, v, n);
    if (n && !is_device(p, n)) fail("cudaMemsetAsync of %zu bytes at %p: not inside one cudaMalloc allocation", n, p);
    record_copy(s, NODE_SET, p, NULL, n, v, cudaMemcpyDeviceToDevice);
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    *s = new emu_stream{(int)flags, NULL, false};
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (s) delete s->cap;
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!capturing(s)) return cudaSuccess;
    s->invalid = true; /* as on a GPU: not allowed while capturing, and the capture is lost */
    return ret(cudaErrorStreamCaptureUnsupported);
}
cudaError_t cudaEventCreate(cudaEvent_t *ev) { *ev = new emu_event{0}; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t ev) { delete ev; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned) { return cudaEventCreate(ev); }
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
    if (!s || s->cap) return ret(cudaErrorInvalidValue);
    s->cap = new emu_graph;
    s->invalid = false;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    *g = NULL;
    if (!capturing(s)) return ret(cudaErrorInvalidValue);
    emu_graph *x = s->cap;
    s->cap = NULL;
    if (s->invalid) {
        delete x;
        return ret(cudaErrorStreamCaptureInvalidated);
    }
    *g = x;
    return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *count) {
    if (!g || !count) return ret(cudaErrorInvalidValue);
    if (nodes)
        for (size_t i = 0; i < *count && i < g->nodes.size(); i++) nodes[i] = (cudaGraphNode_t)&g->nodes[i];
    *count = g->nodes.size();
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long) {
    *x = NULL;
    if (!g) return ret(cudaErrorInvalidValue);
    *x = new emu_graph_exec{g->nodes};
    return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info) {
    bool same = x && g && x->nodes.size() == g->nodes.size();
    for (size_t i = 0; same && i < g->nodes.size(); i++)
        same = x->nodes[i].kind == g->nodes[i].kind && x->nodes[i].func == g->nodes[i].func;
    if (info) info->result = same ? 0 : 1;
    if (!same) return ret(cudaErrorGraphExecUpdateFailure);
    x->nodes = g->nodes;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
    if (!x) return ret(cudaErrorInvalidValue);
    if (capturing(s)) fail("cudaGraphLaunch into a stream being captured (not emulated)");
    for (const Node &n : x->nodes) {
        if (n.kind == NODE_KERNEL) {
            if (!launch(n.cfg, n.name, n.func, n.body, n.ctx.get())) return ret(cudaErrorLaunchFailure);
        } else if (n.kind == NODE_COPY) {
            check_copy(n.dst, n.src, n.n, n.k, "graph copy node");
            if (n.n) memmove(n.dst, n.src, n.n);
            ldg_barrier();
        } else {
            cudaMemset(n.dst, n.value, n.n);
        }
    }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
    delete x;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    delete g;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t) { ev->recorded = 1; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a->recorded || !b->recorded) return ret(cudaErrorInvalidResourceHandle);
    *ms = 0.f;
    return cudaSuccess;
}
