/* Stream capture queries on proxies, answered here with no round trip: a
 * capture can only begin through the shim, and the shim begins none on a
 * proxy stream yet (cuStreamBeginCapture is refused there), so every proxy
 * stream, the legacy NULL stream and each thread's default stream among
 * them, is not capturing. cuBLAS, cuSOLVER and PyTorch's allocator ask
 * before their work. The calling thread's capture mode
 * (cuThreadExchangeStreamCaptureMode) is kept here as CUDA keeps it, per
 * thread, and handed on to the local driver so local captures see it too. */
#include <stdbool.h>

#include "shim/core.h"
#include "shim/local_driver.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol (CAPTURE_QUERY passes names through another macro). */
#undef cuStreamGetCaptureInfo
#undef cuStreamIsCapturing

static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* The capture state of proxy stream s and what a query reports with it.
 * Outputs other than the status are left alone when not capturing, as the
 * driver documents; rig clears them anyway for callers that read them. */
static CUresult capture_info(proxy_obj *s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    (void)s;
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
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

#define CAPTURE_QUERY(sym, per_thread, ...)                                     \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return capture_info(s, __VA_ARGS__);                                    \
    }

CAPTURE_QUERY(cuStreamIsCapturing, false, captureStatus, NULL, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamIsCapturing_ptsz, true, captureStatus, NULL, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo_ptsz, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v2, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
              numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v2_ptsz, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
              numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v3, false, captureStatus_out, id_out, graph_out, dependencies_out,
              edgeData_out, numDependencies_out)
CAPTURE_QUERY(cuStreamGetCaptureInfo_v3_ptsz, true, captureStatus_out, id_out, graph_out, dependencies_out,
              edgeData_out, numDependencies_out)

SHIM_EXPORT(cuThreadExchangeStreamCaptureMode)
{
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    /* The local driver's copy of the mode follows ours (its captures are
     * the only ones a mode can govern today). */
    const shim_driver *d = shim_local_driver();
    if (d && d->fn_cuThreadExchangeStreamCaptureMode) {
        CUstreamCaptureMode theirs = *mode;
        CUresult rc = d->fn_cuThreadExchangeStreamCaptureMode(&theirs);
        if (rc)
            return rc;
    }
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}
