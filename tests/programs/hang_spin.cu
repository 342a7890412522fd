// A kernel that spins on a volatile flag in device memory that nothing
// changes:
//   hang_spin           the spin is bounded (100000 polls): the kernel
//                       reports how many it made, checked exactly; prints
//                       "hang_spin: ok"
//   hang_spin forever   no bound: prints "hang_spin: spinning" after the
//                       launch and synchronises forever (the service tests
//                       kill it there); if the sync returns it says so and
//                       exits 1.
//   hang_spin held      as forever, with a cudaFree queued behind the
//                       kernel (through rig it holds the agent's job thread
//                       in the driver); prints "hang_spin: spinning, a free
//                       behind it".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

// Polls *flag until it is non-zero or, when limit > 0, limit times; thread 0
// writes the number of polls made.
__global__ void spin(const volatile int *flag, long long limit, long long *polls)
{
    long long k = 0;
    while (*flag == 0) {
        k++;
        if (limit > 0 && k >= limit)
            break;
    }
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *polls = k;
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main(int argc, char **argv)
{
    bool held = argc > 1 && strcmp(argv[1], "held") == 0;
    bool forever = held || (argc > 1 && strcmp(argv[1], "forever") == 0);
    const long long limit = forever ? 0 : 100000;
    int *flag;
    long long *polls, got = -1;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMalloc(&polls, sizeof(long long)));
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    CHECK(cudaMemset(polls, 0xff, sizeof(long long)));
    int *other = NULL;
    if (held)
        CHECK(cudaMalloc(&other, 1 << 20));
    spin<<<1, 32>>>(flag, limit, polls);
    CHECK(cudaGetLastError());
    if (held) {
        CHECK(cudaFree(other));
        printf("hang_spin: spinning, a free behind it\n");
        fflush(stdout);
        cudaError_t e = cudaDeviceSynchronize();
        printf("hang_spin: the endless kernel ended: %s\n", cudaGetErrorName(e));
        return 1;
    }
    if (forever) {
        printf("hang_spin: spinning\n");
        fflush(stdout);
        cudaError_t e = cudaDeviceSynchronize();
        printf("hang_spin: the endless kernel ended: %s\n", cudaGetErrorName(e));
        return 1;
    }
    CHECK(cudaMemcpy(&got, polls, sizeof got, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(flag));
    CHECK(cudaFree(polls));
    if (got != limit) {
        printf("hang_spin: %lld polls, expected %lld\n", got, limit);
        return 1;
    }
    printf("hang_spin: ok %lld polls\n", got);
    return 0;
}
