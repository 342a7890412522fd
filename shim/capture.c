/* Stream capture on proxies, kept in the shim (graph.h): between
 * cuStreamBeginCapture and cuStreamEndCapture, the stream calls made on a
 * capturing proxy stream add nodes to the capture's graph (launch.c,
 * memory.c, stream.c) and hand nothing to the agent; beginning and ending a
 * capture cost no round trip. Each capturing stream keeps the nodes its next
 * work depends on; an event recorded in a capture remembers them, and a
 * stream that waits on it joins the capture (fork and join across streams).
 * The queries (cuStreamIsCapturing, cuStreamGetCaptureInfo*) answer from
 * this state, and the capture modes (cuThreadExchangeStreamCaptureMode)
 * forbid what softgpu/capture.c and the driver forbid: allocation,
 * synchronous copies and fills, context synchronize during a global or
 * thread-local capture, and any synchronous use of a capturing stream,
 * each invalidating the capture. All capture state lives under one lock. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/local_driver.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol (CAPTURE_QUERY passes names through another macro). */
#undef cuStreamGetCaptureInfo
#undef cuStreamIsCapturing
#undef cuStreamBeginCapture
#undef cuStreamBeginCapture_ptsz
#undef cuStreamEndCapture
#undef cuStreamUpdateCaptureDependencies

typedef struct shim_capture {
    shim_graph *graph;
    bool own_graph;                /* made by the capture (not cuStreamBeginCaptureToGraph's) */
    size_t first;                  /* nodes before this index were there before it began */
    unsigned long long id;
    CUstreamCaptureMode mode;
    pthread_t thread;              /* the thread that began it */
    proxy_obj *origin;
    bool invalid;                  /* an unsafe call or misuse ended it */
    proxy_obj **members;           /* every stream taking part, origin first */
    size_t nmembers;
    struct shim_capture *next;     /* in the live list */
} shim_capture;

/* A stream's part in a capture. */
struct capture_member {
    shim_capture *c;
    shim_node **deps;              /* what its next captured work depends on */
    size_t ndeps;
    CUgraphNode *handles;          /* the same as handles, for the queries */
    CUgraphEdgeData *edges;
};

/* An event recorded in a capture. */
struct capture_mark {
    unsigned long long id;
    shim_node **nodes;
    size_t n;
};

static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static shim_capture *live;
static unsigned long long next_id = 1;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static bool is_legacy(proxy_obj *s)
{
    return s == shim_device_at(s->device)->null_stream;
}

/* Replaces m's dependencies by the n nodes at v (under cap_lock). */
static bool set_deps(struct capture_member *m, shim_node *const *v, size_t n)
{
    shim_node **d = NULL;
    if (n) {
        if (!(d = malloc(n * sizeof *d)))
            return false;
        memcpy(d, v, n * sizeof *d);
    }
    free(m->deps);
    m->deps = d;
    m->ndeps = n;
    return true;
}

/* Ends s's part in its capture (under cap_lock). */
static void leave(proxy_obj *s)
{
    struct capture_member *m = s->u.stream.cap;
    if (!m)
        return;
    free(m->deps);
    free(m->handles);
    free(m->edges);
    free(m);
    s->u.stream.cap = NULL;
}

CUresult capture_check(proxy_obj *s, bool *captured)
{
    *captured = false;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    if (s->u.stream.cap) {
        *captured = true;
    } else if (is_legacy(s)) {
        /* The legacy stream waits for every blocking stream: it cannot
         * while one of them captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
         * the capture invalidated, as the driver does). */
        for (shim_capture *c = live; c; c = c->next)
            for (size_t i = 0; i < c->nmembers; i++)
                if (c->members[i]->device == s->device && !(c->members[i]->u.stream.flags & CU_STREAM_NON_BLOCKING)) {
                    c->invalid = true;
                    rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
                }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

CUresult capture_add(proxy_obj *s, const shim_node *tmpl)
{
    pthread_mutex_lock(&cap_lock);
    struct capture_member *m = s->u.stream.cap;
    CUresult rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (m && !m->c->invalid) {
        shim_node *nd;
        rc = graph_add(m->c->graph, tmpl, m->deps, m->ndeps, &nd);
        if (rc == CUDA_SUCCESS && !set_deps(m, &nd, 1))
            rc = shim_nomem("a captured stream's dependencies");
        if (rc)
            m->c->invalid = true;
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

CUresult capture_unsafe(void)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&cap_lock);
    for (shim_capture *c = live; c; c = c->next) {
        bool mine = pthread_equal(c->thread, self);
        /* Global mode: this thread's own non-relaxed captures and every
         * other thread's global ones forbid it; thread-local: only its own. */
        bool forbids = mine ? c->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                            : thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
        if (forbids) {
            c->invalid = true;
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

CUresult capture_misuse(proxy_obj *s)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    if (s->u.stream.cap) {
        s->u.stream.cap->c->invalid = true;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

CUresult capture_refuse(proxy_obj *s, const char *what)
{
    static _Atomic int told;
    if (!atomic_exchange(&told, 1))
        shim_log(SHIM_LOG_ERROR, "%s in a stream capture on %s: not supported (the capture is invalidated)", what,
                 shim_device_at(s->device)->label);
    capture_misuse(s);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The live capture with this id, or NULL (under cap_lock). */
static shim_capture *by_id(unsigned long long id)
{
    for (shim_capture *c = live; c && id; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

CUresult capture_record(proxy_obj *s, proxy_obj *e)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    struct capture_member *m = s->u.stream.cap;
    struct capture_mark *k = e->u.event.cap;
    if (!m) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (!k && !(k = calloc(1, sizeof *k))) {
        rc = shim_nomem("an event's record in a capture");
    } else {
        e->u.event.cap = k;
        shim_node **v = m->ndeps ? malloc(m->ndeps * sizeof *v) : NULL;
        if (m->ndeps && !v) {
            rc = shim_nomem("the %zu nodes an event records in a capture", m->ndeps);
        } else {
            if (v)
                memcpy(v, m->deps, m->ndeps * sizeof *v);
            free(k->nodes);
            k->nodes = v;
            k->n = m->ndeps;
            k->id = m->c->id;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

void capture_forget(proxy_obj *e)
{
    pthread_mutex_lock(&cap_lock);
    struct capture_mark *k = e->u.event.cap;
    e->u.event.cap = NULL;
    pthread_mutex_unlock(&cap_lock);
    if (k)
        free(k->nodes);
    free(k);
}

CUresult capture_wait(proxy_obj *s, proxy_obj *e, bool *joined)
{
    *joined = false;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    struct capture_mark *k = e->u.event.cap;
    struct capture_member *m = s->u.stream.cap;
    shim_capture *c = k ? by_id(k->id) : NULL;
    if (!c) {
        /* Not a captured record: a capturing stream cannot wait on work
         * outside its capture. */
        if (m) {
            m->c->invalid = true;
            rc = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        }
    } else if (m && m->c != c) {
        m->c->invalid = true;
        c->invalid = true;
        rc = CUDA_ERROR_STREAM_CAPTURE_MERGE;
    } else if (!m) {
        /* A fork: s joins c, depending on the event's nodes. */
        proxy_obj **v = realloc(c->members, (c->nmembers + 1) * sizeof *v);
        struct capture_member *n = calloc(1, sizeof *n);
        if (v)
            c->members = v;
        if (!v || !n || !set_deps(n, k->nodes, k->n)) {
            free(n);
            rc = shim_nomem("a stream joining a capture");
        } else {
            n->c = c;
            c->members[c->nmembers++] = s;
            s->u.stream.cap = n;
            *joined = true;
        }
    } else {
        /* A join: s's next work also depends on the event's nodes. */
        shim_node **v = realloc(m->deps, (m->ndeps + k->n + 1) * sizeof *v);
        if (!v) {
            rc = shim_nomem("a captured stream's %zu dependencies", m->ndeps + k->n);
        } else {
            size_t n = m->ndeps;
            for (size_t i = 0; i < k->n; i++) {
                bool dup = false;
                for (size_t j = 0; j < n; j++)
                    dup |= v[j] == k->nodes[i];
                if (!dup)
                    v[n++] = k->nodes[i];
            }
            m->deps = v;
            m->ndeps = n;
            *joined = true;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

/* ---- begin and end ---- */

static CUresult begin(proxy_obj *s, CUstreamCaptureMode mode, shim_graph *into, const CUgraphNode *deps,
                      const CUgraphEdgeData *edges, size_t ndeps)
{
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = link_status(s->link);
    if (rc)
        return rc;
    if (is_legacy(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* the legacy NULL stream cannot capture */
    for (size_t i = 0; edges && i < ndeps; i++)
        if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edges[i].from_port || edges[i].to_port)
            return CUDA_ERROR_NOT_SUPPORTED;
    shim_capture *c = calloc(1, sizeof *c);
    struct capture_member *m = calloc(1, sizeof *m);
    shim_node **start = calloc(ndeps + 1, sizeof *start);
    if (!c || !m || !start || !(c->members = malloc(sizeof *c->members))) {
        rc = shim_nomem("a stream capture");
        goto out;
    }
    c->own_graph = !into;
    if (!(c->graph = into ? into : graph_new(s->device, true))) {
        rc = shim_nomem("a stream capture's graph");
        goto out;
    }
    for (size_t i = 0; i < ndeps && rc == CUDA_SUCCESS; i++) {
        proxy_obj *o = arena_get(deps ? deps[i] : NULL, PROXY_GRAPH_NODE);
        if (!o || o->u.gnode.n->graph != c->graph)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            start[i] = o->u.gnode.n;
    }
    c->first = c->graph->n;
    c->mode = mode;
    c->thread = pthread_self();
    c->origin = s;
    pthread_mutex_lock(&cap_lock);
    if (rc == CUDA_SUCCESS && s->u.stream.cap)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (rc == CUDA_SUCCESS && !set_deps(m, start, ndeps))
        rc = shim_nomem("the %zu dependencies of a stream capture", ndeps);
    if (rc == CUDA_SUCCESS) {
        c->id = next_id++;
        c->members[c->nmembers++] = s;
        m->c = c;
        s->u.stream.cap = m;
        c->next = live;
        live = c;
    }
    pthread_mutex_unlock(&cap_lock);
out:
    free(start);
    if (rc) {
        if (c) {
            if (c->own_graph)
                graph_free(c->graph);
            free(c->members);
        }
        free(c);
        if (m)
            free(m->deps);
        free(m);
    }
    return rc;
}

/* True when every node the capture added that nothing depends on is among
 * the origin's dependencies: all forked work joined back. */
static bool all_joined(const shim_capture *c, const struct capture_member *m)
{
    const shim_graph *g = c->graph;
    bool *has_dependent = calloc(g->n + 1, sizeof *has_dependent);
    if (!has_dependent)
        return true;   /* cannot tell: the driver's check is a courtesy */
    for (size_t i = c->first; i < g->n; i++)
        for (size_t k = 0; k < g->nodes[i]->ndeps; k++)
            has_dependent[g->nodes[i]->deps[k]->index] = true;
    /* The origin's dependencies are marked too; any node left unmarked is
     * work that never joined back. */
    for (size_t k = 0; k < m->ndeps; k++)
        has_dependent[m->deps[k]->index] = true;
    bool ok = true;
    for (size_t i = c->first; i < g->n && ok; i++)
        ok = has_dependent[i];
    free(has_dependent);
    return ok;
}

static CUresult end(proxy_obj *s, CUgraph *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cap_lock);
    struct capture_member *m = s->u.stream.cap;
    if (!m) {
        pthread_mutex_unlock(&cap_lock);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    shim_capture *c = m->c;
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
    CUresult rc = c->invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                  : !all_joined(c, m) ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED
                                      : CUDA_SUCCESS;
    for (shim_capture **p = &live; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    for (size_t i = 0; i < c->nmembers; i++)
        leave(c->members[i]);
    pthread_mutex_unlock(&cap_lock);
    if (rc == CUDA_SUCCESS) {
        *out = (CUgraph)c->graph->handle;
    } else {
        if (c->own_graph)
            graph_free(c->graph);
        *out = NULL;
    }
    free(c->members);
    free(c);
    return rc;
}

#define BEGIN(sym, per_thread, mode)                                            \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return begin(s, mode, NULL, NULL, NULL, 0);                             \
    }

BEGIN(cuStreamBeginCapture, false, CU_STREAM_CAPTURE_MODE_GLOBAL)
BEGIN(cuStreamBeginCapture_ptsz, true, CU_STREAM_CAPTURE_MODE_GLOBAL)
BEGIN(cuStreamBeginCapture_v2, false, mode)
BEGIN(cuStreamBeginCapture_v2_ptsz, true, mode)

#define BEGIN_TO_GRAPH(sym, per_thread)                                         \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        shim_graph *g = graph_of(hGraph);                                       \
        if (!g || (numDependencies && !dependencies))                           \
            return CUDA_ERROR_INVALID_VALUE;                                    \
        return begin(s, mode, g, dependencies, dependencyData, numDependencies); \
    }

BEGIN_TO_GRAPH(cuStreamBeginCaptureToGraph, false)
BEGIN_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz, true)

#define END(sym, per_thread)                                                    \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return end(s, phGraph);                                                 \
    }

END(cuStreamEndCapture, false)
END(cuStreamEndCapture_ptsz, true)

static CUresult update_deps(proxy_obj *s, CUgraphNode *deps, const CUgraphEdgeData *edges, size_t n, unsigned flags)
{
    if ((n && !deps) || (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; edges && i < n; i++)
        if (edges[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edges[i].from_port || edges[i].to_port)
            return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    struct capture_member *m = s->u.stream.cap;
    shim_node **v = malloc((m ? m->ndeps + n + 1 : 1) * sizeof *v);
    if (!m || m->c->invalid) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (!v) {
        rc = shim_nomem("a captured stream's %zu dependencies", m->ndeps + n);
    } else {
        size_t k = 0;
        if (flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES)
            for (; k < m->ndeps; k++)
                v[k] = m->deps[k];
        for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
            proxy_obj *o = arena_get(deps[i], PROXY_GRAPH_NODE);
            if (!o || o->u.gnode.n->graph != m->c->graph)
                rc = CUDA_ERROR_INVALID_VALUE;
            else
                v[k++] = o->u.gnode.n;
        }
        if (rc == CUDA_SUCCESS && !set_deps(m, v, k))
            rc = shim_nomem("a captured stream's %zu dependencies", k);
    }
    pthread_mutex_unlock(&cap_lock);
    free(v);
    return rc;
}

#define UPDATE_DEPS(sym, per_thread, edges)                                     \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return update_deps(s, dependencies, edges, numDependencies, flags);     \
    }

UPDATE_DEPS(cuStreamUpdateCaptureDependencies, false, NULL)
UPDATE_DEPS(cuStreamUpdateCaptureDependencies_ptsz, true, NULL)
UPDATE_DEPS(cuStreamUpdateCaptureDependencies_v2, false, dependencyData)
UPDATE_DEPS(cuStreamUpdateCaptureDependencies_v2_ptsz, true, dependencyData)

/* ---- queries ---- */

/* The capture state of proxy stream s and what a query reports with it.
 * Outputs other than the status are left alone when not capturing, as the
 * driver documents; rig clears them anyway for callers that read them. The
 * dependency array stays valid until the stream's next captured work. */
static CUresult capture_info(proxy_obj *s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&cap_lock);
    if (is_legacy(s)) {
        /* The legacy stream while a blocking stream captures: the driver's
         * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, without invalidating. */
        for (shim_capture *c = live; c; c = c->next)
            for (size_t i = 0; i < c->nmembers; i++)
                if (c->members[i]->device == s->device &&
                    !(c->members[i]->u.stream.flags & CU_STREAM_NON_BLOCKING) &&
                    c->mode != CU_STREAM_CAPTURE_MODE_RELAXED)
                    rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    struct capture_member *m = s->u.stream.cap;
    if (rc == CUDA_SUCCESS && m && (deps || edges)) {
        /* Handles for the program, rebuilt at each query. */
        CUgraphNode *h = malloc((m->ndeps + 1) * sizeof *h);
        CUgraphEdgeData *e = calloc(m->ndeps + 1, sizeof *e);
        if (!h || !e) {
            free(h);
            free(e);
            rc = shim_nomem("the %zu dependencies a capture query returns", m->ndeps);
        } else {
            for (size_t i = 0; i < m->ndeps; i++)
                h[i] = (CUgraphNode)m->deps[i]->handle;
            free(m->handles);
            free(m->edges);
            m->handles = h;
            m->edges = e;
        }
    }
    if (rc == CUDA_SUCCESS) {
        *status = !m ? CU_STREAM_CAPTURE_STATUS_NONE
                  : m->c->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                  : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id)
            *id = m ? m->c->id : 0;
        if (graph)
            *graph = m ? (CUgraph)m->c->graph->handle : NULL;
        if (deps)
            *deps = m ? m->handles : NULL;
        if (edges)
            *edges = m ? m->edges : NULL;
        if (ndeps)
            *ndeps = m ? m->ndeps : 0;
    }
    pthread_mutex_unlock(&cap_lock);
    return rc;
}

#define CAPTURE_QUERY(sym, per_thread, ...)                                     \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return capture_info(s, __VA_ARGS__);                                    \
    }

CAPTURE_QUERY(cuStreamIsCapturing, false, captureStatus, NULL, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamIsCapturing_ptsz, true, captureStatus, NULL, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo_ptsz, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v2, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
              numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v2_ptsz, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
              numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v3, false, captureStatus_out, id_out, graph_out, dependencies_out,
              edgeData_out, numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v3_ptsz, true, captureStatus_out, id_out, graph_out, dependencies_out,
              edgeData_out, numDependencies_out)

SHIM_EXPORT(cuThreadExchangeStreamCaptureMode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    /* The local driver's copy of the mode follows ours, so that local
     * captures see it too. */
    const shim_driver *d = shim_local_driver();
    if (d && d->fn_cuThreadExchangeStreamCaptureMode) {
        CUstreamCaptureMode theirs = *mode;
        CUresult rc = d->fn_cuThreadExchangeStreamCaptureMode(&theirs);
        if (rc)
            return rc;
    }
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
