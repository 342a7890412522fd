/* User objects: a pointer and its destructor with a reference count the
 * program shares with graphs (cuGraphRetainUserObject), the graphs cloned
 * from them, child graph nodes and executable graphs; an executable graph's
 * references live in its plans, which queued launches hold, so the
 * destructor runs once the last holder lets go: after the last launch that
 * needed the object, on whichever thread dropped it (the driver also runs
 * it on a thread of its own, and forbids it CUDA calls). */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

struct CUuserObject_st {
    _Atomic unsigned refs;
    void *ptr;
    CUhostFn destroy;
};

struct soft_urefs {
    _Atomic int holds;
    size_t n;
    struct soft_uref v[];
};

static void retain(struct CUuserObject_st *o, unsigned count)
{
    atomic_fetch_add(&o->refs, count);
}

/* Drops count references; false (nothing dropped) when o holds fewer. */
static bool release(struct CUuserObject_st *o, unsigned count)
{
    unsigned have = atomic_load(&o->refs);
    do {
        if (have < count)
            return false;
    } while (!atomic_compare_exchange_weak(&o->refs, &have, have - count));
    if (have == count) {
        soft_handle_remove(o);
        o->destroy(o->ptr);
        free(o);
    }
    return true;
}

static CUresult object_arg(CUuserObject h, struct CUuserObject_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_UOBJ))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct CUuserObject_st *)h;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                             unsigned int initialRefcount, unsigned int flags)
{
    SOFT_TRY(soft_check_init());
    if (!object_out || !destroy || !initialRefcount || initialRefcount > INT32_MAX ||
        flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUuserObject_st *o = calloc(1, sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_init(&o->refs, initialRefcount);
    o->ptr = ptr;
    o->destroy = destroy;
    if (!soft_handle_add(o, SOFT_UOBJ)) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *object_out = (CUuserObject)o;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count)
{
    struct CUuserObject_st *o;
    SOFT_TRY(object_arg(object, &o));
    if (!count || count > INT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    retain(o, count);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count)
{
    struct CUuserObject_st *o;
    SOFT_TRY(object_arg(object, &o));
    if (!count || count > INT32_MAX || !release(o, count))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- references graphs hold ---- */

bool soft_urefs_of(const struct soft_uref *v, size_t n, struct soft_urefs **out)
{
    *out = NULL;
    if (!n)
        return true;
    struct soft_urefs *r = malloc(sizeof *r + n * sizeof *v);
    if (!r)
        return false;
    atomic_init(&r->holds, 1);
    r->n = n;
    memcpy(r->v, v, n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        retain(v[i].o, v[i].count);
    *out = r;
    return true;
}

struct soft_urefs *soft_urefs_hold(struct soft_urefs *r)
{
    if (r)
        atomic_fetch_add(&r->holds, 1);
    return r;
}

void soft_urefs_drop(struct soft_urefs *r)
{
    if (!r || atomic_fetch_sub(&r->holds, 1) != 1)
        return;
    for (size_t i = 0; i < r->n; i++)
        release(r->v[i].o, r->v[i].count);
    free(r);
}

void soft_graph_urefs_release(struct CUgraph_st *g)
{
    for (size_t i = 0; i < g->nurefs; i++)
        release(g->urefs[i].o, g->urefs[i].count);
    free(g->urefs);
    g->urefs = NULL;
    g->nurefs = 0;
}

bool soft_graph_urefs_copy(struct CUgraph_st *dst, const struct CUgraph_st *src)
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

static CUresult graph_and_object(CUgraph graph, CUuserObject object, struct CUgraph_st **g,
                                 struct CUuserObject_st **o)
{
    SOFT_TRY(object_arg(object, o));
    if (!soft_handle_valid(graph, SOFT_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    *g = graph;
    return CUDA_SUCCESS;
}

/* Move: the graph takes count of the caller's references instead of new ones. */
SOFT_API CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                                  unsigned int flags)
{
    struct CUgraph_st *g;
    struct CUuserObject_st *o;
    SOFT_TRY(graph_and_object(graph, object, &g, &o));
    if (!count || count > INT32_MAX || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g->lock);
    size_t i = 0;
    while (i < g->nurefs && g->urefs[i].o != o)
        i++;
    CUresult r = CUDA_SUCCESS;
    if (i == g->nurefs) {
        struct soft_uref *v = realloc(g->urefs, (g->nurefs + 1) * sizeof *v);
        if (v) {
            g->urefs = v;
            v[g->nurefs++] = (struct soft_uref){ o, 0 };
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (r == CUDA_SUCCESS) {
        g->urefs[i].count += count;
        if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
            retain(o, count);
    }
    pthread_mutex_unlock(&g->lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
    struct CUgraph_st *g;
    struct CUuserObject_st *o;
    SOFT_TRY(graph_and_object(graph, object, &g, &o));
    if (!count || count > INT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g->lock);
    size_t i = 0;
    while (i < g->nurefs && g->urefs[i].o != o)
        i++;
    CUresult r = i < g->nurefs && g->urefs[i].count >= count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && (g->urefs[i].count -= count) == 0)
        g->urefs[i] = g->urefs[--g->nurefs];
    pthread_mutex_unlock(&g->lock);
    /* Outside the lock: the destructor may run. */
    if (r == CUDA_SUCCESS)
        release(o, count);
    return r;
}
