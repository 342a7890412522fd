// Unified memory through the runtime, checked on the CPU against random
// inputs (seed printed; SEED=N repeats a run):
//  - the device reports managed memory; whether the CPU may touch managed
//    memory while kernels run (cudaDevAttrConcurrentManagedAccess) decides
//    the path, as the programming guide says: without it the CPU touches
//    managed memory only after a synchronisation, prefetches go to the CPU
//    only, and memory the CPU uses during a launch is attached to the host;
//  - cudaMallocManaged allocations of several sizes (one not a multiple of
//    a page, one larger than 2 MiB) written by the CPU, used by kernels,
//    read back by the CPU after cudaDeviceSynchronize, several rounds, the
//    CPU changing a few inputs between launches;
//  - memory both sides update in turn (the kernel adds, the CPU doubles);
//  - several CPU threads writing inputs and reading results at once;
//  - a host function reading what the kernel before it on its stream wrote;
//  - cudaMemcpy and cudaMemset into and out of managed memory; a
//    synchronous copy of other memory as the synchronisation before the CPU
//    reads what a kernel wrote;
//  - cudaMemAdvise and cudaMemRangeGetAttribute, cudaMemPrefetchAsync,
//    cudaStreamAttachMemAsync, cudaPointerGetAttributes;
//  - __managed__ variables: one the CPU sets between launches and kernels
//    read, one kernels count into and the CPU reads and resets.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>
#include <thread>
#include <vector>

#include "check.h"

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("managed: %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void saxpy(float a, const float *x, const float *y, float *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = a * x[i] + y[i];
}

__global__ void add(unsigned *v, size_t n, unsigned k)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        v[i] += k + (unsigned)i;
}

__global__ void sum_bytes(const unsigned char *b, size_t n, unsigned long long *total)
{
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += b[i];
    atomicAdd(total, s);
}

__managed__ float gain = 2.0f;
__managed__ unsigned hits;

__global__ void amplify(const float *x, float *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = x[i] * gain;
        atomicAdd(&hits, 1u);
    }
}

// A host function: sums the 4096 values the kernel before it wrote.
static void CUDART_CB sum_after_kernel(void *arg)
{
    unsigned long long *sum = (unsigned long long *)arg;
    const unsigned *v = *(const unsigned *const *)(sum + 1);
    sum[0] = 0;
    for (int i = 0; i < 4096; i++)
        sum[0] += v[i];
}

static float frand() { return (float)(rand() % 2001 - 1000) / 16.0f; }

static cudaMemLocation on_device(int dev)
{
    cudaMemLocation l = {};
    l.type = cudaMemLocationTypeDevice;
    l.id = dev;
    return l;
}

static cudaMemLocation on_cpu()
{
    cudaMemLocation l = {};
    l.type = cudaMemLocationTypeHost;
    return l;
}

int main()
{
    unsigned seed = run_seed("managed");
    srand(seed);
    int dev = 0, managed = 0, concurrent = 0;
    CHECK(cudaSetDevice(dev));
    CHECK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, dev));
    CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, dev));
    EXPECT(managed == 1, "managed memory supported: %d", managed);
    printf("managed: concurrent managed access %d\n", concurrent);

    // A synchronous copy to the device synchronises too (the stream sync
    // CUDA does before it): a kernel writes managed memory and ends while
    // the program makes no call; then a synchronous copy of other bytes
    // in, and the CPU reads what the kernel wrote. First, while nothing
    // on the stream has written program memory yet.
    {
        const size_t un = 4096;
        unsigned *u, *dv, hv[64] = { 0 };
        CHECK(cudaMallocManaged(&u, un * sizeof *u));
        CHECK(cudaMalloc(&dv, sizeof hv));
        for (size_t i = 0; i < un; i++)
            u[i] = 1;
        add<<<4, 256>>>(u, un, 5);
        CHECK(cudaGetLastError());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        CHECK(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < un; i++)
            EXPECT(u[i] == 6u + (unsigned)i, "after a synchronous copy in, u[%zu] = %u, not %u", i, u[i],
                   6u + (unsigned)i);
        CHECK(cudaFree(dv));
        CHECK(cudaFree(u));
    }

    // Sizes: 1000 floats (not a page multiple), 300k floats (over 1 MiB).
    const int n = 1000, m = 300000;
    float *x, *y, *out, *bx, *by, *bout;
    CHECK(cudaMallocManaged(&x, n * sizeof(float)));
    CHECK(cudaMallocManaged(&y, n * sizeof(float)));
    CHECK(cudaMallocManaged(&out, n * sizeof(float)));
    CHECK(cudaMallocManaged(&bx, m * sizeof(float)));
    CHECK(cudaMallocManaged(&by, m * sizeof(float)));
    CHECK(cudaMallocManaged(&bout, m * sizeof(float)));

    cudaPointerAttributes pa;
    CHECK(cudaPointerGetAttributes(&pa, bx + 5));
    EXPECT(pa.type == cudaMemoryTypeManaged, "pointer type %d", (int)pa.type);
    EXPECT(pa.devicePointer == bx + 5 && pa.hostPointer == bx + 5, "pointers %p %p", pa.devicePointer, pa.hostPointer);

    // Advice as real code gives it: inputs are read mostly, outputs live on the device.
    CHECK(cudaMemAdvise(bx, m * sizeof(float), cudaMemAdviseSetReadMostly, on_device(dev)));
    CHECK(cudaMemAdvise(bout, m * sizeof(float), cudaMemAdviseSetPreferredLocation, on_device(dev)));
    int rm = -1, pref = -7;
    CHECK(cudaMemRangeGetAttribute(&rm, 4, cudaMemRangeAttributeReadMostly, bx, m * sizeof(float)));
    CHECK(cudaMemRangeGetAttribute(&pref, 4, cudaMemRangeAttributePreferredLocation, bout, m * sizeof(float)));
    EXPECT(rm == 1, "read mostly %d", rm);
    EXPECT(pref == dev, "preferred location %d", pref);
    CHECK(cudaMemAdvise(bx, m * sizeof(float), cudaMemAdviseUnsetReadMostly, on_device(dev)));
    CHECK(cudaMemRangeGetAttribute(&rm, 4, cudaMemRangeAttributeReadMostly, bx, m * sizeof(float)));
    EXPECT(rm == 0, "read mostly after unset %d", rm);

    for (int i = 0; i < n; i++)
        x[i] = frand(), y[i] = frand();
    for (int i = 0; i < m; i++)
        bx[i] = frand(), by[i] = frand();

    for (int round = 0; round < 5; round++) {
        float a = frand();
        if (concurrent && round % 2) {
            CHECK(cudaMemPrefetchAsync(bx, m * sizeof(float), on_device(dev), 0, 0));
            CHECK(cudaMemPrefetchAsync(by, m * sizeof(float), on_device(dev), 0, 0));
        } else if (concurrent) {
            // CUDA 13's batch: the inputs to the device, the output to the CPU.
            void *ptrs[] = { bx, by, bout };
            size_t sizes[] = { m * sizeof(float), m * sizeof(float), m * sizeof(float) };
            cudaMemLocation locs[] = { on_device(dev), on_cpu() };
            size_t first[] = { 0, 2 };
            CHECK(cudaMemPrefetchBatchAsync(ptrs, sizes, 3, locs, first, 2, 0, cudaStreamPerThread));
        }
        saxpy<<<8, 128>>>(a, x, y, out, n);
        saxpy<<<64, 256>>>(a, bx, by, bout, m);
        CHECK(cudaGetLastError());
        // Results come back to the CPU: a prefetch any device allows.
        CHECK(cudaMemPrefetchAsync(bout, m * sizeof(float), on_cpu(), 0, 0));
        CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < n; i++)
            EXPECT(out[i] == a * x[i] + y[i], "round %d out[%d] = %g, not %g", round, i, out[i], a * x[i] + y[i]);
        for (int i = 0; i < m; i++)
            EXPECT(bout[i] == a * bx[i] + by[i], "round %d bout[%d] = %g, not %g", round, i, bout[i],
                   a * bx[i] + by[i]);
        // New inputs between launches: a few scattered ones, and all of y.
        for (int k = 0; k < 20; k++) {
            bx[rand() % m] = frand();
            x[rand() % n] = frand();
        }
        for (int i = 0; i < n; i++)
            y[i] = frand();
    }

    // Four threads write inputs at once, then read the results at once.
    for (int round = 0; round < 2; round++) {
        const int parts = 4;
        std::vector<std::thread> ts;
        for (int t = 0; t < parts; t++)
            ts.emplace_back([=] {
                for (int i = t; i < m; i += parts)
                    bx[i] = (float)((i * 7 + round) % 1000), by[i] = (float)(i % 13);
            });
        for (auto &t : ts)
            t.join();
        ts.clear();
        saxpy<<<64, 256>>>(2.0f, bx, by, bout, m);
        CHECK(cudaDeviceSynchronize());
        int bad[parts] = {};
        for (int t = 0; t < parts; t++)
            ts.emplace_back([&, t] {
                for (int i = t * (m / parts); i < (t + 1) * (m / parts); i++)
                    bad[t] += bout[i] != 2.0f * (float)((i * 7 + round) % 1000) + (float)(i % 13);
            });
        for (auto &t : ts)
            t.join();
        for (int t = 0; t < parts; t++)
            EXPECT(bad[t] == 0, "round %d: thread %d read %d wrong results", round, t, bad[t]);
    }

    // Both sides update one allocation in turn (3 MiB and a bit, in bytes).
    const size_t cn = (3u << 20) / 4 + 37;
    unsigned *c, *ref = (unsigned *)malloc(cn * sizeof *ref);
    CHECK(cudaMallocManaged(&c, cn * sizeof *c));
    for (size_t i = 0; i < cn; i++)
        c[i] = ref[i] = (unsigned)rand();
    for (int round = 0; round < 3; round++) {
        unsigned k = (unsigned)rand();
        add<<<32, 256>>>(c, cn, k);
        CHECK(cudaDeviceSynchronize());
        for (size_t i = 0; i < cn; i++) {
            ref[i] += k + (unsigned)i;
            EXPECT(c[i] == ref[i], "round %d c[%zu] = %u, not %u", round, i, c[i], ref[i]);
        }
        for (size_t i = round; i < cn; i += 1000)
            c[i] *= 2, ref[i] *= 2;
    }

    // Copies and memsets into and out of managed memory.
    unsigned char *bytes;
    const size_t nb = 70001;
    unsigned long long *total;
    CHECK(cudaMallocManaged(&bytes, nb));
    CHECK(cudaMallocManaged(&total, sizeof *total));
    unsigned char *src = (unsigned char *)malloc(nb), *back = (unsigned char *)malloc(nb);
    for (size_t i = 0; i < nb; i++)
        src[i] = (unsigned char)rand();
    CHECK(cudaMemcpy(bytes, src, nb, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(bytes + 100, 7, 50));
    memset(src + 100, 7, 50);
    bytes[nb - 1] = 3;   // the CPU writes after the copy, before the kernel
    src[nb - 1] = 3;
    *total = 0;
    sum_bytes<<<16, 128>>>(bytes, nb, total);
    CHECK(cudaDeviceSynchronize());
    unsigned long long want = 0;
    for (size_t i = 0; i < nb; i++)
        want += src[i];
    EXPECT(*total == want, "byte sum %llu, not %llu", *total, want);
    EXPECT(memcmp(bytes, src, nb) == 0, "managed bytes differ from what was copied in");
    CHECK(cudaMemcpy(back, bytes, nb, cudaMemcpyDefault));
    EXPECT(memcmp(back, src, nb) == 0, "bytes copied out of managed memory differ");

    // Memory the CPU fills while a kernel runs on other memory: attached to
    // the host (needed without concurrent access), then to the stream.
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *h;
    CHECK(cudaMallocManaged(&h, 4096 * sizeof *h, cudaMemAttachHost));
    add<<<8, 128, 0, s>>>(c, cn, 1);
    for (int i = 0; i < 4096; i++)
        h[i] = (unsigned)i * 3u;
    CHECK(cudaStreamAttachMemAsync(s, h, 0, cudaMemAttachSingle));
    add<<<8, 128, 0, s>>>(h, 4096, 5);
    unsigned long long seen[2] = { 0, 0 };
    memcpy(&seen[1], &h, sizeof h);
    CHECK(cudaLaunchHostFunc(s, sum_after_kernel, seen));
    CHECK(cudaStreamSynchronize(s));
    unsigned long long want_sum = 0;
    for (int i = 0; i < 4096; i++)
        want_sum += (unsigned)i * 3u + 5u + (unsigned)i;
    EXPECT(seen[0] == want_sum, "the host function saw a sum of %llu, not %llu", seen[0], want_sum);
    for (int i = 0; i < 4096; i++)
        EXPECT(h[i] == (unsigned)i * 3u + 5u + (unsigned)i, "h[%d] = %u", i, h[i]);
    for (size_t i = 0; i < cn; i++)
        EXPECT(c[i] == ref[i] + 1u + (unsigned)i, "c[%zu] after the stream's launch = %u", i, c[i]);

    // __managed__ variables: initialised as declared, set and read by the CPU.
    EXPECT(gain == 2.0f && hits == 0, "__managed__ start values %g %u", gain, hits);
    for (int round = 0; round < 3; round++) {
        gain = frand();
        amplify<<<4, 64>>>(x, out, n);
        amplify<<<4, 64>>>(x, out, n);
        CHECK(cudaDeviceSynchronize());
        EXPECT(hits == 2u * n, "round %d: %u hits, not %u", round, hits, 2u * n);
        for (int i = 0; i < n; i++)
            EXPECT(out[i] == x[i] * gain, "round %d amplified out[%d] = %g", round, i, out[i]);
        hits = 0;
    }

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(h));
    // A captured graph whose kernel writes managed memory: after each
    // replay and a synchronisation the CPU reads what the device wrote, and
    // what the CPU wrote between replays is what the next one reads.
    {
        unsigned *g;
        const size_t gn = 5000;
        CHECK(cudaMallocManaged(&g, gn * sizeof(unsigned)));
        for (size_t i = 0; i < gn; i++)
            g[i] = (unsigned)i;
        cudaStream_t cs;
        CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
        add<<<8, 128, 0, cs>>>(g, gn, 3);
        CHECK(cudaStreamEndCapture(cs, &graph));
        CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int round = 0; round < 3; round++) {
            CHECK(cudaGraphLaunch(exec, cs));
            CHECK(cudaStreamSynchronize(cs));
            for (size_t i = 0; i < gn; i++)
                EXPECT(g[i] == (unsigned)i + (3u + (unsigned)i) * (round + 1) + 10u * round,
                       "graph round %d: g[%zu] = %u", round, i, g[i]);
            for (size_t i = 0; i < gn; i++)
                g[i] += 10;
        }
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(graph));
        CHECK(cudaStreamDestroy(cs));
        CHECK(cudaFree(g));
    }
    CHECK(cudaFree(bytes));
    CHECK(cudaFree(total));
    CHECK(cudaFree(c));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(out));
    CHECK(cudaFree(bx));
    CHECK(cudaFree(by));
    CHECK(cudaFree(bout));
    free(ref);
    free(src);
    free(back);
    printf("managed: ok\n");
    return 0;
}
