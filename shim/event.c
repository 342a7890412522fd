/* Events on proxies: recording one is a handover whose timeline value says
 * when it completed; query and synchronize read that timeline. */
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

SHIM_EXPORT(cuEventCreate)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuEventCreate);
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    shim_device *d = shim_device_at(ctx->device);
    proxy_obj *e = arena_new(PROXY_EVENT, ctx->device);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->u.event.flags = Flags;
    uint8_t body[rec_event_create_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_event_create_put(&w, &(rec_event_create){ .device = (uint32_t)d->remote_ordinal, .flags = Flags });
    handover h = { .op = JOB_OP_EVENT_CREATE, .object = e->id, .body = body, .body_len = w.off };
    CUresult rc = link_handover(d->link, &h, NULL);
    if (rc) {
        arena_free(e);
        return rc;
    }
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(proxy_obj *e)
{
    /* The slot stays taken: the agent may still report work naming it. */
    capture_forget(e);
    __atomic_store_n(&e->type, PROXY_FREE, __ATOMIC_RELEASE);
    return link_drop(e->link, CUDA_OP_cuEventDestroy_v2, e->id);
}

SHIM_EXPORT(cuEventDestroy)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    return e ? event_destroy(e) : SHIM_LOCAL(cuEventDestroy);
}

SHIM_EXPORT(cuEventDestroy_v2)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    return e ? event_destroy(e) : SHIM_LOCAL(cuEventDestroy_v2);
}

static CUresult event_record(CUevent hEvent, proxy_obj *s, unsigned flags)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->link != s->link)
        return CUDA_ERROR_INVALID_CONTEXT;
    bool captured;
    CUresult crc = capture_check(s, &captured);
    if (crc)
        return crc;
    if (captured)
        return capture_record(s, e);   /* no node: it forks and joins streams */
    uint8_t body[rec_event_record_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_event_record_put(&w, &(rec_event_record){ .event = e->id, .flags = flags });
    handover h = { .op = CUDA_OP_cuEventRecordWithFlags, .stream = s, .body = body, .body_len = w.off };
    uint64_t value;
    CUresult rc = link_handover(s->link, &h, &value);
    if (rc == CUDA_SUCCESS) {
        e->u.event.stream = s;
        __atomic_store_n(&e->u.event.value, value, __ATOMIC_RELEASE);
        e->u.event.recorded = true;
        capture_forget(e);
    }
    return rc;
}

/* Resolves the stream for an event record; the event decides proxy or local. */
#define RECORD(sym, per_thread, flags)                                          \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        if (!arena_get(hEvent, PROXY_EVENT)) {                                  \
            if (shim_is_proxy_handle(hEvent))                                   \
                return CUDA_ERROR_INVALID_HANDLE;                               \
            return SHIM_LOCAL(sym);                                             \
        }                                                                       \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : CUDA_ERROR_INVALID_CONTEXT;                     \
        return event_record(hEvent, s, flags);                                  \
    }

RECORD(cuEventRecord, false, 0)
RECORD(cuEventRecord_ptsz, true, 0)
RECORD(cuEventRecordWithFlags, false, flags)
RECORD(cuEventRecordWithFlags_ptsz, true, flags)

SHIM_EXPORT(cuEventQuery)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    if (!e)
        return SHIM_LOCAL(cuEventQuery);
    CUresult rc = link_status(e->link);
    if (rc || !e->u.event.recorded)
        return rc;
    return link_reached(e->u.event.stream, e->u.event.value) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SHIM_EXPORT(cuEventSynchronize)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    if (!e)
        return SHIM_LOCAL(cuEventSynchronize);
    if (!e->u.event.recorded)
        return link_status(e->link);
    return link_wait(e->link, e->u.event.stream, e->u.event.value);
}

static CUresult elapsed(float *ms, CUevent hStart, CUevent hEnd)
{
    proxy_obj *a = arena_get(hStart, PROXY_EVENT), *b = arena_get(hEnd, PROXY_EVENT);
    if (!a || !b || !ms)
        return CUDA_ERROR_INVALID_HANDLE;
    if (a->link != b->link)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!a->u.event.recorded || !b->u.event.recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!link_reached(a->u.event.stream, a->u.event.value) || !link_reached(b->u.event.stream, b->u.event.value))
        return CUDA_ERROR_NOT_READY;
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuEventElapsedTime_v2);
    wire_put_u64(&w, a->id);
    wire_put_u64(&w, b->id);
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *out;
    size_t n;
    CUresult rc = link_request(a->link, &iov, 1, &f, &out, &n);
    if (rc == CUDA_SUCCESS) {
        if (n != 4) {
            rc = link_malformed(a->link, "an answer to cuEventElapsedTime of %zu bytes, not 4", n);
        } else {
            uint32_t bits = wire_load_u32(out);
            memcpy(ms, &bits, 4);
        }
    }
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuEventElapsedTime)
{
    if (!arena_get(hStart, PROXY_EVENT) && !shim_is_proxy_handle(hStart))
        return SHIM_LOCAL(cuEventElapsedTime);
    return elapsed(pMilliseconds, hStart, hEnd);
}

SHIM_EXPORT(cuEventElapsedTime_v2)
{
    if (!arena_get(hStart, PROXY_EVENT) && !shim_is_proxy_handle(hStart))
        return SHIM_LOCAL(cuEventElapsedTime_v2);
    return elapsed(pMilliseconds, hStart, hEnd);
}
