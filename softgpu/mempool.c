/* Memory pools and stream-ordered allocation: cuMemAllocAsync,
 * cuMemAllocFromPoolAsync, cuMemFreeAsync and the cuMemPool* calls.
 *
 * Each device has a default pool and a current one (the default until
 * cuDeviceSetMemPool); cuMemPoolCreate makes more. A pool holds blocks of
 * device memory: in use (live ranges of the allocation table that name the
 * pool) or cached (kept mapped, out of the table, for the next allocation).
 * An allocation is made at once (work after it on the stream may use it);
 * cuMemFreeAsync queues an op on the stream that takes the range out of the
 * table and caches its block when the stream reaches it. At each sync point
 * (stream, event, context synchronize) a pool gives back cached blocks above
 * its release threshold; cuMemPoolTrimTo gives back down to a size, and an
 * allocation the device cannot hold first gives back every cached block.
 *
 * Where softgpu chooses: blocks are the requested size rounded up to 256
 * bytes, and a cached block is reused for a request of at least half its
 * size; with ALLOW_OPPORTUNISTIC off a cached block is reused only on the
 * stream that freed it (never on a mere event dependency, which is always
 * correct, only less thrifty). One lock guards every pool. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_ALIGN 256

typedef struct block {
    struct block *next;
    uint64_t base, size;
    unsigned long long stream;   /* id of the stream that freed it */
} block;

struct CUmemPoolHandle_st {
    struct CUmemPoolHandle_st *next;   /* in pools */
    int device;
    bool is_default;
    bool destroyed;                    /* by cuMemPoolDestroy; freed once nothing is out */
    uint64_t max_size;                 /* 0: the device's memory */
    uint64_t threshold;
    int follow_events, opportunistic, internal_deps;
    uint64_t reserved, reserved_high, used, used_high;
    uint64_t out;                      /* blocks in use or waiting on a stream */
    block *cached;
    unsigned char access[SOFT_MAX_DEVICES];   /* other devices' CUmemAccess_flags (cuMemPoolSetAccess) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUmemPoolHandle_st *pools;
static struct CUmemPoolHandle_st defaults[SOFT_MAX_DEVICES];
static struct CUmemPoolHandle_st *current[SOFT_MAX_DEVICES];

static void pool_init(struct CUmemPoolHandle_st *p, int dev)
{
    memset(p, 0, sizeof *p);
    p->device = dev;
    p->follow_events = p->opportunistic = p->internal_deps = 1;
}

/* The device's default pool, made on first use (lock held). */
static struct CUmemPoolHandle_st *default_pool(int dev)
{
    struct CUmemPoolHandle_st *p = &defaults[dev];
    if (!p->is_default) {
        pool_init(p, dev);
        p->is_default = true;
        if (!soft_handle_add(p, SOFT_POOL))
            return NULL;
        p->next = pools;
        pools = p;
    }
    return p;
}

/* Gives cached blocks back to the system until reserved <= keep (lock held). */
static void trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    for (block **bp = &p->cached; *bp && p->reserved > keep;) {
        block *b = *bp;
        *bp = b->next;
        soft_pages_free((void *)(uintptr_t)b->base, b->size);
        soft_device_unreserve(p->device, b->size);
        p->reserved -= b->size;
        free(b);
    }
}

/* Frees a destroyed pool once nothing of it is out (lock held). */
static void reap(struct CUmemPoolHandle_st *p)
{
    if (!p->destroyed || p->out)
        return;
    trim(p, 0);
    for (struct CUmemPoolHandle_st **pp = &pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    free(p);
}

/* Caches a block that left the table (lock held). */
static void give_back(struct CUmemPoolHandle_st *p, uint64_t base, uint64_t size, unsigned long long stream)
{
    p->used -= size;
    p->out--;
    block *b = malloc(sizeof *b);
    if (!b) {
        /* No record to cache it in: give it back to the system instead. */
        soft_pages_free((void *)(uintptr_t)base, size);
        soft_device_unreserve(p->device, size);
        p->reserved -= size;
    } else {
        *b = (block){ .next = p->cached, .base = base, .size = size, .stream = stream };
        p->cached = b;
    }
    reap(p);
}

void soft_pool_sync_point(int dev)
{
    pthread_mutex_lock(&lock);
    for (struct CUmemPoolHandle_st *p = pools; p; p = p->next)
        if (p->device == dev && p->reserved > p->threshold)
            trim(p, p->threshold > p->used ? p->threshold : p->used);
    pthread_mutex_unlock(&lock);
}

CUresult soft_pool_free_now(const soft_range *r)
{
    struct CUctx_st *c;
    if (soft_ctx_current(&c) == CUDA_SUCCESS)
        soft_ctx_sync(c);
    soft_range out;
    if (!soft_range_remove(r->base, &out))
        return CUDA_ERROR_INVALID_VALUE;   /* freed meanwhile by another thread */
    pthread_mutex_lock(&lock);
    give_back(out.pool, out.base, out.size, 0);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult pool_alloc(struct CUmemPoolHandle_st *p, size_t bytes, struct CUstream_st *s, CUdeviceptr *dptr)
{
    if (bytes > (1ull << 46))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t need = ((uint64_t)bytes + BLOCK_ALIGN - 1) & ~(uint64_t)(BLOCK_ALIGN - 1);
    CUresult res = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    /* The smallest cached block that fits, not more than twice the need. */
    block **best = NULL;
    for (block **bp = &p->cached; *bp; bp = &(*bp)->next) {
        block *b = *bp;
        if (b->size < need || b->size / 2 > need || (!p->opportunistic && b->stream != s->id))
            continue;
        if (!best || b->size < (*best)->size)
            best = bp;
    }
    uint64_t base, size;
    if (best) {
        block *b = *best;
        *best = b->next;
        base = b->base;
        size = b->size;
        free(b);
    } else {
        uint64_t cap = p->max_size ? p->max_size : soft_device_total_memory();
        if (need > cap - (p->reserved < cap ? p->reserved : cap)) {
            trim(p, 0);
            if (need > cap - p->reserved) {
                res = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
            }
        }
        if (!soft_device_reserve(p->device, need)) {
            /* What pools hold unused goes back before the device is full. */
            for (struct CUmemPoolHandle_st *q = pools; q; q = q->next)
                if (q->device == p->device)
                    trim(q, 0);
            if (!soft_device_reserve(p->device, need)) {
                res = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
            }
        }
        void *mem = soft_pages_alloc(need);
        if (!mem) {
            soft_device_unreserve(p->device, need);
            res = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        base = (uintptr_t)mem;
        size = need;
        p->reserved += size;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    soft_range r = { .base = base, .size = size, .kind = SOFT_MEM_DEVICE, .device = p->device, .pool = p };
    res = soft_range_add(&r);
    if (res != CUDA_SUCCESS) {
        block *b = malloc(sizeof *b);
        if (b) {
            *b = (block){ .next = p->cached, .base = base, .size = size, .stream = s->id };
            p->cached = b;
        }
        goto out;
    }
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    p->out++;
    *dptr = base;
out:
    pthread_mutex_unlock(&lock);
    return res;
}

static struct CUmemPoolHandle_st *pool_get(CUmemoryPool h)
{
    return h && soft_handle_valid(h, SOFT_POOL) ? (struct CUmemPoolHandle_st *)h : NULL;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUmemoryPool hpool, CUstream h, bool ptds)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* In a capture: a graph memory node (graph_mem.c). */
    if (s->capture && !hpool)
        return soft_gmem_capture_alloc(s, bytes, dptr);
    struct CUmemPoolHandle_st *p;
    pthread_mutex_lock(&lock);
    if (hpool)
        p = pool_get(hpool);
    else
        p = current[s->ctx->device] ? current[s->ctx->device] : default_pool(s->ctx->device);
    pthread_mutex_unlock(&lock);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return pool_alloc(p, bytes, s, dptr);
}

SOFT_API CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

SOFT_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

SOFT_API CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                  CUstream hStream)
{
    return pool ? alloc_async(dptr, bytesize, pool, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}

SOFT_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                       CUstream hStream)
{
    return pool ? alloc_async(dptr, bytesize, pool, hStream, true) : CUDA_ERROR_INVALID_VALUE;
}

/* On the stream's worker: the stream reached the free. */
static void run_pool_free(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    soft_range r;
    if (!soft_range_remove(op->u.pool_free.base, &r))
        return;
    pthread_mutex_lock(&lock);
    give_back(r.pool, r.base, r.size, op->u.pool_free.stream);
    pthread_mutex_unlock(&lock);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, bool ptds)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    /* A graph allocation: a free node in a capture, else no longer in use
     * from now (graph_mem.c). */
    if (dptr && s->capture && soft_gmem_capture_free(s, dptr) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    if (dptr && !s->capture && soft_gmem_free(dptr))
        return CUDA_SUCCESS;
    soft_range r;
    if (!dptr || !soft_range_find(dptr, &r) || r.base != dptr || r.kind != SOFT_MEM_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!r.pool) {
        /* cuMemAlloc'd memory: freed once the stream has done its work. */
        soft_stream_drain(s);
        return cuMemFree_v2(dptr);
    }
    soft_op *op = soft_op_new(run_pool_free);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->always = true;   /* the memory goes back even after a fault */
    op->u.pool_free.base = dptr;
    op->u.pool_free.stream = s->id;
    uint64_t v;
    return soft_stream_submit(s, op, &v);
}

SOFT_API CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, false);
}

SOFT_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, true);
}

/* ---- pools ---- */

SOFT_API CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    if (!pool || !props)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->win32SecurityAttributes)
        return CUDA_ERROR_INVALID_VALUE;
    if (soft_check_device(props->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_DEVICE;
    if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;   /* no shareable handles here */
    struct CUmemPoolHandle_st *p = malloc(sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, props->location.id);
    p->max_size = props->maxSize;
    if (!soft_handle_add(p, SOFT_POOL)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&lock);
    p->next = pools;
    pools = p;
    pthread_mutex_unlock(&lock);
    *pool = p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    SOFT_TRY(soft_check_init());
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    CUresult res = CUDA_SUCCESS;
    if (!p || p->is_default) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    /* A device whose current pool this was goes back to its default. */
    if (current[p->device] == p)
        current[p->device] = NULL;
    soft_handle_remove(p);
    p->destroyed = true;
    reap(p);
out:
    pthread_mutex_unlock(&lock);
    return res;
}

SOFT_API CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult res = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    if (!p) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    switch ((int)attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->follow_events = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->opportunistic = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->internal_deps = *(int *)value != 0; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
    /* The high marks may only be reset, to the current amount. */
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            res = CUDA_ERROR_INVALID_VALUE;
        else
            p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*(cuuint64_t *)value != 0)
            res = CUDA_ERROR_INVALID_VALUE;
        else
            p->used_high = p->used;
        break;
    default: res = CUDA_ERROR_INVALID_VALUE; break;
    }
out:
    pthread_mutex_unlock(&lock);
    return res;
}

SOFT_API CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult res = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    if (!p) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    switch ((int)attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: *(int *)value = p->follow_events; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: *(int *)value = p->opportunistic; break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)value = p->internal_deps; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
    default: res = CUDA_ERROR_INVALID_VALUE; break;
    }
out:
    pthread_mutex_unlock(&lock);
    return res;
}

SOFT_API CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SOFT_TRY(soft_check_init());
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    if (p)
        trim(p, minBytesToKeep);
    pthread_mutex_unlock(&lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SOFT_API CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(dev));
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = default_pool(dev);
    pthread_mutex_unlock(&lock);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool_out = p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(dev));
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = current[dev] ? current[dev] : default_pool(dev);
    pthread_mutex_unlock(&lock);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = p;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SOFT_TRY(soft_check_device(dev));
    CUresult res = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    if (!p || p->device != dev)
        res = CUDA_ERROR_INVALID_VALUE;
    else
        current[dev] = p->is_default ? NULL : p;
    pthread_mutex_unlock(&lock);
    return res;
}

/* Other devices' access to a pool: every softgpu device reads the same
 * memory, so access is granted to any device but the owner, whose own is
 * always read-write; what was granted is read back. */
SOFT_API CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    SOFT_TRY(soft_check_init());
    if (!map && count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(pool);
    CUresult rc = p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++) {
        const CUmemAccessDesc *d = &map[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
            d->flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (soft_check_device(d->location.id) != CUDA_SUCCESS)
            rc = CUDA_ERROR_INVALID_DEVICE;
        else if (d->location.id == p->device && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            rc = CUDA_ERROR_INVALID_DEVICE;
    }
    for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++)
        if (map[i].location.id != p->device)
            p->access[map[i].location.id] = (unsigned char)map[i].flags;
    pthread_mutex_unlock(&lock);
    return rc;
}

SOFT_API CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
    SOFT_TRY(soft_check_init());
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(location->id));
    pthread_mutex_lock(&lock);
    struct CUmemPoolHandle_st *p = pool_get(memPool);
    if (p)
        *flags = location->id == p->device ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                           : (CUmemAccess_flags)p->access[location->id];
    pthread_mutex_unlock(&lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
