// Many small asynchronous copies, as an inference server swaps KV-cache
// blocks between the GPU and pinned host memory: 2000 blocks of 4 KiB and
// 500 of 16 KiB go out and back by scattered block numbers on two streams,
// and between two copies out of one block a kernel changes it on the same
// stream (each copy out must hold the block as it was at its turn). Checked
// word by word on the CPU against random data (seed printed; SEED=N repeats
// a run).
//
// Through an agent the copies out once cost a system call each (4000 of
// 4 KiB took 80 ms); they now go many to a write, and a copy out read in
// place from device memory must still go before a kernel that changes it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

__global__ void bump(unsigned *block, size_t words, unsigned k)
{
    for (size_t i = threadIdx.x; i < words; i += blockDim.x)
        block[i] = block[i] * 3u + k;
}

static int wrong;

static int swap(size_t block_bytes, int blocks, cudaStream_t st[2])
{
    size_t words = block_bytes / sizeof(unsigned), total = block_bytes * blocks;
    unsigned *host, *back, *before, *dev;
    CHECK(cudaMallocHost(&host, total));
    CHECK(cudaMallocHost(&back, total));
    CHECK(cudaMallocHost(&before, total));
    CHECK(cudaMalloc(&dev, total));
    for (size_t i = 0; i < total / sizeof(unsigned); i++)
        host[i] = seed_next32();
    memset(back, 0, total);
    memset(before, 0, total);
    // In: host block b to device block perm(b), alternating streams.
    for (int b = 0; b < blocks; b++) {
        size_t to = (size_t)((b * 7919) % blocks);
        CHECK(cudaMemcpyAsync(dev + to * words, host + (size_t)b * words, block_bytes, cudaMemcpyHostToDevice,
                              st[b % 2]));
    }
    CHECK(cudaDeviceSynchronize());
    // Out, twice per block on one stream with a change between.
    for (int b = 0; b < blocks; b++) {
        size_t from = (size_t)((b * 7919) % blocks);
        cudaStream_t s = st[(b / 3) % 2];
        CHECK(cudaMemcpyAsync(before + (size_t)b * words, dev + from * words, block_bytes, cudaMemcpyDeviceToHost,
                              s));
        bump<<<1, 128, 0, s>>>(dev + from * words, words, (unsigned)b);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(back + (size_t)b * words, dev + from * words, block_bytes, cudaMemcpyDeviceToHost, s));
    }
    CHECK(cudaDeviceSynchronize());
    for (int b = 0; b < blocks; b++)
        for (size_t i = 0; i < words; i++) {
            size_t at = (size_t)b * words + i;
            unsigned want = host[at] * 3u + (unsigned)b;
            if (before[at] != host[at] && wrong++ < 5)
                printf("%zu-byte block %d word %zu before the change = %#x, expected %#x\n", block_bytes, b, i,
                       before[at], host[at]);
            if (back[at] != want && wrong++ < 5)
                printf("%zu-byte block %d word %zu after the change = %#x, expected %#x\n", block_bytes, b, i,
                       back[at], want);
        }
    CHECK(cudaFreeHost(host));
    CHECK(cudaFreeHost(back));
    CHECK(cudaFreeHost(before));
    CHECK(cudaFree(dev));
    return 0;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    cudaStream_t st[2];
    for (int k = 0; k < 2; k++)
        CHECK(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
    swap(4096, 2000, st);
    swap(16384, 500, st);
    for (int k = 0; k < 2; k++)
        CHECK(cudaStreamDestroy(st[k]));
    if (wrong) {
        printf("swapblocks: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("swapblocks: ok\n");
    return 0;
}
