// A PyTorch-style CUDA graph, as torch.cuda.graph() drives the runtime:
//  - a caching allocator that asks cudaStreamIsCapturing and
//    cudaStreamGetCaptureInfo before every allocation, and during a capture
//    serves from a private pool instead of calling cudaMalloc;
//  - a warm-up on a side stream, then a thread-local capture of a fill,
//    kernels and a device-to-device copy, forked to a second stream and
//    joined back through events; the graph instantiated and replayed 100
//    times, its inputs changed between replays by cudaMemcpyAsync outside
//    the graph, each result checked against the CPU (seed printed; SEED=N
//    repeats a run);
//  - the errors programs rely on: cudaMalloc during a global capture fails
//    with cudaErrorStreamCaptureUnsupported and the capture ends
//    invalidated; synchronizing a capturing stream fails and invalidates
//    it; the stream works normally afterwards.
// Prints "torchgraph: ok".
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <cuda_runtime.h>

#include "check.h"

#define WANT(cond, ...)                                                               \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int N = 2053, T = 128, B = (N + T - 1) / T, REPLAYS = 100;

__global__ void affine(unsigned *y, const unsigned *x, const unsigned *w, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += x[i] * w[i] + 7u;
}

__global__ void square_into(unsigned *z, const unsigned *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] = y[i] * y[i] + (unsigned)i;
}

__global__ void shift(unsigned *v, const unsigned *y, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = (y[i] << 1) ^ k;
}

__global__ void combine(unsigned *out, const unsigned *v, const unsigned *z, const unsigned *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = v[i] + 3u * z[i] + c[i];
}

// The caching allocator's rule: outside a capture, new blocks come from
// cudaMalloc; during one, only from the graph's private pool.
struct allocator {
    char *pool;
    size_t pool_size, pool_used;
    int queries, captured_allocs;

    void *alloc(size_t bytes, cudaStream_t s)
    {
        cudaStreamCaptureStatus st;
        CHECK(cudaStreamIsCapturing(s, &st));
        unsigned long long id = 0;
        cudaStreamCaptureStatus st2;
        CHECK(cudaStreamGetCaptureInfo(s, &st2, &id));
        queries += 2;
        WANT(st == st2, "cudaStreamIsCapturing says %d, cudaStreamGetCaptureInfo %d", (int)st, (int)st2);
        bytes = (bytes + 511) & ~(size_t)511;
        if (st == cudaStreamCaptureStatusActive) {
            WANT(id != 0, "an active capture with id 0");
            WANT(pool_used + bytes <= pool_size, "the private pool is full");
            captured_allocs++;
            void *p = pool + pool_used;
            pool_used += bytes;
            return p;
        }
        WANT(st == cudaStreamCaptureStatusNone, "allocating on a stream in capture state %d", (int)st);
        void *p;
        CHECK(cudaMalloc(&p, bytes));
        return p;
    }
};

static void cpu_step(std::vector<unsigned> &out, const std::vector<unsigned> &x, const std::vector<unsigned> &w,
                     const std::vector<unsigned> &c, unsigned k)
{
    for (int i = 0; i < N; i++) {
        unsigned y = 0;                    // the fill
        y += x[i] * w[i] + 7u;             // affine
        unsigned z = y * y + (unsigned)i;  // square_into (second stream)
        unsigned z2 = z;                   // the copy of z (second stream)
        unsigned v = (y << 1) ^ k;         // shift (first stream)
        out[i] = v + 3u * z + c[i] + z2;   // combine, then the copy added
    }
}

__global__ void add_into(unsigned *out, const unsigned *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] += a[i];
}

int main()
{
    unsigned seed = run_seed("torchgraph");
    seed_rng(seed);
    const size_t bytes = N * sizeof(unsigned);

    cudaStream_t s, s2;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    allocator a = {};
    a.pool_size = 5 * ((bytes + 511) & ~(size_t)511);
    CHECK(cudaMalloc(&a.pool, a.pool_size));

    unsigned *x = (unsigned *)a.alloc(bytes, s), *w = (unsigned *)a.alloc(bytes, s);
    unsigned *c = (unsigned *)a.alloc(bytes, s), *out = (unsigned *)a.alloc(bytes, s);
    std::vector<unsigned> hx(N), hw(N), hc(N), want(N), got(N);
    for (int i = 0; i < N; i++) {
        hx[i] = seed_next32();
        hw[i] = seed_next32();
        hc[i] = seed_next32();
    }
    CHECK(cudaMemcpyAsync(w, hw.data(), bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemcpyAsync(c, hc.data(), bytes, cudaMemcpyHostToDevice, s));
    const unsigned k = seed_next32();

    // Warm-up on the side stream, as torch.cuda.graph() does before capture.
    unsigned *wy = (unsigned *)a.alloc(bytes, s), *wz = (unsigned *)a.alloc(bytes, s);
    CHECK(cudaMemcpyAsync(x, hx.data(), bytes, cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(wy, 0, bytes, s));
    affine<<<B, T, 0, s>>>(wy, x, w, N);
    square_into<<<B, T, 0, s>>>(wz, wy, N);
    CHECK(cudaStreamSynchronize(s));
    std::vector<unsigned> hy(N);
    CHECK(cudaMemcpy(hy.data(), wz, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; i++) {
        unsigned y = hx[i] * hw[i] + 7u;
        WANT(hy[i] == y * y + (unsigned)i, "warm-up: z[%d] = %u, want %u", i, hy[i], y * y + (unsigned)i);
    }

    // The capture: thread-local, as PyTorch's default.
    cudaEvent_t fork, join;
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaStreamCaptureStatus st;
    CHECK(cudaStreamIsCapturing(s, &st));
    WANT(st == cudaStreamCaptureStatusActive, "capturing stream reports status %d", (int)st);
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusNone, "the second stream captures before it joined");
    unsigned *y = (unsigned *)a.alloc(bytes, s), *z = (unsigned *)a.alloc(bytes, s);
    unsigned *z2 = (unsigned *)a.alloc(bytes, s), *v = (unsigned *)a.alloc(bytes, s);
    WANT(a.captured_allocs == 4, "%d allocations came from the private pool, want 4", a.captured_allocs);
    CHECK(cudaMemsetAsync(y, 0, bytes, s));
    affine<<<B, T, 0, s>>>(y, x, w, N);
    CHECK(cudaEventRecord(fork, s));
    CHECK(cudaStreamWaitEvent(s2, fork, 0));
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusActive, "the forked stream does not capture (status %d)", (int)st);
    unsigned long long id1 = 0, id2 = 0;
    CHECK(cudaStreamGetCaptureInfo(s, &st, &id1));
    CHECK(cudaStreamGetCaptureInfo(s2, &st, &id2));
    WANT(id1 && id1 == id2, "the forked stream's capture id %llu differs from %llu", id2, id1);
    square_into<<<B, T, 0, s2>>>(z, y, N);
    CHECK(cudaMemcpyAsync(z2, z, bytes, cudaMemcpyDeviceToDevice, s2));
    shift<<<B, T, 0, s>>>(v, y, N, k);
    CHECK(cudaEventRecord(join, s2));
    CHECK(cudaStreamWaitEvent(s, join, 0));
    cudaGraph_t captured;
    const cudaGraphNode_t *deps = NULL;
    size_t ndeps = 0;
    CHECK(cudaStreamGetCaptureInfo(s, &st, &id1, &captured, &deps, NULL, &ndeps));
    WANT(st == cudaStreamCaptureStatusActive && captured && ndeps == 2,
         "after the join: status %d, graph %p, %zu dependencies (want 2)", (int)st, (void *)captured, ndeps);
    combine<<<B, T, 0, s>>>(out, v, z, c, N);
    add_into<<<B, T, 0, s>>>(out, z2, N);
    cudaGraph_t graph;
    CHECK(cudaStreamEndCapture(s, &graph));
    WANT(graph == captured, "cudaStreamEndCapture returned another graph than the capture built");
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusNone, "the joined stream still captures after the end");
    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(graph, NULL, &nodes));
    WANT(nodes == 7, "the captured graph has %zu nodes, want 7", nodes);
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));

    // Replays, inputs changed between them outside the graph.
    for (int r = 0; r < REPLAYS; r++) {
        for (int i = 0; i < N; i++)
            hx[i] = seed_next32();
        if (r % 10 == 3)
            for (int i = 0; i < N; i++)
                hc[i] = seed_next32();
        CHECK(cudaMemcpyAsync(x, hx.data(), bytes, cudaMemcpyHostToDevice, s));
        if (r % 10 == 3)
            CHECK(cudaMemcpyAsync(c, hc.data(), bytes, cudaMemcpyHostToDevice, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        cpu_step(want, hx, hw, hc, k);
        for (int i = 0; i < N; i++)
            WANT(got[i] == want[i], "replay %d: out[%d] = %u, want %u", r, i, got[i], want[i]);
    }
    CHECK(cudaGraphExecDestroy(exec));

    // cudaMalloc during a global capture: refused, the capture invalidated.
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 4096);
    WANT(e == cudaErrorStreamCaptureUnsupported, "cudaMalloc during a global capture: %s", cudaGetErrorName(e));
    cudaGetLastError();
    CHECK(cudaStreamIsCapturing(s, &st));
    WANT(st == cudaStreamCaptureStatusInvalidated, "after the refused cudaMalloc the capture is in state %d", (int)st);
    graph = NULL;
    e = cudaStreamEndCapture(s, &graph);
    WANT(e == cudaErrorStreamCaptureInvalidated && !graph, "ending the invalidated capture: %s",
         cudaGetErrorName(e));
    cudaGetLastError();

    // Synchronizing a capturing stream: refused, the capture invalidated.
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    affine<<<B, T, 0, s>>>(out, x, w, N);
    e = cudaStreamSynchronize(s);
    WANT(e == cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize of a capturing stream: %s",
         cudaGetErrorName(e));
    cudaGetLastError();
    e = cudaStreamEndCapture(s, &graph);
    WANT(e == cudaErrorStreamCaptureInvalidated && !graph, "ending the capture after a sync: %s",
         cudaGetErrorName(e));
    cudaGetLastError();

    // The stream works as before: nothing captured ever ran.
    CHECK(cudaMemsetAsync(out, 0, bytes, s));
    add_into<<<B, T, 0, s>>>(out, c, N);
    CHECK(cudaMemcpyAsync(got.data(), out, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        WANT(got[i] == hc[i], "after the failed captures: out[%d] = %u, want %u", i, got[i], hc[i]);
    WANT(a.queries >= 18, "the allocator asked %d times", a.queries);

    CHECK(cudaEventDestroy(fork));
    CHECK(cudaEventDestroy(join));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaFree(a.pool));
    for (void *q : { (void *)x, (void *)w, (void *)c, (void *)out, (void *)wy, (void *)wz })
        CHECK(cudaFree(q));
    printf("torchgraph: ok\n");
    return 0;
}
