// Peer access between two devices through the runtime. When the devices are
// peers (two softgpu devices of one driver, or of one agent): P2P
// attributes, enabling access both ways (a second enable is refused as
// already enabled), a kernel on device 1 reading device 0's memory and
// writing device 0's memory directly, cudaMemcpyPeer, and disabling (a
// second disable is refused as not enabled). When they are not (devices of
// two agents): access is unsupported and every attribute is 0, while
// cudaMemcpyPeer still copies. Results are checked on the CPU; it says
// "p2p: ok peers" or "p2p: ok not peers". With fewer than two devices it
// says so and exits 2.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "check.h"

__global__ void gather(const int *remote, int *local, int *remote_out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        local[i] = remote[i] * 3 + 1;      // device 0's memory, read from device 1
        remote_out[i] = remote[i] - i;     // device 0's memory, written from device 1
    }
}

#define EXPECT(call, want)                                                            \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != (want)) {                                                           \
            printf("%s:%d: %s: %s, expected %s\n", __FILE__, __LINE__, #call,         \
                   cudaGetErrorName(e_), cudaGetErrorName(want));                     \
            wrong++;                                                                  \
        }                                                                             \
        (void)cudaGetLastError();                                                     \
    } while (0)

int main()
{
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    if (count < 2) {
        printf("p2p: needs 2 devices, found %d\n", count);
        return 2;
    }
    int wrong = 0;
    int can01 = -1, can10 = -1, self = -1;
    CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
    CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
    CHECK(cudaDeviceCanAccessPeer(&self, 0, 0));
    printf("can access peer: 0->1 %d, 1->0 %d, 0->0 %d\n", can01, can10, self);
    if (can01 != can10 || self != 0) {
        printf("peer answers disagree\n");
        wrong++;
    }
    bool peers = can01 == 1;
    const int attrs[] = { cudaDevP2PAttrPerformanceRank, cudaDevP2PAttrAccessSupported,
                          cudaDevP2PAttrNativeAtomicSupported, cudaDevP2PAttrCudaArrayAccessSupported };
    for (int a = 0; a < 4; a++) {
        int v = -1;
        CHECK(cudaDeviceGetP2PAttribute(&v, (cudaDeviceP2PAttr)attrs[a], 0, 1));
        printf("p2p attribute %d: %d\n", attrs[a], v);
        if (attrs[a] == cudaDevP2PAttrAccessSupported && v != (peers ? 1 : 0)) {
            printf("access supported %d, but can access peer %d\n", v, can01);
            wrong++;
        }
        if (!peers && v != 0) {
            printf("not peers, yet attribute %d is %d\n", attrs[a], v);
            wrong++;
        }
    }

    const int n = 10007;
    int *h = (int *)malloc(n * sizeof(int)), *back = (int *)malloc(n * sizeof(int));
    for (int i = 0; i < n; i++)
        h[i] = i * 7 - 5000;
    int *a0, *b0, *a1, *c1;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a0, n * sizeof(int)));
    CHECK(cudaMalloc(&b0, n * sizeof(int)));
    CHECK(cudaMemcpy(a0, h, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&a1, n * sizeof(int)));
    CHECK(cudaMalloc(&c1, n * sizeof(int)));

    if (peers) {
        CHECK(cudaDeviceEnablePeerAccess(0, 0));   // device 1 may use device 0's memory
        EXPECT(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessAlreadyEnabled);
        CHECK(cudaSetDevice(0));
        CHECK(cudaDeviceEnablePeerAccess(1, 0));
        CHECK(cudaSetDevice(1));
        gather<<<13, 128>>>(a0, c1, b0, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(back, c1, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            if (back[i] != h[i] * 3 + 1 && wrong++ < 5)
                printf("read across [%d] = %d, expected %d\n", i, back[i], h[i] * 3 + 1);
        CHECK(cudaSetDevice(0));
        CHECK(cudaMemcpy(back, b0, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            if (back[i] != h[i] - i && wrong++ < 5)
                printf("written across [%d] = %d, expected %d\n", i, back[i], h[i] - i);
    } else {
        CHECK(cudaSetDevice(1));
        EXPECT(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessUnsupported);
        EXPECT(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
    }

    // cudaMemcpyPeer, peers or not: device 0 -> device 1 -> host.
    CHECK(cudaMemcpyPeer(a1, 1, a0, 0, n * sizeof(int)));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpy(back, a1, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (back[i] != h[i] && wrong++ < 5)
            printf("cudaMemcpyPeer [%d] = %d, expected %d\n", i, back[i], h[i]);

    if (peers) {
        CHECK(cudaDeviceDisablePeerAccess(0));
        EXPECT(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
        CHECK(cudaSetDevice(0));
        CHECK(cudaDeviceDisablePeerAccess(1));
    }
    CHECK(cudaSetDevice(1));
    CHECK(cudaFree(a1));
    CHECK(cudaFree(c1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(a0));
    CHECK(cudaFree(b0));
    free(h);
    free(back);
    if (wrong) {
        printf("p2p: %d wrong\n", wrong);
        return 1;
    }
    printf("p2p: ok %s\n", peers ? "peers" : "not peers");
    return 0;
}
