// Virtual memory shared by two devices, the way CUDA documents it (and
// PyTorch's expandable segments build on): physical memory created on
// device 0 in pieces, mapped end to end into one reserved range, made
// accessible to both devices with one cuMemSetAccess; then a kernel on each
// device writes its half, each device's context reads the whole back, and
// the results are checked against the CPU. Needs two devices.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            printf("vmmtwo: %s: %s (%s)\n", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

#define DRV(call)                                                        \
    do {                                                                 \
        CUresult r_ = (call);                                            \
        if (r_ != CUDA_SUCCESS) {                                        \
            const char *n_ = "?";                                        \
            cuGetErrorName(r_, &n_);                                     \
            printf("vmmtwo: %s: %s\n", #call, n_);                       \
            return 1;                                                    \
        }                                                                \
    } while (0)

// Element i of [first, first + n) becomes 3 * its value + i + dev.
__global__ void scale(int *v, int first, int n, int dev)
{
    int i = first + blockIdx.x * blockDim.x + threadIdx.x;
    if (i < first + n)
        v[i] = 3 * v[i] + i + dev;
}

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        printf("vmmtwo: needs two devices, found %d\n", count);
        return 1;
    }
    // The runtime's primary contexts on both devices.
    CHECK(cudaSetDevice(1));
    CHECK(cudaFree(0));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));

    const int n = 100000;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    DRV(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    // The range grows piece by piece, as an expandable segment does.
    const int pieces = 4;
    size_t piece = (n * sizeof(int) / pieces + gran - 1) / gran * gran;
    size_t size = piece * pieces;
    CUdeviceptr base = 0;
    DRV(cuMemAddressReserve(&base, size, 0, 0, 0));
    for (int k = 0; k < pieces; k++) {
        CUmemGenericAllocationHandle h;
        DRV(cuMemCreate(&h, piece, &prop, 0));
        DRV(cuMemMap(base + k * piece, piece, 0, h, 0));
        // The mapping keeps the memory: the handle may go at once.
        DRV(cuMemRelease(h));
    }
    CUmemAccessDesc access[2] = {};
    for (int d = 0; d < 2; d++) {
        access[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access[d].location.id = d;
        access[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    DRV(cuMemSetAccess(base, size, access, 2));
    for (int d = 0; d < 2; d++) {
        unsigned long long flags = 0;
        DRV(cuMemGetAccess(&flags, &access[d].location, base));
        if (flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
            printf("vmmtwo: device %d's access reads back as %llu\n", d, flags);
            return 1;
        }
    }

    std::vector<int> host(n), want(n), got(n);
    for (int i = 0; i < n; i++) {
        host[i] = (i * 7919) % 1000 - 500;
        want[i] = 3 * host[i] + i + (i < n / 2 ? 0 : 1);
    }
    int *v = (int *)(uintptr_t)base;
    CHECK(cudaMemcpy(v, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));

    // Each device writes its half.
    const int half[2][2] = { { 0, n / 2 }, { n / 2, n - n / 2 } };
    for (int d = 0; d < 2; d++) {
        CHECK(cudaSetDevice(d));
        scale<<<(half[d][1] + 255) / 256, 256>>>(v, half[d][0], half[d][1], d);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
    }

    // Either device's context sees all of it.
    for (int d = 1; d >= 0; d--) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaMemcpy(got.data(), v, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            if (got[i] != want[i]) {
                printf("vmmtwo: read on device %d: element %d is %d, expected %d\n", d, i, got[i], want[i]);
                return 1;
            }
    }

    CHECK(cudaSetDevice(0));
    for (int k = 0; k < pieces; k++)
        DRV(cuMemUnmap(base + k * piece, piece));
    DRV(cuMemAddressFree(base, size));
    printf("vmmtwo: ok %d elements in %d pieces, two devices\n", n, pieces);
    return 0;
}
