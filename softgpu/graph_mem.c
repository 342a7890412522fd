/* Graph memory nodes: cuGraphAddMemAllocNode fixes the allocation's address
 * when the node is added, as the driver does, and the memory stays mapped
 * while any copy of the node (graphs, clones, executable graphs, queued
 * launches) lives: an access the driver allows (between the alloc node and
 * the free) always works, one it does not may work too. The allocation is
 * "in use" from its alloc node's run until a free node runs or the program
 * frees it (cuMemFree, cuMemFreeAsync); that is what the graph memory
 * attributes count: used bytes are those in use, reserved bytes those the
 * nodes hold. Nothing is cached beyond what nodes hold, so a trim has
 * nothing to give back. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

struct soft_gmem {
    struct soft_gmem *next;
    int refs;                      /* ops holding it, under lock */
    int device;
    uint64_t base, size;
    bool in_use;
    CUmemPoolProps props;
    CUmemAccessDesc *access;       /* the node's copy, for GetParams */
    size_t naccess;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct soft_gmem *all;
static struct { uint64_t used, used_high, reserved, reserved_high; } stats[SOFT_MAX_DEVICES];

/* Under lock. */
static void set_in_use(struct soft_gmem *m, bool in_use)
{
    if (m->in_use == in_use)
        return;
    m->in_use = in_use;
    if (in_use) {
        stats[m->device].used += m->size;
        if (stats[m->device].used > stats[m->device].used_high)
            stats[m->device].used_high = stats[m->device].used;
    } else {
        stats[m->device].used -= m->size;
    }
}

static void unref(struct soft_gmem *m)
{
    pthread_mutex_lock(&lock);
    bool last = --m->refs == 0;
    if (last) {
        set_in_use(m, false);
        stats[m->device].reserved -= m->size;
        for (struct soft_gmem **p = &all; *p; p = &(*p)->next)
            if (*p == m) {
                *p = m->next;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    /* No context to wait for: the last holder is a graph, an executable
     * or a launch that has run. */
    if (soft_range_remove(m->base, NULL)) {
        soft_pages_free((void *)(uintptr_t)m->base, m->size);
        soft_device_unreserve(m->device, m->size);
    }
    free(m->access);
    free(m);
}

bool soft_gmem_free(uint64_t dptr)
{
    bool found = false;
    pthread_mutex_lock(&lock);
    for (struct soft_gmem *m = all; m && !found; m = m->next)
        if (m->base == dptr) {
            set_in_use(m, false);
            found = true;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

static void run_alloc(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&lock);
    set_in_use(op->u.gmem.m, true);
    pthread_mutex_unlock(&lock);
}

static void run_free(soft_op *op, struct CUctx_st *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&lock);
    set_in_use(op->u.gmem.m, false);
    pthread_mutex_unlock(&lock);
}

static void drop_gmem(soft_op *op)
{
    unref(op->u.gmem.m);
}

static bool clone_gmem(soft_op *op)
{
    pthread_mutex_lock(&lock);
    op->u.gmem.m->refs++;
    pthread_mutex_unlock(&lock);
    return true;
}

/* An op of an alloc or free node holding m (a new reference). */
static soft_op *gmem_op(struct soft_gmem *m, bool alloc)
{
    soft_op *op = soft_op_new(alloc ? run_alloc : run_free);
    if (!op)
        return NULL;
    op->u.gmem.m = m;
    op->drop = drop_gmem;
    op->clone = clone_gmem;
    op->always = !alloc;   /* a free counts even after a fault */
    op->node_type = alloc ? CU_GRAPH_NODE_TYPE_MEM_ALLOC : CU_GRAPH_NODE_TYPE_MEM_FREE;
    clone_gmem(op);
    return op;
}

static CUresult alloc_arg(const CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->poolProps.location.id < 0 ||
        p->poolProps.location.id >= soft_device_count() || p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        (p->accessDescCount && !p->accessDescs) || p->accessDescCount > (size_t)soft_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < p->accessDescCount; i++)
        if (p->accessDescs[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            p->accessDescs[i].location.id < 0 || p->accessDescs[i].location.id >= soft_device_count())
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A new graph allocation of params p (checked), held once by the caller. */
static CUresult gmem_new(const CUDA_MEM_ALLOC_NODE_PARAMS *p, struct soft_gmem **out)
{
    struct soft_gmem *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int dev = p->poolProps.location.id;
    uint64_t size = (p->bytesize + 255) & ~(uint64_t)255;
    m->refs = 1;
    m->device = dev;
    m->size = size;
    m->props = p->poolProps;
    m->naccess = p->accessDescCount;
    m->access = malloc((m->naccess + 1) * sizeof *m->access);
    if (!m->access) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (m->naccess)
        memcpy(m->access, p->accessDescs, m->naccess * sizeof *m->access);
    if (!soft_device_reserve(dev, size)) {
        free(m->access);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void *pages = soft_pages_alloc(size);
    soft_range r = { .base = (uint64_t)(uintptr_t)pages, .size = size, .kind = SOFT_MEM_DEVICE, .device = dev };
    if (!pages || soft_range_add(&r) != CUDA_SUCCESS) {
        if (pages)
            soft_pages_free(pages, size);
        soft_device_unreserve(dev, size);
        free(m->access);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->base = r.base;
    pthread_mutex_lock(&lock);
    m->next = all;
    all = m;
    stats[dev].reserved += size;
    if (stats[dev].reserved > stats[dev].reserved_high)
        stats[dev].reserved_high = stats[dev].reserved;
    pthread_mutex_unlock(&lock);
    *out = m;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode *dependencies, size_t numDependencies,
                                                 CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    SOFT_TRY(soft_check_init());
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(alloc_arg(nodeParams));
    struct soft_gmem *m;
    SOFT_TRY(gmem_new(nodeParams, &m));
    soft_op *op = gmem_op(m, true);
    unref(m);   /* the op's reference is the one that counts */
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SOFT_TRY(soft_graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEM_ALLOC,
                                 op));
    nodeParams->dptr = m->base;
    return CUDA_SUCCESS;
}

CUresult soft_gmem_capture_alloc(struct CUstream_st *s, size_t bytes, CUdeviceptr *dptr)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                    .location = { CU_MEM_LOCATION_TYPE_DEVICE, s->ctx->device } },
                                     .bytesize = bytes };
    struct soft_gmem *m;
    SOFT_TRY(gmem_new(&p, &m));
    soft_op *op = gmem_op(m, true);
    uint64_t base = m->base;
    unref(m);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SOFT_TRY(soft_stream_submit(s, op, NULL));
    *dptr = base;
    return CUDA_SUCCESS;
}

CUresult soft_gmem_capture_free(struct CUstream_st *s, CUdeviceptr dptr)
{
    pthread_mutex_lock(&lock);
    struct soft_gmem *m = all;
    while (m && m->base != dptr)
        m = m->next;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&lock);
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;   /* not a graph allocation */
    soft_op *op = gmem_op(m, false);
    unref(m);
    return op ? soft_stream_submit(s, op, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
}

SOFT_API CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                const CUgraphNode *dependencies, size_t numDependencies,
                                                CUdeviceptr dptr)
{
    SOFT_TRY(soft_check_init());
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op = NULL;
    bool found = false;
    pthread_mutex_lock(&lock);
    struct soft_gmem *m = all;
    while (m && m->base != dptr)
        m = m->next;
    if (m) {
        m->refs++;   /* held while the op is made */
        found = true;
    }
    pthread_mutex_unlock(&lock);
    if (!found)
        return CUDA_ERROR_INVALID_VALUE;   /* not a graph allocation */
    op = gmem_op(m, false);
    unref(m);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return soft_graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_MEM_FREE, op);
}

static CUresult node_of_type(CUgraphNode h, CUgraphNodeType type, struct soft_gmem **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphNode_st *nd = h;
    if (nd->type != type || !nd->op)
        return CUDA_ERROR_INVALID_VALUE;
    *out = nd->op->u.gmem.m;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    struct soft_gmem *m;
    SOFT_TRY(node_of_type(hNode, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &m));
    if (!params_out)
        return CUDA_ERROR_INVALID_VALUE;
    *params_out = (CUDA_MEM_ALLOC_NODE_PARAMS){ .poolProps = m->props, .accessDescs = m->access,
                                                .accessDescCount = m->naccess, .bytesize = m->size,
                                                .dptr = m->base };
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    struct soft_gmem *m;
    SOFT_TRY(node_of_type(hNode, CU_GRAPH_NODE_TYPE_MEM_FREE, &m));
    if (!dptr_out)
        return CUDA_ERROR_INVALID_VALUE;
    *dptr_out = m->base;
    return CUDA_SUCCESS;
}

static CUresult device_arg(CUdevice dev)
{
    SOFT_TRY(soft_check_init());
    return dev >= 0 && dev < soft_device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SOFT_API CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SOFT_TRY(device_arg(device));
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = stats[device].used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = stats[device].used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = stats[device].reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = stats[device].reserved_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Only the high watermarks can be set, and only to 0: back to the current value. */
SOFT_API CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SOFT_TRY(device_arg(device));
    if (!value || *(const cuuint64_t *)value != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        stats[device].used_high = stats[device].used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        stats[device].reserved_high = stats[device].reserved;
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    return device_arg(device);
}
