// A kernel that writes out of bounds, in the middle of a job's stream of
// launches and copies: the job must fail with CUDA_ERROR_ILLEGAL_ADDRESS
// naming the kernel. Exit 1 with the error's name when it does.
//   fault_oob [GOOD_STEPS]   (default 5)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

extern "C" __global__ void fault_fill(float *p, int n, float v)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" __global__ void fault_oob_write(float *p, long long far)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        p[far] = 1.0f;
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("fault_oob: %s: %s\n", #call, cudaGetErrorName(e_));                \
            fflush(stdout);                                                            \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    int good = argc > 1 ? atoi(argv[1]) : 5;
    const int n = 4096;
    float *d, h[n];
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    for (int step = 0; step < good; step++) {
        fault_fill<<<4, 128>>>(d, n, (float)step);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
        if (h[n - 1] != (float)step) {
            printf("fault_oob: wrong result at step %d\n", step);
            return 1;
        }
    }
    printf("fault_oob: launching the out-of-bounds kernel\n");
    fflush(stdout);
    // 64 GiB past a 16 KiB allocation: nothing is mapped there.
    fault_oob_write<<<1, 32>>>(d, 1LL << 34);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("fault_oob: the out-of-bounds write was not reported\n");
    return 2;
}
