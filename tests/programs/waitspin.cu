// How a synchronize waits: spinning or sleeping, as the device's scheduling
// flag says (cudaSetDeviceFlags, the way programs choose it).
//   waitspin [auto|spin|block] [ROUNDS]   sets the flag, runs a kernel whose
//       64 threads each take ROUNDS dependent steps (default 300000), and
//       times cudaDeviceSynchronize: its wall time and the CPU time of the
//       thread that waited. Prints
//       "waitspin: ok MODE cpu C ms of W ms" after checking the result.
#include <cstring>
#include <time.h>

#include "chainwork.h"
#include "check.h"

static double ms_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "auto";
    long long rounds = argc > 2 ? strtoll(argv[2], nullptr, 0) : 300000;
    unsigned flag;
    if (strcmp(mode, "auto") == 0)
        flag = cudaDeviceScheduleAuto;
    else if (strcmp(mode, "spin") == 0)
        flag = cudaDeviceScheduleSpin;
    else if (strcmp(mode, "block") == 0)
        flag = cudaDeviceScheduleBlockingSync;
    else {
        printf("waitspin: MODE is auto, spin or block, not %s\n", mode);
        return 2;
    }
    if (rounds < 1) {
        printf("waitspin: ROUNDS must be positive\n");
        return 2;
    }
    CHECK(cudaSetDeviceFlags(flag));
    unsigned got = 0;
    CHECK(cudaGetDeviceFlags(&got));
    if ((got & cudaDeviceScheduleMask) != flag) {
        printf("waitspin: asked for scheduling flag %#x, the device has %#x\n", flag, got);
        return 1;
    }
    const int n = 64;
    unsigned *d, h[n];
    CHECK(cudaMalloc(&d, sizeof h));
    CHECK(cudaDeviceSynchronize());
    work<<<2, 32>>>(d, rounds);
    CHECK(cudaGetLastError());
    double wall0 = ms_of(CLOCK_MONOTONIC), cpu0 = ms_of(CLOCK_THREAD_CPUTIME_ID);
    CHECK(cudaDeviceSynchronize());
    double cpu = ms_of(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = ms_of(CLOCK_MONOTONIC) - wall0;
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        unsigned want = chain((unsigned)i * 2654435761u + 1u, rounds);
        if (h[i] != want) {
            printf("waitspin: out[%d] = %#x, expected %#x\n", i, h[i], want);
            return 1;
        }
    }
    CHECK(cudaFree(d));
    printf("waitspin: ok %s cpu %.1f ms of %.1f ms\n", mode, cpu, wall);
    return 0;
}
