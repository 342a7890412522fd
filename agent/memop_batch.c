/* cuStreamBatchMemOp on a job's stream: the program's operations as its
 * driver takes them (layout in shim/memop_batch.c). */
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/job.h"
#include "proto/cuda_ops.h"
#include "proto/wire.h"


void replay_memop_batch(job *j, wire_reader *r)
{
    agent_obj *s = objects_get(&j->objs, wire_get_u64(r), AOBJ_STREAM);
    uint32_t flags = wire_get_u32(r), count = wire_get_u32(r);
    const uint8_t *bytes = count <= JOB_BATCH_MAX ? wire_get_view(r, (size_t)count * sizeof(CUstreamBatchMemOpParams)) : NULL;
    if (wire_reader_finish(r) || !s || !bytes) {
        job_refuse(j, "malformed memory operation batch");
        return;
    }
    const cuda_driver *d = &j->b->drv;
    CUstreamBatchMemOpParams *ops = malloc(count ? count * sizeof *ops : 1);
    if (!ops)
        job_log_nomem(j, "a batch of %u memory operations", count);
    CUresult rc = ops ? job_use_device(j, s->device) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        memcpy(ops, bytes, count * sizeof *ops);
        rc = d->fn_cuStreamBatchMemOp_v2 ? d->fn_cuStreamBatchMemOp_v2(job_real_stream(s), count, ops, flags)
                                         : CUDA_ERROR_NOT_SUPPORTED;
    }
    free(ops);
    job_answer(j, rc, NULL, 0);
}
