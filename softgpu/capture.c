/* Stream capture: softgpu builds no graphs, so no stream is ever capturing.
 * The queries answer that (runtimes and frameworks ask often); beginning a
 * capture is not exported. */
#include "softgpu/driver.h"

static CUresult not_capturing(CUstream h, CUstreamCaptureStatus *status, bool ptds)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return not_capturing(hStream, captureStatus, false);
}

SOFT_API CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return not_capturing(hStream, captureStatus, true);
}

static CUresult info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, bool ptds)
{
    SOFT_TRY(not_capturing(h, status, ptds));
    /* Outputs other than the status are left alone when not capturing, as
     * the driver documents; clear them anyway for callers that read them. */
    if (id)
        *id = 0;
    if (graph)
        *graph = NULL;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                 cuuint64_t *id_out)
{
    return info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                      cuuint64_t *id_out)
{
    return info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL, true);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out, false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                         cuuint64_t *id_out, CUgraph *graph_out,
                                                         const CUgraphNode **dependencies_out,
                                                         size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out, true);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out,
                false);
}

SOFT_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                         cuuint64_t *id_out, CUgraph *graph_out,
                                                         const CUgraphNode **dependencies_out,
                                                         const CUgraphEdgeData **edgeData_out,
                                                         size_t *numDependencies_out)
{
    return info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out,
                true);
}
