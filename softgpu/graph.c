/* Graphs: nodes that each hold the op a stream would run (a launch, a copy,
 * a fill, a host call) and the nodes they run after. Instantiating copies
 * every node's op, in an order that respects the dependencies, into an
 * executable graph; launching one queues a single op on the stream that
 * runs them all in that order on the stream's worker, so a launch orders
 * against the stream's other work as one kernel would. */
#include "softgpu/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What an executable graph runs: its nodes' ops in dependency order. A
 * launch holds the plan it was queued with, so changing a node (a new plan)
 * affects only later launches, as the driver promises. */
struct soft_plan {
    _Atomic int refs;
    size_t n;
    soft_op **ops;                 /* NULL for empty nodes */
    bool *off;                     /* disabled by cuGraphNodeSetEnabled (NULL: none) */
};

struct CUgraphExec_st {
    struct CUctx_st *ctx;
    pthread_mutex_t lock;          /* plan */
    struct soft_plan *plan;
    size_t n;
    struct CUgraphNode_st **from;  /* the graph node each op was made from */
    CUgraphNodeType *types;
};

struct CUgraph_st *soft_graph_new(void)
{
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->lock, NULL);
    if (!soft_handle_add(g, SOFT_GRAPH)) {
        pthread_mutex_destroy(&g->lock);
        free(g);
        return NULL;
    }
    return g;
}

void soft_graph_free(struct CUgraph_st *g)
{
    if (!g)
        return;
    soft_handle_remove(g);
    for (size_t i = 0; i < g->n; i++) {
        struct CUgraphNode_st *nd = g->nodes[i];
        soft_handle_remove(nd);
        if (nd->op)
            soft_op_free(nd->op);
        free(nd->deps);
        free(nd);
    }
    free(g->nodes);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static bool add_dep(struct CUgraphNode_st *nd, struct CUgraphNode_st *dep)
{
    for (size_t i = 0; i < nd->ndeps; i++)
        if (nd->deps[i] == dep)
            return true;
    if (nd->ndeps == nd->capdeps) {
        size_t cap = nd->capdeps ? nd->capdeps * 2 : 4;
        struct CUgraphNode_st **d = realloc(nd->deps, cap * sizeof *d);
        if (!d)
            return false;
        nd->deps = d;
        nd->capdeps = cap;
    }
    nd->deps[nd->ndeps++] = dep;
    return true;
}

CUresult soft_graph_add(struct CUgraph_st *g, CUgraphNodeType type, soft_op *op,
                        struct CUgraphNode_st *const *deps, size_t ndeps, struct CUgraphNode_st **out)
{
    soft_launch_to_graph(op);
    struct CUgraphNode_st *nd = calloc(1, sizeof *nd);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (!nd)
        goto fail;
    nd->graph = g;
    nd->type = type;
    for (size_t i = 0; i < ndeps; i++)
        if (!add_dep(nd, deps[i]))
            goto fail;
    pthread_mutex_lock(&g->lock);
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        struct CUgraphNode_st **v = realloc(g->nodes, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&g->lock);
            goto fail;
        }
        g->nodes = v;
        g->cap = cap;
    }
    if (!soft_handle_add(nd, SOFT_NODE)) {
        pthread_mutex_unlock(&g->lock);
        goto fail;
    }
    nd->op = op;
    nd->index = g->n;
    g->nodes[g->n++] = nd;
    pthread_mutex_unlock(&g->lock);
    if (out)
        *out = nd;
    return CUDA_SUCCESS;
fail:
    if (nd)
        free(nd->deps);
    free(nd);
    if (op)
        soft_op_free(op);
    return r;
}

/* ---- building ---- */

static CUresult graph_arg(CUgraph h, struct CUgraph_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    *out = h;
    return CUDA_SUCCESS;
}

/* Checks a dependency list: every node live and of graph g, none twice. */
static CUresult deps_arg(struct CUgraph_st *g, const CUgraphNode *deps, size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        if (!soft_handle_valid(deps[i], SOFT_NODE) || deps[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t n, CUgraphNodeType type,
                         soft_op *op)
{
    struct CUgraph_st *g;
    CUresult r = out ? graph_arg(h, &g) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = deps_arg(g, deps, n);
    if (r != CUDA_SUCCESS) {
        if (op)
            soft_op_free(op);
        return r;
    }
    return soft_graph_add(g, type, op, deps, n, out);
}

SOFT_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    struct CUgraph_st *g = soft_graph_new();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = g;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(hGraph, &g));
    soft_graph_free(g);
    return CUDA_SUCCESS;
}

static CUresult kernel_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t n, CUfunction func,
                            CUkernel kern, const unsigned grid[3], const unsigned block[3], unsigned shared,
                            void **params, void **extra)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op;
    SOFT_TRY(soft_launch_op(func ? (const void *)func : (const void *)kern, grid, block, shared, params, extra, &op));
    return add_node(out, h, deps, n, CU_GRAPH_NODE_TYPE_KERNEL, op);
}

#define KERNEL_GEOMETRY(p)                                                                         \
    const unsigned grid[3] = { (p)->gridDimX, (p)->gridDimY, (p)->gridDimZ };                      \
    const unsigned block[3] = { (p)->blockDimX, (p)->blockDimY, (p)->blockDimZ }

SOFT_API CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies, size_t numDependencies,
                                               const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    KERNEL_GEOMETRY(nodeParams);
    return kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams->func, NULL, grid, block,
                       nodeParams->sharedMemBytes, nodeParams->kernelParams, nodeParams->extra);
}

SOFT_API CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode *dependencies, size_t numDependencies,
                                                  const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    KERNEL_GEOMETRY(nodeParams);
    return kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams->func, nodeParams->kern, grid,
                       block, nodeParams->sharedMemBytes, nodeParams->kernelParams, nodeParams->extra);
}

SOFT_API CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies, size_t numDependencies,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    (void)ctx;
    if (!phGraphNode || !copyParams)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    soft_op *op;
    SOFT_TRY(soft_copy3d_op(copyParams, &op));
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMCPY, op);
}

SOFT_API CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies, size_t numDependencies,
                                               const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    (void)ctx;
    if (!phGraphNode || !memsetParams)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    soft_op *op;
    SOFT_TRY(soft_fill_op(memsetParams, &op));
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEMSET, op);
}

SOFT_API CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies, size_t numDependencies,
                                             const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    if (!phGraphNode || !nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    soft_op *op;
    SOFT_TRY(soft_host_op(nodeParams->fn, nodeParams->userData, &op));
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_HOST, op);
}

SOFT_API CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies, size_t numDependencies)
{
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EMPTY, NULL);
}

/* True when a depends on b, directly or not. */
static bool reaches(struct CUgraphNode_st *a, struct CUgraphNode_st *b, size_t depth)
{
    if (a == b)
        return true;
    if (depth > 100000)
        return true;   /* deeper than any graph here: call it a cycle */
    for (size_t i = 0; i < a->ndeps; i++)
        if (reaches(a->deps[i], b, depth + 1))
            return true;
    return false;
}

static CUresult add_dependencies(CUgraph h, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(h, &g));
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(deps_arg(g, from, n ? 1 : 0));
    for (size_t i = 0; i < n; i++) {
        if (!soft_handle_valid(from[i], SOFT_NODE) || from[i]->graph != g || !soft_handle_valid(to[i], SOFT_NODE) ||
            to[i]->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
        if (reaches(from[i], to[i], 0))
            return CUDA_ERROR_INVALID_VALUE;   /* a cycle */
        if (!add_dep(to[i], from[i]))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                 size_t numDependencies)
{
    return add_dependencies(hGraph, from, to, numDependencies);
}

SOFT_API CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                    const CUgraphEdgeData *edgeData, size_t numDependencies)
{
    if (edgeData)
        for (size_t i = 0; i < numDependencies; i++)
            if (edgeData[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edgeData[i].from_port || edgeData[i].to_port)
                return CUDA_ERROR_NOT_SUPPORTED;
    return add_dependencies(hGraph, from, to, numDependencies);
}

/* Fills out (up to *count) with the graph's nodes that pass keep, and sets
 * *count to how many there are (out NULL: only the count). */
static CUresult list_nodes(CUgraph h, CUgraphNode *out, size_t *count, bool roots)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(h, &g));
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++) {
        if (roots && g->nodes[i]->ndeps)
            continue;
        if (out && k < *count)
            out[k] = g->nodes[i];
        k++;
    }
    pthread_mutex_unlock(&g->lock);
    if (out && k > *count)
        k = *count;
    *count = k;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    return list_nodes(hGraph, nodes, numNodes, false);
}

SOFT_API CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    return list_nodes(hGraph, rootNodes, numRootNodes, true);
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    SOFT_TRY(soft_check_init());
    if (!type || !soft_handle_valid(hNode, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    *type = hNode->type;
    return CUDA_SUCCESS;
}

/* ---- instantiation and launch ---- */

static void plan_unref(struct soft_plan *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    for (size_t i = 0; i < p->n; i++)
        if (p->ops[i])
            soft_op_free(p->ops[i]);
    free(p->ops);
    free(p->off);
    free(p);
}

static struct soft_plan *plan_new(size_t n)
{
    struct soft_plan *p = calloc(1, sizeof *p);
    if (p && !(p->ops = calloc(n + 1, sizeof *p->ops))) {
        free(p);
        return NULL;
    }
    if (p) {
        atomic_init(&p->refs, 1);
        p->n = n;
    }
    return p;
}

/* A new plan keeps the nodes its predecessor had disabled. */
static bool plan_keep_off(struct soft_plan *p, const struct soft_plan *old)
{
    if (!old->off)
        return true;
    if (!(p->off = calloc(p->n + 1, sizeof *p->off)))
        return false;
    memcpy(p->off, old->off, p->n * sizeof *p->off);
    return true;
}

static void exec_free(struct CUgraphExec_st *x)
{
    plan_unref(x->plan);
    pthread_mutex_destroy(&x->lock);
    free(x->from);
    free(x->types);
    free(x);
}

/* A bytewise copy of op that owns what op owns; NULL when out of memory. */
static soft_op *op_copy(const soft_op *op)
{
    soft_op *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    *c = *op;
    c->next = NULL;
    c->deps = NULL;
    c->ndeps = 0;
    if (c->clone && !c->clone(c)) {
        free(c);
        return NULL;
    }
    return c;
}

/* Orders g's nodes so each follows its dependencies (depth first). */
static bool visit(struct CUgraphNode_st *nd, unsigned char *mark, struct CUgraphNode_st **order, size_t *k)
{
    if (mark[nd->index] == 2)
        return true;
    if (mark[nd->index] == 1)
        return false;   /* a cycle */
    mark[nd->index] = 1;
    for (size_t i = 0; i < nd->ndeps; i++)
        if (!visit(nd->deps[i], mark, order, k))
            return false;
    mark[nd->index] = 2;
    order[(*k)++] = nd;
    return true;
}

static CUresult instantiate(CUgraphExec *out, CUgraph h)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(h, &g));
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    struct CUgraphExec_st *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->ctx = c;
    pthread_mutex_init(&x->lock, NULL);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g->lock);
    size_t n = g->n;
    unsigned char *mark = calloc(n + 1, 1);
    x->plan = plan_new(n);
    x->from = calloc(n + 1, sizeof *x->from);
    x->types = calloc(n + 1, sizeof *x->types);
    if (mark && x->plan && x->from && x->types) {
        r = CUDA_SUCCESS;
        size_t k = 0;
        for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
            if (!visit(g->nodes[i], mark, x->from, &k))
                r = CUDA_ERROR_INVALID_VALUE;
        x->n = r == CUDA_SUCCESS ? n : 0;
        for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
            x->types[i] = x->from[i]->type;
            if (x->from[i]->op && !(x->plan->ops[i] = op_copy(x->from[i]->op)))
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&g->lock);
    free(mark);
    if (r == CUDA_SUCCESS && !soft_handle_add(x, SOFT_EXEC))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        exec_free(x);
        return r;
    }
    *out = x;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                      unsigned long long flags)
{
    /* Auto-free-on-launch, upload, device launch and priority change
     * nothing here; unknown bits are refused. */
    if (flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                      CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
        return CUDA_ERROR_INVALID_VALUE;
    return instantiate(phGraphExec, hGraph);
}

static CUresult instantiate_logged(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                   char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph);
}

SOFT_API CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                             char *logBuffer, size_t bufferSize)
{
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SOFT_API CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                                char *logBuffer, size_t bufferSize)
{
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    p->hErrNode_out = NULL;
    CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph, p->flags);
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

SOFT_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                            CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams);
}

SOFT_API CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(hGraphExec, SOFT_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    soft_handle_remove(hGraphExec);
    exec_free(hGraphExec);   /* launches still queued hold their plan */
    return CUDA_SUCCESS;
}

/* The graph's nodes, in order, on the stream's worker; a node that fails
 * poisons the context and the rest do not run, as on a GPU. */
static void run_graph(soft_op *op, struct CUctx_st *ctx)
{
    struct soft_plan *p = op->u.graph.plan;
    for (size_t i = 0; i < p->n; i++) {
        soft_op *o = p->ops[i];
        if (p->off && p->off[i])
            continue;
        if (o && o->run && (o->always || soft_ctx_status(ctx) == CUDA_SUCCESS))
            o->run(o, ctx);
    }
}

static void drop_graph(soft_op *op)
{
    plan_unref(op->u.graph.plan);
}

static bool clone_graph(soft_op *op)
{
    atomic_fetch_add(&op->u.graph.plan->refs, 1);
    return true;
}

/* A queued launch of a graph holds its kernels' modules (children's too):
 * unloading one waits for it, not for the graphs that merely name it. */
static void plan_hold(const struct soft_plan *p, bool hold)
{
    for (size_t i = 0; i < p->n; i++) {
        const soft_op *o = p->ops[i];
        struct CUmod_st *m = soft_launch_module(o);
        if (m && hold)
            soft_module_hold(m);
        else if (m)
            soft_module_release(m);
        else if (o && o->run == run_graph)
            plan_hold(o->u.graph.plan, hold);
    }
}

static void drop_launched_graph(soft_op *op)
{
    plan_hold(op->u.graph.plan, false);
    plan_unref(op->u.graph.plan);
}

static bool clone_launched_graph(soft_op *op)
{
    atomic_fetch_add(&op->u.graph.plan->refs, 1);
    plan_hold(op->u.graph.plan, true);
    return true;
}

static CUresult graph_launch(CUgraphExec h, CUstream hs, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(hs, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    struct CUgraphExec_st *x = h;
    if (x->ctx != s->ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    soft_op *op = soft_op_new(run_graph);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&x->lock);
    op->u.graph.plan = x->plan;
    atomic_fetch_add(&x->plan->refs, 1);
    plan_hold(x->plan, true);
    pthread_mutex_unlock(&x->lock);
    op->drop = drop_launched_graph;
    op->clone = clone_launched_graph;
    return soft_stream_submit(s, op, NULL);
}

SOFT_API CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, false);
}

SOFT_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, true);
}

SOFT_API CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    (void)hStream;
    SOFT_TRY(soft_check_init());
    return soft_handle_valid(hGraphExec, SOFT_EXEC) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SOFT_API CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return cuGraphUpload(hGraphExec, hStream);
}

/* ---- changing an instantiated graph ---- */

static CUresult exec_kernel_set(CUgraphExec h, CUgraphNode node, CUfunction func, CUkernel kern,
                                const unsigned grid[3], const unsigned block[3], unsigned shared, void **params,
                                void **extra)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_EXEC) || !soft_handle_valid(node, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *x = h;
    size_t i = 0;
    while (i < x->n && x->from[i] != node)
        i++;
    if (i == x->n || x->types[i] != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op;
    SOFT_TRY(soft_launch_op(func ? (const void *)func : (const void *)kern, grid, block, shared, params, extra, &op));
    soft_launch_to_graph(op);
    /* A new plan: the others' ops copied, this one replaced. */
    pthread_mutex_lock(&x->lock);
    struct soft_plan *old = x->plan, *p = plan_new(x->n);
    CUresult r = p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t j = 0; j < x->n && r == CUDA_SUCCESS; j++) {
        if (j == i)
            p->ops[j] = op;
        else if (old->ops[j] && !(p->ops[j] = op_copy(old->ops[j])))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS && !plan_keep_off(p, old))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        x->plan = p;
    pthread_mutex_unlock(&x->lock);
    if (r != CUDA_SUCCESS) {
        if (!p || !p->ops[i])
            soft_op_free(op);
        plan_unref(p);
        return r;
    }
    plan_unref(old);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                         const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    KERNEL_GEOMETRY(nodeParams);
    return exec_kernel_set(hGraphExec, hNode, nodeParams->func, NULL, grid, block, nodeParams->sharedMemBytes,
                           nodeParams->kernelParams, nodeParams->extra);
}

SOFT_API CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                            const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    KERNEL_GEOMETRY(nodeParams);
    return exec_kernel_set(hGraphExec, hNode, nodeParams->func, nodeParams->kern, grid, block,
                           nodeParams->sharedMemBytes, nodeParams->kernelParams, nodeParams->extra);
}

/* ---- child graphs, event nodes, whole-graph updates ---- */

/* g's nodes' ops, copied in dependency order, as a plan (under no lock). */
static CUresult plan_of(struct CUgraph_st *g, struct soft_plan **out)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->n, k = 0;
    unsigned char *mark = calloc(n + 1, 1);
    struct CUgraphNode_st **order = calloc(n + 1, sizeof *order);
    struct soft_plan *p = plan_new(n);
    CUresult r = mark && order && p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        if (!visit(g->nodes[i], mark, order, &k))
            r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
        if (order[i]->op && !(p->ops[i] = op_copy(order[i]->op)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g->lock);
    free(mark);
    free(order);
    if (r != CUDA_SUCCESS) {
        plan_unref(p);
        return r;
    }
    *out = p;
    return CUDA_SUCCESS;
}

/* A child graph node runs a copy of the child taken when it was added, as
 * the driver's does (later changes to the child do not reach it). */
SOFT_API CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                   const CUgraphNode *dependencies, size_t numDependencies,
                                                   CUgraph childGraph)
{
    struct CUgraph_st *child;
    SOFT_TRY(graph_arg(childGraph, &child));
    if (childGraph == hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    struct soft_plan *p;
    SOFT_TRY(plan_of(child, &p));
    soft_op *op = soft_op_new(run_graph);
    if (!op) {
        plan_unref(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->u.graph.plan = p;
    op->drop = drop_graph;
    op->clone = clone_graph;
    return add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_GRAPH, op);
}

/* An event record node records when it runs: waits already queued on the
 * event's earlier record are not held back by it. */
static void run_event_record(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    struct CUevent_st *e = op->u.record.event;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_mutex_lock(&e->lock);
    e->completed = ++e->recorded;
    e->ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

/* An event wait node waits for the event's last record when it runs. */
static void run_event_wait(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    struct CUevent_st *e = op->u.record.event;
    pthread_mutex_lock(&e->lock);
    uint64_t seq = e->recorded;
    pthread_mutex_unlock(&e->lock);
    soft_event_wait(e, seq);
}

static void drop_event_node(soft_op *op)
{
    soft_event_unref(op->u.record.event);
}

static bool clone_event_node(soft_op *op)
{
    atomic_fetch_add(&op->u.record.event->refs, 1);
    return true;
}

static CUresult event_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t n, CUevent event,
                           CUgraphNodeType type)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(event, SOFT_EVENT))
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op = soft_op_new(type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? run_event_record : run_event_wait);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->always = type == CU_GRAPH_NODE_TYPE_EVENT_RECORD;   /* an event never stays pending */
    op->drop = drop_event_node;
    op->clone = clone_event_node;
    atomic_fetch_add(&event->refs, 1);
    op->u.record.event = event;
    return add_node(out, h, deps, n, type, op);
}

SOFT_API CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                    const CUgraphNode *dependencies, size_t numDependencies,
                                                    CUevent event)
{
    return event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

SOFT_API CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode *dependencies, size_t numDependencies,
                                                  CUevent event)
{
    return event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* cuGraphExecUpdate: g must have the executable's shape (nodes made in the
 * same order with the same types and edges); its nodes' work replaces the
 * executable's in a new plan, and the executable's nodes stay paired with
 * the graph it was made from. */
static CUresult exec_update(CUgraphExec h, CUgraph hg, CUgraphNode *bad_node, CUgraphExecUpdateResult *why)
{
    *bad_node = NULL;
    *why = CU_GRAPH_EXEC_UPDATE_ERROR;
    SOFT_TRY(soft_check_init());
    struct CUgraph_st *g;
    if (!soft_handle_valid(h, SOFT_EXEC))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(graph_arg(hg, &g));
    struct CUgraphExec_st *x = h;
    pthread_mutex_lock(&g->lock);
    CUresult r = CUDA_SUCCESS;
    if (g->n != x->n) {
        *why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    /* The executable's op i came from node from[i]; its partner in g is
     * g's node of the same index. */
    for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
        size_t idx = x->from[i]->index;
        struct CUgraphNode_st *a = x->from[i], *b = idx < g->n ? g->nodes[idx] : NULL;
        bool same = b && b->type == x->types[i] && a->ndeps == b->ndeps;
        for (size_t k = 0; same && k < a->ndeps; k++) {
            bool found = false;
            for (size_t m = 0; m < b->ndeps; m++)
                found |= b->deps[m]->index == a->deps[k]->index;
            same = found;
        }
        if (!same) {
            *bad_node = b;
            *why = b && b->type != x->types[i] ? CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED
                                               : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        }
    }
    struct soft_plan *p = r == CUDA_SUCCESS ? plan_new(x->n) : NULL;
    if (r == CUDA_SUCCESS && !p)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < x->n && r == CUDA_SUCCESS; i++) {
        soft_op *op = g->nodes[x->from[i]->index]->op;
        if (op && !(p->ops[i] = op_copy(op)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&g->lock);
    if (r != CUDA_SUCCESS) {
        plan_unref(p);
        return r;
    }
    pthread_mutex_lock(&x->lock);
    struct soft_plan *old = x->plan;
    bool kept = plan_keep_off(p, old);
    if (kept)
        x->plan = p;
    pthread_mutex_unlock(&x->lock);
    if (!kept) {
        plan_unref(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    plan_unref(old);
    *why = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                            CUgraphExecUpdateResult *updateResult_out)
{
    CUgraphNode bad;
    CUgraphExecUpdateResult why;
    CUresult r = exec_update(hGraphExec, hGraph, &bad, &why);
    if (hErrorNode_out)
        *hErrorNode_out = bad;
    if (updateResult_out)
        *updateResult_out = why;
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                               CUgraphExecUpdateResultInfo *resultInfo)
{
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphNode bad;
    CUgraphExecUpdateResult why;
    CUresult r = exec_update(hGraphExec, hGraph, &bad, &why);
    resultInfo->result = why;
    resultInfo->errorNode = bad;
    resultInfo->errorFromNode = NULL;
    return r;
}

/* ---- clones and the Graphviz picture ---- */

SOFT_API CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(originalGraph, &g));
    if (!phGraphClone)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *c = soft_graph_new();
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g->lock);
    /* Node i of the clone is the copy of node i; edges by index. */
    for (size_t i = 0; i < g->n && r == CUDA_SUCCESS; i++) {
        struct CUgraphNode_st *o = g->nodes[i], *nd;
        soft_op *op = NULL;
        if (o->op && !(op = op_copy(o->op)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else if ((r = soft_graph_add(c, o->type, op, NULL, 0, &nd)) == CUDA_SUCCESS)
            nd->origin = o;
    }
    for (size_t i = 0; i < g->n && r == CUDA_SUCCESS; i++)
        for (size_t k = 0; k < g->nodes[i]->ndeps && r == CUDA_SUCCESS; k++)
            if (!add_dep(c->nodes[i], c->nodes[g->nodes[i]->deps[k]->index]))
                r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g->lock);
    if (r != CUDA_SUCCESS) {
        soft_graph_free(c);
        return r;
    }
    *phGraphClone = c;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode, CUgraph hClonedGraph)
{
    struct CUgraph_st *c;
    SOFT_TRY(graph_arg(hClonedGraph, &c));
    if (!phNode || !soft_handle_valid(hOriginalNode, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i]->origin == hOriginalNode) {
            *phNode = c->nodes[i];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&c->lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    (void)flags;
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(hGraph, &g));
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "w");
    if (!f)
        return CUDA_ERROR_OPERATING_SYSTEM;
    static const char *const names[] = { "kernel", "memcpy", "memset", "host", "graph", "empty", "event wait",
                                         "event record" };
    fprintf(f, "digraph softgpu_graph {\n");
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++) {
        struct CUgraphNode_st *nd = g->nodes[i];
        unsigned t = (unsigned)nd->type;
        fprintf(f, "  n%zu [shape=box label=\"%s %zu\"];\n", i, t < 8 ? names[t] : "node", i);
        for (size_t k = 0; k < nd->ndeps; k++)
            fprintf(f, "  n%zu -> n%zu;\n", nd->deps[k]->index, i);
    }
    pthread_mutex_unlock(&g->lock);
    fprintf(f, "}\n");
    return fclose(f) ? CUDA_ERROR_OPERATING_SYSTEM : CUDA_SUCCESS;
}

/* ---- edges, node removal, parameters read back, enabling ---- */

static CUresult node_arg(CUgraphNode h, struct CUgraphNode_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    *out = h;
    return CUDA_SUCCESS;
}

/* Puts nd at out[k] when there is room; a NULL list only counts. */
static void put_node(CUgraphNode *out, CUgraphEdgeData *edges, size_t room, size_t k, struct CUgraphNode_st *nd)
{
    if (out && k < room) {
        out[k] = nd;
        if (edges)
            memset(&edges[k], 0, sizeof edges[k]);
    }
}

static CUresult node_neighbours(CUgraphNode h, CUgraphNode *out, CUgraphEdgeData *edges, size_t *count,
                                bool dependents)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(node_arg(h, &nd));
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraph_st *g = nd->graph;
    size_t k = 0;
    pthread_mutex_lock(&g->lock);
    if (!dependents) {
        for (size_t i = 0; i < nd->ndeps; i++)
            put_node(out, edges, *count, k++, nd->deps[i]);
    } else {
        for (size_t i = 0; i < g->n; i++)
            for (size_t j = 0; j < g->nodes[i]->ndeps; j++)
                if (g->nodes[i]->deps[j] == nd)
                    put_node(out, edges, *count, k++, g->nodes[i]);
    }
    pthread_mutex_unlock(&g->lock);
    *count = out && k > *count ? *count : k;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                                     size_t *numDependencies)
{
    return node_neighbours(hNode, dependencies, NULL, numDependencies, false);
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                                        CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    return node_neighbours(hNode, dependencies, edgeData, numDependencies, false);
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                       size_t *numDependentNodes)
{
    return node_neighbours(hNode, dependentNodes, NULL, numDependentNodes, true);
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode *dependentNodes,
                                                          CUgraphEdgeData *edgeData, size_t *numDependentNodes)
{
    return node_neighbours(hNode, dependentNodes, edgeData, numDependentNodes, true);
}

static CUresult edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *count)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(h, &g));
    if (!count || (!from) != (!to))
        return CUDA_ERROR_INVALID_VALUE;
    size_t k = 0;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j < g->nodes[i]->ndeps; j++, k++) {
            put_node(from, data, *count, k, g->nodes[i]->deps[j]);
            put_node(to, NULL, *count, k, g->nodes[i]);
        }
    pthread_mutex_unlock(&g->lock);
    *count = from && k > *count ? *count : k;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to, size_t *numEdges)
{
    return edges(hGraph, from, to, NULL, numEdges);
}

SOFT_API CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                             CUgraphEdgeData *edgeData, size_t *numEdges)
{
    return edges(hGraph, from, to, edgeData, numEdges);
}

static CUresult remove_dependencies(CUgraph h, const CUgraphNode *from, const CUgraphNode *to, size_t n)
{
    struct CUgraph_st *g;
    SOFT_TRY(graph_arg(h, &g));
    if (n && (!from || !to))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        if (!soft_handle_valid(from[i], SOFT_NODE) || !soft_handle_valid(to[i], SOFT_NODE) ||
            from[i]->graph != g || to[i]->graph != g) {
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        struct CUgraphNode_st *b = to[i];
        size_t k = 0;
        while (k < b->ndeps && b->deps[k] != from[i])
            k++;
        if (k == b->ndeps) {
            r = CUDA_ERROR_INVALID_VALUE;   /* no such edge */
            break;
        }
        memmove(b->deps + k, b->deps + k + 1, (b->ndeps - k - 1) * sizeof *b->deps);
        b->ndeps--;
    }
    pthread_mutex_unlock(&g->lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode *from, const CUgraphNode *to,
                                                    size_t numDependencies)
{
    return remove_dependencies(hGraph, from, to, numDependencies);
}

SOFT_API CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                                       const CUgraphNode *to, const CUgraphEdgeData *edgeData,
                                                       size_t numDependencies)
{
    if (edgeData)
        for (size_t i = 0; i < numDependencies; i++)
            if (edgeData[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || edgeData[i].from_port || edgeData[i].to_port)
                return CUDA_ERROR_NOT_SUPPORTED;
    return remove_dependencies(hGraph, from, to, numDependencies);
}

/* The node leaves its graph with its edges; executables made from the
 * graph keep their own copies. */
SOFT_API CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(node_arg(hNode, &nd));
    struct CUgraph_st *g = nd->graph;
    pthread_mutex_lock(&g->lock);
    for (size_t i = 0; i < g->n; i++) {
        struct CUgraphNode_st *o = g->nodes[i];
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
    pthread_mutex_unlock(&g->lock);
    soft_handle_remove(nd);
    if (nd->op)
        soft_op_free(nd->op);
    free(nd->deps);
    free(nd);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(node_arg(hNode, &nd));
    if (!nodeParams || nd->type != CU_GRAPH_NODE_TYPE_MEMSET || !nd->op)
        return CUDA_ERROR_INVALID_VALUE;
    const soft_op *op = nd->op;
    *nodeParams = (CUDA_MEMSET_NODE_PARAMS){ .dst = op->u.fill.dst, .pitch = op->u.fill.pitch,
                                             .value = op->u.fill.value, .elementSize = op->u.fill.elem,
                                             .width = op->u.fill.width, .height = op->u.fill.height };
    return CUDA_SUCCESS;
}

static CUresult node_event(CUgraphNode h, CUgraphNodeType type, CUevent *out)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(node_arg(h, &nd));
    if (!out || nd->type != type || !nd->op)
        return CUDA_ERROR_INVALID_VALUE;
    *out = nd->op->u.record.event;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    return node_event(hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event_out);
}

SOFT_API CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    return node_event(hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event_out);
}

/* A disabled kernel, memcpy or memset node runs as an empty one, from the
 * next launch on (a new plan; launches queued keep theirs). */
static CUresult node_enabled(CUgraphExec h, CUgraphNode node, unsigned *get, bool set)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_EXEC) || !soft_handle_valid(node, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st *x = h;
    size_t i = 0;
    while (i < x->n && x->from[i] != node)
        i++;
    if (i == x->n || (x->types[i] != CU_GRAPH_NODE_TYPE_KERNEL && x->types[i] != CU_GRAPH_NODE_TYPE_MEMCPY &&
                      x->types[i] != CU_GRAPH_NODE_TYPE_MEMSET))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&x->lock);
    struct soft_plan *old = x->plan;
    if (get) {
        *get = !(old->off && old->off[i]);
        pthread_mutex_unlock(&x->lock);
        return CUDA_SUCCESS;
    }
    struct soft_plan *p = plan_new(x->n);
    CUresult r = p && (p->off = calloc(x->n + 1, sizeof *p->off)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t j = 0; j < x->n && r == CUDA_SUCCESS; j++) {
        p->off[j] = old->off && old->off[j];
        if (old->ops[j] && !(p->ops[j] = op_copy(old->ops[j])))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        p->off[i] = !set;
        x->plan = p;
    }
    pthread_mutex_unlock(&x->lock);
    plan_unref(r == CUDA_SUCCESS ? old : p);
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
    return node_enabled(hGraphExec, hNode, NULL, isEnabled != 0);
}

SOFT_API CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
    if (!isEnabled)
        return CUDA_ERROR_INVALID_VALUE;
    return node_enabled(hGraphExec, hNode, isEnabled, false);
}
