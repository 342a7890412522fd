// One long kernel, then a synchronous copy of its result (no sync between:
// the copy itself waits for the kernel), checked against the CPU.
//   longkernel [ROUNDS]   each of 64 threads runs a dependent chain of
//                          ROUNDS steps (default 100000); prints
//                          "longkernel: ok ROUNDS rounds in S s"
// On softgpu the kernel's time grows linearly with ROUNDS; the service test
// calibrates with a short run and asks for about 30 s (chainwork.h).
#include <chrono>

#include "chainwork.h"
#include "check.h"

int main(int argc, char **argv)
{
    long long rounds = argc > 1 ? strtoll(argv[1], nullptr, 0) : 100000;
    if (rounds < 1) {
        printf("longkernel: ROUNDS must be positive\n");
        return 2;
    }
    const int n = 64;
    unsigned *d, h[n];
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaMemset(d, 0, sizeof h));
    CHECK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    work<<<2, 32>>>(d, rounds);
    CHECK(cudaGetLastError());
    printf("longkernel: launched %lld rounds\n", rounds);
    fflush(stdout);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        unsigned want = chain((unsigned)i * 2654435761u + 1u, rounds);
        if (h[i] != want && wrong++ < 5)
            printf("out[%d] = %#x, expected %#x\n", i, h[i], want);
    }
    CHECK(cudaFree(d));
    if (wrong) {
        printf("longkernel: %d wrong\n", wrong);
        return 1;
    }
    printf("longkernel: ok %lld rounds in %.2f s\n", rounds, secs);
    return 0;
}
