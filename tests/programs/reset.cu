// cudaDeviceReset between rounds of work: the runtime tears down its state
// for the primary context (context-local storage, modules) and builds it
// again on the next call. Each round's results are checked on the CPU.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void twice(int *p, int round)
{
    p[blockIdx.x * blockDim.x + threadIdx.x] = (blockIdx.x * blockDim.x + threadIdx.x) * 2 + round;
}

static const char *round_trip(int round)
{
    const int n = 256;
    int *d = nullptr, h[n];
    if (cudaMalloc(&d, sizeof h) != cudaSuccess)
        return "cudaMalloc";
    twice<<<n / 64, 64>>>(d, round);
    if (cudaGetLastError() != cudaSuccess)
        return "launch";
    if (cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess)
        return "cudaMemcpy";
    for (int i = 0; i < n; i++)
        if (h[i] != i * 2 + round)
            return "wrong result";
    if (cudaFree(d) != cudaSuccess)
        return "cudaFree";
    return nullptr;
}

int main()
{
    for (int round = 0; round < 3; round++) {
        const char *failed = round_trip(round);
        if (failed) {
            printf("round %d: %s: %s\n", round, failed, cudaGetErrorName(cudaGetLastError()));
            return 1;
        }
        cudaError_t e = cudaDeviceReset();
        if (e != cudaSuccess) {
            printf("round %d: cudaDeviceReset: %s\n", round, cudaGetErrorName(e));
            return 1;
        }
    }
    printf("reset: ok 3 rounds\n");
    return 0;
}
