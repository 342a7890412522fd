/* CUDA arrays, mipmapped arrays, texture and surface objects on proxies,
 * and every copy that reaches an array (layouts in proto/images.h).
 * Arrays are objects the controller names (arena slots, as pools);
 * creating one is a request, destroying a drop. Their copies are
 * handovers: bytes from the program travel like HtoD, bytes into it like
 * DtoH, cut into whole rows of at most one chunk. A texture or surface
 * object is created by a request that returns the agent's 64-bit value,
 * which the program passes into kernels unchanged; the shim keeps what
 * the program gave to answer cuTexObjectGet*Desc with its own handles. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/images.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* ---- requests ---- */

static CUresult request(agent_link *l, const uint8_t *body, size_t len, uint64_t *value)
{
    struct iovec iov = { (void *)body, len };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(l, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n != (value ? 8u : 0u))
        rc = link_malformed(l, "an answer to an image request of %zu bytes", n);
    else if (rc == CUDA_SUCCESS && value)
        *value = wire_load_u64(o);
    frame_release(&f);
    return rc;
}

static unsigned channel_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2: case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4: return 1;
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2: case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: return 2;
    default: return 0;
    }
}

/* ---- arrays ---- */

static CUresult array_create(proxy_obj *ctx, const CUDA_ARRAY3D_DESCRIPTOR *desc, CUarray *out)
{
    if (!out || !desc)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned cb = channel_bytes(desc->Format);
    if (!cb) {
        shim_log_unsupported_once("cuArray3DCreate (a block-compressed or video format)",
                                  shim_device_at(ctx->device)->label);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    shim_device *d = shim_device_at(ctx->device);
    proxy_obj *a = arena_new(PROXY_ARRAY, ctx->device);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint8_t body[16 + IMAGE_ARRAY_DESC_BYTES];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuArray3DCreate_v2);
    wire_put_u64(&w, a->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    image_put_array_desc(&w, desc);
    CUresult rc = request(d->link, body, w.off, NULL);
    if (rc) {
        arena_free(a);
        return rc;
    }
    a->u.array.desc = *desc;
    a->u.array.elem = cb * desc->NumChannels;
    *out = (CUarray)a;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuArray3DCreate_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    return ctx ? array_create(ctx, pAllocateArray, pHandle) : SHIM_LOCAL(cuArray3DCreate_v2);
}

SHIM_EXPORT(cuArrayCreate_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuArrayCreate_v2);
    if (!pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = pAllocateArray->Width, .Height = pAllocateArray->Height,
                                  .Format = pAllocateArray->Format, .NumChannels = pAllocateArray->NumChannels };
    return array_create(ctx, &d, pHandle);
}

SHIM_EXPORT(cuArray3DGetDescriptor_v2)
{
    proxy_obj *a = arena_get(hArray, PROXY_ARRAY);
    if (!a)
        return shim_is_proxy_handle(hArray) ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuArray3DGetDescriptor_v2);
    if (!pArrayDescriptor)
        return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = a->u.array.desc;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuArrayGetDescriptor_v2)
{
    proxy_obj *a = arena_get(hArray, PROXY_ARRAY);
    if (!a)
        return shim_is_proxy_handle(hArray) ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuArrayGetDescriptor_v2);
    if (!pArrayDescriptor || a->u.array.desc.Depth)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = &a->u.array.desc;
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){ .Width = d->Width, .Height = d->Height, .Format = d->Format,
                                                 .NumChannels = d->NumChannels };
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuArrayDestroy)
{
    proxy_obj *a = arena_get(hArray, PROXY_ARRAY);
    if (!a)
        return shim_is_proxy_handle(hArray) ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuArrayDestroy);
    if (a->u.array.mipmap)
        return CUDA_ERROR_INVALID_HANDLE;   /* a level goes with its mipmapped array */
    CUresult rc = link_drop(a->link, CUDA_OP_cuArrayDestroy, a->id);
    arena_free(a);
    return rc;
}

/* The agent's driver's answer for an array or mipmapped array on a device
 * of its own. */
static CUresult requirements(proxy_obj *o, uint32_t op, CUdevice device, CUDA_ARRAY_MEMORY_REQUIREMENTS *out)
{
    shim_device *d = shim_initialized() ? shim_device_at(device) : NULL;
    if (!d || !d->proxy || d->link != o->link)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[16];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, op);
    wire_put_u64(&w, o->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *a;
    size_t n;
    CUresult rc = link_request(o->link, &iov, 1, &f, &a, &n);
    if (rc == CUDA_SUCCESS && n != 16)
        rc = link_malformed(o->link, "an answer to a memory requirements request of %zu bytes, not 16", n);
    else if (rc == CUDA_SUCCESS)
        *out = (CUDA_ARRAY_MEMORY_REQUIREMENTS){ .size = wire_load_u64(a), .alignment = wire_load_u64(a + 8) };
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuArrayGetMemoryRequirements)
{
    proxy_obj *a = arena_get(array, PROXY_ARRAY);
    if (!a)
        return shim_is_proxy_handle(array) ? CUDA_ERROR_INVALID_HANDLE : SHIM_LOCAL(cuArrayGetMemoryRequirements);
    return requirements(a, CUDA_OP_cuArrayGetMemoryRequirements, device, memoryRequirements);
}

SHIM_EXPORT(cuMipmappedArrayGetMemoryRequirements)
{
    proxy_obj *m = arena_get(mipmap, PROXY_MIPMAP);
    if (!m)
        return shim_is_proxy_handle(mipmap) ? CUDA_ERROR_INVALID_HANDLE
                                            : SHIM_LOCAL(cuMipmappedArrayGetMemoryRequirements);
    return requirements(m, CUDA_OP_cuMipmappedArrayGetMemoryRequirements, device, memoryRequirements);
}

/* ---- mipmapped arrays ---- */

SHIM_EXPORT(cuMipmappedArrayCreate)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMipmappedArrayCreate);
    if (!pHandle || !pMipmappedArrayDesc || numMipmapLevels == 0 || numMipmapLevels > 32)
        return CUDA_ERROR_INVALID_VALUE;
    if (!channel_bytes(pMipmappedArrayDesc->Format))
        return CUDA_ERROR_NOT_SUPPORTED;
    shim_device *d = shim_device_at(ctx->device);
    proxy_obj *m = arena_new(PROXY_MIPMAP, ctx->device);
    proxy_obj **levels = calloc(numMipmapLevels, sizeof *levels);
    if (!m || !levels) {
        if (m)
            arena_free(m);
        free(levels);
        return levels ? CUDA_ERROR_OUT_OF_MEMORY : shim_nomem("the %u levels of a mipmapped array", numMipmapLevels);
    }
    uint8_t body[20 + IMAGE_ARRAY_DESC_BYTES];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMipmappedArrayCreate);
    wire_put_u64(&w, m->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    image_put_array_desc(&w, pMipmappedArrayDesc);
    wire_put_u32(&w, numMipmapLevels);
    CUresult rc = request(d->link, body, w.off, NULL);
    if (rc) {
        arena_free(m);
        free(levels);
        return rc;
    }
    m->u.mipmap.desc = *pMipmappedArrayDesc;
    m->u.mipmap.levels = numMipmapLevels;
    m->u.mipmap.level = levels;
    *pHandle = (CUmipmappedArray)m;
    return CUDA_SUCCESS;
}

static size_t half(size_t n)
{
    return n > 1 ? n / 2 : n;
}

static pthread_mutex_t level_lock = PTHREAD_MUTEX_INITIALIZER;

SHIM_EXPORT(cuMipmappedArrayGetLevel)
{
    proxy_obj *m = arena_get(hMipmappedArray, PROXY_MIPMAP);
    if (!m)
        return shim_is_proxy_handle(hMipmappedArray) ? CUDA_ERROR_INVALID_HANDLE
                                                     : SHIM_LOCAL(cuMipmappedArrayGetLevel);
    if (!pLevelArray || level >= m->u.mipmap.levels)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&level_lock);
    proxy_obj *a = m->u.mipmap.level[level];
    if (!a && !(a = arena_new(PROXY_ARRAY, m->device)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && !m->u.mipmap.level[level]) {
        uint8_t body[24];
        wire_writer w = wire_writer_init(body, sizeof body);
        wire_put_u32(&w, CUDA_OP_cuMipmappedArrayGetLevel);
        wire_put_u64(&w, m->id);
        wire_put_u32(&w, level);
        wire_put_u64(&w, a->id);
        rc = request(m->link, body, w.off, NULL);
        if (rc) {
            arena_free(a);
        } else {
            CUDA_ARRAY3D_DESCRIPTOR d = m->u.mipmap.desc;
            bool layered = d.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
            for (unsigned i = 0; i < level; i++) {
                d.Width = half(d.Width);
                d.Height = half(d.Height);
                if (!layered)
                    d.Depth = half(d.Depth);
            }
            a->u.array.desc = d;
            a->u.array.elem = channel_bytes(d.Format) * d.NumChannels;
            a->u.array.mipmap = m;
            m->u.mipmap.level[level] = a;
        }
    }
    pthread_mutex_unlock(&level_lock);
    if (rc == CUDA_SUCCESS)
        *pLevelArray = (CUarray)a;
    return rc;
}

SHIM_EXPORT(cuMipmappedArrayDestroy)
{
    proxy_obj *m = arena_get(hMipmappedArray, PROXY_MIPMAP);
    if (!m)
        return shim_is_proxy_handle(hMipmappedArray) ? CUDA_ERROR_INVALID_HANDLE
                                                     : SHIM_LOCAL(cuMipmappedArrayDestroy);
    CUresult rc = link_drop(m->link, CUDA_OP_cuMipmappedArrayDestroy, m->id);
    for (unsigned i = 0; i < m->u.mipmap.levels; i++)
        if (m->u.mipmap.level[i])
            arena_free(m->u.mipmap.level[i]);
    free(m->u.mipmap.level);
    arena_free(m);
    return rc;
}

/* ---- texture and surface objects ---- */

/* Every live object by the agent's value, to find it from the program's. */
static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;
static proxy_obj **images;
static size_t nimages, capimages;

/* The object of value v; values of two agents may coincide: the current
 * proxy context's agent is asked first. */
static proxy_obj *image_find(unsigned long long v, bool surface, bool take)
{
    proxy_obj *ctx = shim_proxy_current(), *found = NULL;
    size_t at = 0;
    pthread_mutex_lock(&image_lock);
    for (size_t i = 0; i < nimages; i++) {
        proxy_obj *o = images[i];
        if (o->u.image.value != v || o->u.image.surface != surface)
            continue;
        if (!found || (ctx && o->link == ctx->link && found->link != ctx->link)) {
            found = o;
            at = i;
        }
    }
    if (found && take)
        images[at] = images[--nimages];
    pthread_mutex_unlock(&image_lock);
    return found;
}

static bool image_add(proxy_obj *o)
{
    pthread_mutex_lock(&image_lock);
    bool ok = true;
    if (nimages == capimages) {
        size_t cap = capimages ? capimages * 2 : 64;
        proxy_obj **n = realloc(images, cap * sizeof *n);
        if (n) {
            images = n;
            capimages = cap;
        } else {
            ok = false;
            shim_nomem("the table of %zu texture and surface objects", cap);
        }
    }
    if (ok)
        images[nimages++] = o;
    pthread_mutex_unlock(&image_lock);
    return ok;
}

/* The proxy device a resource lives on, its array's wire id; -1: not a
 * proxy's (the local driver's), -2: a bad proxy handle. */
static int resource_device(const CUDA_RESOURCE_DESC *r, uint64_t *id)
{
    *id = 0;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
        proxy_obj *a = arena_get(r->res.array.hArray, PROXY_ARRAY);
        if (!a)
            return shim_is_proxy_handle(r->res.array.hArray) ? -2 : -1;
        *id = a->id;
        return a->device;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
        proxy_obj *m = arena_get(r->res.mipmap.hMipmappedArray, PROXY_MIPMAP);
        if (!m)
            return shim_is_proxy_handle(r->res.mipmap.hMipmappedArray) ? -2 : -1;
        *id = m->id;
        return m->device;
    }
    case CU_RESOURCE_TYPE_LINEAR:
        return shim_device_of_pointer(r->res.linear.devPtr);
    case CU_RESOURCE_TYPE_PITCH2D:
        return shim_device_of_pointer(r->res.pitch2D.devPtr);
    default:
        return -2;
    }
}

static CUresult image_create(int device, uint64_t rid, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                             const CUDA_RESOURCE_VIEW_DESC *view, unsigned long long *out)
{
    bool surface = tex == NULL;
    shim_device *d = shim_device_at(device);
    proxy_obj *o = arena_new(PROXY_IMAGE, device);
    proxy_image_descs *descs = calloc(1, sizeof *descs);
    if (!o || !descs) {
        if (o)
            arena_free(o);
        free(descs);
        return descs ? CUDA_ERROR_OUT_OF_MEMORY : shim_nomem("a %s object's descriptions", surface ? "surface" : "texture");
    }
    uint8_t body[16 + IMAGE_RESOURCE_MAX + IMAGE_TEXTURE_BYTES + IMAGE_VIEW_MAX];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, surface ? CUDA_OP_cuSurfObjectCreate : CUDA_OP_cuTexObjectCreate);
    wire_put_u64(&w, o->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    image_put_resource(&w, res, rid);
    if (!surface) {
        image_put_texture(&w, tex);
        image_put_view(&w, view);
    }
    uint64_t v = 0;
    CUresult rc = request(d->link, body, w.off, &v);
    descs->res = *res;
    if (tex)
        descs->tex = *tex;
    if (view) {
        descs->view = *view;
        descs->has_view = true;
    }
    o->u.image.value = v;
    o->u.image.surface = surface;
    o->u.image.descs = descs;
    if (rc == CUDA_SUCCESS && !image_add(o)) {
        link_drop(o->link, surface ? CUDA_OP_cuSurfObjectDestroy : CUDA_OP_cuTexObjectDestroy, o->id);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rc) {
        free(descs);
        arena_free(o);
        return rc;
    }
    *out = v;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuTexObjectCreate)
{
    uint64_t rid;
    int dev = pResDesc ? resource_device(pResDesc, &rid) : -1;
    if (dev == -1)
        return SHIM_LOCAL(cuTexObjectCreate);
    if (dev < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pTexObject || !pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    return image_create(dev, rid, pResDesc, pTexDesc, pResViewDesc, pTexObject);
}

SHIM_EXPORT(cuSurfObjectCreate)
{
    uint64_t rid;
    int dev = pResDesc ? resource_device(pResDesc, &rid) : -1;
    if (dev == -1)
        return SHIM_LOCAL(cuSurfObjectCreate);
    if (dev < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pSurfObject || pResDesc->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    return image_create(dev, rid, pResDesc, NULL, NULL, pSurfObject);
}

static CUresult image_destroy(unsigned long long v, bool surface)
{
    proxy_obj *o = image_find(v, surface, true);
    if (!o)
        return CUDA_ERROR_NOT_FOUND;   /* not a proxy's: the caller asks the local driver */
    CUresult rc = link_drop(o->link, surface ? CUDA_OP_cuSurfObjectDestroy : CUDA_OP_cuTexObjectDestroy, o->id);
    free(o->u.image.descs);
    arena_free(o);
    return rc;
}

SHIM_EXPORT(cuTexObjectDestroy)
{
    CUresult rc = image_destroy(texObject, false);
    return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexObjectDestroy) : rc;
}

SHIM_EXPORT(cuSurfObjectDestroy)
{
    CUresult rc = image_destroy(surfObject, true);
    return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuSurfObjectDestroy) : rc;
}

SHIM_EXPORT(cuTexObjectGetResourceDesc)
{
    proxy_obj *o = image_find(texObject, false, false);
    if (!o)
        return SHIM_LOCAL(cuTexObjectGetResourceDesc);
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->u.image.descs->res;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuTexObjectGetTextureDesc)
{
    proxy_obj *o = image_find(texObject, false, false);
    if (!o)
        return SHIM_LOCAL(cuTexObjectGetTextureDesc);
    if (!pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pTexDesc = o->u.image.descs->tex;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuTexObjectGetResourceViewDesc)
{
    proxy_obj *o = image_find(texObject, false, false);
    if (!o)
        return SHIM_LOCAL(cuTexObjectGetResourceViewDesc);
    if (!pResViewDesc || !o->u.image.descs->has_view)
        return CUDA_ERROR_INVALID_VALUE;
    *pResViewDesc = o->u.image.descs->view;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuSurfObjectGetResourceDesc)
{
    proxy_obj *o = image_find(surfObject, true, false);
    if (!o)
        return SHIM_LOCAL(cuSurfObjectGetResourceDesc);
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->u.image.descs->res;
    return CUDA_SUCCESS;
}

/* ---- copies ---- */

/* One side of a copy as the program named it. */
typedef struct cside {
    CUmemorytype type;         /* HOST, DEVICE (a proxy's) or ARRAY */
    uint8_t *host;
    CUdeviceptr dev;
    proxy_obj *array;
    uint64_t x, y, z, pitch, height;
} cside;

/* Resolves a CUDA_MEMCPY3D side; *local: it is not a proxy's (nor host). */
static CUresult side_of(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray arr, size_t x, size_t y,
                        size_t z, size_t lod, size_t pitch, size_t height, cside *s, bool *local)
{
    *s = (cside){ .x = x, .y = y, .z = z, .pitch = pitch, .height = height };
    *local = false;
    if (lod)
        return CUDA_ERROR_INVALID_VALUE;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        s->type = CU_MEMORYTYPE_HOST;
        s->host = (uint8_t *)(uintptr_t)host;
        return host ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED:
        if (shim_device_of_pointer(dev) >= 0) {
            s->type = CU_MEMORYTYPE_DEVICE;
            s->dev = dev;
            return CUDA_SUCCESS;
        }
        if (type == CU_MEMORYTYPE_UNIFIED) {
            /* Host memory unless the local driver says it is its device's
             * (cudaMemcpyDefault names every side so). */
            const shim_driver *drv = shim_local_driver();
            unsigned mt = 0;
            if (!drv || !drv->fn_cuPointerGetAttribute ||
                drv->fn_cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dev) != CUDA_SUCCESS ||
                mt != CU_MEMORYTYPE_DEVICE) {
                s->type = CU_MEMORYTYPE_HOST;
                s->host = (uint8_t *)(uintptr_t)dev;
                return dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
            }
        }
        *local = true;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:
        s->type = CU_MEMORYTYPE_ARRAY;
        if (!(s->array = arena_get(arr, PROXY_ARRAY))) {
            *local = !shim_is_proxy_handle(arr);
            return *local ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
        }
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The device a non-host side is on. */
static int side_device(const cside *s)
{
    return s->type == CU_MEMORYTYPE_ARRAY ? s->array->device
           : s->type == CU_MEMORYTYPE_DEVICE ? shim_device_of_pointer(s->dev) : -1;
}

/* Checks a box of w bytes x h rows x d slices against an array's extent,
 * as the driver does (the agent must never see a copy it would refuse:
 * a failed record fails the job). */
static CUresult check_array(const cside *s, uint64_t w, uint64_t h, uint64_t d)
{
    const CUDA_ARRAY3D_DESCRIPTOR *a = &s->array->u.array.desc;
    uint64_t row = (uint64_t)a->Width * s->array->u.array.elem;
    uint64_t rows = a->Height ? a->Height : 1, slices = a->Depth ? a->Depth : 1;
    if (s->x > row || w > row - s->x || s->y > rows || h > rows - s->y || s->z > slices || d > slices - s->z ||
        s->x % s->array->u.array.elem || w % s->array->u.array.elem)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static void wire_side(const cside *s, image_side *out)
{
    *out = (image_side){ .x = s->x, .y = s->y, .z = s->z, .pitch = s->pitch, .height = s->height };
    if (s->type == CU_MEMORYTYPE_ARRAY) {
        out->kind = IMAGE_SIDE_ARRAY;
        out->at = s->array->id;
    } else if (s->type == CU_MEMORYTYPE_DEVICE) {
        out->kind = IMAGE_SIDE_DEVICE;
        out->at = s->dev;
    } else {
        out->kind = IMAGE_SIDE_PROGRAM;
    }
}

/* The stream the copy goes on: h when it is a stream of device's agent,
 * else the device's default stream (waiting, as a staged copy must). */
static proxy_obj *stream_on(CUstream h, bool per_thread, int device, CUresult *rc)
{
    proxy_obj *s = NULL;
    int k = shim_stream(h, per_thread, &s, rc);
    if (k < 0)
        return NULL;
    if (k > 0 && s->link == shim_device_at(device)->link)
        return s;
    if (per_thread)
        return shim_per_thread_stream(device, rc);
    return shim_device_at(device)->null_stream;
}

static CUresult hand_box(proxy_obj *st, const cside *src, const cside *dst, uint64_t w, uint64_t h, uint64_t d,
                         uint64_t *v)
{
    uint8_t body[rec_copy_3d_size];
    wire_writer bw = wire_writer_init(body, sizeof body);
    rec_copy_3d box = { .width = w, .height = h, .depth = d };
    wire_side(src, &box.src);
    wire_side(dst, &box.dst);
    rec_copy_3d_put(&bw, &box);
    handover ho = { .op = CUDA_OP_cuMemcpy3DAsync_v2, .stream = st, .body = body, .body_len = bw.off };
    uint8_t *packed = NULL;
    if (src->type == CU_MEMORYTYPE_HOST) {
        /* Rows packed here so the wire carries no gaps (d is 1). */
        if (!(packed = malloc(w * h)))
            return shim_nomem("%llu bytes of packed rows of a 3-D copy", (unsigned long long)(w * h));
        for (uint64_t r = 0; r < h; r++)
            memcpy(packed + r * w, src->host + r * src->pitch, w);
        ho.data = packed;
        ho.data_len = w * h;
        ho.reads_program = true;
    } else if (dst->type == CU_MEMORYTYPE_HOST) {
        ho.dst = dst->host;
        ho.dst_len = w * h;
        ho.dst_pitch = dst->pitch;
        ho.dst_width = w;
    }
    CUresult rc = link_handover(st->link, &ho, v);
    free(packed);
    return rc;
}

/* A box between two sides, at least one a proxy's, all on one agent. */
static CUresult copy_box(cside *src, cside *dst, uint64_t w, uint64_t h, uint64_t d, CUstream hs, bool per_thread,
                         bool wait)
{
    if (!w || !h || !d)
        return CUDA_SUCCESS;
    int sd = side_device(src), dd = side_device(dst);
    int dev = dd >= 0 ? dd : sd;
    if (dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sd >= 0 && dd >= 0 && shim_device_at(sd)->link != shim_device_at(dd)->link) {
        shim_log_unsupported_once("an array copy between two agents", shim_device_at(dev)->label);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUresult rc;
    if (src->type == CU_MEMORYTYPE_ARRAY && (rc = check_array(src, w, h, d)))
        return rc;
    if (dst->type == CU_MEMORYTYPE_ARRAY && (rc = check_array(dst, w, h, d)))
        return rc;
    for (cside *s = src; s; s = s == src ? dst : NULL) {
        if (s->type == CU_MEMORYTYPE_ARRAY)
            continue;
        if (!s->pitch)
            s->pitch = w;
        if (!s->height)
            s->height = h;
        if ((h > 1 || d > 1) && s->pitch < w)
            return CUDA_ERROR_INVALID_VALUE;
        if (d > 1 && s->height < h)
            return CUDA_ERROR_INVALID_VALUE;
        if (s->type == CU_MEMORYTYPE_DEVICE) {
            /* Inside one allocation, as the driver checks: the agent would
             * fail the job on a copy it refuses. */
            uint64_t base, size;
            int dv;
            unsigned __int128 slice = (unsigned __int128)s->height * s->pitch;
            unsigned __int128 end = (s->z + d - 1) * slice + (unsigned __int128)(s->y + h - 1) * s->pitch + s->x + w;
            if (!shim_alloc_find(s->dev, &base, &size, &dv) || end > base + size - s->dev)
                return CUDA_ERROR_INVALID_VALUE;
        }
    }
    proxy_obj *st = stream_on(hs, per_thread, dev, &rc);
    if (!st)
        return rc;
    /* A capture takes no array or 3-D copy (the graph's memcpy nodes hold
     * none): the capture ends invalidated, as for other work rig cannot
     * capture. */
    bool captured = false;
    if (wait && ((rc = capture_misuse(st)) || (rc = capture_unsafe())))
        return rc;
    if ((rc = capture_check(st, &captured)))
        return rc;
    if (captured)
        return capture_refuse(st, "a copy with a CUDA array or 3-D extent");
    /* Managed memory on a device side: what the CPU wrote goes first, and
     * a destination is known written after. */
    uint64_t ext[2][2] = { { 0, 0 }, { 0, 0 } };
    for (int i = 0; i < 2; i++) {
        const cside *x = i ? dst : src;
        if (x->type != CU_MEMORYTYPE_DEVICE)
            continue;
        ext[i][0] = x->dev + (x->z * x->height + x->y) * x->pitch + x->x;
        ext[i][1] = ((d - 1) * x->height + (h - 1)) * x->pitch + w;
        if ((rc = shim_managed_before_access(st, ext[i][0], ext[i][1])))
            return rc;
    }
    uint64_t v = 0;
    bool host = src->type == CU_MEMORYTYPE_HOST || dst->type == CU_MEMORYTYPE_HOST;
    if (!host) {
        rc = hand_box(st, src, dst, w, h, d, &v);
    } else {
        if (src->type == CU_MEMORYTYPE_HOST && (rc = link_wait_program_writes(st->link, st)))
            return rc;
        /* Pieces of whole rows of one slice, a chunk at most; a row longer
         * than a chunk goes in pieces of its own. */
        uint64_t rows = w >= JOB_COPY_CHUNK ? 1 : JOB_COPY_CHUNK / w;
        uint64_t piece_w = w > JOB_COPY_CHUNK ? JOB_COPY_CHUNK : w;
        rc = CUDA_SUCCESS;
        for (uint64_t z = 0; z < d && rc == CUDA_SUCCESS; z++)
            for (uint64_t y = 0; y < h && rc == CUDA_SUCCESS; y += rows)
                for (uint64_t x = 0; x < w && rc == CUDA_SUCCESS; x += piece_w) {
                    uint64_t ph = h - y < rows ? h - y : rows, pw = w - x < piece_w ? w - x : piece_w;
                    cside a = *src, b = *dst;
                    for (cside *s = &a; s; s = s == &a ? &b : NULL) {
                        const cside *o = s == &a ? src : dst;
                        if (s->type == CU_MEMORYTYPE_HOST) {
                            s->host = o->host + (o->z + z) * o->height * o->pitch + (o->y + y) * o->pitch + o->x + x;
                            s->x = s->y = s->z = 0;
                        } else {
                            s->x = o->x + x;
                            s->y = o->y + y;
                            s->z = o->z + z;
                        }
                    }
                    rc = hand_box(st, &a, &b, pw, ph, 1, &v);
                }
    }
    if (rc == CUDA_SUCCESS && ext[1][1])
        shim_managed_written(ext[1][0], ext[1][1]);
    if (rc == CUDA_SUCCESS && wait)
        rc = link_wait(st->link, st, v);
    return rc;
}

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream h, bool per_thread, bool wait, bool *local)
{
    cside s, d;
    bool ls, ld;
    *local = false;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ,
                          p->srcLOD, p->srcPitch, p->srcHeight, &s, &ls);
    if (rc == CUDA_SUCCESS)
        rc = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ,
                     p->dstLOD, p->dstPitch, p->dstHeight, &d, &ld);
    if (rc)
        return rc;
    if (ls || ld || (s.type == CU_MEMORYTYPE_HOST && d.type == CU_MEMORYTYPE_HOST)) {
        /* The local driver's (or plain host memory): proxies take no part. */
        if ((ls || s.type == CU_MEMORYTYPE_HOST) && (ld || d.type == CU_MEMORYTYPE_HOST)) {
            *local = true;
            return CUDA_SUCCESS;
        }
        shim_log_unsupported_once("a 3-D copy between a proxy and local device memory",
                                  shim_device_at(side_device(ls ? &d : &s))->label);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return copy_box(&s, &d, p->WidthInBytes, p->Height, p->Depth, h, per_thread, wait);
}

#define COPY3D_EXPORT(sym, stream, per_thread, wait)                            \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        bool local;                                                             \
        CUresult rc = copy3d(pCopy, stream, per_thread, wait, &local);          \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

COPY3D_EXPORT(cuMemcpy3D_v2, NULL, false, true)
COPY3D_EXPORT(cuMemcpy3D_v2_ptds, NULL, true, true)
COPY3D_EXPORT(cuMemcpy3DAsync_v2, hStream, false, false)
COPY3D_EXPORT(cuMemcpy3DAsync_v2_ptsz, hStream, true, false)

static CUDA_MEMCPY3D from_peer(const CUDA_MEMCPY3D_PEER *p)
{
    return (CUDA_MEMCPY3D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
        .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
        .srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
        .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
        .dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
    };
}

#define PEER3D_EXPORT(sym, stream, per_thread, wait)                            \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!pCopy)                                                             \
            return CUDA_ERROR_INVALID_VALUE;                                    \
        CUDA_MEMCPY3D c = from_peer(pCopy);                                     \
        bool local;                                                             \
        CUresult rc = copy3d(&c, stream, per_thread, wait, &local);             \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

PEER3D_EXPORT(cuMemcpy3DPeer, NULL, false, true)
PEER3D_EXPORT(cuMemcpy3DPeer_ptds, NULL, true, true)
PEER3D_EXPORT(cuMemcpy3DPeerAsync, hStream, false, false)
PEER3D_EXPORT(cuMemcpy3DPeerAsync_ptsz, hStream, true, false)

CUresult shim_copy2d_array(const CUDA_MEMCPY2D *p, CUstream h, bool per_thread, bool wait, bool *local)
{
    CUDA_MEMCPY3D c = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost,
        .srcDevice = p->srcDevice, .srcArray = p->srcArray, .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost,
        .dstDevice = p->dstDevice, .dstArray = p->dstArray, .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = 1,
    };
    return copy3d(&c, h, per_thread, wait, local);
}

/* ---- linear copies with an array: a byte offset through its rows ---- */

/* The bytes left in the row of a linear side at off, and its side there. */
static uint64_t linear_at(const cside *base, uint64_t off, cside *at)
{
    *at = *base;
    if (base->type == CU_MEMORYTYPE_HOST) {
        at->host = base->host + off;
        return UINT64_MAX;
    }
    if (base->type == CU_MEMORYTYPE_DEVICE) {
        at->dev = base->dev + off;
        return UINT64_MAX;
    }
    const CUDA_ARRAY3D_DESCRIPTOR *a = &base->array->u.array.desc;
    uint64_t row = (uint64_t)a->Width * base->array->u.array.elem, rows = a->Height ? a->Height : 1;
    at->x = off % row;
    at->y = (off / row) % rows;
    at->z = off / row / rows;
    return row - at->x;
}

static CUresult linear(CUmemorytype dt, CUarray da, size_t doff, void *dh, CUdeviceptr dd, CUmemorytype st,
                       CUarray sa, size_t soff, const void *sh, CUdeviceptr sd, size_t n, CUstream h,
                       bool per_thread, bool wait, bool *local)
{
    cside s, d;
    bool ls, ld;
    *local = false;
    CUresult rc = side_of(st, sh, sd, sa, 0, 0, 0, 0, 0, 0, &s, &ls);
    if (rc == CUDA_SUCCESS)
        rc = side_of(dt, dh, dd, da, 0, 0, 0, 0, 0, 0, &d, &ld);
    if (rc)
        return rc;
    if (ls || ld) {
        if ((ls || s.type == CU_MEMORYTYPE_HOST) && (ld || d.type == CU_MEMORYTYPE_HOST)) {
            *local = true;
            return CUDA_SUCCESS;
        }
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    /* Bounds of the array sides, whole. */
    for (cside *x = &s; x; x = x == &s ? &d : NULL) {
        if (x->type != CU_MEMORYTYPE_ARRAY)
            continue;
        const CUDA_ARRAY3D_DESCRIPTOR *a = &x->array->u.array.desc;
        uint64_t total = (uint64_t)a->Width * x->array->u.array.elem * (a->Height ? a->Height : 1) *
                         (a->Depth ? a->Depth : 1);
        uint64_t off = x == &s ? soff : doff;
        if (off > total || n > total - off)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (n == 0)
        return CUDA_SUCCESS;
    /* One piece per row of either array side. */
    for (uint64_t done = 0; done < n && rc == CUDA_SUCCESS;) {
        cside a, b;
        uint64_t ra = linear_at(&s, soff + done, &a), rb = linear_at(&d, doff + done, &b);
        uint64_t len = n - done;
        if (ra < len)
            len = ra;
        if (rb < len)
            len = rb;
        bool last = done + len == n;
        rc = copy_box(&a, &b, len, 1, 1, h, per_thread, wait && last);
        done += len;
    }
    return rc;
}

#define AH CU_MEMORYTYPE_ARRAY
#define HH CU_MEMORYTYPE_HOST
#define DH CU_MEMORYTYPE_DEVICE
#define LINEAR_EXPORT(sym, dt, da, doff, dh, dd, st, sa, soff, sh, sd, stream, per_thread, wait) \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        bool local;                                                             \
        CUresult rc = linear(dt, da, doff, dh, dd, st, sa, soff, sh, sd, ByteCount, stream, per_thread, wait, \
                             &local);                                           \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

LINEAR_EXPORT(cuMemcpyAtoH_v2, HH, NULL, 0, dstHost, 0, AH, srcArray, srcOffset, NULL, 0, NULL, false, true)
LINEAR_EXPORT(cuMemcpyAtoH_v2_ptds, HH, NULL, 0, dstHost, 0, AH, srcArray, srcOffset, NULL, 0, NULL, true, true)
LINEAR_EXPORT(cuMemcpyHtoA_v2, AH, dstArray, dstOffset, NULL, 0, HH, NULL, 0, srcHost, 0, NULL, false, true)
LINEAR_EXPORT(cuMemcpyHtoA_v2_ptds, AH, dstArray, dstOffset, NULL, 0, HH, NULL, 0, srcHost, 0, NULL, true, true)
LINEAR_EXPORT(cuMemcpyAtoD_v2, DH, NULL, 0, NULL, dstDevice, AH, srcArray, srcOffset, NULL, 0, NULL, false, true)
LINEAR_EXPORT(cuMemcpyAtoD_v2_ptds, DH, NULL, 0, NULL, dstDevice, AH, srcArray, srcOffset, NULL, 0, NULL, true, true)
LINEAR_EXPORT(cuMemcpyDtoA_v2, AH, dstArray, dstOffset, NULL, 0, DH, NULL, 0, NULL, srcDevice, NULL, false, true)
LINEAR_EXPORT(cuMemcpyDtoA_v2_ptds, AH, dstArray, dstOffset, NULL, 0, DH, NULL, 0, NULL, srcDevice, NULL, true, true)
LINEAR_EXPORT(cuMemcpyAtoA_v2, AH, dstArray, dstOffset, NULL, 0, AH, srcArray, srcOffset, NULL, 0, NULL, false, true)
LINEAR_EXPORT(cuMemcpyAtoA_v2_ptds, AH, dstArray, dstOffset, NULL, 0, AH, srcArray, srcOffset, NULL, 0, NULL, true,
              true)
LINEAR_EXPORT(cuMemcpyAtoHAsync_v2, HH, NULL, 0, dstHost, 0, AH, srcArray, srcOffset, NULL, 0, hStream, false, false)
LINEAR_EXPORT(cuMemcpyAtoHAsync_v2_ptsz, HH, NULL, 0, dstHost, 0, AH, srcArray, srcOffset, NULL, 0, hStream, true,
              false)
LINEAR_EXPORT(cuMemcpyHtoAAsync_v2, AH, dstArray, dstOffset, NULL, 0, HH, NULL, 0, srcHost, 0, hStream, false, false)
LINEAR_EXPORT(cuMemcpyHtoAAsync_v2_ptsz, AH, dstArray, dstOffset, NULL, 0, HH, NULL, 0, srcHost, 0, hStream, true,
              false)
