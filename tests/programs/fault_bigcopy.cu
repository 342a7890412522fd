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

#include "seed.h"

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
    // sent: the copy's bytes; got: where they come back.
    unsigned *sent = (unsigned *)malloc(bytes), *got = (unsigned *)malloc(bytes);
    unsigned char *d;
    if (!sent || !got) {
        printf("fault_bigcopy: no memory for %zu MiB\n", bytes >> 20);
        return 1;
    }
    seed_rng(run_seed("fault_bigcopy"));
    for (size_t i = 0; i < bytes / sizeof *sent; i++)
        sent[i] = seed_next32();
    CHECK(cudaMalloc(&d, bytes));
    if (!up)
        CHECK(cudaMemcpy(d, sent, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceSynchronize());
    printf("fault_bigcopy: copying %zu MiB %s\n", bytes >> 20, argv[2]);
    fflush(stdout);
    if (up)
        CHECK(cudaMemcpy(d, sent, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(got, d, bytes, cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < bytes / sizeof *sent; i++)
        wrong += got[i] != sent[i];
    CHECK(cudaFree(d));
    free(sent);
    free(got);
    if (wrong) {
        printf("fault_bigcopy: %zu wrong words\n", wrong);
        return 1;
    }
    printf("fault_bigcopy: ok\n");
    return 0;
}
