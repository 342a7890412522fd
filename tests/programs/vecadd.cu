// Vector add through the runtime: <<<>>> launch, copies both ways, a stream
// and an event; the result is checked against the CPU.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vecadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

__global__ void scale(float *x, float s, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] *= s;
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
    const int n = 10007;
    size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        a[i] = (float)i * 0.5f;
        b[i] = (float)(n - i);
    }
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, bytes));
    CHECK(cudaMalloc(&db, bytes));
    CHECK(cudaMalloc(&dc, bytes));
    CHECK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    vecadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (c[i] != a[i] + b[i] && wrong++ < 5)
            printf("c[%d] = %g, expected %g\n", i, c[i], a[i] + b[i]);

    // Again on a stream, asynchronously, with an event.
    cudaStream_t s;
    cudaEvent_t ev;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&ev));
    scale<<<8, 128, 0, s>>>(dc, 2.0f, n);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev, s));
    CHECK(cudaMemcpyAsync(c, dc, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaEventSynchronize(ev));
    for (int i = 0; i < n; i++)
        if (c[i] != 2.0f * (a[i] + b[i]) && wrong++ < 10)
            printf("scaled c[%d] = %g, expected %g\n", i, c[i], 2.0f * (a[i] + b[i]));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    free(a);
    free(b);
    free(c);
    if (wrong) {
        printf("vecadd: %d wrong\n", wrong);
        return 1;
    }
    printf("vecadd: ok %d\n", n);
    return 0;
}
