/* Contexts: created and primary, the per-thread current-context stack,
 * limits, synchronisation and the sticky error a failed launch leaves. */
#include "softgpu/driver.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STACK_MAX 128

static __thread struct CUctx_st *stack[STACK_MAX];
static __thread int depth;

static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st *primaries[SOFT_MAX_DEVICES];
static _Atomic unsigned long long next_id = 1;

unsigned long long soft_unique(void)
{
    return atomic_fetch_add(&next_id, 1);
}

void soft_module_drop_ctx(struct CUctx_st *ctx);   /* module.c */

static CUresult ctx_new(int dev, unsigned flags, bool primary, struct CUctx_st **out)
{
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->device = dev;
    c->flags = flags;
    c->primary = primary;
    c->id = soft_unique();
    atomic_init(&c->pts_key, soft_unique());
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->reaped, NULL);
    c->limits[CU_LIMIT_STACK_SIZE] = 1024;
    c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
    c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
    c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
    c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
    c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
    c->limits[CU_LIMIT_SHMEM_SIZE] = SOFT_SHARED_PER_SM;
    CUresult r = soft_stream_create(c, 0, 0, true, false, &c->null_stream);
    if (r != CUDA_SUCCESS || !soft_handle_add(c, SOFT_CTX)) {
        if (c->null_stream)
            soft_stream_destroy(c->null_stream);
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->reaped);
        free(c);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = c;
    return CUDA_SUCCESS;
}

static void free_range(const soft_range *r)
{
    switch (r->kind) {
    case SOFT_MEM_DEVICE:
    case SOFT_MEM_MANAGED:
        soft_pages_free((void *)(uintptr_t)r->base, r->size);
        soft_device_unreserve(r->device, r->size);
        if (r->kind == SOFT_MEM_MANAGED)
            soft_managed_forget(r->base);
        break;
    case SOFT_MEM_HOST:
        soft_pages_free((void *)(uintptr_t)r->base, r->size);
        break;
    default:
        break;
    }
}

/* Frees everything ctx holds but itself and its NULL stream; clears the
 * sticky error. */
static void ctx_clear(struct CUctx_st *c)
{
    soft_ctx_sync(c);
    /* Live streams come off the list to be stopped here; destroyed ones
     * drain and leave by themselves: wait for them. */
    struct CUstream_st *live = NULL;
    pthread_mutex_lock(&c->lock);
    for (struct CUstream_st **p = &c->streams; *p;) {
        struct CUstream_st *s = *p;
        if (s->destroyed) {
            p = &s->next;
            continue;
        }
        *p = s->next;
        s->next = live;
        live = s;
    }
    while (c->streams)
        pthread_cond_wait(&c->reaped, &c->lock);
    pthread_mutex_unlock(&c->lock);
    while (live) {
        struct CUstream_st *next = live->next;
        soft_stream_destroy(live);
        live = next;
    }
    atomic_store(&c->pts_key, soft_unique());
    soft_module_drop_ctx(c);
    soft_range_drop_ctx(c, free_range);
    soft_heap_drop(c);
    atomic_store(&c->sticky, CUDA_SUCCESS);
    atomic_store(&c->peers, 0);
}

static void ctx_free(struct CUctx_st *c)
{
    soft_storage_drop(c);
    soft_handle_remove(c);
    ctx_clear(c);
    soft_stream_destroy(c->null_stream);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->reaped);
    free(c);
}

CUresult soft_ctx_current(struct CUctx_st **out)
{
    SOFT_TRY(soft_check_init());
    if (depth == 0 || !stack[depth - 1])
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!soft_handle_valid(stack[depth - 1], SOFT_CTX))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = stack[depth - 1];
    return CUDA_SUCCESS;
}

CUresult soft_ctx_status(struct CUctx_st *ctx)
{
    return (CUresult)atomic_load_explicit(&ctx->sticky, memory_order_acquire);
}

CUresult soft_ctx_enter(struct CUctx_st **out)
{
    SOFT_TRY(soft_ctx_current(out));
    return soft_ctx_status(*out);
}

void soft_ctx_poison(struct CUctx_st *ctx, CUresult err)
{
    int expected = CUDA_SUCCESS;
    atomic_compare_exchange_strong(&ctx->sticky, &expected, (int)err);
}

CUresult soft_ctx_sync(struct CUctx_st *ctx)
{
    soft_stream_drain(ctx->null_stream);
    pthread_mutex_lock(&ctx->lock);
    /* Work queued on streams until now; the list may change once unlocked,
     * so take references. */
    size_t n = 0;
    for (struct CUstream_st *s = ctx->streams; s; s = s->next)
        n++;
    struct CUstream_st **v = n ? malloc(n * sizeof *v) : NULL;
    uint64_t *want = n ? malloc(n * sizeof *want) : NULL;
    size_t k = 0;
    if (v && want)
        for (struct CUstream_st *s = ctx->streams; s; s = s->next) {
            soft_stream_ref(s);
            pthread_mutex_lock(&s->lock);
            want[k] = s->submitted;
            pthread_mutex_unlock(&s->lock);
            v[k++] = s;
        }
    pthread_mutex_unlock(&ctx->lock);
    for (size_t i = 0; i < k; i++) {
        soft_stream_wait(v[i], want[i]);
        soft_stream_unref(v[i]);
    }
    free(v);
    free(want);
    soft_pool_sync_point(ctx->device);
    return soft_ctx_status(ctx);
}

/* ctx argument or, when NULL, the current context. */
static CUresult ctx_or_current(CUcontext ctx, struct CUctx_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!ctx)
        return soft_ctx_current(out);
    if (!soft_handle_valid(ctx, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = ctx;
    return CUDA_SUCCESS;
}

static CUresult push(struct CUctx_st *c)
{
    if (depth == STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    stack[depth++] = c;
    return CUDA_SUCCESS;
}

#define CTX_FLAGS_MASK (CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX | \
                        CU_CTX_COREDUMP_ENABLE | CU_CTX_USER_COREDUMP_ENABLE | CU_CTX_SYNC_MEMOPS)

SOFT_API CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(dev));
    if (flags & ~(unsigned)CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(ctx_new(dev, flags, false, &c));
    CUresult r = push(c);
    if (r != CUDA_SUCCESS) {
        ctx_free(c);
        return r;
    }
    *pctx = c;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                         int numParams, unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    if (numParams > 0)
        return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
    return cuCtxCreate_v2(pctx, flags, dev);
}

SOFT_API CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                         unsigned int flags, CUdevice dev)
{
    if (ctxCreateParams) {
        if (ctxCreateParams->cigParams)
            return CUDA_ERROR_NOT_SUPPORTED;
        return cuCtxCreate_v3(pctx, ctxCreateParams->execAffinityParams,
                              ctxCreateParams->numExecAffinityParams, flags, dev);
    }
    return cuCtxCreate_v2(pctx, flags, dev);
}

SOFT_API CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    SOFT_TRY(soft_check_init());
    if (!ctx || !soft_handle_valid(ctx, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* Off this thread's stack wherever it is. */
    int j = 0;
    for (int i = 0; i < depth; i++)
        if (stack[i] != ctx)
            stack[j++] = stack[i];
    depth = j;
    ctx_free(ctx);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    SOFT_TRY(soft_check_init());
    if (!ctx || !soft_handle_valid(ctx, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    return push(ctx);
}

SOFT_API CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SOFT_TRY(soft_check_init());
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = stack[--depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SOFT_TRY(soft_check_init());
    if (!ctx) {
        if (depth > 0)
            depth--;
        return CUDA_SUCCESS;
    }
    if (!soft_handle_valid(ctx, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == 0)
        return push(ctx);
    stack[depth - 1] = ctx;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    *pctx = depth ? stack[depth - 1] : NULL;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    *device = c->device;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(ctx_or_current(ctx, &c));
    *device = c->device;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSynchronize(void)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    SOFT_TRY(soft_capture_unsafe());
    return soft_ctx_sync(c);
}

SOFT_API CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    struct CUctx_st *c;
    SOFT_TRY(ctx_or_current(ctx, &c));
    SOFT_TRY(soft_capture_unsafe());
    return soft_ctx_sync(c);
}

SOFT_API CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    *flags = c->flags;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (flags & ~(unsigned)CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    c->flags = flags;
    return CUDA_SUCCESS;
}

/* CUDA 2's usage count: cuCtxAttach adds one to the current context's,
 * cuCtxDetach takes one off and destroys the context past its creation's. */
SOFT_API CUresult CUDAAPI cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!pctx || flags)
        return CUDA_ERROR_INVALID_VALUE;
    c->attached++;
    *pctx = c;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxDetach(CUcontext ctx)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!ctx || ctx != c)
        return CUDA_ERROR_INVALID_CONTEXT;
    unsigned n = c->attached;
    while (n && !atomic_compare_exchange_weak(&c->attached, &n, n - 1))
        ;
    return n ? CUDA_SUCCESS : cuCtxDestroy_v2(ctx);
}

SOFT_API CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(ctx_or_current(ctx, &c));
    *ctxId = c->id;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(ctx_or_current(ctx, &c));
    *version = 3020;
    return CUDA_SUCCESS;
}

static bool limit_known(CUlimit limit)
{
    return (unsigned)limit < CU_LIMIT_MAX;
}

SOFT_API CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    if (!pvalue)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!limit_known(limit))
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *pvalue = c->limits[limit];
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!limit_known(limit))
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (limit == CU_LIMIT_SHMEM_SIZE || limit == CU_LIMIT_CIG_ENABLED)
        return CUDA_ERROR_INVALID_VALUE;   /* query only */
    /* As on a GPU: the heap's size is fixed once a kernel used malloc. */
    if (limit == CU_LIMIT_MALLOC_HEAP_SIZE && soft_heap_made(c))
        return CUDA_ERROR_INVALID_VALUE;
    c->limits[limit] = value;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    *pconfig = c->cache_config;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    c->cache_config = config;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SOFT_TRY(soft_check_init());
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* Every device is the same host memory, so access needs no mapping; what
 * is kept is whether it was enabled, for the errors CUDA gives. */
SOFT_API CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!soft_handle_valid(peerContext, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (Flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *p = (struct CUctx_st *)peerContext;
    if (p->device == c->device || p->device >= 64)
        return CUDA_ERROR_INVALID_DEVICE;
    unsigned long long bit = 1ull << p->device;
    if (atomic_fetch_or(&c->peers, bit) & bit)
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!soft_handle_valid(peerContext, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *p = (struct CUctx_st *)peerContext;
    unsigned long long bit = p->device < 64 ? 1ull << p->device : 0;
    if (!(atomic_fetch_and(&c->peers, ~bit) & bit))
        return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    return CUDA_SUCCESS;
}

/* ---- primary contexts ---- */

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(dev));
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&primary_lock);
    if (!primaries[dev])
        r = ctx_new(dev, 0, true, &primaries[dev]);
    if (r == CUDA_SUCCESS) {
        primaries[dev]->primary_refs++;
        *pctx = primaries[dev];
    }
    pthread_mutex_unlock(&primary_lock);
    return r;
}

CUresult soft_primary_context(int dev, struct CUctx_st **out)
{
    SOFT_TRY(soft_check_device(dev));
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&primary_lock);
    if (!primaries[dev])
        r = ctx_new(dev, 0, true, &primaries[dev]);
    *out = primaries[dev];
    pthread_mutex_unlock(&primary_lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SOFT_TRY(soft_check_device(dev));
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&primary_lock);
    struct CUctx_st *c = primaries[dev];
    if (!c || c->primary_refs == 0)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (--c->primary_refs == 0)
        /* Inactive now; its objects stay until a reset or the next use, so
         * that handles the program still holds do not dangle. */
        soft_ctx_sync(c);
    pthread_mutex_unlock(&primary_lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SOFT_TRY(soft_check_device(dev));
    /* The runtime's state of it goes first (its destructors may call in). */
    pthread_mutex_lock(&primary_lock);
    struct CUctx_st *p = primaries[dev];
    pthread_mutex_unlock(&primary_lock);
    if (p)
        soft_storage_drop(p);
    pthread_mutex_lock(&primary_lock);
    struct CUctx_st *c = primaries[dev];
    if (c) {
        ctx_clear(c);
        c->flags = 0;
    }
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    SOFT_TRY(soft_check_device(dev));
    if (flags & ~(unsigned)CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(cuDevicePrimaryCtxRetain(&c, dev));
    c->flags = flags;
    return cuDevicePrimaryCtxRelease_v2(dev);
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SOFT_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(dev));
    pthread_mutex_lock(&primary_lock);
    struct CUctx_st *c = primaries[dev];
    *flags = c ? c->flags : 0;
    *active = c && c->primary_refs > 0;
    pthread_mutex_unlock(&primary_lock);
    return CUDA_SUCCESS;
}

/* The first ABI of these took the same arguments. */
SOFT_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }
SOFT_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }
SOFT_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

/* Bank configuration and the persisting L2 cache mean nothing on a CPU;
 * the calls are accepted. */
SOFT_API CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    if (!pConfig)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    *pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    return (unsigned)config <= CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SOFT_API CUresult CUDAAPI cuCtxResetPersistingL2Cache(void)
{
    struct CUctx_st *c;
    return soft_ctx_current(&c);
}

/* softgpu's memory is the process's: no third party writes it by RDMA, so
 * there is never a write to flush. */
SOFT_API CUresult CUDAAPI cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                     CUflushGPUDirectRDMAWritesScope scope)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
        (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER && scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Contexts are made without an affinity: each has every multiprocessor. */
SOFT_API CUresult CUDAAPI cuCtxGetExecAffinity(CUexecAffinityParam *pExecAffinity, CUexecAffinityType type)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_current(&c));
    if (!pExecAffinity || type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
        return CUDA_ERROR_INVALID_VALUE;
    pExecAffinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
    pExecAffinity->param.smCount.val = SOFT_SM_COUNT;
    return CUDA_SUCCESS;
}
