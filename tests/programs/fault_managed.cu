// Managed memory when things go wrong (tests/test_faults.c):
//   fault_managed        a launch writes managed memory, then a kernel writes
//                        out of bounds and the job fails; the CPU's touches
//                        after the failed synchronisation neither hang nor
//                        crash (the CPU keeps the host copy as it was);
//                        exit 0 with "fault_managed: ok" when they return.
//   fault_managed segv   a write through NULL after managed memory is in use
//                        still kills the program with SIGSEGV: the shim's
//                        handler passes faults that are not its own on.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cuda_runtime.h>

extern "C" __global__ void fault_fill(int *p, int n, int v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" __global__ void fault_oob_write(int *p, long long far)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        p[far] = 1;
}

int main(int argc, char **argv)
{
    const int n = 1 << 16;
    int *x;
    if (cudaMallocManaged(&x, n * sizeof(int)) != cudaSuccess) {
        printf("fault_managed: cudaMallocManaged failed\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        x[i] = i;
    fault_fill<<<8, 128>>>(x, n, 7);
    if (cudaDeviceSynchronize() != cudaSuccess || x[0] != 7 || x[n - 1] != 7) {
        printf("fault_managed: the first launch's results did not come back\n");
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "segv") == 0) {
        printf("fault_managed: writing through NULL\n");
        fflush(stdout);
        volatile int *null = (volatile int *)(uintptr_t)(x[0] == 7 ? 0 : 1);
        *null = 1;
        printf("fault_managed: the write through NULL returned\n");
        return 1;
    }
    fault_fill<<<8, 128>>>(x, n, 9);
    // 64 GiB past the allocation: nothing is mapped there.
    fault_oob_write<<<1, 32>>>(x, 1LL << 34);
    cudaError_t e = cudaDeviceSynchronize();
    printf("fault_managed: synchronize after the bad kernel: %s\n", cudaGetErrorName(e));
    fflush(stdout);
    long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    x[5] = 5;
    printf("fault_managed: the CPU read and wrote managed memory after the failure (sum %lld)\n", sum);
    printf("fault_managed: ok\n");
    return 0;
}
