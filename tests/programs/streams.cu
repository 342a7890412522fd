// Streams and events through the runtime, checked on the CPU against random
// inputs (seed printed; SEED=N repeats a run):
//  - four streams, each copying its chunk of pinned (cudaMallocHost) memory
//    in with cudaMemcpyAsync, transforming it and copying it back, with an
//    event recorded after each;
//  - cudaStreamWaitEvent ordering a kernel on stream B after a kernel on
//    stream A; stream A is held back by a host function that waits for the
//    main thread, so that while it waits cudaStreamQuery and cudaEventQuery
//    must say cudaErrorNotReady for A and B, and an unrelated stream C must
//    still finish (cudaStreamSynchronize on C returns);
//  - cudaEventElapsedTime > 0 around real work, and cudaErrorInvalidResource-
//    Handle for an event created with cudaEventDisableTiming;
//  - cudaDeviceSynchronize, after which every stream and event is ready.
// The gate gives up after 20 s, so a stuck stream fails instead of hanging.
//
// Known failure through an agent (passes on local softgpu): the shim runs
// host functions on the link's receiving thread (shim/link.c apply_words),
// so while a host function on stream A waits, nothing from that agent is
// received: cudaStreamSynchronize on an unrelated stream C, and even a
// cudaMalloc, wait until it returns (here until the gate's 20 s timeout,
// after which A and its event already read as done; CUDA finishes C at
// once). Reproducer: a host function that sleeps 3 s on stream A, then a
// kernel on stream C and cudaStreamSynchronize(C): 3.0 s through an agent,
// 0.0 s locally.
// (softgpu's cudaStreamQuery once said NotReady right after an event
// recorded last on the stream completed; fixed by 3e1ec97.)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void transform(const int *in, int *out, int n, int k)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * 2 + k;
}

// A dependent chain per element, so the kernel takes a while and its result
// cannot be guessed.
__device__ __host__ unsigned chain(unsigned x, int rounds)
{
    for (int r = 0; r < rounds; r++)
        x = x * 1664525u + 1013904223u + (x >> 13);
    return x;
}

__global__ void produce(const int *in, unsigned *x, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = chain((unsigned)in[i], rounds);
}

__global__ void consume(const unsigned *x, unsigned *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * 3u + 1u;
}

static std::atomic<int> gate_open{ 0 }, gate_entered{ 0 }, gate_timed_out{ 0 };

static void CUDART_CB gate(void *)
{
    gate_entered = 1;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!gate_open.load()) {
        if (std::chrono::steady_clock::now() > until) {
            gate_timed_out = 1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    int wrong = 0;
#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond)) {                     \
            printf(__VA_ARGS__);           \
            wrong++;                       \
        }                                  \
    } while (0)

    // 1. Four streams over chunks of pinned memory.
    const int nstreams = 4, chunk = 5003, n = nstreams * chunk;
    int *hin, *hout, *din, *dout;
    CHECK(cudaMallocHost(&hin, n * sizeof(int)));
    CHECK(cudaMallocHost(&hout, n * sizeof(int)));
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&dout, n * sizeof(int)));
    for (int i = 0; i < n; i++) {
        hin[i] = (int)(seed_next32() % 1000000);
        hout[i] = -1;
    }
    cudaStream_t st[nstreams];
    cudaEvent_t done[nstreams];
    for (int k = 0; k < nstreams; k++) {
        CHECK(k % 2 ? cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking) : cudaStreamCreate(&st[k]));
        CHECK(cudaEventCreate(&done[k]));
    }
    for (int k = 0; k < nstreams; k++) {
        size_t off = (size_t)k * chunk;
        CHECK(cudaMemcpyAsync(din + off, hin + off, chunk * sizeof(int), cudaMemcpyHostToDevice, st[k]));
        transform<<<7, 128, 0, st[k]>>>(din + off, dout + off, chunk, k);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(hout + off, dout + off, chunk * sizeof(int), cudaMemcpyDeviceToHost, st[k]));
        CHECK(cudaEventRecord(done[k], st[k]));
    }
    for (int k = nstreams - 1; k >= 0; k--)
        CHECK(cudaEventSynchronize(done[k]));
    for (int k = 0; k < nstreams; k++) {
        CHECK(cudaEventQuery(done[k]));
        CHECK(cudaStreamQuery(st[k]));
    }
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (hout[i] != hin[i] * 2 + i / chunk && bad++ < 5)
            printf("chunked: out[%d] = %d, expected %d\n", i, hout[i], hin[i] * 2 + i / chunk);
    wrong += bad;
    printf("%d streams x %d ints through pinned memory: %d wrong\n", nstreams, chunk, bad);

    // 2. B waits for A by an event; A is held at a host function.
    const int m = 3001, rounds = 300;
    cudaStream_t a, b, c;
    cudaEvent_t ev_a, ev_b;
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev_a, cudaEventDisableTiming));
    CHECK(cudaEventCreate(&ev_b));
    unsigned *dx, *dy, *hy;
    CHECK(cudaMalloc(&dx, m * sizeof(unsigned)));
    CHECK(cudaMalloc(&dy, m * sizeof(unsigned)));
    CHECK(cudaMallocHost(&hy, m * sizeof(unsigned)));
    CHECK(cudaMemset(dx, 0xff, m * sizeof(unsigned)));   // what B sees if it runs early
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaLaunchHostFunc(a, gate, nullptr));
    produce<<<(m + 127) / 128, 128, 0, a>>>(din, dx, m, rounds);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev_a, a));
    CHECK(cudaStreamWaitEvent(b, ev_a, 0));
    consume<<<(m + 63) / 64, 64, 0, b>>>(dx, dy, m);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(hy, dy, m * sizeof(unsigned), cudaMemcpyDeviceToHost, b));
    CHECK(cudaEventRecord(ev_b, b));
    // C is independent of A and B: it must finish while A is held.
    transform<<<5, 96, 0, c>>>(din, dout, chunk, 100);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(hout, dout, chunk * sizeof(int), cudaMemcpyDeviceToHost, c));
    CHECK(cudaStreamSynchronize(c));
    bad = 0;
    for (int i = 0; i < chunk; i++)
        if (hout[i] != hin[i] * 2 + 100 && bad++ < 5)
            printf("stream C: out[%d] = %d, expected %d\n", i, hout[i], hin[i] * 2 + 100);
    wrong += bad;
    cudaError_t qa = cudaStreamQuery(a), qea = cudaEventQuery(ev_a);
    cudaError_t qb = cudaStreamQuery(b), qeb = cudaEventQuery(ev_b);
    EXPECT(!gate_timed_out, "stream C finished only after the gate on stream A timed out\n");
    EXPECT(qa == cudaErrorNotReady, "cudaStreamQuery(A) while held: %s\n", cudaGetErrorName(qa));
    EXPECT(qea == cudaErrorNotReady, "cudaEventQuery(ev_a) while held: %s\n", cudaGetErrorName(qea));
    EXPECT(qb == cudaErrorNotReady, "cudaStreamQuery(B) waiting for A: %s\n", cudaGetErrorName(qb));
    EXPECT(qeb == cudaErrorNotReady, "cudaEventQuery(ev_b) waiting for A: %s\n", cudaGetErrorName(qeb));
    printf("while A is held: stream C done, queries A %s ev_a %s B %s ev_b %s\n", cudaGetErrorName(qa),
           cudaGetErrorName(qea), cudaGetErrorName(qb), cudaGetErrorName(qeb));
    gate_open = 1;
    CHECK(cudaEventSynchronize(ev_b));
    CHECK(cudaEventQuery(ev_a));
    EXPECT(gate_entered && !gate_timed_out, "gate entered %d timed out %d\n", (int)gate_entered,
           (int)gate_timed_out);
    bad = 0;
    for (int i = 0; i < m; i++) {
        unsigned want = chain((unsigned)hin[i], rounds) * 3u + 1u;
        if (hy[i] != want && bad++ < 5)
            printf("B after A: y[%d] = %#x, expected %#x%s\n", i, hy[i], want,
                   hy[i] == 0xffffffffu * 3u + 1u ? " (B ran before A)" : "");
    }
    wrong += bad;
    printf("B after A by event: %d of %d wrong\n", bad, m);

    // 3. Elapsed time around real work; none for a timing-disabled event.
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    CHECK(cudaEventRecord(t0, st[0]));
    for (int r = 0; r < 3; r++)
        produce<<<(m + 127) / 128, 128, 0, st[0]>>>(din, dx, m, rounds);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(t1, st[0]));
    CHECK(cudaEventSynchronize(t1));
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    EXPECT(ms > 0.0f, "cudaEventElapsedTime %g ms, expected > 0\n", ms);
    float ms2 = -1.0f;
    cudaError_t et = cudaEventElapsedTime(&ms2, ev_a, ev_b);
    EXPECT(et == cudaErrorInvalidResourceHandle, "cudaEventElapsedTime on a timing-disabled event: %s\n",
           cudaGetErrorName(et));
    cudaGetLastError();   // clear the expected error
    printf("elapsed %.3f ms for 3 launches; timing-disabled event: %s\n", ms, cudaGetErrorName(et));

    // 4. Everything at once, then every stream and event is ready.
    for (int k = 0; k < nstreams; k++) {
        transform<<<3, 64, 0, st[k]>>>(din, dout + (size_t)k * chunk, chunk, k);
        CHECK(cudaEventRecord(done[k], st[k]));
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    for (int k = 0; k < nstreams; k++) {
        cudaError_t q = cudaStreamQuery(st[k]), eq = cudaEventQuery(done[k]);
        EXPECT(q == cudaSuccess && eq == cudaSuccess, "after cudaDeviceSynchronize: stream %d %s, event %s\n", k,
               cudaGetErrorName(q), cudaGetErrorName(eq));
    }
    CHECK(cudaMemcpy(hout, dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    bad = 0;
    for (int i = 0; i < n; i++)
        if (hout[i] != hin[i % chunk] * 2 + i / chunk && bad++ < 5)
            printf("final: out[%d] = %d, expected %d\n", i, hout[i], hin[i % chunk] * 2 + i / chunk);
    wrong += bad;

    for (int k = 0; k < nstreams; k++) {
        CHECK(cudaStreamDestroy(st[k]));
        CHECK(cudaEventDestroy(done[k]));
    }
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    CHECK(cudaStreamDestroy(c));
    CHECK(cudaEventDestroy(ev_a));
    CHECK(cudaEventDestroy(ev_b));
    CHECK(cudaEventDestroy(t0));
    CHECK(cudaEventDestroy(t1));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFreeHost(hin));
    CHECK(cudaFreeHost(hout));
    CHECK(cudaFreeHost(hy));
    if (wrong) {
        printf("streams: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("streams: ok %d streams %d ints\n", nstreams, n);
    return 0;
}
