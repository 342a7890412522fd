// Module globals and on-chip features through the runtime: __constant__
// and __device__ variables (cudaMemcpyToSymbol/FromSymbol, cudaGetSymbol-
// Address), a shared-memory block reduction with __syncthreads, global
// atomics, cudaMemset, events and cudaEventElapsedTime; checked on the CPU.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__constant__ float coeff[4];
__device__ unsigned long long total;
__device__ int counter;

__global__ void poly_sum(const float *x, float *y, int n)
{
    __shared__ float part[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = 0.0f;
    if (i < n) {
        float t = x[i];
        v = ((coeff[3] * t + coeff[2]) * t + coeff[1]) * t + coeff[0];
        y[i] = v;
    }
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&total, (unsigned long long)part[0]);
        atomicAdd(&counter, 1);
    }
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main()
{
    const int n = 4096, block = 128, blocks = n / block;
    const float c[4] = { 1.0f, 2.0f, 0.5f, 0.25f };
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 8);   // small integers: every sum is exact in float
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMemset(dy, 0xff, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpyToSymbol(coeff, c, sizeof c));
    unsigned long long zero = 0;
    CHECK(cudaMemcpyToSymbol(total, &zero, sizeof zero));
    int *counter_addr = nullptr;
    CHECK(cudaGetSymbolAddress((void **)&counter_addr, counter));
    CHECK(cudaMemset(counter_addr, 0, sizeof(int)));

    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start));
    poly_sum<<<blocks, block>>>(dx, dy, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop));

    CHECK(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    unsigned long long got_total = 0;
    int got_counter = 0;
    CHECK(cudaMemcpyFromSymbol(&got_total, total, sizeof got_total));
    CHECK(cudaMemcpy(&got_counter, counter_addr, sizeof(int), cudaMemcpyDeviceToHost));

    int wrong = 0;
    unsigned long long want_total = 0;
    for (int b = 0; b < blocks; b++) {
        float block_sum = 0.0f;
        for (int i = b * block; i < (b + 1) * block; i++) {
            float t = x[i];
            float v = ((c[3] * t + c[2]) * t + c[1]) * t + c[0];
            block_sum += v;
            if (y[i] != v && wrong++ < 5)
                printf("y[%d] = %g, expected %g\n", i, y[i], v);
        }
        want_total += (unsigned long long)block_sum;
    }
    if (got_total != want_total) {
        printf("total %llu, expected %llu\n", got_total, want_total);
        wrong++;
    }
    if (got_counter != blocks) {
        printf("counter %d, expected %d\n", got_counter, blocks);
        wrong++;
    }
    if (!(ms >= 0.0f)) {
        printf("elapsed %g ms\n", ms);
        wrong++;
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    if (wrong) {
        printf("symbols: %d wrong\n", wrong);
        return 1;
    }
    printf("symbols: ok %d\n", n);
    return 0;
}
