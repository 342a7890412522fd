/* A kernel node's launch attributes on proxies (cuGraphKernelNode{Get,Set,
 * Copy}Attribute(s)): kept with the node, copied with it into clones and
 * executable graphs, and passed at each launch as cuLaunchKernelEx's
 * attributes (graph.c's node_run), so cooperation is applied as a
 * cooperative launch is and the other hints as a proxy launch takes them
 * (read back, not acted on). The driver leaves graph objects to the
 * program to synchronize; so do these calls. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/graph.h"
#include "shim/log.h"
#include "shim/proxy.h"

bool node_attr_id(CUlaunchAttributeID id)
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

/* A kernel node of ours; *local when h is not a proxy handle at all. */
static CUresult kernel_node(CUgraphNode h, shim_node **out, bool *local)
{
    *local = false;
    shim_node *nd = node_of(h);
    if (!nd) {
        *local = !shim_is_proxy_handle(h);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (nd->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_INVALID_VALUE;
    *out = nd;
    return CUDA_SUCCESS;
}

/* Device-side updates of a node need device graphs, which proxies do not
 * have. */
static CUresult attr_arg(CUlaunchAttributeID id)
{
    if (id == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
        static _Atomic int told;
        if (!atomic_exchange(&told, 1))
            shim_log(SHIM_LOG_ERROR, "a device-updatable kernel node on %s: not supported",
                     shim_current_device_label());
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return node_attr_id(id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SHIM_EXPORT(cuGraphKernelNodeGetAttribute)
{
    shim_node *nd;
    bool local;
    CUresult rc = kernel_node(hNode, &nd, &local);
    if (local)
        return SHIM_LOCAL(cuGraphKernelNodeGetAttribute);
    if (rc || (rc = attr_arg(attr)))
        return rc;
    if (!value_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (nd->attr)
        *value_out = nd->attr[attr];
    else
        memset(value_out, 0, sizeof *value_out);   /* the defaults */
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphKernelNodeSetAttribute)
{
    shim_node *nd;
    bool local;
    CUresult rc = kernel_node(hNode, &nd, &local);
    if (local)
        return SHIM_LOCAL(cuGraphKernelNodeSetAttribute);
    if (rc || (rc = attr_arg(attr)))
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!nd->attr && !(nd->attr = calloc(SHIM_NODE_ATTRS, sizeof *nd->attr)))
        return shim_nomem("a graph node's launch attributes");
    nd->attr[attr] = *value;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuGraphKernelNodeCopyAttributes)
{
    shim_node *d, *s;
    bool local;
    CUresult rc = kernel_node(dst, &d, &local);
    if (local)
        return SHIM_LOCAL(cuGraphKernelNodeCopyAttributes);
    if (rc || (rc = kernel_node(src, &s, &local)))
        return rc;
    if (d == s)
        return CUDA_SUCCESS;
    if (!s->attr) {
        free(d->attr);
        d->attr = NULL;
        return CUDA_SUCCESS;
    }
    return node_copy_attrs(d, s->attr);
}
