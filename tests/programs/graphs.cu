// CUDA graphs through the runtime, checked on the CPU against random inputs
// (seed printed; SEED=N repeats a run):
//  - stream capture (cudaStreamBeginCapture) of a fill, kernels on two
//    streams forked and joined by events, a copy to pinned host memory and
//    a host function, with the capture queries answering during it; the
//    graph instantiated and replayed 100 times;
//  - an unsafe call (cudaMalloc) during a global-mode capture is refused
//    and invalidates the capture;
//  - a graph built node by node (memset, kernels, memcpy, host, empty),
//    launched 10 times, then one kernel node's parameters changed in the
//    executable graph and launched again.
// Prints "graphs: ok".
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
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

const int N = 3001, REPLAYS = 100, LAUNCHES = 10, T = 128, B = (N + T - 1) / T;

__global__ void step_x(unsigned *x, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * k + 1u;
}

__global__ void add_into(unsigned *y, const unsigned *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += x[i] >> 3;
}

__global__ void mix(unsigned *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = x[i] * 3u + (unsigned)i;
}

__global__ void combine(unsigned *z, const unsigned *x, const unsigned *y, const unsigned *u, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] += x[i] ^ y[i] ^ u[i];
}

__global__ void axpi(unsigned *w, const unsigned *v, int n, unsigned a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] = w[i] * 2u + v[i] + a * (unsigned)i;
}

__global__ void times(unsigned *v, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = k * (unsigned)i;
}

static void CUDART_CB count(void *p)
{
    ++*(volatile int *)p;
}

static int captured(unsigned seed)
{
    unsigned *hx = new unsigned[N], *hy = new unsigned[N], *hu = new unsigned[N], *hz = new unsigned[N], *out;
    for (int i = 0; i < N; i++) {
        hx[i] = seed_next32();
        hy[i] = seed_next32();
        hu[i] = seed_next32();
    }
    unsigned *x, *y, *z, *u;
    CHECK(cudaMalloc(&u, N * sizeof *u));
    CHECK(cudaMemcpy(u, hu, N * sizeof *u, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&x, N * sizeof *x));
    CHECK(cudaMalloc(&y, N * sizeof *y));
    CHECK(cudaMalloc(&z, N * sizeof *z));
    CHECK(cudaMallocHost(&out, N * sizeof *out));
    CHECK(cudaMemcpy(x, hx, N * sizeof *x, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(y, hy, N * sizeof *y, cudaMemcpyHostToDevice));
    cudaStream_t s, s2;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    static int calls = 0;
    const unsigned k = seed_next32() | 1u;

    cudaStreamCaptureStatus st;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaStreamIsCapturing(s, &st));
    WANT(st == cudaStreamCaptureStatusActive, "capturing stream says %d", (int)st);
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusNone, "s2 before the fork says %d", (int)st);
    CHECK(cudaMemsetAsync(z, 0, N * sizeof *z, s));
    step_x<<<B, T, 0, s>>>(x, N, k);
    CHECK(cudaEventRecord(fork, s));
    CHECK(cudaStreamWaitEvent(s2, fork, 0));
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusActive, "s2 after the fork says %d", (int)st);
    add_into<<<B, T, 0, s2>>>(y, x, N);
    mix<<<B, T, 0, s>>>(u, N);
    CHECK(cudaEventRecord(join, s2));
    CHECK(cudaStreamWaitEvent(s, join, 0));
    unsigned long long id = 0;
    cudaGraph_t during = nullptr;
    const cudaGraphNode_t *deps = nullptr;
    size_t ndeps = 0;
    CHECK(cudaStreamGetCaptureInfo(s, &st, &id, &during, &deps, nullptr, &ndeps));
    WANT(st == cudaStreamCaptureStatusActive && id != 0 && during != nullptr && ndeps == 2,
         "capture info: status %d id %llu graph %p, %zu dependencies (want 2 after the join)", (int)st, id,
         (void *)during, ndeps);
    combine<<<B, T, 0, s>>>(z, x, y, u, N);
    CHECK(cudaMemcpyAsync(out, z, N * sizeof *z, cudaMemcpyDeviceToHost, s));
    CHECK(cudaLaunchHostFunc(s, count, &calls));
    CHECK(cudaGetLastError());
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    WANT(g == during, "the graph ended is not the one the capture named");
    CHECK(cudaStreamIsCapturing(s, &st));
    WANT(st == cudaStreamCaptureStatusNone, "after the capture s says %d", (int)st);
    CHECK(cudaStreamIsCapturing(s2, &st));
    WANT(st == cudaStreamCaptureStatusNone, "after the capture s2 says %d", (int)st);
    WANT(calls == 0, "a captured host function ran during capture");
    size_t nodes = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    WANT(nodes == 7, "the captured graph has %zu nodes, want 7", nodes);

    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    for (int r = 0; r < REPLAYS; r++)
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    WANT(calls == REPLAYS, "the host function ran %d times, want %d", calls, REPLAYS);

    unsigned *cz = new unsigned[N]();
    for (int r = 0; r < REPLAYS; r++)
        for (int i = 0; i < N; i++) {
            hx[i] = hx[i] * k + 1u;
            hy[i] += hx[i] >> 3;
            hu[i] = hu[i] * 3u + (unsigned)i;
            cz[i] = hx[i] ^ hy[i] ^ hu[i];
        }
    CHECK(cudaMemcpy(hz, z, N * sizeof *z, cudaMemcpyDeviceToHost));
    unsigned *gx = new unsigned[N], *gy = new unsigned[N];
    CHECK(cudaMemcpy(gx, x, N * sizeof *x, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(gy, y, N * sizeof *y, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (gx[i] != hx[i] || gy[i] != hy[i] || hz[i] != cz[i] || out[i] != cz[i]) {
            if (bad++ < 3)
                printf("captured: [%d] x %#x/%#x y %#x/%#x z %#x/%#x out %#x (seed %u)\n", i, gx[i], hx[i], gy[i],
                       hy[i], hz[i], cz[i], out[i], seed);
        }
    printf("captured: %d replays of %zu nodes, %d of %d wrong\n", REPLAYS, nodes, bad, N);

    // A cudaMalloc while a global-mode capture runs is refused and ends it.
    void *p = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaError_t e = cudaMalloc(&p, 256);
    WANT(e == cudaErrorStreamCaptureUnsupported, "cudaMalloc during capture: %s", cudaGetErrorName(e));
    cudaGraph_t dead = nullptr;
    e = cudaStreamEndCapture(s, &dead);
    WANT(e == cudaErrorStreamCaptureInvalidated && dead == nullptr, "ending the spoiled capture: %s",
         cudaGetErrorName(e));
    cudaGetLastError();

    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaEventDestroy(fork));
    CHECK(cudaEventDestroy(join));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaStreamDestroy(s2));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(z));
    CHECK(cudaFree(u));
    CHECK(cudaFreeHost(out));
    delete[] hu;
    delete[] hx;
    delete[] hy;
    delete[] hz;
    delete[] cz;
    delete[] gx;
    delete[] gy;
    return bad;
}

static cudaKernelNodeParams kernel_params(void *fn, void **args)
{
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(B);
    p.blockDim = dim3(T);
    p.kernelParams = args;
    return p;
}

static int explicit_graph(unsigned seed)
{
    unsigned *w, *v, *out;
    CHECK(cudaMalloc(&w, N * sizeof *w));
    CHECK(cudaMalloc(&v, N * sizeof *v));
    CHECK(cudaMallocHost(&out, N * sizeof *out));
    int n = N;
    unsigned a = seed_next32(), k = seed_next32();
    static int calls = 0;

    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t fill, first, times_k, second, copy, host, empty;
    cudaMemsetParams mp = {};
    mp.dst = w;
    mp.value = 0;
    mp.elementSize = 4;
    mp.width = N;
    mp.height = 1;
    CHECK(cudaGraphAddMemsetNode(&fill, g, nullptr, 0, &mp));
    void *first_args[] = { &w, &v, &n, &a };
    cudaKernelNodeParams kp = kernel_params((void *)axpi, first_args);
    void *times_args[] = { &v, &n, &k };
    cudaKernelNodeParams tp = kernel_params((void *)times, times_args);
    CHECK(cudaGraphAddKernelNode(&times_k, g, nullptr, 0, &tp));
    cudaGraphNode_t before_first[] = { fill, times_k };
    CHECK(cudaGraphAddKernelNode(&first, g, before_first, 2, &kp));
    CHECK(cudaGraphAddKernelNode(&second, g, &first, 1, &kp));
    CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &second, 1, out, w, N * sizeof *w, cudaMemcpyDeviceToHost));
    cudaHostNodeParams hp = {};
    hp.fn = count;
    hp.userData = &calls;
    CHECK(cudaGraphAddHostNode(&host, g, nullptr, 0, &hp));
    CHECK(cudaGraphAddEmptyNode(&empty, g, nullptr, 0));
    CHECK(cudaGraphAddDependencies(g, &copy, &host, nullptr, 1));
    CHECK(cudaGraphAddDependencies(g, &host, &empty, nullptr, 1));
    size_t nodes = 0, roots = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
    CHECK(cudaGraphGetRootNodes(g, nullptr, &roots));
    WANT(nodes == 7 && roots == 2, "the graph has %zu nodes and %zu roots, want 7 and 2", nodes, roots);
    cudaGraphNode_t root_nodes[2];
    CHECK(cudaGraphGetRootNodes(g, root_nodes, &roots));
    WANT((root_nodes[0] == fill && root_nodes[1] == times_k) || (root_nodes[0] == times_k && root_nodes[1] == fill),
         "the roots are not the memset and the first kernel");

    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (int r = 0; r < LAUNCHES; r++)
        CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    int bad = 0;
    // w = 0; v = k*i; w = 2w + v + a*i twice: w = 3*(k + a)*i.
    for (int i = 0; i < N; i++) {
        unsigned want = 3u * (k + a) * (unsigned)i;
        if (out[i] != want && bad++ < 3)
            printf("explicit: [%d] = %#x, want %#x (seed %u)\n", i, out[i], want, seed);
    }
    WANT(calls == LAUNCHES, "the host node ran %d times, want %d", calls, LAUNCHES);

    // A new multiplier for the times node, in the executable graph only.
    unsigned k2 = seed_next32();
    void *times2_args[] = { &v, &n, &k2 };
    cudaKernelNodeParams tp2 = kernel_params((void *)times, times2_args);
    CHECK(cudaGraphExecKernelNodeSetParams(ge, times_k, &tp2));
    CHECK(cudaGraphLaunch(ge, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) {
        unsigned want = 3u * (k2 + a) * (unsigned)i;
        if (out[i] != want && bad++ < 3)
            printf("explicit, updated: [%d] = %#x, want %#x (seed %u)\n", i, out[i], want, seed);
    }
    printf("explicit: %zu nodes, %d launches, %d wrong\n", nodes, LAUNCHES + 1, bad);

    CHECK(cudaGraphExecDestroy(ge));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(w));
    CHECK(cudaFree(v));
    CHECK(cudaFreeHost(out));
    return bad;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    int bad = captured(seed);
    bad += explicit_graph(seed);
    if (bad) {
        printf("graphs: %d wrong (seed %u)\n", bad, seed);
        return 1;
    }
    printf("graphs: ok\n");
    return 0;
}
