// CUB's DeviceRadixSort::SortKeys with the usual two-phase call (ask for the
// temporary storage size, allocate it, sort), checked against std::sort on
// the CPU (seed printed; SEED=N repeats a run).
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "seed.h"

#define CHECK(call)                                                                  \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            printf("cubsort: %s: %s\n", #call, cudaGetErrorString(e_));              \
            return 1;                                                                \
        }                                                                            \
    } while (0)

int main()
{
    unsigned seed = run_seed("cubsort");
    srand(seed);

    const int n = 1 << 18;
    std::vector<unsigned> h(n);
    for (auto &x : h) x = ((unsigned)rand() << 8) ^ (unsigned)rand();

    unsigned *in, *out;
    CHECK(cudaMalloc(&in, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&out, n * sizeof(unsigned)));
    CHECK(cudaMemcpy(in, h.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));

    void *temp = NULL;
    size_t temp_bytes = 0;
    CHECK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, in, out, n));
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, in, out, n));
    CHECK(cudaDeviceSynchronize());

    std::vector<unsigned> got(n);
    CHECK(cudaMemcpy(got.data(), out, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    std::vector<unsigned> want = h;
    std::sort(want.begin(), want.end());
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            printf("cubsort: [%d] = %u, want %u\n", i, got[i], want[i]);
            return 1;
        }
    CHECK(cudaFree(temp));
    CHECK(cudaFree(out));
    CHECK(cudaFree(in));
    printf("cubsort: ok\n");
    return 0;
}
