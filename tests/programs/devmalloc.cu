// Device-side malloc, free, new and delete, checked on the CPU:
//  - the heap's default size is CUDA's 8 MiB, and a new size set before any
//    kernel uses malloc is what cudaDeviceGetLimit reads back;
//  - each thread mallocs a block of its own size, fills it, sums it back and
//    frees it; the sums match the CPU's;
//  - blocks from new[] live across kernels: one kernel allocates and writes,
//    a later one reads and deletes;
//  - a heap of 1 MiB: a malloc of 2 MiB gives NULL, as do mallocs past what
//    is left; once everything is freed, the same big-as-can-be mallocs succeed
//    again (free returns the memory);
//  - the heap's size is fixed once a kernel used malloc.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("devmalloc: %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void sum_own_block(unsigned long long *sums, int *nulls, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int len = 1 + i % 37;
    unsigned *p = (unsigned *)malloc(len * sizeof(unsigned));
    if (!p) {
        atomicAdd(nulls, 1);
        return;
    }
    for (int k = 0; k < len; k++)
        p[k] = (unsigned)(i * 131 + k * 7);
    unsigned long long s = 0;
    for (int k = 0; k < len; k++)
        s += p[k];
    sums[i] = s;
    free(p);
}

__global__ void make_arrays(int **slots, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int *a = new int[i % 5 + 1];
    if (a)
        for (int k = 0; k <= i % 5; k++)
            a[k] = i + k;
    slots[i] = a;
}

__global__ void read_and_delete(int **slots, long long *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    long long s = -1;
    if (slots[i]) {
        s = 0;
        for (int k = 0; k <= i % 5; k++)
            s += slots[i][k];
        delete[] slots[i];
    }
    out[i] = s;
}

// One thread takes `count` blocks of `size` bytes, recording which succeeded,
// then frees them all when told.
__global__ void take(void **ptrs, int count, size_t size)
{
    for (int k = 0; k < count; k++)
        ptrs[k] = malloc(size);
}

__global__ void give_back(void **ptrs, int count)
{
    for (int k = 0; k < count; k++)
        free(ptrs[k]);
}

int main()
{
    size_t heap = 0;
    CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    EXPECT(heap == 8u << 20, "default heap %zu bytes, CUDA's is 8 MiB", heap);
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1u << 20));
    CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    EXPECT(heap == 1u << 20, "heap limit read back %zu", heap);

    const int n = 3000;
    unsigned long long *sums;
    int *nulls;
    CHECK(cudaMalloc(&sums, n * sizeof *sums));
    CHECK(cudaMalloc(&nulls, sizeof *nulls));
    CHECK(cudaMemset(nulls, 0, sizeof *nulls));
    sum_own_block<<<(n + 127) / 128, 128>>>(sums, nulls, n);
    CHECK(cudaGetLastError());
    unsigned long long *hs = (unsigned long long *)malloc(n * sizeof *hs);
    int hnulls = -1;
    CHECK(cudaMemcpy(hs, sums, n * sizeof *hs, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&hnulls, nulls, sizeof hnulls, cudaMemcpyDeviceToHost));
    EXPECT(hnulls == 0, "%d mallocs of small blocks failed", hnulls);
    for (int i = 0; i < n; i++) {
        unsigned long long want = 0;
        for (int k = 0; k < 1 + i % 37; k++)
            want += (unsigned)(i * 131 + k * 7);
        EXPECT(hs[i] == want, "thread %d summed %llu, want %llu", i, hs[i], want);
    }

    int **slots;
    long long *out;
    CHECK(cudaMalloc(&slots, n * sizeof *slots));
    CHECK(cudaMalloc(&out, n * sizeof *out));
    make_arrays<<<(n + 255) / 256, 256>>>(slots, n);
    read_and_delete<<<(n + 255) / 256, 256>>>(slots, out, n);
    long long *ho = (long long *)malloc(n * sizeof *ho);
    CHECK(cudaMemcpy(ho, out, n * sizeof *ho, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        long long want = 0;
        for (int k = 0; k <= i % 5; k++)
            want += i + k;
        EXPECT(ho[i] == want, "new[] block of thread %d held %lld, want %lld", i, ho[i], want);
    }

    // Exhaustion: 2 MiB never fits a 1 MiB heap; 64 KiB blocks run out
    // before 32 of them; after freeing, as many fit again.
    const int count = 32;
    void **ptrs;
    CHECK(cudaMalloc(&ptrs, count * sizeof *ptrs));
    void *hp[count];
    take<<<1, 1>>>(ptrs, 1, 2u << 20);
    CHECK(cudaMemcpy(hp, ptrs, sizeof hp[0], cudaMemcpyDeviceToHost));
    EXPECT(hp[0] == NULL, "malloc of 2 MiB from a 1 MiB heap gave %p", hp[0]);
    int got[2];
    for (int round = 0; round < 2; round++) {
        take<<<1, 1>>>(ptrs, count, 64u << 10);
        CHECK(cudaMemcpy(hp, ptrs, sizeof hp, cudaMemcpyDeviceToHost));
        got[round] = 0;
        while (got[round] < count && hp[got[round]])
            got[round]++;
        for (int k = got[round]; k < count; k++)
            EXPECT(hp[k] == NULL, "malloc %d succeeded after %d failed", k, got[round]);
        give_back<<<1, 1>>>(ptrs, count);
        CHECK(cudaGetLastError());
    }
    EXPECT(got[0] > 0 && got[0] < count, "%d of %d 64 KiB blocks from a 1 MiB heap", got[0], count);
    EXPECT(got[1] == got[0], "after freeing, %d blocks fit, before %d", got[1], got[0]);
    CHECK(cudaDeviceSynchronize());

    EXPECT(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 4u << 20) != cudaSuccess,
           "the heap's size changed after kernels used malloc");
    cudaGetLastError();
    free(hs);
    free(ho);
    printf("devmalloc: ok\n");
    return 0;
}
