/* A kernel node's launch attributes (cuGraphKernelNode{Get,Set,Copy}Attribute
 * (s)): what cuLaunchKernelEx's attributes would be for the node's launch.
 * Cooperation is applied (the node's op runs its blocks side by side, after
 * the same residency check as cuLaunchCooperativeKernel); clusters above one
 * block are refused as launches refuse them (no clusters on compute
 * capability 7.5); the other hints only read back. */
#include "softgpu/driver.h"

#include <string.h>

static CUresult kernel_node_arg(CUgraphNode h, struct CUgraphNode_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphNode_st *nd = h;
    if (nd->type != CU_GRAPH_NODE_TYPE_KERNEL || !nd->op)
        return CUDA_ERROR_INVALID_VALUE;
    *out = nd;
    return CUDA_SUCCESS;
}

/* The ids a graph kernel node takes (the driver's list: those "valid for
 * graph nodes"). */
static bool node_attr_id(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return true;
    default:
        return false;
    }
}

/* The node's id checked: device-side updates need device graphs, which
 * softgpu does not have. */
static CUresult attr_arg(CUlaunchAttributeID id)
{
    if (id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
        soft_log("a device-updatable kernel node: not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return node_attr_id(id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* What a cooperative launch of the node's op must satisfy: every block
 * resident at once. */
static CUresult cooperative_fits(const soft_op *op)
{
    const unsigned *g = op->u.launch.grid, *b = op->u.launch.block;
    int per_sm = 0;
    CUresult r = cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (CUfunction)op->u.launch.func,
                                                             (int)(b[0] * b[1] * b[2]), op->u.launch.shared);
    if (r == CUDA_SUCCESS && (uint64_t)g[0] * g[1] * g[2] > (uint64_t)per_sm * SOFT_SM_COUNT) {
        soft_log("a cooperative kernel node: %llu blocks, at most %d can be resident",
                 (unsigned long long)g[0] * g[1] * g[2], per_sm * SOFT_SM_COUNT);
        r = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    return r;
}

SOFT_API CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                        CUkernelNodeAttrValue *value_out)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(kernel_node_arg(hNode, &nd));
    SOFT_TRY(attr_arg(attr));
    if (!value_out)
        return CUDA_ERROR_INVALID_VALUE;
    *value_out = nd->attr[attr];
    if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        value_out->cooperative = nd->op->u.launch.cooperative;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                                        const CUkernelNodeAttrValue *value)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(kernel_node_arg(hNode, &nd));
    SOFT_TRY(attr_arg(attr));
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (attr == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
        (uint64_t)value->clusterDim.x * value->clusterDim.y * value->clusterDim.z > 1)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && value->cooperative)
        SOFT_TRY(cooperative_fits(nd->op));
    pthread_mutex_lock(&nd->graph->lock);
    nd->attr[attr] = *value;
    if (attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        nd->op->u.launch.cooperative = value->cooperative != 0;
    pthread_mutex_unlock(&nd->graph->lock);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src)
{
    struct CUgraphNode_st *d, *s;
    SOFT_TRY(kernel_node_arg(dst, &d));
    SOFT_TRY(kernel_node_arg(src, &s));
    if (d == s)
        return CUDA_SUCCESS;
    if (s->op->u.launch.cooperative)
        SOFT_TRY(cooperative_fits(d->op));
    CUlaunchAttributeValue v[SOFT_NODE_ATTRS];
    pthread_mutex_lock(&s->graph->lock);
    memcpy(v, s->attr, sizeof v);
    bool coop = s->op->u.launch.cooperative;
    pthread_mutex_unlock(&s->graph->lock);
    pthread_mutex_lock(&d->graph->lock);
    memcpy(d->attr, v, sizeof v);
    d->op->u.launch.cooperative = coop;
    pthread_mutex_unlock(&d->graph->lock);
    return CUDA_SUCCESS;
}
