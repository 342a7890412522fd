// A runtime program one of whose kernels holds an instruction softgpu does
// not run (a debugger breakpoint, on a path a GPU never takes): the other
// kernels of its module run before and after; launching that one fails
// with cudaErrorNotSupported on softgpu (the context goes on), and runs on
// a GPU. softgpu's sentence naming kernel, instruction and PTX line reaches
// stderr, through an agent in rig's line: test_shim_face and test_remote
// check it.
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            printf("lazyrefuse: %s: %s\n", #call, cudaGetErrorName(e_));                  \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

__global__ void square(int *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = v[i] * v[i];
}

__global__ void with_breakpoint(int *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (v == nullptr)
        asm volatile("brkpt;");
    if (i < n)
        v[i] += 1;
}

static int run_square(int *d, int *h, int n, int round)
{
    for (int i = 0; i < n; i++)
        h[i] = i - n / 2 + round;
    CHECK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
    square<<<(n + 127) / 128, 128>>>(d, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int x = i - n / 2 + round;
        if (h[i] != x * x) {
            printf("lazyrefuse: round %d: element %d is %d, expected %d\n", round, i, h[i], x * x);
            return 1;
        }
    }
    return 0;
}

int main()
{
    const int n = 5000;
    static int h[n];
    int *d;
    CHECK(cudaMalloc(&d, n * sizeof(int)));
    if (run_square(d, h, n, 0))
        return 1;
    with_breakpoint<<<(n + 127) / 128, 128>>>(d, n);
    cudaError_t e = cudaGetLastError();
    if (e == cudaErrorNotSupported) {
        printf("lazyrefuse: the kernel with a breakpoint was refused alone\n");
    } else if (e == cudaSuccess) {
        CHECK(cudaDeviceSynchronize());
        printf("lazyrefuse: the kernel with a breakpoint ran\n");
    } else {
        printf("lazyrefuse: launching the kernel with a breakpoint: %s\n", cudaGetErrorName(e));
        return 1;
    }
    // The refusal is not sticky: the module's other kernel still runs.
    if (run_square(d, h, n, 1))
        return 1;
    CHECK(cudaFree(d));
    printf("lazyrefuse: ok\n");
    return 0;
}
