// Registered host memory and four streams, as a training loop's input
// pipeline does it: cudaHostRegister on MIB MiB of malloc'd memory, then
// ROUNDS rounds in which each of four streams copies its quarter in
// (cudaMemcpyAsync), runs a kernel on it and copies it back out, each round
// timed with events. Each round's output is the next round's input, so
// the CPU's replay of every round checks them all at the end.
//   hostreg_streams [MIB [ROUNDS [end|each]]]
//       default 64 MiB, 100 rounds, every round queued at once and one
//       synchronisation at the end ("each": the host waits for each round's
//       stop event before queuing the next); prints
//       "hostreg_streams: ok MIB MiB ROUNDS rounds"
// Through an agent this once failed with "rig: job failed: b: silent for
// 10 s" (issue 12) while passing on local softgpu.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void bump(unsigned *x, size_t n, unsigned k)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = x[i] * 5u + k;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main(int argc, char **argv)
{
    long mib = argc > 1 ? strtol(argv[1], nullptr, 0) : 64;
    long rounds = argc > 2 ? strtol(argv[2], nullptr, 0) : 100;
    bool each = argc > 3 && strcmp(argv[3], "each") == 0;
    if (mib < 1 || mib > 4096 || rounds < 1 || (argc > 3 && !each && strcmp(argv[3], "end") != 0)) {
        printf("hostreg_streams: usage: hostreg_streams [MIB [ROUNDS [end|each]]]\n");
        return 2;
    }
    const int nstreams = 4;
    size_t bytes = (size_t)mib << 20, n = bytes / sizeof(unsigned), quarter = n / nstreams;
    unsigned *h = (unsigned *)aligned_alloc(4096, bytes);
    if (!h) {
        printf("hostreg_streams: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned)(i * 2654435761u);
    CHECK(cudaHostRegister(h, bytes, cudaHostRegisterDefault));
    unsigned *d;
    CHECK(cudaMalloc(&d, bytes));
    cudaStream_t st[nstreams];
    for (int k = 0; k < nstreams; k++)
        CHECK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
    // Per round: start on stream 0, which the others wait for; each other
    // stream's end joins stream 0, where stop is recorded.
    cudaEvent_t *start = new cudaEvent_t[rounds], *stop = new cudaEvent_t[rounds];
    cudaEvent_t joined[nstreams];
    for (long r = 0; r < rounds; r++) {
        CHECK(cudaEventCreate(&start[r]));
        CHECK(cudaEventCreate(&stop[r]));
    }
    for (int k = 0; k < nstreams; k++)
        CHECK(cudaEventCreateWithFlags(&joined[k], cudaEventDisableTiming));
    int wrong = 0;
    for (long r = 0; r < rounds; r++) {
        CHECK(cudaEventRecord(start[r], st[0]));
        for (int k = 1; k < nstreams; k++)
            CHECK(cudaStreamWaitEvent(st[k], start[r], 0));
        for (int k = 0; k < nstreams; k++) {
            unsigned *hk = h + k * quarter, *dk = d + k * quarter;
            CHECK(cudaMemcpyAsync(dk, hk, quarter * sizeof(unsigned), cudaMemcpyHostToDevice, st[k]));
            bump<<<64, 256, 0, st[k]>>>(dk, quarter, (unsigned)(r * nstreams + k));
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpyAsync(hk, dk, quarter * sizeof(unsigned), cudaMemcpyDeviceToHost, st[k]));
        }
        for (int k = 1; k < nstreams; k++) {
            CHECK(cudaEventRecord(joined[k], st[k]));
            CHECK(cudaStreamWaitEvent(st[0], joined[k], 0));
        }
        CHECK(cudaEventRecord(stop[r], st[0]));
        if (each)
            CHECK(cudaEventSynchronize(stop[r]));
    }
    CHECK(cudaDeviceSynchronize());
    float total_ms = 0;
    for (long r = 0; r < rounds; r++) {
        float ms = -1;
        CHECK(cudaEventElapsedTime(&ms, start[r], stop[r]));
        total_ms += ms;
        if (!(ms >= 0.0f) && wrong++ < 5)
            printf("hostreg_streams: round %ld: elapsed %g ms\n", r, ms);
    }
    // The whole buffer against the CPU's replay of every round.
    for (size_t i = 0; i < (size_t)nstreams * quarter; i++) {
        unsigned v = (unsigned)(i * 2654435761u);
        int k = (int)(i / quarter);
        for (long r = 0; r < rounds; r++)
            v = v * 5u + (unsigned)(r * nstreams + k);
        if (h[i] != v && wrong++ < 5)
            printf("h[%zu] = %#x, expected %#x\n", i, h[i], v);
    }
    printf("hostreg_streams: %ld rounds, %.1f ms on the device\n", rounds, total_ms);
    for (int k = 0; k < nstreams; k++)
        CHECK(cudaStreamDestroy(st[k]));
    for (long r = 0; r < rounds; r++) {
        CHECK(cudaEventDestroy(start[r]));
        CHECK(cudaEventDestroy(stop[r]));
    }
    for (int k = 0; k < nstreams; k++)
        CHECK(cudaEventDestroy(joined[k]));
    delete[] start;
    delete[] stop;
    CHECK(cudaFree(d));
    CHECK(cudaHostUnregister(h));
    free(h);
    if (wrong) {
        printf("hostreg_streams: %d wrong\n", wrong);
        return 1;
    }
    printf("hostreg_streams: ok %ld MiB %ld rounds\n", mib, rounds);
    return 0;
}
