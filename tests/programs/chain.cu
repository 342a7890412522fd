// A pipeline across every device (two or three), the way pipeline-parallel
// code hands activations on: stage d runs a kernel on its own stream, then
// passes its buffer to stage d+1 with cudaMemcpyPeerAsync, ordered by
// events across devices, several micro-batches in flight. Half the hand-offs
// go on the sending stage's stream, half on the receiving stage's, so both
// orders of a peer copy run. The buffer (SIZE bytes, default 20 MiB + 12,
// more than one piece of any copy) comes back and is checked on the CPU
// against the same stages run on the host (seed printed; SEED=N repeats).
// With fewer than two devices it says so and exits 2.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void stage(unsigned *x, size_t n, unsigned k)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (x[i] ^ x[i] >> 9) * 2654435761u + k + (unsigned)i;
}

static unsigned host_stage(unsigned x, size_t i, unsigned k)
{
    return (x ^ x >> 9) * 2654435761u + k + (unsigned)i;
}

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        printf("chain: needs 2 devices, found %d\n", count);
        return 2;
    }
    int stages = count < 3 ? count : 3;
    const char *s = getenv("SEED");
    unsigned seed = s ? (unsigned)strtoul(s, nullptr, 0) : (unsigned)time(nullptr) ^ (unsigned)getpid();
    printf("seed %u\n", seed);
    const char *sz = getenv("SIZE");
    size_t bytes = sz ? strtoull(sz, nullptr, 0) : ((size_t)20 << 20) + 12;
    size_t n = bytes / sizeof(unsigned);
    const int batches = 3;

    unsigned *host = (unsigned *)malloc(n * sizeof(unsigned) * batches);
    unsigned *want = (unsigned *)malloc(n * sizeof(unsigned) * batches);
    unsigned *back = (unsigned *)malloc(n * sizeof(unsigned) * batches);
    unsigned long long rng = seed;
    for (size_t i = 0; i < n * batches; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        host[i] = want[i] = (unsigned)(rng >> 32);
    }
    unsigned *buf[3][batches];
    cudaStream_t st[3];
    cudaEvent_t done[3][batches];
    for (int d = 0; d < stages; d++) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
        for (int b = 0; b < batches; b++) {
            CHECK(cudaMalloc(&buf[d][b], n * sizeof(unsigned)));
            CHECK(cudaEventCreateWithFlags(&done[d][b], cudaEventDisableTiming));
        }
    }
    // Every micro-batch through every stage, queued without a wait.
    for (int b = 0; b < batches; b++) {
        CHECK(cudaSetDevice(0));
        CHECK(cudaMemcpyAsync(buf[0][b], host + b * n, n * sizeof(unsigned), cudaMemcpyHostToDevice, st[0]));
        for (int d = 0; d < stages; d++) {
            CHECK(cudaSetDevice(d));
            stage<<<64, 256, 0, st[d]>>>(buf[d][b], n, 100 * d + b);
            CHECK(cudaGetLastError());
            if (d + 1 == stages)
                break;
            if ((b + d) % 2 == 0) {
                // on the sender's stream; the receiver waits for its event
                CHECK(cudaMemcpyPeerAsync(buf[d + 1][b], d + 1, buf[d][b], d, n * sizeof(unsigned), st[d]));
                CHECK(cudaEventRecord(done[d][b], st[d]));
                CHECK(cudaSetDevice(d + 1));
                CHECK(cudaStreamWaitEvent(st[d + 1], done[d][b], 0));
            } else {
                // on the receiver's stream, after the sender's event
                CHECK(cudaEventRecord(done[d][b], st[d]));
                CHECK(cudaSetDevice(d + 1));
                CHECK(cudaStreamWaitEvent(st[d + 1], done[d][b], 0));
                CHECK(cudaMemcpyPeerAsync(buf[d + 1][b], d + 1, buf[d][b], d, n * sizeof(unsigned), st[d + 1]));
            }
        }
        int last = stages - 1;
        CHECK(cudaSetDevice(last));
        CHECK(cudaMemcpyAsync(back + b * n, buf[last][b], n * sizeof(unsigned), cudaMemcpyDeviceToHost, st[last]));
    }
    CHECK(cudaSetDevice(stages - 1));
    CHECK(cudaStreamSynchronize(st[stages - 1]));

    // And a synchronous copy straight from the last stage to the first.
    CHECK(cudaMemcpy(buf[0][0], buf[stages - 1][0], n * sizeof(unsigned), cudaMemcpyDefault));
    unsigned *first = (unsigned *)malloc(n * sizeof(unsigned));
    CHECK(cudaMemcpy(first, buf[0][0], n * sizeof(unsigned), cudaMemcpyDeviceToHost));

    int wrong = 0;
    for (int b = 0; b < batches; b++)
        for (size_t i = 0; i < n; i++) {
            unsigned x = want[b * n + i];
            for (int d = 0; d < stages; d++)
                x = host_stage(x, i, 100 * d + b);
            if (back[b * n + i] != x && wrong++ < 5)
                printf("batch %d [%zu] = %#x, expected %#x\n", b, i, back[b * n + i], x);
            if (b == 0 && first[i] != x && wrong++ < 10)
                printf("copied back to device 0 [%zu] = %#x, expected %#x\n", i, first[i], x);
        }
    for (int d = 0; d < stages; d++) {
        CHECK(cudaSetDevice(d));
        for (int b = 0; b < batches; b++) {
            CHECK(cudaFree(buf[d][b]));
            CHECK(cudaEventDestroy(done[d][b]));
        }
        CHECK(cudaStreamDestroy(st[d]));
    }
    free(host);
    free(want);
    free(back);
    free(first);
    if (wrong) {
        printf("chain: %d wrong\n", wrong);
        return 1;
    }
    printf("chain: ok %d stages, %d batches of %zu bytes\n", stages, batches, n * sizeof(unsigned));
    return 0;
}
