// Stream capture queries through the runtime, as cuBLAS and PyTorch's
// allocator ask them: cudaStreamIsCapturing and cudaStreamGetCaptureInfo on
// the default stream (0), cudaStreamLegacy, cudaStreamPerThread, a blocking
// and a non-blocking created stream, from the main thread and another one,
// before and after work on them; each must say "not capturing" (nothing
// begins a capture here) and clear what it reports. Then
// cudaThreadExchangeStreamCaptureMode: per thread, global by default, and
// each exchange hands back the previous mode. Prints "capturequery: ok".
#include <cstdio>
#include <cstdlib>
#include <thread>
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

// Atomic: the non-blocking stream's launch runs beside the others.
__global__ void touch(int *p)
{
    atomicAdd(&p[threadIdx.x], 1);
}

static void query(const char *what, cudaStream_t s)
{
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    CHECK(cudaStreamIsCapturing(s, &st));
    WANT(st == cudaStreamCaptureStatusNone, "%s: cudaStreamIsCapturing says %d", what, (int)st);

    st = cudaStreamCaptureStatusActive;
    unsigned long long id = 77;
    cudaGraph_t graph = (cudaGraph_t)&id;
    const cudaGraphNode_t *deps = (const cudaGraphNode_t *)&id;
    size_t ndeps = 5;
    CHECK(cudaStreamGetCaptureInfo(s, &st, &id, &graph, &deps, nullptr, &ndeps));
    WANT(st == cudaStreamCaptureStatusNone, "%s: cudaStreamGetCaptureInfo says %d", what, (int)st);
    if (st == cudaStreamCaptureStatusNone)
        printf("%s: not capturing\n", what);
}

static void all_streams(const char *who, cudaStream_t blocking, cudaStream_t nonblocking)
{
    char what[96];
    const struct {
        const char *name;
        cudaStream_t s;
    } streams[] = { { "default", 0 }, { "legacy", cudaStreamLegacy }, { "per-thread", cudaStreamPerThread },
                    { "blocking", blocking }, { "non-blocking", nonblocking } };
    for (const auto &e : streams) {
        snprintf(what, sizeof what, "%s %s", who, e.name);
        query(what, e.s);
    }
}

int main()
{
    int *d;
    CHECK(cudaMalloc(&d, 32 * sizeof(int)));
    CHECK(cudaMemset(d, 0, 32 * sizeof(int)));
    // The memset may still be queued: a non-blocking stream does not wait for it.
    CHECK(cudaDeviceSynchronize());
    cudaStream_t blocking, nonblocking;
    CHECK(cudaStreamCreate(&blocking));
    CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    all_streams("main", blocking, nonblocking);

    // After work on each, still not capturing.
    touch<<<1, 32, 0, blocking>>>(d);
    touch<<<1, 32, 0, nonblocking>>>(d);
    touch<<<1, 32, 0, cudaStreamPerThread>>>(d);
    touch<<<1, 32>>>(d);
    CHECK(cudaGetLastError());
    all_streams("after work", blocking, nonblocking);
    CHECK(cudaDeviceSynchronize());
    int h[32];
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++)
        WANT(h[i] == 4, "d[%d] = %d, expected 4", i, h[i]);

    // The capture mode is the calling thread's.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    WANT(mode == cudaStreamCaptureModeGlobal, "a thread starts in mode %d, expected global", (int)mode);
    std::thread other([&] {
        cudaStreamCaptureMode m = cudaStreamCaptureModeThreadLocal;
        CHECK(cudaThreadExchangeStreamCaptureMode(&m));
        WANT(m == cudaStreamCaptureModeGlobal, "another thread starts in mode %d, expected global", (int)m);
        m = cudaStreamCaptureModeGlobal;
        CHECK(cudaThreadExchangeStreamCaptureMode(&m));
        WANT(m == cudaStreamCaptureModeThreadLocal, "the other thread's mode is %d, expected thread-local", (int)m);
        all_streams("thread", blocking, nonblocking);
    });
    other.join();
    mode = cudaStreamCaptureModeGlobal;
    CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    WANT(mode == cudaStreamCaptureModeRelaxed, "this thread's mode is %d, expected relaxed", (int)mode);

    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaStreamDestroy(nonblocking));
    CHECK(cudaFree(d));
    printf("capturequery: ok\n");
    return 0;
}
