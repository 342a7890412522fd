/* Tensor maps on proxies: the 128-byte descriptor is encoded by the agent's
 * driver for the memory it names (a pointer of the job's window, the same
 * on both ends), and comes back as plain bytes the program passes into
 * kernels unchanged (layouts in proto/tensormap.h). */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/tensormap.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/proxy.h"

/* Sends body to the agent of device and copies its 128-byte answer. */
static CUresult encode(int device, const uint8_t *body, size_t len, CUtensorMap *out)
{
    agent_link *l = shim_device_at(device)->link;
    struct iovec iov = { (void *)body, len };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(l, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n != TENSORMAP_BYTES)
        rc = link_malformed(l, "a tensor map of %zu bytes, not %d", n, TENSORMAP_BYTES);
    else if (rc == CUDA_SUCCESS)
        memcpy(out, o, TENSORMAP_BYTES);
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuTensorMapEncodeTiled)
{
    int device = shim_device_of_pointer((uint64_t)(uintptr_t)globalAddress);
    if (device < 0)
        return SHIM_LOCAL(cuTensorMapEncodeTiled);
    if (!tensorMap || tensorRank == 0 || tensorRank > TENSORMAP_RANK_MAX || !globalDim ||
        (tensorRank > 1 && !globalStrides) || !boxDim || !elementStrides)
        return CUDA_ERROR_INVALID_VALUE;
    tensormap_tiled t = { .type = (uint32_t)tensorDataType, .rank = tensorRank,
                          .address = (uint64_t)(uintptr_t)globalAddress, .interleave = (uint32_t)interleave,
                          .swizzle = (uint32_t)swizzle, .l2 = (uint32_t)l2Promotion, .oob = (uint32_t)oobFill };
    for (unsigned i = 0; i < tensorRank; i++) {
        t.dim[i] = globalDim[i];
        t.box[i] = boxDim[i];
        t.estride[i] = elementStrides[i];
        if (i + 1 < tensorRank)
            t.stride[i] = globalStrides[i];
    }
    uint8_t body[8 + TENSORMAP_TILED_BYTES];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuTensorMapEncodeTiled);
    wire_put_u32(&w, (uint32_t)shim_device_at(device)->remote_ordinal);
    tensormap_put_tiled(&w, &t);
    if (w.err)
        return CUDA_ERROR_INVALID_VALUE;   /* a value the wire cannot carry */
    return encode(device, body, w.off, tensorMap);
}

SHIM_EXPORT(cuTensorMapReplaceAddress)
{
    int device = shim_device_of_pointer((uint64_t)(uintptr_t)globalAddress);
    if (device < 0)
        return SHIM_LOCAL(cuTensorMapReplaceAddress);
    if (!tensorMap)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[16 + TENSORMAP_BYTES];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuTensorMapReplaceAddress);
    wire_put_u32(&w, (uint32_t)shim_device_at(device)->remote_ordinal);
    wire_put_bytes(&w, tensorMap, TENSORMAP_BYTES);
    wire_put_u64(&w, (uint64_t)(uintptr_t)globalAddress);
    return encode(device, body, w.off, tensorMap);
}
