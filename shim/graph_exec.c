/* Executable graphs on proxies (graph.h): instantiating copies the graph
 * and orders its nodes. When every node runs on the device alone (kernels,
 * fills, copies within the device, event records and waits, empty and
 * batch memory ops, child graph nodes), the agent's driver gets the graph once (JOB_OP_GRAPH,
 * a round trip at instantiation and after a change) and each launch is one
 * record (JOB_OP_GRAPH_LAUNCH): a real graph launch on the agent's GPU.
 * Otherwise (host nodes, copies touching the program's memory) a launch
 * makes each node's stream call on the launch stream, in dependency order
 * (handovers, no round trip), so host functions run in the program and its
 * memory is read and written at each launch; those nodes run one after
 * another. A launch into a capturing stream adds the graph as a child graph
 * node. */
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/log.h"

#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol. */
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuGraphExecKernelNodeSetParams
#undef cuGraphInstantiateWithParams
#undef cuGraphUpload
#undef cuGraphLaunch

struct shim_exec {
    proxy_obj *handle;
    int device;
    unsigned long long flags;
    pthread_mutex_t lock;          /* launches against changes */
    shim_graph *g;                 /* the copy; its node i pairs with the original's node i */
    shim_node **order;             /* g's nodes in dependency order */
    bool *disabled;                /* by node index (cuGraphNodeSetEnabled) */
    bool remote;                   /* the agent holds it (id: the handle's) */
    bool stale;                    /* changed since the agent got it */
    bool agent_refused;            /* the agent's driver could not build it: replay */
    proxy_obj **records;           /* events its launches record (agent's copy) */
    size_t nrecords;
    proxy_obj **streams;           /* streams it was launched on: its user objects outlive those launches */
    size_t nstreams;
};

static void remote_build(struct shim_exec *x);

struct shim_exec *exec_of(CUgraphExec h)
{
    proxy_obj *o = arena_get(h, PROXY_GRAPH_EXEC);
    return o ? o->u.gexec.x : NULL;
}

/* Gives up x's user object references once its launches so far are done. */
static void exec_drop_urefs(struct shim_exec *x, shim_graph *g)
{
    urefs_release_after(g->urefs, g->nurefs, x->streams, x->nstreams);
    g->urefs = NULL;
    g->nurefs = 0;
}

static void exec_free(struct shim_exec *x)
{
    if (x->remote)
        link_drop(shim_device_at(x->device)->link, CUDA_OP_cuGraphExecDestroy, x->handle->id);
    if (x->g)
        exec_drop_urefs(x, x->g);
    free(x->streams);
    free(x->records);
    graph_free(x->g);
    free(x->order);
    free(x->disabled);
    if (x->handle)
        arena_free(x->handle);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

static CUresult instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags, CUgraphNode *error_node)
{
    shim_graph *g = graph_of(h);
    if (!out || !g)
        return CUDA_ERROR_INVALID_VALUE;
    if (error_node)
        *error_node = NULL;
    int device = g->device;
    if (device < 0) {
        proxy_obj *c = shim_proxy_current();
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        device = c->device;
    }
    struct shim_exec *x = calloc(1, sizeof *x);
    if (!x)
        return shim_nomem("an executable graph");
    pthread_mutex_init(&x->lock, NULL);
    x->device = device;
    x->flags = flags;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(x->g = graph_clone(g, false)))
        goto out;   /* said why */
    if (!(x->disabled = calloc(x->g->n + 1, sizeof *x->disabled))) {
        rc = shim_nomem("the switches of an executable graph of %zu nodes", x->g->n);
        goto out;
    }
    if (!(x->handle = arena_new(PROXY_GRAPH_EXEC, device)))
        goto out;   /* said why */
    x->handle->u.gexec.x = x;
    if (!(x->order = graph_order(x->g, &rc)))
        goto out;
    rc = CUDA_SUCCESS;
    /* Every node's device must be the graph's: a launch runs on one. */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < x->g->n; i++) {
        const shim_node *nd = x->g->nodes[i];
        if (nd->type == CU_GRAPH_NODE_TYPE_MEMSET && shim_device_of_pointer(nd->u.set.dst) != device) {
            rc = CUDA_ERROR_INVALID_VALUE;
            if (error_node)
                *error_node = (CUgraphNode)g->nodes[i]->handle;
        }
    }
    if (rc)
        goto out;
    remote_build(x);
    *out = (CUgraphExec)x->handle;
    return CUDA_SUCCESS;
out:
    exec_free(x);
    return rc;
}

/* Flags that change nothing here (upload, auto-free, priorities, device
 * launch needs device-side graphs: refused). */
#define KNOWN_FLAGS                                                                                        \
    ((unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | \
                          CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))

#define INSTANTIATE_LOGGED(sym)                                                 \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!graph_of(hGraph))                                                  \
            return shim_is_proxy_handle(hGraph) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(sym); \
        if (logBuffer && bufferSize)                                            \
            logBuffer[0] = 0;                                                   \
        return instantiate(phGraphExec, hGraph, 0, phErrorNode);                \
    }

INSTANTIATE_LOGGED(cuGraphInstantiate)
INSTANTIATE_LOGGED(cuGraphInstantiate_v2)

SHIM_EXPORT(cuGraphInstantiateWithFlags)
{
    if (!graph_of(hGraph))
        return shim_is_proxy_handle(hGraph) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuGraphInstantiateWithFlags);
    if (flags & ~KNOWN_FLAGS)
        return CUDA_ERROR_INVALID_VALUE;
    return instantiate(phGraphExec, hGraph, flags, NULL);
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph h, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    p->hErrNode_out = NULL;
    CUresult rc = (p->flags & ~KNOWN_FLAGS) ? CUDA_ERROR_INVALID_VALUE : instantiate(out, h, p->flags, &p->hErrNode_out);
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                    : p->hErrNode_out  ? CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED
                                       : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

SHIM_EXPORT(cuGraphInstantiateWithParams)
{
    if (!graph_of(hGraph))
        return shim_is_proxy_handle(hGraph) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(cuGraphInstantiateWithParams);
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

SHIM_EXPORT(cuGraphInstantiateWithParams_ptsz)
{
    if (!graph_of(hGraph))
        return shim_is_proxy_handle(hGraph) ? CUDA_ERROR_INVALID_VALUE
                                            : SHIM_LOCAL(cuGraphInstantiateWithParams_ptsz);
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

#define EXEC_OR_LOCAL(sym, h, x)                                                \
    struct shim_exec *x = exec_of(h);                                           \
    if (!x)                                                                     \
        return shim_is_proxy_handle(h) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(sym)

SHIM_EXPORT(cuGraphExecDestroy)
{
    EXEC_OR_LOCAL(cuGraphExecDestroy, hGraphExec, x);
    /* Launches already handed over carry their own copies of what they
     * need (the records): nothing waits. */
    exec_free(x);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphExecGetFlags)
{
    EXEC_OR_LOCAL(cuGraphExecGetFlags, hGraphExec, x);
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = x->flags;
    return CUDA_SUCCESS;
}

/* Remembers a stream x is launched on (under x->lock). */
static CUresult note_stream(struct shim_exec *x, proxy_obj *s)
{
    for (size_t i = 0; i < x->nstreams; i++)
        if (x->streams[i] == s)
            return CUDA_SUCCESS;
    proxy_obj **v = realloc(x->streams, (x->nstreams + 1) * sizeof *v);
    if (!v)
        return shim_nomem("the streams an executable graph was launched on");
    x->streams = v;
    v[x->nstreams++] = s;
    return CUDA_SUCCESS;
}

static CUresult launch(struct shim_exec *x, proxy_obj *s)
{
    if (s->device != x->device)
        return CUDA_ERROR_INVALID_VALUE;
    bool captured;
    CUresult rc = capture_check(s, &captured);
    if (rc)
        return rc;
    pthread_mutex_lock(&x->lock);
    if (!captured && x->stale && !x->agent_refused)
        remote_build(x);
    if (!captured && x->g->nurefs && (rc = note_stream(x, s))) {
        pthread_mutex_unlock(&x->lock);
        return rc;
    }
    if (captured) {
        shim_node t = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .u.child.g = x->g };
        rc = capture_add(s, &t);
    } else if (x->remote) {
        /* One record; the events it records are reached with it. */
        uint8_t body[rec_graph_launch_size];
        wire_writer w = wire_writer_init(body, sizeof body);
        rec_graph_launch_put(&w, &(rec_graph_launch){ .graph = x->handle->id });
        handover h = { .op = JOB_OP_GRAPH_LAUNCH, .stream = s, .body = body, .body_len = w.off };
        uint64_t value;
        /* The graph's kernels may read and write managed memory, as a launch's. */
        rc = shim_managed_before_launch(s->link, s);
        if (rc == CUDA_SUCCESS)
            rc = link_handover(s->link, &h, &value);
        if (rc == CUDA_SUCCESS)
            shim_managed_after_launch(s->link);
        for (size_t i = 0; rc == CUDA_SUCCESS && i < x->nrecords; i++) {
            proxy_obj *e = x->records[i];
            e->u.event.stream = s;
            __atomic_store_n(&e->u.event.value, value, __ATOMIC_RELEASE);
            e->u.event.recorded = true;
            capture_forget(e);
        }
    } else {
        for (size_t i = 0; i < x->g->n && rc == CUDA_SUCCESS; i++)
            if (!x->disabled[x->order[i]->index])
                rc = node_run(x->order[i], s);
    }
    pthread_mutex_unlock(&x->lock);
    return rc;
}

#define LAUNCH(sym, per_thread, hexec)                                          \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        EXEC_OR_LOCAL(sym, hexec, x);                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : CUDA_ERROR_INVALID_VALUE;                       \
        return launch(x, s);                                                    \
    }

LAUNCH(cuGraphLaunch, false, hGraph)
LAUNCH(cuGraphLaunch_ptsz, true, hGraphExec)

/* Nothing to upload ahead: a launch sends its records when it is made. */
#define UPLOAD(sym, per_thread, hexec)                                          \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        EXEC_OR_LOCAL(sym, hexec, x);                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : CUDA_ERROR_INVALID_VALUE;                       \
        return s->device == x->device ? link_status(s->link) : CUDA_ERROR_INVALID_VALUE; \
    }

UPLOAD(cuGraphUpload, false, hGraph)
UPLOAD(cuGraphUpload_ptsz, true, hGraphExec)

/* ---- changing an executable graph ---- */

/* The index in x of the node the program's original node h became. */
static CUresult exec_node(struct shim_exec *x, CUgraphNode h, size_t *index)
{
    proxy_obj *o = arena_get(h, PROXY_GRAPH_NODE);
    if (!o)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < x->g->n; i++)
        if (x->g->nodes[i]->origin == o->u.gnode.n) {
            *index = i;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Replaces the parameters of x's node paired with h by t's (same type);
 * launches made before keep what they handed over. */
static CUresult exec_set(struct shim_exec *x, CUgraphNode h, shim_node *t)
{
    size_t i;
    CUresult rc = exec_node(x, h, &i);
    pthread_mutex_lock(&x->lock);
    shim_node *nd = rc ? NULL : x->g->nodes[i];
    if (nd && nd->type != t->type)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        shim_node old = *nd;
        rc = node_copy_params(nd, t);
        if (rc)
            nd->u = old.u;
        else
            node_free_params(&old);
        x->stale = rc == CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&x->lock);
    node_free_params(t);
    return rc;
}

SHIM_EXPORT(cuGraphExecKernelNodeSetParams)
{
    EXEC_OR_LOCAL(cuGraphExecKernelNodeSetParams, hGraphExec, x);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, x->device, nodeParams, NULL);
    return rc ? rc : exec_set(x, hNode, &t);
}

SHIM_EXPORT(cuGraphExecKernelNodeSetParams_v2)
{
    EXEC_OR_LOCAL(cuGraphExecKernelNodeSetParams_v2, hGraphExec, x);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, x->device, nodeParams, nodeParams->kern);
    return rc ? rc : exec_set(x, hNode, &t);
}

SHIM_EXPORT(cuGraphExecMemcpyNodeSetParams)
{
    (void)ctx;
    EXEC_OR_LOCAL(cuGraphExecMemcpyNodeSetParams, hGraphExec, x);
    shim_node t;
    CUresult rc = node_from_memcpy(&t, (const CUDA_MEMCPY3D *)copyParams);
    return rc ? rc : exec_set(x, hNode, &t);
}

SHIM_EXPORT(cuGraphExecMemsetNodeSetParams)
{
    (void)ctx;
    EXEC_OR_LOCAL(cuGraphExecMemsetNodeSetParams, hGraphExec, x);
    shim_node t;
    CUresult rc = node_from_memset(&t, (const CUDA_MEMSET_NODE_PARAMS *)memsetParams);
    return rc ? rc : exec_set(x, hNode, &t);
}

SHIM_EXPORT(cuGraphExecHostNodeSetParams)
{
    EXEC_OR_LOCAL(cuGraphExecHostNodeSetParams, hGraphExec, x);
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_HOST, .u.host = *(const CUDA_HOST_NODE_PARAMS *)nodeParams };
    return exec_set(x, hNode, &t);
}

static CUresult exec_event(struct shim_exec *x, CUgraphNode h, CUevent event, CUgraphNodeType type)
{
    proxy_obj *e = arena_get(event, PROXY_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t = { .type = type, .u.ev.event = e };
    return exec_set(x, h, &t);
}

SHIM_EXPORT(cuGraphExecEventRecordNodeSetEvent)
{
    EXEC_OR_LOCAL(cuGraphExecEventRecordNodeSetEvent, hGraphExec, x);
    return exec_event(x, hNode, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SHIM_EXPORT(cuGraphExecEventWaitNodeSetEvent)
{
    EXEC_OR_LOCAL(cuGraphExecEventWaitNodeSetEvent, hGraphExec, x);
    return exec_event(x, hNode, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

SHIM_EXPORT(cuGraphExecBatchMemOpNodeSetParams)
{
    EXEC_OR_LOCAL(cuGraphExecBatchMemOpNodeSetParams, graphExec, x);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = node_from_batch(&t, x->device, nodeParams->paramArray, nodeParams->count, nodeParams->flags);
    return rc ? rc : exec_set(x, node, &t);
}

SHIM_EXPORT(cuGraphExecNodeSetParams)
{
    EXEC_OR_LOCAL(cuGraphExecNodeSetParams, hGraphExec, x);
    shim_node t;
    CUresult rc = node_from_params(&t, x->device, nodeParams);
    return rc ? rc : exec_set(x, hNode, &t);
}

SHIM_EXPORT(cuGraphExecChildGraphNodeSetParams)
{
    EXEC_OR_LOCAL(cuGraphExecChildGraphNodeSetParams, hGraphExec, x);
    CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .graph = { childGraph, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE } };
    shim_node t;
    CUresult rc = node_from_params(&t, x->device, &p);
    return rc ? rc : exec_set(x, hNode, &t);
}

/* Same shape: the same node count, types and edges by index (the driver
 * pairs nodes the same way when they were made in the same order). */
static bool same_topology(const shim_graph *a, const shim_graph *b, size_t *bad, CUgraphExecUpdateResult *why)
{
    if (a->n != b->n) {
        *bad = SIZE_MAX;
        *why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const shim_node *p = a->nodes[i], *q = b->nodes[i];
        *bad = i;
        if (p->type != q->type) {
            *why = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
            return false;
        }
        if (p->ndeps != q->ndeps) {
            *why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            return false;
        }
        for (size_t k = 0; k < p->ndeps; k++) {
            bool found = false;
            for (size_t j = 0; j < q->ndeps; j++)
                found |= q->deps[j]->index == p->deps[k]->index;
            if (!found) {
                *why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
                return false;
            }
        }
    }
    return true;
}

static CUresult update(struct shim_exec *x, CUgraph h, CUgraphNode *error_node, CUgraphExecUpdateResult *result)
{
    shim_graph *g = graph_of(h);
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    /* A copy first, so the change is all or nothing. */
    shim_graph *c = graph_clone(g, false);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t bad = SIZE_MAX;
    CUgraphExecUpdateResult why = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    pthread_mutex_lock(&x->lock);
    bool ok = same_topology(x->g, c, &bad, &why);
    if (ok) {
        /* The parameters move over; the nodes keep their pairing with the
         * graph the executable was made from. */
        for (size_t i = 0; i < c->n; i++) {
            shim_node *nd = x->g->nodes[i], *from = c->nodes[i];
            node_free_params(nd);
            nd->u = from->u;
            from->type = CU_GRAPH_NODE_TYPE_EMPTY;   /* its params now belong to nd */
        }
        /* The new source graph's user object references replace the old
         * ones, which the launches made so far keep. */
        exec_drop_urefs(x, x->g);
        x->g->urefs = c->urefs;
        x->g->nurefs = c->nurefs;
        c->urefs = NULL;
        c->nurefs = 0;
        x->stale = true;
    }
    pthread_mutex_unlock(&x->lock);
    graph_free(c);
    *result = why;
    *error_node = !ok && bad < g->n ? (CUgraphNode)g->nodes[bad]->handle : NULL;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

SHIM_EXPORT(cuGraphExecUpdate)
{
    EXEC_OR_LOCAL(cuGraphExecUpdate, hGraphExec, x);
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult r = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult rc = update(x, hGraph, &err, &r);
    if (hErrorNode_out)
        *hErrorNode_out = err;
    if (updateResult_out)
        *updateResult_out = r;
    return rc;
}

SHIM_EXPORT(cuGraphExecUpdate_v2)
{
    EXEC_OR_LOCAL(cuGraphExecUpdate_v2, hGraphExec, x);
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult r = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult rc = update(x, hGraph, &err, &r);
    resultInfo->result = r;
    resultInfo->errorNode = err;
    resultInfo->errorFromNode = NULL;
    return rc;
}

/* Disabled kernel, memcpy and memset nodes run as empty ones. */
static CUresult enable(struct shim_exec *x, CUgraphNode h, unsigned *get, unsigned set)
{
    size_t i;
    CUresult rc = exec_node(x, h, &i);
    if (rc)
        return rc;
    CUgraphNodeType t = x->g->nodes[i]->type;
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->lock);
    if (get) {
        *get = !x->disabled[i];
    } else {
        x->stale |= x->disabled[i] != !set;
        x->disabled[i] = !set;
    }
    pthread_mutex_unlock(&x->lock);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphNodeSetEnabled)
{
    EXEC_OR_LOCAL(cuGraphNodeSetEnabled, hGraphExec, x);
    return enable(x, hNode, NULL, isEnabled);
}

SHIM_EXPORT(cuGraphNodeGetEnabled)
{
    EXEC_OR_LOCAL(cuGraphNodeGetEnabled, hGraphExec, x);
    if (!isEnabled)
        return CUDA_ERROR_INVALID_VALUE;
    return enable(x, hNode, isEnabled, 0);
}

/* ---- the agent's copy ---- */

/* The graph as the agent builds it: nodes in dependency order, child graphs
 * inlined between an empty node standing for their start and one for
 * their end. */
typedef struct flat_node {
    const shim_node *nd;           /* NULL: an empty node of rig's */
    uint32_t type;
    uint32_t *deps;
    uint32_t ndeps;
} flat_node;

typedef struct flat {
    flat_node *v;
    size_t n, cap;
    bool ok;                       /* false: out of memory or a node only the shim can run */
    int device;
    agent_link *link;
} flat;

static uint32_t flat_push(flat *f, const shim_node *nd, uint32_t type, const uint32_t *deps, size_t ndeps)
{
    if (!f->ok)
        return 0;
    if (f->n == JOB_GRAPH_NODES_MAX) {
        f->ok = false;
        return 0;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 32;
        flat_node *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->ok = false;
            return 0;
        }
        f->v = v;
        f->cap = cap;
    }
    uint32_t *d = malloc((ndeps + 1) * sizeof *d);
    if (!d || ndeps > JOB_GRAPH_DEPS_MAX) {
        free(d);
        f->ok = false;
        return 0;
    }
    memcpy(d, deps, ndeps * sizeof *d);
    f->v[f->n] = (flat_node){ nd, type, d, (uint32_t)ndeps };
    return (uint32_t)f->n++;
}

static void flat_free(flat *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->v[i].deps);
    free(f->v);
}

static bool on_device(const flat *f, uint64_t p)
{
    return shim_device_of_pointer(p) == f->device;
}

/* True when the agent's driver can run nd by itself. */
static bool device_only(const flat *f, const shim_node *nd)
{
    switch (nd->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        /* The agent's copy has no attributes: a cooperative node is replayed. */
        return !nd->attr || !nd->attr[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return true;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return on_device(f, nd->u.set.dst);
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *c = &nd->u.copy;
        return c->srcMemoryType != CU_MEMORYTYPE_HOST && c->dstMemoryType != CU_MEMORYTYPE_HOST &&
               c->Depth <= 1 && on_device(f, c->srcDevice) && on_device(f, c->dstDevice);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return nd->u.ev.event->link == f->link;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return nd->u.batch.count <= JOB_GRAPH_BATCH_MAX;   /* words on the device (node_from_batch) */
    default:
        return false;   /* host nodes run in the program */
    }
}

/* Appends g's nodes after the nodes at entry; *end: an empty node after
 * all of them. disabled (top level only): nodes that run as empty ones. */
static void flatten(flat *f, const shim_graph *g, shim_node *const *order, const bool *disabled,
                    const uint32_t *entry, size_t nentry, uint32_t *end)
{
    CUresult rc;
    shim_node **own = order ? NULL : graph_order(g, &rc);
    uint32_t *at = calloc(g->n + 1, sizeof *at), *deps = calloc(g->n + nentry + 1, sizeof *deps);
    if ((!order && !own) || !at || !deps) {
        f->ok = false;
    } else {
        order = order ? order : own;
        for (size_t k = 0; k < g->n && f->ok; k++) {
            const shim_node *nd = order[k];
            size_t nd_deps = 0;
            if (!nd->ndeps && nentry) {   /* a top-level graph's roots have no entry */
                memcpy(deps, entry, nentry * sizeof *deps);
                nd_deps = nentry;
            }
            for (size_t i = 0; i < nd->ndeps; i++)
                deps[nd_deps++] = at[nd->deps[i]->index];
            if (nd->type == CU_GRAPH_NODE_TYPE_GRAPH) {
                flatten(f, nd->u.child.g, NULL, NULL, deps, nd_deps, &at[nd->index]);
                continue;
            }
            if (!device_only(f, nd)) {
                f->ok = false;
                break;
            }
            bool off = disabled && disabled[nd->index];
            at[nd->index] = flat_push(f, nd, off ? CU_GRAPH_NODE_TYPE_EMPTY : nd->type, deps, nd_deps);
        }
        *end = flat_push(f, NULL, CU_GRAPH_NODE_TYPE_EMPTY, at, g->n);
    }
    free(own);
    free(at);
    free(deps);
}

/* The request's bytes for f (malloc'd, *len); NULL when out of memory. */
static uint8_t *encode(const flat *f, uint64_t id, uint32_t device, size_t *len)
{
    size_t cap = 24;
    for (size_t i = 0; i < f->n; i++) {
        const flat_node *v = &f->v[i];
        cap += 8 + 4 * (size_t)v->ndeps + 48;
        if (v->type == CU_GRAPH_NODE_TYPE_KERNEL)
            cap += v->nd->u.kernel.nbytes;
        else if (v->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
            cap += (size_t)v->nd->u.batch.count * sizeof *v->nd->u.batch.ops;
    }
    uint8_t *buf = malloc(cap);
    if (!buf)
        return NULL;
    wire_writer w = wire_writer_init(buf, cap);
    wire_put_u32(&w, JOB_OP_GRAPH);
    wire_put_u64(&w, id);
    wire_put_u32(&w, device);
    wire_put_u32(&w, (uint32_t)f->n);
    for (size_t i = 0; i < f->n; i++) {
        const flat_node *v = &f->v[i];
        wire_put_u32(&w, v->type);
        wire_put_u32(&w, v->ndeps);
        for (uint32_t k = 0; k < v->ndeps; k++)
            wire_put_u32(&w, v->deps[k]);
        const shim_node *nd = v->nd;
        switch (v->type) {
        case CU_GRAPH_NODE_TYPE_KERNEL:
            wire_put_u64(&w, nd->u.kernel.fn->id);
            for (int k = 0; k < 3; k++)
                wire_put_u32(&w, nd->u.kernel.grid[k]);
            for (int k = 0; k < 3; k++)
                wire_put_u32(&w, nd->u.kernel.block[k]);
            wire_put_u32(&w, nd->u.kernel.shared);
            wire_put_u32(&w, nd->u.kernel.nbytes);
            wire_put_bytes(&w, nd->u.kernel.params, nd->u.kernel.nbytes);
            break;
        case CU_GRAPH_NODE_TYPE_MEMSET: {
            const CUDA_MEMSET_NODE_PARAMS *m = &nd->u.set;
            wire_put_u64(&w, m->dst);
            wire_put_u64(&w, m->pitch ? m->pitch : m->width * m->elementSize);
            wire_put_u32(&w, m->value);
            wire_put_u32(&w, m->elementSize);
            wire_put_u64(&w, m->width);
            wire_put_u64(&w, m->height);
            break;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY: {
            /* Offsets fold into the pointers. */
            const CUDA_MEMCPY3D *c = &nd->u.copy;
            size_t h = c->Height ? c->Height : 1;
            wire_put_u64(&w, c->dstDevice + c->dstXInBytes + c->dstY * c->dstPitch);
            wire_put_u64(&w, c->dstPitch ? c->dstPitch : c->WidthInBytes);
            wire_put_u64(&w, c->srcDevice + c->srcXInBytes + c->srcY * c->srcPitch);
            wire_put_u64(&w, c->srcPitch ? c->srcPitch : c->WidthInBytes);
            wire_put_u64(&w, c->WidthInBytes);
            wire_put_u64(&w, h);
            break;
        }
        case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
            wire_put_u64(&w, nd->u.ev.event->id);
            break;
        case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
            wire_put_u32(&w, nd->u.batch.count);
            wire_put_bytes(&w, nd->u.batch.ops, (size_t)nd->u.batch.count * sizeof *nd->u.batch.ops);
            break;
        default:
            break;
        }
    }
    if (w.err) {
        free(buf);
        return NULL;
    }
    *len = w.off;
    return buf;
}

/* Gives the agent its copy of x when every node can run there (under
 * x->lock, or before x is the program's): the old copy dropped, the new one
 * built by a request. Otherwise x is replayed node by node. */
static void remote_build(struct shim_exec *x)
{
    agent_link *l = shim_device_at(x->device)->link;
    if (x->remote)
        link_drop(l, CUDA_OP_cuGraphExecDestroy, x->handle->id);
    x->remote = false;
    x->stale = false;
    free(x->records);
    x->records = NULL;
    x->nrecords = 0;
    flat f = { .ok = true, .device = x->device, .link = l };
    uint32_t end;
    flatten(&f, x->g, x->order, x->disabled, NULL, 0, &end);
    size_t len = 0;
    uint8_t *body = f.ok ? encode(&f, x->handle->id, (uint32_t)shim_device_at(x->device)->remote_ordinal, &len) : NULL;
    size_t nrec = 0;
    for (size_t i = 0; body && i < f.n; i++)
        nrec += f.v[i].type == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    proxy_obj **records = body ? calloc(nrec + 1, sizeof *records) : NULL;
    if (f.ok && !records)   /* slower, not wrong */
        shim_log(SHIM_LOG_WARN, "no memory for the agent's copy of a graph of %zu nodes: replayed node by node", f.n);
    if (records) {
        for (size_t i = 0, k = 0; i < f.n; i++)
            if (f.v[i].type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
                records[k++] = f.v[i].nd->u.ev.event;
        struct iovec iov = { body, len };
        frame fr;
        const uint8_t *o;
        size_t n;
        CUresult rc = link_request(l, &iov, 1, &fr, &o, &n);
        if (rc == CUDA_SUCCESS) {
            shim_log(SHIM_LOG_DEBUG, "a graph of %zu nodes is the agent's on %s: one record a launch", f.n,
                     shim_device_at(x->device)->label);
            x->remote = true;
            x->records = records;
            x->nrecords = nrec;
            records = NULL;
        } else if (link_status(l) == CUDA_SUCCESS) {
            /* The agent's driver cannot: replayed node by node from now on. */
            x->agent_refused = true;
            shim_log(SHIM_LOG_INFO, "a graph on %s is replayed node by node: the agent's driver answered %d",
                     shim_device_at(x->device)->label, (int)rc);
        }
        frame_release(&fr);
    }
    free(records);
    free(body);
    flat_free(&f);
}
