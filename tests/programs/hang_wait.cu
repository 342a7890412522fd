// A stream held by cuStreamWaitValue32 (driver API, called from a runtime
// program) on a word in device memory:
//   hang_wait           the word is released by cuStreamWriteValue32 on a
//                       second stream after the wait is queued; the sync
//                       returns and the stream's later copy is checked:
//                       prints "hang_wait: ok"
//   hang_wait forever   nothing ever writes the word: prints
//                       "hang_wait: waiting" and synchronises forever (the
//                       service tests kill it there); if the sync ever
//                       returns it says so and exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void fill(unsigned *x, int n, unsigned k)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = (unsigned)i * 3u + k;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)
#define CHECK_DRV(call)                                                               \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            const char *name_ = "?";                                                  \
            cuGetErrorName(r_, &name_);                                               \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, name_);              \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main(int argc, char **argv)
{
    bool forever = argc > 1 && strcmp(argv[1], "forever") == 0;
    const int n = 4096;
    unsigned *word, *dx, *hx;
    CHECK(cudaMalloc(&word, sizeof(unsigned)));
    CHECK(cudaMalloc(&dx, n * sizeof(unsigned)));
    CHECK(cudaMallocHost(&hx, n * sizeof(unsigned)));
    CHECK(cudaMemset(word, 0, sizeof(unsigned)));
    CHECK(cudaMemset(dx, 0, n * sizeof(unsigned)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t held, other;
    CHECK(cudaStreamCreateWithFlags(&held, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    // The held stream waits for the word to be 1, then fills and copies.
    CHECK_DRV(cuStreamWaitValue32((CUstream)held, (CUdeviceptr)word, 1, CU_STREAM_WAIT_VALUE_EQ));
    fill<<<4, 128, 0, held>>>(dx, n, 7u);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(hx, dx, n * sizeof(unsigned), cudaMemcpyDeviceToHost, held));
    cudaError_t q = cudaStreamQuery(held);
    if (q != cudaErrorNotReady) {
        printf("hang_wait: the held stream reads %s before the word is written\n", cudaGetErrorName(q));
        return 1;
    }
    if (forever) {
        printf("hang_wait: waiting\n");
        fflush(stdout);
        cudaError_t e = cudaStreamSynchronize(held);
        printf("hang_wait: the wait that nothing satisfies returned %s\n", cudaGetErrorName(e));
        return 1;
    }
    CHECK_DRV(cuStreamWriteValue32((CUstream)other, (CUdeviceptr)word, 1, 0));
    CHECK(cudaStreamSynchronize(held));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (hx[i] != (unsigned)i * 3u + 7u && wrong++ < 5)
            printf("x[%d] = %u, expected %u\n", i, hx[i], (unsigned)i * 3u + 7u);
    CHECK(cudaStreamDestroy(held));
    CHECK(cudaStreamDestroy(other));
    CHECK(cudaFree(word));
    CHECK(cudaFree(dx));
    CHECK(cudaFreeHost(hx));
    if (wrong) {
        printf("hang_wait: %d wrong\n", wrong);
        return 1;
    }
    printf("hang_wait: ok released after the wait\n");
    return 0;
}
