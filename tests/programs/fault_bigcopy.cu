// One large synchronous copy one way, for the fault tests' slow and stalled
// links: a send that goes on making progress must not fail the job however
// long it takes; one that stops must. Prints "fault_bigcopy: copying" just
// before the copy and "fault_bigcopy: ok" when the bytes arrived intact.
// The bytes are random both ways: a copy that compressed would cross the
// link as a small frame, and the tests need a large one under way.
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

// The byte at i of the copy (xorshift of its 8-byte word's index).
static unsigned char byte_at(size_t i)
{
    unsigned long long x = (i / 8) * 0x9e3779b97f4a7c15ull + 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return (unsigned char)(x >> (8 * (i % 8)));
}

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
    for (size_t i = 0; i < bytes; i++)
        h[i] = byte_at(i);
    if (!up) {
        CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        memset(h, 0, bytes);
    }
    CHECK(cudaDeviceSynchronize());
    printf("fault_bigcopy: copying %zu MiB %s\n", bytes >> 20, argv[2]);
    fflush(stdout);
    int wrong = 0;
    if (up) {
        CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(probe, d + bytes - sizeof probe, sizeof probe, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < sizeof probe; i++)
            wrong += probe[i] != byte_at(bytes - sizeof probe + i);
    } else {
        CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < bytes; i += 4093)
            wrong += h[i] != byte_at(i);
        for (size_t i = bytes - sizeof probe; i < bytes; i++)
            wrong += h[i] != byte_at(i);
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
