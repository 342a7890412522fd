/* Memory pools and stream-ordered allocation on proxies. A pool is an
 * object the controller names (its arena slot, as streams and events); the
 * agent keeps its blocks inside the job's pointer window. Allocating is a
 * request (the program gets the pointer at once, as the driver returns it);
 * cuMemFreeAsync is a handover on the stream, so the memory goes back to
 * the pool when the agent's stream reaches it, except that a block freed on
 * a stream is first kept for the next allocation of its size there (below). A device's default pool is
 * made on the agent when first used; its current pool is the shim's to
 * remember. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/proxy.h"
#include "shim/streams.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static proxy_obj *defaults[SHIM_DEVICES_MAX], *current[SHIM_DEVICES_MAX];

/* A request without outputs but for an optional u64. */
static CUresult pool_request(agent_link *l, const uint8_t *body, size_t len, uint64_t *value)
{
    struct iovec iov = { (void *)body, len };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(l, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && value) {
        if (n != 8)
            rc = link_malformed(l, "an answer to a pool request of %zu bytes, not 8", n);
        else
            *value = wire_load_u64(o);
    } else if (rc == CUDA_SUCCESS && n != 0) {
        rc = link_malformed(l, "an answer to a pool request of %zu bytes, not 0", n);
    }
    frame_release(&f);
    return rc;
}

static CUresult pool_new(int device, uint64_t max_size, bool is_default, proxy_obj **out)
{
    shim_device *d = shim_device_at(device);
    proxy_obj *p = arena_new(PROXY_POOL, device);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->u.pool.is_default = is_default;
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemPoolCreate);
    wire_put_u64(&w, p->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u64(&w, max_size);
    CUresult rc = pool_request(d->link, body, w.off, NULL);
    if (rc) {
        arena_free(p);
        return rc;
    }
    *out = p;
    return CUDA_SUCCESS;
}

/* The proxy device's default (or current) pool, made on first use. */
static CUresult device_pool(int device, bool want_current, proxy_obj **out)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    if (want_current && current[device])
        *out = current[device];
    else if (defaults[device])
        *out = defaults[device];
    else if ((rc = pool_new(device, 0, true, &defaults[device])) == CUDA_SUCCESS)
        *out = defaults[device];
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The proxy device of ordinal dev, or NULL (a local device, or none). */
static shim_device *proxy_device(CUdevice dev)
{
    shim_device *d = shim_initialized() ? shim_device_at(dev) : NULL;
    return d && d->proxy && dev < SHIM_DEVICES_MAX ? d : NULL;
}

/* ---- reuse on the same stream ----
 *
 * A stream-ordered allocation may take memory freed earlier on the same
 * stream at once: the free is behind everything before it. So a pool
 * block the program frees waits here (kept), still an in-use block on the
 * agent, and an allocation of the same size from the same pool on that
 * stream takes it without a round trip, as a loop of cudaMallocAsync and
 * cudaFreeAsync of the same tensors does. At most KEEP_MAX blocks and
 * KEEP_BYTES are kept; past that the oldest's free goes to the agent, on
 * its stream, later in that stream's order than the program freed it
 * (which only holds the memory longer). Whatever reads the pool's state,
 * trims or destroys it, destroys a stream, asks the device's free memory
 * or finds the pool full hands the kept frees over first (release_kept). */
#define KEEP_MAX 256
#define KEEP_BYTES ((uint64_t)256 << 20)
#define BLOCK_BUCKETS 1024

/* A block this shim allocated from a pool, by pointer. */
typedef struct pool_block {
    struct pool_block *next;   /* in its bucket */
    uint64_t ptr, size;
    proxy_obj *pool;
} pool_block;

typedef struct kept_block {
    struct kept_block *next;
    pool_block *b;
    proxy_obj *stream;         /* where the program freed it */
} kept_block;

static pthread_mutex_t reuse_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_block *blocks[BLOCK_BUCKETS];
static kept_block *kept_head, *kept_tail;
static size_t kept_count;
static uint64_t kept_bytes;

static pool_block **block_slot_locked(uint64_t ptr)
{
    pool_block **pp = &blocks[(ptr >> 8) % BLOCK_BUCKETS];
    while (*pp && (*pp)->ptr != ptr)
        pp = &(*pp)->next;
    return pp;
}

/* Remembers a pool allocation; without memory it is only not reused. */
static void note_block(uint64_t ptr, uint64_t size, proxy_obj *pool)
{
    pool_block *b = malloc(sizeof *b);
    if (!b)
        return;
    *b = (pool_block){ NULL, ptr, size, pool };
    pthread_mutex_lock(&reuse_lock);
    pool_block **pp = &blocks[(ptr >> 8) % BLOCK_BUCKETS];
    b->next = *pp;
    *pp = b;
    pthread_mutex_unlock(&reuse_lock);
}

/* Forgets the block at ptr (freed for good); no-op when not a pool's. */
static void forget_block(uint64_t ptr)
{
    pthread_mutex_lock(&reuse_lock);
    pool_block **pp = block_slot_locked(ptr), *b = *pp;
    if (b)
        *pp = b->next;
    pthread_mutex_unlock(&reuse_lock);
    free(b);
}

/* Hands the free of ptr over on stream s: the agent's pool takes the block
 * back when s reaches it (*value, when asked). */
static CUresult hand_free(uint64_t ptr, proxy_obj *s, uint64_t *value)
{
    uint8_t body[rec_free_async_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_free_async_put(&w, &(rec_free_async){ .pointer = ptr });
    handover ho = { .op = CUDA_OP_cuMemFreeAsync, .stream = s, .body = body, .body_len = w.off };
    return link_handover(s->link, &ho, value);
}

/* Takes the kept blocks of pool (NULL: any) freed on stream (NULL: any)
 * off the list and hands their frees over; with wait, returns once their
 * streams reached them, so the agent's pool holds them as the program's
 * frees promised (its figures, a trim, an allocation that lacked them). */
static CUresult release_kept(proxy_obj *pool, proxy_obj *stream, bool wait)
{
    kept_block *out = NULL;
    pthread_mutex_lock(&reuse_lock);
    for (kept_block **kp = &kept_head, *prev = NULL; *kp;) {
        kept_block *k = *kp;
        if ((pool && k->b->pool != pool) || (stream && k->stream != stream)) {
            prev = k;
            kp = &k->next;
            continue;
        }
        *kp = k->next;
        if (kept_tail == k)
            kept_tail = prev;
        kept_count--;
        kept_bytes -= k->b->size;
        k->next = out;
        out = k;
    }
    pthread_mutex_unlock(&reuse_lock);
    CUresult rc = CUDA_SUCCESS;
    /* Each stream's last free handed over: what a wait waits for. */
    typedef struct {
        proxy_obj *s;
        uint64_t value;
    } stream_mark;
    stream_mark last[KEEP_MAX + 1];
    size_t nlast = 0;
    while (out) {
        kept_block *k = out;
        out = k->next;
        uint64_t ptr = k->b->ptr, v = 0;
        CUresult r = hand_free(ptr, k->stream, &v);
        if (r && !rc)
            rc = r;
        size_t i = 0;
        while (i < nlast && last[i].s != k->stream)
            i++;
        if (i == nlast && nlast < sizeof last / sizeof last[0])
            last[nlast++] = (stream_mark){ k->stream, v };
        else if (i < nlast && v > last[i].value)
            last[i].value = v;
        forget_block(ptr);
        free(k);
    }
    for (size_t i = 0; wait && !rc && i < nlast; i++)
        rc = link_wait(last[i].s->link, last[i].s, last[i].value);
    return rc;
}

/* The program freed ptr on s: kept for a later allocation there when it is
 * a live pool's block (true); the oldest kept goes to the agent when the
 * list is full. */
static bool keep_block(uint64_t ptr, proxy_obj *s)
{
    kept_block *k = malloc(sizeof *k), *evict = NULL;
    if (!k)
        return false;
    pthread_mutex_lock(&reuse_lock);
    pool_block *b = *block_slot_locked(ptr);
    bool ok = b && __atomic_load_n(&b->pool->type, __ATOMIC_ACQUIRE) == PROXY_POOL && b->pool->link == s->link;
    if (ok) {
        *k = (kept_block){ NULL, b, s };
        if (kept_tail)
            kept_tail->next = k;
        else
            kept_head = k;
        kept_tail = k;
        kept_count++;
        kept_bytes += b->size;
        if (kept_count > KEEP_MAX || kept_bytes > KEEP_BYTES) {
            evict = kept_head;
            kept_head = evict->next;
            if (!kept_head)
                kept_tail = NULL;
            kept_count--;
            kept_bytes -= evict->b->size;
        }
    }
    pthread_mutex_unlock(&reuse_lock);
    if (!ok) {
        free(k);
        return false;
    }
    if (evict) {
        uint64_t p = evict->b->ptr;
        hand_free(p, evict->stream, NULL);   /* a failure is the link's, which the next call reports */
        forget_block(p);
        free(evict);
    }
    return true;
}

/* A kept block of pool freed on s of exactly size, taken (its pointer), or
 * 0. */
static uint64_t take_kept(proxy_obj *pool, proxy_obj *s, uint64_t size)
{
    uint64_t ptr = 0;
    pthread_mutex_lock(&reuse_lock);
    for (kept_block **kp = &kept_head, *prev = NULL; *kp; prev = *kp, kp = &(*kp)->next) {
        kept_block *k = *kp;
        if (k->b->pool != pool || k->stream != s || k->b->size != size)
            continue;
        *kp = k->next;
        if (kept_tail == k)
            kept_tail = prev;
        kept_count--;
        kept_bytes -= size;
        ptr = k->b->ptr;
        free(k);
        break;
    }
    pthread_mutex_unlock(&reuse_lock);
    return ptr;
}

void shim_pool_forget(uint64_t ptr)
{
    forget_block(ptr);
}

CUresult shim_pool_release_kept(proxy_obj *stream, bool wait)
{
    return release_kept(NULL, stream, wait);
}

/* ---- allocation ---- */

static CUresult alloc_from(proxy_obj *pool, proxy_obj *s, size_t size, CUdeviceptr *dptr)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (pool->link != s->link)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[28];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemAllocAsync);
    wire_put_u64(&w, pool->id);
    wire_put_u64(&w, s->id);
    wire_put_u64(&w, size);
    uint64_t p = 0;
    agent_link *l = pool->link;
    CUresult rc = link_status(l);
    if (rc || (rc = shim_alloc_reserve()))
        return rc;
    if ((p = take_kept(pool, s, size))) {
        shim_alloc_add_reserved(p, size, pool->device);
        *dptr = p;
        return CUDA_SUCCESS;
    }
    rc = pool_request(l, body, w.off, &p);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && release_kept(NULL, NULL, true) == CUDA_SUCCESS)
        rc = pool_request(l, body, w.off, &p);   /* the kept blocks were what it lacked */
    if (rc) {
        shim_alloc_unreserve();
        return rc;
    }
    if (p < l->window_base || p - l->window_base >= l->window_size || size > l->window_size - (p - l->window_base)) {
        shim_alloc_unreserve();
        return link_malformed(l, "a pool allocation at %#llx of %zu bytes, outside its pointer window",
                              (unsigned long long)p, size);
    }
    shim_alloc_add_reserved(p, size, pool->device);
    note_block(p, size, pool);
    *dptr = p;
    return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, proxy_obj *pool, CUstream h, bool per_thread)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    if (k == 0)
        return CUDA_ERROR_INVALID_VALUE;   /* a proxy pool, a local stream */
    bool captured;
    if ((rc = capture_check(s, &captured)))
        return rc;
    if (captured) {
        /* An alloc node of the capture (graph_mem.c); from a pool of the
         * program's: refused. */
        if (pool)
            return capture_refuse(s, "allocation from a pool of the program's (a graph memory node)");
        if (!dptr || !size)
            return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEM_ALLOC_NODE_PARAMS p = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                        .location = { CU_MEM_LOCATION_TYPE_DEVICE, s->device } },
                                         .bytesize = size };
        shim_node t;
        if ((rc = node_from_mem_alloc(&t, s->device, &p)))
            return rc;
        rc = capture_add(s, &t);
        node_free_params(&t);
        if (rc == CUDA_SUCCESS)
            *dptr = p.dptr;
        return rc;
    }
    if (!pool && (rc = device_pool(s->device, true, &pool)))
        return rc;
    return alloc_from(pool, s, size, dptr);
}

SHIM_EXPORT(cuMemAllocAsync)
{
    proxy_obj *s;
    CUresult rc;
    if (shim_stream(hStream, false, &s, &rc) == 0)
        return SHIM_LOCAL(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

SHIM_EXPORT(cuMemAllocAsync_ptsz)
{
    proxy_obj *s;
    CUresult rc;
    if (shim_stream(hStream, true, &s, &rc) == 0)
        return SHIM_LOCAL(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

SHIM_EXPORT(cuMemAllocFromPoolAsync)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemAllocFromPoolAsync);
    return alloc_async(dptr, bytesize, p, hStream, false);
}

SHIM_EXPORT(cuMemAllocFromPoolAsync_ptsz)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemAllocFromPoolAsync_ptsz);
    return alloc_async(dptr, bytesize, p, hStream, true);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, bool per_thread)
{
    int dev = shim_device_of_pointer(dptr);
    shim_device *d = shim_device_at(dev);
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    if (k == 0 || s->link != d->link) {
        /* A local stream or another agent's: order on the device's own
         * default stream, which the program's syncs wait for. */
        s = per_thread ? shim_per_thread_stream(dev, &rc) : d->null_stream;
        if (!s)
            return rc;
    }
    bool captured;
    if ((rc = capture_check(s, &captured)))
        return rc;
    if (captured) {
        /* A free node of the capture: of a graph allocation only. */
        shim_node t;
        if (node_from_mem_free(&t, dptr))
            return capture_refuse(s, "stream-ordered free of memory no graph allocated");
        rc = capture_add(s, &t);
        node_free_params(&t);
        return rc;
    }
    if (gmem_free(dptr))
        return CUDA_SUCCESS;   /* a graph allocation: its nodes keep the memory */
    uint64_t size;
    int owner;
    if (!shim_alloc_remove(dptr, &size, &owner))
        return CUDA_ERROR_INVALID_VALUE;
    if ((rc = link_status(s->link)) || keep_block(dptr, s))
        return rc;
    forget_block(dptr);
    return hand_free(dptr, s, NULL);
}

SHIM_EXPORT(cuMemFreeAsync)
{
    return shim_device_of_pointer(dptr) >= 0 ? free_async(dptr, hStream, false) : SHIM_LOCAL(cuMemFreeAsync);
}

SHIM_EXPORT(cuMemFreeAsync_ptsz)
{
    return shim_device_of_pointer(dptr) >= 0 ? free_async(dptr, hStream, true) : SHIM_LOCAL(cuMemFreeAsync_ptsz);
}

/* ---- pools ---- */

SHIM_EXPORT(cuMemPoolCreate)
{
    if (!poolProps || poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !proxy_device(poolProps->location.id))
        return SHIM_LOCAL(cuMemPoolCreate);
    if (!pool || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || poolProps->win32SecurityAttributes)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;   /* no shareable handles across machines */
    proxy_obj *p;
    CUresult rc = pool_new(poolProps->location.id, poolProps->maxSize, false, &p);
    if (rc == CUDA_SUCCESS)
        *pool = (CUmemoryPool)p;
    return rc;
}

SHIM_EXPORT(cuMemPoolDestroy)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemPoolDestroy);
    if (p->u.pool.is_default)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (current[p->device] == p)
        current[p->device] = NULL;
    pthread_mutex_unlock(&lock);
    release_kept(p, NULL, false);
    /* The slot stays taken: the agent may still hold its memory. */
    __atomic_store_n(&p->type, PROXY_FREE, __ATOMIC_RELEASE);
    return link_drop(p->link, CUDA_OP_cuMemPoolDestroy, p->id);
}

static bool int_attribute(CUmemPool_attribute attr)
{
    return attr == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
           attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
           attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

static bool known_attribute(CUmemPool_attribute attr)
{
    return attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES && attr <= CU_MEMPOOL_ATTR_USED_MEM_HIGH;
}

SHIM_EXPORT(cuMemPoolSetAttribute)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemPoolSetAttribute);
    if (!value || !known_attribute(attr))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t v = int_attribute(attr) ? (uint64_t)(*(int *)value != 0) : *(cuuint64_t *)value;
    CUresult rc = release_kept(p, NULL, true);
    if (rc)
        return rc;
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemPoolSetAttribute);
    wire_put_u64(&w, p->id);
    wire_put_u32(&w, (uint32_t)attr);
    wire_put_u64(&w, v);
    return pool_request(p->link, body, w.off, NULL);
}

SHIM_EXPORT(cuMemPoolGetAttribute)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemPoolGetAttribute);
    if (!value || !known_attribute(attr))
        return CUDA_ERROR_INVALID_VALUE;
    /* The pool's figures count kept blocks as free, as the driver would. */
    CUresult rc = release_kept(p, NULL, true);
    if (rc)
        return rc;
    uint8_t body[16];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemPoolGetAttribute);
    wire_put_u64(&w, p->id);
    wire_put_u32(&w, (uint32_t)attr);
    uint64_t v = 0;
    if ((rc = pool_request(p->link, body, w.off, &v)))
        return rc;
    if (int_attribute(attr)) {
        if (v > 1)
            return link_malformed(p->link, "a pool reuse flag of %llu", (unsigned long long)v);
        *(int *)value = (int)v;
    } else {
        *(cuuint64_t *)value = v;
    }
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemPoolTrimTo)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return shim_is_proxy_handle(pool) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuMemPoolTrimTo);
    CUresult rc = release_kept(p, NULL, true);
    if (rc)
        return rc;
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemPoolTrimTo);
    wire_put_u64(&w, p->id);
    wire_put_u64(&w, minBytesToKeep);
    return pool_request(p->link, body, w.off, NULL);
}

SHIM_EXPORT(cuDeviceGetDefaultMemPool)
{
    if (!proxy_device(dev))
        return SHIM_LOCAL(cuDeviceGetDefaultMemPool);
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *p;
    CUresult rc = device_pool(dev, false, &p);
    if (rc == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)p;
    return rc;
}

SHIM_EXPORT(cuDeviceGetMemPool)
{
    if (!proxy_device(dev))
        return SHIM_LOCAL(cuDeviceGetMemPool);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *p;
    CUresult rc = device_pool(dev, true, &p);
    if (rc == CUDA_SUCCESS)
        *pool = (CUmemoryPool)p;
    return rc;
}

SHIM_EXPORT(cuDeviceSetMemPool)
{
    if (!proxy_device(dev))
        return SHIM_LOCAL(cuDeviceSetMemPool);
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p || p->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    current[dev] = p->u.pool.is_default ? NULL : p;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
