// A sparse activation tensor (7 in 8 floats zero, as after a ReLU) and a
// buffer of random words, each copied to the device with cudaMemcpy, passed
// through a kernel (the tensor doubled, the words mixed with their index)
// and copied back; checked element by element on the CPU; then the tensor
// again, asynchronously behind a kernel writing the same buffer on one
// stream, and back. With "random" as
// its argument only the random words travel. Through an agent on a slow
// link the tensor's bytes go compressed both ways and the random ones
// raw (tests/test_remote.c reads the shim's RIG_STATS=1 line).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#include "check.h"

__global__ void twice(float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= 2.0f;
}

// Writes v everywhere, passes times over: slow enough that a copy queued
// behind it on its stream reaches the agent while it still runs.
__global__ void fill_slowly(float *x, size_t n, float v, int passes)
{
    for (int p = 0; p < passes; p++)
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
            x[i] = v + (float)(passes - 1 - p);
}

__global__ void mix(unsigned *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] ^= (unsigned)i;
}

static unsigned long long rng = 0x5eed5eedULL;
static unsigned next32()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng >> 32);
}

int main(int argc, char **argv)
{
    bool random_only = argc > 1 && strcmp(argv[1], "random") == 0;
    const size_t n = (size_t)2 << 20;   // 8 MiB of each
    if (!random_only) {
        std::vector<float> act(n, 0.0f), back(n);
        for (size_t i = 0; i < n; i++)
            if ((next32() & 7) == 0)
                act[i] = (float)(next32() >> 8) / (float)(1u << 24);
        float *d = nullptr;
        CHECK(cudaMalloc(&d, n * sizeof(float)));
        CHECK(cudaMemcpy(d, act.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        twice<<<256, 256>>>(d, n);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(back.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++)
            if (back[i] != 2.0f * act[i]) {
                printf("sparsecopy: element %zu is %g, expected %g\n", i, back[i], 2.0f * act[i]);
                return 1;
            }
        // The tensor again, asynchronously from page-locked memory behind a
        // kernel still writing the same buffer on one stream: its bytes must
        // land after the kernel's (the agent may not decode them into the
        // device memory before the stream is idle).
        float *pinned = nullptr;
        CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
        memcpy(pinned, act.data(), n * sizeof(float));
        cudaStream_t s;
        CHECK(cudaStreamCreate(&s));
        fill_slowly<<<64, 256, 0, s>>>(d, n, 7.0f, 4);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(d, pinned, n * sizeof(float), cudaMemcpyHostToDevice, s));
        CHECK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (size_t i = 0; i < n; i++)
            if (pinned[i] != act[i]) {
                printf("sparsecopy: behind the kernel, element %zu is %g, expected %g\n", i, pinned[i], act[i]);
                return 1;
            }
        CHECK(cudaStreamDestroy(s));
        CHECK(cudaFreeHost(pinned));
        CHECK(cudaFree(d));
    }
    std::vector<unsigned> words(n), got(n);
    for (size_t i = 0; i < n; i++)
        words[i] = next32();
    unsigned *dw = nullptr;
    CHECK(cudaMalloc(&dw, n * sizeof(unsigned)));
    CHECK(cudaMemcpy(dw, words.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    mix<<<256, 256>>>(dw, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(got.data(), dw, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (got[i] != (words[i] ^ (unsigned)i)) {
            printf("sparsecopy: word %zu is %#x, expected %#x\n", i, got[i], words[i] ^ (unsigned)i);
            return 1;
        }
    CHECK(cudaFree(dw));
    printf("sparsecopy: ok\n");
    return 0;
}
