// A job in the middle of its work, for the fault tests: a loop of async
// copies up, a launch, an async copy down and a sync, checked against the
// CPU, printing "fault_stream: step N" after each of the first ten steps and
// every hundredth. Any CUDA error ends it with exit 1 and the error's name;
// the fault tests inject faults while it runs and time how soon it ends.
//   fault_stream [STEPS [FLOATS [PAUSE_MS]]]   (defaults: 1000000, 65536, 0)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <unistd.h>

extern "C" __global__ void fault_step(const float *in, float *out, int n, float k)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * 2.0f + k;
}

static int failed(cudaError_t e, const char *what, long step)
{
    printf("fault_stream: %s at step %ld: %s\n", what, step, cudaGetErrorName(e));
    fflush(stdout);
    return 1;
}

#define CHECK(call)                                  \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess)                       \
            return failed(e_, #call, step);          \
    } while (0)

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    int n = argc > 2 ? atoi(argv[2]) : 65536;
    int pause_ms = argc > 3 ? atoi(argv[3]) : 0;
    long step = -1;
    size_t bytes = (size_t)n * sizeof(float);
    float *h_in, *h_out, *d_in, *d_out;
    CHECK(cudaMallocHost(&h_in, bytes));
    CHECK(cudaMallocHost(&h_out, bytes));
    CHECK(cudaMalloc(&d_in, bytes));
    CHECK(cudaMalloc(&d_out, bytes));
    cudaStream_t s;
    cudaEvent_t ev;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaEventCreate(&ev));
    for (int i = 0; i < n; i++)
        h_in[i] = (float)(i % 1000);
    printf("fault_stream: started\n");
    fflush(stdout);
    for (step = 0; step < steps; step++) {
        CHECK(cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, s));
        fault_step<<<4, 128, 0, s>>>(d_in, d_out, n, (float)(step % 7));
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(ev, s));
        CHECK(cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaEventSynchronize(ev));
        for (int i = 0; i < n; i += 997)
            if (h_out[i] != h_in[i] * 2.0f + (float)(step % 7)) {
                printf("fault_stream: wrong result at step %ld: out[%d] = %g\n", step, i, h_out[i]);
                return 1;
            }
        if (step < 10 || step % 100 == 0) {
            printf("fault_stream: step %ld\n", step);
            fflush(stdout);
        }
        if (pause_ms)
            usleep(pause_ms * 1000);
    }
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_out));
    CHECK(cudaFreeHost(h_in));
    CHECK(cudaFreeHost(h_out));
    printf("fault_stream: ok %ld steps\n", steps);
    return 0;
}
