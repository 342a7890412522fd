/* Stream attributes on a job's streams, asked and set on the agent's real
 * stream (layouts in proto/records.def). */
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/wire.h"

void replay_stream_attribute(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    uint64_t stream, from = 0;
    uint32_t attr = 0;
    CUstreamAttrValue value;
    memset(&value, 0, sizeof value);
    rig_why why;
    int bad;
    if (op == CUDA_OP_cuStreamCopyAttributes) {
        rec_stream_attr_copy v;
        bad = rec_stream_attr_copy_get(r, &v, &why);
        stream = v.dst, from = v.src;
    } else if (op == CUDA_OP_cuStreamSetAttribute) {
        rec_stream_attr_set v;
        bad = rec_stream_attr_set_get(r, &v, &why);
        stream = v.stream, attr = v.attribute;
        memcpy(&value, v.value, sizeof value);
    } else {
        rec_stream_attr_get v;
        bad = rec_stream_attr_get_get(r, &v, &why);
        stream = v.stream, attr = v.attribute;
    }
    if (bad) {
        job_refuse(j, "malformed %s", why.text);
        return;
    }
    agent_obj *s = objects_get(&j->objs, stream, AOBJ_STREAM);
    agent_obj *src = op == CUDA_OP_cuStreamCopyAttributes ? objects_get(&j->objs, from, AOBJ_STREAM) : NULL;
    if (!s || (op == CUDA_OP_cuStreamCopyAttributes && !src)) {
        job_refuse(j, "a stream attribute request naming a stream this job does not hold");
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
