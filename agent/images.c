/* Arrays, mipmapped arrays, texture and surface objects of a job, named by
 * the controller's ids, and the 3-D copies that reach them (layouts in
 * proto/images.h). A texture or surface object's value is this driver's:
 * the program passes it into kernels unchanged, so the controller hands it
 * out as it is. Resources name arrays by id and device memory by pointer
 * (the job's window, the same on both ends). */
#include <string.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/images.h"
#include "proto/job.h"

/* The real array of id, or NULL. */
static CUarray array_of(job *j, uint64_t id)
{
    agent_obj *o = objects_get(&j->objs, id, AOBJ_ARRAY);
    return o ? o->u.array.real : NULL;
}

/* True when [p, p + n) lies in the job's pointer window: a resource or copy
 * never names the agent's own memory. */
static bool in_window(job *j, uint64_t p, uint64_t n)
{
    return p >= j->win.base && p - j->win.base <= j->win.size && n <= j->win.size - (p - j->win.base);
}

static void answer_value(job *j, CUresult rc, uint64_t v)
{
    uint8_t out[8];
    wire_store_u64(out, v);
    job_answer(j, rc, rc ? NULL : out, rc ? 0 : 8);
}

/* Makes an object of the answer's result at id, or refuses a taken id. */
static agent_obj *put(job *j, uint64_t id, agent_obj_type type, uint32_t device)
{
    if (device >= (uint32_t)j->b->device_count) {
        job_refuse(j, "an object on device %u, which this agent does not have", device);
        return NULL;
    }
    agent_obj *o = objects_put(&j->objs, id, type, (int)device);
    if (!o)
        job_refuse(j, "object id %llu %s", (unsigned long long)id, job_put_failure());
    return o;
}

void image_request(job *j, uint32_t op, wire_reader *r)
{
    const cuda_driver *d = &j->b->drv;
    CUresult rc;
    switch (op) {
    case CUDA_OP_cuArray3DCreate_v2:
    case CUDA_OP_cuMipmappedArrayCreate: {
        uint64_t id = wire_get_u64(r);
        uint32_t device = wire_get_u32(r);
        CUDA_ARRAY3D_DESCRIPTOR desc;
        image_get_array_desc(r, &desc);
        uint32_t levels = op == CUDA_OP_cuMipmappedArrayCreate ? wire_get_u32(r) : 0;
        if (wire_reader_finish(r)) {
            job_refuse(j, "malformed array creation");
            return;
        }
        agent_obj *o = put(j, id, op == CUDA_OP_cuArray3DCreate_v2 ? AOBJ_ARRAY : AOBJ_MIPMAP, device);
        if (!o)
            return;
        if (!(rc = job_use_device(j, (int)device)))
            rc = op == CUDA_OP_cuArray3DCreate_v2 ? d->fn_cuArray3DCreate_v2(&o->u.array.real, &desc)
                                                  : d->fn_cuMipmappedArrayCreate(&o->u.mipmap.real, &desc, levels);
        if (rc)
            objects_remove(&j->objs, id);
        job_answer(j, rc, NULL, 0);
        return;
    }
    case CUDA_OP_cuMipmappedArrayGetLevel: {
        uint64_t mid = wire_get_u64(r);
        agent_obj *m = objects_get(&j->objs, mid, AOBJ_MIPMAP);
        uint32_t level = wire_get_u32(r);
        uint64_t id = wire_get_u64(r);
        if (wire_reader_finish(r) || !m) {
            job_refuse(j, "malformed mipmap level request");
            return;
        }
        agent_obj *o = put(j, id, AOBJ_ARRAY, (uint32_t)m->device);
        if (!o)
            return;
        if (!(rc = job_use_device(j, m->device)))
            rc = d->fn_cuMipmappedArrayGetLevel(&o->u.array.real, m->u.mipmap.real, level);
        if (rc)
            objects_remove(&j->objs, id);
        else
            o->u.array.mipmap = mid;
        job_answer(j, rc, NULL, 0);
        return;
    }
    case CUDA_OP_cuTexObjectCreate:
    case CUDA_OP_cuSurfObjectCreate: {
        bool tex = op == CUDA_OP_cuTexObjectCreate;
        uint64_t id = wire_get_u64(r), rid;
        uint32_t device = wire_get_u32(r);
        CUDA_RESOURCE_DESC res;
        CUDA_TEXTURE_DESC td;
        CUDA_RESOURCE_VIEW_DESC view;
        bool has_view = false;
        image_get_resource(r, &res, &rid);
        if (tex) {
            image_get_texture(r, &td);
            has_view = image_get_view(r, &view);
        }
        if (wire_reader_finish(r)) {
            job_refuse(j, "malformed %s object creation", tex ? "texture" : "surface");
            return;
        }
        if (res.resType == CU_RESOURCE_TYPE_ARRAY) {
            if (!(res.res.array.hArray = array_of(j, rid))) {
                job_refuse(j, "a resource naming array %llu, which this job does not hold", (unsigned long long)rid);
                return;
            }
        } else if (res.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) {
            agent_obj *m = objects_get(&j->objs, rid, AOBJ_MIPMAP);
            if (!m) {
                job_refuse(j, "a resource naming mipmapped array %llu, which this job does not hold",
                           (unsigned long long)rid);
                return;
            }
            res.res.mipmap.hMipmappedArray = m->u.mipmap.real;
        }
        uint64_t span = 0;
        if ((res.resType == CU_RESOURCE_TYPE_LINEAR &&
             !in_window(j, res.res.linear.devPtr, res.res.linear.sizeInBytes)) ||
            (res.resType == CU_RESOURCE_TYPE_PITCH2D &&
             (__builtin_mul_overflow((uint64_t)res.res.pitch2D.height, (uint64_t)res.res.pitch2D.pitchInBytes, &span) ||
              !in_window(j, res.res.pitch2D.devPtr, span)))) {
            job_refuse(j, "a texture over memory outside the job's pointer window");
            return;
        }
        agent_obj *o = put(j, id, tex ? AOBJ_TEXTURE : AOBJ_SURFACE, device);
        if (!o)
            return;
        if (!(rc = job_use_device(j, (int)device)))
            rc = tex ? d->fn_cuTexObjectCreate(&o->u.image.real, &res, &td, has_view ? &view : NULL)
                     : d->fn_cuSurfObjectCreate(&o->u.image.real, &res);
        if (rc)
            objects_remove(&j->objs, id);
        answer_value(j, rc, rc ? 0 : o->u.image.real);
        return;
    }
    case CUDA_OP_cuArrayGetMemoryRequirements:
    case CUDA_OP_cuMipmappedArrayGetMemoryRequirements: {
        bool mip = op == CUDA_OP_cuMipmappedArrayGetMemoryRequirements;
        agent_obj *o = objects_get(&j->objs, wire_get_u64(r), mip ? AOBJ_MIPMAP : AOBJ_ARRAY);
        uint32_t device = wire_get_u32(r);
        if (wire_reader_finish(r) || !o || device >= (uint32_t)j->b->device_count) {
            job_refuse(j, "malformed memory requirements request");
            return;
        }
        CUDA_ARRAY_MEMORY_REQUIREMENTS req = { 0 };
        if (!(rc = job_use_device(j, o->device)))
            rc = mip ? d->fn_cuMipmappedArrayGetMemoryRequirements(&req, o->u.mipmap.real, (CUdevice)device)
                     : d->fn_cuArrayGetMemoryRequirements(&req, o->u.array.real, (CUdevice)device);
        uint8_t out[16];
        wire_store_u64(out, req.size);
        wire_store_u64(out + 8, req.alignment);
        job_answer(j, rc, rc ? NULL : out, rc ? 0 : 16);
        return;
    }
    default:
        job_refuse(j, "request %s is not an image request", job_op_name(op));
        return;
    }
}

/* One side of a copy into the fields of c (src or dst). */
static CUresult side(job *j, const image_side *s, bool src, const uint8_t *data, void *staging, uint64_t width,
                     uint64_t height, CUDA_MEMCPY3D *c)
{
    CUmemorytype type;
    const void *host = NULL;
    CUdeviceptr dev = 0;
    CUarray arr = NULL;
    uint64_t pitch = s->pitch, rows = s->height;
    switch (s->kind) {
    case IMAGE_SIDE_PROGRAM:
        type = CU_MEMORYTYPE_HOST;
        host = src ? (const void *)data : staging;
        pitch = width;
        rows = height;
        break;
    case IMAGE_SIDE_DEVICE:
        if (!in_window(j, s->at, 1))
            return CUDA_ERROR_INVALID_VALUE;
        type = CU_MEMORYTYPE_DEVICE;
        dev = s->at;
        break;
    default:
        type = CU_MEMORYTYPE_ARRAY;
        if (!(arr = array_of(j, s->at)))
            return CUDA_ERROR_INVALID_HANDLE;
        break;
    }
    if (src) {
        c->srcMemoryType = type;
        c->srcHost = host;
        c->srcDevice = dev;
        c->srcArray = arr;
        c->srcXInBytes = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->x;
        c->srcY = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->y;
        c->srcZ = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->z;
        c->srcPitch = type == CU_MEMORYTYPE_ARRAY ? 0 : pitch;
        c->srcHeight = type == CU_MEMORYTYPE_ARRAY ? 0 : rows;
    } else {
        c->dstMemoryType = type;
        c->dstHost = (void *)host;
        c->dstDevice = dev;
        c->dstArray = arr;
        c->dstXInBytes = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->x;
        c->dstY = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->y;
        c->dstZ = s->kind == IMAGE_SIDE_PROGRAM ? 0 : s->z;
        c->dstPitch = type == CU_MEMORYTYPE_ARRAY ? 0 : pitch;
        c->dstHeight = type == CU_MEMORYTYPE_ARRAY ? 0 : rows;
    }
    return CUDA_SUCCESS;
}

CUresult image_copy(job *j, agent_obj *s, const rec_copy_3d *v, void **staging, size_t *staging_len)
{
    /* The decoder held a box with a program side to one chunk, unwrapped,
     * with its packed bytes exactly when the program is the source. */
    const image_side src = v->src, dst = v->dst;
    uint64_t width = v->width, height = v->height, depth = v->depth;
    const uint8_t *data = v->data;
    uint64_t area = width * height * depth;
    CUresult rc;
    void *buf = NULL;
    if (dst.kind == IMAGE_SIDE_PROGRAM) {
        if ((rc = staging_get(j->b, area, &buf)))
            return rc;
    }
    CUDA_MEMCPY3D c = { .WidthInBytes = width, .Height = height, .Depth = depth };
    rc = side(j, &src, true, data, NULL, width, height, &c);
    if (rc == CUDA_SUCCESS)
        rc = side(j, &dst, false, NULL, buf, width, height, &c);
    if (rc == CUDA_SUCCESS)
        rc = j->b->drv.fn_cuMemcpy3DAsync_v2(&c, job_real_stream(s));
    if (buf) {
        if (rc) {
            staging_put(j->b, buf, area);
        } else {
            *staging = buf;
            *staging_len = area;
        }
    }
    return rc;
}

void image_release(job *j, agent_obj *o)
{
    const cuda_driver *d = &j->b->drv;
    switch (o->type) {
    case AOBJ_ARRAY:
        if (!o->u.array.mipmap)
            d->fn_cuArrayDestroy(o->u.array.real);
        break;
    case AOBJ_MIPMAP: d->fn_cuMipmappedArrayDestroy(o->u.mipmap.real); break;
    case AOBJ_TEXTURE: d->fn_cuTexObjectDestroy(o->u.image.real); break;
    case AOBJ_SURFACE: d->fn_cuSurfObjectDestroy(o->u.image.real); break;
    default: break;
    }
}

bool image_drop(job *j, uint32_t op, uint64_t id)
{
    agent_obj_type type = op == CUDA_OP_cuArrayDestroy ? AOBJ_ARRAY
                          : op == CUDA_OP_cuMipmappedArrayDestroy ? AOBJ_MIPMAP
                          : op == CUDA_OP_cuTexObjectDestroy ? AOBJ_TEXTURE : AOBJ_SURFACE;
    agent_obj *o = objects_get(&j->objs, id, type);
    if (!o || (type == AOBJ_ARRAY && o->u.array.mipmap))
        return false;
    /* Work handed over before may still use it: the device finishes first. */
    job_use_device(j, o->device);
    j->b->drv.fn_cuCtxSynchronize();
    image_release(j, o);
    if (type == AOBJ_MIPMAP) {
        /* Its levels go with it. */
        for (uint64_t i = 0; i < j->objs.cap; i++) {
            agent_obj *l = j->objs.v[i];
            if (l && l->type == AOBJ_ARRAY && l->u.array.mipmap == id)
                objects_remove(&j->objs, i);
        }
    }
    objects_remove(&j->objs, id);
    return true;
}
