/* A job's texture and surface references (layouts in proto/texref.h): each
 * is this driver's reference of a module the controller named, kept under
 * the controller's id. Bindings name arrays by id and device memory by
 * pointer, which must lie in the job's window. The driver reads them at
 * each launch; requests come in order with launches, so a binding is in
 * place before the launch after it. */
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/texref.h"

/* True when [p, p + n) lies in the job's pointer window. */
static bool in_window(job *j, uint64_t p, uint64_t n)
{
    return p >= j->win.base && p - j->win.base <= j->win.size && n <= j->win.size - (p - j->win.base);
}

agent_obj *texref_get(job *j, uint64_t id, bool surface)
{
    agent_obj *o = objects_get(&j->objs, id, AOBJ_TEXREF);
    if (!o || o->u.texref.surface != surface)
        return NULL;
    /* The reference went with its module. */
    agent_obj *m = objects_get(&j->objs, o->u.texref.module, AOBJ_MODULE);
    if (!m || m->u.module.real != o->u.texref.real_module)
        return NULL;
    return o;
}

static void module_ref(job *j, const texref_req *q)
{
    const cuda_driver *d = &j->b->drv;
    bool surface = q->op == CUDA_OP_cuModuleGetSurfRef;
    agent_obj *m = objects_get(&j->objs, q->object, AOBJ_MODULE);
    if (!m) {
        job_refuse(j, "a reference of module %llu, which this job does not hold", (unsigned long long)q->object);
        return;
    }
    char name[TEXREF_NAME_MAX + 1];
    memcpy(name, q->name, q->name_len);
    name[q->name_len] = '\0';
    void *real = NULL;
    CUresult rc = job_use_device(j, m->device);
    if (!rc && !d->by_op[q->op])
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (!rc)
        rc = surface ? d->fn_cuModuleGetSurfRef((CUsurfref *)&real, m->u.module.real, name)
                     : d->fn_cuModuleGetTexRef((CUtexref *)&real, m->u.module.real, name);
    if (!rc) {
        agent_obj *o = objects_put(&j->objs, q->ref, AOBJ_TEXREF, m->device);
        if (!o) {
            job_refuse(j, "object id %llu %s", (unsigned long long)q->ref, job_put_failure());
            return;
        }
        o->u.texref.real = real;
        o->u.texref.module = q->object;
        o->u.texref.real_module = m->u.module.real;
        o->u.texref.surface = surface;
    }
    job_answer(j, rc, NULL, 0);
}

void texref_request(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    texref_req q = { .op = op };
    texref_get_request(r, &q);
    if (wire_reader_finish(r) || !texref_op(op)) {
        job_refuse(j, "malformed texture reference request");
        return;
    }
    if (op == CUDA_OP_cuModuleGetTexRef || op == CUDA_OP_cuModuleGetSurfRef) {
        module_ref(j, &q);
        return;
    }
    agent_obj *o = texref_get(j, q.ref, op == CUDA_OP_cuSurfRefSetArray);
    if (!o) {
        job_refuse(j, "texture or surface reference %llu, which this job does not hold (or whose module is gone)",
                   (unsigned long long)q.ref);
        return;
    }
    CUresult rc = job_use_device(j, o->device);
    uint8_t out[8];
    size_t out_len = 0;
    if (!rc && !d->by_op[op])
        rc = CUDA_ERROR_NOT_SUPPORTED;   /* a driver without references */
    if (rc) {
        job_answer(j, rc, NULL, 0);
        return;
    }
    switch (op) {
    case CUDA_OP_cuTexRefSetArray:
    case CUDA_OP_cuSurfRefSetArray: {
        agent_obj *a = objects_get(&j->objs, q.object, AOBJ_ARRAY);
        if (!a) {
            job_refuse(j, "a binding of array %llu, which this job does not hold", (unsigned long long)q.object);
            return;
        }
        rc = op == CUDA_OP_cuTexRefSetArray ? d->fn_cuTexRefSetArray(o->u.texref.real, a->u.array.real, q.flags)
                                            : d->fn_cuSurfRefSetArray(o->u.texref.real, a->u.array.real, q.flags);
        break;
    }
    case CUDA_OP_cuTexRefSetMipmappedArray: {
        agent_obj *m = objects_get(&j->objs, q.object, AOBJ_MIPMAP);
        if (!m) {
            job_refuse(j, "a binding of mipmapped array %llu, which this job does not hold",
                       (unsigned long long)q.object);
            return;
        }
        rc = d->fn_cuTexRefSetMipmappedArray(o->u.texref.real, m->u.mipmap.real, q.flags);
        break;
    }
    case CUDA_OP_cuTexRefSetAddress_v2: {
        if (!in_window(j, q.address, q.bytes)) {
            job_refuse(j, "a texture reference on memory outside the job's pointer window");
            return;
        }
        size_t offset = 0;
        rc = d->fn_cuTexRefSetAddress_v2(&offset, o->u.texref.real, (CUdeviceptr)q.address, (size_t)q.bytes);
        wire_store_u64(out, offset);
        out_len = rc ? 0 : 8;
        break;
    }
    case CUDA_OP_cuTexRefSetAddress2D_v3: {
        /* Rows of at most pitch bytes: height * pitch covers them. */
        if (q.bytes && q.height > UINT64_MAX / q.bytes) {
            job_refuse(j, "a pitched texture reference whose size wraps around");
            return;
        }
        if (!in_window(j, q.address, q.height * q.bytes)) {
            job_refuse(j, "a texture reference on memory outside the job's pointer window");
            return;
        }
        CUDA_ARRAY_DESCRIPTOR desc = { .Width = q.width, .Height = q.height, .Format = (CUarray_format)q.format,
                                       .NumChannels = q.channels };
        rc = d->fn_cuTexRefSetAddress2D_v3(o->u.texref.real, &desc, (CUdeviceptr)q.address, (size_t)q.bytes);
        break;
    }
    case CUDA_OP_cuTexRefSetBorderColor:
        rc = d->fn_cuTexRefSetBorderColor(o->u.texref.real, q.border);
        break;
    default:
        rc = CUDA_ERROR_NOT_SUPPORTED;
        break;
    }
    job_answer(j, rc, out_len ? out : NULL, out_len);
}
