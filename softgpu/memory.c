/* Allocations: device memory (host pages whose address is the device
 * pointer), host allocations and registrations, and the queries that
 * answer from the allocation table. */
#include "softgpu/driver.h"

#include <string.h>

SOFT_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    SOFT_TRY(soft_capture_unsafe());
    if (bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!soft_device_reserve(c->device, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = soft_pages_alloc(bytesize);
    if (!p) {
        soft_device_unreserve(c->device, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    soft_range r = { .base = (uintptr_t)p, .size = bytesize, .kind = SOFT_MEM_DEVICE,
                     .device = c->device, .ctx = c };
    CUresult res = soft_range_add(&r);
    if (res != CUDA_SUCCESS) {
        soft_pages_free(p, bytesize);
        soft_device_unreserve(c->device, bytesize);
        return res;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                             size_t Height, unsigned int ElementSizeBytes)
{
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (pitch < WidthInBytes || Height > SIZE_MAX / pitch)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(cuMemAlloc_v2(dptr, pitch * Height));
    *pPitch = pitch;
    return CUDA_SUCCESS;
}

/* Frees a device or host range once the work that may use it is done. */
static CUresult free_kind(uint64_t base, soft_mem_kind kind)
{
    SOFT_TRY(soft_check_init());
    soft_range r;
    if (!soft_range_find(base, &r) || r.base != base || r.kind != kind)
        return CUDA_ERROR_INVALID_VALUE;
    if (r.pool)
        return soft_pool_free_now(&r);
    /* cuMemFree synchronises: kernels still running may use the range. */
    if (r.ctx && soft_handle_valid(r.ctx, SOFT_CTX))
        soft_ctx_sync(r.ctx);
    if (!soft_range_remove(base, &r))
        return CUDA_ERROR_INVALID_VALUE;   /* freed meanwhile by another thread */
    soft_pages_free((void *)(uintptr_t)r.base, r.size);
    if (kind == SOFT_MEM_DEVICE || kind == SOFT_MEM_MANAGED)
        soft_device_unreserve(r.device, r.size);
    if (kind == SOFT_MEM_MANAGED)
        soft_managed_forget(r.base);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    /* cudaFree(0), the runtime's way to make a context, ends here. */
    if (!dptr)
        return soft_check_init();
    SOFT_TRY(soft_capture_unsafe());
    soft_range r;
    if (soft_range_find(dptr, &r) && r.base == dptr && r.kind == SOFT_MEM_MANAGED)
        return free_kind(dptr, SOFT_MEM_MANAGED);
    return free_kind(dptr, SOFT_MEM_DEVICE);
}

SOFT_API CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    uint64_t t = soft_device_total_memory(), u = soft_device_used(c->device);
    if (free)
        *free = t - u;
    if (total)
        *total = t;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SOFT_TRY(soft_check_init());
    soft_range r;
    if (!soft_range_find(dptr, &r))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = r.base;
    if (psize)
        *psize = r.size;
    return CUDA_SUCCESS;
}

/* ---- host memory ---- */

SOFT_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    void *p = soft_pages_alloc(bytesize);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    soft_range r = { .base = (uintptr_t)p, .size = bytesize, .kind = SOFT_MEM_HOST,
                     .device = c->device, .ctx = c, .flags = Flags };
    CUresult res = soft_range_add(&r);
    if (res != CUDA_SUCCESS) {
        soft_pages_free(p, bytesize);
        return res;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return cuMemHostAlloc(pp, bytesize, 0);
}

SOFT_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
    if (!p)
        return soft_check_init();
    return free_kind((uintptr_t)p, SOFT_MEM_HOST);
}

SOFT_API CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    soft_range r = { .base = (uintptr_t)p, .size = bytesize, .kind = SOFT_MEM_REGISTERED,
                     .device = c->device, .ctx = c, .flags = Flags };
    CUresult res = soft_range_add(&r);
    return res == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : res;
}

SOFT_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    return cuMemHostRegister_v2(p, bytesize, Flags);
}

SOFT_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    SOFT_TRY(soft_check_init());
    soft_range r;
    if (!p || !soft_range_find((uintptr_t)p, &r) || r.base != (uintptr_t)p ||
        r.kind != SOFT_MEM_REGISTERED)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    if (r.ctx && soft_handle_valid(r.ctx, SOFT_CTX))
        soft_ctx_sync(r.ctx);
    soft_range_remove(r.base, NULL);
    return CUDA_SUCCESS;
}

static bool host_range(const void *p, soft_range *r)
{
    return p && soft_range_find((uintptr_t)p, r) &&
           (r->kind == SOFT_MEM_HOST || r->kind == SOFT_MEM_REGISTERED);
}

SOFT_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    soft_range r;
    if (!host_range(p, &r))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    soft_range r;
    if (!host_range(p, &r))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags;
    return CUDA_SUCCESS;
}

/* ---- pointer attributes ---- */

static CUresult pointer_attribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
    soft_range r;
    bool known = soft_range_find(ptr, &r);
    bool host = known && (r.kind == SOFT_MEM_HOST || r.kind == SOFT_MEM_REGISTERED);
    if (!known && a != CU_POINTER_ATTRIBUTE_MAPPED && a != CU_POINTER_ATTRIBUTE_IS_MANAGED)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = r.ctx; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!host && r.kind != SOFT_MEM_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = r.base;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = known && r.kind == SOFT_MEM_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = r.device; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(unsigned *)data = r.kind == SOFT_MEM_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = r.base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = r.size;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = known; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(unsigned *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned *)data = (r.flags & CU_MEMHOSTREGISTER_READ_ONLY) && r.kind == SOFT_MEM_REGISTERED
                                ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                                : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = r.pool; break;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE: *(unsigned *)data = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    return pointer_attribute(data, attribute, ptr);
}

SOFT_API CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                                 void **data, CUdeviceptr ptr)
{
    if (!attributes || !data || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        if ((unsigned)attributes[i] == 0 || (unsigned)attributes[i] > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE)
            return CUDA_ERROR_INVALID_VALUE;
        /* An unknown pointer is no error here: each answer says "none". */
        if (pointer_attribute(data[i], attributes[i], ptr) != CUDA_SUCCESS) {
            switch ((int)attributes[i]) {
            case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data[i] = NULL; break;
            case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data[i] = -2; break;
            case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
            case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
            case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
                *(unsigned long long *)data[i] = 0;
                break;
            case CU_POINTER_ATTRIBUTE_HOST_POINTER:
            case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
                *(void **)data[i] = NULL;
                break;
            case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
                *(size_t *)data[i] = 0;
                break;
            default: *(unsigned *)data[i] = 0; break;
            }
        }
    }
    return CUDA_SUCCESS;
}
