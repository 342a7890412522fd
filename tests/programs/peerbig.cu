// One large copy between two devices, as model-parallel code moves a
// layer's output to the next device: device 0 makes SIZE bytes (default
// 64 MiB) with a kernel, cudaMemcpyPeer moves them to device 1, and a
// kernel there folds them into a checksum that the host compares with the
// same fold on the CPU, so only a few bytes ever come back to the program.
// Prints the copy's time and rate (`peerbig: copy N bytes in T s`); with
// fewer than two devices it says so and exits 2. SEED=N repeats a run.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__device__ __host__ inline unsigned word_at(size_t i, unsigned seed)
{
    unsigned x = (unsigned)i * 2654435761u ^ seed;
    return x ^ x >> 13;
}

__global__ void make(unsigned *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = word_at(i, seed);
}

// Each word weighted by its place, so a misplaced chunk changes the sum.
__global__ void fold(const unsigned *x, size_t n, unsigned long long *sum)
{
    unsigned long long local = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        local += (unsigned long long)x[i] * (i % 1021 + 1);
    atomicAdd(sum, local);
}

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        printf("peerbig: needs 2 devices, found %d\n", count);
        return 2;
    }
    const char *s = getenv("SEED");
    unsigned seed = s ? (unsigned)strtoul(s, nullptr, 0) : (unsigned)time(nullptr) ^ (unsigned)getpid();
    printf("seed %u\n", seed);
    const char *sz = getenv("SIZE");
    size_t bytes = sz ? strtoull(sz, nullptr, 0) : (size_t)64 << 20;
    size_t n = bytes / sizeof(unsigned);

    unsigned *src, *dst;
    unsigned long long *sum, got = 0;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&src, n * sizeof(unsigned)));
    make<<<128, 256>>>(src, n, seed);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&dst, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&sum, sizeof *sum));
    CHECK(cudaMemset(sum, 0, sizeof *sum));
    CHECK(cudaDeviceSynchronize());

    auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaMemcpyPeer(dst, 1, src, 0, n * sizeof(unsigned)));
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("peerbig: copy %zu bytes in %.3f s (%.1f MB/s)\n", n * sizeof(unsigned), t, n * sizeof(unsigned) / t / 1e6);

    fold<<<128, 256>>>(dst, n, sum);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
    unsigned long long want = 0;
    for (size_t i = 0; i < n; i++)
        want += (unsigned long long)word_at(i, seed) * (i % 1021 + 1);
    CHECK(cudaFree(dst));
    CHECK(cudaFree(sum));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(src));
    if (got != want) {
        printf("peerbig: checksum %#llx, expected %#llx\n", got, want);
        return 1;
    }
    printf("peerbig: ok %zu bytes\n", n * sizeof(unsigned));
    return 0;
}
