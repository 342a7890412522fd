/* Graphs on proxies, built node by node or by capture (see graph.h): the
 * nodes, their edges and their parameters live here; a node runs by making
 * the stream call it stands for on the launch stream. A graph on a proxy is
 * made while a proxy context is current, and its calls on handles that are
 * not ours go to the local driver. Graph memory nodes, external
 * semaphores and conditional nodes stay refused on proxies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/job.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/log.h"
#include "shim/module.h"
#include "shim/proxy.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol. */
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphKernelNodeSetParams
#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes
#undef cuGraphAddDependencies
#undef cuGraphRemoveDependencies
#undef cuGraphAddNode

/* One lock for every graph's structure: graphs change rarely and briefly.
 * Recursive: copying a child graph's node copies the child under it. */
static pthread_mutex_t graph_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

shim_graph *graph_new(int device, bool with_handle)
{
    shim_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->device = device;
    if (with_handle) {
        g->handle = arena_new(PROXY_GRAPH, device);
        if (!g->handle) {
            free(g);
            return NULL;
        }
        g->handle->u.graph.g = g;
    }
    return g;
}

void node_free_params(shim_node *nd)
{
    if (nd->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        free(nd->u.kernel.params);
        free(nd->u.kernel.ptrs);
        nd->u.kernel.params = NULL;
        nd->u.kernel.ptrs = NULL;
    } else if (nd->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        graph_free(nd->u.child.g);
        nd->u.child.g = NULL;
    } else if (nd->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
        free(nd->u.batch.ops);
        nd->u.batch.ops = NULL;
    } else if ((nd->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || nd->type == CU_GRAPH_NODE_TYPE_MEM_FREE) &&
               nd->u.gmem.m) {
        gmem_unref(nd->u.gmem.m);
        nd->u.gmem.m = NULL;
    }
}

static void node_free(shim_node *nd)
{
    node_free_params(nd);
    free(nd->attr);
    if (nd->handle)
        arena_free(nd->handle);
    free(nd->deps);
    free(nd);
}

void graph_free(shim_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    urefs_release(g->urefs, g->nurefs);
    if (g->handle)
        arena_free(g->handle);
    free(g);
}

shim_graph *graph_of(CUgraph h)
{
    proxy_obj *o = arena_get(h, PROXY_GRAPH);
    return o ? o->u.graph.g : NULL;
}

shim_node *node_of(CUgraphNode h)
{
    proxy_obj *o = arena_get(h, PROXY_GRAPH_NODE);
    return o ? o->u.gnode.n : NULL;
}

/* The kernelParams pointers of a kernel node, one per parameter. */
static CUresult kernel_ptrs(shim_node *nd)
{
    proxy_obj *f = nd->u.kernel.fn;
    uint32_t n = f->u.fn.param_count;
    nd->u.kernel.ptrs = calloc(n + 1, sizeof(void *));
    if (!nd->u.kernel.ptrs)
        return shim_nomem("the %u parameter pointers of a kernel node", n);
    for (uint32_t i = 0; i < n; i++)
        nd->u.kernel.ptrs[i] = nd->u.kernel.params + f->u.fn.params[i].offset;
    return CUDA_SUCCESS;
}

CUresult node_copy_params(shim_node *dst, const shim_node *src)
{
    dst->type = src->type;
    dst->u = src->u;
    if (src->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        dst->u.kernel.ptrs = NULL;
        dst->u.kernel.params = malloc(src->u.kernel.nbytes ? src->u.kernel.nbytes : 1);
        if (!dst->u.kernel.params)
            return shim_nomem("a kernel node's %u bytes of parameters", src->u.kernel.nbytes);
        memcpy(dst->u.kernel.params, src->u.kernel.params, src->u.kernel.nbytes);
        CUresult rc = kernel_ptrs(dst);
        if (rc) {
            free(dst->u.kernel.params);
            dst->u.kernel.params = NULL;
        }
        return rc;
    }
    if (src->type == CU_GRAPH_NODE_TYPE_GRAPH) {
        dst->u.child.g = graph_clone(src->u.child.g, false);
        return dst->u.child.g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (src->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || src->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        gmem_ref(src->u.gmem.m);
    if (src->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
        size_t n = src->u.batch.count * sizeof *src->u.batch.ops;
        if (!(dst->u.batch.ops = malloc(n ? n : 1)))
            return shim_nomem("a batch node's %zu bytes of operations", n);
        memcpy(dst->u.batch.ops, src->u.batch.ops, n);
    }
    return CUDA_SUCCESS;
}

CUresult node_copy_attrs(shim_node *nd, const CUlaunchAttributeValue *attr)
{
    if (!attr)
        return CUDA_SUCCESS;
    if (!nd->attr && !(nd->attr = malloc(SHIM_NODE_ATTRS * sizeof *attr)))
        return shim_nomem("a graph node's launch attributes");
    memcpy(nd->attr, attr, SHIM_NODE_ATTRS * sizeof *attr);
    return CUDA_SUCCESS;
}

CUresult node_kernel(shim_node *nd, proxy_obj *f, int device, const unsigned grid[3], const unsigned block[3],
                     unsigned shared, void **kernelParams, void **extra)
{
    CUresult rc = shim_function_ready(f, device);
    if (rc)
        return rc;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t *buf = malloc(f->u.fn.param_bytes ? f->u.fn.param_bytes : 1);
    if (!buf)
        return shim_nomem("a kernel node's %u bytes of parameters", (unsigned)f->u.fn.param_bytes);
    long n = launch_pack_params(f, kernelParams, extra, buf);
    if (n < 0) {
        free(buf);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_KERNEL;
    nd->u.kernel.fn = f;
    memcpy(nd->u.kernel.grid, grid, sizeof nd->u.kernel.grid);
    memcpy(nd->u.kernel.block, block, sizeof nd->u.kernel.block);
    nd->u.kernel.shared = shared;
    nd->u.kernel.params = buf;
    nd->u.kernel.nbytes = (uint32_t)n;
    return CUDA_SUCCESS;
}

static bool add_dep(shim_node *to, shim_node *from)
{
    for (size_t i = 0; i < to->ndeps; i++)
        if (to->deps[i] == from)
            return true;
    if (to->ndeps == to->capdeps) {
        size_t cap = to->capdeps ? 2 * to->capdeps : 4;
        shim_node **v = realloc(to->deps, cap * sizeof *v);
        if (!v)
            return false;
        to->deps = v;
        to->capdeps = cap;
    }
    to->deps[to->ndeps++] = from;
    return true;
}

/* Under graph_lock. */
static CUresult add_locked(shim_graph *g, const shim_node *tmpl, shim_node *const *deps, size_t ndeps, bool handle,
                           shim_node **out)
{
    for (size_t i = 0; i < ndeps; i++)
        if (!deps[i] || deps[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        shim_node **v = realloc(g->nodes, cap * sizeof *v);
        if (!v)
            return shim_nomem("a graph of %zu nodes", cap);
        g->nodes = v;
        g->cap = cap;
    }
    shim_node *nd = calloc(1, sizeof *nd);
    if (!nd)
        return shim_nomem("a graph node");
    CUresult rc = node_copy_params(nd, tmpl);
    if (rc) {
        free(nd);
        return rc;
    }
    nd->graph = g;
    nd->origin = tmpl->origin;
    if (node_copy_attrs(nd, tmpl->attr)) {
        node_free(nd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < ndeps; i++)
        if (!add_dep(nd, deps[i])) {
            node_free(nd);
            return shim_nomem("a graph node's %zu dependencies", ndeps);
        }
    if (handle) {
        nd->handle = arena_new(PROXY_GRAPH_NODE, g->device);
        if (!nd->handle) {
            node_free(nd);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        nd->handle->u.gnode.n = nd;
    }
    nd->index = g->n;
    g->nodes[g->n++] = nd;
    if (out)
        *out = nd;
    return CUDA_SUCCESS;
}

CUresult graph_add(shim_graph *g, const shim_node *tmpl, shim_node *const *deps, size_t ndeps, shim_node **out)
{
    pthread_mutex_lock(&graph_lock);
    CUresult rc = add_locked(g, tmpl, deps, ndeps, g->handle != NULL, out);
    pthread_mutex_unlock(&graph_lock);
    return rc;
}

static shim_graph *clone_locked(const shim_graph *g, bool with_handles)
{
    shim_graph *c = graph_new(g->device, with_handles);
    if (!c || !graph_urefs_copy(c, g)) {
        shim_nomem("a copy of a graph");
        goto out;
    }
    for (size_t i = 0; i < g->n; i++) {
        const shim_node *o = g->nodes[i];
        shim_node tmpl = *o;
        tmpl.origin = o;
        shim_node *nd;
        if (add_locked(c, &tmpl, NULL, 0, with_handles, &nd))
            goto out;   /* said why */
    }
    /* Edges by index: the copy's node i is the original's node i. */
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < g->nodes[i]->ndeps; k++)
            if (!add_dep(c->nodes[i], c->nodes[g->nodes[i]->deps[k]->index])) {
                shim_nomem("the dependencies of a copied graph's node %zu", i);
                goto out;
            }
    return c;
out:
    graph_free(c);
    return NULL;
}

shim_graph *graph_clone(const shim_graph *g, bool with_handles)
{
    pthread_mutex_lock(&graph_lock);
    shim_graph *c = clone_locked(g, with_handles);
    pthread_mutex_unlock(&graph_lock);
    return c;
}

shim_node **graph_order(const shim_graph *g, CUresult *rc)
{
    /* Kahn's order over the edges listed once by their source (a capture
     * may hold many thousands of nodes): a node goes once every node it
     * depends on went. */
    size_t n = g->n, edges = 0;
    for (size_t i = 0; i < n; i++)
        edges += g->nodes[i]->ndeps;
    shim_node **order = malloc((n + 1) * sizeof *order);
    size_t *waiting = calloc(n + 1, sizeof *waiting), *first = calloc(n + 2, sizeof *first);
    size_t *next = malloc((edges + 1) * sizeof *next);
    if (!order || !waiting || !first || !next) {
        free(order);
        free(waiting);
        free(first);
        free(next);
        *rc = shim_nomem("the launch order of a graph of %zu nodes", n);
        return NULL;
    }
    /* Dependents of node d: next[first[d] .. first[d + 1]). */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
            first[g->nodes[i]->deps[j]->index + 1]++;
    for (size_t i = 0; i < n; i++)
        first[i + 1] += first[i];
    size_t *fill = waiting;   /* reused as a cursor, then reset */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++) {
            size_t d = g->nodes[i]->deps[j]->index;
            next[first[d] + fill[d]++] = i;
        }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        waiting[i] = g->nodes[i]->ndeps;
        if (!waiting[i])
            order[k++] = g->nodes[i];
    }
    for (size_t done = 0; done < k; done++) {
        size_t d = order[done]->index;
        for (size_t e = first[d]; e < first[d + 1]; e++)
            if (--waiting[next[e]] == 0)
                order[k++] = g->nodes[next[e]];
    }
    free(waiting);
    free(first);
    free(next);
    if (k != n) {
        free(order);
        *rc = CUDA_ERROR_INVALID_VALUE;   /* a cycle */
        return NULL;
    }
    return order;
}

/* ---- running a node ---- */

static uint64_t copy_side(CUmemorytype type, const void *host, CUdeviceptr dev)
{
    return type == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)host : dev;
}

CUresult node_run(const shim_node *nd, proxy_obj *s)
{
    CUstream hs = (CUstream)s;
    switch (nd->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        size_t size = nd->u.kernel.nbytes;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, nd->u.kernel.params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        const unsigned *g = nd->u.kernel.grid, *b = nd->u.kernel.block;
        if (nd->attr) {
            CUlaunchAttribute a[SHIM_NODE_ATTRS];
            unsigned na = 0;
            for (unsigned id = 1; id < SHIM_NODE_ATTRS; id++)
                if (node_attr_id((CUlaunchAttributeID)id))
                    a[na++] = (CUlaunchAttribute){ .id = (CUlaunchAttributeID)id, .value = nd->attr[id] };
            CUlaunchConfig cfg = { .gridDimX = g[0], .gridDimY = g[1], .gridDimZ = g[2], .blockDimX = b[0],
                                   .blockDimY = b[1], .blockDimZ = b[2], .sharedMemBytes = nd->u.kernel.shared,
                                   .hStream = hs, .attrs = a, .numAttrs = na };
            return cuLaunchKernelEx(&cfg, (CUfunction)nd->u.kernel.fn, NULL, extra);
        }
        return cuLaunchKernel((CUfunction)nd->u.kernel.fn, g[0], g[1], g[2], b[0], b[1], b[2], nd->u.kernel.shared,
                              hs, NULL, extra);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        const CUDA_MEMCPY3D *c = &nd->u.copy;
        if (c->Height <= 1 && c->Depth <= 1) {
            uint64_t so = c->srcXInBytes + c->srcY * c->srcPitch, dof = c->dstXInBytes + c->dstY * c->dstPitch;
            return cuMemcpyAsync(copy_side(c->dstMemoryType, c->dstHost, c->dstDevice) + dof,
                                 copy_side(c->srcMemoryType, c->srcHost, c->srcDevice) + so, c->WidthInBytes, hs);
        }
        CUDA_MEMCPY2D k = { .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
                            .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcPitch = c->srcPitch,
                            .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
                            .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstPitch = c->dstPitch,
                            .WidthInBytes = c->WidthInBytes, .Height = c->Height };
        return cuMemcpy2DAsync(&k, hs);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS *m = &nd->u.set;
        switch (m->elementSize) {
        case 1: return cuMemsetD2D8Async(m->dst, m->pitch, (unsigned char)m->value, m->width, m->height, hs);
        case 2: return cuMemsetD2D16Async(m->dst, m->pitch, (unsigned short)m->value, m->width, m->height, hs);
        default: return cuMemsetD2D32Async(m->dst, m->pitch, m->value, m->width, m->height, hs);
        }
    }
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuLaunchHostFunc(hs, nd->u.host.fn, nd->u.host.userData);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuEventRecord((CUevent)nd->u.ev.event, hs);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuStreamWaitEvent(hs, (CUevent)nd->u.ev.event, 0);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return cuStreamBatchMemOp(hs, nd->u.batch.count, nd->u.batch.ops, 0);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        /* The memory is there already: only the count of what is in use moves. */
        gmem_run(nd->u.gmem.m, nd->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUresult rc;
        shim_node **order = graph_order(nd->u.child.g, &rc);
        if (!order)
            return rc;
        rc = CUDA_SUCCESS;
        for (size_t i = 0; i < nd->u.child.g->n && rc == CUDA_SUCCESS; i++)
            rc = node_run(order[i], s);
        free(order);
        return rc;
    }
    default:
        return CUDA_SUCCESS;   /* empty */
    }
}

/* ---- node parameters as the program gives them ---- */

/* The proxy device of a new graph or node: the graph's, else the current
 * context's. */
static int graph_device(shim_graph *g)
{
    if (g->device < 0) {
        proxy_obj *c = shim_proxy_current();
        g->device = c ? c->device : -1;
    }
    return g->device;
}

CUresult node_from_kernel(shim_node *nd, int dev, CUfunction func, CUkernel kern, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, void **params,
                          void **extra)
{
    proxy_obj *f = arena_get(func ? (const void *)func : (const void *)kern, PROXY_FUNCTION);
    if (!f)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0)
        dev = f->u.fn.module->device;
    if (dev < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    unsigned grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };
    for (int i = 0; i < 3; i++)
        if (!grid[i] || !block[i])
            return CUDA_ERROR_INVALID_VALUE;
    return node_kernel(nd, f, dev, grid, block, shared, params, extra);
}

CUresult node_from_memcpy(shim_node *nd, const CUDA_MEMCPY3D *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY || p->Depth > 1) {
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            shim_log(SHIM_LOG_ERROR, "a graph memcpy node with arrays or depth above 1 on %s: not supported",
                     shim_current_device_label());
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    nd->u.copy = *p;
    return CUDA_SUCCESS;
}

CUresult node_from_memset(shim_node *nd, const CUDA_MEMSET_NODE_PARAMS *p)
{
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width || !p->height)
        return CUDA_ERROR_INVALID_VALUE;
    if (shim_device_of_pointer(p->dst) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_MEMSET;
    nd->u.set = *p;
    return CUDA_SUCCESS;
}

/* The driver's own limit on one batch. */

CUresult node_from_batch(shim_node *nd, int dev, const CUstreamBatchMemOpParams *ops, unsigned count,
                         unsigned flags)
{
    if (flags || (count && !ops) || count > JOB_BATCH_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        const CUstreamBatchMemOpParams *p = &ops[i];
        switch (p->operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
            bool wide = p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 || p->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
            /* waitValue and writeValue share their address's place. */
            if (p->waitValue.address % (wide ? 8 : 4) || shim_device_of_pointer(p->waitValue.address) != dev)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        }
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        case CU_STREAM_MEM_OP_BARRIER:
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    CUstreamBatchMemOpParams *v = malloc(count ? count * sizeof *v : 1);
    if (!v)
        return shim_nomem("a batch node's %u operations", (unsigned)count);
    if (count)
        memcpy(v, ops, count * sizeof *v);
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    nd->u.batch.ops = v;
    nd->u.batch.count = count;
    return CUDA_SUCCESS;
}

/* Adds tmpl to the program's graph after its dependency handles. */
static CUresult add_node(CUgraphNode *out, shim_graph *g, const CUgraphNode *deps, size_t ndeps, shim_node *tmpl)
{
    if (!out || (ndeps && !deps)) {
        node_free_params(tmpl);
        return CUDA_ERROR_INVALID_VALUE;
    }
    shim_node **v = malloc((ndeps + 1) * sizeof *v);
    CUresult rc = v ? CUDA_SUCCESS : shim_nomem("a graph node's %zu dependencies", ndeps);
    for (size_t i = 0; i < ndeps && rc == CUDA_SUCCESS; i++)
        if (!(v[i] = node_of(deps[i])))
            rc = CUDA_ERROR_INVALID_VALUE;
    shim_node *nd = NULL;
    if (rc == CUDA_SUCCESS)
        rc = graph_add(g, tmpl, v, ndeps, &nd);
    free(v);
    node_free_params(tmpl);
    if (rc == CUDA_SUCCESS)
        *out = (CUgraphNode)nd->handle;
    return rc;
}

/* A graph call on handle h: ours, or the local driver's. */
#define GRAPH_OR_LOCAL(sym, h, g)                                               \
    shim_graph *g = graph_of(h);                                                \
    if (!g)                                                                     \
        return shim_is_proxy_handle(h) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(sym)
#define NODE_OR_LOCAL(sym, h, nd)                                               \
    shim_node *nd = node_of(h);                                                 \
    if (!nd)                                                                    \
        return shim_is_proxy_handle(h) ? CUDA_ERROR_INVALID_VALUE : SHIM_LOCAL(sym)

SHIM_EXPORT(cuGraphCreate)
{
    proxy_obj *c = shim_proxy_current();
    if (!c)
        return SHIM_LOCAL(cuGraphCreate);
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    shim_graph *g = graph_new(c->device, true);
    if (!g)
        return shim_nomem("a graph");
    *phGraph = (CUgraph)g->handle;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphDestroy)
{
    GRAPH_OR_LOCAL(cuGraphDestroy, hGraph, g);
    graph_free(g);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphAddKernelNode)
{
    GRAPH_OR_LOCAL(cuGraphAddKernelNode, hGraph, g);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, graph_device(g), nodeParams, NULL);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddKernelNode_v2)
{
    GRAPH_OR_LOCAL(cuGraphAddKernelNode_v2, hGraph, g);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, graph_device(g), nodeParams, nodeParams->kern);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddMemcpyNode)
{
    (void)ctx;
    GRAPH_OR_LOCAL(cuGraphAddMemcpyNode, hGraph, g);
    shim_node t;
    CUresult rc = node_from_memcpy(&t, (const CUDA_MEMCPY3D *)copyParams);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddMemsetNode)
{
    (void)ctx;
    GRAPH_OR_LOCAL(cuGraphAddMemsetNode, hGraph, g);
    shim_node t;
    CUresult rc = node_from_memset(&t, (const CUDA_MEMSET_NODE_PARAMS *)memsetParams);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddHostNode)
{
    GRAPH_OR_LOCAL(cuGraphAddHostNode, hGraph, g);
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_HOST, .u.host = *(const CUDA_HOST_NODE_PARAMS *)nodeParams };
    return add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddEmptyNode)
{
    GRAPH_OR_LOCAL(cuGraphAddEmptyNode, hGraph, g);
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_EMPTY };
    return add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

static CUresult event_node(CUgraphNode *out, shim_graph *g, const CUgraphNode *deps, size_t n, CUevent event,
                           CUgraphNodeType type)
{
    proxy_obj *e = arena_get(event, PROXY_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t = { .type = type, .u.ev.event = e };
    return add_node(out, g, deps, n, &t);
}

SHIM_EXPORT(cuGraphAddEventRecordNode)
{
    GRAPH_OR_LOCAL(cuGraphAddEventRecordNode, hGraph, g);
    return event_node(phGraphNode, g, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SHIM_EXPORT(cuGraphAddEventWaitNode)
{
    GRAPH_OR_LOCAL(cuGraphAddEventWaitNode, hGraph, g);
    return event_node(phGraphNode, g, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

SHIM_EXPORT(cuGraphAddChildGraphNode)
{
    GRAPH_OR_LOCAL(cuGraphAddChildGraphNode, hGraph, g);
    shim_graph *child = graph_of(childGraph);
    if (!child || child == g)
        return CUDA_ERROR_INVALID_VALUE;
    /* The node holds a copy: later changes to childGraph do not reach it. */
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .u.child.g = child };
    shim_node c = { 0 };
    CUresult rc = node_copy_params(&c, &t);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &c);
}

/* The proxy device a batch's words must be on: the graph's, else the
 * node params' context's, else the current one's. */
static int batch_device(shim_graph *g, CUcontext ctx)
{
    if (g && g->device >= 0)
        return g->device;
    proxy_obj *c = ctx ? arena_get(ctx, PROXY_CONTEXT) : NULL;
    return c ? c->device : graph_device(g);
}

SHIM_EXPORT(cuGraphAddBatchMemOpNode)
{
    GRAPH_OR_LOCAL(cuGraphAddBatchMemOpNode, hGraph, g);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = node_from_batch(&t, batch_device(g, nodeParams->ctx), nodeParams->paramArray, nodeParams->count,
                                  nodeParams->flags);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

/* ---- edges ---- */

/* True when a depends on b, directly or not (under graph_lock). */
static bool reaches(const shim_node *a, const shim_node *b, size_t depth)
{
    if (a == b || depth > 100000)
        return true;
    for (size_t i = 0; i < a->ndeps; i++)
        if (reaches(a->deps[i], b, depth + 1))
            return true;
    return false;
}

static CUresult edges_arg(shim_graph *g, const CUgraphNode *from, const CUgraphNode *to, size_t i, shim_node **a,
                          shim_node **b)
{
    *a = node_of(from[i]);
    *b = node_of(to[i]);
    return *a && *b && (*a)->graph == g && (*b)->graph == g && *a != *b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult edge_data_ok(const CUgraphEdgeData *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        if (e[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || e[i].from_port || e[i].to_port)
            return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

static CUresult add_edges(shim_graph *g, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        shim_node *a, *b;
        if ((rc = edges_arg(g, from, to, i, &a, &b)))
            break;
        if (reaches(a, b, 0))
            rc = CUDA_ERROR_INVALID_VALUE;   /* a cycle */
        else if (!add_dep(b, a))
            rc = shim_nomem("a graph edge");
    }
    pthread_mutex_unlock(&graph_lock);
    return rc;
}

static CUresult remove_edges(shim_graph *g, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        shim_node *a, *b;
        if ((rc = edges_arg(g, from, to, i, &a, &b)))
            break;
        size_t k = 0;
        while (k < b->ndeps && b->deps[k] != a)
            k++;
        if (k == b->ndeps) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        memmove(b->deps + k, b->deps + k + 1, (b->ndeps - k - 1) * sizeof *b->deps);
        b->ndeps--;
    }
    pthread_mutex_unlock(&graph_lock);
    return rc;
}

SHIM_EXPORT(cuGraphAddDependencies)
{
    GRAPH_OR_LOCAL(cuGraphAddDependencies, hGraph, g);
    return add_edges(g, from, to, numDependencies);
}

SHIM_EXPORT(cuGraphAddDependencies_v2)
{
    GRAPH_OR_LOCAL(cuGraphAddDependencies_v2, hGraph, g);
    CUresult rc = edge_data_ok(edgeData, numDependencies);
    return rc ? rc : add_edges(g, from, to, numDependencies);
}

SHIM_EXPORT(cuGraphRemoveDependencies)
{
    GRAPH_OR_LOCAL(cuGraphRemoveDependencies, hGraph, g);
    return remove_edges(g, from, to, numDependencies);
}

SHIM_EXPORT(cuGraphRemoveDependencies_v2)
{
    GRAPH_OR_LOCAL(cuGraphRemoveDependencies_v2, hGraph, g);
    CUresult rc = edge_data_ok(edgeData, numDependencies);
    return rc ? rc : remove_edges(g, from, to, numDependencies);
}

/* Puts up to *count node handles (a NULL list: only the count) and the
 * full count in *count, as the driver's list calls do. */
static void list_put(CUgraphNode *out, size_t *count, size_t k, shim_node *nd)
{
    if (out && k < *count)
        out[k] = (CUgraphNode)nd->handle;
}

static CUresult list_nodes(shim_graph *g, CUgraphNode *out, size_t *count, bool roots)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < g->n; i++)
        if (!roots || !g->nodes[i]->ndeps)
            list_put(out, count, k++, g->nodes[i]);
    pthread_mutex_unlock(&graph_lock);
    *count = out && k > *count ? *count : k;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphGetNodes)
{
    GRAPH_OR_LOCAL(cuGraphGetNodes, hGraph, g);
    return list_nodes(g, nodes, numNodes, false);
}

SHIM_EXPORT(cuGraphGetRootNodes)
{
    GRAPH_OR_LOCAL(cuGraphGetRootNodes, hGraph, g);
    return list_nodes(g, rootNodes, numRootNodes, true);
}

static CUresult list_edges(shim_graph *g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *count)
{
    if (!count || (!from) != (!to))
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++, k++)
            if (from && k < *count) {
                from[k] = (CUgraphNode)g->nodes[i]->deps[j]->handle;
                to[k] = (CUgraphNode)g->nodes[i]->handle;
                if (data)
                    memset(&data[k], 0, sizeof data[k]);
            }
    pthread_mutex_unlock(&graph_lock);
    *count = from && k > *count ? *count : k;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphGetEdges)
{
    GRAPH_OR_LOCAL(cuGraphGetEdges, hGraph, g);
    return list_edges(g, from, to, NULL, numEdges);
}

SHIM_EXPORT(cuGraphGetEdges_v2)
{
    GRAPH_OR_LOCAL(cuGraphGetEdges_v2, hGraph, g);
    return list_edges(g, from, to, edgeData, numEdges);
}

SHIM_EXPORT(cuGraphNodeGetType)
{
    NODE_OR_LOCAL(cuGraphNodeGetType, hNode, nd);
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    *type = nd->type;
    return CUDA_SUCCESS;
}

static CUresult node_deps(shim_node *nd, CUgraphNode *out, CUgraphEdgeData *data, size_t *count, bool dependents)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    pthread_mutex_lock(&graph_lock);
    if (!dependents) {
        for (size_t i = 0; i < nd->ndeps; i++, k++)
            list_put(out, count, k, nd->deps[i]);
    } else {
        shim_graph *g = nd->graph;
        for (size_t i = 0; i < g->n; i++)
            for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
                if (g->nodes[i]->deps[j] == nd)
                    list_put(out, count, k++, g->nodes[i]);
    }
    pthread_mutex_unlock(&graph_lock);
    if (data && out)
        memset(data, 0, (k < *count ? k : *count) * sizeof *data);
    *count = out && k > *count ? *count : k;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphNodeGetDependencies)
{
    NODE_OR_LOCAL(cuGraphNodeGetDependencies, hNode, nd);
    return node_deps(nd, dependencies, NULL, numDependencies, false);
}

SHIM_EXPORT(cuGraphNodeGetDependencies_v2)
{
    NODE_OR_LOCAL(cuGraphNodeGetDependencies_v2, hNode, nd);
    return node_deps(nd, dependencies, edgeData, numDependencies, false);
}

SHIM_EXPORT(cuGraphNodeGetDependentNodes)
{
    NODE_OR_LOCAL(cuGraphNodeGetDependentNodes, hNode, nd);
    return node_deps(nd, dependentNodes, NULL, numDependentNodes, true);
}

SHIM_EXPORT(cuGraphNodeGetDependentNodes_v2)
{
    NODE_OR_LOCAL(cuGraphNodeGetDependentNodes_v2, hNode, nd);
    return node_deps(nd, dependentNodes, edgeData, numDependentNodes, true);
}

SHIM_EXPORT(cuGraphDestroyNode)
{
    NODE_OR_LOCAL(cuGraphDestroyNode, hNode, nd);
    shim_graph *g = nd->graph;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < g->n; i++) {
        shim_node *o = g->nodes[i];
        size_t k = 0;
        for (size_t j = 0; j < o->ndeps; j++)
            if (o->deps[j] != nd)
                o->deps[k++] = o->deps[j];
        o->ndeps = k;
    }
    memmove(g->nodes + nd->index, g->nodes + nd->index + 1, (g->n - nd->index - 1) * sizeof *g->nodes);
    g->n--;
    for (size_t i = nd->index; i < g->n; i++)
        g->nodes[i]->index = i;
    pthread_mutex_unlock(&graph_lock);
    node_free(nd);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphClone)
{
    GRAPH_OR_LOCAL(cuGraphClone, originalGraph, g);
    if (!phGraphClone)
        return CUDA_ERROR_INVALID_VALUE;
    shim_graph *c = graph_clone(g, true);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraphClone = (CUgraph)c->handle;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphNodeFindInClone)
{
    GRAPH_OR_LOCAL(cuGraphNodeFindInClone, hClonedGraph, g);
    shim_node *o = node_of(hOriginalNode);
    if (!phNode || !o)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&graph_lock);
    for (size_t i = 0; i < g->n; i++)
        if (g->nodes[i]->origin == o) {
            *phNode = (CUgraphNode)g->nodes[i]->handle;
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&graph_lock);
    return rc;
}

/* ---- node parameters ---- */

static void kernel_get(const shim_node *nd, CUfunction *func, unsigned *dims, unsigned *shared, void ***params,
                       void ***extra)
{
    *func = (CUfunction)nd->u.kernel.fn;
    for (int i = 0; i < 3; i++) {
        dims[i] = nd->u.kernel.grid[i];
        dims[3 + i] = nd->u.kernel.block[i];
    }
    *shared = nd->u.kernel.shared;
    *params = nd->u.kernel.ptrs;
    *extra = NULL;
}

#define KERNEL_GET(nd, p)                                                       \
    do {                                                                        \
        unsigned d_[6];                                                         \
        kernel_get(nd, &(p)->func, d_, &(p)->sharedMemBytes, &(p)->kernelParams, &(p)->extra); \
        (p)->gridDimX = d_[0], (p)->gridDimY = d_[1], (p)->gridDimZ = d_[2];     \
        (p)->blockDimX = d_[3], (p)->blockDimY = d_[4], (p)->blockDimZ = d_[5];  \
    } while (0)

/* Replaces nd's parameters by those of t (same type), under the lock. */
static CUresult node_replace(shim_node *nd, shim_node *t)
{
    if (t->type != nd->type) {
        node_free_params(t);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&graph_lock);
    shim_node old = *nd;
    CUresult rc = node_copy_params(nd, t);
    if (rc)
        nd->u = old.u;
    else
        node_free_params(&old);
    pthread_mutex_unlock(&graph_lock);
    node_free_params(t);
    return rc;
}

SHIM_EXPORT(cuGraphKernelNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphKernelNodeGetParams, hNode, nd);
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    KERNEL_GET(nd, nodeParams);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphKernelNodeGetParams_v2)
{
    NODE_OR_LOCAL(cuGraphKernelNodeGetParams_v2, hNode, nd);
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    memset(nodeParams, 0, sizeof *nodeParams);
    KERNEL_GET(nd, nodeParams);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphKernelNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphKernelNodeSetParams, hNode, nd);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, graph_device(nd->graph), nodeParams, NULL);
    return rc ? rc : node_replace(nd, &t);
}

SHIM_EXPORT(cuGraphKernelNodeSetParams_v2)
{
    NODE_OR_LOCAL(cuGraphKernelNodeSetParams_v2, hNode, nd);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = NODE_FROM_KERNEL(&t, graph_device(nd->graph), nodeParams, nodeParams->kern);
    return rc ? rc : node_replace(nd, &t);
}

SHIM_EXPORT(cuGraphMemcpyNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphMemcpyNodeGetParams, hNode, nd);
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_MEMCPY)
        return CUDA_ERROR_INVALID_VALUE;
    *(CUDA_MEMCPY3D *)nodeParams = nd->u.copy;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphMemcpyNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphMemcpyNodeSetParams, hNode, nd);
    shim_node t;
    CUresult rc = node_from_memcpy(&t, (const CUDA_MEMCPY3D *)nodeParams);
    return rc ? rc : node_replace(nd, &t);
}

SHIM_EXPORT(cuGraphMemsetNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphMemsetNodeGetParams, hNode, nd);
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_ERROR_INVALID_VALUE;
    *(CUDA_MEMSET_NODE_PARAMS *)nodeParams = nd->u.set;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphMemsetNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphMemsetNodeSetParams, hNode, nd);
    shim_node t;
    CUresult rc = node_from_memset(&t, (const CUDA_MEMSET_NODE_PARAMS *)nodeParams);
    return rc ? rc : node_replace(nd, &t);
}

SHIM_EXPORT(cuGraphHostNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphHostNodeGetParams, hNode, nd);
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    *(CUDA_HOST_NODE_PARAMS *)nodeParams = nd->u.host;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphHostNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphHostNodeSetParams, hNode, nd);
    if (!nodeParams || !nodeParams->fn)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_HOST, .u.host = *(const CUDA_HOST_NODE_PARAMS *)nodeParams };
    return node_replace(nd, &t);
}

SHIM_EXPORT(cuGraphAddMemAllocNode)
{
    GRAPH_OR_LOCAL(cuGraphAddMemAllocNode, hGraph, g);
    shim_node t;
    CUresult rc = node_from_mem_alloc(&t, graph_device(g), nodeParams);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphAddMemFreeNode)
{
    GRAPH_OR_LOCAL(cuGraphAddMemFreeNode, hGraph, g);
    shim_node t;
    CUresult rc = node_from_mem_free(&t, dptr);
    return rc ? rc : add_node(phGraphNode, g, dependencies, numDependencies, &t);
}

SHIM_EXPORT(cuGraphMemAllocNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphMemAllocNodeGetParams, hNode, nd);
    if (nd->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        return CUDA_ERROR_INVALID_VALUE;
    return gmem_params(nd->u.gmem.m, params_out);
}

SHIM_EXPORT(cuGraphMemFreeNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphMemFreeNodeGetParams, hNode, nd);
    if (!dptr_out || nd->type != CU_GRAPH_NODE_TYPE_MEM_FREE)
        return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = gmem_base(nd->u.gmem.m);
    return CUDA_SUCCESS;
}

/* The node's own array, valid until its parameters change or it goes. */
SHIM_EXPORT(cuGraphBatchMemOpNodeGetParams)
{
    NODE_OR_LOCAL(cuGraphBatchMemOpNodeGetParams, hNode, nd);
    if (!nodeParams_out || nd->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *c = shim_proxy_current();
    *nodeParams_out = (CUDA_BATCH_MEM_OP_NODE_PARAMS){ .ctx = c ? (CUcontext)c : NULL, .count = nd->u.batch.count,
                                                       .paramArray = nd->u.batch.ops };
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphBatchMemOpNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphBatchMemOpNodeSetParams, hNode, nd);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    shim_node t;
    CUresult rc = node_from_batch(&t, batch_device(nd->graph, nodeParams->ctx), nodeParams->paramArray,
                                  nodeParams->count, nodeParams->flags);
    return rc ? rc : node_replace(nd, &t);
}

static CUresult event_get(shim_node *nd, CUgraphNodeType type, CUevent *out)
{
    if (!out || nd->type != type)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUevent)nd->u.ev.event;
    return CUDA_SUCCESS;
}

static CUresult event_set(shim_node *nd, CUgraphNodeType type, CUevent event)
{
    proxy_obj *e = arena_get(event, PROXY_EVENT);
    if (!e || nd->type != type)
        return CUDA_ERROR_INVALID_VALUE;
    nd->u.ev.event = e;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphEventRecordNodeGetEvent)
{
    NODE_OR_LOCAL(cuGraphEventRecordNodeGetEvent, hNode, nd);
    return event_get(nd, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event_out);
}

SHIM_EXPORT(cuGraphEventRecordNodeSetEvent)
{
    NODE_OR_LOCAL(cuGraphEventRecordNodeSetEvent, hNode, nd);
    return event_set(nd, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}

SHIM_EXPORT(cuGraphEventWaitNodeGetEvent)
{
    NODE_OR_LOCAL(cuGraphEventWaitNodeGetEvent, hNode, nd);
    return event_get(nd, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event_out);
}

SHIM_EXPORT(cuGraphEventWaitNodeSetEvent)
{
    NODE_OR_LOCAL(cuGraphEventWaitNodeSetEvent, hNode, nd);
    return event_set(nd, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

SHIM_EXPORT(cuGraphChildGraphNodeGetGraph)
{
    NODE_OR_LOCAL(cuGraphChildGraphNodeGetGraph, hNode, nd);
    if (!phGraph || nd->type != CU_GRAPH_NODE_TYPE_GRAPH)
        return CUDA_ERROR_INVALID_VALUE;
    /* The node's own copy, given a handle when first asked for. */
    pthread_mutex_lock(&graph_lock);
    shim_graph *c = nd->u.child.g;
    CUresult rc = CUDA_SUCCESS;
    if (!c->handle) {
        shim_graph *h = clone_locked(c, true);
        if (!h) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            graph_free(c);
            nd->u.child.g = c = h;
        }
    }
    pthread_mutex_unlock(&graph_lock);
    if (rc == CUDA_SUCCESS)
        *phGraph = (CUgraph)c->handle;
    return rc;
}

/* ---- cuGraphDebugDotPrint: the graph in Graphviz's language, written to
 * path in the program's file system ---- */

static const char *type_name(CUgraphNodeType t)
{
    switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_HOST: return "host";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "graph";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return "batch mem op";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "mem alloc";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "mem free";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event record";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event wait";
    default: return "empty";
    }
}

static void dot_graph(FILE *f, const shim_graph *g, const char *prefix)
{
    for (size_t i = 0; i < g->n; i++) {
        const shim_node *nd = g->nodes[i];
        const char *name = nd->type == CU_GRAPH_NODE_TYPE_KERNEL && nd->u.kernel.fn->u.fn.name
                               ? nd->u.kernel.fn->u.fn.name
                               : "";
        fprintf(f, "  \"%s%zu\" [shape=box label=\"%s %zu\\n%s\"];\n", prefix, i, type_name(nd->type), i, name);
        for (size_t k = 0; k < nd->ndeps; k++)
            fprintf(f, "  \"%s%zu\" -> \"%s%zu\";\n", prefix, nd->deps[k]->index, prefix, i);
        if (nd->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            char sub[64];
            snprintf(sub, sizeof sub, "%s%zu_", prefix, i);
            dot_graph(f, nd->u.child.g, sub);
        }
    }
}

SHIM_EXPORT(cuGraphDebugDotPrint)
{
    (void)flags;
    GRAPH_OR_LOCAL(cuGraphDebugDotPrint, hGraph, g);
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "w");
    if (!f)
        return CUDA_ERROR_OPERATING_SYSTEM;
    fprintf(f, "digraph rig_graph {\n");
    pthread_mutex_lock(&graph_lock);
    dot_graph(f, g, "n");
    pthread_mutex_unlock(&graph_lock);
    fprintf(f, "}\n");
    return fclose(f) ? CUDA_ERROR_OPERATING_SYSTEM : CUDA_SUCCESS;
}

/* ---- the generic forms (CUgraphNodeParams) ---- */

CUresult node_from_params(shim_node *t, int dev, const CUgraphNodeParams *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    memset(t, 0, sizeof *t);
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return NODE_FROM_KERNEL(t, dev, &p->kernel, p->kernel.kern);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return p->memcpy.flags ? CUDA_ERROR_INVALID_VALUE : node_from_memcpy(t, &p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m = { .dst = p->memset.dst, .pitch = p->memset.pitch, .value = p->memset.value,
                                      .elementSize = p->memset.elementSize, .width = p->memset.width,
                                      .height = p->memset.height };
        return node_from_memset(t, &m);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
        if (!p->host.fn)
            return CUDA_ERROR_INVALID_VALUE;
        t->type = CU_GRAPH_NODE_TYPE_HOST;
        t->u.host.fn = p->host.fn;
        t->u.host.userData = p->host.userData;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        t->type = CU_GRAPH_NODE_TYPE_EMPTY;
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
        proxy_obj *c = p->memOp.ctx ? arena_get(p->memOp.ctx, PROXY_CONTEXT) : NULL;
        return node_from_batch(t, dev >= 0 ? dev : c ? c->device : -1, p->memOp.paramArray, p->memOp.count,
                               p->memOp.flags);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
        proxy_obj *e = arena_get(p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? p->eventRecord.event : p->eventWait.event,
                                 PROXY_EVENT);
        if (!e)
            return CUDA_ERROR_INVALID_VALUE;
        t->type = p->type;
        t->u.ev.event = e;
        return CUDA_SUCCESS;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        shim_graph *child = graph_of(p->graph.graph);
        if (!child || p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
            return CUDA_ERROR_INVALID_VALUE;
        /* The node's own copy (the caller frees t's params). */
        shim_node c = { .type = CU_GRAPH_NODE_TYPE_GRAPH, .u.child.g = child };
        return node_copy_params(t, &c);
    }
    default: {
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            shim_log(SHIM_LOG_ERROR, "a graph node of type %d on %s: not supported (semaphore and conditional "
                     "nodes, and memory nodes in this generic form, are not served on proxies)", (int)p->type,
                     shim_current_device_label());
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    }
}

static CUresult add_generic(CUgraphNode *out, shim_graph *g, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                            size_t n, CUgraphNodeParams *p)
{
    CUresult rc = edge_data_ok(edges, n);
    shim_node t;
    if (rc || (rc = node_from_params(&t, graph_device(g), p)))
        return rc;
    return add_node(out, g, deps, n, &t);
}

SHIM_EXPORT(cuGraphAddNode)
{
    GRAPH_OR_LOCAL(cuGraphAddNode, hGraph, g);
    return add_generic(phGraphNode, g, dependencies, NULL, numDependencies, nodeParams);
}

SHIM_EXPORT(cuGraphAddNode_v2)
{
    GRAPH_OR_LOCAL(cuGraphAddNode_v2, hGraph, g);
    return add_generic(phGraphNode, g, dependencies, dependencyData, numDependencies, nodeParams);
}

SHIM_EXPORT(cuGraphNodeSetParams)
{
    NODE_OR_LOCAL(cuGraphNodeSetParams, hNode, nd);
    shim_node t;
    CUresult rc = node_from_params(&t, graph_device(nd->graph), nodeParams);
    return rc ? rc : node_replace(nd, &t);
}
