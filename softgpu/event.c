/* Events: a record is an operation on a stream that stamps the time when
 * the stream reaches it; waits and syncs follow the record number asked at
 * call time, so re-recording does not disturb earlier waiters. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void soft_event_unref(struct CUevent_st *e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1)
        return;
    soft_capture_event_free(e);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e);
}

bool soft_event_reached(struct CUevent_st *e, uint64_t seq)
{
    pthread_mutex_lock(&e->lock);
    bool done = e->completed >= seq;
    pthread_mutex_unlock(&e->lock);
    return done;
}

void soft_event_wait(struct CUevent_st *e, uint64_t seq)
{
    pthread_mutex_lock(&e->lock);
    while (e->completed < seq)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

SOFT_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->ctx = c;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    if (!soft_handle_add(e, SOFT_EVENT)) {
        soft_event_unref(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = e;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hEvent, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    soft_handle_remove(hEvent);
    /* Records and waits still queued hold their own references. */
    soft_event_unref(hEvent);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

/* The stream reached the record: the time is now. */
static void run_record(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    op->u.record.ns = now_ns();
}

/* Completes the record once the stream's count says so too, so that after
 * cuEventSynchronize a query of the stream agrees. */
static void finish_record(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    struct CUevent_st *e = op->u.record.event;
    pthread_mutex_lock(&e->lock);
    if (op->u.record.seq > e->completed) {
        e->completed = op->u.record.seq;
        e->ns = op->u.record.ns ? op->u.record.ns : now_ns();
    }
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static void drop_record(soft_op *op)
{
    soft_event_unref(op->u.record.event);
}

static CUresult record(CUevent h, CUstream hs, unsigned flags, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(hs, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    struct CUevent_st *e = h;
    if (soft_capturing(s))
        return soft_capture_record(s, e);
    soft_op *op = soft_op_new(run_record);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->always = true;   /* an event never stays pending */
    op->finish = finish_record;
    op->drop = drop_record;
    atomic_fetch_add(&e->refs, 1);
    op->u.record.event = e;
    /* The number is taken under the event's lock together with submit, so
     * records on two streams complete in the order they were asked. */
    pthread_mutex_lock(&e->lock);
    uint64_t seq = ++e->recorded;
    op->u.record.seq = seq;
    pthread_mutex_unlock(&e->lock);
    uint64_t v;
    CUresult r = soft_stream_submit(s, op, &v);
    if (r != CUDA_SUCCESS) {
        /* Nothing will complete seq: mark it done so no one waits forever. */
        pthread_mutex_lock(&e->lock);
        if (e->completed < seq)
            e->completed = seq;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->lock);
        return r;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return record(hEvent, hStream, 0, false);
}

SOFT_API CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return record(hEvent, hStream, 0, true);
}

SOFT_API CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return record(hEvent, hStream, flags, false);
}

SOFT_API CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    return record(hEvent, hStream, flags, true);
}

SOFT_API CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hEvent, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUevent_st *e = hEvent;
    pthread_mutex_lock(&e->lock);
    bool done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    if (soft_handle_valid(e->ctx, SOFT_CTX))
        SOFT_TRY(soft_ctx_status(e->ctx));
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SOFT_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hEvent, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUevent_st *e = hEvent;
    pthread_mutex_lock(&e->lock);
    uint64_t seq = e->recorded;
    pthread_mutex_unlock(&e->lock);
    soft_event_wait(e, seq);
    if (soft_handle_valid(e->ctx, SOFT_CTX)) {
        soft_pool_sync_point(e->ctx->device);
        return soft_ctx_status(e->ctx);
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hStart, SOFT_EVENT) || !soft_handle_valid(hEnd, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUevent_st *ev[2] = { hStart, hEnd };
    uint64_t ns[2];
    for (int i = 0; i < 2; i++) {
        struct CUevent_st *e = ev[i];
        if (e->flags & CU_EVENT_DISABLE_TIMING)
            return CUDA_ERROR_INVALID_HANDLE;
        pthread_mutex_lock(&e->lock);
        bool never = e->recorded == 0, pending = e->completed < e->recorded;
        ns[i] = e->ns;
        pthread_mutex_unlock(&e->lock);
        if (never)
            return CUDA_ERROR_INVALID_HANDLE;
        if (pending)
            return CUDA_ERROR_NOT_READY;
    }
    *pMilliseconds = (float)((double)((int64_t)(ns[1] - ns[0])) / 1e6);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

static CUresult wait_event(CUstream hs, CUevent h, unsigned flags, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(hs, ptds, &s));
    struct CUevent_st *e = h;
    bool joined;
    SOFT_TRY(soft_capture_wait(s, e, &joined));
    if (joined)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&e->lock);
    uint64_t seq = e->recorded;
    bool done = e->completed >= seq;
    pthread_mutex_unlock(&e->lock);
    if (done)
        return CUDA_SUCCESS;   /* never recorded, or already complete */
    soft_op *op = soft_op_new(NULL);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!soft_op_dep(op, NULL, e, seq)) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, false);
}

SOFT_API CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return wait_event(hStream, hEvent, Flags, true);
}
