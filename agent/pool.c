/* Memory pools of a job: stream-ordered allocations inside the job's
 * pointer window. Each pool keeps its blocks (window allocations) in three
 * lists: in use, pending (freed on a stream, behind an event recorded
 * there) and cached (the stream reached the free: reusable). Every pool
 * request first moves pending blocks whose event completed to the cache,
 * reuses a cached block when one fits, and gives back cached blocks above
 * the release threshold: the driver does that at sync points, which the
 * agent never sees (the controller waits for words), so a pool request is
 * the agent's sync point. Everything goes with the window at the job's end. */
#include <errno.h>
#include <stdlib.h>

#include "agent/job.h"

typedef struct pool_block {
    struct pool_block *next;
    CUdeviceptr base;
    uint64_t size;
    uint64_t stream;     /* wire id of the stream that freed it */
    CUevent done;        /* pending: recorded behind the free */
} pool_block;

struct agent_pool {
    struct agent_pool *next;   /* in j->pools */
    uint64_t id;
    int device;
    bool destroyed;
    uint64_t max_size;
    uint64_t threshold;
    int reuse[3];              /* CU_MEMPOOL_ATTR_REUSE_* (1..3) */
    uint64_t reserved, reserved_high, used, used_high;
    pool_block *in_use, *pending, *cached;
};

static agent_pool *pool_by_id(job *j, uint64_t id)
{
    agent_obj *o = objects_get(&j->objs, id, AOBJ_POOL);
    return o ? o->u.pool.p : NULL;
}

/* Gives cached blocks back to the window until reserved <= keep. */
static void trim(job *j, agent_pool *p, uint64_t keep)
{
    while (p->cached && p->reserved > keep) {
        pool_block *b = p->cached;
        p->cached = b->next;
        window_free_idle(&j->win, j->b, b->base);
        p->reserved -= b->size;
        free(b);
    }
}

/* Caches the pending blocks whose free the stream reached. */
static void settle(job *j, agent_pool *p)
{
    const cuda_driver *d = &j->b->drv;
    for (pool_block **bp = &p->pending; *bp;) {
        pool_block *b = *bp;
        if (d->fn_cuEventQuery(b->done) == CUDA_ERROR_NOT_READY) {
            bp = &b->next;
            continue;
        }
        d->fn_cuEventDestroy_v2(b->done);
        b->done = NULL;
        *bp = b->next;
        b->next = p->cached;
        p->cached = b;
    }
}

/* The pool's sync point: settled, and trimmed to its threshold. */
static void sync_point(job *j, agent_pool *p)
{
    settle(j, p);
    if (p->reserved > p->threshold)
        trim(j, p, p->threshold > p->used ? p->threshold : p->used);
}

/* Frees a destroyed pool once no block of it is out. */
static void reap(job *j, agent_pool *p)
{
    if (!p->destroyed || p->in_use || p->pending)
        return;
    trim(j, p, 0);
    for (agent_pool **pp = &j->pools; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    free(p);
}

CUresult pool_create(job *j, uint64_t id, int device, uint64_t max_size)
{
    if (device < 0 || device >= j->b->device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    agent_pool *p = calloc(1, sizeof *p);
    if (!p) {
        job_log_nomem(j, "memory pool %llu", (unsigned long long)id);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    agent_obj *o = objects_put(&j->objs, id, AOBJ_POOL, device);
    if (!o) {
        bool nomem = errno == ENOMEM;
        free(p);
        if (nomem)
            job_log_nomem(j, "the record of memory pool %llu", (unsigned long long)id);
        return nomem ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_HANDLE;
    }
    p->id = id;
    p->device = device;
    p->max_size = max_size;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->next = j->pools;
    j->pools = p;
    o->u.pool.p = p;
    return CUDA_SUCCESS;
}

CUresult pool_alloc(job *j, uint64_t id, uint64_t stream, uint64_t size, CUdeviceptr *out)
{
    agent_pool *p = pool_by_id(j, id);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t g = j->b->granularity;
    if (size > j->win.size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t need = (size + g - 1) / g * g;
    CUresult rc = job_use_device(j, p->device);
    if (rc)
        return rc;
    settle(j, p);
    /* The smallest cached block that fits, not more than twice the need. */
    pool_block **best = NULL;
    for (pool_block **bp = &p->cached; *bp; bp = &(*bp)->next) {
        pool_block *b = *bp;
        if (b->size < need || b->size / 2 > need || (!p->reuse[1] && b->stream != stream))
            continue;
        if (!best || b->size < (*best)->size)
            best = bp;
    }
    pool_block *b;
    if (best) {
        b = *best;
        *best = b->next;
    } else {
        uint64_t cap = p->max_size ? p->max_size : j->win.size;
        if (need > cap || p->reserved > cap - need) {
            trim(j, p, 0);
            if (need > cap || p->reserved > cap - need)
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        b = calloc(1, sizeof *b);
        if (!b) {
            job_log_nomem(j, "a block of memory pool %llu", (unsigned long long)p->id);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        rc = window_alloc(&j->win, j->b, p->device, need, &b->base);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
            /* What pools hold unused goes back before the device is full. */
            for (agent_pool *q = j->pools; q; q = q->next)
                if (q->device == p->device) {
                    settle(j, q);
                    trim(j, q, 0);
                }
            rc = window_alloc(&j->win, j->b, p->device, need, &b->base);
        }
        if (rc) {
            free(b);
            return rc;
        }
        b->size = need;
        p->reserved += need;
        if (p->reserved > p->reserved_high)
            p->reserved_high = p->reserved;
    }
    b->next = p->in_use;
    p->in_use = b;
    p->used += b->size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    /* Cached blocks above the threshold go back now the request is met. */
    if (p->reserved > p->threshold)
        trim(j, p, p->threshold > p->used ? p->threshold : p->used);
    *out = b->base;
    return CUDA_SUCCESS;
}

/* The pool and the in-use link of the block at base, or NULL. */
static pool_block **in_use(job *j, CUdeviceptr base, agent_pool **pool)
{
    for (agent_pool *p = j->pools; p; p = p->next)
        for (pool_block **bp = &p->in_use; *bp; bp = &(*bp)->next)
            if ((*bp)->base == base) {
                *pool = p;
                return bp;
            }
    return NULL;
}

CUresult pool_free_async(job *j, agent_obj *s, uint64_t stream, CUdeviceptr base, bool *found)
{
    agent_pool *p;
    pool_block **bp = in_use(j, base, &p);
    *found = bp != NULL;
    if (!bp)
        return CUDA_SUCCESS;
    const cuda_driver *d = &j->b->drv;
    pool_block *b = *bp;
    CUresult rc = d->fn_cuEventCreate(&b->done, CU_EVENT_DISABLE_TIMING);
    if (rc == CUDA_SUCCESS)
        rc = d->fn_cuEventRecord(b->done, job_real_stream(s));
    if (rc) {
        if (b->done)
            d->fn_cuEventDestroy_v2(b->done);
        b->done = NULL;
        return rc;
    }
    *bp = b->next;
    b->stream = stream;
    b->next = p->pending;
    p->pending = b;
    p->used -= b->size;
    return CUDA_SUCCESS;
}

bool pool_free_now(job *j, CUdeviceptr base)
{
    agent_pool *p;
    pool_block **bp = in_use(j, base, &p);
    if (!bp)
        return false;
    /* cuMemFree of a pool allocation: work still queued may use it. */
    if (job_use_device(j, p->device) == CUDA_SUCCESS)
        j->b->drv.fn_cuCtxSynchronize();
    pool_block *b = *bp;
    *bp = b->next;
    b->stream = 0;
    b->next = p->cached;
    p->cached = b;
    p->used -= b->size;
    sync_point(j, p);
    reap(j, p);
    return true;
}

CUresult pool_get_attribute(job *j, uint64_t id, uint32_t attr, uint64_t *value)
{
    agent_pool *p = pool_by_id(j, id);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = job_use_device(j, p->device);
    if (rc)
        return rc;
    sync_point(j, p);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *value = (uint64_t)p->reuse[attr - 1]; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *value = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *value = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *value = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *value = p->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *value = p->used_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult pool_set_attribute(job *j, uint64_t id, uint32_t attr, uint64_t value)
{
    agent_pool *p = pool_by_id(j, id);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse[attr - 1] = value != 0; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = value; break;
    /* The high marks may only be reset, to the current amount. */
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        if (value)
            return CUDA_ERROR_INVALID_VALUE;
        p->reserved_high = p->reserved;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (value)
            return CUDA_ERROR_INVALID_VALUE;
        p->used_high = p->used;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult pool_trim(job *j, uint64_t id, uint64_t keep)
{
    agent_pool *p = pool_by_id(j, id);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = job_use_device(j, p->device);
    if (rc)
        return rc;
    settle(j, p);
    trim(j, p, keep);
    return CUDA_SUCCESS;
}

bool pool_destroy(job *j, uint64_t id)
{
    agent_pool *p = pool_by_id(j, id);
    if (!p)
        return false;
    objects_remove(&j->objs, id);
    p->destroyed = true;
    if (job_use_device(j, p->device) == CUDA_SUCCESS)
        settle(j, p);
    reap(j, p);
    return true;
}

void pool_cleanup(job *j)
{
    while (j->pools) {
        agent_pool *p = j->pools;
        j->pools = p->next;
        pool_block *lists[3] = { p->in_use, p->pending, p->cached };
        for (int i = 0; i < 3; i++)
            while (lists[i]) {
                pool_block *b = lists[i];
                lists[i] = b->next;
                if (b->done) {
                    job_use_device(j, p->device);
                    j->b->drv.fn_cuEventDestroy_v2(b->done);
                }
                free(b);   /* the window's release unmaps the memory */
            }
        free(p);
    }
}
