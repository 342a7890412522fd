/* Streams on proxies: creating one costs no round trip (the agent learns
 * its id in a handover); synchronizing waits for the stream's timeline. */
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
#include "shim/rail.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* Every live stream of each proxy device, for context synchronization. */
static struct {
    proxy_obj **v;
    int n, cap;
} live[SHIM_DEVICES_MAX];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread proxy_obj *per_thread[SHIM_DEVICES_MAX];

/* False when memory is short: a stream not listed would escape device syncs. */
static bool live_add(proxy_obj *s)
{
    pthread_mutex_lock(&live_lock);
    if (live[s->device].n == live[s->device].cap) {
        int cap = live[s->device].cap ? live[s->device].cap * 2 : 16;
        proxy_obj **grown = realloc(live[s->device].v, (size_t)cap * sizeof *grown);
        if (grown) {
            live[s->device].v = grown;
            live[s->device].cap = cap;
        }
    }
    bool ok = live[s->device].n < live[s->device].cap;
    if (ok)
        live[s->device].v[live[s->device].n++] = s;
    pthread_mutex_unlock(&live_lock);
    return ok;
}

static void live_remove(proxy_obj *s)
{
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < live[s->device].n; i++)
        if (live[s->device].v[i] == s) {
            live[s->device].v[i] = live[s->device].v[--live[s->device].n];
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

CUresult shim_sync_device(int device)
{
    shim_device *d = shim_device_at(device);
    if (!d || !d->proxy)
        return CUDA_ERROR_INVALID_DEVICE;
    /* Snapshot targets first: waiting must not hold the registry lock. */
    pthread_mutex_lock(&live_lock);
    int n = live[device].n;
    proxy_obj **streams = malloc(sizeof *streams * (size_t)(n + 1));
    uint64_t *targets = malloc(sizeof *targets * (size_t)(n + 1));
    int k = 0;
    if (streams && targets) {
        for (int i = 0; i < n; i++) {
            streams[k] = live[device].v[i];
            targets[k++] = __atomic_load_n(&live[device].v[i]->u.stream.tl.submitted, __ATOMIC_ACQUIRE);
        }
        streams[k] = d->null_stream;
        targets[k++] = __atomic_load_n(&d->null_stream->u.stream.tl.submitted, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&live_lock);
    CUresult rc = streams && targets ? CUDA_SUCCESS : shim_nomem("the %d streams a device sync waits for", n + 1);
    for (int i = 0; i < k && rc == CUDA_SUCCESS; i++)
        rc = link_wait(d->link, streams[i], targets[i]);
    free(streams);
    free(targets);
    return rc ? rc : link_status(d->link);
}

static proxy_obj *create_stream(int device, unsigned flags, int priority, CUresult *rc)
{
    shim_device *d = shim_device_at(device);
    proxy_obj *s = arena_new(PROXY_STREAM, device);
    if (!s) {
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    s->u.stream.flags = flags;
    s->u.stream.priority = priority;
    uint8_t body[rec_stream_create_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_stream_create_put(&w, &(rec_stream_create){ .device = (uint32_t)d->remote_ordinal, .flags = flags,
                                                    .priority = priority });
    handover h = { .op = JOB_OP_STREAM_CREATE, .object = s->id, .body = body, .body_len = w.off };
    *rc = link_handover(d->link, &h, NULL);
    if (*rc) {
        arena_free(s);
        return NULL;
    }
    if (!live_add(s)) {
        link_drop(d->link, CUDA_OP_cuStreamDestroy_v2, s->id);
        /* The slot stays taken, as a destroyed stream's: words may name it. */
        __atomic_store_n(&s->type, PROXY_FREE, __ATOMIC_RELEASE);
        *rc = shim_nomem("the list of streams on %s", d->label);
        return NULL;
    }
    return s;
}

proxy_obj *shim_per_thread_stream(int device, CUresult *rc)
{
    if (device < 0 || device >= SHIM_DEVICES_MAX) {
        *rc = CUDA_ERROR_INVALID_DEVICE;
        return NULL;
    }
    if (!per_thread[device]) {
        per_thread[device] = create_stream(device, 0, 0, rc);
        if (per_thread[device])
            per_thread[device]->u.stream.per_thread = true;
    }
    *rc = per_thread[device] ? CUDA_SUCCESS : *rc;
    return per_thread[device];
}

int shim_stream(CUstream h, bool per_thread_variant, proxy_obj **out, CUresult *rc)
{
    *rc = CUDA_SUCCESS;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        proxy_obj *ctx = shim_proxy_current();
        if (!ctx)
            return 0;
        bool pt = h == CU_STREAM_PER_THREAD || (h == NULL && per_thread_variant);
        *out = pt ? shim_per_thread_stream(ctx->device, rc) : shim_device_at(ctx->device)->null_stream;
        return *out ? 1 : -1;
    }
    proxy_obj *s = arena_get(h, PROXY_STREAM);
    if (s) {
        *out = s;
        return 1;
    }
    if (shim_is_proxy_handle(h)) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return -1;
    }
    return 0;
}

static CUresult stream_create(CUstream *ph, unsigned flags, int priority)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc;
    proxy_obj *s = create_stream(ctx->device, flags, priority, &rc);
    if (s)
        *ph = (CUstream)s;
    return rc;
}

SHIM_EXPORT(cuStreamCreate)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

SHIM_EXPORT(cuStreamCreateWithPriority)
{
    if (!shim_proxy_current())
        return SHIM_LOCAL(cuStreamCreateWithPriority);
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(proxy_obj *s)
{
    shim_device *d = shim_device_at(s->device);
    if (s == d->null_stream || s->u.stream.per_thread)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Blocks kept for reuse on it are freed on it, before it goes. */
    shim_pool_release_kept(s, false);
    live_remove(s);
    /* The agent destroys it once the work already handed over is done, as
     * CUDA does; the id stays reserved until then on its side. */
    CUresult rc = link_drop(s->link, CUDA_OP_cuStreamDestroy_v2, s->id);
    /* Later words for this id must not find a recycled slot: keep it. */
    return rc;
}

SHIM_EXPORT(cuStreamDestroy)
{
    proxy_obj *s = arena_get(hStream, PROXY_STREAM);
    return s ? stream_destroy(s) : SHIM_LOCAL(cuStreamDestroy);
}

SHIM_EXPORT(cuStreamDestroy_v2)
{
    proxy_obj *s = arena_get(hStream, PROXY_STREAM);
    return s ? stream_destroy(s) : SHIM_LOCAL(cuStreamDestroy_v2);
}

static CUresult stream_query(proxy_obj *s)
{
    CUresult rc = link_status(s->link);
    if (rc || (rc = capture_misuse(s)))
        return rc;
    return link_reached(s, __atomic_load_n(&s->u.stream.tl.submitted, __ATOMIC_ACQUIRE)) ? CUDA_SUCCESS
                                                                                            : CUDA_ERROR_NOT_READY;
}

SHIM_EXPORT(cuStreamQuery)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, false, &s, &rc);
    return k < 0 ? rc : k ? stream_query(s) : SHIM_LOCAL(cuStreamQuery);
}

SHIM_EXPORT(cuStreamQuery_ptsz)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, true, &s, &rc);
    return k < 0 ? rc : k ? stream_query(s) : SHIM_LOCAL(cuStreamQuery_ptsz);
}

static CUresult stream_sync(proxy_obj *s)
{
    CUresult rc = capture_misuse(s);
    if (rc)
        return rc;
    return link_wait(s->link, s, __atomic_load_n(&s->u.stream.tl.submitted, __ATOMIC_ACQUIRE));
}

SHIM_EXPORT(cuStreamSynchronize)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, false, &s, &rc);
    return k < 0 ? rc : k ? stream_sync(s) : SHIM_LOCAL(cuStreamSynchronize);
}

SHIM_EXPORT(cuStreamSynchronize_ptsz)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, true, &s, &rc);
    return k < 0 ? rc : k ? stream_sync(s) : SHIM_LOCAL(cuStreamSynchronize_ptsz);
}

/* A wait across machines (an event of another agent, or a proxy event on a
 * local stream) cannot be enqueued on either side: the calling thread
 * waits for the event instead, which orders the work the same way. */
static CUresult wait_event_here(proxy_obj *e)
{
    if (!e->u.event.recorded)
        return link_status(e->link);
    return link_wait(e->link, e->u.event.stream, e->u.event.value);
}

static CUresult wait_event(proxy_obj *s, CUevent hEvent, unsigned flags)
{
    proxy_obj *e = arena_get(hEvent, PROXY_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    bool joined;
    CUresult rc = capture_wait(s, e, &joined);
    if (rc || joined)
        return rc;
    if (e->link != s->link)
        return shim_rail_usable(e->link, s->link) ? shim_rail_wait_event(s, e) : wait_event_here(e);
    uint8_t body[rec_wait_event_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_wait_event_put(&w, &(rec_wait_event){ .event = e->id, .flags = flags });
    handover h = { .op = CUDA_OP_cuStreamWaitEvent, .stream = s, .body = body, .body_len = w.off };
    uint64_t v = 0;
    rc = link_handover(s->link, &h, &v);
    /* The agent orders the streams; a host function before the event runs
     * here, in the program, so the shim holds s's words behind it too. */
    if (rc == CUDA_SUCCESS && e->u.event.recorded && e->u.event.stream && e->u.event.stream != s)
        link_stream_depends(s->link, s, v, e->u.event.stream, e->u.event.value);
    return rc;
}

#define WAIT_EVENT_EXPORT(sym, per_thread)                                      \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s, *e = arena_get(hEvent, PROXY_EVENT);                      \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k < 0)                                                              \
            return rc;                                                          \
        if (k > 0)                                                              \
            return wait_event(s, hEvent, Flags);                                \
        return e ? wait_event_here(e) : SHIM_LOCAL(sym);                        \
    }

WAIT_EVENT_EXPORT(cuStreamWaitEvent, false)
WAIT_EVENT_EXPORT(cuStreamWaitEvent_ptsz, true)

static CUresult host_func(proxy_obj *s, CUhostFn fn, void *data)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    bool captured;
    CUresult rc = capture_check(s, &captured);
    if (rc)
        return rc;
    if (captured) {
        /* A host node: the function runs in the program each launch. */
        shim_node t = { .type = CU_GRAPH_NODE_TYPE_HOST, .u.host = { fn, data } };
        return capture_add(s, &t);
    }
    handover h = { .op = JOB_OP_MARK, .stream = s, .host_fn = fn, .host_data = data };
    return link_handover(s->link, &h, NULL);
}

SHIM_EXPORT(cuLaunchHostFunc)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, false, &s, &rc);
    return k < 0 ? rc : k ? host_func(s, fn, userData) : SHIM_LOCAL(cuLaunchHostFunc);
}

SHIM_EXPORT(cuLaunchHostFunc_ptsz)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, true, &s, &rc);
    return k < 0 ? rc : k ? host_func(s, fn, userData) : SHIM_LOCAL(cuLaunchHostFunc_ptsz);
}

/* A stream callback runs as a host function that also gets the stream and
 * its status; the call is boxed with its arguments. */
typedef struct callback_box {
    CUstreamCallback cb;
    CUstream stream;
    void *data;
} callback_box;

static void run_callback(void *arg)
{
    callback_box *b = arg;
    proxy_obj *s = arena_get(b->stream, PROXY_STREAM);
    b->cb(b->stream, s ? link_status(s->link) : CUDA_SUCCESS, b->data);
    free(b);
}

static CUresult add_callback(proxy_obj *s, CUstream h, CUstreamCallback cb, void *data, unsigned flags)
{
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    bool captured;
    CUresult crc = capture_check(s, &captured);
    if (crc)
        return crc;
    if (captured)
        return capture_misuse(s);   /* CUDA captures no stream callbacks */
    callback_box *b = malloc(sizeof *b);
    if (!b)
        return shim_nomem("a stream callback");
    *b = (callback_box){ cb, h, data };
    CUresult rc = host_func(s, run_callback, b);
    if (rc)
        free(b);
    return rc;
}

SHIM_EXPORT(cuStreamAddCallback)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, false, &s, &rc);
    return k < 0 ? rc : k ? add_callback(s, hStream, callback, userData, flags) : SHIM_LOCAL(cuStreamAddCallback);
}

SHIM_EXPORT(cuStreamAddCallback_ptsz)
{
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, true, &s, &rc);
    return k < 0 ? rc : k ? add_callback(s, hStream, callback, userData, flags) : SHIM_LOCAL(cuStreamAddCallback_ptsz);
}

#define STREAM_GETTER(sym, per_thread, body)                                    \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        body;                                                                   \
        return CUDA_SUCCESS;                                                    \
    }

STREAM_GETTER(cuStreamGetPriority, false, if (!priority) return CUDA_ERROR_INVALID_VALUE; *priority = s->u.stream.priority)
STREAM_GETTER(cuStreamGetPriority_ptsz, true, if (!priority) return CUDA_ERROR_INVALID_VALUE; *priority = s->u.stream.priority)
STREAM_GETTER(cuStreamGetFlags, false, if (!flags) return CUDA_ERROR_INVALID_VALUE; *flags = s->u.stream.flags & ~JOB_STREAM_NULL)
STREAM_GETTER(cuStreamGetFlags_ptsz, true, if (!flags) return CUDA_ERROR_INVALID_VALUE; *flags = s->u.stream.flags & ~JOB_STREAM_NULL)
STREAM_GETTER(cuStreamGetId, false, if (!streamId) return CUDA_ERROR_INVALID_VALUE; *streamId = s->id)
STREAM_GETTER(cuStreamGetId_ptsz, true, if (!streamId) return CUDA_ERROR_INVALID_VALUE; *streamId = s->id)
STREAM_GETTER(cuStreamGetDevice, false, if (!device) return CUDA_ERROR_INVALID_VALUE; *device = s->device)
STREAM_GETTER(cuStreamGetDevice_ptsz, true, if (!device) return CUDA_ERROR_INVALID_VALUE; *device = s->device)
STREAM_GETTER(cuStreamGetCtx, false, if (!pctx) return CUDA_ERROR_INVALID_VALUE; *pctx = (CUcontext)shim_device_at(s->device)->primary)
STREAM_GETTER(cuStreamGetCtx_ptsz, true, if (!pctx) return CUDA_ERROR_INVALID_VALUE; *pctx = (CUcontext)shim_device_at(s->device)->primary)
/* No green contexts on proxies: every stream belongs to a plain context. */
STREAM_GETTER(cuStreamGetCtx_v2, false, if (!pctx || !pGreenCtx) return CUDA_ERROR_INVALID_VALUE;
              *pctx = (CUcontext)shim_device_at(s->device)->primary; *pGreenCtx = NULL)
STREAM_GETTER(cuStreamGetCtx_v2_ptsz, true, if (!pctx || !pGreenCtx) return CUDA_ERROR_INVALID_VALUE;
              *pctx = (CUcontext)shim_device_at(s->device)->primary; *pGreenCtx = NULL)
