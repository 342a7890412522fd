/* softgpu's memory pools through the driver API: stream-ordered allocation
 * and free (the memory lives until the stream reaches the free), the
 * default, current and created pools, their attributes and counters, the
 * release threshold at sync points, cuMemPoolTrimTo, and bad arguments. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "tests/cuda_ok.h"

#define MiB (1ull << 20)

static CUcontext ctx;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

static void teardown(void)
{
    cuCtxDestroy(ctx);
}

TestSuite(mempool, .init = setup, .fini = teardown);

static cuuint64_t attr64(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    OK(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

Test(mempool, supported_and_default_pool)
{
    int v = -1;
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
    cr_expect_eq(v, 1);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0));
    cr_expect_eq(v, 0);
    CUmemoryPool def, cur;
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_expect(def && def == cur);
    int reuse;
    OK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    cr_expect_eq(reuse, 1);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_expect_eq(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuDeviceGetDefaultMemPool(&def, 7), CUDA_ERROR_INVALID_DEVICE);
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    OK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
    cr_expect(fn != NULL);
}

Test(mempool, alloc_use_free_on_a_stream)
{
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemoryPool def;
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    CUdeviceptr p;
    OK(cuMemAllocAsync(&p, 1000, s));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1024);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 1024);
    CUmemoryPool owner = NULL;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    cr_expect_eq(owner, def);
    OK(cuMemsetD32Async(p, 0xabcd1234u, 250, s));
    uint32_t host[250];
    OK(cuMemcpyDtoHAsync(host, p, sizeof host, s));
    OK(cuMemFreeAsync(p, s));
    OK(cuStreamSynchronize(s));
    for (int i = 0; i < 250; i++)
        cr_assert_eq(host[i], 0xabcd1234u);
    /* Freed and, with threshold 0, given back at the sync. */
    size_t size;
    CUdeviceptr base;
    cr_expect_eq(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 1024);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 1024);
    cuuint64_t zero = 0;
    OK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    cuuint64_t one = 1;
    cr_expect_eq(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

static atomic_int gate;

static void CUDA_CB hold(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate)) {
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

Test(mempool, free_waits_for_the_stream)
{
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    OK(cuMemAllocAsync(&p, 4096, s));
    atomic_store(&gate, 0);
    OK(cuLaunchHostFunc(s, hold, NULL));
    OK(cuMemFreeAsync(p, s));
    /* The stream has not reached the free: the memory is still there. */
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, p + 100));
    cr_expect(base == p && size == 4096);
    cr_expect_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    atomic_store(&gate, 1);
    OK(cuStreamSynchronize(s));
    cr_expect_eq(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    OK(cuStreamDestroy(s));
}

Test(mempool, threshold_keeps_and_trim_releases)
{
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    CUmemoryPool def;
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    cuuint64_t keep = 64 * MiB;
    OK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), keep);
    size_t free0, free1, total;
    OK(cuMemGetInfo(&free0, &total));
    CUdeviceptr p, q;
    OK(cuMemAllocAsync(&p, 8 * MiB, s));
    OK(cuMemFreeAsync(p, s));
    OK(cuStreamSynchronize(s));
    /* Held by the pool below its threshold, and reused. */
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free0 - free1, 8 * MiB);
    OK(cuMemAllocAsync(&q, 8 * MiB - 100, s));
    cr_expect_eq(q, p);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    /* Trimming never takes memory in use. */
    OK(cuMemPoolTrimTo(def, 0));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    OK(cuMemFreeAsync(q, s));
    OK(cuCtxSynchronize());
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    OK(cuMemPoolTrimTo(def, 0));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free1, free0);
    OK(cuStreamDestroy(s));
}

Test(mempool, created_pool_current_and_destroyed)
{
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemoryPool pool, def, cur;
    OK(cuMemPoolCreate(&pool, &props));
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    cr_expect_neq(pool, def);
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    OK(cuMemAllocFromPoolAsync(&a, 5000, pool, s));
    cr_expect_eq(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 5120);
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    OK(cuDeviceSetMemPool(0, pool));
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_expect_eq(cur, pool);
    OK(cuMemAllocAsync(&b, 100, s));
    CUmemoryPool owner = NULL;
    OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
    cr_expect_eq(owner, pool);
    /* Destroyed with memory out: it stays usable until freed, and the
     * device's current pool is its default again. */
    OK(cuMemPoolDestroy(pool));
    OK(cuDeviceGetMemPool(&cur, 0));
    cr_expect_eq(cur, def);
    cr_expect_eq(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &(cuuint64_t){ 0 }),
                 CUDA_ERROR_INVALID_VALUE);
    OK(cuMemsetD8Async(a, 1, 5000, s));
    OK(cuMemFreeAsync(a, s));
    OK(cuMemFreeAsync(b, s));
    OK(cuStreamSynchronize(s));
    cr_expect_eq(cuMemAllocFromPoolAsync(&a, 16, pool, s), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamDestroy(s));
}

Test(mempool, max_size_and_reuse_on_the_freeing_stream_only)
{
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                             .maxSize = 1 * MiB };
    CUmemoryPool pool;
    OK(cuMemPoolCreate(&pool, &props));
    CUstream s1, s2;
    OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    cr_expect_eq(cuMemAllocFromPoolAsync(&a, 2 * MiB, pool, s1), CUDA_ERROR_OUT_OF_MEMORY);
    cuuint64_t keep = ~0ull;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    int off = 0;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &off));
    OK(cuMemAllocFromPoolAsync(&a, 256 * 1024, pool, s1));
    OK(cuMemFreeAsync(a, s1));
    OK(cuStreamSynchronize(s1));
    OK(cuMemAllocFromPoolAsync(&b, 256 * 1024, pool, s2));
    cr_expect_neq(b, a, "reused on another stream with opportunistic reuse off");
    OK(cuMemFreeAsync(b, s2));
    OK(cuMemAllocFromPoolAsync(&b, 256 * 1024, pool, s1));
    cr_expect_eq(b, a);
    OK(cuMemFreeAsync(b, s1));
    OK(cuCtxSynchronize());
    OK(cuMemPoolDestroy(pool));
    OK(cuStreamDestroy(s1));
    OK(cuStreamDestroy(s2));
}

Test(mempool, bad_arguments)
{
    CUdeviceptr p;
    cr_expect_eq(cuMemAllocAsync(NULL, 16, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocAsync(&p, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocFromPoolAsync(&p, 16, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAllocFromPoolAsync(&p, 16, (CUmemoryPool)&p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemFreeAsync(0x1234, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPoolTrimTo((CUmemoryPool)&p, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPoolCreate(&(CUmemoryPool){ 0 }, NULL), CUDA_ERROR_INVALID_VALUE);
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 3 } };
    CUmemoryPool pool;
    cr_expect_eq(cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_DEVICE);
    props.location.id = 0;
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    cr_expect_eq(cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect_eq(cuDeviceSetMemPool(0, (CUmemoryPool)&p), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemPoolGetAttribute((CUmemoryPool)&p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &(cuuint64_t){ 0 }),
                 CUDA_ERROR_INVALID_VALUE);
    /* cuMemAlloc'd memory freed on a stream, and a pool allocation by
     * cuMemFree. */
    OK(cuMemAlloc(&p, 64));
    OK(cuMemFreeAsync(p, 0));
    OK(cuMemAllocAsync(&p, 64, 0));
    OK(cuMemFree(p));
    CUmemoryPool def;
    OK(cuDeviceGetDefaultMemPool(&def, 0));
    cr_expect_eq(attr64(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
}
