/* User objects on proxies: the program's pointer and destructor with a
 * reference count shared by the program and by graphs (cuGraphRetainUserObject),
 * which pass theirs on to clones, child graph nodes and executable graphs
 * (graph.c copies them with the graph). The destructor runs in the program,
 * once, when the last reference goes; an executable graph's references are
 * given up after its launches so far, by a host function queued behind them
 * on each stream it was launched on (the driver, too, holds them until
 * those launches finish, and runs destructors on a thread of its own). A
 * user object made while no proxy context is current is the local driver's. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/graph.h"
#include "shim/log.h"
#include "shim/proxy.h"

static void retain(proxy_obj *o, unsigned count)
{
    atomic_fetch_add(&o->u.uobj.refs, count);
}

/* Drops count references; false (nothing dropped) when o holds fewer. */
static bool release(proxy_obj *o, unsigned count)
{
    unsigned have = atomic_load(&o->u.uobj.refs);
    do {
        if (have < count)
            return false;
    } while (!atomic_compare_exchange_weak(&o->u.uobj.refs, &have, have - count));
    if (have == count) {
        CUhostFn fn = o->u.uobj.destroy;
        void *ptr = o->u.uobj.ptr;
        arena_free(o);
        fn(ptr);
    }
    return true;
}

SHIM_EXPORT(cuUserObjectCreate)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuUserObjectCreate);
    if (!object_out || !destroy || !initialRefcount || initialRefcount > INT32_MAX ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *o = arena_new(PROXY_USER_OBJECT, c->device);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->u.uobj.ptr = ptr;
    o->u.uobj.destroy = destroy;
    atomic_store(&o->u.uobj.refs, initialRefcount);
    *object_out = (CUuserObject)o;
    return CUDA_SUCCESS;
}

#define OBJECT_OR_LOCAL(sym, h, o)                                              \
    proxy_obj *o = arena_get(h, PROXY_USER_OBJECT);                             \
    if (!o)                                                                     \
        return shim_is_proxy_handle(h) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(sym)

SHIM_EXPORT(cuUserObjectRetain)
{
    OBJECT_OR_LOCAL(cuUserObjectRetain, object, o);
    if (!count || count > INT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    retain(o, count);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuUserObjectRelease)
{
    OBJECT_OR_LOCAL(cuUserObjectRelease, object, o);
    if (!count || count > INT32_MAX || !release(o, count))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- references graphs hold ---- */

bool graph_urefs_copy(shim_graph *dst, const shim_graph *src)
{
    if (!src->nurefs)
        return true;
    if (!(dst->urefs = malloc(src->nurefs * sizeof *dst->urefs)))
        return false;
    memcpy(dst->urefs, src->urefs, src->nurefs * sizeof *dst->urefs);
    dst->nurefs = src->nurefs;
    for (size_t i = 0; i < src->nurefs; i++)
        retain(src->urefs[i].o, src->urefs[i].count);
    return true;
}

void urefs_release(graph_uref *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        release(v[i].o, v[i].count);
    free(v);
}

/* References waiting for launches on several streams: the last stream to
 * get there releases them. */
typedef struct pending_urefs {
    _Atomic size_t waiting;
    graph_uref *v;
    size_t n;
} pending_urefs;

static void pending_reached(void *arg)
{
    pending_urefs *p = arg;
    if (atomic_fetch_sub(&p->waiting, 1) != 1)
        return;
    urefs_release(p->v, p->n);
    free(p);
}

void urefs_release_after(graph_uref *v, size_t nv, proxy_obj *const *streams, size_t n)
{
    if (!nv) {
        free(v);
        return;
    }
    pending_urefs *p = n ? malloc(sizeof *p) : NULL;
    if (n && !p) {
        /* No memory to wait without blocking: the launches end first. */
        shim_nomem("a deferred release of a graph's user objects; waiting for its launches instead");
        for (size_t i = 0; i < n; i++)
            if (arena_get(streams[i], PROXY_STREAM))
                cuStreamSynchronize((CUstream)streams[i]);
    }
    if (!p) {
        /* Never launched: released now. */
        urefs_release(v, nv);
        return;
    }
    p->v = v;
    p->n = nv;
    atomic_init(&p->waiting, n + 1);
    for (size_t i = 0; i < n; i++) {
        /* A stream destroyed since, or capturing now, waits for nothing. */
        bool captured = true;
        proxy_obj *s = arena_get(streams[i], PROXY_STREAM);
        if (!s || capture_check(s, &captured) || captured || cuLaunchHostFunc((CUstream)s, pending_reached, p))
            pending_reached(p);
    }
    pending_reached(p);   /* the caller's own count */
}

/* The graph and object of a graph's retain or release: *local when both are
 * the local driver's. */
static CUresult graph_object(CUgraph graph, CUuserObject object, shim_graph **g, proxy_obj **o, bool *local)
{
    *g = graph_of(graph);
    *o = arena_get(object, PROXY_USER_OBJECT);
    *local = !*g && !*o && !shim_is_proxy_handle(graph) && !shim_is_proxy_handle(object);
    return *g && *o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Move: the graph takes count of the caller's references instead of new ones. */
SHIM_EXPORT(cuGraphRetainUserObject)
{
    shim_graph *g;
    proxy_obj *o;
    bool local;
    CUresult rc = graph_object(graph, object, &g, &o, &local);
    if (local)
        return SHIM_LOCAL(cuGraphRetainUserObject);
    if (rc || !count || count > INT32_MAX || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
        return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    size_t i = 0;
    while (i < g->nurefs && g->urefs[i].o != o)
        i++;
    if (i == g->nurefs) {
        graph_uref *v = realloc(g->urefs, (g->nurefs + 1) * sizeof *v);
        if (!v)
            return shim_nomem("a graph's list of %zu user objects", g->nurefs + 1);
        g->urefs = v;
        v[g->nurefs++] = (graph_uref){ o, 0 };
    }
    g->urefs[i].count += count;
    if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
        retain(o, count);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphReleaseUserObject)
{
    shim_graph *g;
    proxy_obj *o;
    bool local;
    CUresult rc = graph_object(graph, object, &g, &o, &local);
    if (local)
        return SHIM_LOCAL(cuGraphReleaseUserObject);
    if (rc || !count || count > INT32_MAX)
        return rc ? rc : CUDA_ERROR_INVALID_VALUE;
    size_t i = 0;
    while (i < g->nurefs && g->urefs[i].o != o)
        i++;
    if (i == g->nurefs || g->urefs[i].count < count)
        return CUDA_ERROR_INVALID_VALUE;
    if ((g->urefs[i].count -= count) == 0)
        g->urefs[i] = g->urefs[--g->nurefs];
    release(o, count);
    return CUDA_SUCCESS;
}
