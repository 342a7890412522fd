/* Executable graphs the controller built (shim/graph_exec.c): when every
 * node of a graph runs on the device alone (kernels, fills, device-to-
 * device copies, event records and waits, empty nodes), the shim sends its
 * nodes once and this agent's driver builds and instantiates the graph, so
 * that each launch is one cuGraphLaunch on the job's stream. The shim
 * keeps graphs with host nodes or the program's memory and replays those
 * node by node. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"

/* Adds the node the reader is at to g after deps; *node the new node. */
static CUresult add_node(job *j, int device, CUgraph g, uint32_t type, wire_reader *r, const CUgraphNode *deps,
                         size_t ndeps, CUgraphNode *node)
{
    const cuda_driver *d = &j->b->drv;
    CUcontext ctx = j->b->primary[device];
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        agent_obj *fn = objects_get(&j->objs, wire_get_u64(r), AOBJ_FUNCTION);
        uint32_t dims[7];
        for (int i = 0; i < 7; i++)
            dims[i] = wire_get_u32(r);
        uint32_t len = wire_get_u32(r);
        const uint8_t *bytes = len <= JOB_PARAMS_MAX ? wire_get_view(r, len) : NULL;
        if (r->err || !fn || (len && !bytes))
            return CUDA_ERROR_INVALID_VALUE;
        CUfunction f;
        CUresult rc = job_function_on(j, fn, device, &f);
        if (rc)
            return rc;
        /* The driver copies the parameter buffer when the node is made. */
        size_t size = len;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)bytes, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        CUDA_KERNEL_NODE_PARAMS p = { .func = f, .gridDimX = dims[0], .gridDimY = dims[1], .gridDimZ = dims[2],
                                      .blockDimX = dims[3], .blockDimY = dims[4], .blockDimZ = dims[5],
                                      .sharedMemBytes = dims[6], .extra = len ? extra : NULL };
        return d->fn_cuGraphAddKernelNode_v2(node, g, deps, ndeps, &p);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        /* One field at a time: the reads must go in wire order. */
        CUDA_MEMSET_NODE_PARAMS p = { 0 };
        p.dst = wire_get_u64(r);
        p.pitch = wire_get_u64(r);
        p.value = wire_get_u32(r);
        p.elementSize = wire_get_u32(r);
        p.width = wire_get_u64(r);
        p.height = wire_get_u64(r);
        if (r->err)
            return CUDA_ERROR_INVALID_VALUE;
        return d->fn_cuGraphAddMemsetNode(node, g, deps, ndeps, &p, ctx);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D p = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .Depth = 1 };
        p.dstDevice = wire_get_u64(r);
        p.dstPitch = wire_get_u64(r);
        p.srcDevice = wire_get_u64(r);
        p.srcPitch = wire_get_u64(r);
        p.WidthInBytes = wire_get_u64(r);
        p.Height = wire_get_u64(r);
        if (r->err)
            return CUDA_ERROR_INVALID_VALUE;
        return d->fn_cuGraphAddMemcpyNode(node, g, deps, ndeps, &p, ctx);
    }
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
        agent_obj *e = objects_get(&j->objs, wire_get_u64(r), AOBJ_EVENT);
        if (r->err || !e)
            return CUDA_ERROR_INVALID_VALUE;
        return type == CU_GRAPH_NODE_TYPE_EVENT_RECORD
                   ? d->fn_cuGraphAddEventRecordNode(node, g, deps, ndeps, e->u.event.real)
                   : d->fn_cuGraphAddEventWaitNode(node, g, deps, ndeps, e->u.event.real);
    }
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
        /* Device addresses, the same on both ends; copied out of the frame
         * for alignment (the driver copies them again). */
        uint32_t count = wire_get_u32(r);
        const uint8_t *bytes = count <= JOB_GRAPH_BATCH_MAX ? wire_get_view(r, (size_t)count * 48) : NULL;
        if (r->err || (count && !bytes))
            return CUDA_ERROR_INVALID_VALUE;
        if (!d->fn_cuGraphAddBatchMemOpNode)
            return CUDA_ERROR_NOT_SUPPORTED;   /* the shim replays the graph */
        CUstreamBatchMemOpParams *ops = malloc((size_t)count * sizeof *ops + 1);
        if (!ops) {
            job_log_nomem(j, "the %u operations of a graph's batch node", count);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (count)
            memcpy(ops, bytes, (size_t)count * sizeof *ops);
        CUDA_BATCH_MEM_OP_NODE_PARAMS p = { .ctx = ctx, .count = count, .paramArray = ops };
        CUresult rc = d->fn_cuGraphAddBatchMemOpNode(node, g, deps, ndeps, &p);
        free(ops);
        return rc;
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return d->fn_cuGraphAddEmptyNode(node, g, deps, ndeps);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

void replay_graph(job *j, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    uint64_t id = wire_get_u64(r);
    uint32_t device = wire_get_u32(r), n = wire_get_u32(r);
    if (r->err || device >= (uint32_t)j->b->device_count || n > JOB_GRAPH_NODES_MAX) {
        job_refuse(j, "malformed graph");
        return;
    }
    if (!d->fn_cuGraphCreate || !d->fn_cuGraphAddKernelNode_v2 || !d->fn_cuGraphInstantiateWithFlags ||
        !d->fn_cuGraphLaunch) {
        job_answer(j, CUDA_ERROR_NOT_SUPPORTED, NULL, 0);   /* the shim replays it node by node */
        return;
    }
    CUresult rc = job_use_device(j, (int)device);
    if (rc) {
        job_answer(j, rc, NULL, 0);
        return;
    }
    CUgraph g = NULL;
    CUgraphExec x = NULL;
    CUgraphNode *nodes = calloc((size_t)n + 1, sizeof *nodes);
    CUgraphNode *deps = NULL;
    bool malformed = false;
    if (!nodes)
        job_log_nomem(j, "the %u nodes of graph %llu", n, (unsigned long long)id);
    rc = nodes ? d->fn_cuGraphCreate(&g, 0) : CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        uint32_t type = wire_get_u32(r), nd = wire_get_u32(r);
        if (r->err || nd > JOB_GRAPH_DEPS_MAX || nd > i) {
            malformed = true;
            break;
        }
        free(deps);
        deps = calloc((size_t)nd + 1, sizeof *deps);
        if (!deps) {
            job_log_nomem(j, "the %u dependencies of node %u of graph %llu", nd, i, (unsigned long long)id);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        for (uint32_t k = 0; k < nd; k++) {
            uint32_t at = wire_get_u32(r);
            if (r->err || at >= i) {
                malformed = true;
                break;
            }
            deps[k] = nodes[at];
        }
        if (malformed)
            break;
        rc = add_node(j, (int)device, g, type, r, deps, nd, &nodes[i]);
        if (rc == CUDA_ERROR_INVALID_VALUE && r->err)
            malformed = true;
    }
    free(deps);
    free(nodes);
    if (!malformed && rc == CUDA_SUCCESS && wire_reader_finish(r))
        malformed = true;
    if (!malformed && rc == CUDA_SUCCESS)
        rc = d->fn_cuGraphInstantiateWithFlags(&x, g, 0);
    agent_obj *o = NULL;
    if (!malformed && rc == CUDA_SUCCESS && !(o = objects_put(&j->objs, id, AOBJ_GRAPH, (int)device))) {
        if (errno == ENOMEM) {
            job_log_nomem(j, "the record of graph %llu", (unsigned long long)id);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            malformed = true;   /* an id this job already holds */
        }
    }
    if (o) {
        o->u.graph.graph = g;
        o->u.graph.exec = x;
    } else {
        if (x)
            d->fn_cuGraphExecDestroy(x);
        if (g)
            d->fn_cuGraphDestroy(g);
    }
    if (malformed)
        job_refuse(j, "malformed graph (id %llu)", (unsigned long long)id);
    else
        job_answer(j, rc, NULL, 0);
}

CUresult graph_launch(job *j, agent_obj *s, uint64_t id)
{
    agent_obj *o = objects_get(&j->objs, id, AOBJ_GRAPH);
    if (!o)
        return CUDA_ERROR_INVALID_HANDLE;
    if (o->device != s->device)
        return CUDA_ERROR_INVALID_VALUE;
    return j->b->drv.fn_cuGraphLaunch(o->u.graph.exec, job_real_stream(s));
}

void graph_free_real(job *j, agent_obj *o)
{
    const cuda_driver *d = &j->b->drv;
    /* Launches already queued keep what they need: the driver destroys an
     * executable graph once they are done. */
    if (o->u.graph.exec)
        d->fn_cuGraphExecDestroy(o->u.graph.exec);
    if (o->u.graph.graph)
        d->fn_cuGraphDestroy(o->u.graph.graph);
    o->u.graph.exec = NULL;
    o->u.graph.graph = NULL;
}

bool graph_drop(job *j, uint64_t id)
{
    agent_obj *o = objects_get(&j->objs, id, AOBJ_GRAPH);
    if (!o)
        return false;
    job_use_device(j, o->device);
    graph_free_real(j, o);
    objects_remove(&j->objs, id);
    return true;
}
