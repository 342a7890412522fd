/* Batch memory-op graph nodes: a node runs its operations (waits and writes
 * on device words, flushes, barriers) in order when the graph gets there,
 * as cuStreamBatchMemOp would on the launch stream (memop.c checks and runs
 * them). The node owns a copy of the program's array; GetParams hands back
 * that copy, valid until the node's parameters change or it goes. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

static CUresult batch_node_arg(CUgraphNode h, struct CUgraphNode_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(h, SOFT_NODE))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphNode_st *nd = h;
    if (nd->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP || !nd->op)
        return CUDA_ERROR_INVALID_VALUE;
    *out = nd;
    return CUDA_SUCCESS;
}

static CUresult op_of(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p, soft_op **out)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return soft_batch_op(p->paramArray, p->count, p->flags, out);
}

SOFT_API CUresult CUDAAPI cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                                   const CUgraphNode *dependencies, size_t numDependencies,
                                                   const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op;
    SOFT_TRY(op_of(nodeParams, &op));
    return soft_graph_add_node(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP,
                               op);
}

SOFT_API CUresult CUDAAPI cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(batch_node_arg(hNode, &nd));
    if (!nodeParams_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = NULL;
    cuCtxGetCurrent(&ctx);
    *nodeParams_out = (CUDA_BATCH_MEM_OP_NODE_PARAMS){ .ctx = ctx, .count = nd->op->u.batch.n,
                                                       .paramArray = nd->op->u.batch.ops };
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphBatchMemOpNodeSetParams(CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    struct CUgraphNode_st *nd;
    SOFT_TRY(batch_node_arg(hNode, &nd));
    soft_op *op;
    SOFT_TRY(op_of(nodeParams, &op));
    pthread_mutex_lock(&nd->graph->lock);
    soft_op *old = nd->op;
    nd->op = op;
    pthread_mutex_unlock(&nd->graph->lock);
    soft_op_free(old);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                             const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    soft_op *op;
    SOFT_TRY(op_of(nodeParams, &op));
    return soft_exec_set_op(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, op);
}
