/* softgpu through its exported driver API: init, version, errors, devices,
 * attributes, proc addresses and contexts. */
#define CUDA_ENABLE_DEPRECATED 1
#include <criterion/criterion.h>
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda_ok.h"

Test(device, calls_before_init_fail)
{
    int n;
    CUdevice d;
    cr_expect_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    cr_expect_eq(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    int v;
    OK(cuDriverGetVersion(&v));
    cr_expect_eq(v, 13000);
    cr_expect_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

Test(device, one_softgpu_by_default)
{
    unsetenv("SOFTGPU_DEVICES");
    unsetenv("SOFTGPU_MEMORY");
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_expect_eq(n, 1);
    CUdevice d;
    OK(cuDeviceGet(&d, 0));
    cr_expect_eq(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    cr_expect_eq(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
    char name[64];
    OK(cuDeviceGetName(name, sizeof name, 0));
    cr_expect_str_eq(name, "softgpu");
    char small[4];
    OK(cuDeviceGetName(small, sizeof small, 0));
    cr_expect_str_eq(small, "sof");
    size_t mem;
    OK(cuDeviceTotalMem(&mem, 0));
    cr_expect_eq(mem, 4ull << 30);
    int major, minor;
    OK(cuDeviceComputeCapability(&major, &minor, 0));
    cr_expect(major == 7 && minor == 5);
    cr_expect_eq(cuDeviceGetName(NULL, 4, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuDeviceTotalMem(&mem, 3), CUDA_ERROR_INVALID_DEVICE);
}

/* softgpu ignores SASS and runs PTX, what CUDA_FORCE_PTX_JIT=1 asks of a
 * driver; cuInit says so to the libraries that read it (cuBLASLt), and
 * leaves a value the program set. */
Test(device, cuinit_declares_that_it_runs_ptx_only)
{
    unsetenv("CUDA_FORCE_PTX_JIT");
    OK(cuInit(0));
    const char *v = getenv("CUDA_FORCE_PTX_JIT");
    cr_assert_not_null(v);
    cr_expect_str_eq(v, "1");
}

Test(device, cuinit_keeps_the_programs_cuda_force_ptx_jit)
{
    setenv("CUDA_FORCE_PTX_JIT", "0", 1);
    OK(cuInit(0));
    const char *v = getenv("CUDA_FORCE_PTX_JIT");
    cr_assert_not_null(v);
    cr_expect_str_eq(v, "0");
}

Test(device, count_and_memory_from_environment)
{
    setenv("SOFTGPU_DEVICES", "3", 1);
    setenv("SOFTGPU_MEMORY", "1G", 1);
    OK(cuInit(0));
    int n;
    OK(cuDeviceGetCount(&n));
    cr_expect_eq(n, 3);
    size_t mem;
    OK(cuDeviceTotalMem(&mem, 2));
    cr_expect_eq(mem, 1ull << 30);
    CUuuid u[3];
    for (int i = 0; i < 3; i++)
        OK(cuDeviceGetUuid(&u[i], i));
    cr_expect_neq(memcmp(&u[0], &u[1], 16), 0);
    cr_expect_neq(memcmp(&u[1], &u[2], 16), 0);
    /* PCI ids: distinct, and the bus id string finds the device again. */
    for (int i = 0; i < 3; i++) {
        char bus[32];
        OK(cuDeviceGetPCIBusId(bus, sizeof bus, i));
        CUdevice d;
        OK(cuDeviceGetByPCIBusId(&d, bus));
        cr_expect_eq(d, i, "%s", bus);
        int b;
        OK(cuDeviceGetAttribute(&b, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i));
        char want[32];
        snprintf(want, sizeof want, "00000000:%02X:00.0", b);
        cr_expect_str_eq(bus, want);
    }
    int v, can;
    OK(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2));
    OK(cuDeviceCanAccessPeer(&can, 0, 2));
    cr_expect(v == 1 && can == 1);
    cr_expect_eq(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1), CUDA_ERROR_INVALID_DEVICE);
    CUdevice d;
    cr_expect_eq(cuDeviceGetByPCIBusId(&d, "0000:99:00.0"), CUDA_ERROR_INVALID_DEVICE);
    cr_expect_eq(cuDeviceGetByPCIBusId(&d, "nonsense"), CUDA_ERROR_INVALID_VALUE);
}

/* Peer access between two contexts: enabled once, disabled once, never to
 * its own device; CUDA's errors for the rest. */
Test(device, peer_access_enable_and_disable)
{
    setenv("SOFTGPU_DEVICES", "2", 1);
    OK(cuInit(0));
    CUcontext c0, c1;
    OK(cuDevicePrimaryCtxRetain(&c0, 0));
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cuCtxSetCurrent(c1));
    cr_expect_eq(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    cr_expect_eq(cuCtxEnablePeerAccess(c0, 1), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_INVALID_DEVICE);
    OK(cuCtxEnablePeerAccess(c0, 0));
    cr_expect_eq(cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    OK(cuCtxSetCurrent(c0));
    OK(cuCtxEnablePeerAccess(c1, 0));   /* each direction on its own */
    OK(cuCtxSetCurrent(c1));
    OK(cuCtxDisablePeerAccess(c0));
    cr_expect_eq(cuCtxDisablePeerAccess(c0), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    int v;
    OK(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 1, 0));
    cr_expect_eq(v, 1);
    cr_expect_eq(cuDeviceGetP2PAttribute(&v, (CUdevice_P2PAttribute)99, 1, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxSetCurrent(NULL));
    OK(cuDevicePrimaryCtxRelease(0));
    OK(cuDevicePrimaryCtxRelease(1));
}

Test(device, bad_environment_fails_init)
{
    setenv("SOFTGPU_MEMORY", "lots", 1);
    cr_expect_eq(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

Test(device, zero_devices)
{
    setenv("SOFTGPU_DEVICES", "0", 1);
    cr_expect_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

Test(device, uuid_is_stable)
{
    OK(cuInit(0));
    CUuuid a, b;
    OK(cuDeviceGetUuid(&a, 0));
    OK(cuDeviceGetUuid_v2(&b, 0));
    cr_expect_eq(memcmp(&a, &b, 16), 0);
    /* Fixed bytes, so two processes (and two runs) agree. */
    static const unsigned char want[16] = { 0x73, 0x6f, 0x66, 0x74, 0x67, 0x70, 0x75, 0x2d,
                                            0x9e, 0x41, 0x3c, 0x07, 0xb2, 0x5d, 0x10, 0x00 };
    cr_expect_eq(memcmp(a.bytes, want, 16), 0);
}

Test(device, every_attribute_answers_coherently)
{
    OK(cuInit(0));
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
        int v = -12345;
        cr_expect_eq(cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0), CUDA_SUCCESS, "attribute %d", a);
        cr_expect_neq(v, -12345, "attribute %d", a);
    }
    int v;
    cr_expect_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    struct { CUdevice_attribute a; int want; } fixed[] = {
        { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
        { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
        { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 48 * 1024 },
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 7 },
        { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 5 },
        { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
        { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1 },
        { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0 },
    };
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        OK(cuDeviceGetAttribute(&v, fixed[i].a, 0));
        cr_expect_eq(v, fixed[i].want, "attribute %d", fixed[i].a);
    }
    int x, y, z, t;
    OK(cuDeviceGetAttribute(&x, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 0));
    OK(cuDeviceGetAttribute(&z, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 0));
    OK(cuDeviceGetAttribute(&t, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    OK(cuDeviceGetAttribute(&y, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
    cr_expect(x <= t && z <= t && y >= 48 * 1024);
}

Test(errors, every_result_has_a_name_and_text)
{
    for (int e = 0; e < 1000; e++) {
        const char *name = NULL, *text = NULL;
        CUresult r = cuGetErrorName((CUresult)e, &name);
        CUresult r2 = cuGetErrorString((CUresult)e, &text);
        cr_expect_eq(r, r2);
        if (r == CUDA_SUCCESS) {
            cr_expect(name && strncmp(name, "CUDA_", 5) == 0);
            cr_expect(text && *text);
        } else {
            cr_expect_eq(r, CUDA_ERROR_INVALID_VALUE);
        }
    }
    const char *s;
    OK(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    cr_expect_str_eq(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
    OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    cr_expect_str_eq(s, "invalid argument");
    OK(cuGetErrorName(CUDA_ERROR_UNKNOWN, &s));
    cr_expect_eq(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(procaddress, answers_by_name_version_and_flavour)
{
    void *fn;
    CUdriverProcAddressQueryResult st;
    OK(cuGetProcAddress("cuMemAlloc", &fn, 13000, 0, &st));
    cr_expect_eq(fn, (void *)cuMemAlloc_v2);
    cr_expect_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    /* cuCtxSynchronize: the 2000 one takes nothing, the 13000 one a context. */
    OK(cuGetProcAddress("cuCtxSynchronize", &fn, 12000, 0, &st));
    cr_expect_eq(fn, dlsym(RTLD_DEFAULT, "cuCtxSynchronize"));
    OK(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, 0, &st));
    cr_expect_eq(fn, (void *)cuCtxSynchronize_v2);
    OK(cuGetProcAddress("cuMemcpyHtoD", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_expect_eq(fn, dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
    OK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    cr_expect_eq(fn, dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
    OK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, 0, &st));
    cr_expect_eq(fn, (void *)cuLaunchKernel);
    cr_expect_eq(cuGetProcAddress("", &fn, 0, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_expect_eq(cuGetProcAddress("cuGraphicsMapResources", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(cuGetProcAddress("cuMemAlloc", &fn, 1000, 0, &st), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    cr_expect_eq(cuGetProcAddress(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress("cuGetProcAddress", &fn, 13000, 0, &st));
    cr_expect_eq(fn, (void *)cuGetProcAddress_v2);
}

/* ---- contexts ---- */

Test(context, create_push_pop_destroy)
{
    OK(cuInit(0));
    CUcontext cur, a, b, popped;
    OK(cuCtxGetCurrent(&cur));
    cr_expect_null(cur);
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxCreate(&a, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    cr_expect_eq(cur, a);
    OK(cuCtxCreate(&b, NULL, 0, 0));
    OK(cuCtxGetCurrent(&cur));
    cr_expect_eq(cur, b);
    OK(cuCtxPopCurrent(&popped));
    cr_expect_eq(popped, b);
    OK(cuCtxGetCurrent(&cur));
    cr_expect_eq(cur, a);
    OK(cuCtxPushCurrent(b));
    CUdevice dev;
    OK(cuCtxGetDevice(&dev));
    cr_expect_eq(dev, 0);
    unsigned long long ida, idb;
    OK(cuCtxGetId(a, &ida));
    OK(cuCtxGetId(b, &idb));
    cr_expect_neq(ida, idb);
    OK(cuCtxSynchronize());
    OK(cuCtxSynchronize_v2(a));
    OK(cuCtxDestroy(b));
    OK(cuCtxGetCurrent(&cur));
    cr_expect_eq(cur, a);
    cr_expect_eq(cuCtxDestroy(b), CUDA_ERROR_INVALID_CONTEXT);
    cr_expect_eq(cuCtxPushCurrent(b), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(NULL));
    OK(cuCtxGetCurrent(&cur));
    cr_expect_null(cur);
    cr_expect_eq(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxDestroy(a));
    cr_expect_eq(cuCtxCreate(&a, NULL, 0xff00, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuCtxCreate(&a, NULL, 0, 7), CUDA_ERROR_INVALID_DEVICE);
}

static void *other_thread(void *arg)
{
    CUcontext cur = (CUcontext)1;
    cuCtxGetCurrent(&cur);
    *(CUcontext *)arg = cur;
    return NULL;
}

Test(context, current_is_per_thread)
{
    OK(cuInit(0));
    CUcontext a, seen = (CUcontext)1;
    OK(cuCtxCreate(&a, NULL, 0, 0));
    pthread_t t;
    pthread_create(&t, NULL, other_thread, &seen);
    pthread_join(t, NULL);
    cr_expect_null(seen);
    OK(cuCtxDestroy(a));
}

Test(context, primary_retain_release_state)
{
    OK(cuInit(0));
    unsigned flags;
    int active;
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_expect_eq(active, 0);
    CUcontext p, q;
    OK(cuDevicePrimaryCtxRetain(&p, 0));
    OK(cuDevicePrimaryCtxRetain(&q, 0));
    cr_expect_eq(p, q);
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_expect_eq(active, 1);
    cr_expect_eq(cuCtxDestroy(p), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxSetCurrent(p));
    CUdevice d;
    OK(cuCtxGetDevice_v2(&d, NULL));
    cr_expect_eq(d, 0);
    size_t lim;
    OK(cuCtxGetLimit(&lim, CU_LIMIT_PRINTF_FIFO_SIZE));
    cr_expect_eq(lim, 1 << 20);
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    cr_expect_eq(lim, 4096);
    cr_expect_eq(cuCtxGetLimit(&lim, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT);
    OK(cuDevicePrimaryCtxRelease(0));
    OK(cuDevicePrimaryCtxRelease(0));
    cr_expect_eq(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_expect_eq(active, 0);
    OK(cuDevicePrimaryCtxReset(0));
}

Test(context, destroyed_current_context_is_reported)
{
    OK(cuInit(0));
    CUcontext a;
    OK(cuCtxCreate(&a, NULL, 0, 0));
    CUdeviceptr p;
    OK(cuMemAlloc(&p, 64));
    OK(cuCtxDestroy(a));
    /* Its allocation went with it. */
    CUdeviceptr base;
    cr_expect_eq(cuMemGetAddressRange(&base, NULL, p), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(cuMemAlloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
}
