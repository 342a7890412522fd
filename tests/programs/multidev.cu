// Every device at once: one host thread per device (and the main thread on
// device 0), each with its own stream, memory and launches; then each
// device's results are checked against the CPU. Exercises primary contexts
// per device and the runtime's per-thread state.
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

__global__ void fill(int *out, int n, int device, int round)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = i * 3 + device * 1000 + round;
}

static int work(int device, int rounds, int n)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        printf("device %d: cudaSetDevice: %s\n", device, cudaGetErrorName(e));
        return 1;
    }
    int *d = nullptr;
    std::vector<int> h(n);
    cudaStream_t s;
    if ((e = cudaStreamCreate(&s)) != cudaSuccess || (e = cudaMalloc(&d, n * sizeof(int))) != cudaSuccess) {
        printf("device %d: %s\n", device, cudaGetErrorName(e));
        return 1;
    }
    int wrong = 0;
    for (int r = 0; r < rounds; r++) {
        fill<<<4, 64, 0, s>>>(d, n, device, r);
        if ((e = cudaMemcpyAsync(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
            (e = cudaStreamSynchronize(s)) != cudaSuccess) {
            printf("device %d round %d: %s\n", device, r, cudaGetErrorName(e));
            return 1;
        }
        int cur = -1;
        cudaGetDevice(&cur);
        if (cur != device)
            wrong++;
        for (int i = 0; i < n; i++)
            if (h[i] != i * 3 + device * 1000 + r && wrong++ < 3)
                printf("device %d round %d: [%d] = %d\n", device, r, i, h[i]);
    }
    cudaFree(d);
    cudaStreamDestroy(s);
    return wrong ? 1 : 0;
}

int main()
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        printf("multidev: %s\n", cudaGetErrorName(e));
        return 1;
    }
    const int n = 3000, rounds = 4;
    std::vector<int> failed(count + 1, 0);
    std::vector<std::thread> threads;
    for (int d = 0; d < count; d++)
        threads.emplace_back([&, d] { failed[d] = work(d, rounds, n); });
    failed[count] = work(0, rounds, n);
    for (auto &t : threads)
        t.join();
    int bad = 0;
    for (int f : failed)
        bad += f;
    // Each device again from the main thread, switching back and forth.
    for (int d = count - 1; d >= 0; d--)
        bad += work(d, 1, 100);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        printf("multidev: %s\n", cudaGetErrorName(e));
        return 1;
    }
    if (bad) {
        printf("multidev: %d failures\n", bad);
        return 1;
    }
    printf("multidev: ok %d devices\n", count);
    return 0;
}
