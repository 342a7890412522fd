/* cuStreamBatchMemOp on a job's stream: the program's operations as its
 * driver takes them (layout in proto/records.def). */
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/job.h"
#include "proto/cuda_ops.h"
#include "proto/wire.h"


void replay_memop_batch(job *j, wire_reader *r)
{
    rec_memop_batch v;
    rig_why why;
    if (rec_memop_batch_get(r, &v, &why)) {
        job_refuse(j, "malformed %s", why.text);
        return;
    }
    agent_obj *s = objects_get(&j->objs, v.stream, AOBJ_STREAM);
    if (!s) {
        job_refuse(j, "a memory operation batch on stream %llu, which this job does not hold",
                   (unsigned long long)v.stream);
        return;
    }
    uint32_t flags = v.flags, count = v.count;
    const uint8_t *bytes = v.ops;
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
