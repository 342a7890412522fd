// Two devices through the runtime, checked on the CPU against random inputs
// (seed printed; SEED=N repeats a run): a kernel fills memory on device 0,
// cudaMemcpyPeer moves it to device 1, a kernel on device 1 transforms it,
// cudaMemcpyPeerAsync moves the result back to device 0 (on a stream of
// device 0, after an event of device 1's stream), a last kernel there
// finishes it, and the host checks. Also a cross-device cudaMemcpy with
// cudaMemcpyDefault. Device pointers are printed and must differ (device
// addresses are unique across devices). With fewer than two devices it says
// so and exits 2.
//
// The cross-device cudaStreamWaitEvent once failed across two agents
// (cudaErrorNotSupported) and between local softgpu and an agent
// (cudaErrorInvalidResourceHandle); both pass since 3e1ec97.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void fill(unsigned *out, const unsigned *seed_vals, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = seed_vals[i % 97] ^ (unsigned)i * 2654435761u;
}

__global__ void transform(unsigned *x, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = (x[i] ^ x[i] >> 7) * 2246822519u + k;
}

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        printf("peer: needs 2 devices, found %d\n", count);
        return 2;
    }
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    for (int d = 0; d < 2; d++) {
        cudaDeviceProp p;
        CHECK(cudaGetDeviceProperties(&p, d));
        printf("device %d: %s\n", d, p.name);
    }
    int can01 = -1, can10 = -1;
    CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    printf("can access peer: 0->1 %d, 1->0 %d\n", can01, can10);

    const int n = 20011;
    unsigned seeds[97];
    for (int i = 0; i < 97; i++)
        seeds[i] = seed_next32();
    unsigned *a0, *b0, *s0, *a1, *c1;
    cudaStream_t st0, st1;
    cudaEvent_t ev1;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a0, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&b0, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&s0, sizeof seeds));
    CHECK(cudaStreamCreate(&st0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&a1, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&c1, n * sizeof(unsigned)));
    CHECK(cudaStreamCreate(&st1));
    CHECK(cudaEventCreateWithFlags(&ev1, cudaEventDisableTiming));

    cudaPointerAttributes pa0, pa1;
    CHECK(cudaPointerGetAttributes(&pa0, a0));
    CHECK(cudaPointerGetAttributes(&pa1, a1));
    int wrong = 0;
    if (pa0.device != 0 || pa1.device != 1 || pa0.type != cudaMemoryTypeDevice || pa1.type != cudaMemoryTypeDevice) {
        printf("pointer attributes: %p on device %d (type %d), %p on device %d (type %d)\n", (void *)a0, pa0.device,
               (int)pa0.type, (void *)a1, pa1.device, (int)pa1.type);
        wrong++;
    }

    // device 0 fills
    CHECK(cudaSetDevice(0));
    CHECK(cudaMemcpy(s0, seeds, sizeof seeds, cudaMemcpyHostToDevice));
    fill<<<29, 128>>>(a0, s0, n);
    CHECK(cudaGetLastError());
    // to device 1, transformed there
    CHECK(cudaMemcpyPeer(a1, 1, a0, 0, n * sizeof(unsigned)));
    CHECK(cudaSetDevice(1));
    transform<<<(n + 255) / 256, 256, 0, st1>>>(a1, n, 11);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev1, st1));
    // back to device 0 on device 0's stream, after device 1's event
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamWaitEvent(st0, ev1, 0));
    CHECK(cudaMemcpyPeerAsync(b0, 0, a1, 1, n * sizeof(unsigned), st0));
    transform<<<(n + 255) / 256, 256, 0, st0>>>(b0, n, 5);
    CHECK(cudaGetLastError());
    unsigned *h = (unsigned *)malloc(n * sizeof(unsigned)), *h1 = (unsigned *)malloc(n * sizeof(unsigned));
    CHECK(cudaMemcpyAsync(h, b0, n * sizeof(unsigned), cudaMemcpyDeviceToHost, st0));
    CHECK(cudaStreamSynchronize(st0));
    // and once more by cudaMemcpyDefault, device 0 -> device 1 -> host
    CHECK(cudaMemcpy(c1, b0, n * sizeof(unsigned), cudaMemcpyDefault));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpy(h1, c1, n * sizeof(unsigned), cudaMemcpyDeviceToHost));

    for (int i = 0; i < n; i++) {
        unsigned x = seeds[i % 97] ^ (unsigned)i * 2654435761u;
        x = (x ^ x >> 7) * 2246822519u + 11;
        x = (x ^ x >> 7) * 2246822519u + 5;
        if (h[i] != x && wrong++ < 5)
            printf("peer round trip [%d] = %#x, expected %#x\n", i, h[i], x);
        if (h1[i] != x && wrong++ < 10)
            printf("cudaMemcpyDefault copy [%d] = %#x, expected %#x\n", i, h1[i], x);
    }
    printf("pointers: device 0 %p %p, device 1 %p %p\n", (void *)a0, (void *)b0, (void *)a1, (void *)c1);
    if (a0 == a1 || a0 == c1 || b0 == a1 || b0 == c1) {
        printf("a device 0 pointer equals a device 1 pointer\n");
        wrong++;
    }

    CHECK(cudaFree(a1));
    CHECK(cudaFree(c1));
    CHECK(cudaStreamDestroy(st1));
    CHECK(cudaEventDestroy(ev1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(a0));
    CHECK(cudaFree(b0));
    CHECK(cudaFree(s0));
    CHECK(cudaStreamDestroy(st0));
    free(h);
    free(h1);
    if (wrong) {
        printf("peer: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("peer: ok ptrs %p %p\n", (void *)a0, (void *)a1);
    return 0;
}
