// Graph memory nodes through the runtime: a graph allocates a scratch
// buffer (cudaGraphAddMemAllocNode; its address known when the node is
// added), a kernel fills it from the input, a second kernel reduces it into
// the output, and a free node ends it; the graph memory attributes show the
// memory reserved while the graph holds it, in use only between the nodes.
// A second graph allocates without freeing: the allocation outlives the
// launch, its contents are read back, and cudaFreeAsync ends it. Then
// cudaMallocAsync and cudaFreeAsync captured into memory nodes. Results
// are checked against the CPU (seed printed; SEED=N repeats a run).
// Prints "graphmem: ok".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>

#include "check.h"

#define WANT(cond, ...)                                                               \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int N = 5003, T = 128, B = (N + T - 1) / T;

__global__ void square(unsigned long long *scratch, const unsigned *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        scratch[i] = (unsigned long long)x[i] * x[i];
}

// out[b] = sum of block b's slice of scratch
__global__ void block_sums(unsigned long long *out, const unsigned long long *scratch, int n)
{
    __shared__ unsigned long long s[T];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? scratch[i] : 0;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k)
            s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = s[0];
}

static unsigned long long attr(cudaGraphMemAttributeType a)
{
    unsigned long long v = 0;
    CHECK(cudaDeviceGetGraphMemAttribute(0, a, &v));
    return v;
}

static cudaMemAllocNodeParams alloc_params(size_t bytes)
{
    cudaMemAllocNodeParams p = {};
    p.poolProps.allocType = cudaMemAllocationTypePinned;
    p.poolProps.location.type = cudaMemLocationTypeDevice;
    p.poolProps.location.id = 0;
    p.bytesize = bytes;
    return p;
}

int main()
{
    unsigned seed = run_seed("graphmem");
    srand(seed);
    CHECK(cudaSetDevice(0));
    std::vector<unsigned> hx(N);
    unsigned *x;
    unsigned long long *out;
    CHECK(cudaMalloc(&x, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&out, B * sizeof(unsigned long long)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long used0 = attr(cudaGraphMemAttrUsedMemCurrent);
    unsigned long long reserved0 = attr(cudaGraphMemAttrReservedMemCurrent);

    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap = alloc_params(N * sizeof(unsigned long long));
    cudaGraphNode_t alloc, k1, k2, fr;
    CHECK(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    WANT(ap.dptr != nullptr, "no address when the node was added");
    unsigned long long *scratch = (unsigned long long *)ap.dptr;
    WANT(attr(cudaGraphMemAttrReservedMemCurrent) >= reserved0 + N * sizeof(unsigned long long),
         "reserved %llu, was %llu", attr(cudaGraphMemAttrReservedMemCurrent), reserved0);
    int n = N;
    void *a1[] = { &scratch, &x, &n };
    cudaKernelNodeParams kp = {};
    kp.func = (void *)square;
    kp.gridDim = dim3(B);
    kp.blockDim = dim3(T);
    kp.kernelParams = a1;
    CHECK(cudaGraphAddKernelNode(&k1, g, &alloc, 1, &kp));
    void *a2[] = { &out, &scratch, &n };
    kp.func = (void *)block_sums;
    kp.kernelParams = a2;
    CHECK(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));
    CHECK(cudaGraphAddMemFreeNode(&fr, g, &k2, 1, scratch));
    cudaMemAllocNodeParams back;
    CHECK(cudaGraphMemAllocNodeGetParams(alloc, &back));
    WANT(back.dptr == scratch && back.bytesize >= N * sizeof(unsigned long long), "alloc node read back");
    void *freed = nullptr;
    CHECK(cudaGraphMemFreeNodeGetParams(fr, &freed));
    WANT(freed == scratch, "free node read back");

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    std::vector<unsigned long long> got(B);
    for (int l = 0; l < 3; l++) {
        for (auto &v : hx)
            v = (unsigned)rand();
        CHECK(cudaMemcpyAsync(x, hx.data(), N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(got.data(), out, B * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (int b = 0; b < B; b++) {
            unsigned long long want = 0;
            for (int i = b * T; i < N && i < (b + 1) * T; i++)
                want += (unsigned long long)hx[i] * hx[i];
            WANT(got[b] == want, "launch %d: block %d sum %llu, want %llu", l, b, got[b], want);
        }
    }
    WANT(attr(cudaGraphMemAttrUsedMemCurrent) == used0, "in use after the free node");
    WANT(attr(cudaGraphMemAttrUsedMemHigh) >= used0 + N * sizeof(unsigned long long), "high watermark %llu",
         attr(cudaGraphMemAttrUsedMemHigh));
    CHECK(cudaDeviceGraphMemTrim(0));
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));

    // Allocated by a graph, freed by the program after the launch.
    CHECK(cudaGraphCreate(&g, 0));
    ap = alloc_params(N * sizeof(unsigned));
    CHECK(cudaGraphAddMemAllocNode(&alloc, g, nullptr, 0, &ap));
    cudaMemsetParams mp = {};
    mp.dst = ap.dptr;
    mp.value = 0x5a;
    mp.elementSize = 1;
    mp.width = N * sizeof(unsigned);
    mp.height = 1;
    cudaGraphNode_t set;
    CHECK(cudaGraphAddMemsetNode(&set, g, &alloc, 1, &mp));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphLaunch(exec, s));
    std::vector<unsigned> bytes(N);
    CHECK(cudaMemcpyAsync(bytes.data(), ap.dptr, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        WANT(bytes[i] == 0x5a5a5a5au, "element %d: %#x", i, bytes[i]);
    WANT(attr(cudaGraphMemAttrUsedMemCurrent) >= used0 + N * sizeof(unsigned), "not in use after the launch");
    CHECK(cudaFreeAsync(ap.dptr, s));
    CHECK(cudaStreamSynchronize(s));
    WANT(attr(cudaGraphMemAttrUsedMemCurrent) == used0, "in use after cudaFreeAsync");
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < 1000 && attr(cudaGraphMemAttrReservedMemCurrent) != reserved0; i++)
        usleep(1000);
    WANT(attr(cudaGraphMemAttrReservedMemCurrent) == reserved0, "reserved %llu once the graphs are gone, was %llu",
         attr(cudaGraphMemAttrReservedMemCurrent), reserved0);
    unsigned long long zero = 0;
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrReservedMemHigh, &zero));
    WANT(attr(cudaGraphMemAttrReservedMemHigh) == reserved0, "reserved high after a reset");

    // Captured: stream-ordered allocation and free become the graph's
    // memory nodes.
    unsigned long long *tmp = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&tmp, N * sizeof(unsigned long long), s));
    square<<<B, T, 0, s>>>(tmp, x, N);
    block_sums<<<B, T, 0, s>>>(out, tmp, N);
    CHECK(cudaFreeAsync(tmp, s));
    CHECK(cudaStreamEndCapture(s, &g));
    size_t count = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &count));
    std::vector<cudaGraphNode_t> nodes(count);
    CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
    int allocs = 0, frees = 0;
    for (cudaGraphNode_t nd : nodes) {
        cudaGraphNodeType t;
        CHECK(cudaGraphNodeGetType(nd, &t));
        allocs += t == cudaGraphNodeTypeMemAlloc;
        frees += t == cudaGraphNodeTypeMemFree;
    }
    WANT(count == 4 && allocs == 1 && frees == 1, "the capture has %zu nodes, %d allocs, %d frees", count, allocs,
         frees);
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (int l = 0; l < 2; l++) {
        for (auto &v : hx)
            v = (unsigned)rand();
        CHECK(cudaMemcpyAsync(x, hx.data(), N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(got.data(), out, B * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        for (int b = 0; b < B; b++) {
            unsigned long long want = 0;
            for (int i = b * T; i < N && i < (b + 1) * T; i++)
                want += (unsigned long long)hx[i] * hx[i];
            WANT(got[b] == want, "captured, launch %d: block %d sum %llu, want %llu", l, b, got[b], want);
        }
    }
    WANT(attr(cudaGraphMemAttrUsedMemCurrent) == used0, "in use after the captured free");
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));

    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(x));
    CHECK(cudaFree(out));
    printf("graphmem: 6 launches of graphs with memory nodes (built, captured), attributes followed\n");
    printf("graphmem: ok\n");
    return 0;
}
