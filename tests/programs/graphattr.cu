// Kernel node launch attributes in CUDA graphs: a grid-wide reduction with
// cooperative groups' grid.sync() (each block sums its slice into partials,
// the grid waits, every block then reads all partials) as a graph kernel
// node made cooperative by cudaGraphKernelNodeSetAttribute (without it,
// grid.sync() cannot work), with a priority hint read back; the attributes
// survive cudaGraphClone and cudaGraphKernelNodeCopyAttributes carries them
// to a node of another graph; a captured cudaLaunchCooperativeKernel
// becomes a node with the cooperative attribute. Every launch is checked
// against the CPU (seed printed; SEED=N repeats a run).
// Prints "graphattr: ok".
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>

#include "check.h"

namespace cg = cooperative_groups;

#define WANT(cond, ...)                                                               \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

const int N = 20011, BLOCKS = 6, T = 128, ROUNDS = 2;

// out[r * gridDim.x + b]: the sum of x seen by block b in round r; each
// round then adds that sum (mod 1000) to every element.
__global__ void grid_sum(long long *x, long long *partial, long long *out, int n, int rounds)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ long long s[T];
    for (int r = 0; r < rounds; r++) {
        long long mine = 0;
        for (int i = grid.thread_rank(); i < n; i += grid.size())
            mine += x[i];
        s[threadIdx.x] = mine;
        __syncthreads();
        for (int k = blockDim.x / 2; k > 0; k /= 2) {
            if (threadIdx.x < k)
                s[threadIdx.x] += s[threadIdx.x + k];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            partial[blockIdx.x] = s[0];
        grid.sync();
        long long total = 0;
        for (int b = 0; b < gridDim.x; b++)
            total += partial[b];
        if (threadIdx.x == 0)
            out[r * gridDim.x + blockIdx.x] = total;
        grid.sync();
        for (int i = grid.thread_rank(); i < n; i += grid.size())
            x[i] += total % 1000;
        grid.sync();
    }
}

struct bufs {
    long long *x, *partial, *out;
    int n, rounds;
    void *args[5];
};

// Runs one launch of exec on s from the input h and checks every block's sums.
static void check_launch(const char *what, cudaGraphExec_t exec, cudaStream_t s, bufs &b,
                         const std::vector<long long> &h)
{
    CHECK(cudaMemcpyAsync(b.x, h.data(), N * sizeof(long long), cudaMemcpyHostToDevice, s));
    CHECK(cudaMemsetAsync(b.out, 0, ROUNDS * BLOCKS * sizeof(long long), s));
    CHECK(cudaGraphLaunch(exec, s));
    std::vector<long long> got(ROUNDS * BLOCKS);
    CHECK(cudaMemcpyAsync(got.data(), b.out, got.size() * sizeof(long long), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    std::vector<long long> ref(h);
    for (int r = 0; r < ROUNDS; r++) {
        long long total = 0;
        for (int i = 0; i < N; i++)
            total += ref[i];
        for (int k = 0; k < BLOCKS; k++)
            WANT(got[r * BLOCKS + k] == total, "%s: round %d block %d saw %lld, expected %lld", what, r, k,
                 got[r * BLOCKS + k], total);
        for (int i = 0; i < N; i++)
            ref[i] += total % 1000;
    }
}

static cudaKernelNodeParams node_params(bufs &b)
{
    cudaKernelNodeParams p = {};
    p.func = (void *)grid_sum;
    p.gridDim = dim3(BLOCKS);
    p.blockDim = dim3(T);
    p.kernelParams = b.args;
    return p;
}

int main()
{
    int dev = 0, coop = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    WANT(coop, "the device has no cooperative launch");
    unsigned seed = run_seed("graphattr");
    srand(seed);
    std::vector<long long> h(N);
    for (auto &v : h)
        v = rand() % 100000 - 50000;

    bufs b;
    b.n = N;
    b.rounds = ROUNDS;
    CHECK(cudaMalloc(&b.x, N * sizeof(long long)));
    CHECK(cudaMalloc(&b.partial, BLOCKS * sizeof(long long)));
    CHECK(cudaMalloc(&b.out, ROUNDS * BLOCKS * sizeof(long long)));
    b.args[0] = &b.x;
    b.args[1] = &b.partial;
    b.args[2] = &b.out;
    b.args[3] = &b.n;
    b.args[4] = &b.rounds;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // Built by hand: the node made cooperative, a priority hint.
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t k;
    cudaKernelNodeParams p = node_params(b);
    CHECK(cudaGraphAddKernelNode(&k, g, nullptr, 0, &p));
    cudaKernelNodeAttrValue v = {};
    CHECK(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributeCooperative, &v));
    WANT(v.cooperative == 0, "a new node is cooperative (%d)", v.cooperative);
    v = {};
    v.cooperative = 1;
    CHECK(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributeCooperative, &v));
    int lo = 0, hi = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    v = {};
    v.priority = hi;
    CHECK(cudaGraphKernelNodeSetAttribute(k, cudaLaunchAttributePriority, &v));
    v = {};
    CHECK(cudaGraphKernelNodeGetAttribute(k, cudaLaunchAttributePriority, &v));
    WANT(v.priority == hi, "priority read back %d, set %d", v.priority, hi);
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiate(&x, g, 0));
    for (int i = 0; i < 3; i++)
        check_launch("built", x, s, b, h);
    CHECK(cudaGraphExecDestroy(x));

    // A clone keeps them.
    cudaGraph_t c;
    CHECK(cudaGraphClone(&c, g));
    cudaGraphNode_t kc;
    CHECK(cudaGraphNodeFindInClone(&kc, k, c));
    v = {};
    CHECK(cudaGraphKernelNodeGetAttribute(kc, cudaLaunchAttributeCooperative, &v));
    WANT(v.cooperative == 1, "the clone's node is not cooperative");
    CHECK(cudaGraphInstantiate(&x, c, 0));
    check_launch("clone", x, s, b, h);
    CHECK(cudaGraphExecDestroy(x));

    // Copied onto a node of another graph.
    cudaGraph_t g2;
    CHECK(cudaGraphCreate(&g2, 0));
    cudaGraphNode_t k2;
    CHECK(cudaGraphAddKernelNode(&k2, g2, nullptr, 0, &p));
    CHECK(cudaGraphKernelNodeCopyAttributes(k2, k));
    v = {};
    CHECK(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributePriority, &v));
    WANT(v.priority == hi, "copied priority %d, want %d", v.priority, hi);
    CHECK(cudaGraphKernelNodeGetAttribute(k2, cudaLaunchAttributeCooperative, &v));
    WANT(v.cooperative == 1, "copied node is not cooperative");
    CHECK(cudaGraphInstantiate(&x, g2, 0));
    check_launch("copied", x, s, b, h);
    CHECK(cudaGraphExecDestroy(x));

    // A captured cooperative launch.
    cudaGraph_t cap;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaLaunchCooperativeKernel((void *)grid_sum, dim3(BLOCKS), dim3(T), b.args, 0, s));
    CHECK(cudaStreamEndCapture(s, &cap));
    size_t n = 0;
    CHECK(cudaGraphGetNodes(cap, nullptr, &n));
    WANT(n == 1, "the capture has %zu nodes", n);
    cudaGraphNode_t kk;
    CHECK(cudaGraphGetNodes(cap, &kk, &n));
    v = {};
    CHECK(cudaGraphKernelNodeGetAttribute(kk, cudaLaunchAttributeCooperative, &v));
    WANT(v.cooperative == 1, "the captured node is not cooperative");
    CHECK(cudaGraphInstantiate(&x, cap, 0));
    for (int i = 0; i < 2; i++)
        check_launch("captured", x, s, b, h);
    CHECK(cudaGraphExecDestroy(x));

    CHECK(cudaGraphDestroy(cap));
    CHECK(cudaGraphDestroy(g2));
    CHECK(cudaGraphDestroy(c));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    CHECK(cudaFree(b.x));
    CHECK(cudaFree(b.partial));
    CHECK(cudaFree(b.out));
    printf("graphattr: 7 launches of cooperative kernel nodes (built, cloned, copied, captured)\n");
    printf("graphattr: ok\n");
    return 0;
}
