// Large transfers through the runtime: 3 streams each move a 24 MiB chunk of
// pinned memory to the device with cudaMemcpyAsync, a kernel mixes each
// word with its index, and the chunk comes back asynchronously, several
// times over (past 64 MiB in flight at once); then one 72 MiB pageable
// cudaMemcpy each way and a device-to-device copy. Checked word by word on
// the CPU against random data (seed printed; SEED=N repeats a run).
//
// Through an agent a handover frame completed by a direct read into its
// payload was once delivered only when the next bytes came (a hang before
// the controller sent beats, then up to 1 s per large copy: this program
// took ~60 s); fixed by 861ff68 (now ~8 s, as locally).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void mix(unsigned *x, size_t n, unsigned k)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (x[i] ^ (unsigned)i) + k;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    const int nstreams = 3, rounds = 2;
    const size_t chunk = (24u << 20) / sizeof(unsigned);   // 24 MiB of words: 72 MiB at once
    unsigned *src, *dst;
    CHECK(cudaMallocHost(&src, nstreams * chunk * sizeof(unsigned)));
    CHECK(cudaMallocHost(&dst, nstreams * chunk * sizeof(unsigned)));
    for (size_t i = 0; i < nstreams * chunk; i++)
        src[i] = seed_next32();
    memset(dst, 0, nstreams * chunk * sizeof(unsigned));
    unsigned *dev;
    CHECK(cudaMalloc(&dev, nstreams * chunk * sizeof(unsigned)));
    cudaStream_t st[nstreams];
    for (int k = 0; k < nstreams; k++)
        CHECK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nstreams; k++) {
            size_t off = k * chunk;
            if (r == 0)
                CHECK(cudaMemcpyAsync(dev + off, src + off, chunk * sizeof(unsigned), cudaMemcpyHostToDevice, st[k]));
            mix<<<64, 256, 0, st[k]>>>(dev + off, chunk, (unsigned)(r * 10 + k));
            CHECK(cudaGetLastError());
            CHECK(cudaMemcpyAsync(dst + off, dev + off, chunk * sizeof(unsigned), cudaMemcpyDeviceToHost, st[k]));
        }
    CHECK(cudaDeviceSynchronize());
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int wrong = 0;
    for (int k = 0; k < nstreams; k++)
        for (size_t j = 0; j < chunk; j++) {
            size_t i = k * chunk + j;
            unsigned v = src[i];
            for (int r = 0; r < rounds; r++)
                v = (v ^ (unsigned)j) + (unsigned)(r * 10 + k);
            if (dst[i] != v && wrong++ < 5)
                printf("stream %d word %zu = %#x, expected %#x\n", k, j, dst[i], v);
        }
    printf("%d streams x %zu MiB x %d rounds: %.2f s, %d wrong\n", nstreams, (chunk * sizeof(unsigned)) >> 20, rounds,
           secs, wrong);

    // One big pageable copy each way, and device to device.
    const size_t big = (72u << 20) / sizeof(unsigned);
    unsigned *a = (unsigned *)malloc(big * sizeof(unsigned)), *b = (unsigned *)malloc(big * sizeof(unsigned));
    for (size_t i = 0; i < big; i++)
        a[i] = seed_next32();
    unsigned *d1, *d2;
    CHECK(cudaMalloc(&d1, big * sizeof(unsigned)));
    CHECK(cudaMalloc(&d2, big * sizeof(unsigned)));
    CHECK(cudaMemcpy(d1, a, big * sizeof(unsigned), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d2, d1, big * sizeof(unsigned), cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(b, d2, big * sizeof(unsigned), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < big; i++)
        if (a[i] != b[i] && bad++ < 5)
            printf("pageable round trip word %zu = %#x, expected %#x\n", i, b[i], a[i]);
    wrong += bad;
    printf("pageable %zu MiB round trip: %d wrong\n", (big * sizeof(unsigned)) >> 20, bad);

    for (int k = 0; k < nstreams; k++)
        CHECK(cudaStreamDestroy(st[k]));
    CHECK(cudaFree(dev));
    CHECK(cudaFree(d1));
    CHECK(cudaFree(d2));
    CHECK(cudaFreeHost(src));
    CHECK(cudaFreeHost(dst));
    free(a);
    free(b);
    if (wrong) {
        printf("bigcopy: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("bigcopy: ok %zu MiB\n", (nstreams * chunk * sizeof(unsigned) * 2 * rounds + big * sizeof(unsigned) * 2) >> 20);
    return 0;
}
