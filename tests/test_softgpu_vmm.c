/* softgpu's virtual memory calls as the agent uses them: reserve a window at
 * a chosen address, create physical memory, map it, grant access, use it
 * through copies and pointer queries, unmap, release, free. The window sits
 * at 0x7e0000000000: high application memory, far from ASan's shadow. */
#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/cuda_ok.h"

#define WINDOW 0x7e0000000000ull
#define WSIZE (256ull << 30)   /* a whole agent window */

static CUcontext ctx;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

TestSuite(vmm, .init = setup);

static CUmemAllocationProp prop(void)
{
    CUmemAllocationProp p = { 0 };
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static void grant(CUdeviceptr p, size_t n, CUmemAccess_flags f)
{
    CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 }, .flags = f };
    OK(cuMemSetAccess(p, n, &a, 1));
}

Test(vmm, place_map_use_and_undo)
{
    CUmemAllocationProp pr = prop();
    size_t gran, rec;
    OK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    OK(cuMemGetAllocationGranularity(&rec, &pr, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    cr_expect(gran >= 4096 && rec % gran == 0);

    CUdeviceptr w;
    OK(cuMemAddressReserve(&w, WSIZE, 0, WINDOW, 0));
    cr_assert_eq(w, WINDOW);
    /* The same range again: taken. */
    CUdeviceptr w2;
    cr_expect_neq(cuMemAddressReserve(&w2, WSIZE, 0, WINDOW + WSIZE / 2, 0), CUDA_SUCCESS);

    size_t n = 4 * gran;
    size_t free0, free1, total;
    OK(cuMemGetInfo(&free0, &total));
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, n, &pr, 0));
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free0 - free1, n);

    CUdeviceptr a = w + 16 * gran;
    OK(cuMemMap(a, n, 0, h, 0));
    /* Mapped but not yet accessible: not device memory yet. */
    uint8_t buf[64] = { 1, 2, 3 };
    cr_expect_eq(cuMemcpyHtoD(a, buf, sizeof buf), CUDA_ERROR_INVALID_VALUE);
    grant(a, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    unsigned long long flags;
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    OK(cuMemGetAccess(&flags, &loc, a + 5));
    cr_expect_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    uint8_t *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 7 + 3);
    OK(cuMemcpyHtoD(a, src, n));
    /* The device pointer is the host address. */
    cr_expect_eq(memcmp((void *)(uintptr_t)a, src, n), 0);
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, a + n - 1));
    cr_expect(base == a && size == n);
    unsigned type;
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
    cr_expect_eq(type, CU_MEMORYTYPE_DEVICE);

    /* A second view of the same memory elsewhere in the window. */
    CUdeviceptr b = w + 64 * gran;
    OK(cuMemMap(b, n, 0, h, 0));
    grant(b, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemcpyDtoH(dst, b, n));
    cr_expect_eq(memcmp(dst, src, n), 0);
    OK(cuMemsetD8(b, 0xee, 16));
    cr_expect_eq(((uint8_t *)(uintptr_t)a)[15], 0xee);

    CUmemGenericAllocationHandle h2;
    OK(cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(b + 8)));
    cr_expect_eq(h2, h);
    OK(cuMemRelease(h2));
    CUmemAllocationProp got;
    OK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    cr_expect_eq(got.location.id, 0);

    /* Release while mapped: the memory lives until the last unmap. */
    OK(cuMemRelease(h));
    cr_expect_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(b, n));
    cr_expect_eq(cuMemcpyDtoH(dst, b, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpyDtoH(dst, a, n));
    cr_expect_eq(dst[20], src[20]);
    cr_expect_eq(cuMemUnmap(a, n / 2), CUDA_ERROR_INVALID_VALUE);   /* part of a mapping */
    OK(cuMemUnmap(a, n));
    cr_expect_eq(cuMemGetAddressRange(&base, &size, a), CUDA_ERROR_NOT_FOUND);
    OK(cuMemGetInfo(&free1, &total));
    cr_expect_eq(free1, free0);

    cr_expect_eq(cuMemAddressFree(w, WSIZE / 2), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemAddressFree(w, WSIZE));
    /* Freed: the address can be had again. */
    OK(cuMemAddressReserve(&w, WSIZE, 0, WINDOW, 0));
    cr_expect_eq(w, WINDOW);
    OK(cuMemAddressFree(w, WSIZE));
    free(src);
    free(dst);
}

Test(vmm, reserve_anywhere_is_aligned)
{
    CUdeviceptr w;
    OK(cuMemAddressReserve(&w, 1 << 20, 1ull << 30, 0, 0));
    cr_expect_eq(w % (1ull << 30), 0);
    OK(cuMemAddressFree(w, 1 << 20));
}

Test(vmm, never_replaces_an_existing_mapping)
{
    void *p = mmap((void *)(uintptr_t)WINDOW, 1 << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    cr_assert_eq(p, (void *)(uintptr_t)WINDOW);
    *(int *)p = 42;
    CUdeviceptr w;
    cr_expect_eq(cuMemAddressReserve(&w, 4 << 20, 0, WINDOW, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_expect_eq(*(int *)p, 42);
    munmap(p, 1 << 20);
}

Test(vmm, bad_arguments)
{
    CUmemAllocationProp pr = prop();
    CUdeviceptr w;
    CUmemGenericAllocationHandle h;
    cr_expect_eq(cuMemAddressReserve(&w, 1000, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);      /* not pages */
    cr_expect_eq(cuMemAddressReserve(&w, 4096, 3, 0, 0), CUDA_ERROR_INVALID_VALUE);      /* alignment */
    cr_expect_eq(cuMemAddressReserve(&w, 4096, 0, WINDOW + 12, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemAddressReserve(NULL, 4096, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemCreate(&h, 1000, &pr, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemCreate(&h, 1 << 20, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    pr.location.id = 5;
    cr_expect_eq(cuMemCreate(&h, 1 << 20, &pr, 0), CUDA_ERROR_INVALID_DEVICE);
    pr = prop();
    cr_expect_eq(cuMemCreate(&h, 8ull << 30, &pr, 0), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAddressReserve(&w, 16 << 20, 0, WINDOW, 0));
    OK(cuMemCreate(&h, 2 << 20, &pr, 0));
    cr_expect_eq(cuMemMap(w, 4 << 20, 0, h, 0), CUDA_ERROR_INVALID_VALUE);        /* beyond the memory */
    cr_expect_eq(cuMemMap(w + (15 << 20), 2 << 20, 0, h, 0), CUDA_ERROR_INVALID_VALUE);   /* beyond the window */
    cr_expect_eq(cuMemMap(WINDOW + (64ull << 20), 2 << 20, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* no window */
    cr_expect_eq(cuMemMap(w, 2 << 20, 0, (CUmemGenericAllocationHandle)0x1234, 0), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemMap(w, 2 << 20, 0, h, 0));
    cr_expect_eq(cuMemMap(w + (1 << 20), 1 << 20, 0, h, 0), CUDA_ERROR_ALREADY_MAPPED);
    CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    cr_expect_eq(cuMemSetAccess(w, 4 << 20, &a, 1), CUDA_ERROR_INVALID_VALUE);   /* not all mapped */
    cr_expect_eq(cuMemSetAccess(w, 2 << 20, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    a.location.id = 9;
    cr_expect_eq(cuMemSetAccess(w, 2 << 20, &a, 1), CUDA_ERROR_INVALID_DEVICE);
    cr_expect_eq(cuMemUnmap(w, 4 << 20), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(w, 2 << 20));
    OK(cuMemRelease(h));
    cr_expect_eq(cuMemMap(w, 2 << 20, 0, h, 0), CUDA_ERROR_INVALID_HANDLE);     /* released */
    OK(cuMemAddressFree(w, 16 << 20));
    cr_expect_eq(cuMemAddressFree(w, 16 << 20), CUDA_ERROR_INVALID_VALUE);
}

Test(vmm, many_allocations_in_one_window)
{
    CUmemAllocationProp pr = prop();
    size_t gran;
    OK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr w;
    OK(cuMemAddressReserve(&w, 1ull << 30, 0, WINDOW, 0));
    enum { N = 200 };
    CUmemGenericAllocationHandle hs[N];
    for (int i = 0; i < N; i++) {
        OK(cuMemCreate(&hs[i], gran, &pr, 0));
        OK(cuMemMap(w + (CUdeviceptr)i * gran, gran, 0, hs[i], 0));
        OK(cuMemRelease(hs[i]));
    }
    grant(w, N * gran, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* Mappings end to end are one range to a fill, as on a GPU; past the
     * last one there is no memory. */
    OK(cuMemsetD32(w + gran * 7, 7, gran / 4));
    OK(cuMemsetD32(w + gran * 7, 8, gran / 4 + 1));
    cr_expect_eq(((uint32_t *)(uintptr_t)(w + gran * 7))[3], 8);
    cr_expect_eq(((uint32_t *)(uintptr_t)(w + gran * 8))[0], 8);
    cr_expect_eq(((uint32_t *)(uintptr_t)(w + gran * 8))[1], 0);
    cr_expect_eq(cuMemsetD32(w + gran * (N - 1), 7, gran / 4 + 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(w, N * gran));
    OK(cuMemAddressFree(w, 1ull << 30));
}

/* Unmapped while the handle lives, memory keeps its bytes for the next
 * cuMemMap, whole or in part, as a GPU's does. */
Test(vmm, unmapped_memory_keeps_its_bytes)
{
    CUmemAllocationProp pr = prop();
    CUdeviceptr w;
    CUmemGenericAllocationHandle h;
    size_t n = 4 << 20;
    OK(cuMemAddressReserve(&w, 64 << 20, 0, WINDOW, 0));
    OK(cuMemCreate(&h, n, &pr, 0));
    OK(cuMemMap(w, n, 0, h, 0));
    grant(w, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    uint32_t *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n / 4; i++)
        src[i] = (uint32_t)(i * 2654435761u);
    OK(cuMemcpyHtoD(w, src, n));
    OK(cuMemUnmap(w, n));
    cr_expect_eq(cuMemcpyDtoH(dst, w, 4), CUDA_ERROR_INVALID_VALUE);

    /* Whole again, elsewhere. */
    CUdeviceptr b = w + (16 << 20);
    OK(cuMemMap(b, n, 0, h, 0));
    grant(b, n, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    memset(dst, 0, n);
    OK(cuMemcpyDtoH(dst, b, n));
    cr_expect_eq(memcmp(dst, src, n), 0, "the bytes after an unmap and a map");
    OK(cuMemUnmap(b, n));

    /* Then its second half alone. */
    OK(cuMemMap(b, n / 2, n / 2, h, 0));
    grant(b, n / 2, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    memset(dst, 0, n);
    OK(cuMemcpyDtoH(dst, b, n / 2));
    cr_expect_eq(memcmp(dst, (uint8_t *)src + n / 2, n / 2), 0, "the second half mapped alone");
    OK(cuMemRelease(h));
    OK(cuMemUnmap(b, n / 2));
    OK(cuMemAddressFree(w, 64 << 20));
    free(src);
    free(dst);
}

#include <pthread.h>

static pthread_mutex_t gm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc = PTHREAD_COND_INITIALIZER;
static bool gate_open;

static void CUDA_CB wait_gate(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gm);
    while (!gate_open)
        pthread_cond_wait(&gc, &gm);
    pthread_mutex_unlock(&gm);
}

Test(vmm, unmapped_under_queued_work_is_an_error_not_a_crash)
{
    CUmemAllocationProp pr = prop();
    CUdeviceptr w;
    CUmemGenericAllocationHandle h;
    OK(cuMemAddressReserve(&w, 16 << 20, 0, WINDOW, 0));
    OK(cuMemCreate(&h, 2 << 20, &pr, 0));
    OK(cuMemMap(w, 2 << 20, 0, h, 0));
    grant(w, 2 << 20, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuLaunchHostFunc(s, wait_gate, NULL));
    OK(cuMemsetD32Async(w, 1, 1024, s));
    OK(cuMemcpyDtoDAsync(w + 4096, w, 4096, s));
    /* The program unmaps while that work still waits: its mistake. */
    OK(cuMemUnmap(w, 2 << 20));
    pthread_mutex_lock(&gm);
    gate_open = true;
    pthread_cond_broadcast(&gc);
    pthread_mutex_unlock(&gm);
    cr_expect_eq(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);   /* sticky */
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(w, 16 << 20));
}

#include "tests/support.h"
#include <stdio.h>

Test(vmm, kernels_run_on_mapped_memory)
{
    /* The agent's way: every allocation placed in its window. */
    CUmemAllocationProp pr = prop();
    CUdeviceptr w;
    OK(cuMemAddressReserve(&w, 1ull << 30, 0, WINDOW, 0));
    enum { N = 50000 };
    CUdeviceptr buf[3];
    CUmemGenericAllocationHandle h[3];
    size_t gran;
    OK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t size = (N * 4 + gran - 1) / gran * gran;
    for (int i = 0; i < 3; i++) {
        buf[i] = w + (CUdeviceptr)i * 2 * size;   /* a hole after each */
        OK(cuMemCreate(&h[i], size, &pr, 0));
        OK(cuMemMap(buf[i], size, 0, h[i], 0));
        grant(buf[i], size, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    }
    int *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        a[i] = i * 3;
        b[i] = 7 - i;
    }
    OK(cuMemcpyHtoD(buf[0], a, N * 4));
    OK(cuMemcpyHtoD(buf[1], b, N * 4));
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t len;
    char *img = support_read_file(path, &len);
    cr_assert(img);
    CUmodule m;
    OK(cuModuleLoadData(&m, img));
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "vecadd_i32"));
    int n = N;
    void *args[] = { &buf[0], &buf[1], &buf[2], &n };
    OK(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(c, buf[2], N * 4));
    for (int i = 0; i < N; i++)
        cr_assert_eq(c[i], a[i] + b[i], "[%d]", i);
    /* One element past the last mapping: the hole. */
    int over = (int)(size / 4) + 1;
    void *args2[] = { &buf[0], &buf[1], &buf[2], &over };
    OK(cuLaunchKernel(f, (over + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args2, NULL));
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    free(img);
    free(a);
    free(b);
    free(c);
}

/* ---- two devices: which devices have access is enforced ---- */

static CUcontext on[2];

static void setup_two(void)
{
    setenv("SOFTGPU_DEVICES", "2", 1);
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(cuDevicePrimaryCtxRetain(&on[d], d), CUDA_SUCCESS);
}

TestSuite(vmm_two, .init = setup_two);

static void set_access(CUdeviceptr p, size_t n, int dev, CUmemAccess_flags f)
{
    CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev }, .flags = f };
    OK(cuMemSetAccess(p, n, &a, 1));
}

static CUfunction vecadd_on(int dev)
{
    OK(cuCtxSetCurrent(on[dev]));
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t len;
    char *img = support_read_file(path, &len);
    cr_assert(img);
    CUmodule m;
    OK(cuModuleLoadData(&m, img));
    free(img);
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "vecadd_i32"));
    return f;
}

Test(vmm_two, a_device_without_access_finds_no_memory)
{
    CUmemAllocationProp pr = prop();   /* on device 0 */
    size_t gran;
    OK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    enum { N = 4096 };
    size_t size = (3 * N * 4 + gran - 1) / gran * gran;
    CUdeviceptr p;
    OK(cuMemAddressReserve(&p, size, 0, 0, 0));
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, size, &pr, 0));
    OK(cuMemMap(p, size, 0, h, 0));
    OK(cuMemRelease(h));
    CUfunction add[2] = { vecadd_on(0), vecadd_on(1) };
    int a[N], c[N];
    for (int i = 0; i < N; i++)
        a[i] = i * 5 - 7;
    CUdeviceptr x = p, y = p + N * 4, z = p + 2 * N * 4;
    int n = N;
    void *args[] = { &x, &y, &z, &n };
    CUmemLocation loc1 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 };
    unsigned long long flags = 99;

    /* Device 0 only. */
    set_access(p, size, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemGetAccess(&flags, &loc1, p));
    cr_expect_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    OK(cuCtxSetCurrent(on[1]));
    cr_expect_eq(cuMemcpyHtoD(x, a, sizeof a), CUDA_ERROR_INVALID_VALUE, "device 1 has no access");
    OK(cuCtxSetCurrent(on[0]));
    OK(cuMemcpyHtoD(x, a, sizeof a));
    OK(cuMemcpyHtoD(y, a, sizeof a));

    /* Device 1 too: the other device's access stays. */
    set_access(p, size, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuMemGetAccess(&flags, &loc1, p));
    cr_expect_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    OK(cuCtxSetCurrent(on[1]));
    OK(cuLaunchKernel(add[1], N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(c, z, sizeof c));
    for (int i = 0; i < N; i++)
        cr_assert_eq(c[i], 2 * a[i], "[%d]", i);

    /* Device 1's access taken back: its copies are refused, device 0's go
     * on, and its kernels fault as a GPU's would. */
    set_access(p, size, 1, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    OK(cuMemGetAccess(&flags, &loc1, p));
    cr_expect_eq(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    OK(cuCtxSetCurrent(on[0]));
    memset(c, 0, sizeof c);
    OK(cuMemcpyDtoH(c, z, sizeof c));
    cr_expect_eq(c[N - 1], 2 * a[N - 1]);
    OK(cuCtxSetCurrent(on[1]));
    cr_expect_eq(cuMemcpyDtoH(c, z, sizeof c), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuMemsetD32(z, 0, N), CUDA_ERROR_INVALID_VALUE);
    OK(cuLaunchKernel(add[1], N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuCtxSetCurrent(on[0]));
    OK(cuLaunchKernel(add[0], N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
}

Test(vmm_two, copies_and_kernels_span_mappings_end_to_end)
{
    /* One reservation, two pieces of physical memory (one on each device)
     * mapped back to back, as PyTorch's expandable segments grow: copies
     * and kernels see one range. */
    size_t gran;
    CUmemAllocationProp pr = prop();
    OK(cuMemGetAllocationGranularity(&gran, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size_t piece = 2 * gran;
    CUdeviceptr p;
    OK(cuMemAddressReserve(&p, 2 * piece, 0, 0, 0));
    for (int d = 0; d < 2; d++) {
        CUmemAllocationProp pd = prop();
        pd.location.id = d;
        CUmemGenericAllocationHandle h;
        OK(cuMemCreate(&h, piece, &pd, 0));
        OK(cuMemMap(p + d * piece, piece, 0, h, 0));
        OK(cuMemRelease(h));
    }
    CUmemAccessDesc both[2] = {
        { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
        { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
    };
    OK(cuMemSetAccess(p, 2 * piece, both, 2));
    int n = (int)(2 * piece / 4 / 3);
    int *a = malloc(2 * piece), *c = malloc(2 * piece);
    for (int i = 0; i < 3 * n; i++)
        a[i] = i ^ 0x5a5a;
    CUfunction add = vecadd_on(1);
    OK(cuMemcpyHtoD(p, a, 3 * (size_t)n * 4));   /* across the seam */
    CUdeviceptr x = p, y = p + (size_t)n * 4, z = p + 2 * (size_t)n * 4;
    void *args[] = { &x, &y, &z, &n };
    OK(cuLaunchKernel(add, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());   /* device 0's copy does not wait for device 1's work */
    OK(cuCtxSetCurrent(on[0]));
    OK(cuMemcpyDtoH(c, p, 3 * (size_t)n * 4));
    for (int i = 0; i < n; i++)
        cr_assert_eq(c[2 * n + i], a[i] + a[n + i], "[%d]", i);
    /* Past the reservation's end: no memory. */
    cr_expect_eq(cuMemcpyDtoH(c, p + piece, piece + 4), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemUnmap(p, piece));
    OK(cuMemUnmap(p + piece, piece));
    OK(cuMemAddressFree(p, 2 * piece));
    free(a);
    free(c);
}
