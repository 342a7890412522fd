/* Contexts. A proxy context is the shim's own object; on the agent every
 * context of a device is that device's primary context (streams and memory
 * are what separate work there). Local contexts belong to the real driver. */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/export_tables.h"
#include "shim/proxy.h"
#include "shim/streams.h"

static shim_device *proxy_device(CUdevice dev, CUresult *rc)
{
    if (!shim_initialized()) {
        *rc = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    shim_device *d = shim_device_at(dev);
    *rc = d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return d;
}

SHIM_EXPORT(cuDevicePrimaryCtxRetain)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_add_fetch(&d->primary_refs, 1, __ATOMIC_RELAXED);
    *pctx = (CUcontext)d->primary;
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    if (__atomic_load_n(&d->primary_refs, __ATOMIC_RELAXED) <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_sub_fetch(&d->primary_refs, 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDevicePrimaryCtxRelease)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxRelease);
    return primary_release(dev);
}

SHIM_EXPORT(cuDevicePrimaryCtxRelease_v2)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxRelease_v2);
    return primary_release(dev);
}

SHIM_EXPORT(cuDevicePrimaryCtxGetState)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = d->primary_flags;
    *active = __atomic_load_n(&d->primary_refs, __ATOMIC_RELAXED) > 0;
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    d->primary_flags = flags;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDevicePrimaryCtxSetFlags)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxSetFlags);
    return primary_set_flags(dev, flags);
}

SHIM_EXPORT(cuDevicePrimaryCtxSetFlags_v2)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDevicePrimaryCtxSetFlags_v2);
    return primary_set_flags(dev, flags);
}

static CUresult primary_reset(CUdevice dev)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    /* The runtime's per-context storage goes with the context's state. */
    shim_context_storage_drop((CUcontext)d->primary);
    return shim_sync_device(dev);
}

/* A local primary context reset by the real driver leaves the runtime's
 * storage for it behind unless dropped here too. */
static CUresult local_primary_reset(CUdevice dev, CUresult rc)
{
    CUcontext ctx;
    if (rc == CUDA_SUCCESS && shim_primary_context(dev, &ctx) == CUDA_SUCCESS)
        shim_context_storage_drop(ctx);
    return rc;
}

SHIM_EXPORT(cuDevicePrimaryCtxReset)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return local_primary_reset(dev, SHIM_LOCAL(cuDevicePrimaryCtxReset));
    return primary_reset(dev);
}

SHIM_EXPORT(cuDevicePrimaryCtxReset_v2)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return local_primary_reset(dev, SHIM_LOCAL(cuDevicePrimaryCtxReset_v2));
    return primary_reset(dev);
}

/* A created context on a proxy: made current, as cuCtxCreate does. */
static CUresult create_context(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    CUresult rc;
    shim_device *d = proxy_device(dev, &rc);
    if (!d)
        return rc;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *c = arena_new(PROXY_CONTEXT, dev);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->u.ctx.flags = flags;
    if (!shim_ctx_push(c)) {
        arena_free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxCreate)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuCtxCreate);
    return create_context(pctx, flags, dev);
}

SHIM_EXPORT(cuCtxCreate_v2)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy) {
        CUresult rc = SHIM_LOCAL(cuCtxCreate_v2);
        if (rc == CUDA_SUCCESS)
            shim_ctx_push(NULL);
        return rc;
    }
    return create_context(pctx, flags, dev);
}

SHIM_EXPORT(cuCtxCreate_v3)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy) {
        CUresult rc = SHIM_LOCAL(cuCtxCreate_v3);
        if (rc == CUDA_SUCCESS)
            shim_ctx_push(NULL);
        return rc;
    }
    (void)paramsArray;
    (void)numParams;
    return create_context(pctx, flags, dev);
}

SHIM_EXPORT(cuCtxCreate_v4)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy) {
        CUresult rc = SHIM_LOCAL(cuCtxCreate_v4);
        if (rc == CUDA_SUCCESS)
            shim_ctx_push(NULL);
        return rc;
    }
    (void)ctxCreateParams;
    return create_context(pctx, flags, dev);
}

static CUresult destroy_context(proxy_obj *c)
{
    if (c->u.ctx.primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult rc = shim_sync_device(c->device);
    if (shim_proxy_current() == c)
        shim_set_proxy_current(NULL);
    shim_context_storage_drop((CUcontext)c);
    arena_free(c);
    return rc;
}

/* A destroyed local context's address may come back for a new one: the
 * runtime's storage for the old one must not. */
static CUresult local_destroyed(CUcontext ctx, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        shim_context_storage_drop(ctx);
    return rc;
}

SHIM_EXPORT(cuCtxDestroy)
{
    proxy_obj *c = arena_get(ctx, PROXY_CONTEXT);
    return c ? destroy_context(c) : local_destroyed(ctx, SHIM_LOCAL(cuCtxDestroy));
}

SHIM_EXPORT(cuCtxDestroy_v2)
{
    proxy_obj *c = arena_get(ctx, PROXY_CONTEXT);
    return c ? destroy_context(c) : local_destroyed(ctx, SHIM_LOCAL(cuCtxDestroy_v2));
}

static CUresult push_current(CUcontext ctx, bool v2)
{
    proxy_obj *c = arena_get(ctx, PROXY_CONTEXT);
    if (!c && shim_is_proxy_handle(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!c) {
        CUresult rc = v2 ? SHIM_LOCAL(cuCtxPushCurrent_v2) : SHIM_LOCAL(cuCtxPushCurrent);
        if (rc == CUDA_SUCCESS && !shim_ctx_push(NULL))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        return rc;
    }
    return shim_ctx_push(c) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SHIM_EXPORT(cuCtxPushCurrent)
{
    return push_current(ctx, false);
}

SHIM_EXPORT(cuCtxPushCurrent_v2)
{
    return push_current(ctx, true);
}

static CUresult pop_current(CUcontext *pctx, bool v2)
{
    proxy_obj *was = NULL;
    proxy_obj *cur = shim_proxy_current();
    if (!shim_ctx_pop(&was)) {
        /* Nothing pushed through us: a proxy made current by cuCtxSetCurrent
         * is the one popped; otherwise the real driver's stack. */
        if (cur) {
            shim_set_proxy_current(NULL);
            if (pctx)
                *pctx = (CUcontext)cur;
            return CUDA_SUCCESS;
        }
        return v2 ? SHIM_LOCAL(cuCtxPopCurrent_v2) : SHIM_LOCAL(cuCtxPopCurrent);
    }
    if (was) {
        if (pctx)
            *pctx = (CUcontext)was;
        return CUDA_SUCCESS;
    }
    return v2 ? SHIM_LOCAL(cuCtxPopCurrent_v2) : SHIM_LOCAL(cuCtxPopCurrent);
}

SHIM_EXPORT(cuCtxPopCurrent)
{
    return pop_current(pctx, false);
}

SHIM_EXPORT(cuCtxPopCurrent_v2)
{
    return pop_current(pctx, true);
}

SHIM_EXPORT(cuCtxSetCurrent)
{
    proxy_obj *c = arena_get(ctx, PROXY_CONTEXT);
    if (!c && shim_is_proxy_handle(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c) {
        shim_set_proxy_current(c);
        return CUDA_SUCCESS;
    }
    shim_set_proxy_current(NULL);
    if (!ctx && !shim_local_driver())
        return CUDA_SUCCESS;
    return SHIM_LOCAL(cuCtxSetCurrent);
}

SHIM_EXPORT(cuCtxGetCurrent)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *c = shim_proxy_current();
    if (c) {
        *pctx = (CUcontext)c;
        return CUDA_SUCCESS;
    }
    if (!shim_local_driver()) {
        *pctx = NULL;
        return shim_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
    }
    return SHIM_LOCAL(cuCtxGetCurrent);
}

SHIM_EXPORT(cuCtxGetDevice)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetDevice);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->device;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxGetDevice_v2)
{
    proxy_obj *c = ctx ? arena_get(ctx, PROXY_CONTEXT) : shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetDevice_v2);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->device;
    return CUDA_SUCCESS;
}

static CUresult ctx_sync(proxy_obj *c)
{
    CUresult rc = capture_unsafe();
    return rc ? rc : shim_sync_device(c->device);
}

SHIM_EXPORT(cuCtxSynchronize)
{
    proxy_obj *c = shim_proxy_current();
    return c ? ctx_sync(c) : SHIM_LOCAL(cuCtxSynchronize);
}

SHIM_EXPORT(cuCtxSynchronize_v2)
{
    proxy_obj *c = ctx ? arena_get(ctx, PROXY_CONTEXT) : shim_proxy_current();
    return c ? ctx_sync(c) : SHIM_LOCAL(cuCtxSynchronize_v2);
}

unsigned shim_ctx_flags(const proxy_obj *ctx)
{
    shim_device *d = ctx->u.ctx.primary ? shim_device_at(ctx->device) : NULL;
    return d ? d->primary_flags : ctx->u.ctx.flags;
}

SHIM_EXPORT(cuCtxGetFlags)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetFlags);
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = shim_ctx_flags(c);
    return CUDA_SUCCESS;
}

/* Scheduling flags only change how the program's threads wait, which on a
 * proxy is the shim's waiting: kept and read back. */
SHIM_EXPORT(cuCtxSetFlags)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxSetFlags);
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->u.ctx.primary)
        shim_device_at(c->device)->primary_flags = flags;
    else
        c->u.ctx.flags = flags;
    return CUDA_SUCCESS;
}

/* A proxy context is made without an affinity: it has every
 * multiprocessor of its device, as the agent reported them. */
SHIM_EXPORT(cuCtxGetExecAffinity)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetExecAffinity);
    if (!pExecAffinity || type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
        return CUDA_ERROR_INVALID_VALUE;
    pExecAffinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
    pExecAffinity->param.smCount.val = (unsigned)shim_device_at(c->device)->attrs[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
    return CUDA_SUCCESS;
}

/* CUDA 2's usage count: cuCtxAttach adds one to the current context's,
 * cuCtxDetach takes one off and destroys the context past its creation's. */
SHIM_EXPORT(cuCtxAttach)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxAttach);
    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_add_fetch(&c->u.ctx.attached, 1, __ATOMIC_RELAXED);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxDetach)
{
    proxy_obj *c = arena_get(ctx, PROXY_CONTEXT);
    if (!c)
        return shim_is_proxy_handle(ctx) ? CUDA_ERROR_INVALID_CONTEXT : SHIM_LOCAL(cuCtxDetach);
    if (shim_proxy_current() != c)
        return CUDA_ERROR_INVALID_CONTEXT;
    unsigned n = __atomic_load_n(&c->u.ctx.attached, __ATOMIC_RELAXED);
    while (n && !__atomic_compare_exchange_n(&c->u.ctx.attached, &n, n - 1, false, __ATOMIC_RELAXED,
                                             __ATOMIC_RELAXED))
        ;
    return n ? CUDA_SUCCESS : destroy_context(c);
}

SHIM_EXPORT(cuCtxGetApiVersion)
{
    proxy_obj *c = ctx ? arena_get(ctx, PROXY_CONTEXT) : shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetApiVersion);
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 3020;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxGetId)
{
    proxy_obj *c = ctx ? arena_get(ctx, PROXY_CONTEXT) : shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxGetId);
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    *ctxId = c->id;
    return CUDA_SUCCESS;
}

/* Limits on proxies: the defaults of a fresh context, kept per process. */
static size_t proxy_limits[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
};

SHIM_EXPORT(cuCtxGetLimit)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuCtxGetLimit);
    if (!pvalue || (unsigned)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pvalue = proxy_limits[limit];
    return CUDA_SUCCESS;
}

/* The device heap's size reaches the agent's context, which makes the heap
 * for device malloc (and refuses a new size once a kernel used it). */
static CUresult set_heap_limit(int device, size_t value)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_DEVICE;
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuCtxSetLimit);   /* layout read in agent/request.c */
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u32(&w, CU_LIMIT_MALLOC_HEAP_SIZE);
    wire_put_u64(&w, value);
    struct iovec iov[1] = { { body, w.off } };
    frame f;
    const uint8_t *o;
    size_t on;
    CUresult rc = link_request(d->link, iov, 1, &f, &o, &on);
    if (rc == CUDA_SUCCESS && on)
        rc = link_malformed(d->link, "an answer to a limit with %zu bytes of outputs where none were due", on);
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuCtxSetLimit)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuCtxSetLimit);
    if ((unsigned)limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit == CU_LIMIT_MALLOC_HEAP_SIZE) {
        CUresult rc = set_heap_limit(c->device, value);
        if (rc)
            return rc;
    }
    proxy_limits[limit] = value;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxGetStreamPriorityRange)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuCtxGetStreamPriorityRange);
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxGetCacheConfig)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuCtxGetCacheConfig);
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    *pconfig = CU_FUNC_CACHE_PREFER_NONE;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuCtxSetCacheConfig)
{
    /* A preference, never a requirement: proxies keep their default. */
    return shim_proxy_current() ? CUDA_SUCCESS : SHIM_LOCAL(cuCtxSetCacheConfig);
}

/* Nothing but the agent can write a proxy's memory (no NIC of the program's
 * machine reaches it by RDMA), so there is never a write to flush. */
SHIM_EXPORT(cuFlushGPUDirectRDMAWrites)
{
    if (!shim_current_is_proxy())
        return SHIM_LOCAL(cuFlushGPUDirectRDMAWrites);
    if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
        (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER && scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
