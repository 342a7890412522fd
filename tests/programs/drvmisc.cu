// Driver calls that real code makes beside the common ones, each checked:
// the first API's launches (cuFuncSetBlockShape, cuParamSet*, cuLaunchGrid),
// stream attributes, the context's flags and usage count, a stream's
// context (v2), a device found by its PCI bus id, pools by location, the
// GPUDirect RDMA flush and the driver's error log (cuLogs*). Results of the
// launches are checked against the CPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <cuda.h>
#include <cuda_runtime.h>

// The first API is deprecated, and tested here on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

__global__ void axpy(float *y, const float *x, float a, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

#define CHECK_CU(call)                                                                \
    do {                                                                              \
        CUresult e_ = (call);                                                         \
        if (e_ != CUDA_SUCCESS) {                                                     \
            const char *name_ = "?";                                                  \
            cuGetErrorName(e_, &name_);                                               \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, name_);              \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static int callback_messages;
static char callback_text[512];

static void on_log(void *data, CUlogLevel level, char *message, size_t length)
{
    (void)level;
    (*(int *)data)++;
    snprintf(callback_text, sizeof callback_text, "%.*s", (int)length, message);
}

// The first API: block shape, shared size and parameters set piece by
// piece, then cuLaunchGrid on the NULL stream and cuLaunchGridAsync on s.
static int legacy_launches(float *dy, const float *dx, int n, CUstream s)
{
    CUfunction f;
    CHECK(cudaGetFuncBySymbol(&f, (const void *)axpy));
    CHECK_CU(cuFuncSetBlockShape(f, 128, 1, 1));
    CHECK_CU(cuFuncSetSharedSize(f, 0));
    CHECK_CU(cuParamSetSize(f, 24));
    CHECK_CU(cuParamSetv(f, 0, &dy, sizeof dy));
    CHECK_CU(cuParamSetv(f, 8, &dx, sizeof dx));
    CHECK_CU(cuParamSetf(f, 16, 2.0f));
    CHECK_CU(cuParamSeti(f, 20, (unsigned)n));
    EXPECT(cuParamSeti(f, 24, 1) == CUDA_ERROR_INVALID_VALUE);   // past the set size
    CHECK_CU(cuLaunchGrid(f, 8, 1));
    CHECK_CU(cuParamSetf(f, 16, 3.0f));
    CHECK_CU(cuLaunchGridAsync(f, 8, 1, s));
    CHECK_CU(cuStreamSynchronize(s));
    // One block of 128 threads covers the array with its stride loop.
    CHECK_CU(cuParamSetf(f, 16, 0.5f));
    CHECK_CU(cuLaunch(f));
    CHECK_CU(cuCtxSynchronize());
    return 0;
}

static int stream_attributes(CUstream s, CUstream t, CUdeviceptr some)
{
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.syncPolicy = CU_SYNC_POLICY_YIELD;
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
    memset(&v, 0, sizeof v);
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
    EXPECT(v.syncPolicy == CU_SYNC_POLICY_YIELD);
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = (void *)some;
    v.accessPolicyWindow.num_bytes = 4096;
    v.accessPolicyWindow.hitRatio = 0.5f;
    v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    CHECK_CU(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    memset(&v, 0, sizeof v);
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    EXPECT(v.accessPolicyWindow.base_ptr == (void *)some && v.accessPolicyWindow.num_bytes == 4096);
    EXPECT(v.accessPolicyWindow.hitRatio == 0.5f && v.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING);
    int priority = 1;
    CHECK_CU(cuStreamGetPriority(s, &priority));
    CHECK_CU(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &v));
    EXPECT(v.priority == priority);
    // t takes s's attributes.
    CHECK_CU(cuStreamCopyAttributes(t, s));
    memset(&v, 0, sizeof v);
    CHECK_CU(cuStreamGetAttribute(t, CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
    EXPECT(v.syncPolicy == CU_SYNC_POLICY_YIELD);
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.hitRatio = 2.0f;   // a ratio above 1 is refused
    EXPECT(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v) == CUDA_ERROR_INVALID_VALUE);
    return 0;
}

static int context_calls(CUdevice dev, CUstream s)
{
    CUcontext cur, attached, of_stream, of_stream_v1;
    CUgreenCtx green = (CUgreenCtx)1;
    CHECK_CU(cuCtxGetCurrent(&cur));
    unsigned flags = 0;
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    CHECK_CU(cuCtxGetFlags(&flags));
    EXPECT((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD);
    CHECK_CU(cuCtxSetFlags(CU_CTX_SCHED_AUTO));
    CHECK_CU(cuCtxAttach(&attached, 0));
    EXPECT(attached == cur);
    CHECK_CU(cuCtxDetach(attached));   // back to the count it had: still alive
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuStreamGetCtx(s, &of_stream_v1));
    CHECK_CU(cuStreamGetCtx_v2(s, &of_stream, &green));
    EXPECT(of_stream == of_stream_v1 && green == NULL);
    char bus[64];
    CUdevice found = -1;
    CHECK_CU(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    CHECK_CU(cuDeviceGetByPCIBusId(&found, bus));
    EXPECT(found == dev);
    EXPECT(cuDeviceGetByPCIBusId(&found, "not a bus id") == CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                        CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
    return 0;
}

static int pools_by_location(CUdevice dev)
{
    CUmemLocation here = { CU_MEM_LOCATION_TYPE_DEVICE, dev };
    CUmemoryPool by_device, by_location, current, mine;
    CHECK_CU(cuDeviceGetDefaultMemPool(&by_device, dev));
    CHECK_CU(cuMemGetDefaultMemPool(&by_location, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    EXPECT(by_device == by_location);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location = here;
    CHECK_CU(cuMemPoolCreate(&mine, &props));
    CHECK_CU(cuMemSetMemPool(&here, CU_MEM_ALLOCATION_TYPE_PINNED, mine));
    CHECK_CU(cuMemGetMemPool(&current, &here, CU_MEM_ALLOCATION_TYPE_PINNED));
    EXPECT(current == mine);
    CHECK_CU(cuDeviceGetMemPool(&current, dev));
    EXPECT(current == mine);
    // Access: the owner reads and writes; a peer device gets what it is granted.
    CUmemAccess_flags access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    CHECK_CU(cuMemPoolGetAccess(&access, mine, &here));
    EXPECT(access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    int devices = 0, peer = 0;
    CHECK_CU(cuDeviceGetCount(&devices));
    CUdevice other = (dev + 1) % (devices > 0 ? devices : 1);
    if (devices > 1 && cuDeviceCanAccessPeer(&peer, other, dev) == CUDA_SUCCESS && peer) {
        CUmemLocation there = { CU_MEM_LOCATION_TYPE_DEVICE, other };
        CHECK_CU(cuMemPoolGetAccess(&access, mine, &there));
        EXPECT(access == CU_MEM_ACCESS_FLAGS_PROT_NONE);
        CUmemAccessDesc grant = { there, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CHECK_CU(cuMemPoolSetAccess(mine, &grant, 1));
        CHECK_CU(cuMemPoolGetAccess(&access, mine, &there));
        EXPECT(access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        printf("drvmisc: a peer was granted access to a pool\n");
    }
    CHECK_CU(cuMemSetMemPool(&here, CU_MEM_ALLOCATION_TYPE_PINNED, by_device));
    CHECK_CU(cuMemPoolDestroy(mine));
    return 0;
}

// A module's and a library's kernels counted and enumerated, a kernel's
// library, and a library read from a PTX file and launched.
static const char fill_ptx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry fill(.param .u64 p, .param .u32 v)\n{\n"
    "  .reg .b64 %rd<3>;\n  .reg .b32 %r<5>;\n"
    "  ld.param.u64 %rd1, [p];\n  ld.param.u32 %r1, [v];\n  cvta.to.global.u64 %rd1, %rd1;\n"
    "  mov.u32 %r2, %tid.x;\n  add.u32 %r3, %r1, %r2;\n  mul.wide.u32 %rd2, %r2, 4;\n"
    "  add.u64 %rd1, %rd1, %rd2;\n  st.global.u32 [%rd1], %r3;\n  ret;\n}\n";

static int has_name(CUfunction f, const char *part)
{
    const char *name = NULL;
    return cuFuncGetName(&name, f) == CUDA_SUCCESS && name && strstr(name, part);
}

static int collections()
{
    CUfunction f;
    CHECK(cudaGetFuncBySymbol(&f, (const void *)axpy));
    CUmodule mod;
    CHECK_CU(cuFuncGetModule(&mod, f));
    unsigned count = 0;
    CHECK_CU(cuModuleGetFunctionCount(&count, mod));
    EXPECT(count >= 1 && count < 64);
    CUfunction fns[64];
    CHECK_CU(cuModuleEnumerateFunctions(fns, count, mod));
    int found = 0;
    for (unsigned i = 0; i < count; i++)
        found += has_name(fns[i], "axpy");
    EXPECT(found == 1);
    cudaKernel_t k;
    CHECK(cudaGetKernel(&k, (const void *)axpy));
    CUlibrary lib;
    CHECK_CU(cuKernelGetLibrary(&lib, (CUkernel)k));
    CHECK_CU(cuLibraryGetKernelCount(&count, lib));
    EXPECT(count >= 1 && count < 64);

    char path[] = "/tmp/drvmisc-XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    FILE *out = fdopen(fd, "w");
    EXPECT(out && fputs(fill_ptx, out) >= 0 && fclose(out) == 0);
    CUlibrary filelib;
    CUresult loaded = cuLibraryLoadFromFile(&filelib, path, NULL, NULL, 0, NULL, NULL, 0);
    unlink(path);
    CHECK_CU(loaded);
    EXPECT(cuLibraryLoadFromFile(&filelib, "/nonexistent/drvmisc.ptx", NULL, NULL, 0, NULL, NULL, 0) ==
           CUDA_ERROR_FILE_NOT_FOUND);
    CHECK_CU(cuLibraryGetKernelCount(&count, filelib));
    EXPECT(count == 1);
    CUkernel kernels[1];
    CHECK_CU(cuLibraryEnumerateKernels(kernels, 1, filelib));
    CUlibrary back;
    CHECK_CU(cuKernelGetLibrary(&back, kernels[0]));
    EXPECT(back == filelib);
    CUfunction fill;
    CHECK_CU(cuKernelGetFunction(&fill, kernels[0]));
    EXPECT(has_name(fill, "fill"));
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 32 * sizeof(unsigned)));
    unsigned base = 1000;
    void *params[] = { &d, &base };
    CHECK_CU(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    unsigned got[32];
    CHECK_CU(cuMemcpyDtoH(got, d, sizeof got));
    for (unsigned i = 0; i < 32; i++)
        EXPECT(got[i] == base + i);
    // The library's module finds the same kernel by name.
    CUmodule lmod;
    CHECK_CU(cuLibraryGetModule(&lmod, filelib));
    CHECK_CU(cuModuleGetFunctionCount(&count, lmod));
    EXPECT(count == 1);
    CUfunction fill2;
    CHECK_CU(cuModuleGetFunction(&fill2, lmod, "fill"));
    base = 5000;
    CHECK_CU(cuLaunchKernel(fill2, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CHECK_CU(cuMemcpyDtoH(got, d, sizeof got));
    for (unsigned i = 0; i < 32; i++)
        EXPECT(got[i] == base + i);
    CHECK_CU(cuMemFree(d));
    CHECK_CU(cuLibraryUnload(filelib));
    return 0;
}

// Stream memory operations in one batch: a word written, waited on, and
// a 64-bit word written after the wait; VMM access read back.
static int batch_and_access(CUdevice dev, CUstream s)
{
    CUdeviceptr words;
    CHECK_CU(cuMemAlloc(&words, 16));
    CHECK_CU(cuMemsetD8Async(words, 0, 16, s));   // on s: a ptds build's plain memset goes to another stream
    CUstreamBatchMemOpParams ops[4];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = words;
    ops[0].writeValue.value = 7;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = words;
    ops[1].waitValue.value = 7;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[2].writeValue.address = words + 8;
    ops[2].writeValue.value64 = 0x1122334455667788ull;
    ops[3].operation = CU_STREAM_MEM_OP_BARRIER;
    ops[3].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_SYS;
    CHECK_CU(cuStreamBatchMemOp(s, 4, ops, 0));
    CHECK_CU(cuStreamSynchronize(s));
    unsigned long long got[2];
    CHECK_CU(cuMemcpyDtoH(got, words, sizeof got));
    EXPECT((got[0] & 0xffffffffu) == 7 && got[1] == 0x1122334455667788ull);
    CHECK_CU(cuMemFree(words));

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CHECK_CU(cuMemCreate(&h, gran, &prop, 0));
    CHECK_CU(cuMemMap(va, gran, 0, h, 0));
    CUmemAccessDesc access = { prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemSetAccess(va, gran, &access, 1));
    unsigned long long flags = 0;
    CHECK_CU(cuMemGetAccess(&flags, &prop.location, va));
    EXPECT(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemUnmap(va, gran));
    CHECK_CU(cuMemRelease(h));
    CHECK_CU(cuMemAddressFree(va, gran));

    CUexecAffinityParam affinity;
    int sms = 0;
    CHECK_CU(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
    CHECK_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    EXPECT(affinity.type == CU_EXEC_AFFINITY_TYPE_SM_COUNT && (int)affinity.param.smCount.val == sms);
    // Cluster occupancy as the device answers: a one-block cluster always
    // fits; larger ones only where the device has clusters (9.0 and up).
    CUfunction f;
    CHECK(cudaGetFuncBySymbol(&f, (const void *)axpy));
    CUlaunchAttribute cluster;
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = 1;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
    CUlaunchConfig config;
    memset(&config, 0, sizeof config);
    config.gridDimX = 8;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 128;
    config.blockDimY = config.blockDimZ = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int clusters = 0, most = 0, major = 0, per_sm = 0;
    CHECK_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 128, 0));
    CHECK_CU(cuOccupancyMaxActiveClusters(&clusters, f, &config));
    EXPECT(clusters >= 1 && clusters <= per_sm * sms);
    config.numAttrs = 0;
    CUresult potential = cuOccupancyMaxPotentialClusterSize(&most, f, &config);
    EXPECT(potential == CUDA_SUCCESS && most >= 1);
    cluster.value.clusterDim.x = 2;
    config.gridDimX = 8;
    config.numAttrs = 1;
    CUresult two = cuOccupancyMaxActiveClusters(&clusters, f, &config);
    EXPECT(major >= 9 ? two == CUDA_SUCCESS : two != CUDA_SUCCESS);
    CUatomicOperation aops[2] = { CU_ATOMIC_OPERATION_INTEGER_ADD, CU_ATOMIC_OPERATION_FLOAT_ADD };
    unsigned caps[2] = { ~0u, ~0u };
    CHECK_CU(cuDeviceGetHostAtomicCapabilities(caps, aops, 2, dev));
    EXPECT((caps[0] | caps[1]) < (1u << 7));   // only capability bits
    aops[1] = CU_ATOMIC_OPERATION_MAX;
    EXPECT(cuDeviceGetHostAtomicCapabilities(caps, aops, 2, dev) == CUDA_ERROR_INVALID_VALUE);
    return 0;
}

// The error log: the iterator, an empty dump, callbacks. A call the device
// refuses may leave a message; when it does, the message names the call.
static int driver_log(CUdevice dev)
{
    CUlogIterator it;
    CHECK_CU(cuLogsCurrent(&it, 0));
    char buf[4096];
    size_t size = sizeof buf;
    CHECK_CU(cuLogsDumpToMemory(&it, buf, &size, 0));
    EXPECT(size == 0 && buf[0] == 0);
    EXPECT(cuLogsCurrent(&it, 1) == CUDA_ERROR_INVALID_VALUE);
    CUlogsCallbackHandle h;
    CHECK_CU(cuLogsRegisterCallback(on_log, &callback_messages, &h));
    char luid[8];
    unsigned mask = 0;
    CUresult refused = cuDeviceGetLuid(luid, &mask, dev);   // Windows only: never served on Linux
    EXPECT(refused != CUDA_SUCCESS);
    size = sizeof buf;
    CHECK_CU(cuLogsDumpToMemory(&it, buf, &size, 0));
    if (size) {
        EXPECT(strstr(buf, "cuDeviceGetLuid") != NULL);
        EXPECT(callback_messages > 0 && strstr(callback_text, "cuDeviceGetLuid") != NULL);
        printf("drvmisc: the driver log names cuDeviceGetLuid\n");
        // The whole log, then one too small for all of it: the newest
        // message stays and a head line says what was left out.
        size = sizeof buf;
        CHECK_CU(cuLogsDumpToMemory(NULL, buf, &size, 0));
        EXPECT(size == strlen(buf) && size > 0 && buf[size - 1] == '\n');
        char *last = buf + size - 1;
        while (last > buf && last[-1] != '\n')
            last--;
        size_t last_len = strlen(last);
        // The message before the newest must not fit beside it and the
        // head line (53 bytes for one left out, 54 for ten or more).
        char *prev = last - 1;
        while (prev > buf && prev[-1] != '\n')
            prev--;
        if (last != buf && (size_t)(last - prev) > 56) {
            char small[512];
            size = last_len + 56 + 1 < sizeof small ? last_len + 56 + 1 : sizeof small;
            CHECK_CU(cuLogsDumpToMemory(NULL, small, &size, 0));
            EXPECT(strncmp(small, "[rig: ", 6) == 0 && strstr(small, "cuDeviceGetLuid") != NULL);
            EXPECT(size == strlen(small));
        }
        size = 4;   // room for no message at all
        EXPECT(cuLogsDumpToMemory(NULL, buf, &size, 0) == CUDA_ERROR_INVALID_VALUE && size == 0);
    }
    CHECK_CU(cuLogsUnregisterCallback(h));
    EXPECT(cuLogsUnregisterCallback(h) == CUDA_ERROR_INVALID_VALUE);
    return 0;
}

int main()
{
    const int n = 3001;
    size_t bytes = n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes), *r = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 13);
        y[i] = (float)(i % 7);
    }
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, bytes));
    CHECK(cudaMalloc(&dy, bytes));
    CHECK(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice));
    CUdevice dev;
    CHECK_CU(cuCtxGetDevice(&dev));
    CUstream s, t;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CHECK_CU(cuStreamCreate(&t, CU_STREAM_DEFAULT));
    if (legacy_launches(dy, dx, n, s) || stream_attributes(s, t, (CUdeviceptr)dx) || context_calls(dev, s) ||
        pools_by_location(dev) || collections() || batch_and_access(dev, s) || driver_log(dev))
        return 1;
    CHECK(cudaMemcpy(r, dy, bytes, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        float want = y[i] + 2.0f * x[i];
        want = want + 3.0f * x[i];
        want = want + 0.5f * x[i];
        if (r[i] != want && wrong++ < 5)
            printf("drvmisc: y[%d] = %g, want %g\n", i, r[i], want);
    }
    CHECK_CU(cuStreamDestroy(s));
    CHECK_CU(cuStreamDestroy(t));
    if (wrong)
        return 1;
    printf("drvmisc: ok %d\n", n);
    return 0;
}
