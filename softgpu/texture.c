/* Texture and surface objects: a resource (an array, a mipmapped array's
 * level 0, linear or pitched device memory) with sampling state, named to
 * kernels by a 64-bit value (the object's address here). The engine asks
 * soft_image_find for what a handle names when it runs tex, suld, sust. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

typedef struct soft_texobj {
    soft_image img;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;
    CUDA_RESOURCE_VIEW_DESC view;
    bool has_view;
    struct CUctx_st *ctx;
} soft_texobj;

static unsigned channel_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* The image of a resource; surface: only arrays made for load and store. */
static CUresult resource_image(const CUDA_RESOURCE_DESC *r, bool surface, soft_image *img)
{
    if (r->flags)
        return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
        struct CUarray_st *a;
        SOFT_TRY(soft_array_get(r->res.array.hArray, &a));
        if (surface && !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST))
            return CUDA_ERROR_INVALID_VALUE;
        *img = a->img;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
        if (surface)
            return CUDA_ERROR_INVALID_VALUE;
        CUmipmappedArray m = r->res.mipmap.hMipmappedArray;
        if (!m || !soft_handle_valid(m, SOFT_MIPMAP))
            return CUDA_ERROR_INVALID_HANDLE;
        /* Level 0 only: softgpu samples no other level. */
        *img = m->level[0]->img;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_LINEAR: {
        unsigned cb = channel_bytes(r->res.linear.format), ch = r->res.linear.numChannels;
        if (surface || !cb || (ch != 1 && ch != 2 && ch != 4) || !r->res.linear.devPtr ||
            r->res.linear.sizeInBytes < cb * ch ||
            !soft_range_covers(r->res.linear.devPtr, r->res.linear.sizeInBytes))
            return CUDA_ERROR_INVALID_VALUE;
        uint64_t n = r->res.linear.sizeInBytes / (cb * ch);
        if (n > (1u << 28))
            return CUDA_ERROR_INVALID_VALUE;   /* cuDeviceGetTexture1DLinearMaxWidth */
        *img = (soft_image){
            .data = (uint8_t *)(uintptr_t)r->res.linear.devPtr, .width = (uint32_t)n, .height = 1,
            .depth = 1, .format = r->res.linear.format, .channels = ch, .elem = cb * ch, .levels = 1,
            .linear = true, .device_memory = true,
        };
        img->pitch = img->slice = n * img->elem;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
        unsigned cb = channel_bytes(r->res.pitch2D.format), ch = r->res.pitch2D.numChannels;
        size_t w = r->res.pitch2D.width, h = r->res.pitch2D.height, p = r->res.pitch2D.pitchInBytes;
        if (surface || !cb || (ch != 1 && ch != 2 && ch != 4) || !w || !h || w > 65536 || h > 65536 ||
            p < w * cb * ch || !soft_range_covers(r->res.pitch2D.devPtr, (h - 1) * p + w * cb * ch))
            return CUDA_ERROR_INVALID_VALUE;
        *img = (soft_image){
            .data = (uint8_t *)(uintptr_t)r->res.pitch2D.devPtr, .width = (uint32_t)w, .height = (uint32_t)h,
            .depth = 1, .format = r->res.pitch2D.format, .channels = ch, .elem = cb * ch, .levels = 1,
            .pitch = p, .slice = p * h, .device_memory = true,
        };
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult object_new(const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                           const CUDA_RESOURCE_VIEW_DESC *view, bool surface, soft_texobj **out)
{
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    if (!res)
        return CUDA_ERROR_INVALID_VALUE;
    soft_image img;
    SOFT_TRY(resource_image(res, surface, &img));
    if (view && view->format != CU_RES_VIEW_FORMAT_NONE) {
        soft_log("cuTexObjectCreate: resource views with a format of their own are not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (tex) {
        for (int i = 0; i < 3; i++)
            if ((unsigned)tex->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER)
                return CUDA_ERROR_INVALID_VALUE;
        if ((unsigned)tex->filterMode > CU_TR_FILTER_MODE_LINEAR)
            return CUDA_ERROR_INVALID_VALUE;
        if (tex->flags & CU_TRSF_SRGB) {
            soft_log("cuTexObjectCreate: sRGB textures are not supported");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        for (int i = 0; i < 3; i++)
            img.address[i] = tex->addressMode[i];
        img.filter = tex->filterMode;
        img.normalized = tex->flags & CU_TRSF_NORMALIZED_COORDINATES;
        img.read_as_integer = tex->flags & CU_TRSF_READ_AS_INTEGER;
        memcpy(img.border, tex->borderColor, sizeof img.border);
    }
    soft_texobj *o = calloc(1, sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    o->img = img;
    o->res = *res;
    if (tex)
        o->tex = *tex;
    if (view) {
        o->view = *view;
        o->has_view = true;
    }
    o->ctx = c;
    if (!soft_handle_add(o, surface ? SOFT_SURFOBJ : SOFT_TEXOBJ)) {
        free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = o;
    return CUDA_SUCCESS;
}

static CUresult object_get(unsigned long long h, bool surface, soft_texobj **out)
{
    SOFT_TRY(soft_check_init());
    void *p = (void *)(uintptr_t)h;
    if (!h || !soft_handle_valid(p, surface ? SOFT_SURFOBJ : SOFT_TEXOBJ))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = p;
    return CUDA_SUCCESS;
}

static CUresult object_destroy(unsigned long long h, bool surface)
{
    soft_texobj *o;
    SOFT_TRY(object_get(h, surface, &o));
    soft_handle_remove(o);
    /* Kernels queued before may still sample it. */
    if (soft_handle_valid(o->ctx, SOFT_CTX))
        soft_ctx_sync(o->ctx);
    free(o);
    return CUDA_SUCCESS;
}

const soft_image *soft_image_find(uint64_t handle, bool surface)
{
    void *p = (void *)(uintptr_t)handle;
    if (!handle || !soft_handle_valid(p, surface ? SOFT_SURFOBJ : SOFT_TEXOBJ))
        return NULL;
    const soft_texobj *o = p;
    /* Its array destroyed (or its memory freed) since: a fault, not a
     * read of storage that is gone. */
    if (o->res.resType == CU_RESOURCE_TYPE_ARRAY &&
        (!soft_handle_valid(o->res.res.array.hArray, SOFT_ARRAY) || o->res.res.array.hArray->img.data != o->img.data))
        return NULL;
    if (o->res.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
        (!soft_handle_valid(o->res.res.mipmap.hMipmappedArray, SOFT_MIPMAP) ||
         o->res.res.mipmap.hMipmappedArray->level[0]->img.data != o->img.data))
        return NULL;
    if (o->img.device_memory &&
        !soft_range_covers((uintptr_t)o->img.data, (o->img.height - 1) * o->img.pitch + (uint64_t)o->img.width * o->img.elem))
        return NULL;
    return &o->img;
}

SOFT_API CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                            const CUDA_TEXTURE_DESC *pTexDesc,
                                            const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    if (!pTexObject || !pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    soft_texobj *o;
    SOFT_TRY(object_new(pResDesc, pTexDesc, pResViewDesc, false, &o));
    *pTexObject = (CUtexObject)(uintptr_t)o;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject) { return object_destroy(texObject, false); }

SOFT_API CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    soft_texobj *o;
    SOFT_TRY(object_get(texObject, false, &o));
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->res;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *pTexDesc, CUtexObject texObject)
{
    soft_texobj *o;
    SOFT_TRY(object_get(texObject, false, &o));
    if (!pTexDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pTexDesc = o->tex;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *pResViewDesc,
                                                         CUtexObject texObject)
{
    soft_texobj *o;
    SOFT_TRY(object_get(texObject, false, &o));
    if (!pResViewDesc || !o->has_view)
        return CUDA_ERROR_INVALID_VALUE;
    *pResViewDesc = o->view;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    if (!pSurfObject)
        return CUDA_ERROR_INVALID_VALUE;
    if (pResDesc && pResDesc->resType != CU_RESOURCE_TYPE_ARRAY)
        return CUDA_ERROR_INVALID_VALUE;
    soft_texobj *o;
    SOFT_TRY(object_new(pResDesc, NULL, NULL, true, &o));
    *pSurfObject = (CUsurfObject)(uintptr_t)o;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject) { return object_destroy(surfObject, true); }

SOFT_API CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
    soft_texobj *o;
    SOFT_TRY(object_get(surfObject, true, &o));
    if (!pResDesc)
        return CUDA_ERROR_INVALID_VALUE;
    *pResDesc = o->res;
    return CUDA_SUCCESS;
}
