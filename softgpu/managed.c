/* Managed memory: here the device's memory is this process's, so a managed
 * allocation is simply host pages that kernels and the CPU both use, at
 * once (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 1, truthfully).
 * Prefetches and advice move nothing; they are validated, ordered on their
 * stream where CUDA orders them, and remembered per allocation so that
 * cuMemRangeGetAttribute(s) answers what the program set. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

/* What the program said about one managed allocation (the whole of it:
 * advice on part of an allocation is remembered for all of it). */
typedef struct advice {
    struct advice *next;
    uint64_t base, size;
    bool read_mostly;
    CUmemLocation preferred;           /* type 0: none */
    uint64_t accessed_by;              /* bit d: device d; bit 63: the CPU */
    CUmemLocation last_prefetch;       /* type 0: never prefetched */
} advice;

static advice *advices;
static pthread_mutex_t advice_lock = PTHREAD_MUTEX_INITIALIZER;

#define ACCESSED_BY_CPU (UINT64_C(1) << 63)

SOFT_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    SOFT_TRY(soft_capture_unsafe());
    if (bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    if (!soft_device_reserve(c->device, bytesize))
        return CUDA_ERROR_OUT_OF_MEMORY;
    advice *a = calloc(1, sizeof *a);
    void *p = a ? soft_pages_alloc(bytesize) : NULL;
    if (!p) {
        free(a);
        soft_device_unreserve(c->device, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    soft_range r = { .base = (uintptr_t)p, .size = bytesize, .kind = SOFT_MEM_MANAGED,
                     .device = c->device, .ctx = c, .flags = flags };
    CUresult res = soft_range_add(&r);
    if (res != CUDA_SUCCESS) {
        free(a);
        soft_pages_free(p, bytesize);
        soft_device_unreserve(c->device, bytesize);
        return res;
    }
    a->base = (uintptr_t)p;
    a->size = bytesize;
    pthread_mutex_lock(&advice_lock);
    a->next = advices;
    advices = a;
    pthread_mutex_unlock(&advice_lock);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

void soft_managed_forget(uint64_t base)
{
    pthread_mutex_lock(&advice_lock);
    for (advice **pp = &advices; *pp; pp = &(*pp)->next)
        if ((*pp)->base == base) {
            advice *a = *pp;
            *pp = a->next;
            free(a);
            break;
        }
    pthread_mutex_unlock(&advice_lock);
}

/* The advice of the managed allocation holding [p, p + n), under
 * advice_lock; NULL (and the lock not held) when the range is not inside
 * one managed allocation. */
static advice *advice_of(CUdeviceptr p, size_t n)
{
    pthread_mutex_lock(&advice_lock);
    for (advice *a = advices; a; a = a->next)
        if (p >= a->base && p - a->base < a->size && n <= a->size - (p - a->base))
            return a;
    pthread_mutex_unlock(&advice_lock);
    return NULL;
}

/* A location as the program may name it for prefetches and advice. */
static bool location_valid(CUmemLocation l)
{
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return l.id >= 0 && l.id < soft_device_count();
    return l.type == CU_MEM_LOCATION_TYPE_HOST || l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
           (l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && l.id == 0);
}

/* The v1 calls name a device or CU_DEVICE_CPU. */
static CUmemLocation location_of_device(CUdevice d)
{
    if (d == CU_DEVICE_CPU)
        return (CUmemLocation){ CU_MEM_LOCATION_TYPE_HOST, 0 };
    return (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, d };
}

/* ---- prefetch ---- */

static void run_nothing(soft_op *op, struct CUctx_st *ctx)
{
    (void)op;
    (void)ctx;
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation to, unsigned flags, CUstream h, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (flags != 0 || n == 0 || !location_valid(to))
        return to.type == CU_MEM_LOCATION_TYPE_DEVICE && !location_valid(to) ? CUDA_ERROR_INVALID_DEVICE
                                                                             : CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    advice *a = advice_of(p, n);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    a->last_prefetch = to;
    pthread_mutex_unlock(&advice_lock);
    /* Nothing moves; the op keeps the call's place on the stream (a capture
     * records it as an empty step). */
    if (soft_capturing(s))
        return CUDA_SUCCESS;
    soft_op *op = soft_op_new(run_nothing);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    return prefetch(devPtr, count, location_of_device(dstDevice), 0, hStream, false);
}

SOFT_API CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                                  CUstream hStream)
{
    return prefetch(devPtr, count, location_of_device(dstDevice), 0, hStream, true);
}

SOFT_API CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                unsigned int flags, CUstream hStream)
{
    return prefetch(devPtr, count, location, flags, hStream, false);
}

SOFT_API CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                     unsigned int flags, CUstream hStream)
{
    return prefetch(devPtr, count, location, flags, hStream, true);
}

/* ---- advice ---- */

static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise what, CUmemLocation where)
{
    SOFT_TRY(soft_check_init());
    if (n == 0 || what < CU_MEM_ADVISE_SET_READ_MOSTLY || what > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    bool needs_location = what == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || what == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                          what == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (needs_location && !location_valid(where))
        return where.type == CU_MEM_LOCATION_TYPE_DEVICE ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_INVALID_VALUE;
    advice *a = advice_of(p, n);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t bit = where.type == CU_MEM_LOCATION_TYPE_DEVICE ? UINT64_C(1) << (where.id & 62) : ACCESSED_BY_CPU;
    switch (what) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY: a->read_mostly = true; break;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY: a->read_mostly = false; break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: a->preferred = where; break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: a->preferred = (CUmemLocation){ 0, 0 }; break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY: a->accessed_by |= bit; break;
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: a->accessed_by &= ~bit; break;
    }
    pthread_mutex_unlock(&advice_lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    return advise(devPtr, count, advice, location_of_device(device));
}

SOFT_API CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                         CUmemLocation location)
{
    return advise(devPtr, count, advice, location);
}

/* ---- range attributes ---- */

/* A location as the v1 attributes give it: a device, CU_DEVICE_CPU, or
 * CU_DEVICE_INVALID for none. */
static int device_of_location(CUmemLocation l)
{
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE)
        return l.id;
    return l.type == 0 ? CU_DEVICE_INVALID : CU_DEVICE_CPU;
}

static CUresult range_attribute(void *data, size_t size, CUmem_range_attribute what, const advice *a)
{
    int32_t *out = data;
    switch (what) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        if (size != 4)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
        if (size == 0 || size % 4)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (what) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *out = a->read_mostly; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *out = device_of_location(a->preferred); break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *out = device_of_location(a->last_prefetch); break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: *out = (int32_t)a->preferred.type; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *out = a->preferred.id; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: *out = (int32_t)a->last_prefetch.type; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: *out = a->last_prefetch.id; break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        /* Devices that have it, then CU_DEVICE_INVALID in the rest. */
        size_t k = 0, room = size / 4;
        if (a->accessed_by & ACCESSED_BY_CPU)
            out[k++] = CU_DEVICE_CPU;
        for (int d = 0; d < 63 && k < room; d++)
            if (a->accessed_by & (UINT64_C(1) << d))
                out[k++] = d;
        while (k < room)
            out[k++] = CU_DEVICE_INVALID;
        break;
    }
    default: break;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                                 CUdeviceptr devPtr, size_t count)
{
    SOFT_TRY(soft_check_init());
    if (!data || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    advice *a = advice_of(devPtr, count);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = range_attribute(data, dataSize, attribute, a);
    pthread_mutex_unlock(&advice_lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                                  size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    SOFT_TRY(soft_check_init());
    if (!data || !dataSizes || !attributes || numAttributes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < numAttributes; i++) {
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
        SOFT_TRY(cuMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count));
    }
    return CUDA_SUCCESS;
}

/* ---- stream attachment and pointer attributes ---- */

static CUresult attach(CUstream h, CUdeviceptr p, size_t n, unsigned flags, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    if (flags == CU_MEM_ATTACH_SINGLE && s->legacy)
        return CUDA_ERROR_INVALID_VALUE;   /* a single stream cannot be the NULL stream */
    soft_range r;
    if (!soft_range_find(p, &r))
        return CUDA_ERROR_INVALID_VALUE;
    /* Managed memory: the whole allocation (length 0 means that too). */
    if (r.kind == SOFT_MEM_MANAGED && (r.base != p || (n != 0 && n != r.size)))
        return CUDA_ERROR_INVALID_VALUE;
    if (r.kind != SOFT_MEM_MANAGED && r.kind != SOFT_MEM_GLOBAL)
        return CUDA_ERROR_INVALID_VALUE;
    /* Every association lets the CPU in here; the step only keeps its place. */
    if (soft_capturing(s))
        return CUDA_SUCCESS;
    soft_op *op = soft_op_new(run_nothing);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
    return attach(hStream, dptr, length, flags, false);
}

SOFT_API CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length,
                                                      unsigned int flags)
{
    return attach(hStream, dptr, length, flags, true);
}

SOFT_API CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SOFT_TRY(soft_check_init());
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
        return CUDA_ERROR_INVALID_VALUE;
    soft_range r;
    if (!soft_range_find(ptr, &r) || r.kind == SOFT_MEM_HOST || r.kind == SOFT_MEM_REGISTERED)
        return CUDA_ERROR_INVALID_VALUE;
    /* Every operation here is synchronous with respect to memory already. */
    return CUDA_SUCCESS;
}

/* ---- batches (CUDA 13) ---- */

/* The location of op i of a batch: the last whose first op is at most i. */
static bool batch_valid(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs, size_t *idxs,
                        size_t nlocs, unsigned long long flags, bool with_locations)
{
    if (!dptrs || !sizes || count == 0 || flags != 0)
        return false;
    if (!with_locations)
        return true;
    if (!locs || !idxs || nlocs == 0 || nlocs > count || idxs[0] != 0)
        return false;
    for (size_t j = 1; j < nlocs; j++)
        if (idxs[j] <= idxs[j - 1] || idxs[j] >= count)
            return false;
    return true;
}

static CUresult batch(CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs, size_t *idxs,
                      size_t nlocs, unsigned long long flags, CUstream h, bool ptds, bool with_locations)
{
    SOFT_TRY(soft_check_init());
    if (!batch_valid(dptrs, sizes, count, locs, idxs, nlocs, flags, with_locations))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    if (s->legacy)
        return CUDA_ERROR_INVALID_VALUE;   /* batches never go on the legacy NULL stream */
    /* Every range first, so a bad one changes nothing. */
    for (size_t i = 0; i < count; i++) {
        advice *a = advice_of(dptrs[i], sizes[i]);
        if (!a || sizes[i] == 0) {
            if (a)
                pthread_mutex_unlock(&advice_lock);
            return CUDA_ERROR_INVALID_VALUE;
        }
        pthread_mutex_unlock(&advice_lock);
    }
    size_t j = 0;
    for (size_t i = 0; i < count; i++) {
        while (with_locations && j + 1 < nlocs && idxs[j + 1] <= i)
            j++;
        /* A discard leaves the contents undefined: keeping them is allowed. */
        if (with_locations)
            SOFT_TRY(prefetch(dptrs[i], sizes[i], locs[j], 0, h, ptds));
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                  CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                                  size_t numPrefetchLocs, unsigned long long flags, CUstream hStream)
{
    return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, false, true);
}

SOFT_API CUresult CUDAAPI cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                       CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                                       size_t numPrefetchLocs, unsigned long long flags,
                                                       CUstream hStream)
{
    return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, true, true);
}

SOFT_API CUresult CUDAAPI cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                 unsigned long long flags, CUstream hStream)
{
    return batch(dptrs, sizes, count, NULL, NULL, 0, flags, hStream, false, false);
}

SOFT_API CUresult CUDAAPI cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                      unsigned long long flags, CUstream hStream)
{
    return batch(dptrs, sizes, count, NULL, NULL, 0, flags, hStream, true, false);
}

SOFT_API CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                            CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                                            size_t numPrefetchLocs, unsigned long long flags,
                                                            CUstream hStream)
{
    return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, false, true);
}

SOFT_API CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                                 CUmemLocation *prefetchLocs,
                                                                 size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                                 unsigned long long flags, CUstream hStream)
{
    return batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags, hStream, true, true);
}
