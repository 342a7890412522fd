// Many host threads on one device at once through the runtime: each of 8
// threads, in a loop, allocates, creates its own stream and event, copies
// its own random data in (pinned memory), launches, records, waits on its
// event, copies back, checks against the CPU, and frees everything, while
// the others do the same; plus one thread that only queries (device
// properties, memory info, stream queries on the legacy stream). Seed
// printed; SEED=N repeats a run.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>

#include "seed.h"

__global__ void affine(const unsigned *in, unsigned *out, int n, unsigned a, unsigned b)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * a + b;
}

static std::atomic<int> failures{ 0 }, done_rounds{ 0 };

#define TRY(call)                                                                                            \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            printf("thread %d round %d: %s: %s\n", id, r, #call, cudaGetErrorName(e_));                     \
            failures++;                                                                                      \
            return;                                                                                          \
        }                                                                                                    \
    } while (0)

static void worker(int id, unsigned seed, int rounds)
{
    unsigned long long rng = seed * 2654435761ULL + (unsigned)id;
    int r = -1;
    TRY(cudaSetDevice(0));
    for (r = 0; r < rounds; r++) {
        const int n = 1000 + 517 * ((id + r) % 7);
        unsigned *h_in, *h_out, *d_in, *d_out;
        cudaStream_t s;
        cudaEvent_t ev;
        TRY(cudaMallocHost(&h_in, n * sizeof(unsigned)));
        TRY(cudaMallocHost(&h_out, n * sizeof(unsigned)));
        TRY(cudaMalloc(&d_in, n * sizeof(unsigned)));
        TRY(cudaMalloc(&d_out, n * sizeof(unsigned)));
        TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        for (int i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            h_in[i] = (unsigned)(rng >> 32);
        }
        unsigned a = 2 * (unsigned)(id * 100 + r) + 1, b = (unsigned)id << 20 | (unsigned)r;
        TRY(cudaMemcpyAsync(d_in, h_in, n * sizeof(unsigned), cudaMemcpyHostToDevice, s));
        affine<<<3 + id % 4, 64 * (1 + r % 3), 0, s>>>(d_in, d_out, n, a, b);
        TRY(cudaGetLastError());
        TRY(cudaMemcpyAsync(h_out, d_out, n * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        TRY(cudaEventRecord(ev, s));
        TRY(cudaEventSynchronize(ev));
        int bad = 0;
        for (int i = 0; i < n; i++)
            if (h_out[i] != h_in[i] * a + b && bad++ < 2)
                printf("thread %d round %d: out[%d] = %#x, expected %#x\n", id, r, i, h_out[i], h_in[i] * a + b);
        if (bad)
            failures++;
        TRY(cudaEventDestroy(ev));
        TRY(cudaStreamDestroy(s));
        TRY(cudaFree(d_in));
        TRY(cudaFree(d_out));
        TRY(cudaFreeHost(h_in));
        TRY(cudaFreeHost(h_out));
        done_rounds++;
    }
}

static void querier(std::atomic<bool> *stop)
{
    int id = -1, r = 0;
    TRY(cudaSetDevice(0));
    for (; !*stop; r++) {
        cudaDeviceProp p;
        size_t f = 0, t = 0;
        TRY(cudaGetDeviceProperties(&p, 0));
        TRY(cudaMemGetInfo(&f, &t));
        cudaError_t q = cudaStreamQuery(cudaStreamLegacy);
        if (q != cudaSuccess && q != cudaErrorNotReady) {
            printf("querier: cudaStreamQuery(legacy): %s\n", cudaGetErrorName(q));
            failures++;
            return;
        }
        usleep(1000);
    }
}

int main()
{
    unsigned seed = run_seed(nullptr);
    const int nthreads = 8, rounds = 12;
    if (cudaFree(0) != cudaSuccess) {
        printf("threads: no device\n");
        return 1;
    }
    std::atomic<bool> stop{ false };
    std::thread q(querier, &stop);
    std::vector<std::thread> ts;
    for (int i = 0; i < nthreads; i++)
        ts.emplace_back(worker, i, seed, rounds);
    for (auto &t : ts)
        t.join();
    stop = true;
    q.join();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("cudaDeviceSynchronize: %s\n", cudaGetErrorName(e));
        failures++;
    }
    printf("%d threads x %d rounds: %d rounds done, %d failures\n", nthreads, rounds, (int)done_rounds,
           (int)failures);
    if (failures || done_rounds != nthreads * rounds) {
        printf("threads: %d failures (seed %u)\n", (int)failures, seed);
        return 1;
    }
    printf("threads: ok %d threads\n", nthreads);
    return 0;
}
