/* Stream attributes on a job's streams, asked and set on the agent's real
 * stream (layouts in shim/stream_attr.c). */
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/wire.h"

void replay_stream_attribute(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    agent_obj *s = objects_get(&j->objs, wire_get_u64(r), AOBJ_STREAM);
    agent_obj *src = NULL;
    uint32_t attr = 0;
    CUstreamAttrValue value;
    memset(&value, 0, sizeof value);
    if (op == CUDA_OP_cuStreamCopyAttributes) {
        src = objects_get(&j->objs, wire_get_u64(r), AOBJ_STREAM);
    } else {
        attr = wire_get_u32(r);
        if (op == CUDA_OP_cuStreamSetAttribute)
            wire_get_bytes(r, &value, sizeof value);
    }
    if (wire_reader_finish(r) || !s || (op == CUDA_OP_cuStreamCopyAttributes && !src)) {
        job_refuse(j, "malformed stream attribute request");
        return;
    }
    CUresult rc = job_use_device(j, s->device);
    /* A driver older than CUDA 11 has none of these. */
    if (!d->fn_cuStreamGetAttribute || !d->fn_cuStreamSetAttribute || !d->fn_cuStreamCopyAttributes)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS) {
        if (op == CUDA_OP_cuStreamGetAttribute)
            rc = d->fn_cuStreamGetAttribute(job_real_stream(s), (CUstreamAttrID)attr, &value);
        else if (op == CUDA_OP_cuStreamSetAttribute)
            rc = d->fn_cuStreamSetAttribute(job_real_stream(s), (CUstreamAttrID)attr, &value);
        else
            rc = d->fn_cuStreamCopyAttributes(job_real_stream(s), job_real_stream(src));
    }
    bool give = rc == CUDA_SUCCESS && op == CUDA_OP_cuStreamGetAttribute;
    job_answer(j, rc, give ? &value : NULL, give ? sizeof value : 0);
}
