// Batch memory-op nodes in CUDA graphs (driver API calls from a runtime
// program, as libraries that signal between graphs do): a kernel, then a
// batch node writing a 32-bit "done" word and a 64-bit stamp, a batch node
// waiting for the done word, and a kernel adding the stamp it reads from
// device memory; each launch gets a new stamp through
// cuGraphExecBatchMemOpNodeSetParams. Then a cuStreamBatchMemOp captured
// into a graph. Every result is checked against the CPU (seed printed;
// SEED=N repeats a run). Prints "graphmemop: ok".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#include "check.h"

#define CU(call)                                                                      \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            const char *n_ = "?";                                                     \
            cuGetErrorName(r_, &n_);                                                  \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, n_);                 \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define WANT(cond, ...)                                                               \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int N = 3001;

__global__ void scale(unsigned *y, const unsigned *x, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * k + (unsigned)i;
}

__global__ void add_stamp(unsigned *z, const unsigned *y, int n, const unsigned long long *stamp)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        z[i] = y[i] + (unsigned)(*stamp >> 32) + (unsigned)*stamp;
}

static CUstreamBatchMemOpParams write32(CUdeviceptr a, unsigned v)
{
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    p.writeValue.address = a;
    p.writeValue.value = v;
    return p;
}

static CUstreamBatchMemOpParams write64(CUdeviceptr a, unsigned long long v)
{
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p.writeValue.address = a;
    p.writeValue.value64 = v;
    return p;
}

static CUstreamBatchMemOpParams wait_geq(CUdeviceptr a, unsigned v)
{
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    p.waitValue.address = a;
    p.waitValue.value = v;
    p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    return p;
}

static void expect(const char *what, const std::vector<unsigned> &got, const std::vector<unsigned> &x, unsigned k,
                   unsigned long long stamp)
{
    for (int i = 0; i < N; i++) {
        unsigned want = x[i] * k + (unsigned)i + (unsigned)(stamp >> 32) + (unsigned)stamp;
        WANT(got[i] == want, "%s: z[%d] = %u, want %u", what, i, got[i], want);
    }
}

int main()
{
    unsigned seed = run_seed("graphmemop");
    srand(seed);
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    std::vector<unsigned> hx(N), got(N);
    for (auto &v : hx)
        v = (unsigned)rand();
    unsigned *x, *y, *z;
    unsigned long long *words;   // [0]: done (low 32 bits), [1]: stamp
    CHECK(cudaMalloc(&x, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&y, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&z, N * sizeof(unsigned)));
    CHECK(cudaMalloc(&words, 2 * sizeof(unsigned long long)));
    CHECK(cudaMemcpy(x, hx.data(), N * sizeof(unsigned), cudaMemcpyHostToDevice));
    CUdeviceptr done = (CUdeviceptr)words, stamp = (CUdeviceptr)(words + 1);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));

    const unsigned k = 40503u;
    int n = N;
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaKernelNodeParams kp = {};
    void *a1[] = { &y, &x, &n, (void *)&k };
    kp.func = (void *)scale;
    kp.gridDim = dim3((N + 127) / 128);
    kp.blockDim = dim3(128);
    kp.kernelParams = a1;
    cudaGraphNode_t ka, kd;
    CHECK(cudaGraphAddKernelNode(&ka, g, nullptr, 0, &kp));
    unsigned long long st = ((unsigned long long)rand() << 32) | (unsigned)rand();
    CUstreamBatchMemOpParams signal[2] = { write32(done, 1), write64(stamp, st) };
    CUDA_BATCH_MEM_OP_NODE_PARAMS bp = { ctx, 2, signal, 0 };
    CUgraphNode nb, nw;
    CUgraphNode after_a = (CUgraphNode)ka;
    CU(cuGraphAddBatchMemOpNode(&nb, (CUgraph)g, &after_a, 1, &bp));
    CUstreamBatchMemOpParams wait[1] = { wait_geq(done, 1) };
    CUDA_BATCH_MEM_OP_NODE_PARAMS wp = { ctx, 1, wait, 0 };
    CU(cuGraphAddBatchMemOpNode(&nw, (CUgraph)g, &nb, 1, &wp));
    void *a2[] = { &z, &y, &n, &words };
    unsigned long long *stamp_ptr = words + 1;
    a2[3] = &stamp_ptr;
    kp.func = (void *)add_stamp;
    kp.kernelParams = a2;
    cudaGraphNode_t after_w = (cudaGraphNode_t)nw;
    CHECK(cudaGraphAddKernelNode(&kd, g, &after_w, 1, &kp));

    CUDA_BATCH_MEM_OP_NODE_PARAMS back;
    CU(cuGraphBatchMemOpNodeGetParams(nb, &back));
    WANT(back.count == 2 && back.paramArray[1].writeValue.value64 == st, "read back %u ops", back.count);
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(nb, &type));
    WANT(type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "node type %d", (int)type);

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (int l = 0; l < 4; l++) {
        if (l) {
            st = ((unsigned long long)rand() << 32) | (unsigned)rand();
            signal[1] = write64(stamp, st);
            CU(cuGraphExecBatchMemOpNodeSetParams((CUgraphExec)exec, nb, &bp));
        }
        CHECK(cudaMemsetAsync(words, 0, 2 * sizeof(unsigned long long), s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(got.data(), z, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        unsigned long long w[2];
        CHECK(cudaMemcpyAsync(w, words, sizeof w, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        WANT((unsigned)w[0] == 1 && w[1] == st, "launch %d: done %llu stamp %llx, want 1 %llx", l, w[0], w[1], st);
        expect("built", got, hx, k, st);
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));

    // Captured: a batch on a capturing stream becomes a node.
    st = ((unsigned long long)rand() << 32) | (unsigned)rand();
    signal[1] = write64(stamp, st);
    cudaGraph_t cap;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    scale<<<(N + 127) / 128, 128, 0, s>>>(y, x, N, k);
    CU(cuStreamBatchMemOp((CUstream)s, 2, signal, 0));
    add_stamp<<<(N + 127) / 128, 128, 0, s>>>(z, y, N, stamp_ptr);
    CHECK(cudaStreamEndCapture(s, &cap));
    size_t count = 0;
    CHECK(cudaGraphGetNodes(cap, nullptr, &count));
    WANT(count == 3, "the capture has %zu nodes", count);
    std::vector<cudaGraphNode_t> nodes(count);
    CHECK(cudaGraphGetNodes(cap, nodes.data(), &count));
    int batches = 0;
    for (cudaGraphNode_t nd : nodes) {
        CUgraphNodeType t;
        CU(cuGraphNodeGetType((CUgraphNode)nd, &t));
        if (t == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
            CU(cuGraphBatchMemOpNodeGetParams((CUgraphNode)nd, &back));
            WANT(back.count == 2 && back.paramArray[1].writeValue.value64 == st, "captured batch: %u ops", back.count);
            batches++;
        }
    }
    WANT(batches == 1, "the capture has %d batch nodes", batches);
    CHECK(cudaGraphInstantiate(&exec, cap, 0));
    for (int l = 0; l < 2; l++) {
        CHECK(cudaMemsetAsync(words, 0, 2 * sizeof(unsigned long long), s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(got.data(), z, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        expect("captured", got, hx, k, st);
    }
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(cap));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(z));
    CHECK(cudaFree(words));
    printf("graphmemop: 6 launches of graphs with batch memory-op nodes (built, captured)\n");
    printf("graphmemop: ok\n");
    return 0;
}
