/* Stream capture: between cuStreamBeginCapture and cuStreamEndCapture, work
 * submitted to a capturing stream becomes nodes of the capture's graph
 * instead of running (soft_stream_submit hands it to soft_capture_add).
 * Each capturing stream keeps the set of nodes its next work depends on;
 * an event recorded in a capture remembers that set, and a stream that
 * waits on such an event joins the capture with it (fork and join across
 * streams). All capture state lives under one lock; captures are few. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

struct soft_capture {
    struct CUgraph_st *graph;
    unsigned long long id;
    CUstreamCaptureMode mode;
    pthread_t thread;              /* the thread that began it */
    struct CUstream_st *origin;
    bool invalid;                  /* an unsafe call or misuse ended it */
    struct CUstream_st **members;  /* every stream taking part, origin first */
    size_t nmembers;
    struct soft_capture *next;     /* in the live list */
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct soft_capture *live;
static unsigned long long next_capture_id = 1;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool soft_capturing(struct CUstream_st *s)
{
    pthread_mutex_lock(&cap_lock);
    bool c = s->capture != NULL;
    pthread_mutex_unlock(&cap_lock);
    return c;
}

/* Replaces s's dependency set with the n nodes at v (under cap_lock). */
static bool set_deps(struct CUstream_st *s, struct CUgraphNode_st *const *v, size_t n)
{
    struct CUgraphNode_st **d = NULL;
    if (n) {
        d = malloc(n * sizeof *d);
        if (!d)
            return false;
        memcpy(d, v, n * sizeof *d);
    }
    free(s->cap_deps);
    s->cap_deps = d;
    s->cap_ndeps = n;
    return true;
}

CUresult soft_capture_add(struct CUstream_st *s, soft_op *op)
{
    CUgraphNodeType type = op->node_type;
    if (op->run == NULL)
        type = CU_GRAPH_NODE_TYPE_EMPTY;
    pthread_mutex_lock(&cap_lock);
    struct soft_capture *c = s->capture;
    if (!c || c->invalid) {
        pthread_mutex_unlock(&cap_lock);
        soft_op_free(op);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct CUgraphNode_st *nd;
    CUresult r = soft_graph_add(c->graph, type, op, s->cap_deps, s->cap_ndeps, &nd);
    if (r == CUDA_SUCCESS && !set_deps(s, &nd, 1))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS)
        c->invalid = true;
    pthread_mutex_unlock(&cap_lock);
    return r;
}

/* Ends s's part in its capture (under cap_lock). */
static void leave(struct CUstream_st *s)
{
    s->capture = NULL;
    free(s->cap_deps);
    s->cap_deps = NULL;
    s->cap_ndeps = 0;
}

CUresult soft_capture_legacy_check(struct CUstream_st *s)
{
    if (!s->legacy)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&s->ctx->lock);
    pthread_mutex_lock(&cap_lock);
    for (struct CUstream_st *t = s->ctx->streams; t; t = t->next)
        if (t->capture && !(t->flags & CU_STREAM_NON_BLOCKING)) {
            t->capture->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    pthread_mutex_unlock(&cap_lock);
    pthread_mutex_unlock(&s->ctx->lock);
    return r;
}

CUresult soft_capture_unsafe(void)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&cap_lock);
    for (struct soft_capture *c = live; c; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        /* Global mode: this thread's own non-relaxed captures and every
         * other thread's global ones forbid it; thread-local: only its own. */
        bool forbids = mine ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                            : thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (forbids) {
            c->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return r;
}

CUresult soft_capture_misuse(struct CUstream_st *s)
{
    pthread_mutex_lock(&cap_lock);
    if (s->capture)
        s->capture->invalid = true;
    pthread_mutex_unlock(&cap_lock);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* The live capture with this id, or NULL (under cap_lock). */
static struct soft_capture *by_id(unsigned long long id)
{
    for (struct soft_capture *c = live; c && id; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

CUresult soft_capture_record(struct CUstream_st *s, struct CUevent_st *e)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    if (!s->capture) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        struct CUgraphNode_st **v = NULL;
        if (s->cap_ndeps && !(v = malloc(s->cap_ndeps * sizeof *v))) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            if (v)
                memcpy(v, s->cap_deps, s->cap_ndeps * sizeof *v);
            free(e->cap_nodes);
            e->cap_nodes = v;
            e->cap_n = s->cap_ndeps;
            e->cap_id = s->capture->id;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return r;
}

CUresult soft_capture_wait(struct CUstream_st *s, struct CUevent_st *e, bool *joined)
{
    *joined = false;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    struct soft_capture *c = by_id(e->cap_id);
    if (!c) {
        /* Not a captured record: a capturing stream cannot wait on work
         * outside its capture. */
        if (s->capture) {
            s->capture->invalid = true;
            r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
        pthread_mutex_unlock(&cap_lock);
        return r;
    }
    if (s->capture && s->capture != c) {
        s->capture->invalid = true;
        c->invalid = true;
        r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (!s->capture) {
        /* A fork: s joins c, depending on the event's nodes. */
        struct CUstream_st **m = realloc(c->members, (c->nmembers + 1) * sizeof *m);
        if (!m || !set_deps(s, e->cap_nodes, e->cap_n)) {
            if (m)
                c->members = m;
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            c->members = m;
            c->members[c->nmembers++] = s;
            soft_stream_ref(s);
            s->capture = c;
            *joined = true;
        }
    } else {
        /* A join: s's next work also depends on the event's nodes. */
        size_t n = s->cap_ndeps;
        struct CUgraphNode_st **v = realloc(s->cap_deps, (n + e->cap_n + 1) * sizeof *v);
        if (!v) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            for (size_t i = 0; i < e->cap_n; i++) {
                bool dup = false;
                for (size_t j = 0; j < n; j++)
                    dup |= v[j] == e->cap_nodes[i];
                if (!dup)
                    v[n++] = e->cap_nodes[i];
            }
            s->cap_deps = v;
            s->cap_ndeps = n;
            *joined = true;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return r;
}

void soft_capture_event_free(struct CUevent_st *e)
{
    free(e->cap_nodes);
    e->cap_nodes = NULL;
    e->cap_n = 0;
    e->cap_id = 0;
}

/* ---- begin and end ---- */

static CUresult begin(CUstream h, CUstreamCaptureMode mode, bool ptds)
{
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    if (s->legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* the legacy NULL stream cannot capture */
    struct soft_capture *c = calloc(1, sizeof *c);
    struct CUgraph_st *g = c ? soft_graph_new() : NULL;
    c = g ? c : (free(c), NULL);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->graph = g;
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    c->members = malloc(sizeof *c->members);
    if (!c->members) {
        soft_graph_free(g);
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&cap_lock);
    if (s->capture) {
        pthread_mutex_unlock(&cap_lock);
        free(c->members);
        soft_graph_free(g);
        free(c);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    c->id = next_capture_id++;
    c->members[c->nmembers++] = s;
    soft_stream_ref(s);
    s->capture = c;
    s->cap_deps = NULL;
    s->cap_ndeps = 0;
    c->next = live;
    live = c;
    pthread_mutex_unlock(&cap_lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    return begin(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, false);
}

SOFT_API CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

SOFT_API CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin(hStream, mode, false);
}

SOFT_API CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin(hStream, mode, true);
}

/* True when every node of g without dependents is in the set (v, n): all
 * forked work joined back into the origin stream. */
static bool all_joined(struct CUgraph_st *g, struct CUgraphNode_st *const *v, size_t n)
{
    bool ok = true;
    unsigned char *has_dependent = calloc(g->n + 1, 1);
    if (!has_dependent)
        return true;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
            has_dependent[g->nodes[i]->deps[j]->index] = 1;
    for (size_t i = 0; i < g->n && ok; i++) {
        if (has_dependent[i])
            continue;
        bool in = false;
        for (size_t j = 0; j < n; j++)
            in |= v[j] == g->nodes[i];
        ok = in;
    }
    free(has_dependent);
    return ok;
}

static CUresult end(CUstream h, CUgraph *out, bool ptds)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    pthread_mutex_lock(&cap_lock);
    struct soft_capture *c = s->capture;
    if (!c) {
        pthread_mutex_unlock(&cap_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    if (c->origin != s) {
        /* Only the stream that began it ends it; a wrong try ends it all. */
        c->invalid = true;
        pthread_mutex_unlock(&cap_lock);
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) {
        c->invalid = true;
        pthread_mutex_unlock(&cap_lock);
        return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    CUresult r = c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                 : !all_joined(c->graph, s->cap_deps, s->cap_ndeps) ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED
                                                                      : CUDA_SUCCESS;
    for (struct soft_capture **p = &live; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    for (size_t i = 0; i < c->nmembers; i++)
        leave(c->members[i]);
    pthread_mutex_unlock(&cap_lock);
    for (size_t i = 0; i < c->nmembers; i++)
        soft_stream_unref(c->members[i]);
    free(c->members);
    if (r == CUDA_SUCCESS) {
        *out = c->graph;
    } else {
        soft_graph_free(c->graph);
        *out = NULL;
    }
    free(c);
    return r;
}

SOFT_API CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, phGraph, false);
}

SOFT_API CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end(hStream, phGraph, true);
}

SOFT_API CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---- queries ---- */

static CUresult info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, bool ptds)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    /* The legacy stream while a blocking stream captures: the driver's
     * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, without invalidating. */
    if (s->legacy) {
        bool implicit = false;
        pthread_mutex_lock(&s->ctx->lock);
        pthread_mutex_lock(&cap_lock);
        for (struct CUstream_st *t = s->ctx->streams; t; t = t->next)
            implicit |= t->capture && !(t->flags & CU_STREAM_NON_BLOCKING) && t->capture->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
        pthread_mutex_unlock(&cap_lock);
        pthread_mutex_unlock(&s->ctx->lock);
        if (implicit)
            return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    pthread_mutex_lock(&cap_lock);
    struct soft_capture *c = s->capture;
    *status = !c ? CU_STREAM_CAPTURE_STATUS_NONE
              : c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                           : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    /* Outputs other than the status are left alone when not capturing, as
     * the driver documents; cleared anyway for callers that read them. The
     * dependency array stays valid until the stream's next captured work. */
    if (id)
        *id = c ? c->id : 0;
    if (graph)
        *graph = c ? c->graph : NULL;
    if (deps)
        *deps = c ? (const CUgraphNode *)s->cap_deps : NULL;
    if (edges)
        *edges = NULL;   /* default edges only */
    if (ndeps)
        *ndeps = c ? s->cap_ndeps : 0;
    pthread_mutex_unlock(&cap_lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL, false);
}

SOFT_API CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return info(hStream, captureStatus, NULL, NULL, NULL, NULL, NULL, true);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                 cuuint64_t *id_out)
{
    return info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                      cuuint64_t *id_out)
{
    return info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, true);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                         cuuint64_t *id_out, CUgraph *graph_out,
                                                         const CUgraphNode **dependencies_out,
                                                         size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out, true);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out,
                false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                         cuuint64_t *id_out, CUgraph *graph_out,
                                                         const CUgraphNode **dependencies_out,
                                                         const CUgraphEdgeData **edgeData_out,
                                                         size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out,
                true);
}
