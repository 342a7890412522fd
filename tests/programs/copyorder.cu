// Copies ordered against kernels the way the runtime promises, with copies
// large enough to go in several pieces, while slow kernels still run on other
// streams (an agent may move a copy's bytes straight between the socket and
// device memory only when nothing before it is left):
//  - a kernel on the legacy stream writes a buffer; a synchronous copy of it
//    on a blocking stream (cudaStreamCreate) sees what the kernel wrote;
//  - a kernel on the legacy stream reads a buffer; an asynchronous copy into
//    it on a blocking stream waits for the kernel (the kernel read the old
//    bytes);
//  - an asynchronous copy out of a buffer, then a kernel on the same stream
//    overwriting it: the copy holds the bytes from before the kernel;
//  - a pageable copy to the device, then a kernel on the same stream reading
//    it, then a copy back: the kernel saw the new bytes;
//  - a non-blocking stream's copy is not held behind the legacy stream's
//    slow kernel (its bytes are right either way);
//  - synchronous copies in with nothing left to wait for, of 8 bytes to
//    24 MiB, each returning once its bytes are sent (as CUDA's from
//    pageable memory returns once they are staged): the source is
//    overwritten at once, and a kernel on a non-blocking stream launched
//    right after reads the bytes of the call, not older ones.
// The legacy stream is named (cudaStreamLegacy), so the per-thread build
// means the same. Every result is checked against the CPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

// Takes its time on purpose (spins rounds per element), then writes
// p[i] = v + i; the loop keeps it on the device's queue long enough for the
// next call to arrive while it runs.
__global__ void fill_slow(float *p, int n, float v, int spins)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float x = v;
        for (int k = 0; k < spins; k++)
            x = x * 0.5f + v * 0.5f;   // stays v
        p[i] = x + (float)i;
    }
}

// out[i] = 2 * in[i], slowly.
__global__ void double_slow(const float *in, float *out, int n, int spins)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float x = in[i];
        float y = x;
        for (int k = 0; k < spins; k++)
            y = y * 0.5f + x * 0.5f;   // stays x
        out[i] = 2.0f * y;
    }
}

// out[i] = 2 * in[i], from the end of the buffer first: a copy's last
// piece is the one most likely still on its way.
__global__ void double_from_end(const float *in, float *out, int n)
{
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        out[n - 1 - k] = 2.0f * in[n - 1 - k];
}

static int wrong;

static void expect(const char *what, const float *got, int n, float (*want)(int, float), float arg)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float w = want(i, arg);
        if (got[i] != w && bad++ < 4)
            printf("copyorder: %s: [%d] = %g, expected %g\n", what, i, got[i], w);
    }
    wrong += bad;
}

static float filled(int i, float v) { return v + (float)i; }
static float doubled(int i, float v) { return 2.0f * (v + (float)i); }
static float host_pattern(int i, float v) { return v - (float)(i % 1000); }

int main()
{
    unsigned seed = run_seed("copyorder");
    const int n = 6 << 20;   // 24 MiB of floats: several pieces each way
    const size_t bytes = (size_t)n * sizeof(float);
    const int spins = 4;
    float v = (float)(seed % 97) + 1.0f;
    float *h = (float *)malloc(bytes), *pinned;
    float *a, *b;
    CHECK(cudaMallocHost(&pinned, bytes));
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    cudaStream_t blocking, free_running;
    CHECK(cudaStreamCreate(&blocking));
    CHECK(cudaStreamCreateWithFlags(&free_running, cudaStreamNonBlocking));

    // A kernel on the legacy stream writes a; a blocking stream copies a out.
    fill_slow<<<64, 256, 0, cudaStreamLegacy>>>(a, n, v, spins);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(h, a, bytes, cudaMemcpyDeviceToHost, blocking));
    CHECK(cudaStreamSynchronize(blocking));
    expect("legacy kernel, then a blocking stream's copy out", h, n, filled, v);

    // A kernel on the legacy stream reads a into b; a blocking stream then
    // copies new bytes into a: the kernel read the old ones.
    for (int i = 0; i < n; i++)
        pinned[i] = host_pattern(i, v + 1.0f);
    double_slow<<<64, 256, 0, cudaStreamLegacy>>>(a, b, n, spins);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(a, pinned, bytes, cudaMemcpyHostToDevice, blocking));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h, b, bytes, cudaMemcpyDeviceToHost));
    expect("legacy kernel reading, then a blocking stream's copy in", h, n, doubled, v);
    CHECK(cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost));
    expect("the copy in after the kernel", h, n, host_pattern, v + 1.0f);

    // A copy out of a, then a kernel on the same stream overwriting a.
    fill_slow<<<64, 256, 0, blocking>>>(a, n, v, spins);
    CHECK(cudaMemcpyAsync(pinned, a, bytes, cudaMemcpyDeviceToHost, blocking));
    fill_slow<<<64, 256, 0, blocking>>>(a, n, v + 7.0f, spins);
    CHECK(cudaStreamSynchronize(blocking));
    expect("a copy out before a kernel overwrote its source", pinned, n, filled, v);
    // Again with the stream idle when the copy is made.
    CHECK(cudaMemcpyAsync(pinned, a, bytes, cudaMemcpyDeviceToHost, blocking));
    fill_slow<<<64, 256, 0, blocking>>>(a, n, v + 9.0f, spins);
    CHECK(cudaStreamSynchronize(blocking));
    expect("a copy out of an idle stream, then a kernel overwriting", pinned, n, filled, v + 7.0f);

    // A pageable copy in, a kernel on the same stream reading it, a copy back.
    for (int i = 0; i < n; i++)
        h[i] = filled(i, v + 3.0f);
    CHECK(cudaMemcpyAsync(a, h, bytes, cudaMemcpyHostToDevice, free_running));
    double_slow<<<64, 256, 0, free_running>>>(a, b, n, spins);
    CHECK(cudaMemcpyAsync(h, b, bytes, cudaMemcpyDeviceToHost, free_running));
    CHECK(cudaStreamSynchronize(free_running));
    expect("copy in, kernel, copy out on one stream", h, n, doubled, v + 3.0f);

    // A non-blocking stream copies b while the legacy stream writes a.
    fill_slow<<<64, 256, 0, cudaStreamLegacy>>>(a, n, v + 5.0f, spins * 4);
    CHECK(cudaMemcpyAsync(h, b, bytes, cudaMemcpyDeviceToHost, free_running));
    CHECK(cudaStreamSynchronize(free_running));
    expect("a non-blocking stream's copy beside a legacy kernel", h, n, doubled, v + 3.0f);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(h, a, bytes, cudaMemcpyDeviceToHost));
    expect("the legacy kernel's bytes after it", h, n, filled, v + 5.0f);

    // Synchronous copies in on an idle device, each followed at once by a
    // kernel on a non-blocking stream and the program's next use of its
    // buffer.
    for (int round = 0; round < 21; round++) {
        int m = round % 7 < 6 ? 2 << (3 * (round % 7)) : n;   // 2 floats to 64 Ki, then 6 Mi; three times
        float w = v + 11.0f + (float)round;
        CHECK(cudaDeviceSynchronize());   // a holds the last round's bytes
        for (int i = 0; i < m; i++)
            h[i] = filled(i, w);
        CHECK(cudaMemcpy(a, h, (size_t)m * sizeof(float), cudaMemcpyHostToDevice));
        for (int i = 0; i < m; i++)
            h[i] = -1.0f;
        double_from_end<<<64, 256, 0, free_running>>>(a, b, m);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpyAsync(pinned, b, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost, free_running));
        CHECK(cudaStreamSynchronize(free_running));
        expect("a synchronous copy in, then a kernel on a non-blocking stream", pinned, m, doubled, w);
    }

    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaStreamDestroy(free_running));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    CHECK(cudaFreeHost(pinned));
    free(h);
    if (wrong) {
        printf("copyorder: %d wrong elements (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("copyorder: ok\n");
    return 0;
}
