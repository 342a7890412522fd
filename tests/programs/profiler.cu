// Profiler control around work, as benchmarks and samples call it
// unconditionally: cudaProfilerStart/Stop (and the driver's cuProfilerStart/
// Stop) succeed with no profiler attached, and the work between them runs;
// the result is checked against the CPU.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

__global__ void axpy(const float *x, float *y, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

#define CHECK_CU(call)                                                                \
    do {                                                                              \
        CUresult e_ = (call);                                                         \
        if (e_ != CUDA_SUCCESS) {                                                     \
            printf("%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)e_);            \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main()
{
    const int n = 5003;
    size_t bytes = n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes), *r = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 17);
        y[i] = (float)i;
    }
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, bytes));
    CHECK(cudaMalloc(&dy, bytes));
    CHECK(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaProfilerStart());
    axpy<<<16, 128>>>(dx, dy, 2.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaProfilerStop());
    // The driver's own calls, on the runtime's current context.
    CHECK_CU(cuProfilerStart());
    axpy<<<16, 128>>>(dx, dy, 3.0f, n);
    CHECK(cudaGetLastError());
    CHECK_CU(cuProfilerStop());
    CHECK(cudaMemcpy(r, dy, bytes, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        float want = 3.0f * x[i] + (2.0f * x[i] + y[i]);
        if (r[i] != want && wrong++ < 5)
            printf("y[%d] = %g, expected %g\n", i, r[i], want);
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    free(x);
    free(y);
    free(r);
    if (wrong) {
        printf("profiler: %d wrong\n", wrong);
        return 1;
    }
    printf("profiler: ok\n");
    return 0;
}
