/* softgpu stream capture and graphs through the driver API: captured work
 * runs only when its graph is launched, and every launch replays it; the
 * capture queries answer truthfully while capturing; events fork and join
 * other streams into a capture; capture modes refuse unsafe calls; misuse
 * (the legacy stream, a sync, unjoined work) gets the driver's errors; a
 * graph built node by node runs in dependency order; an executable graph's
 * kernel node takes new parameters; child graphs, event nodes and whole-
 * graph updates. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/seed.h"
#include "tests/cuda_ok.h"

#define N 1000
#define T 128
#define B ((N + T - 1) / T)

static CUcontext ctx;
static CUfunction add;   /* vecadd_i32(a, b, c, n): c = a + b */

static void setup(void)
{
    test_srand();
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t n;
    char *img = support_read_file(path, &n);
    cr_assert(img, "cannot read %s", path);
    CUmodule m;
    OK(cuModuleLoadData(&m, img));
    free(img);
    OK(cuModuleGetFunction(&add, m, "vecadd_i32"));
}

TestSuite(capture, .init = setup, .timeout = 60);
TestSuite(graph, .init = setup, .timeout = 60);

static CUdeviceptr upload(const int *h)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, N * sizeof(int)));
    OK(cuMemcpyHtoD(d, h, N * sizeof(int)));
    return d;
}

static void download(int *h, CUdeviceptr d)
{
    OK(cuMemcpyDtoH(h, d, N * sizeof(int)));
}

/* c = a + b on s. */
static CUresult launch_add(CUstream s, CUdeviceptr *a, CUdeviceptr *b, CUdeviceptr *c)
{
    static int n = N;
    void *args[] = { a, b, c, &n };
    return cuLaunchKernel(add, B, 1, 1, T, 1, 1, 0, s, args, NULL);
}

static void CUDA_CB count(void *p)
{
    atomic_fetch_add((_Atomic int *)p, 1);
}

static void random_ints(int *v)
{
    for (int i = 0; i < N; i++)
        v[i] = rand() % 100000 - 50000;
}

Test(capture, captured_work_runs_at_each_launch)
{
    int ha[N], hb[N], hc[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    int *out;
    OK(cuMemAllocHost((void **)&out, N * sizeof(int)));
    _Atomic int calls = 0;
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuMemsetD32Async(c, 7, N, s));
    OK(launch_add(s, &a, &b, &c));   /* c = a + b */
    cuuint64_t id = 0;
    CUgraph during = NULL;
    const CUgraphNode *deps = NULL;
    size_t ndeps = 0;
    OK(cuStreamGetCaptureInfo(s, &st, &id, &during, &deps, NULL, &ndeps));
    cr_assert(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id && during && ndeps == 1 && deps);
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(deps[0], &type));
    cr_assert_eq(type, CU_GRAPH_NODE_TYPE_KERNEL);
    OK(launch_add(s, &c, &b, &a));   /* a = c + b */
    OK(cuMemcpyDtoHAsync(out, c, N * sizeof(int), s));
    OK(cuLaunchHostFunc(s, count, (void *)&calls));
    CUgraph g;
    OK(cuStreamEndCapture(s, &g));
    cr_assert_eq(g, during);
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(cuStreamSynchronize(s));
    cr_assert_eq(calls, 0, "capture ran a host function");
    download(got, a);
    cr_assert_eq(memcmp(got, ha, sizeof got), 0, "capture ran a kernel");
    size_t nodes = 0;
    OK(cuGraphGetNodes(g, NULL, &nodes));
    cr_assert_eq(nodes, 5);

    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphDestroy(g));   /* the executable graph stands alone */
    const int R = 25;
    for (int r = 0; r < R; r++)
        OK(cuGraphLaunch(x, s));
    OK(cuStreamSynchronize(s));
    cr_assert_eq(calls, R);
    for (int i = 0; i < N; i++) {
        hc[i] = ha[i] + (2 * R - 1) * hb[i];
        ha[i] += 2 * R * hb[i];
    }
    download(got, a);
    cr_assert_eq(memcmp(got, ha, sizeof got), 0);
    cr_assert_eq(memcmp(out, hc, sizeof hc), 0);
    OK(cuGraphExecDestroy(x));
    cr_assert_eq(cuGraphExecDestroy(x), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    OK(cuMemFreeHost(out));
}

Test(capture, events_fork_and_join_streams)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c, d;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    OK(cuMemAlloc(&d, N * sizeof(int)));
    CUstream s, s2;
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamCreate(&s2, 0));
    CUevent fork, join;
    OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));

    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(launch_add(s, &a, &b, &c));      /* c = a + b */
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    CUstreamCaptureStatus st;
    cuuint64_t id1, id2;
    OK(cuStreamGetCaptureInfo(s, &st, &id1, NULL, NULL, NULL, NULL));
    OK(cuStreamGetCaptureInfo(s2, &st, &id2, NULL, NULL, NULL, NULL));
    cr_assert(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && id1 == id2, "s2 joined the capture");
    OK(launch_add(s2, &c, &b, &d));     /* d = c + b, beside */
    OK(launch_add(s, &c, &c, &a));      /* a = 2c */
    OK(cuEventRecord(join, s2));
    /* Unjoined: ending now fails and takes the capture down. */
    CUgraph g = (CUgraph)1;
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    cr_assert_null(g);
    OK(cuStreamIsCapturing(s2, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);

    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(launch_add(s, &a, &b, &c));
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    OK(launch_add(s2, &c, &b, &d));
    OK(launch_add(s, &c, &c, &a));
    OK(cuEventRecord(join, s2));
    OK(cuStreamWaitEvent(s, join, 0));
    const CUgraphNode *deps;
    size_t ndeps;
    CUgraph during;
    OK(cuStreamGetCaptureInfo(s, &st, &id1, &during, &deps, NULL, &ndeps));
    cr_assert_eq(ndeps, 2, "after the join s depends on both branches");
    /* Ending on the forked stream is not allowed. */
    cr_assert_eq(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(launch_add(s, &a, &b, &c));
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    OK(launch_add(s2, &c, &b, &d));
    OK(launch_add(s, &c, &c, &a));
    OK(cuEventRecord(join, s2));
    OK(cuStreamWaitEvent(s, join, 0));
    OK(cuStreamEndCapture(s, &g));
    size_t roots = 0;
    OK(cuGraphGetRootNodes(g, NULL, &roots));
    cr_assert_eq(roots, 1);
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, s2));   /* any stream of the context */
    OK(cuStreamSynchronize(s2));
    OK(cuGraphLaunch(x, s));
    OK(cuStreamSynchronize(s));
    OK(cuStreamSynchronize(s2));
    int hd[N];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) {
            int hc = ha[i] + hb[i];
            hd[i] = hc + hb[i];
            ha[i] = 2 * hc;
        }
    download(got, a);
    cr_assert_eq(memcmp(got, ha, sizeof got), 0);
    download(got, d);
    cr_assert_eq(memcmp(got, hd, sizeof got), 0);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuEventDestroy(fork));
    OK(cuEventDestroy(join));
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(s2));
}

Test(capture, modes_refuse_unsafe_calls)
{
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    CUgraph g;
    /* Global: an allocation is refused and spoils the capture. */
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuMemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    OK(cuStreamIsCapturing(s, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* This thread in relaxed mode may allocate during its capture. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemAlloc(&p, 64));
    OK(cuMemFree(p));
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
    /* Relaxed captures forbid nothing. */
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemAlloc(&p, 64));
    OK(cuMemFree(p));
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    mode = 7;
    cr_assert_eq(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

Test(capture, misuse_gets_the_drivers_errors)
{
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUgraph g;
    cr_assert_eq(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    /* The legacy stream while a blocking stream captures. */
    int *host = malloc(64);
    CUdeviceptr d;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    OK(cuMemAlloc(&d, 64));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    cr_assert_eq(cuMemsetD32Async(d, 1, 16, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* A sync or query of a capturing stream. */
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    cr_assert_eq(cuMemcpyHtoDAsync(d, host, 64, s), CUDA_SUCCESS);   /* captured */
    cr_assert_eq(cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Afterwards the stream and the NULL stream work as ever. */
    OK(cuMemsetD32Async(d, 3, 16, NULL));
    OK(cuMemsetD32Async(d, 3, 16, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemFree(d));
    OK(cuStreamDestroy(s));
    free(host);
}

Test(graph, explicit_nodes_run_in_dependency_order)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c, d;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    OK(cuMemAlloc(&d, N * sizeof(int)));
    int *out;
    OK(cuMemAllocHost((void **)&out, N * sizeof(int)));
    _Atomic int calls = 0;
    int n = N;

    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUgraphNode fill, k1, k2, copy, host, empty;
    CUDA_MEMSET_NODE_PARAMS mp = { .dst = c, .value = 5, .elementSize = 4, .width = N, .height = 1 };
    OK(cuGraphAddMemsetNode(&fill, g, NULL, 0, &mp, ctx));
    void *args1[] = { &c, &a, &d, &n };   /* d = c + a */
    CUDA_KERNEL_NODE_PARAMS kp = { .func = add, .gridDimX = B, .gridDimY = 1, .gridDimZ = 1,
                                   .blockDimX = T, .blockDimY = 1, .blockDimZ = 1, .kernelParams = args1 };
    OK(cuGraphAddKernelNode(&k1, g, &fill, 1, &kp));
    void *args2[] = { &d, &b, &c, &n };   /* c = d + b */
    kp.kernelParams = args2;
    OK(cuGraphAddKernelNode(&k2, g, NULL, 0, &kp));
    OK(cuGraphAddDependencies(g, &k1, &k2, NULL, 1));
    cr_assert_eq(cuGraphAddDependencies(g, &k2, &fill, NULL, 1), CUDA_ERROR_INVALID_VALUE, "a cycle");
    CUDA_MEMCPY3D cp = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = c,
                         .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out,
                         .WidthInBytes = N * sizeof(int), .Height = 1, .Depth = 1 };
    OK(cuGraphAddMemcpyNode(&copy, g, &k2, 1, &cp, ctx));
    CUDA_HOST_NODE_PARAMS hp = { .fn = count, .userData = (void *)&calls };
    OK(cuGraphAddHostNode(&host, g, &copy, 1, &hp));
    OK(cuGraphAddEmptyNode(&empty, g, &host, 1));
    size_t nodes = 0, roots = 0;
    OK(cuGraphGetNodes(g, NULL, &nodes));
    OK(cuGraphGetRootNodes(g, NULL, &roots));
    cr_assert(nodes == 6 && roots == 1);
    CUgraphNode listed[6];
    nodes = 6;
    OK(cuGraphGetNodes(g, listed, &nodes));
    cr_assert(listed[0] == fill && listed[5] == empty);
    OK(cuGraphGetRootNodes(g, listed, &roots));
    cr_assert_eq(listed[0], fill);

    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    OK(cuGraphLaunch(x, s));
    OK(cuGraphLaunch(x, NULL));
    OK(cuStreamSynchronize(s));
    OK(cuCtxSynchronize());
    cr_assert_eq(calls, 2);
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], 5 + ha[i] + hb[i], "[%d]", i);
    download(got, c);
    cr_assert_eq(memcmp(got, out, sizeof got), 0);

    /* The executable graph's k1 now adds b instead of a; g is unchanged. */
    void *args3[] = { &c, &b, &d, &n };
    kp.kernelParams = args3;
    OK(cuGraphExecKernelNodeSetParams(x, k1, &kp));
    cr_assert_eq(cuGraphExecKernelNodeSetParams(x, fill, &kp), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphLaunch(x, s));
    OK(cuStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], 5 + 2 * hb[i], "[%d]", i);
    CUgraphExec x2;
    OK(cuGraphInstantiateWithFlags(&x2, g, 0));
    OK(cuGraphLaunch(x2, s));
    OK(cuStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], 5 + ha[i] + hb[i], "[%d]", i);
    OK(cuGraphExecDestroy(x2));
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    cr_assert_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    OK(cuMemFreeHost(out));
}

Test(graph, bad_arguments)
{
    CUgraph g;
    cr_assert_eq(cuGraphCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphCreate(&g, 0));
    CUgraphNode e1, e2;
    OK(cuGraphAddEmptyNode(&e1, g, NULL, 0));
    CUgraphNode twice[] = { e1, e1 };
    cr_assert_eq(cuGraphAddEmptyNode(&e2, g, twice, 2), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuGraphAddEmptyNode(&e2, (CUgraph)&g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CUgraph other;
    OK(cuGraphCreate(&other, 0));
    cr_assert_eq(cuGraphAddEmptyNode(&e2, other, &e1, 1), CUDA_ERROR_INVALID_VALUE, "a node of another graph");
    CUDA_MEMSET_NODE_PARAMS mp = { .dst = 16, .value = 5, .elementSize = 4, .width = 4, .height = 1 };
    cr_assert_eq(cuGraphAddMemsetNode(&e2, g, NULL, 0, &mp, ctx), CUDA_ERROR_INVALID_VALUE);
    size_t n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(cuGraphLaunch((CUgraphExec)g, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(other));
    OK(cuGraphDestroy(g));
}

/* c = a + b as a kernel node of g after deps. */
static CUgraphNode add_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr *a, CUdeviceptr *b,
                            CUdeviceptr *c)
{
    static int count = N;
    void *args[] = { a, b, c, &count };
    CUDA_KERNEL_NODE_PARAMS p = { .func = add, .gridDimX = B, .gridDimY = 1, .gridDimZ = 1, .blockDimX = T,
                                  .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    CUgraphNode nd;
    OK(cuGraphAddKernelNode(&nd, g, deps, n, &p));
    return nd;
}

Test(graph, child_graphs_run_a_copy_taken_when_added)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c, d;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    OK(cuMemAlloc(&d, N * sizeof(int)));
    CUgraph child, g;
    OK(cuGraphCreate(&child, 0));
    add_node(child, NULL, 0, &a, &b, &c);            /* c = a + b */
    OK(cuGraphCreate(&g, 0));
    CUgraphNode ch, after;
    OK(cuGraphAddChildGraphNode(&ch, g, NULL, 0, child));
    add_node(child, NULL, 0, &b, &b, &c);            /* added later: not in g's copy */
    after = add_node(g, &ch, 1, &c, &a, &d);         /* d = c + a */
    (void)after;
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(ch, &type));
    cr_assert_eq(type, CU_GRAPH_NODE_TYPE_GRAPH);
    OK(cuGraphDestroy(child));
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], ha[i] + hb[i] + ha[i], "d[%d] = %d", i, got[i]);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    cr_assert_eq(cuGraphAddChildGraphNode(&ch, g, NULL, 0, g), CUDA_ERROR_INVALID_VALUE);
}

Test(graph, event_nodes_record_and_wait)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    CUevent e;
    OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUgraph g, h;
    OK(cuGraphCreate(&g, 0));
    CUgraphNode k, rec, wait;
    k = add_node(g, NULL, 0, &a, &b, &c);             /* c = a + b */
    OK(cuGraphAddEventRecordNode(&rec, g, &k, 1, e));
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(rec, &type));
    cr_assert_eq(type, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
    /* A second graph on another stream waits for the record. */
    OK(cuGraphCreate(&h, 0));
    OK(cuGraphAddEventWaitNode(&wait, h, NULL, 0, e));
    add_node(h, &wait, 1, &c, &c, &a);                /* a = 2c */
    CUgraphExec xg, xh;
    OK(cuGraphInstantiateWithFlags(&xg, g, 0));
    OK(cuGraphInstantiateWithFlags(&xh, h, 0));
    CUstream s1, s2;
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(cuGraphLaunch(xg, s1));
    OK(cuStreamSynchronize(s1));
    OK(cuEventQuery(e));                              /* the record node completed it */
    OK(cuGraphLaunch(xh, s2));
    OK(cuStreamSynchronize(s2));
    download(got, a);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], 2 * (ha[i] + hb[i]), "a[%d] = %d", i, got[i]);
    OK(cuGraphExecDestroy(xg));
    OK(cuGraphExecDestroy(xh));
    OK(cuGraphDestroy(g));
    OK(cuGraphDestroy(h));
    OK(cuEventDestroy(e));
    cr_assert_eq(cuGraphAddEventRecordNode(&rec, g, NULL, 0, e), CUDA_ERROR_INVALID_VALUE);
}

Test(graph, exec_update_takes_a_same_shaped_graph_only)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    CUgraph g1, g2, g3;
    OK(cuGraphCreate(&g1, 0));
    add_node(g1, NULL, 0, &a, &b, &c);                /* c = a + b */
    OK(cuGraphCreate(&g2, 0));
    add_node(g2, NULL, 0, &a, &a, &c);                /* c = 2a */
    OK(cuGraphCreate(&g3, 0));
    CUgraphNode k3 = add_node(g3, NULL, 0, &a, &a, &c);
    CUgraphNode e3;
    OK(cuGraphAddEmptyNode(&e3, g3, &k3, 1));
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g1, 0));
    CUgraphExecUpdateResultInfo info;
    OK(cuGraphExecUpdate(x, g2, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, c);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], 2 * ha[i], "after the update c[%d] = %d", i, got[i]);
    cr_assert_eq(cuGraphExecUpdate(x, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    OK(cuMemsetD32(c, 0, N));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, c);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], 2 * ha[i], "after the refused update c[%d] = %d", i, got[i]);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g1));
    OK(cuGraphDestroy(g2));
    OK(cuGraphDestroy(g3));
}

Test(graph, clones_run_the_same_work_and_find_their_nodes)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    CUgraph g, clone;
    OK(cuGraphCreate(&g, 0));
    CUgraphNode k = add_node(g, NULL, 0, &a, &b, &c);   /* c = a + b */
    CUgraphNode e;
    OK(cuGraphAddEmptyNode(&e, g, &k, 1));
    OK(cuGraphClone(&clone, g));
    OK(cuGraphDestroy(g));                            /* the clone stands alone */
    size_t n = 0;
    OK(cuGraphGetNodes(clone, NULL, &n));
    cr_assert_eq(n, 2);
    CUgraphNode twin;
    cr_assert_eq(cuGraphNodeFindInClone(&twin, k, clone), CUDA_ERROR_INVALID_VALUE, "k died with g");
    char path[] = "/tmp/test_softgpu_graph-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    OK(cuGraphDebugDotPrint(clone, path, 0));
    size_t len;
    char *text = support_read_file(path, &len);
    unlink(path);
    cr_assert(text && strstr(text, "digraph") && strstr(text, "n0 -> n1"), "%s", text ? text : "(none)");
    free(text);
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, clone, 0));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, c);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], ha[i] + hb[i], "c[%d] = %d", i, got[i]);
    OK(cuGraphExecDestroy(x));
    /* Found from a live original. */
    CUgraph g2, clone2;
    OK(cuGraphCreate(&g2, 0));
    CUgraphNode k2 = add_node(g2, NULL, 0, &a, &b, &c);
    OK(cuGraphClone(&clone2, g2));
    OK(cuGraphNodeFindInClone(&twin, k2, clone2));
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(twin, &type));
    cr_assert(twin != k2 && type == CU_GRAPH_NODE_TYPE_KERNEL);
    OK(cuGraphDestroy(g2));
    OK(cuGraphDestroy(clone2));
    OK(cuGraphDestroy(clone));
}

Test(graph, edges_read_back_removed_and_nodes_disabled)
{
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c, d;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    OK(cuMemAlloc(&d, N * sizeof(int)));
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = { .dst = d, .value = 5, .elementSize = 4, .width = N, .height = 1 };
    CUgraphNode fill, k1, k2, e;
    OK(cuGraphAddMemsetNode(&fill, g, NULL, 0, &m, ctx));
    k1 = add_node(g, &fill, 1, &a, &b, &c);            /* c = a + b */
    k2 = add_node(g, &k1, 1, &c, &a, &d);              /* d = c + a */
    OK(cuGraphAddEmptyNode(&e, g, &k2, 1));
    CUgraphNode from[4], to[4];
    size_t n = 4;
    OK(cuGraphGetEdges(g, from, to, NULL, &n));
    cr_assert_eq(n, 3);
    cr_assert(from[0] == fill && to[0] == k1 && from[2] == k2 && to[2] == e);
    n = 4;
    CUgraphNode deps[4];
    OK(cuGraphNodeGetDependentNodes(k1, deps, NULL, &n));
    cr_assert(n == 1 && deps[0] == k2);
    OK(cuGraphNodeGetDependencies(k1, deps, NULL, &n));
    cr_assert(n == 1 && deps[0] == fill);
    CUDA_MEMSET_NODE_PARAMS back;
    OK(cuGraphMemsetNodeGetParams(fill, &back));
    cr_assert(back.dst == d && back.value == 5 && back.width == N && back.elementSize == 4);
    cr_assert_eq(cuGraphRemoveDependencies(g, &e, &k1, NULL, 1), CUDA_ERROR_INVALID_VALUE, "no such edge");
    OK(cuGraphRemoveDependencies(g, &k2, &e, NULL, 1));
    OK(cuGraphDestroyNode(e));
    OK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(n, 3);
    OK(cuGraphGetEdges(g, NULL, NULL, NULL, &n));
    cr_assert_eq(n, 2);

    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphNodeSetEnabled(x, k2, 0));
    unsigned on = 1;
    OK(cuGraphNodeGetEnabled(x, k2, &on));
    cr_assert_eq(on, 0);
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], 5, "with k2 disabled d[%d] = %d", i, got[i]);
    OK(cuGraphNodeSetEnabled(x, k2, 1));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    download(got, d);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], 2 * ha[i] + hb[i], "enabled again d[%d] = %d", i, got[i]);
    cr_assert_eq(cuGraphNodeSetEnabled(x, fill, 1) == CUDA_SUCCESS, true, "a memset node may be toggled");
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
}

/* A module unloads while graphs that name its kernels live (a program that
 * never destroys its graphs ends with cudart unloading its modules); their
 * queued launches still hold it. */
Test(graph, modules_unload_while_graphs_name_their_kernels)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t len;
    char *img = support_read_file(path, &len);
    cr_assert(img);
    CUmodule m;
    CUfunction f;
    OK(cuModuleLoadData(&m, img));
    free(img);
    OK(cuModuleGetFunction(&f, m, "vecadd_i32"));
    int ha[N], hb[N], got[N];
    random_ints(ha);
    random_ints(hb);
    CUdeviceptr a = upload(ha), b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    static int count = N;
    void *args[] = { &a, &b, &c, &count };
    CUDA_KERNEL_NODE_PARAMS p = { .func = f, .gridDimX = B, .gridDimY = 1, .gridDimZ = 1, .blockDimX = T,
                                  .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    CUgraph g;
    CUgraphNode k;
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddKernelNode(&k, g, NULL, 0, &p));
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, NULL));
    OK(cuModuleUnload(m));   /* waits for the queued launch only */
    download(got, c);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], ha[i] + hb[i], "c[%d] = %d", i, got[i]);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
}

/* Each block's first thread waits until every block arrived (blocks run one
 * after another would never finish), then stores the grid workspace only a
 * cooperative launch has (zero otherwise); as test_softgpu_launch's. */
static const char coop_ptx[] =
    ".version 9.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry arrive(.param .u64 counter, .param .u64 out)\n{\n"
    "  .reg .pred %p<4>;\n  .reg .b32 %r<10>;\n  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [counter];\n  ld.param.u64 %rd2, [out];\n"
    "  mov.u32 %r1, %tid.x;\n  setp.ne.u32 %p1, %r1, 0;\n  @%p1 bra DONE;\n"
    "  mov.u32 %r2, %nctaid.x;\n  atom.add.release.gpu.u32 %r3, [%rd1], 1;\n"
    "SPIN:\n  ld.acquire.gpu.u32 %r4, [%rd1];\n  setp.lt.u32 %p2, %r4, %r2;\n  @%p2 bra SPIN;\n"
    "  mov.u32 %r5, %ctaid.x;\n  mul.wide.u32 %rd3, %r5, 8;\n  add.s64 %rd4, %rd2, %rd3;\n"
    "  mov.u32 %r6, %envreg1;\n  mov.u32 %r7, %envreg2;\n"
    "  st.global.u32 [%rd4], %r7;\n  st.global.u32 [%rd4+4], %r6;\n"
    "DONE:\n  ret;\n}\n";

/* A kernel node's launch attributes: cooperation set on the node makes its
 * blocks run at once with a grid workspace at every launch; the hints read
 * back; CopyAttributes carries them to another node; clones keep them. */
Test(graph, kernel_node_attributes)
{
    CUmodule m;
    OK(cuModuleLoadData(&m, coop_ptx));
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "arrive"));
    enum { BLOCKS = 24 };
    CUdeviceptr counter, out;
    OK(cuMemAlloc(&counter, 4));
    OK(cuMemAlloc(&out, BLOCKS * 8));
    OK(cuMemsetD8(out, 0, BLOCKS * 8));
    void *args[] = { &counter, &out };
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS zero = { .dst = counter, .value = 0, .elementSize = 4, .width = 1, .height = 1 };
    CUgraphNode reset, k, k2;
    OK(cuGraphAddMemsetNode(&reset, g, NULL, 0, &zero, ctx));
    CUDA_KERNEL_NODE_PARAMS p = { .func = f, .gridDimX = BLOCKS, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
                                  .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    OK(cuGraphAddKernelNode(&k, g, &reset, 1, &p));
    CUkernelNodeAttrValue v;
    memset(&v, 0x55, sizeof v);
    OK(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    cr_expect_eq(v.cooperative, 0);
    v = (CUkernelNodeAttrValue){ .cooperative = 1 };
    OK(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    v = (CUkernelNodeAttrValue){ .priority = -1 };
    OK(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    memset(&v, 0, sizeof v);
    OK(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    cr_expect_eq(v.cooperative, 1);
    OK(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    cr_expect_eq(v.priority, -1);
    /* Ids not for graph nodes, clusters, other node types, NULLs. */
    cr_expect_eq(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, &v),
                 CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuGraphKernelNodeGetAttribute(reset, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL), CUDA_ERROR_INVALID_VALUE);
    v = (CUkernelNodeAttrValue){ .clusterDim = { 2, 1, 1 } };
    cr_expect_eq(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v),
                 CUDA_ERROR_NOT_SUPPORTED);
    cr_expect_eq(cuGraphKernelNodeCopyAttributes(reset, k), CUDA_ERROR_INVALID_VALUE);
    /* Copied to a second node of another graph. */
    CUgraph g2;
    OK(cuGraphCreate(&g2, 0));
    OK(cuGraphAddKernelNode(&k2, g2, NULL, 0, &p));
    OK(cuGraphKernelNodeCopyAttributes(k2, k));
    memset(&v, 0, sizeof v);
    OK(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    cr_expect_eq(v.priority, -1);
    OK(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    cr_expect_eq(v.cooperative, 1);
    /* Every launch runs the blocks side by side with a workspace. */
    CUgraph c;
    OK(cuGraphClone(&c, g));
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, c, 0));
    for (int launch = 0; launch < 2; launch++) {
        OK(cuMemsetD8(out, 0, BLOCKS * 8));
        OK(cuGraphLaunch(x, NULL));
        OK(cuCtxSynchronize());
        uint64_t ws[BLOCKS];
        OK(cuMemcpyDtoH(ws, out, sizeof ws));
        for (unsigned b = 0; b < BLOCKS; b++) {
            cr_expect_neq(ws[b], 0, "launch %d: block %u saw no workspace", launch, b);
            cr_expect_eq(ws[b], ws[0], "launch %d: block %u saw another workspace", launch, b);
        }
    }
    OK(cuGraphExecDestroy(x));
    /* Cooperation taken off again: a plain launch, no workspace. */
    v = (CUkernelNodeAttrValue){ .cooperative = 0 };
    OK(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    OK(cuMemsetD8(out, 0, BLOCKS * 8));
    OK(cuMemsetD8(counter, 0x7f, 4));   /* already past every block: no wait */
    OK(cuGraphDestroyNode(reset));
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    uint64_t w0;
    OK(cuMemcpyDtoH(&w0, out, 8));
    cr_expect_eq(w0, 0);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(c));
    OK(cuGraphDestroy(g2));
    OK(cuGraphDestroy(g));
    OK(cuMemFree(counter));
    OK(cuMemFree(out));
    OK(cuModuleUnload(m));
}

static _Atomic int destroyed_a, destroyed_b;

static void CUDA_CB destroy_a(void *p)
{
    cr_assert_eq(p, (void *)&destroyed_a);
    atomic_fetch_add(&destroyed_a, 1);
}

static void CUDA_CB destroy_b(void *p)
{
    (void)p;
    atomic_fetch_add(&destroyed_b, 1);
}

static void CUDA_CB wait_flag(void *p)
{
    while (!atomic_load((_Atomic int *)p))
        usleep(1000);
}

/* User objects: the destructor runs once, when the last reference goes:
 * the program's, a graph's (taken or moved), a clone's, a child graph
 * node's, an executable graph's and a queued launch's. */
Test(graph, user_objects_die_with_their_last_reference)
{
    atomic_store(&destroyed_a, 0);
    atomic_store(&destroyed_b, 0);
    CUuserObject a, b;
    cr_expect_eq(cuUserObjectCreate(&a, &destroyed_a, destroy_a, 1, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuUserObjectCreate(&a, &destroyed_a, NULL, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                 CUDA_ERROR_INVALID_VALUE);
    OK(cuUserObjectCreate(&a, &destroyed_a, destroy_a, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    OK(cuUserObjectCreate(&b, NULL, destroy_b, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    OK(cuUserObjectRetain(a, 1));
    OK(cuUserObjectRelease(a, 2));
    cr_expect_eq(atomic_load(&destroyed_a), 0);
    cr_expect_eq(cuUserObjectRelease(a, 2), CUDA_ERROR_INVALID_VALUE, "more than it holds");

    /* A graph takes a reference to a; b's only reference moves into it. */
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphRetainUserObject(g, a, 1, 0));
    OK(cuGraphRetainUserObject(g, b, 1, CU_GRAPH_USER_OBJECT_MOVE));
    cr_expect_eq(cuGraphReleaseUserObject(g, a, 2), CUDA_ERROR_INVALID_VALUE);
    OK(cuUserObjectRelease(a, 1));   /* the program's last */
    cr_expect_eq(atomic_load(&destroyed_a), 0, "the graph still holds a");
    _Atomic int go = 0;
    CUDA_HOST_NODE_PARAMS hp = { .fn = wait_flag, .userData = (void *)&go };
    CUgraphNode hn;
    OK(cuGraphAddHostNode(&hn, g, NULL, 0, &hp));

    /* A clone and a child graph node hold their own. */
    CUgraph c, parent;
    OK(cuGraphClone(&c, g));
    OK(cuGraphCreate(&parent, 0));
    CUgraph empty;
    OK(cuGraphCreate(&empty, 0));
    OK(cuGraphRetainUserObject(empty, b, 1, 0));
    CUgraphNode child;
    OK(cuGraphAddChildGraphNode(&child, parent, NULL, 0, empty));
    OK(cuGraphDestroy(empty));
    OK(cuGraphReleaseUserObject(g, b, 1));
    OK(cuGraphDestroy(g));
    cr_expect_eq(atomic_load(&destroyed_a), 0, "the clone still holds a");
    cr_expect_eq(atomic_load(&destroyed_b), 0, "the clone and the child node still hold b");

    /* An executable graph, and its launch queued behind a host node that
     * waits: both outlive the graph and the executable. */
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, c, 0));
    OK(cuGraphDestroy(c));
    cr_expect_eq(atomic_load(&destroyed_a), 0, "the executable holds a");
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuGraphLaunch(x, s));
    OK(cuGraphExecDestroy(x));
    usleep(20000);
    cr_expect_eq(atomic_load(&destroyed_a), 0, "the queued launch holds a");
    atomic_store(&go, 1);
    OK(cuStreamSynchronize(s));
    for (int i = 0; i < 1000 && !atomic_load(&destroyed_a); i++)
        usleep(1000);
    cr_expect_eq(atomic_load(&destroyed_a), 1);
    cr_expect_eq(atomic_load(&destroyed_b), 0, "the child node still holds b");
    OK(cuGraphDestroy(parent));
    cr_expect_eq(atomic_load(&destroyed_b), 1);
    cr_expect_eq(cuUserObjectRetain(a, 1), CUDA_ERROR_INVALID_VALUE, "a is gone");
    OK(cuStreamDestroy(s));
}

/* Batch memory-op nodes: a wait on a word the graph's first node writes,
 * then 32- and 64-bit writes, at every launch; the node keeps its own copy
 * of the array; new values through the graph node and the executable's. */
Test(graph, batch_mem_op_nodes_run_their_operations)
{
    CUdeviceptr w;
    OK(cuMemAlloc(&w, 32));
    OK(cuMemsetD8(w, 0, 32));
    CUstreamBatchMemOpParams ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = w;
    ops[0].writeValue.value = 7;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = { .ctx = ctx, .count = 1, .paramArray = ops };
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUgraphNode first, second;
    OK(cuGraphAddBatchMemOpNode(&first, g, NULL, 0, &p));
    CUstreamBatchMemOpParams more[3];
    memset(more, 0, sizeof more);
    more[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    more[0].waitValue.address = w;
    more[0].waitValue.value = 7;
    more[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    more[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    more[1].writeValue.address = w + 8;
    more[1].writeValue.value64 = 0x123456789abcdefull;
    more[2].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
    CUDA_BATCH_MEM_OP_NODE_PARAMS q = { .ctx = ctx, .count = 3, .paramArray = more };
    OK(cuGraphAddBatchMemOpNode(&second, g, &first, 1, &q));
    more[1].writeValue.value64 = 0;   /* the node kept its own copy */
    CUDA_BATCH_MEM_OP_NODE_PARAMS back;
    OK(cuGraphBatchMemOpNodeGetParams(second, &back));
    cr_expect_eq(back.count, 3);
    cr_expect_eq(back.paramArray[1].writeValue.value64, 0x123456789abcdefull);
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(second, &type));
    cr_expect_eq(type, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    /* Bad arrays: an unknown operation, an unaligned word, flags. */
    CUstreamBatchMemOpParams bad = ops[0];
    bad.writeValue.address = w + 2;
    CUDA_BATCH_MEM_OP_NODE_PARAMS b = { .ctx = ctx, .count = 1, .paramArray = &bad };
    CUgraphNode nope;
    cr_expect_eq(cuGraphAddBatchMemOpNode(&nope, g, NULL, 0, &b), CUDA_ERROR_INVALID_VALUE);
    b.paramArray = ops;
    b.flags = 1;
    cr_expect_eq(cuGraphAddBatchMemOpNode(&nope, g, NULL, 0, &b), CUDA_ERROR_INVALID_VALUE);

    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int launch = 0; launch < 2; launch++) {
        OK(cuMemsetD8(w, 0, 32));
        OK(cuGraphLaunch(x, NULL));
        OK(cuCtxSynchronize());
        uint64_t got[2];
        OK(cuMemcpyDtoH(got, w, sizeof got));
        cr_expect_eq((uint32_t)got[0], 7);
        cr_expect_eq(got[1], 0x123456789abcdefull);
    }
    /* The executable's node takes new values; the graph's stays. */
    ops[0].writeValue.value = 9;
    more[0].waitValue.value = 9;
    more[1].writeValue.value64 = 42;
    OK(cuGraphExecBatchMemOpNodeSetParams(x, first, &p));
    OK(cuGraphExecBatchMemOpNodeSetParams(x, second, &q));
    cr_expect_eq(cuGraphExecBatchMemOpNodeSetParams(x, second, &b), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD8(w, 0, 32));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    uint64_t got[2];
    OK(cuMemcpyDtoH(got, w, sizeof got));
    cr_expect_eq((uint32_t)got[0], 9);
    cr_expect_eq(got[1], 42);
    OK(cuGraphBatchMemOpNodeGetParams(second, &back));
    cr_expect_eq(back.paramArray[1].writeValue.value64, 0x123456789abcdefull);
    /* The graph node set, a clone and a new executable see it. */
    more[1].writeValue.value64 = 5;
    more[0].waitValue.value = 7;
    OK(cuGraphBatchMemOpNodeSetParams(second, &q));
    CUgraph c;
    OK(cuGraphClone(&c, g));
    CUgraphExec y;
    OK(cuGraphInstantiateWithFlags(&y, c, 0));
    OK(cuMemsetD8(w, 0, 32));
    OK(cuGraphLaunch(y, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(got, w, sizeof got));
    cr_expect_eq(got[1], 5);
    OK(cuGraphExecDestroy(y));
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(c));
    OK(cuGraphDestroy(g));
    /* A captured batch is one batch node. */
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamBatchMemOp(s, 3, more, 0));
    OK(cuStreamEndCapture(s, &g));
    size_t n = 0;
    CUgraphNode only;
    OK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(n, 1);
    OK(cuGraphGetNodes(g, &only, &n));
    OK(cuGraphNodeGetType(only, &type));
    cr_expect_eq(type, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP);
    OK(cuGraphBatchMemOpNodeGetParams(only, &back));
    cr_expect_eq(back.count, 3);
    OK(cuGraphDestroy(g));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(w));
}

static uint64_t graph_mem(CUgraphMem_attribute a)
{
    cuuint64_t v = 0;
    OK(cuDeviceGetGraphMemAttribute(0, a, &v));
    return v;
}

/* Graph memory nodes: the address is fixed when the alloc node is added;
 * the graph fills it, a kernel reads it, a copy takes the result out; the
 * memory is in use from the alloc node's run to the free node's, or to the
 * program's free; the attributes count it; it goes with the last node. */
Test(graph, memory_nodes_allocate_and_free_in_the_graph)
{
    uint64_t used0 = graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    uint64_t reserved0 = graph_mem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    int ha[N], hb[N], got[N];
    random_ints(hb);
    CUdeviceptr b = upload(hb), c;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    CUgraph g;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = N * sizeof(int);
    CUgraphNode alloc, fill, k, free_node;
    OK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &ap));
    cr_assert_neq(ap.dptr, 0);
    CUdeviceptr a = ap.dptr;
    cr_expect_geq(graph_mem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), reserved0 + N * sizeof(int));
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0, "in use before the graph ran");
    CUDA_MEMSET_NODE_PARAMS m = { .dst = a, .value = 5, .elementSize = 4, .width = N, .height = 1 };
    OK(cuGraphAddMemsetNode(&fill, g, &alloc, 1, &m, ctx));
    static int n = N;
    void *args[] = { &a, &b, &c, &n };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = add, .gridDimX = B, .gridDimY = 1, .gridDimZ = 1, .blockDimX = T,
                                   .blockDimY = 1, .blockDimZ = 1, .kernelParams = args };
    OK(cuGraphAddKernelNode(&k, g, &fill, 1, &kp));
    OK(cuGraphAddMemFreeNode(&free_node, g, &k, 1, a));
    cr_expect_eq(cuGraphAddMemFreeNode(&free_node, g, &k, 1, b), CUDA_ERROR_INVALID_VALUE, "not a graph allocation");
    CUDA_MEM_ALLOC_NODE_PARAMS back;
    OK(cuGraphMemAllocNodeGetParams(alloc, &back));
    cr_expect_eq(back.dptr, a);
    cr_expect_geq(back.bytesize, N * sizeof(int));
    CUdeviceptr freed = 0;
    OK(cuGraphMemFreeNodeGetParams(free_node, &freed));
    cr_expect_eq(freed, a);
    CUgraphNodeType type;
    OK(cuGraphNodeGetType(free_node, &type));
    cr_expect_eq(type, CU_GRAPH_NODE_TYPE_MEM_FREE);

    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int launch = 0; launch < 2; launch++) {
        OK(cuMemsetD8(c, 0, N * sizeof(int)));
        OK(cuGraphLaunch(x, NULL));
        OK(cuCtxSynchronize());
        download(got, c);
        for (int i = 0; i < N; i++)
            cr_assert_eq(got[i], 5 + hb[i], "launch %d, element %d", launch, i);
    }
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0, "freed by the free node");
    cr_expect_geq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), used0 + N * sizeof(int));
    cuuint64_t zero = 0;
    OK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero));
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
    cr_expect_eq(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGraphMemTrim(0));
    OK(cuGraphExecDestroy(x));

    /* Without the free node the allocation outlives the launch, in use,
     * until the program frees it. */
    OK(cuGraphDestroyNode(free_node));
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, NULL));
    OK(cuCtxSynchronize());
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0 + back.bytesize);
    OK(cuMemcpyDtoH(ha, a, sizeof ha));
    for (int i = 0; i < N; i++)
        cr_assert_eq(ha[i], 5, "element %d of the graph's allocation", i);
    OK(cuMemFree(a));
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    /* The stream's worker lets go of the last launch just after it ran. */
    for (int i = 0; i < 1000 && graph_mem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) != reserved0; i++)
        usleep(1000);
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), reserved0, "the last node gave it back");
    cr_expect_neq(cuMemcpyDtoH(ha, a, 4), CUDA_SUCCESS, "the memory is gone");
    OK(cuMemFree(b));
    OK(cuMemFree(c));
}

/* cuMemAllocAsync and cuMemFreeAsync in a capture become memory nodes: the
 * address is known at once, and each launch runs between them. */
Test(capture, stream_ordered_allocation_becomes_memory_nodes)
{
    uint64_t used0 = graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    int hb[N], got[N];
    random_ints(hb);
    CUdeviceptr b = upload(hb), c, a = 0;
    OK(cuMemAlloc(&c, N * sizeof(int)));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemAllocAsync(&a, N * sizeof(int), s));
    cr_assert_neq(a, 0);
    OK(cuMemsetD32Async(a, 3, N, s));
    OK(launch_add(s, &a, &b, &c));
    OK(cuMemFreeAsync(a, s));
    OK(cuStreamEndCapture(s, &g));
    size_t n = 0;
    OK(cuGraphGetNodes(g, NULL, &n));
    cr_assert_eq(n, 4);
    CUgraphNode nodes[4];
    OK(cuGraphGetNodes(g, nodes, &n));
    int allocs = 0, frees = 0;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        OK(cuGraphNodeGetType(nodes[i], &t));
        allocs += t == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        frees += t == CU_GRAPH_NODE_TYPE_MEM_FREE;
    }
    cr_expect(allocs == 1 && frees == 1, "%d allocs, %d frees", allocs, frees);
    CUgraphExec x;
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    for (int launch = 0; launch < 2; launch++) {
        OK(cuMemsetD8(c, 0, N * sizeof(int)));
        OK(cuGraphLaunch(x, s));
        OK(cuStreamSynchronize(s));
        download(got, c);
        for (int i = 0; i < N; i++)
            cr_assert_eq(got[i], 3 + hb[i], "launch %d, element %d", launch, i);
    }
    cr_expect_eq(graph_mem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), used0);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(b));
    OK(cuMemFree(c));
}
