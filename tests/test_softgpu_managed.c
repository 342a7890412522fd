/* softgpu managed memory through the driver API: allocation and the memory
 * the CPU and the device share, the attributes that say so, prefetches and
 * advice (validated, remembered, answered by the range queries), stream
 * attachment, and every bad argument's CUresult. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tests/seed.h"
#include "tests/cuda_ok.h"

/* The CUDA 8 forms, which cuda.h maps onto their CUDA 12 successors. */
CUresult prefetch_v1(CUdeviceptr p, size_t n, CUdevice to, CUstream s) __asm__("cuMemPrefetchAsync");
CUresult advise_v1(CUdeviceptr p, size_t n, CUmem_advise a, CUdevice d) __asm__("cuMemAdvise");

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

TestSuite(managed, .init = setup, .fini = teardown);

static CUmemLocation dev0(void)
{
    return (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 };
}

static CUmemLocation cpu(void)
{
    return (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST, 0 };
}

Test(managed, attributes_say_what_softgpu_does)
{
    int v;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
    cr_expect_eq(v, 1);
    /* Kernels run in this process's memory: the CPU may touch it meanwhile. */
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0));
    cr_expect_eq(v, 1);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0));
    cr_expect_eq(v, 1);
}

Test(managed, alloc_shares_memory_and_answers_pointer_queries)
{
    size_t free0, free1, total;
    OK(cuMemGetInfo(&free0, &total));
    CUdeviceptr p;
    OK(cuMemAllocManaged(&p, 5000, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free0 - free1, 5000);
    uint8_t want[5000];
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (uint8_t)rand();
    memcpy((void *)(uintptr_t)p, want, sizeof want);   /* the CPU writes it directly */
    uint8_t got[5000];
    OK(cuMemcpyDtoH(got, p, sizeof got));
    cr_expect_arr_eq(got, want, sizeof want);
    OK(cuMemsetD8(p + 10, 0xab, 20));
    cr_expect_eq(((uint8_t *)(uintptr_t)p)[15], 0xab);
    unsigned managed = 0, type = 0;
    void *host = NULL;
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 100));
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 100));
    OK(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p + 100));
    cr_expect_eq(managed, 1);
    cr_expect_eq(type, CU_MEMORYTYPE_DEVICE);
    cr_expect_eq(host, (void *)(uintptr_t)(p + 100));
    CUdeviceptr plain;
    OK(cuMemAlloc(&plain, 64));
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, plain));
    cr_expect_eq(managed, 0);
    OK(cuMemFree(plain));
    OK(cuMemFree(p));
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free1, free0);
    cr_expect_eq(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
}

Test(managed, bad_allocations)
{
    CUdeviceptr p;
    cr_expect_eq(cuMemAllocManaged(NULL, 64, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocManaged(&p, 64, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocManaged(&p, 64, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocManaged(&p, 64, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAllocManaged(&p, 64, CU_MEM_ATTACH_HOST));
    OK(cuMemFree(p));
}

Test(managed, advice_is_remembered_and_queried)
{
    CUdeviceptr p;
    OK(cuMemAllocManaged(&p, 1 << 20, CU_MEM_ATTACH_GLOBAL));
    int v = -5;
    OK(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 1 << 20));
    cr_expect_eq(v, 0);
    OK(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, p, 4096));
    cr_expect_eq(v, CU_DEVICE_INVALID);
    OK(cuMemAdvise_v2(p, 1 << 20, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0()));
    OK(cuMemAdvise_v2(p, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0()));
    OK(cuMemAdvise_v2(p, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY, cpu()));
    OK(advise_v1(p, 4096, CU_MEM_ADVISE_SET_ACCESSED_BY, 0));
    int rm = 0, pref = -9, by[3] = { 7, 7, 7 }, type = 0, id = -1;
    void *data[] = { &rm, &pref, by, &type, &id };
    size_t sizes[] = { 4, 4, sizeof by, 4, 4 };
    CUmem_range_attribute what[] = { CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                     CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
                                     CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
                                     CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID };
    OK(cuMemRangeGetAttributes(data, sizes, what, 5, p, 1 << 20));
    cr_expect_eq(rm, 1);
    cr_expect_eq(pref, 0);
    cr_expect(by[0] == CU_DEVICE_CPU && by[1] == 0 && by[2] == CU_DEVICE_INVALID, "accessed by %d %d %d", by[0],
              by[1], by[2]);
    cr_expect_eq(type, CU_MEM_LOCATION_TYPE_DEVICE);
    cr_expect_eq(id, 0);
    OK(cuMemAdvise_v2(p, 1 << 20, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev0()));
    OK(cuMemRangeGetAttribute(&rm, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 1 << 20));
    cr_expect_eq(rm, 0);
    /* Bad advice, bad places, bad ranges, bad sizes. */
    cr_expect_eq(cuMemAdvise_v2(p, 4096, (CUmem_advise)0, dev0()), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAdvise_v2(p, 4096, (CUmem_advise)7, dev0()), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAdvise_v2(p, 4096, CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
                                (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 99 }),
                 CUDA_ERROR_INVALID_DEVICE);
    cr_expect_eq(cuMemAdvise_v2(p, 0, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0()), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAdvise_v2(p, (1 << 20) + 1, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0()), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr plain;
    OK(cuMemAlloc(&plain, 4096));
    cr_expect_eq(cuMemAdvise_v2(plain, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0()), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, plain, 4096),
                 CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemRangeGetAttribute(&v, 8, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4096), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemRangeGetAttribute(&v, 6, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, p, 4096), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemRangeGetAttribute(&v, 4, (CUmem_range_attribute)99, p, 4096), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemRangeGetAttribute(NULL, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4096), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(plain));
    OK(cuMemFree(p));
}

Test(managed, prefetch_is_ordered_and_remembered)
{
    CUdeviceptr p;
    CUstream s;
    OK(cuMemAllocManaged(&p, 8192, CU_MEM_ATTACH_GLOBAL));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuMemsetD32Async(p, 0x01020304, 2048, s));
    OK(cuMemPrefetchAsync_v2(p, 8192, cpu(), 0, s));
    OK(cuStreamSynchronize(s));
    cr_expect_eq(((uint32_t *)(uintptr_t)p)[2047], 0x01020304u);
    int last = 5;
    OK(cuMemRangeGetAttribute(&last, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 8192));
    cr_expect_eq(last, CU_DEVICE_CPU);
    OK(prefetch_v1(p, 4096, 0, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemRangeGetAttribute(&last, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, 8192));
    cr_expect_eq(last, 0);
    cr_expect_eq(cuMemPrefetchAsync_v2(p, 8192, dev0(), 1, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchAsync_v2(p, 8193, dev0(), 0, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchAsync_v2(p, 8192, (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 42 }, 0, s),
                 CUDA_ERROR_INVALID_DEVICE);
    cr_expect_eq(cuMemPrefetchAsync_v2(p, 8192, dev0(), 0, (CUstream)(uintptr_t)0x10), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy(s));
    OK(cuMemFree(p));
}

Test(managed, attach_and_sync_memops)
{
    CUdeviceptr p;
    CUstream s;
    OK(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_HOST));
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_SINGLE));
    OK(cuStreamAttachMemAsync(s, p, 4096, CU_MEM_ATTACH_GLOBAL));
    OK(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_HOST));
    cr_expect_eq(cuStreamAttachMemAsync(s, p, 100, CU_MEM_ATTACH_HOST), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuStreamAttachMemAsync(s, p + 8, 0, CU_MEM_ATTACH_HOST), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuStreamAttachMemAsync(s, p, 0, 3), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuStreamAttachMemAsync(NULL, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s));
    int one = 1;
    OK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    cr_expect_eq(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuPointerSetAttribute(NULL, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
    OK(cuMemFree(p));
}

Test(managed, freed_with_its_context)
{
    CUdeviceptr p;
    size_t free0, free1, total;
    OK(cuMemGetInfo(&free0, &total));
    OK(cuMemAllocManaged(&p, 1 << 16, CU_MEM_ATTACH_GLOBAL));
    OK(cuCtxDestroy(ctx));
    OK(cuCtxCreate(&ctx, NULL, 0, 0));
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free1, free0);
    int v;
    cr_expect_eq(cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, p, 4), CUDA_ERROR_INVALID_VALUE);
}

Test(managed, batches_prefetch_and_discard)
{
    CUdeviceptr a, b, c;
    CUstream s;
    OK(cuMemAllocManaged(&a, 4096, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemAllocManaged(&b, 8192, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemAllocManaged(&c, 100, CU_MEM_ATTACH_GLOBAL));
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr ptrs[] = { a, b + 4096, c };
    size_t sizes[] = { 4096, 4096, 100 };
    CUmemLocation locs[] = { dev0(), cpu() };
    size_t idxs[] = { 0, 2 };
    OK(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    OK(cuStreamSynchronize(s));
    int last[3];
    for (int i = 0; i < 3; i++)
        OK(cuMemRangeGetAttribute(&last[i], 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, ptrs[i], sizes[i]));
    cr_expect(last[0] == 0 && last[1] == 0 && last[2] == CU_DEVICE_CPU, "last prefetches %d %d %d", last[0], last[1],
              last[2]);
    ((uint8_t *)(uintptr_t)c)[7] = 9;
    OK(cuMemDiscardBatchAsync(ptrs, sizes, 3, 0, s));
    OK(cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 1, 0, s));
    OK(cuStreamSynchronize(s));
    /* Bad batches: indices out of order, a first index not 0, flags, an
     * unmanaged or too long range, the legacy stream. */
    size_t bad_idxs[] = { 0, 0 }, late[] = { 1 };
    cr_expect_eq(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, bad_idxs, 2, 0, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, late, 1, 0, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 1, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 4, 0, s), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemDiscardBatchAsync(ptrs, sizes, 0, 0, s), CUDA_ERROR_INVALID_VALUE);
    size_t too_long[] = { 4097, 4096, 100 };
    cr_expect_eq(cuMemDiscardBatchAsync(ptrs, too_long, 3, 0, s), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr plain;
    OK(cuMemAlloc(&plain, 4096));
    CUdeviceptr with_plain[] = { a, plain, c };
    cr_expect_eq(cuMemDiscardBatchAsync(with_plain, sizes, 3, 0, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(plain));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemFree(c));
}
