/* Graph memory nodes on proxies: cuGraphAddMemAllocNode allocates on the
 * agent when the node is added (a round trip; the address is fixed then, as
 * the driver fixes it), and the memory stays allocated while any copy of the
 * node lives (graphs, clones, executable graphs), freed with the last one.
 * The allocation is "in use" from its alloc node until a free node, a
 * cuMemFree or a cuMemFreeAsync of it, counted when the launch hands those
 * nodes over (the program's order, not the device's); the graph memory
 * attributes count that: used bytes are those in use, reserved bytes those
 * the nodes hold. Nothing is cached beyond what nodes hold, so a trim has
 * nothing to give back. What differs from a GPU: an access after the free
 * node still reaches the memory, and stream-ordered allocation inside a
 * capture is still refused. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/graph.h"
#include "shim/log.h"
#include "shim/proxy.h"

struct shim_gmem {
    struct shim_gmem *next;
    int refs;                      /* node copies holding it, under lock */
    int device;
    uint64_t base, size;
    bool in_use;
    CUmemPoolProps props;
    CUmemAccessDesc *access;       /* the node's copy, for GetParams */
    size_t naccess;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_gmem *all;
static struct { uint64_t used, used_high, reserved, reserved_high; } stats[SHIM_DEVICES_MAX];

/* Under lock. */
static void set_in_use(struct shim_gmem *m, bool in_use)
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

void gmem_ref(struct shim_gmem *m)
{
    pthread_mutex_lock(&lock);
    m->refs++;
    pthread_mutex_unlock(&lock);
}

void gmem_unref(struct shim_gmem *m)
{
    pthread_mutex_lock(&lock);
    bool last = --m->refs == 0;
    if (last) {
        set_in_use(m, false);
        stats[m->device].reserved -= m->size;
        for (struct shim_gmem **p = &all; *p; p = &(*p)->next)
            if (*p == m) {
                *p = m->next;
                break;
            }
    }
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    /* Out of the list first: this free is a real one, after the work
     * handed over so far. */
    shim_mem_free_for_graph(m->base);
    free(m->access);
    free(m);
}

void gmem_run(const struct shim_gmem *m, bool alloc)
{
    pthread_mutex_lock(&lock);
    set_in_use((struct shim_gmem *)m, alloc);
    pthread_mutex_unlock(&lock);
}

bool gmem_free(uint64_t dptr)
{
    bool found = false;
    pthread_mutex_lock(&lock);
    for (struct shim_gmem *m = all; m && !found; m = m->next)
        if (m->base == dptr) {
            set_in_use(m, false);
            found = true;
        }
    pthread_mutex_unlock(&lock);
    return found;
}

/* The graph allocation at dptr with a reference taken, or NULL. */
static struct shim_gmem *find_ref(uint64_t dptr)
{
    pthread_mutex_lock(&lock);
    struct shim_gmem *m = all;
    while (m && m->base != dptr)
        m = m->next;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&lock);
    return m;
}

static CUresult alloc_arg(const CUDA_MEM_ALLOC_NODE_PARAMS *p, int dev)
{
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || p->poolProps.handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        (p->accessDescCount && !p->accessDescs) || p->accessDescCount > (size_t)shim_device_count())
        return CUDA_ERROR_INVALID_VALUE;
    if (p->poolProps.location.id != dev) {
        /* The allocation is made in the current context, the graph's. */
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            shim_log(SHIM_LOG_ERROR, "a graph memory node on device %d in a graph of %s: not supported",
                     p->poolProps.location.id, shim_current_device_label());
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    for (size_t i = 0; i < p->accessDescCount; i++)
        if (p->accessDescs[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult node_from_mem_alloc(shim_node *nd, int dev, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    CUresult rc = alloc_arg(p, dev);
    if (rc)
        return rc;
    proxy_obj *c = shim_proxy_current();
    if (!c || c->device != dev)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct shim_gmem *m = calloc(1, sizeof *m);
    if (!m || !(m->access = malloc((p->accessDescCount + 1) * sizeof *m->access))) {
        free(m);
        return shim_nomem("a graph memory allocation node");
    }
    if (p->accessDescCount)
        memcpy(m->access, p->accessDescs, p->accessDescCount * sizeof *m->access);
    m->naccess = p->accessDescCount;
    m->props = p->poolProps;
    m->device = dev;
    m->size = p->bytesize;
    m->refs = 1;   /* the template node's */
    CUdeviceptr d;
    if ((rc = shim_mem_alloc_for_graph(c, p->bytesize, &d))) {
        free(m->access);
        free(m);
        return rc;
    }
    m->base = d;
    pthread_mutex_lock(&lock);
    m->next = all;
    all = m;
    stats[dev].reserved += m->size;
    if (stats[dev].reserved > stats[dev].reserved_high)
        stats[dev].reserved_high = stats[dev].reserved;
    pthread_mutex_unlock(&lock);
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    nd->u.gmem.m = m;
    p->dptr = d;
    return CUDA_SUCCESS;
}

CUresult node_from_mem_free(shim_node *nd, CUdeviceptr dptr)
{
    struct shim_gmem *m = find_ref(dptr);
    if (!m)
        return CUDA_ERROR_INVALID_VALUE;   /* not a graph allocation */
    memset(nd, 0, sizeof *nd);
    nd->type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    nd->u.gmem.m = m;
    return CUDA_SUCCESS;
}

CUresult gmem_params(const struct shim_gmem *m, CUDA_MEM_ALLOC_NODE_PARAMS *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (CUDA_MEM_ALLOC_NODE_PARAMS){ .poolProps = m->props, .accessDescs = m->access,
                                         .accessDescCount = m->naccess, .bytesize = m->size, .dptr = m->base };
    return CUDA_SUCCESS;
}

uint64_t gmem_base(const struct shim_gmem *m)
{
    return m->base;
}

/* ---- the device's graph memory ---- */

static bool proxy_ordinal(CUdevice dev)
{
    shim_device *d = shim_initialized() && dev >= 0 && dev < SHIM_DEVICES_MAX ? shim_device_at(dev) : NULL;
    return d && d->proxy;
}

SHIM_EXPORT(cuDeviceGetGraphMemAttribute)
{
    if (!proxy_ordinal(device))
        return SHIM_LOCAL(cuDeviceGetGraphMemAttribute);
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = stats[device].used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = stats[device].used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = stats[device].reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = stats[device].reserved_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE; break;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Only the high watermarks can be set, and only to 0: back to the current value. */
SHIM_EXPORT(cuDeviceSetGraphMemAttribute)
{
    if (!proxy_ordinal(device))
        return SHIM_LOCAL(cuDeviceSetGraphMemAttribute);
    if (!value || *(const cuuint64_t *)value != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        stats[device].used_high = stats[device].used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        stats[device].reserved_high = stats[device].reserved;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return rc;
}

SHIM_EXPORT(cuDeviceGraphMemTrim)
{
    return proxy_ordinal(device) ? CUDA_SUCCESS : SHIM_LOCAL(cuDeviceGraphMemTrim);
}
