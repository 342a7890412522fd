/* Every bad argument gets a CUresult, never a crash: made-up and stale
 * handles, NULL outputs, out-of-range values, through softgpu's exported
 * driver API. Made-up handles point at live memory of the wrong kind, at
 * nothing mapped, and at NULL; none is ever dereferenced. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include "tests/cuda_ok.h"

#define BAD(call) cr_expect_neq((call), CUDA_SUCCESS, "%s succeeded", #call)
#define IS(call, want) cr_expect_eq((call), (want), "%s", #call)

static CUcontext ctx;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

TestSuite(badargs, .init = setup);

static char junk[256];

/* A handle of every kind that is not one: wrong memory, unmapped, NULL. */
static void *fakes[] = { junk, (void *)(uintptr_t)0xdead0000, (void *)(uintptr_t)8 };

Test(badargs, made_up_handles)
{
    for (size_t i = 0; i < sizeof fakes / sizeof *fakes; i++) {
        void *h = fakes[i];
        CUdeviceptr d = 0;
        size_t n;
        int v;
        unsigned u;
        float ms;
        const char *name;
        CUfunction f;
        CUkernel k;
        CUmodule m;
        CUcontext c;
        IS(cuStreamQuery((CUstream)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuStreamSynchronize((CUstream)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuStreamDestroy((CUstream)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuStreamGetFlags((CUstream)h, &u), CUDA_ERROR_INVALID_HANDLE);
        IS(cuStreamWaitEvent(NULL, (CUevent)h, 0), CUDA_ERROR_INVALID_HANDLE);
        IS(cuEventRecord((CUevent)h, NULL), CUDA_ERROR_INVALID_HANDLE);
        IS(cuEventQuery((CUevent)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuEventSynchronize((CUevent)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuEventDestroy((CUevent)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuEventElapsedTime(&ms, (CUevent)h, (CUevent)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuModuleGetFunction(&f, (CUmodule)h, "x"), CUDA_ERROR_INVALID_HANDLE);
        IS(cuModuleGetGlobal(&d, &n, (CUmodule)h, "x"), CUDA_ERROR_INVALID_HANDLE);
        IS(cuModuleUnload((CUmodule)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuLibraryGetKernel(&k, (CUlibrary)h, "x"), CUDA_ERROR_INVALID_HANDLE);
        IS(cuLibraryGetModule(&m, (CUlibrary)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuLibraryUnload((CUlibrary)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuKernelGetFunction(&f, (CUkernel)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuFuncGetParamInfo((CUfunction)h, 0, &n, &n), CUDA_ERROR_INVALID_HANDLE);
        IS(cuKernelGetParamInfo((CUkernel)h, 0, &n, &n), CUDA_ERROR_INVALID_HANDLE);
        IS(cuFuncGetName(&name, (CUfunction)h), CUDA_ERROR_INVALID_HANDLE);
        IS(cuFuncSetAttribute((CUfunction)h, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0),
           CUDA_ERROR_INVALID_HANDLE);
        IS(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, (CUfunction)h, 32, 0), CUDA_ERROR_INVALID_HANDLE);
        IS(cuLaunchKernel((CUfunction)h, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
        IS(cuCtxPushCurrent((CUcontext)h), CUDA_ERROR_INVALID_CONTEXT);
        IS(cuCtxSetCurrent((CUcontext)h), CUDA_ERROR_INVALID_CONTEXT);
        IS(cuCtxDestroy((CUcontext)h), CUDA_ERROR_INVALID_CONTEXT);
        IS(cuCtxSynchronize_v2((CUcontext)h), CUDA_ERROR_INVALID_CONTEXT);
        IS(cuCtxGetId((CUcontext)h, &(unsigned long long){ 0 }), CUDA_ERROR_INVALID_CONTEXT);
        IS(cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)h), CUDA_ERROR_INVALID_VALUE);
        IS(cuMemMap((CUdeviceptr)0x7e0000000000ull, 1 << 20, 0, (CUmemGenericAllocationHandle)(uintptr_t)h, 0),
           CUDA_ERROR_INVALID_HANDLE);
        BAD(cuMemFree((CUdeviceptr)(uintptr_t)h));
        BAD(cuMemFreeHost(h));
        BAD(cuMemHostUnregister(h));
        BAD(cuMemcpyDtoH(junk, (CUdeviceptr)(uintptr_t)h, 4));
        BAD(cuMemsetD8((CUdeviceptr)(uintptr_t)h, 0, 4));
        IS(cuPointerGetAttribute(&u, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h),
           CUDA_ERROR_INVALID_VALUE);
        (void)c;
    }
}

Test(badargs, null_outputs)
{
    CUstream s;
    CUevent e;
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e, 0));
    IS(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuStreamGetFlags(s, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuStreamGetCtx(s, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuCtxGetCurrent(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuCtxGetDevice(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGetUuid(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGetPCIBusId(NULL, 10, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAllocHost(NULL, 10), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAllocPitch(NULL, NULL, 10, 10, 4), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemGetAllocationGranularity(NULL, NULL, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemCreate(NULL, 1 << 20, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAddressReserve(NULL, 1 << 20, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuModuleLoadData(NULL, "x"), CUDA_ERROR_INVALID_VALUE);
    IS(cuLibraryLoadData(NULL, "x", NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuModuleLoadDataEx(&(CUmodule){ 0 }, "x", 2, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuEventElapsedTime(NULL, e, e), CUDA_ERROR_INVALID_VALUE);
    IS(cuGetErrorString(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_CONTEXT, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuLaunchKernelEx(NULL, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemcpy2D(NULL), CUDA_ERROR_INVALID_VALUE);
    IS(cuStreamAddCallback(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    OK(cuEventDestroy(e));
}

Test(badargs, out_of_range_values)
{
    int v;
    IS(cuDeviceGetAttribute(&v, (CUdevice_attribute)-1, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
    IS(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 99), CUDA_ERROR_INVALID_DEVICE);
    IS(cuCtxSetLimit((CUlimit)77, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
    IS(cuCtxSetCacheConfig((CUfunc_cache)9), CUDA_ERROR_INVALID_VALUE);
    IS(cuStreamCreate(&(CUstream){ 0 }, 0x80), CUDA_ERROR_INVALID_VALUE);
    IS(cuEventCreate(&(CUevent){ 0 }, 0x40), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemHostAlloc(&(void *){ 0 }, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemAllocPitch(&(CUdeviceptr){ 0 }, &(size_t){ 0 }, 16, 16, 3), CUDA_ERROR_INVALID_VALUE);
    IS(cuGetErrorName((CUresult)12345, &(const char *){ 0 }), CUDA_ERROR_INVALID_VALUE);
    IS(cuDevicePrimaryCtxSetFlags(0, 0xffff0000u), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemcpy2D(&(CUDA_MEMCPY2D){ .srcMemoryType = (CUmemorytype)9, .dstMemoryType = CU_MEMORYTYPE_HOST,
                                    .WidthInBytes = 1, .Height = 1 }),
       CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 64));
    IS(cuMemsetD2D8(d, 8, 1, 16, 2), CUDA_ERROR_INVALID_VALUE);    /* pitch < width */
    IS(cuMemsetD2D8(d, 64, 1, 16, 2), CUDA_ERROR_INVALID_VALUE);   /* runs past the end */
    IS(cuMemcpyDtoD(d, d, (size_t)-1), CUDA_ERROR_INVALID_VALUE);
    IS(cuMemsetD32(d, 1, (size_t)-1 / 2), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(d));
}
