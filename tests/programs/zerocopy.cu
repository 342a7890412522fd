// Mapped (zero-copy) host memory through the runtime, checked on the CPU
// against random inputs (seed printed; SEED=N repeats a run):
//  - the device can map host memory; cudaHostAlloc(cudaHostAllocMapped)
//    buffers reached by kernels through cudaHostGetDevicePointer, the
//    kernel reading inputs the CPU wrote and writing results the CPU reads
//    after cudaDeviceSynchronize (or a stream's or an event's), several
//    rounds with the CPU writing new inputs between launches;
//  - a sizes that is not a multiple of a page, and one of several MiB;
//  - cudaHostGetFlags, cudaPointerGetAttributes of mapped memory;
//  - cudaHostRegister(cudaHostRegisterMapped) of malloc'd memory, where the
//    device serves it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("zerocopy: %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void mix(const int *in, int *out, int n, int k)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * 7 - k + i;
}

__global__ void count_odd(const int *in, int n, int *odd)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (in[i] & 1)
            atomicAdd(odd, 1);
}

int main()
{
    unsigned seed = run_seed("zerocopy");
    srand(seed);
    int dev = 0, can_map = 0;
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    CHECK(cudaSetDevice(dev));
    CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, dev));
    EXPECT(can_map == 1, "can map host memory: %d", can_map);

    const int sizes[] = { 1001, 3 << 20 };   // ints: under a page's multiple, and 12 MiB
    for (int si = 0; si < 2; si++) {
        int n = sizes[si];
        int *in, *out, *d_in, *d_out, *odd, *d_odd;
        CHECK(cudaHostAlloc(&in, n * sizeof(int), cudaHostAllocMapped));
        CHECK(cudaHostAlloc(&out, n * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
        CHECK(cudaHostAlloc(&odd, sizeof(int), cudaHostAllocMapped));
        CHECK(cudaHostGetDevicePointer(&d_in, in, 0));
        CHECK(cudaHostGetDevicePointer(&d_out, out, 0));
        CHECK(cudaHostGetDevicePointer(&d_odd, odd, 0));
        unsigned flags = 0;
        CHECK(cudaHostGetFlags(&flags, out));
        EXPECT(flags & cudaHostAllocMapped, "flags %#x", flags);
        cudaPointerAttributes pa;
        CHECK(cudaPointerGetAttributes(&pa, in));
        EXPECT(pa.type == cudaMemoryTypeHost, "pointer type %d", (int)pa.type);
        EXPECT(pa.devicePointer == d_in && pa.hostPointer == in, "pointers %p %p", pa.devicePointer, pa.hostPointer);

        for (int i = 0; i < n; i++)
            in[i] = rand() % 100000;
        cudaStream_t s;
        cudaEvent_t done;
        CHECK(cudaStreamCreate(&s));
        CHECK(cudaEventCreate(&done));
        for (int round = 0; round < 4; round++) {
            int k = rand() % 1000;
            *odd = 0;
            mix<<<32, 256, 0, s>>>(d_in, d_out, n, k);
            count_odd<<<32, 256, 0, s>>>(d_in, n, d_odd);
            CHECK(cudaGetLastError());
            // Three ways to wait, one each round.
            if (round % 3 == 0)
                CHECK(cudaDeviceSynchronize());
            else if (round % 3 == 1)
                CHECK(cudaStreamSynchronize(s));
            else {
                CHECK(cudaEventRecord(done, s));
                CHECK(cudaEventSynchronize(done));
            }
            int want_odd = 0;
            for (int i = 0; i < n; i++) {
                EXPECT(out[i] == in[i] * 7 - k + i, "size %d round %d out[%d] = %d, not %d", n, round, i, out[i],
                       in[i] * 7 - k + i);
                want_odd += in[i] & 1;
            }
            EXPECT(*odd == want_odd, "size %d round %d: %d odd, not %d", n, round, *odd, want_odd);
            // New inputs: every one on even rounds, a few on odd ones.
            if (round % 2 == 0)
                for (int i = 0; i < n; i++)
                    in[i] = rand() % 100000;
            else
                for (int j = 0; j < 10; j++)
                    in[rand() % n] = rand() % 100000;
        }
        CHECK(cudaEventDestroy(done));
        CHECK(cudaStreamDestroy(s));
        CHECK(cudaFreeHost(in));
        CHECK(cudaFreeHost(out));
        CHECK(cudaFreeHost(odd));
    }

    // Registered memory: pinned and mapped where the device serves it.
    const int rn = 5000;
    int *buf = (int *)malloc(rn * sizeof(int)), *res = (int *)malloc(rn * sizeof(int));
    for (int i = 0; i < rn; i++)
        buf[i] = rand() % 1000;
    cudaError_t e = cudaHostRegister(buf, rn * sizeof(int), cudaHostRegisterMapped);
    if (e == cudaSuccess) {
        int *d_buf = NULL;
        e = cudaHostGetDevicePointer(&d_buf, buf, 0);
        if (e == cudaSuccess) {
            int *d_res;
            CHECK(cudaMalloc(&d_res, rn * sizeof(int)));
            for (int round = 0; round < 2; round++) {
                mix<<<8, 128>>>(d_buf, d_res, rn, round);
                CHECK(cudaMemcpy(res, d_res, rn * sizeof(int), cudaMemcpyDeviceToHost));
                for (int i = 0; i < rn; i++)
                    EXPECT(res[i] == buf[i] * 7 - round + i, "registered round %d res[%d] = %d", round, i, res[i]);
                buf[rand() % rn] = 12345;
            }
            CHECK(cudaFree(d_res));
            printf("zerocopy: registered memory mapped\n");
        } else {
            // A device that pins but cannot map it says so, as rig's proxies do.
            EXPECT(e == cudaErrorNotSupported, "cudaHostGetDevicePointer of registered memory: %s",
                   cudaGetErrorName(e));
            printf("zerocopy: registered memory not mapped: %s\n", cudaGetErrorName(e));
            cudaGetLastError();
        }
        CHECK(cudaHostUnregister(buf));
    } else {
        printf("zerocopy: cudaHostRegister: %s\n", cudaGetErrorName(e));
        exit(1);
    }
    free(buf);
    free(res);
    printf("zerocopy: ok\n");
    return 0;
}
