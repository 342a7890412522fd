// The legacy default stream's implicit ordering through the runtime,
// checked on the CPU against random inputs (seed printed; SEED=N repeats a
// run). A slow kernel (a long dependent chain per element) writes a buffer
// and a second kernel or copy reads it, with no explicit synchronization in
// between; each read must see the finished buffer:
//  - a kernel on a blocking stream, then a kernel on the legacy default
//    stream (cudaStreamLegacy) that reads its output;
//  - a kernel on the legacy default stream, then a kernel on a blocking
//    stream that reads its output;
//  - a kernel on a blocking stream, then a synchronous cudaMemcpy to the host
//    (on the legacy stream; in the per-thread build an explicit
//    cudaMemcpyAsync on cudaStreamLegacy and its synchronize);
//  - the per-thread default stream (cudaStreamPerThread) of another host
//    thread, synchronized on its own.
// A read that overtakes its writer sees the 0xffffffff the buffers start as.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__device__ __host__ unsigned chain(unsigned x, int rounds)
{
    for (int r = 0; r < rounds; r++)
        x = x * 1664525u + 1013904223u + (x >> 13);
    return x;
}

__global__ void produce(const unsigned *in, unsigned *out, int n, int rounds)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = chain(in[i], rounds);
}

__global__ void consume(const unsigned *in, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] ^ 0x5bd1e995u;
}

const int N = 4001, ROUNDS = 400;

static int compare(const char *what, const unsigned *got, const unsigned *in, bool consumed)
{
    int bad = 0, early = 0;
    for (int i = 0; i < N; i++) {
        unsigned want = chain(in[i], ROUNDS) ^ (consumed ? 0x5bd1e995u : 0u);
        if (got[i] != want) {
            if (got[i] == (0xffffffffu ^ (consumed ? 0x5bd1e995u : 0u)))
                early++;
            if (bad++ < 3)
                printf("%s: [%d] = %#x, expected %#x\n", what, i, got[i], want);
        }
    }
    printf("%s: %d of %d wrong%s\n", what, bad, N, early ? " (the reader overtook the writer)" : "");
    return bad;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    unsigned *in = (unsigned *)malloc(N * sizeof(unsigned)), *out = (unsigned *)malloc(N * sizeof(unsigned));
    for (int i = 0; i < N; i++)
        in[i] = seed_next32();
    unsigned *din, *dx, *dy;
    CHECK(cudaMalloc(&din, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&dx, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&dy, N * sizeof(unsigned)));
    CHECK(cudaMemcpy(din, in, N * sizeof(unsigned), cudaMemcpyHostToDevice));
    cudaStream_t blocking;
    CHECK(cudaStreamCreate(&blocking));
    const int blocks = (N + 127) / 128;
    int wrong = 0;
    auto reset = [&]() {
        CHECK(cudaMemset(dx, 0xff, N * sizeof(unsigned)));
        CHECK(cudaMemset(dy, 0xff, N * sizeof(unsigned)));
        CHECK(cudaDeviceSynchronize());
    };

    // 1. blocking stream, then the legacy stream
    reset();
    produce<<<blocks, 128, 0, blocking>>>(din, dx, N, ROUNDS);
    consume<<<blocks, 128, 0, cudaStreamLegacy>>>(dx, dy, N);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    CHECK(cudaMemcpy(out, dy, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
    wrong += compare("blocking stream, then legacy stream", out, in, true);

    // 2. the legacy stream, then a blocking stream
    reset();
    produce<<<blocks, 128, 0, cudaStreamLegacy>>>(din, dx, N, ROUNDS);
    consume<<<blocks, 128, 0, blocking>>>(dx, dy, N);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(blocking));
    CHECK(cudaMemcpy(out, dy, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
    wrong += compare("legacy stream, then blocking stream", out, in, true);

    // 3. a blocking stream, then a synchronous copy
    reset();
    produce<<<blocks, 128, 0, blocking>>>(din, dx, N, ROUNDS);
    CHECK(cudaGetLastError());
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    CHECK(cudaMemcpyAsync(out, dx, N * sizeof(unsigned), cudaMemcpyDeviceToHost, cudaStreamLegacy));
    CHECK(cudaStreamSynchronize(cudaStreamLegacy));
#else
    CHECK(cudaMemcpy(out, dx, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
#endif
    wrong += compare("blocking stream, then cudaMemcpy", out, in, false);

    // 4. another thread's per-thread default stream
    reset();
    int thread_wrong = 0;
    std::thread t([&] {
        cudaError_t e;
        unsigned *hout = (unsigned *)malloc(N * sizeof(unsigned));
        produce<<<blocks, 128, 0, cudaStreamPerThread>>>(din, dx, N, ROUNDS);
        consume<<<blocks, 128, 0, cudaStreamPerThread>>>(dx, dy, N);
        if ((e = cudaMemcpyAsync(hout, dy, N * sizeof(unsigned), cudaMemcpyDeviceToHost, cudaStreamPerThread)) ||
            (e = cudaStreamSynchronize(cudaStreamPerThread))) {
            printf("per-thread stream: %s\n", cudaGetErrorName(e));
            thread_wrong = 1;
        } else {
            thread_wrong = compare("another thread's per-thread stream", hout, in, true);
        }
        free(hout);
    });
    t.join();
    wrong += thread_wrong;

    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    free(in);
    free(out);
    if (wrong) {
        printf("defaultstream: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("defaultstream: ok %d\n", N);
    return 0;
}
