/* Streams: each has its own worker thread and a queue of operations, so work
 * really runs asynchronously (cuStreamQuery says not-ready while a kernel
 * runs). Ordering between streams is by dependencies captured at submit
 * time: a stream reaching a count, or an event completing a record. The
 * legacy NULL stream waits for prior work of every blocking stream of its
 * context and they wait for its prior work. */
#include "softgpu/driver.h"

#include <stdlib.h>

static _Atomic unsigned long long next_id = 1;

static void *worker(void *arg);

CUresult soft_stream_create(struct CUctx_st *ctx, unsigned flags, int priority,
                            bool legacy, bool per_thread, struct CUstream_st **out)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = ctx;
    s->flags = flags;
    s->priority = priority;
    s->legacy = legacy;
    s->per_thread = per_thread;
    s->id = atomic_fetch_add(&next_id, 1);
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_cond_init(&s->done, NULL);
    *out = s;
    return CUDA_SUCCESS;
}

void soft_stream_ref(struct CUstream_st *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void soft_stream_unref(struct CUstream_st *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    free(s);
}

void soft_stream_destroy(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    bool started = s->started;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    /* The worker empties the queue before it exits. */
    if (started)
        pthread_join(s->thread, NULL);
    soft_stream_unref(s);
}

soft_op *soft_op_new(soft_op_fn run)
{
    soft_op *op = calloc(1, sizeof *op);
    if (op)
        op->run = run;
    return op;
}

bool soft_op_dep(soft_op *op, struct CUstream_st *s, struct CUevent_st *e, uint64_t value)
{
    soft_dep *d = realloc(op->deps, (op->ndeps + 1) * sizeof *d);
    if (!d)
        return false;
    op->deps = d;
    d[op->ndeps++] = (soft_dep){ .stream = s, .event = e, .value = value };
    if (s)
        soft_stream_ref(s);
    if (e)
        atomic_fetch_add(&e->refs, 1);
    return true;
}

void soft_op_free(soft_op *op)
{
    for (size_t i = 0; i < op->ndeps; i++) {
        if (op->deps[i].stream)
            soft_stream_unref(op->deps[i].stream);
        if (op->deps[i].event)
            soft_event_unref(op->deps[i].event);
    }
    free(op->deps);
    if (op->drop)
        op->drop(op);
    free(op);
}

void soft_stream_wait(struct CUstream_st *s, uint64_t value)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < value)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void soft_stream_drain(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t want = s->submitted;
    while (s->completed < want)
        pthread_cond_wait(&s->done, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* A retired stream's worker, done: out of the context's list, then freed. */
static void reap(struct CUstream_st *s)
{
    struct CUctx_st *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    for (struct CUstream_st **p = &c->streams; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    pthread_cond_broadcast(&c->reaped);
    pthread_mutex_unlock(&c->lock);
    soft_stream_unref(s);
}

void soft_stream_retire(struct CUstream_st *s)
{
    /* Under the context's lock too: context teardown reads the flag. */
    struct CUctx_st *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    pthread_mutex_lock(&s->lock);
    s->destroyed = true;
    s->stop = true;
    bool started = s->started;
    pthread_t thread = s->thread;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&c->lock);
    /* From here the worker may free s at any moment. */
    if (started)
        pthread_detach(thread);   /* the worker reaps */
    else
        reap(s);
}

static void *worker(void *arg)
{
    struct CUstream_st *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->work, &s->lock);
        soft_op *op = s->head;
        if (!op)
            break;
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);

        for (size_t i = 0; i < op->ndeps; i++) {
            if (op->deps[i].stream)
                soft_stream_wait(op->deps[i].stream, op->deps[i].value);
            if (op->deps[i].event)
                soft_event_wait(op->deps[i].event, op->deps[i].value);
        }
        /* A poisoned context runs nothing more but what must finish (event
         * records, callbacks that receive the error). */
        if (op->run && (op->always || soft_ctx_status(s->ctx) == CUDA_SUCCESS))
            op->run(op, s->ctx);
        pthread_mutex_lock(&s->lock);
        s->completed = op->value;
        /* Under the stream's lock, with its count already advanced: whoever
         * an event wakes sees the stream there, and whoever the stream wakes
         * sees the event complete. (Lock order: stream, then event.) */
        if (op->finish)
            op->finish(op, s->ctx);
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->lock);
        soft_op_free(op);
        pthread_mutex_lock(&s->lock);
    }
    bool destroyed = s->destroyed;
    pthread_mutex_unlock(&s->lock);
    if (destroyed)
        reap(s);
    return NULL;
}

/* Adds a dependency on t's work so far unless it is all done. */
static bool dep_on_pending(soft_op *op, struct CUstream_st *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t sub = t->submitted, done = t->completed;
    pthread_mutex_unlock(&t->lock);
    return sub == done || soft_op_dep(op, t, NULL, sub);
}

CUresult soft_stream_submit(struct CUstream_st *s, soft_op *op, uint64_t *value)
{
    struct CUctx_st *ctx = s->ctx;
    CUresult r = CUDA_SUCCESS;
    /* A capturing stream runs nothing: its work becomes graph nodes. */
    if (soft_capturing(s)) {
        if (op->ndeps) {
            /* Waits outside the capture cannot be captured. */
            soft_op_free(op);
            soft_capture_misuse(s);
            return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        if (value)
            *value = 0;
        return soft_capture_add(s, op);
    }
    if (s->legacy && (r = soft_capture_legacy_check(s)) != CUDA_SUCCESS) {
        soft_op_free(op);
        return r;
    }
    pthread_mutex_lock(&ctx->lock);
    if (s->legacy) {
        for (struct CUstream_st *t = ctx->streams; t; t = t->next)
            if (!(t->flags & CU_STREAM_NON_BLOCKING) && !dep_on_pending(op, t)) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
            }
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING) && !dep_on_pending(op, ctx->null_stream)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    pthread_mutex_lock(&s->lock);
    if (!s->started) {
        if (pthread_create(&s->thread, NULL, worker, s) != 0) {
            pthread_mutex_unlock(&s->lock);
            r = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        s->started = true;
    }
    op->value = ++s->submitted;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    if (value)
        *value = op->value;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
out:
    pthread_mutex_unlock(&ctx->lock);
    if (r != CUDA_SUCCESS)
        soft_op_free(op);
    return r;
}

/* The calling thread's default streams, one per context it used (the
 * last 8 contexts; an older one is found again in the context's list). */
typedef struct pts_entry {
    unsigned long long key;    /* the context's pts_key when it was made */
    struct CUctx_st *ctx;
    struct CUstream_st *s;
} pts_entry;
static __thread pts_entry pts_cache[8];
static __thread unsigned pts_next;
static pthread_key_t pts_exit_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

/* At thread exit: the thread's default streams drain and go, as
 * cuStreamDestroy would have them, unless their context went first. */
static void pts_thread_exit(void *unused)
{
    (void)unused;
    for (int i = 0; i < 8; i++) {
        pts_entry *e = &pts_cache[i];
        if (!e->key || !soft_handle_valid(e->ctx, SOFT_CTX) || atomic_load(&e->ctx->pts_key) != e->key)
            continue;
        struct CUctx_st *c = e->ctx;
        struct CUstream_st *s = e->s;
        e->key = 0;
        pthread_mutex_lock(&c->lock);
        bool member = false;
        for (struct CUstream_st *t = c->streams; t; t = t->next)
            member |= t == s && !t->destroyed;
        if (!member) {
            pthread_mutex_unlock(&c->lock);
            continue;
        }
        pthread_mutex_lock(&s->lock);
        s->destroyed = true;
        s->stop = true;
        bool started = s->started;
        pthread_t thread = s->thread;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->lock);
        if (!started) {
            for (struct CUstream_st **p = &c->streams; *p; p = &(*p)->next)
                if (*p == s) {
                    *p = s->next;
                    break;
                }
            pthread_cond_broadcast(&c->reaped);
        }
        pthread_mutex_unlock(&c->lock);
        if (started)
            pthread_detach(thread);   /* its worker reaps it */
        else
            soft_stream_unref(s);
    }
}

static void pts_make_key(void)
{
    pthread_key_create(&pts_exit_key, pts_thread_exit);
}

/* The calling thread's default stream in ctx, made on first use. */
static CUresult per_thread_stream(struct CUctx_st *ctx, struct CUstream_st **out)
{
    unsigned long long key = atomic_load(&ctx->pts_key);
    for (int i = 0; i < 8; i++)
        if (pts_cache[i].key == key) {
            *out = pts_cache[i].s;
            return CUDA_SUCCESS;
        }
    pthread_t self = pthread_self();
    struct CUstream_st *found = NULL;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&ctx->lock);
    for (struct CUstream_st *t = ctx->streams; t; t = t->next)
        if (t->per_thread && !t->destroyed && pthread_equal(t->thread_owner, self))
            found = t;
    if (!found) {
        r = soft_stream_create(ctx, 0, 0, false, true, &found);
        if (r == CUDA_SUCCESS) {
            found->thread_owner = self;
            found->next = ctx->streams;
            ctx->streams = found;
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_once(&pts_once, pts_make_key);
    pthread_setspecific(pts_exit_key, (void *)1);
    int slot = -1;
    for (int i = 0; i < 8 && slot < 0; i++)
        if (pts_cache[i].key == 0)
            slot = i;
    if (slot < 0)
        slot = (int)(pts_next++ % 8);
    pts_cache[slot] = (pts_entry){ .key = key, .ctx = ctx, .s = found };
    *out = found;
    return CUDA_SUCCESS;
}

CUresult soft_stream_get(CUstream h, bool ptds, struct CUstream_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!h && ptds)
        h = CU_STREAM_PER_THREAD;
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        struct CUctx_st *c;
        SOFT_TRY(soft_ctx_current(&c));
        if (h == CU_STREAM_PER_THREAD)
            return per_thread_stream(c, out);
        *out = c->null_stream;
        return CUDA_SUCCESS;
    }
    if (!soft_handle_valid(h, SOFT_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = h;
    return CUDA_SUCCESS;
}

/* ---- entry points ---- */

SOFT_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    /* Priorities clamp to the range cuCtxGetStreamPriorityRange gives. */
    if (priority > 0)
        priority = 0;
    if (priority < -5)
        priority = -5;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_create(c, flags, priority, false, false, &s));
    if (!soft_handle_add(s, SOFT_STREAM)) {
        soft_stream_destroy(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&c->lock);
    s->next = c->streams;
    c->streams = s;
    pthread_mutex_unlock(&c->lock);
    *phStream = s;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cuStreamCreateWithPriority(phStream, Flags, 0);
}

SOFT_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hStream, SOFT_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s = hStream;
    soft_handle_remove(s);
    /* As the driver does: return now; queued work still runs (and still
     * orders against the NULL stream), then the stream goes. */
    soft_stream_retire(s);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

bool soft_stream_idle(struct CUstream_st *s)
{
    pthread_mutex_lock(&s->lock);
    bool idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    if (!idle)
        return false;
    /* Legacy ordering: the NULL stream waits for the blocking streams, a
     * blocking stream for the NULL stream. */
    struct CUctx_st *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    if (s->legacy) {
        for (struct CUstream_st *t = c->streams; t && idle; t = t->next) {
            if (t->flags & CU_STREAM_NON_BLOCKING)
                continue;
            pthread_mutex_lock(&t->lock);
            idle = t->completed == t->submitted;
            pthread_mutex_unlock(&t->lock);
        }
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        struct CUstream_st *t = c->null_stream;
        pthread_mutex_lock(&t->lock);
        idle = t->completed == t->submitted;
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_unlock(&c->lock);
    return idle;
}

static CUresult stream_query(CUstream h, bool ptds)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    if (soft_capturing(s))
        return soft_capture_misuse(s);
    pthread_mutex_lock(&s->lock);
    bool idle = s->completed == s->submitted;
    pthread_mutex_unlock(&s->lock);
    /* The NULL stream also waits for the blocking streams. */
    if (idle && s->legacy)
        idle = soft_stream_idle(s);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SOFT_API CUresult CUDAAPI cuStreamQuery(CUstream hStream) { return stream_query(hStream, false); }
SOFT_API CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream, true); }

static void nop(soft_op *op, struct CUctx_st *ctx)
{
    (void)op;
    (void)ctx;
}

static CUresult stream_sync(CUstream h, bool ptds)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    if (soft_capturing(s))
        return soft_capture_misuse(s);
    if (s->legacy) {
        /* Wait for the blocking streams too: through a no-op that depends on
         * them. */
        soft_op *op = soft_op_new(nop);
        if (!op)
            return CUDA_ERROR_OUT_OF_MEMORY;
        op->always = true;
        uint64_t v;
        SOFT_TRY(soft_stream_submit(s, op, &v));
        soft_stream_wait(s, v);
    } else {
        soft_stream_drain(s);
    }
    soft_pool_sync_point(s->ctx->device);
    return soft_ctx_status(s->ctx);
}

SOFT_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) { return stream_sync(hStream, false); }
SOFT_API CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, true); }

static void run_host(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    op->u.host.fn(op->u.host.data);
}

CUresult soft_host_op(CUhostFn fn, void *data, soft_op **out)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op = soft_op_new(run_host);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host.fn = fn;
    op->u.host.data = data;
    *out = op;
    return CUDA_SUCCESS;
}

static CUresult launch_host(CUstream h, CUhostFn fn, void *data, bool ptds)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    soft_op *op;
    SOFT_TRY(soft_host_op(fn, data, &op));
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host(hStream, fn, userData, false);
}

SOFT_API CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return launch_host(hStream, fn, userData, true);
}

static void run_callback(soft_op *op, struct CUctx_st *ctx)
{
    op->u.callback.fn(op->u.callback.stream, soft_ctx_status(ctx), op->u.callback.data);
}

static CUresult add_callback(CUstream h, CUstreamCallback fn, void *data, unsigned flags, bool ptds)
{
    if (!fn || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    soft_op *op = soft_op_new(run_callback);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->always = true;   /* it receives the context's error */
    op->u.callback.fn = fn;
    op->u.callback.data = data;
    op->u.callback.stream = h;
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                              void *userData, unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, false);
}

SOFT_API CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                                   void *userData, unsigned int flags)
{
    return add_callback(hStream, callback, userData, flags, true);
}

#define STREAM_GETTER(name, type, expr)                                            \
    static CUresult name##_impl(CUstream h, type *out, bool ptds)                  \
    {                                                                              \
        if (!out)                                                                  \
            return CUDA_ERROR_INVALID_VALUE;                                       \
        struct CUstream_st *s;                                                     \
        SOFT_TRY(soft_stream_get(h, ptds, &s));                                    \
        *out = (expr);                                                             \
        return CUDA_SUCCESS;                                                       \
    }                                                                              \
    SOFT_API CUresult CUDAAPI name(CUstream h, type *out) { return name##_impl(h, out, false); } \
    SOFT_API CUresult CUDAAPI name##_ptsz(CUstream h, type *out) { return name##_impl(h, out, true); }

STREAM_GETTER(cuStreamGetFlags, unsigned int, s->flags)
STREAM_GETTER(cuStreamGetPriority, int, s->priority)
STREAM_GETTER(cuStreamGetCtx, CUcontext, s->ctx)
STREAM_GETTER(cuStreamGetId, unsigned long long, s->id)
STREAM_GETTER(cuStreamGetDevice, CUdevice, s->ctx->device)

static CUresult get_ctx_v2(CUstream h, CUcontext *pCtx, CUgreenCtx *pGreenCtx, bool ptds)
{
    if (!pCtx || !pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    *pCtx = s->ctx;
    *pGreenCtx = NULL;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return get_ctx_v2(hStream, pCtx, pGreenCtx, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    return get_ctx_v2(hStream, pCtx, pGreenCtx, true);
}
