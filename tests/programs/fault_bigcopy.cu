// One large synchronous copy one way, for the fault tests' slow and stalled
// links: a send that goes on making progress must not fail the job however
// long it takes; one that stops must. Prints "fault_bigcopy: copying" just
// before the copy and "fault_bigcopy: ok" when the bytes arrived intact.
//   fault_bigcopy MIB up|down
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(call)                                                                    \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("fault_bigcopy: %s: %s\n", #call, cudaGetErrorName(e_));            \
            fflush(stdout);                                                            \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "up") && strcmp(argv[2], "down"))) {
        fprintf(stderr, "Usage: fault_bigcopy MIB up|down\n");
        return 2;
    }
    size_t bytes = (size_t)atoi(argv[1]) << 20;
    bool up = strcmp(argv[2], "up") == 0;
    unsigned char *h = (unsigned char *)malloc(bytes), *d;
    unsigned char probe[4096];
    CHECK(cudaMalloc(&d, bytes));
    if (up) {
        for (size_t i = 0; i < bytes; i++)
            h[i] = (unsigned char)(i * 7 + 3);
    } else {
        CHECK(cudaMemset(d, 0x5a, bytes));
        CHECK(cudaMemset(d + bytes - sizeof probe, 0xa5, sizeof probe));
    }
    CHECK(cudaDeviceSynchronize());
    printf("fault_bigcopy: copying %zu MiB %s\n", bytes >> 20, argv[2]);
    fflush(stdout);
    int wrong = 0;
    if (up) {
        CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(probe, d + bytes - sizeof probe, sizeof probe, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < sizeof probe; i++)
            wrong += probe[i] != (unsigned char)((bytes - sizeof probe + i) * 7 + 3);
    } else {
        CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < bytes; i += 4093)
            wrong += h[i] != (i < bytes - sizeof probe ? 0x5a : 0xa5);
    }
    CHECK(cudaFree(d));
    free(h);
    if (wrong) {
        printf("fault_bigcopy: %d wrong bytes\n", wrong);
        return 1;
    }
    printf("fault_bigcopy: ok\n");
    return 0;
}
