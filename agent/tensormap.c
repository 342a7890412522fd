/* Tensor maps encoded by this agent's driver for memory of the job's window
 * (layouts in proto/tensormap.h): the answer is the 128-byte descriptor. */
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/tensormap.h"

void tensormap_request(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    uint32_t device = wire_get_u32(r);
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    uint64_t address;
    tensormap_tiled t;
    if (op == CUDA_OP_cuTensorMapEncodeTiled) {
        tensormap_get_tiled(r, &t);
        address = t.address;
    } else {
        wire_get_bytes(r, &map, TENSORMAP_BYTES);
        address = wire_get_u64(r);
    }
    if (wire_reader_finish(r) || device >= (uint32_t)j->b->device_count) {
        job_refuse(j, "malformed tensor map request");
        return;
    }
    /* The map names memory of this job only. */
    if (address < j->win.base || address - j->win.base >= j->win.size) {
        job_refuse(j, "a tensor map of memory outside the job's pointer window");
        return;
    }
    CUresult rc = job_use_device(j, (int)device);
    bool have = op == CUDA_OP_cuTensorMapEncodeTiled ? d->fn_cuTensorMapEncodeTiled != NULL
                                                      : d->fn_cuTensorMapReplaceAddress != NULL;
    if (!rc && !have)
        rc = CUDA_ERROR_NOT_SUPPORTED;   /* a driver older than 12.0 */
    if (!rc && op == CUDA_OP_cuTensorMapEncodeTiled)
        rc = d->fn_cuTensorMapEncodeTiled(&map, (CUtensorMapDataType)t.type, t.rank, (void *)(uintptr_t)address, t.dim,
                                          t.stride, t.box, t.estride, (CUtensorMapInterleave)t.interleave,
                                          (CUtensorMapSwizzle)t.swizzle, (CUtensorMapL2promotion)t.l2,
                                          (CUtensorMapFloatOOBfill)t.oob);
    else if (!rc)
        rc = d->fn_cuTensorMapReplaceAddress(&map, (void *)(uintptr_t)address);
    job_answer(j, rc, rc ? NULL : &map, rc ? 0 : TENSORMAP_BYTES);
}
