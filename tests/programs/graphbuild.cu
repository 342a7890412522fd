// A CUDA graph built node by node through the runtime, checked on the CPU
// against random inputs (seed printed; SEED=N repeats a run): a memset, a
// kernel, a child graph (a kernel and an empty node), an event record and
// an event wait, a device-to-device copy, an empty join, a kernel and a copy
// into the program's (pinned) memory, which the graph writes at each launch. Then
// one kernel node changed in the executable graph
// (cudaGraphExecKernelNodeSetParams), the whole executable updated from a
// graph of the same shape (cudaGraphExecUpdate), and an update from a graph
// of another shape refused, leaving the executable as it was; a clone
// (cudaGraphClone, cudaGraphNodeFindInClone), the graph's picture
// (cudaGraphDebugDotPrint), its edges and parameters read back, edges and
// nodes removed, and a node disabled in the executable. Then the same
// without the copy into the program's memory.
// Prints "graphbuild: ok".
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

const int N = 1531, T = 64, B = (N + T - 1) / T, LAUNCHES = 5;

__global__ void add(unsigned *y, const unsigned *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += x[i];
}

__global__ void scale(unsigned *y, int n, unsigned k)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = y[i] * k + (unsigned)i;
}

struct bufs {
    unsigned *x, *x2, *y, *y2;
    unsigned *out;       // the program's memory, written by the graph
    cudaEvent_t ev;
};

struct built {
    cudaGraph_t g;
    cudaGraphNode_t fill, first_add, child, record, join, last_add;
};

static cudaKernelNodeParams kernel(void *fn, void **args)
{
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(B);
    p.blockDim = dim3(T);
    p.kernelParams = args;
    return p;
}

// y = v0; y += x; y = y * k + i (child); y2 = y; y2 += x2; out = y2
// (host_copy: the last copy, into the program's memory, is a node).
// extra: one more empty node (another shape).
static built build(const bufs &b, unsigned v0, unsigned k, bool extra, bool host_copy = true)
{
    static int n = N;
    // Kernel arguments are copied when a node is made: these may change.
    unsigned *x = b.x, *x2 = b.x2, *y = b.y, *y2 = b.y2;
    unsigned kk = k;
    void *add1[] = { &y, &x, &n }, *add2[] = { &y2, &x2, &n }, *sc[] = { &y, &n, &kk };

    built r;
    cudaGraph_t g, child;
    CHECK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t fill, a1, ch, rec, copy, wait, join, a2, back;
    cudaMemsetParams m = {};
    m.dst = b.y;
    m.value = v0;
    m.elementSize = 4;
    m.width = N;
    m.height = 1;
    CHECK(cudaGraphAddMemsetNode(&fill, g, NULL, 0, &m));
    cudaKernelNodeParams p = kernel((void *)add, add1);
    CHECK(cudaGraphAddKernelNode(&a1, g, &fill, 1, &p));

    CHECK(cudaGraphCreate(&child, 0));
    cudaGraphNode_t c0, c1;
    p = kernel((void *)scale, sc);
    CHECK(cudaGraphAddKernelNode(&c0, child, NULL, 0, &p));
    CHECK(cudaGraphAddEmptyNode(&c1, child, &c0, 1));
    CHECK(cudaGraphAddChildGraphNode(&ch, g, &a1, 1, child));
    CHECK(cudaGraphDestroy(child));   // the node holds its own copy

    CHECK(cudaGraphAddEventRecordNode(&rec, g, &ch, 1, b.ev));
    CHECK(cudaGraphAddMemcpyNode1D(&copy, g, &ch, 1, b.y2, b.y, N * sizeof(unsigned), cudaMemcpyDeviceToDevice));
    CHECK(cudaGraphAddEventWaitNode(&wait, g, &copy, 1, b.ev));
    cudaGraphNode_t both[] = { rec, wait };
    CHECK(cudaGraphAddEmptyNode(&join, g, both, 2));
    p = kernel((void *)add, add2);
    CHECK(cudaGraphAddKernelNode(&a2, g, &join, 1, &p));
    back = a2;
    if (host_copy)
        CHECK(cudaGraphAddMemcpyNode1D(&back, g, &a2, 1, b.out, b.y2, N * sizeof(unsigned),
                                       cudaMemcpyDeviceToHost));
    if (extra) {
        cudaGraphNode_t e;
        CHECK(cudaGraphAddEmptyNode(&e, g, &back, 1));
    }
    r.g = g;
    r.fill = fill;
    r.first_add = a1;
    r.child = ch;
    r.record = rec;
    r.join = join;
    r.last_add = a2;
    return r;
}

static void cpu(std::vector<unsigned> &want, const std::vector<unsigned> &x, const std::vector<unsigned> &x2,
                unsigned v0, unsigned k)
{
    for (int i = 0; i < N; i++)
        want[i] = (v0 + x[i]) * k + (unsigned)i + x2[i];
}

static void expect(const char *what, const unsigned *got, const std::vector<unsigned> &want)
{
    for (int i = 0; i < N; i++)
        WANT(got[i] == want[i], "%s: out[%d] = %u, want %u", what, i, got[i], want[i]);
}

int main()
{
    unsigned seed = run_seed("graphbuild");
    seed_rng(seed);
    const size_t bytes = N * sizeof(unsigned);
    bufs b;
    CHECK(cudaMalloc(&b.x, bytes));
    CHECK(cudaMalloc(&b.x2, bytes));
    CHECK(cudaMalloc(&b.y, bytes));
    CHECK(cudaMalloc(&b.y2, bytes));
    std::vector<unsigned> hx(N), hx2(N), want(N);
    unsigned *out;
    CHECK(cudaMallocHost(&out, bytes));   // pinned, as copies in graphs want
    b.out = out;
    CHECK(cudaEventCreateWithFlags(&b.ev, cudaEventDisableTiming));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < N; i++)
        hx2[i] = seed_next32();
    CHECK(cudaMemcpy(b.x2, hx2.data(), bytes, cudaMemcpyHostToDevice));

    unsigned v0 = seed_next32(), k = seed_next32() | 1u;
    built g = build(b, v0, k, false);
    size_t nodes = 0, roots = 0;
    CHECK(cudaGraphGetNodes(g.g, NULL, &nodes));
    CHECK(cudaGraphGetRootNodes(g.g, NULL, &roots));
    WANT(nodes == 9 && roots == 1, "the graph has %zu nodes and %zu roots, want 9 and 1", nodes, roots);
    // Its shape and parameters read back.
    size_t count = 0;
    CHECK(cudaGraphNodeGetDependencies(g.join, NULL, NULL, &count));
    WANT(count == 2, "the join has %zu dependencies, want 2", count);
    cudaGraphNode_t after[4] = {};
    count = 4;
    CHECK(cudaGraphNodeGetDependentNodes(g.child, after, NULL, &count));
    WANT(count == 2 && (after[0] == g.record || after[1] == g.record),
         "the child graph node has %zu dependents, want 2 with the event record", count);
    CHECK(cudaGraphGetEdges(g.g, NULL, NULL, NULL, &count));
    WANT(count == 9, "the graph has %zu edges, want 9", count);
    cudaMemsetParams mp;
    CHECK(cudaGraphMemsetNodeGetParams(g.fill, &mp));
    WANT(mp.dst == b.y && mp.value == v0 && mp.elementSize == 4 && mp.width == N && mp.height == 1,
         "the memset node reads back value %u width %zu", mp.value, mp.width);
    cudaEvent_t recorded;
    CHECK(cudaGraphEventRecordNodeGetEvent(g.record, &recorded));
    WANT(recorded == b.ev, "the event record node names another event");

    // Edges and nodes removed from a scratch graph.
    cudaGraph_t scratch;
    CHECK(cudaGraphCreate(&scratch, 0));
    cudaGraphNode_t e1, e2;
    CHECK(cudaGraphAddEmptyNode(&e1, scratch, NULL, 0));
    CHECK(cudaGraphAddEmptyNode(&e2, scratch, NULL, 0));
    CHECK(cudaGraphAddDependencies(scratch, &e1, &e2, NULL, 1));
    CHECK(cudaGraphGetRootNodes(scratch, NULL, &count));
    WANT(count == 1, "after adding an edge %zu roots, want 1", count);
    CHECK(cudaGraphRemoveDependencies(scratch, &e1, &e2, NULL, 1));
    CHECK(cudaGraphGetEdges(scratch, NULL, NULL, NULL, &count));
    WANT(count == 0, "after removing the edge %zu edges", count);
    CHECK(cudaGraphDestroyNode(e2));
    CHECK(cudaGraphGetNodes(scratch, NULL, &count));
    WANT(count == 1, "after destroying a node %zu nodes, want 1", count);
    CHECK(cudaGraphDestroy(scratch));

    // Its picture in Graphviz's language, written in this process's files.
    char dot[64];
    snprintf(dot, sizeof dot, "/tmp/graphbuild-%d.dot", (int)getpid());
    CHECK(cudaGraphDebugDotPrint(g.g, dot, 0));
    FILE *f = fopen(dot, "r");
    WANT(f, "cudaGraphDebugDotPrint wrote no %s", dot);
    char text[8192];
    size_t len = fread(text, 1, sizeof text - 1, f);
    text[len] = 0;
    fclose(f);
    remove(dot);
    int edges = 0;
    for (const char *q = text; (q = strstr(q, "->")); q += 2)
        edges++;
    WANT(strstr(text, "digraph") && edges >= 9, "the dot file has %d edges, want 9 or more:\n%s", edges, text);

    // A clone runs the same work; its nodes are found from the original's.
    cudaGraph_t clone;
    CHECK(cudaGraphClone(&clone, g.g));
    cudaGraphNode_t twin;
    CHECK(cudaGraphNodeFindInClone(&twin, g.first_add, clone));
    cudaGraphNodeType type;
    CHECK(cudaGraphNodeGetType(twin, &type));
    WANT(twin != g.first_add && type == cudaGraphNodeTypeKernel, "the clone's twin of a kernel node has type %d",
         (int)type);
    cudaGraphExec_t cexec;
    CHECK(cudaGraphInstantiate(&cexec, clone, 0));
    for (int i = 0; i < N; i++)
        hx[i] = seed_next32();
    CHECK(cudaMemcpy(b.x, hx.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(cexec, s));
    CHECK(cudaStreamSynchronize(s));
    cpu(want, hx, hx2, v0, k);
    expect("the clone", out, want);
    CHECK(cudaGraphExecDestroy(cexec));
    CHECK(cudaGraphDestroy(clone));

    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, g.g, 0));

    // Each launch reads the inputs copied just before it and writes out.
    for (int l = 0; l < LAUNCHES; l++) {
        for (int i = 0; i < N; i++)
            hx[i] = seed_next32();
        CHECK(cudaMemcpyAsync(b.x, hx.data(), bytes, cudaMemcpyHostToDevice, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaStreamSynchronize(s));
        cpu(want, hx, hx2, v0, k);
        expect("launch", out, want);
    }

    // The first add reads x2 instead of x, in the executable only.
    static int n = N;
    void *args[] = { &b.y, &b.x2, &n };
    cudaKernelNodeParams p = kernel((void *)add, args);
    CHECK(cudaGraphExecKernelNodeSetParams(exec, g.first_add, &p));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    cpu(want, hx2, hx2, v0, k);
    expect("after cudaGraphExecKernelNodeSetParams", out, want);

    // The last add disabled: it runs as an empty node until enabled again.
    CHECK(cudaGraphNodeSetEnabled(exec, g.last_add, 0));
    unsigned enabled = 1;
    CHECK(cudaGraphNodeGetEnabled(exec, g.last_add, &enabled));
    WANT(enabled == 0, "the disabled node reads back enabled");
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        want[i] -= hx2[i];
    expect("with the last add disabled", out, want);
    CHECK(cudaGraphNodeSetEnabled(exec, g.last_add, 1));

    // The whole executable from a graph of the same shape, new constants.
    unsigned v1 = seed_next32(), k1 = seed_next32() | 1u;
    built g2 = build(b, v1, k1, false);
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(exec, g2.g, &info));
    WANT(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    cpu(want, hx, hx2, v1, k1);
    expect("after cudaGraphExecUpdate", out, want);

    // Another shape: refused, the executable unchanged.
    built g3 = build(b, seed_next32(), seed_next32(), true);
    cudaError_t e = cudaGraphExecUpdate(exec, g3.g, &info);
    WANT(e == cudaErrorGraphExecUpdateFailure && info.result == cudaGraphExecUpdateErrorTopologyChanged,
         "an update from another shape: %s, result %d", cudaGetErrorName(e), (int)info.result);
    cudaGetLastError();
    for (int i = 0; i < N; i++)
        out[i] = 0;
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    expect("after the refused update", out, want);

    CHECK(cudaGraphExecDestroy(exec));

    // The same without the copy into the program's memory: all its work is
    // the device's (through rig, one graph launch on the agent). The
    // program copies the result out after each launch.
    built d = build(b, v0, k, false, false), d2 = build(b, v1, k1, false, false);
    CHECK(cudaGraphInstantiate(&exec, d.g, 0));
    for (int l = 0; l < LAUNCHES; l++) {
        for (int i = 0; i < N; i++)
            hx[i] = seed_next32();
        CHECK(cudaMemcpyAsync(b.x, hx.data(), bytes, cudaMemcpyHostToDevice, s));
        CHECK(cudaGraphLaunch(exec, s));
        CHECK(cudaMemcpyAsync(out, b.y2, bytes, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        cpu(want, hx, hx2, v0, k);
        expect("device-only launch", out, want);
    }
    CHECK(cudaGraphExecKernelNodeSetParams(exec, d.first_add, &p));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaMemcpyAsync(out, b.y2, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    cpu(want, hx2, hx2, v0, k);
    expect("device-only, after cudaGraphExecKernelNodeSetParams", out, want);
    CHECK(cudaGraphNodeSetEnabled(exec, d.last_add, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaMemcpyAsync(out, b.y2, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        want[i] -= hx2[i];
    expect("device-only, the last add disabled", out, want);
    CHECK(cudaGraphNodeSetEnabled(exec, d.last_add, 1));
    CHECK(cudaGraphExecUpdate(exec, d2.g, &info));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventSynchronize(b.ev));   // recorded by the graph's own node
    CHECK(cudaMemcpyAsync(out, b.y2, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    cpu(want, hx, hx2, v1, k1);
    expect("device-only, after cudaGraphExecUpdate", out, want);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(d.g));
    CHECK(cudaGraphDestroy(d2.g));
    CHECK(cudaGraphDestroy(g.g));
    CHECK(cudaGraphDestroy(g2.g));
    CHECK(cudaGraphDestroy(g3.g));
    CHECK(cudaEventDestroy(b.ev));
    CHECK(cudaFreeHost(out));
    CHECK(cudaStreamDestroy(s));
    for (unsigned *q : { b.x, b.x2, b.y, b.y2 })
        CHECK(cudaFree(q));
    printf("graphbuild: %d launches of %zu nodes, an exec kernel change, a disabled node, an update, a refused update\n",
           LAUNCHES + 4, nodes);
    printf("graphbuild: ok\n");
    return 0;
}
