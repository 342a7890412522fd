// Stream-ordered allocation through the runtime, checked on the CPU against
// random inputs (seed printed; SEED=N repeats a run):
//  - the device says it supports memory pools;
//  - cudaMallocAsync on stream A, a kernel filling it, an event recorded,
//    and stream B waiting for that event before it reads the memory into a
//    buffer cudaMallocAsync'd on B and frees A's memory with cudaFreeAsync
//    (freed on the stream that last used it), several rounds;
//  - a created pool (cudaMemPoolCreate) with a release threshold, used by
//    cudaMallocFromPoolAsync: after a synchronize the freed memory stays
//    reserved up to the threshold, its used counter is back to 0, and the
//    next allocation of that size on the same stream reuses it;
//  - cudaMemPoolTrimTo(0) gives the reserved memory back once nothing is
//    in use, and the default pool (threshold 0) holds nothing after a
//    synchronize;
//  - the device's current pool set to the created one (cudaDeviceSetMemPool)
//    serves cudaMallocAsync, and goes back to the default when destroyed;
//  - 200 rounds of allocate, fill, copy out and free of one size on one
//    stream (each round may get the last one's memory at once), with a
//    kernel sometimes still writing the memory when it is freed, and the
//    same beside it on another stream (which must not get that memory
//    before the kernel is done); then the default pool holds nothing, also
//    after a stream freed on and destroyed.
//
// Through an agent each cudaMallocAsync was once a round trip (250 us per
// allocate-and-free); the shim now keeps a block freed on a stream for the
// next allocation of its size there.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("mallocasync: %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void fill(unsigned *x, int n, unsigned seed)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = (unsigned)i * 2654435761u ^ seed;
}

// Writes x over and over: a kernel still running when its memory is freed
// on its stream.
__global__ void churn(unsigned *x, int n, int times)
{
    for (int t = 0; t < times; t++)
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            x[i] = 0xdead0000u + (unsigned)t;
}

__global__ void mix(const unsigned *x, unsigned *y, int n, unsigned k)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i] * 3u + k;
}

static unsigned long long attr(cudaMemPool_t p, cudaMemPoolAttr a)
{
    unsigned long long v = 0;
    CHECK(cudaMemPoolGetAttribute(p, a, &v));
    return v;
}

int main()
{
    unsigned seed = run_seed("mallocasync");
    srand(seed);
    int dev = 0, pools = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev));
    EXPECT(pools == 1, "memory pools supported: %d", pools);

    const int n = 1 << 16;
    unsigned *host = (unsigned *)malloc(n * sizeof *host);
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));

    // Two streams, ordered by events, allocating and freeing as they go.
    for (int round = 0; round < 4; round++) {
        unsigned s = (unsigned)rand(), k = (unsigned)rand();
        unsigned *x, *y;
        CHECK(cudaMallocAsync(&x, n * sizeof *x, a));
        fill<<<64, 128, 0, a>>>(x, n, s);
        CHECK(cudaEventRecord(filled, a));
        CHECK(cudaStreamWaitEvent(b, filled, 0));
        CHECK(cudaMallocAsync(&y, n * sizeof *y, b));
        mix<<<64, 128, 0, b>>>(x, y, n, k);
        CHECK(cudaFreeAsync(x, b));
        CHECK(cudaMemcpyAsync(host, y, n * sizeof *y, cudaMemcpyDeviceToHost, b));
        CHECK(cudaFreeAsync(y, b));
        CHECK(cudaStreamSynchronize(b));
        for (int i = 0; i < n; i++) {
            unsigned want = ((unsigned)i * 2654435761u ^ s) * 3u + k;
            EXPECT(host[i] == want, "round %d: [%d] = %u, want %u", round, i, host[i], want);
        }
    }
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, dev));
    CHECK(cudaDeviceSynchronize());
    EXPECT(attr(def, cudaMemPoolAttrUsedMemCurrent) == 0, "default pool used %llu",
           attr(def, cudaMemPoolAttrUsedMemCurrent));
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 0, "default pool reserved %llu after a sync",
           attr(def, cudaMemPoolAttrReservedMemCurrent));
    EXPECT(attr(def, cudaMemPoolAttrUsedMemHigh) >= 2 * n * sizeof(unsigned), "default pool used high %llu",
           attr(def, cudaMemPoolAttrUsedMemHigh));

    // A pool of our own that keeps up to 64 MiB.
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    unsigned long long keep = 64ull << 20;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    EXPECT(attr(pool, cudaMemPoolAttrReleaseThreshold) == keep, "threshold %llu",
           attr(pool, cudaMemPoolAttrReleaseThreshold));
    unsigned *p, *q;
    unsigned s = (unsigned)rand();
    CHECK(cudaMallocFromPoolAsync(&p, n * sizeof *p, pool, a));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= n * sizeof *p, "used %llu",
           attr(pool, cudaMemPoolAttrUsedMemCurrent));
    fill<<<64, 128, 0, a>>>(p, n, s);
    CHECK(cudaMemcpyAsync(host, p, n * sizeof *p, cudaMemcpyDeviceToHost, a));
    CHECK(cudaFreeAsync(p, a));
    CHECK(cudaStreamSynchronize(a));
    for (int i = 0; i < n; i++)
        EXPECT(host[i] == ((unsigned)i * 2654435761u ^ s), "pool [%d] = %u", i, host[i]);
    unsigned long long reserved = attr(pool, cudaMemPoolAttrReservedMemCurrent);
    EXPECT(reserved >= n * sizeof *p, "kept %llu below the threshold", reserved);
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) == 0, "used %llu after the free",
           attr(pool, cudaMemPoolAttrUsedMemCurrent));
    CHECK(cudaMallocFromPoolAsync(&q, n * sizeof *q, pool, a));
    EXPECT(q == p, "the kept memory was not reused (%p, then %p)", (void *)p, (void *)q);
    EXPECT(attr(pool, cudaMemPoolAttrReservedMemCurrent) == reserved, "reserved grew to %llu",
           attr(pool, cudaMemPoolAttrReservedMemCurrent));
    CHECK(cudaFreeAsync(q, a));
    CHECK(cudaStreamSynchronize(a));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    EXPECT(attr(pool, cudaMemPoolAttrReservedMemCurrent) == 0, "reserved %llu after trimming",
           attr(pool, cudaMemPoolAttrReservedMemCurrent));

    // The created pool as the device's current one.
    CHECK(cudaDeviceSetMemPool(dev, pool));
    cudaMemPool_t cur;
    CHECK(cudaDeviceGetMemPool(&cur, dev));
    EXPECT(cur == pool, "current pool");
    CHECK(cudaMallocAsync(&p, 1000, b));
    EXPECT(attr(pool, cudaMemPoolAttrUsedMemCurrent) >= 1000, "cudaMallocAsync did not use the current pool");
    CHECK(cudaMemsetAsync(p, 0x5a, 1000, b));
    unsigned char back[1000];
    CHECK(cudaMemcpyAsync(back, p, 1000, cudaMemcpyDeviceToHost, b));
    CHECK(cudaFreeAsync(p, b));
    CHECK(cudaStreamSynchronize(b));
    for (int i = 0; i < 1000; i++)
        EXPECT(back[i] == 0x5a, "memset [%d] = %u", i, back[i]);
    CHECK(cudaMemPoolDestroy(pool));
    CHECK(cudaDeviceGetMemPool(&cur, dev));
    EXPECT(cur == def, "the current pool is the default again");

    // A loop of same-size allocations on one stream, as a framework's
    // allocator makes them (the next round may get this round's memory at
    // once), and beside it allocations on b while a's kernel still writes
    // memory a freed (b must not get it before a is done with it).
    const int m = 4096, rounds = 200;
    unsigned *outs, *outs_b;
    CHECK(cudaMallocHost(&outs, (size_t)rounds * m * sizeof *outs));
    CHECK(cudaMallocHost(&outs_b, (size_t)rounds * m * sizeof *outs_b));
    for (int r = 0; r < rounds; r++) {
        unsigned *t, *u;
        CHECK(cudaMallocAsync(&t, m * sizeof *t, a));
        fill<<<8, 128, 0, a>>>(t, m, (unsigned)r * 7919u);
        CHECK(cudaMemcpyAsync(outs + (size_t)r * m, t, m * sizeof *t, cudaMemcpyDeviceToHost, a));
        if (r % 20 == 0)
            churn<<<8, 128, 0, a>>>(t, m, 50);
        CHECK(cudaFreeAsync(t, a));
        CHECK(cudaMallocAsync(&u, m * sizeof *u, b));
        fill<<<8, 128, 0, b>>>(u, m, (unsigned)r * 104729u);
        CHECK(cudaMemcpyAsync(outs_b + (size_t)r * m, u, m * sizeof *u, cudaMemcpyDeviceToHost, b));
        CHECK(cudaFreeAsync(u, b));
    }
    CHECK(cudaDeviceSynchronize());
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < m; i++) {
            unsigned want = (unsigned)i * 2654435761u ^ (unsigned)r * 7919u;
            unsigned want_b = (unsigned)i * 2654435761u ^ (unsigned)r * 104729u;
            EXPECT(outs[(size_t)r * m + i] == want, "loop on a, round %d: [%d] = %#x, want %#x", r, i,
                   outs[(size_t)r * m + i], want);
            EXPECT(outs_b[(size_t)r * m + i] == want_b, "loop on b, round %d: [%d] = %#x, want %#x", r, i,
                   outs_b[(size_t)r * m + i], want_b);
        }
    // Everything freed: the pool's figures say so after a synchronize.
    EXPECT(attr(def, cudaMemPoolAttrUsedMemCurrent) == 0, "default pool used %llu after the loop",
           attr(def, cudaMemPoolAttrUsedMemCurrent));
    EXPECT(attr(def, cudaMemPoolAttrReservedMemCurrent) == 0, "default pool reserved %llu after the loop",
           attr(def, cudaMemPoolAttrReservedMemCurrent));
    CHECK(cudaFreeHost(outs));
    CHECK(cudaFreeHost(outs_b));

    // A stream destroyed after freeing on it: the memory is the pool's again.
    cudaStream_t c;
    CHECK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    unsigned *z;
    CHECK(cudaMallocAsync(&z, m * sizeof *z, c));
    CHECK(cudaFreeAsync(z, c));
    CHECK(cudaStreamDestroy(c));
    CHECK(cudaDeviceSynchronize());
    EXPECT(attr(def, cudaMemPoolAttrUsedMemCurrent) == 0, "default pool used %llu after the stream went",
           attr(def, cudaMemPoolAttrUsedMemCurrent));

    CHECK(cudaEventDestroy(filled));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    free(host);
    printf("mallocasync: ok %d rounds, pool reuse and trim, %d rounds of reuse on a stream\n", 4, rounds);
    return 0;
}
