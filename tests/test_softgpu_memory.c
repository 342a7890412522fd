/* softgpu memory through the driver API: allocations, host memory, pointer
 * queries, copies (sync, async, 2D) and memsets, each on fresh random data
 * checked against a plain C reference, and every bad argument's CUresult. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/seed.h"
#include "tests/cuda_ok.h"

static CUcontext ctx;

static void setup(void)
{
    test_srand();
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    cuCtxDestroy(ctx);
}

static void fill_random(void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = (uint8_t)rand();
}

TestSuite(memory, .init = setup, .fini = teardown);

Test(memory, alloc_free_info_range)
{
    size_t free0, total;
    OK(cuMemGetInfo(&free0, &total));
    cr_expect_eq(total, 4ull << 30);
    CUdeviceptr p;
    OK(cuMemAlloc(&p, 1000));
    cr_expect_neq(p, 0);
    size_t free1;
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free0 - free1, 1000);
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, p + 999));
    cr_expect(base == p && size == 1000);
    cr_expect_eq(cuMemGetAddressRange(&base, &size, p + 1000), CUDA_ERROR_NOT_FOUND);
    /* Device memory is host memory at the device address. */
    memset((void *)(uintptr_t)p, 0x5a, 1000);
    unsigned type;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 10));
    cr_expect_eq(type, CU_MEMORYTYPE_DEVICE);
    CUcontext owner;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    cr_expect_eq(owner, ctx);
    int ordinal;
    OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    cr_expect_eq(ordinal, 0);
    cr_expect_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)&type),
                 CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    size_t rsize = 0;
    type = 0;
    void *data[] = { &type, &rsize };
    OK(cuPointerGetAttributes(2, attrs, data, p));
    cr_expect(type == CU_MEMORYTYPE_DEVICE && rsize == 1000);
    OK(cuMemFree(p));
    cr_expect_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(0));   /* like free(NULL); cudaFree(0) relies on it */
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free1, free0);
    cr_expect_eq(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAlloc(NULL, 8), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAlloc(&p, 5ull << 30), CUDA_ERROR_OUT_OF_MEMORY);
}

Test(memory, allocation_inside_is_not_freeable)
{
    CUdeviceptr p;
    OK(cuMemAlloc(&p, 4096));
    cr_expect_eq(cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(p));
}

Test(memory, sync_copies_roundtrip)
{
    for (int round = 0; round < 20; round++) {
        size_t n = 1 + (size_t)rand() % 100000;
        uint8_t *a = malloc(n), *b = malloc(n);
        fill_random(a, n);
        CUdeviceptr d1, d2;
        OK(cuMemAlloc(&d1, n));
        OK(cuMemAlloc(&d2, n));
        OK(cuMemcpyHtoD(d1, a, n));
        OK(cuMemcpyDtoD(d2, d1, n));
        memset(b, 0, n);
        OK(cuMemcpyDtoH(b, d2, n));
        cr_assert_eq(memcmp(a, b, n), 0, "round %d, %zu bytes", round, n);
        /* A slice at an offset. */
        size_t off = (size_t)rand() % n, len = n - off;
        OK(cuMemcpyDtoH(b, d1 + off, len));
        cr_assert_eq(memcmp(a + off, b, len), 0);
        OK(cuMemcpy((CUdeviceptr)(uintptr_t)b, d1, n));
        cr_assert_eq(memcmp(a, b, n), 0);
        OK(cuMemFree(d1));
        OK(cuMemFree(d2));
        free(a);
        free(b);
    }
}

Test(memory, copies_outside_allocations_are_refused)
{
    CUdeviceptr d;
    uint8_t buf[256];
    OK(cuMemAlloc(&d, 128));
    cr_expect_eq(cuMemcpyHtoD(d, buf, 129), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyHtoD(d + 1, buf, 128), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyDtoH(buf, d + 100, 29), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyDtoD(d, d + 64, 65), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)buf, buf, 8), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyHtoD(d, NULL, 8), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyHtoD(0x10, buf, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyHtoD(d, buf, 0));
    cr_expect_eq(cuMemsetD32(d + 2, 1, 1), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    cr_expect_eq(cuMemsetD8(d, 1, 129), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemcpyHtoDAsync(d, buf, 8, (CUstream)buf), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFree(d));
}

Test(memory, async_copies_on_streams)
{
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t n = 1 << 20;
    uint8_t *a = malloc(n), *b = malloc(n);
    fill_random(a, n);
    CUdeviceptr d;
    OK(cuMemAlloc(&d, n));
    OK(cuMemcpyHtoDAsync(d, a, n, s));
    /* Pageable source: the bytes were taken at the call, so changing them
     * now does not change what lands. */
    uint8_t keep = a[5];
    a[5] ^= 0xff;
    OK(cuMemcpyDtoHAsync(b, d, n, s));
    OK(cuStreamSynchronize(s));
    a[5] = keep;
    cr_expect_eq(memcmp(a, b, n), 0);
    /* Pinned host memory both ways. */
    void *h1, *h2;
    OK(cuMemAllocHost(&h1, n));
    OK(cuMemHostAlloc(&h2, n, CU_MEMHOSTALLOC_DEVICEMAP));
    fill_random(h1, n);
    OK(cuMemcpyHtoDAsync(d, h1, n, s));
    OK(cuMemcpyDtoHAsync(h2, d, n, s));
    OK(cuStreamSynchronize(s));
    cr_expect_eq(memcmp(h1, h2, n), 0);
    unsigned flags;
    OK(cuMemHostGetFlags(&flags, h2));
    cr_expect_eq(flags, CU_MEMHOSTALLOC_DEVICEMAP);
    CUdeviceptr dh;
    OK(cuMemHostGetDevicePointer(&dh, h2, 0));
    cr_expect_eq(dh, (CUdeviceptr)(uintptr_t)h2);
    unsigned type;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dh));
    cr_expect_eq(type, CU_MEMORYTYPE_HOST);
    OK(cuMemcpyDtoDAsync(d, dh, n, s));
    OK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)b, d, n, s));
    OK(cuStreamSynchronize(s));
    cr_expect_eq(memcmp(b, h1, n), 0);
    OK(cuMemFreeHost(h1));
    OK(cuMemFreeHost(h2));
    cr_expect_eq(cuMemFreeHost(h2), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(d));
    OK(cuStreamDestroy(s));
    free(a);
    free(b);
}

Test(memory, host_register)
{
    size_t n = 3 * 4096;
    uint8_t *h = aligned_alloc(4096, n);
    OK(cuMemHostRegister(h, n, 0));
    cr_expect_eq(cuMemHostRegister(h + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CUdeviceptr d;
    OK(cuMemHostGetDevicePointer(&d, h + 10, 0));
    cr_expect_eq(d, (CUdeviceptr)(uintptr_t)(h + 10));
    /* Registered memory is device-visible: a DtoD copy may read it. */
    fill_random(h, n);
    CUdeviceptr dev;
    OK(cuMemAlloc(&dev, n));
    OK(cuMemcpyDtoD(dev, d - 10, n));
    cr_expect_eq(memcmp((void *)(uintptr_t)dev, h, n), 0);
    OK(cuMemHostUnregister(h));
    cr_expect_eq(cuMemHostUnregister(h), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    cr_expect_eq(cuMemHostGetDevicePointer(&d, h, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(dev));
    free(h);
}

Test(memory, copy_2d)
{
    for (int round = 0; round < 10; round++) {
        size_t w = 1 + (size_t)rand() % 300, hgt = 1 + (size_t)rand() % 40;
        size_t hpitch = w + (size_t)rand() % 50;
        uint8_t *src = malloc(hpitch * hgt), *out = calloc(hpitch, hgt);
        fill_random(src, hpitch * hgt);
        CUdeviceptr d;
        size_t dpitch;
        OK(cuMemAllocPitch(&d, &dpitch, w, hgt, 4));
        cr_expect_geq(dpitch, w);
        CUDA_MEMCPY2D c = { 0 };
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = src;
        c.srcPitch = hpitch;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = d;
        c.dstPitch = dpitch;
        c.WidthInBytes = w;
        c.Height = hgt;
        OK(cuMemcpy2D(&c));
        CUDA_MEMCPY2D back = { 0 };
        back.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        back.srcDevice = d;
        back.srcPitch = dpitch;
        back.dstMemoryType = CU_MEMORYTYPE_HOST;
        back.dstHost = out;
        back.dstPitch = hpitch;
        back.WidthInBytes = w;
        back.Height = hgt;
        OK(cuMemcpy2DAsync(&back, NULL));
        OK(cuStreamSynchronize(NULL));
        for (size_t y = 0; y < hgt; y++)
            cr_assert_eq(memcmp(out + y * hpitch, src + y * hpitch, w), 0, "row %zu", y);
        /* One row too many runs off the allocation. */
        c.Height = hgt + 1;
        if (dpitch * (hgt + 1) > dpitch * hgt)
            cr_expect_eq(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
        c.Height = hgt;
        c.dstPitch = w - 1;
        if (hgt > 1)
            cr_expect_eq(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
        c.dstPitch = dpitch;
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY;   /* with no array named */
        cr_expect_eq(cuMemcpy2D(&c), CUDA_ERROR_INVALID_HANDLE);
        OK(cuMemFree(d));
        free(src);
        free(out);
    }
    cr_expect_eq(cuMemcpy2D(NULL), CUDA_ERROR_INVALID_VALUE);
}

Test(memory, memsets)
{
    size_t n = 4096 + (size_t)rand() % 4096;
    CUdeviceptr d;
    OK(cuMemAlloc(&d, n * 4));
    uint8_t v8 = (uint8_t)rand();
    uint16_t v16 = (uint16_t)rand();
    uint32_t v32 = (uint32_t)rand() * 2654435761u;
    OK(cuMemsetD8(d, v8, n * 4));
    for (size_t i = 0; i < n * 4; i++)
        cr_assert_eq(((uint8_t *)(uintptr_t)d)[i], v8);
    OK(cuMemsetD16(d + 2, v16, n));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(((uint16_t *)(uintptr_t)(d + 2))[i], v16);
    cr_expect_eq(((uint8_t *)(uintptr_t)d)[1], v8);
    OK(cuMemsetD32Async(d, v32, n, NULL));
    OK(cuStreamSynchronize(NULL));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(((uint32_t *)(uintptr_t)d)[i], v32);
    /* 2D: a 16 x 8 block of a 64-byte pitch, the rest untouched. */
    OK(cuMemsetD8(d, 0, n * 4));
    OK(cuMemsetD2D32(d, 64, 0xdeadbeef, 4, 8));
    OK(cuMemsetD2D16Async(d + 16, 64, 0x1234, 8, 8, NULL));
    OK(cuMemsetD2D8(d + 32, 64, 0x77, 16, 8));
    OK(cuCtxSynchronize());
    for (size_t y = 0; y < 8; y++) {
        const uint8_t *row = (const uint8_t *)(uintptr_t)d + y * 64;
        for (int i = 0; i < 4; i++)
            cr_assert_eq(((const uint32_t *)(const void *)row)[i], 0xdeadbeef);
        for (int i = 0; i < 8; i++)
            cr_assert_eq(((const uint16_t *)(const void *)(row + 16))[i], 0x1234);
        for (int i = 32; i < 48; i++)
            cr_assert_eq(row[i], 0x77);
        for (int i = 48; i < 64; i++)
            cr_assert_eq(row[i], 0);
    }
    cr_expect_eq(cuMemsetD2D32(d, 2, 1, 4, 8), CUDA_ERROR_INVALID_VALUE);   /* pitch < width */
    OK(cuMemFree(d));
}

Test(memory_env, out_of_memory_from_environment)
{
    setenv("SOFTGPU_MEMORY", "1M", 1);
    OK(cuInit(0));
    CUcontext c;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    CUdeviceptr a, b;
    OK(cuMemAlloc(&a, 600 << 10));
    cr_expect_eq(cuMemAlloc(&b, 600 << 10), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemFree(a));
    OK(cuMemAlloc(&b, 600 << 10));
    OK(cuCtxDestroy(c));
}

Test(memory, without_a_context)
{
    CUcontext c;
    OK(cuCtxPopCurrent(&c));
    CUdeviceptr d;
    cr_expect_eq(cuMemAlloc(&d, 8), CUDA_ERROR_INVALID_CONTEXT);
    uint8_t b[8];
    cr_expect_eq(cuMemcpyHtoD(0, b, 8), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxPushCurrent(c));
}

Test(memory, more_allocations_than_the_kernel_has_mappings)
{
    /* vm.max_map_count is 65530 by default: small allocations must not each
     * take a mapping. */
    enum { N = 70000 };
    CUdeviceptr *p = malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) {
        OK(cuMemAlloc(&p[i], 64 + (size_t)(i % 7) * 100));
        *(int *)(uintptr_t)p[i] = i;
    }
    CUdeviceptr base;
    OK(cuMemGetAddressRange(&base, NULL, p[N / 2] + 10));
    cr_expect_eq(base, p[N / 2]);
    for (int i = N; i-- > 0;) {
        cr_assert_eq(*(int *)(uintptr_t)p[i], i);
        OK(cuMemFree(p[i]));
    }
    free(p);
}

Test(memory, address_ranges_under_random_churn)
{
    enum { SLOTS = 500, STEPS = 20000 };
    CUdeviceptr p[SLOTS] = { 0 };
    size_t sz[SLOTS] = { 0 };
    for (int step = 0; step < STEPS; step++) {
        int i = rand() % SLOTS;
        if (p[i]) {
            /* Probe inside, at the end, and just past it. */
            size_t off = (size_t)rand() % sz[i];
            CUdeviceptr base;
            size_t size;
            OK(cuMemGetAddressRange(&base, &size, p[i] + off));
            cr_assert(base == p[i] && size == sz[i], "step %d", step);
            CUresult r = cuMemGetAddressRange(&base, &size, p[i] + sz[i]);
            cr_assert(r == CUDA_ERROR_NOT_FOUND || base != p[i], "step %d: past the end found", step);
            OK(cuMemFree(p[i]));
            cr_assert_eq(cuMemGetAddressRange(&base, &size, p[i]), CUDA_ERROR_NOT_FOUND);
            p[i] = 0;
        } else {
            sz[i] = 1 + (size_t)rand() % (rand() % 8 ? 4096 : 1 << 20);
            OK(cuMemAlloc(&p[i], sz[i]));
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (p[i])
            OK(cuMemFree(p[i]));
}
