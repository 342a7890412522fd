// cudaMemcpyBatchAsync (CUDA 12.8): a batch of copies in one call, as an
// inference server moves a request's KV-cache blocks between the GPU and
// host memory: 300 blocks of assorted sizes host to device (pinned sources
// in stream order and read during the call, pageable ones in any order),
// then device to device and back to the host, on a non-blocking stream.
// The sources of the copies read during the call are overwritten right
// after it returns, as CUDA allows. Bad batches
// (no copies, attribute indices that do not start at 0 or do not rise, an
// invalid source order, the legacy NULL stream, a NULL destination) must be refused with
// cudaErrorInvalidValue. Checked word by word on the CPU against random data
// (seed printed; SEED=N repeats a run).
//
// Through an agent the call was once refused on a proxy
// (cudaErrorNotSupported: "batched copies ... not forwarded yet").
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

// Keeps the stream busy a while, so the batch behind it is queued, not
// done in the call.
__global__ void busy(unsigned *p, int rounds)
{
    unsigned x = threadIdx.x;
    for (int i = 0; i < rounds; i++)
        x = x * 1664525u + 1013904223u;
    p[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    const int n = 300;
    size_t sizes[n], offs[n], total = 0;
    for (int i = 0; i < n; i++) {
        sizes[i] = i % 50 == 7 ? 0 : (size_t)(seed_next32() % 9000) + 1;   // a few empty copies too
        offs[i] = total;
        total += (sizes[i] + 255) / 256 * 256;
    }
    unsigned char *pinned, *pageable = (unsigned char *)malloc(total), *back, *dev, *dev2;
    CHECK(cudaMallocHost(&pinned, total));
    CHECK(cudaMallocHost(&back, total));
    CHECK(cudaMalloc(&dev, total));
    CHECK(cudaMalloc(&dev2, total));
    for (size_t i = 0; i < total; i++)
        pinned[i] = pageable[i] = (unsigned char)seed_next32();
    unsigned char *want = (unsigned char *)malloc(total);
    memcpy(want, pinned, total);
    memset(back, 0, total);
    cudaStream_t st;
    CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    // In: 100 from pinned memory in stream order, 100 from pinned memory
    // read during the call, 100 from pageable memory in any order.
    void *dsts[n], *srcs[n];
    size_t szs[n];
    for (int i = 0; i < n; i++) {
        dsts[i] = dev + offs[i];
        srcs[i] = (i < 200 ? pinned : pageable) + offs[i];
        szs[i] = sizes[i];
    }
    cudaMemcpyAttributes attrs[3];
    memset(attrs, 0, sizeof attrs);
    attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
    attrs[2].srcAccessOrder = cudaMemcpySrcAccessOrderAny;
    size_t idxs[3] = { 0, 100, 200 };
    busy<<<4, 64, 0, st>>>((unsigned *)dev2, 20000);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyBatchAsync(dsts, srcs, szs, n, attrs, idxs, 3, st));
    // Read during the call: already taken.
    memset(pinned + offs[100], 0xa5, offs[200] - offs[100]);
    CHECK(cudaStreamSynchronize(st));

    // Device to device into dev2, then back to the host, in one batch each
    // direction mixed: half straight back from dev, half via dev2.
    void *d2[n], *s2[n];
    for (int i = 0; i < n; i++) {
        d2[i] = dev2 + offs[i];
        s2[i] = dev + offs[i];
    }
    size_t one[1] = { 0 };
    CHECK(cudaMemcpyBatchAsync(d2, s2, szs, n, attrs, one, 1, st));
    void *d3[n], *s3[n];
    for (int i = 0; i < n; i++) {
        d3[i] = back + offs[i];
        s3[i] = (i % 2 ? dev2 : dev) + offs[i];
    }
    CHECK(cudaMemcpyBatchAsync(d3, s3, szs, n, attrs, one, 1, st));
    CHECK(cudaStreamSynchronize(st));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizes[i]; k++)
            if (back[offs[i] + k] != want[offs[i] + k] && wrong++ < 5)
                printf("copy %d byte %zu = %#x, expected %#x\n", i, k, back[offs[i] + k], want[offs[i] + k]);

    // Refusals.
    size_t bad_start[2] = { 1, 100 }, bad_order[2] = { 0, 0 };
    cudaMemcpyAttributes invalid = attrs[0];
    invalid.srcAccessOrder = cudaMemcpySrcAccessOrderInvalid;
    void *null_first[2] = { nullptr, dev };
    void *null_srcs[2] = { back, back };
    size_t null_sizes[2] = { 16, 16 };
    struct { const char *what; cudaError_t got; } refused[] = {
        { "a NULL destination", cudaMemcpyBatchAsync(null_first, null_srcs, null_sizes, 2, attrs, one, 1, st) },
        { "no copies", cudaMemcpyBatchAsync(dsts, srcs, szs, 0, attrs, idxs, 1, st) },
        { "first index 1", cudaMemcpyBatchAsync(dsts, srcs, szs, n, attrs, bad_start, 2, st) },
        { "indices not rising", cudaMemcpyBatchAsync(dsts, srcs, szs, n, attrs, bad_order, 2, st) },
        { "invalid source order", cudaMemcpyBatchAsync(dsts, srcs, szs, n, &invalid, one, 1, st) },
        { "the legacy NULL stream", cudaMemcpyBatchAsync(dsts, srcs, szs, n, attrs, one, 1, cudaStreamLegacy) },
    };
    for (auto &r : refused)
        if (r.got != cudaErrorInvalidValue && wrong++ < 10)
            printf("%s: %s, expected cudaErrorInvalidValue\n", r.what, cudaGetErrorName(r.got));
    cudaGetLastError();
    CHECK(cudaStreamSynchronize(st));

    CHECK(cudaStreamDestroy(st));
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFreeHost(back));
    CHECK(cudaFree(dev));
    CHECK(cudaFree(dev2));
    free(pageable);
    free(want);
    if (wrong) {
        printf("memcpybatch: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("memcpybatch: ok, %d copies of %zu bytes each way\n", n, total);
    return 0;
}
