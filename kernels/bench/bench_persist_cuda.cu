/* The persistent step's primitives on the device, the figures the step
 * ledger (engine/bench/ledger/, docs/gpu.md "The step ledger") otherwise
 * assumes:
 *
 *   flag   one dependency flag's one-way trip between two blocks on different
 *          multiprocessors (kernels/cuda/persist.cuh: cu_flag_add's release,
 *          cu_flag_wait's polling acquire): a cooperative ping-pong of
 *          N_HI round trips, less one of N_LO (the launch cancels), over
 *          2 (N_HI - N_LO) trips;
 *   stage  a stage-level wait: every block of the grid adds to one flag and
 *          waits for all of them, the same difference of two launches;
 *   load   the time a block takes to read a slice of weights (2 KiB: one
 *          16-byte load a thread, the first bytes of an item; 16 and 64 KiB:
 *          an item's) with every multiprocessor's block reading its own at
 *          once: from device memory (cold: L2 flushed by writing twice its
 *          size), from L2 (the slice read just before), and after a
 *          prefetch.global.L2 of it issued LEAD_NS before (the fine step's
 *          prefetch, issued when an item is taken, before its wait); timed
 *          on the multiprocessor's clock (calibrated against the global
 *          timer), the median over REPS launches of the mean over blocks;
 *   read   a plain streaming read of 1 GiB by a full grid, next to a
 *          device-to-device copy in the same run (bytes read + written: the
 *          ledger's copy_gbs).
 *
 * The flag kernels (kernels/bench/persist_flags.cuh) run one block a
 * multiprocessor (a block's dynamic shared memory is more than half of one),
 * and fail the run when a payload was not visible after its wait or a flag
 * ends at another count. Lines "S " are gpu-check's summary; the "ledger:"
 * lines are the figures under their keys in docs/perf/gpu-ledger-constants.txt
 * (persist:NAME), from which `make ledger ARGS="--fit h100"` sets flag_us and
 * load_us. Without a usable GPU it prints one line and exits 0; exit 1 when
 * the device fails or the protocol check does. It links the CUDA runtime
 * alone, not the library, so that gpu-check's kit stays small. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bench/persist_flags.cuh"

enum { N_HI = 20000, N_LO = 2000, TIMES = 5, REPS = 9 };
enum { COLD, L2, PREFETCH, NMODE };
static const double LEAD_NS = 2000;
static const size_t READ_BYTES = (size_t)1 << 30;

static void ck(cudaError_t err, const char *what) {
    if (err != cudaSuccess) {
        fprintf(stderr, "bench_persist_cuda: %s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The multiprocessor's clock cycles a nanosecond: one thread spins 2 ms of
 * the global timer. */
__global__ void pb_clock(double *cyc_per_ns) {
    unsigned long long g0, g1;
    const long long c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    while (g1 - g0 < 2000000);
    *cyc_per_ns = (double)(clock64() - c0) / (double)(g1 - g0);
}

/* Block b reads its slice w + b * BYTES in mode (COLD, L2: read once
 * before, PREFETCH: prefetch.global.L2 of each 128-byte line before), each
 * mode after a spin of lead cycles, and writes the cycles of the timed read
 * to cyc[b]. Every thread issues its loads together (L2-cached, L1 bypassed)
 * and leaves their xor in shared memory before the barrier that ends the
 * timing, so every load has returned. */
template <int BYTES>
__global__ void pb_load(const int4 *w, int mode, long long lead, long long *cyc, int *sink) {
    constexpr int PER = BYTES / 16 / PF_THREADS;
    __shared__ int red[PF_THREADS];
    const int4 *slice = w + (size_t)blockIdx.x * (BYTES / 16), *s = slice + threadIdx.x;
    int acc = 0;
    if (mode == L2) {
#pragma unroll
        for (int i = 0; i < PER; i++) acc ^= __ldcg(s + i * PF_THREADS).x;
    } else if (mode == PREFETCH) {
        /* the threads take the 128-byte lines (8 int4) in turn */
        for (int i = threadIdx.x * 8; i < BYTES / 16; i += PF_THREADS * 8)
            asm volatile("prefetch.global.L2 [%0];" : : "l"(slice + i));
    }
    const long long t0 = clock64();
    while (clock64() - t0 < lead) {
    }
    __syncthreads();
    const long long a = clock64();
    int4 v[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) v[i] = __ldcg(s + i * PF_THREADS);
#pragma unroll
    for (int i = 0; i < PER; i++) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
    red[threadIdx.x] = acc;
    __syncthreads();
    const long long b = clock64();
    if (threadIdx.x == 0) {
        cyc[blockIdx.x] = b - a;
        if (red[0] == 0x7fffffff) *sink = red[PF_THREADS - 1];
    }
}

/* A grid-stride read of n16 int4s, streaming (evict-first) loads. */
__global__ void pb_stream(const int4 *p, size_t n16, int *sink) {
    int acc = 0;
    const size_t step = (size_t)gridDim.x * blockDim.x;
#pragma unroll 4
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += step) {
        const int4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) *sink = acc;
}

struct Dev {
    cudaStream_t st;
    cudaEvent_t e0, e1;
    int sms;
    size_t smem; /* dynamic shared memory that keeps one block a multiprocessor */
    unsigned *flags, *data, *bad;
    double cyc_per_ns;
};

static double elapsed_ms(Dev *d) {
    float ms;
    ck(cudaEventSynchronize(d->e1), "event");
    ck(cudaEventElapsedTime(&ms, d->e0, d->e1), "elapsed time");
    return ms;
}

typedef cudaError_t (*flag_launch)(int, size_t, unsigned *, unsigned *, unsigned *, int, cudaStream_t);

/* Milliseconds of one launch of n rounds; its flags (the first, or both)
 * must end at want_per_round * n and no payload may be missed (else exit 1). */
static double flag_run(Dev *d, flag_launch f, int both, int n, unsigned want_per_round, const char *what) {
    ck(cudaMemsetAsync(d->flags, 0, 2 * sizeof(unsigned), d->st), what);
    ck(cudaMemsetAsync(d->data, 0, (size_t)d->sms * sizeof(unsigned), d->st), what);
    ck(cudaMemsetAsync(d->bad, 0, sizeof(unsigned), d->st), what);
    ck(cudaEventRecord(d->e0, d->st), "event");
    ck(f(d->sms, d->smem, d->flags, d->data, d->bad, n, d->st), what);
    ck(cudaEventRecord(d->e1, d->st), "event");
    const double ms = elapsed_ms(d);
    unsigned h[3];
    ck(cudaMemcpy(h, d->flags, 2 * sizeof(unsigned), cudaMemcpyDeviceToHost), what);
    ck(cudaMemcpy(&h[2], d->bad, sizeof(unsigned), cudaMemcpyDeviceToHost), what);
    const unsigned want = want_per_round * (unsigned)n;
    if (h[0] != want || (both && h[1] != want) || h[2]) {
        printf("S persist %s: FAIL: flags %u %u (want %u), %u payloads not visible after their wait\n", what,
               h[0], h[1], want, h[2]);
        exit(1);
    }
    return ms;
}

/* Microseconds a round: the median over TIMES of the difference of an
 * N_HI-round and an N_LO-round launch, over N_HI - N_LO. */
static double flag_round_us(Dev *d, flag_launch f, int both, unsigned want_per_round, const char *what) {
    double t[TIMES];
    flag_run(d, f, both, N_LO, want_per_round, what); /* warm-up */
    for (int r = 0; r < TIMES; r++) {
        const double lo = flag_run(d, f, both, N_LO, want_per_round, what);
        t[r] = (flag_run(d, f, both, N_HI, want_per_round, what) - lo) * 1e3 / (N_HI - N_LO);
    }
    return median(t, TIMES);
}

/* The median over REPS of the mean (and the slowest) block's microseconds
 * to read a BYTES slice in mode; L2 flushed before every COLD and PREFETCH
 * launch. */
template <int BYTES>
static void load_us(Dev *d, const int4 *w, void *flush, size_t flush_bytes, int mode, long long *cyc,
                    int *sink, double *mean, double *slowest) {
    double m[REPS], s[REPS];
    long long *h = (long long *)malloc((size_t)d->sms * sizeof *h);
    if (!h) {
        fprintf(stderr, "bench_persist_cuda: out of memory\n");
        exit(1);
    }
    const long long lead = (long long)(LEAD_NS * d->cyc_per_ns);
    for (int r = -1; r < REPS; r++) {
        if (mode != L2) ck(cudaMemsetAsync(flush, r & 0xff, flush_bytes, d->st), "L2 flush");
        pb_load<BYTES><<<d->sms, PF_THREADS, 0, d->st>>>(w, mode, lead, cyc, sink);
        ck(cudaGetLastError(), "load kernel");
        ck(cudaMemcpyAsync(h, cyc, (size_t)d->sms * sizeof *h, cudaMemcpyDeviceToHost, d->st), "load times");
        ck(cudaStreamSynchronize(d->st), "load kernel");
        if (r < 0) continue;
        double sum = 0, most = 0;
        for (int b = 0; b < d->sms; b++) {
            sum += (double)h[b];
            if ((double)h[b] > most) most = (double)h[b];
        }
        m[r] = sum / d->sms / d->cyc_per_ns / 1e3;
        s[r] = most / d->cyc_per_ns / 1e3;
    }
    free(h);
    *mean = median(m, REPS);
    *slowest = median(s, REPS);
}

/* GB/s of a streaming read and of a device-to-device copy (read + written)
 * of the 1 GiB at buf, medians of TIMES. */
static void bandwidth(Dev *d, void *buf, int *sink, double *read_gbs, double *copy_gbs) {
    int per_sm = 0;
    ck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pb_stream, 256, 0), "occupancy");
    double r[TIMES], c[TIMES];
    const size_t half = READ_BYTES / 2;
    for (int i = -1; i < TIMES; i++) {
        ck(cudaEventRecord(d->e0, d->st), "event");
        pb_stream<<<d->sms * per_sm, 256, 0, d->st>>>((const int4 *)buf, READ_BYTES / 16, sink);
        ck(cudaGetLastError(), "stream kernel");
        ck(cudaEventRecord(d->e1, d->st), "event");
        const double rm = elapsed_ms(d);
        ck(cudaEventRecord(d->e0, d->st), "event");
        ck(cudaMemcpyAsync((char *)buf + half, buf, half, cudaMemcpyDeviceToDevice, d->st), "copy");
        ck(cudaEventRecord(d->e1, d->st), "event");
        const double cm = elapsed_ms(d);
        if (i >= 0) r[i] = (double)READ_BYTES / (rm * 1e6), c[i] = 2.0 * (double)half / (cm * 1e6);
    }
    *read_gbs = median(r, TIMES);
    *copy_gbs = median(c, TIMES);
}

int main(void) {
    int n_dev = 0;
    const cudaError_t none = cudaGetDeviceCount(&n_dev);
    if (none != cudaSuccess || n_dev == 0) {
        printf("bench_persist_cuda: skipped: no CUDA device (%s)\n",
               none != cudaSuccess ? cudaGetErrorString(none) : "none found");
        return 0;
    }
    Dev d;
    cudaDeviceProp p;
    ck(cudaGetDeviceProperties(&p, 0), "device properties");
    int coop = 0, l2 = 0;
    ck(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0), "device attribute");
    ck(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "device attribute");
    if (!coop || p.multiProcessorCount < 2) {
        printf("bench_persist_cuda: %s: %s\n", p.name,
               coop ? "one multiprocessor: no two blocks to pass a flag between" : "no cooperative launches");
        return 1;
    }
    d.sms = p.multiProcessorCount;
    d.smem = p.sharedMemPerBlockOptin;
    ck(cudaFuncSetAttribute(pf_pingpong, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)d.smem), "attribute");
    ck(cudaFuncSetAttribute(pf_stages, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)d.smem), "attribute");
    int per_sm = 0;
    ck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pf_stages, PF_THREADS, d.smem), "occupancy");
    if (per_sm != 1) {
        printf("bench_persist_cuda: %d blocks a multiprocessor with %zu bytes of shared memory, not 1\n", per_sm,
               d.smem);
        return 1;
    }
    ck(cudaStreamCreate(&d.st), "stream");
    ck(cudaEventCreate(&d.e0), "event");
    ck(cudaEventCreate(&d.e1), "event");
    ck(cudaMalloc(&d.flags, 2 * sizeof(unsigned)), "flags");
    ck(cudaMalloc(&d.data, (size_t)d.sms * sizeof(unsigned)), "flags");
    ck(cudaMalloc(&d.bad, sizeof(unsigned)), "flags");
    double *cpn;
    ck(cudaMalloc(&cpn, sizeof *cpn), "clock");
    pb_clock<<<1, 1, 0, d.st>>>(cpn);
    ck(cudaGetLastError(), "clock kernel");
    ck(cudaMemcpy(&d.cyc_per_ns, cpn, sizeof d.cyc_per_ns, cudaMemcpyDeviceToHost), "clock");
    printf("bench_persist_cuda: %s, %d multiprocessors, L2 %d MiB, clock %.0f MHz\n", p.name,
           d.sms, l2 >> 20, d.cyc_per_ns * 1e3);

    const double flag = flag_round_us(&d, pf_pingpong_launch, 1, 1, "flag") / 2;
    printf("S persist flag: one-way %.3f us (%d - %d round trips between blocks 0 and %d of %d, one a "
           "multiprocessor)\n", flag, N_HI, N_LO, d.sms - 1, d.sms);
    const double stage = flag_round_us(&d, pf_stages_launch, 0, (unsigned)d.sms, "stage");
    printf("S persist stage: %d blocks each add to one flag and wait for all %d: %.3f us a stage\n", d.sms, d.sms,
           stage);

    void *flush, *buf;
    int4 *w;
    long long *cyc;
    int *sink;
    const size_t flush_bytes = 2 * (size_t)l2;
    ck(cudaMalloc(&flush, flush_bytes), "L2 flush buffer");
    ck(cudaMalloc(&w, (size_t)d.sms * 65536), "weights");
    ck(cudaMemset(w, 1, (size_t)d.sms * 65536), "weights");
    ck(cudaMalloc(&cyc, (size_t)d.sms * sizeof *cyc), "load times");
    ck(cudaMalloc(&sink, sizeof *sink), "sink");
    static const char *const mode_name[NMODE] = {"cold", "L2", "prefetched"};
    double first[NMODE];
    static const int kib[3] = {2, 16, 64};
    for (int k = 0; k < 3; k++) {
        const int kb = kib[k];
        printf("S persist load %2d KiB a block, %d blocks at once (mean / slowest block):", kb, d.sms);
        for (int m = 0; m < NMODE; m++) {
            double mean, slow;
            if (kb == 2)
                load_us<2048>(&d, w, flush, flush_bytes, m, cyc, sink, &mean, &slow);
            else if (kb == 16)
                load_us<16384>(&d, w, flush, flush_bytes, m, cyc, sink, &mean, &slow);
            else
                load_us<65536>(&d, w, flush, flush_bytes, m, cyc, sink, &mean, &slow);
            if (kb == 2) first[m] = mean;
            printf(" %s %.3f / %.3f us%s", mode_name[m], mean, slow, m + 1 < NMODE ? "," : "");
        }
        printf(" (prefetch issued %.1f us before)\n", LEAD_NS / 1e3);
    }
    ck(cudaFree(flush), "free");
    ck(cudaMalloc(&buf, READ_BYTES), "read buffer");
    ck(cudaMemset(buf, 1, READ_BYTES), "read buffer");
    double read_gbs, copy_gbs;
    bandwidth(&d, buf, sink, &read_gbs, &copy_gbs);
    printf("S persist read: 1 GiB streamed by a full grid %.0f GB/s, device-to-device copy %.0f GB/s (read + "
           "written): %.2fx\n", read_gbs, copy_gbs, read_gbs / copy_gbs);
    printf("S   ledger: persist:flag_us %.3f\n", flag);
    printf("S   ledger: persist:stage_us %.3f\n", stage);
    printf("S   ledger: persist:load_us %.3f\n", first[COLD]);
    printf("S   ledger: persist:l2_us %.3f\n", first[L2]);
    printf("S   ledger: persist:prefetch_us %.3f\n", first[PREFETCH]);
    printf("S   ledger: persist:read_gbs %.0f\n", read_gbs);
    ck(cudaFree(buf), "free");
    ck(cudaFree(w), "free");
    ck(cudaFree(cyc), "free");
    ck(cudaFree(sink), "free");
    ck(cudaFree(cpn), "free");
    ck(cudaFree(d.flags), "free");
    ck(cudaFree(d.data), "free");
    ck(cudaFree(d.bad), "free");
    cudaEventDestroy(d.e0), cudaEventDestroy(d.e1);
    cudaStreamDestroy(d.st);
    return 0;
}
