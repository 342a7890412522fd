/* CUDA arrays and mipmapped arrays: opaque element storage that copies,
 * texture and surface objects reach. softgpu keeps the elements row-major,
 * rows packed, slices (depth, layers, cube faces) one after another, in
 * zeroed host memory counted against the device's memory. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

#define SOFT_ARRAY_MAX_DIM 65536u   /* width and height (a GPU's 2-D limit at least) */
#define SOFT_ARRAY_MAX_DEPTH 16384u

/* Bytes of one channel of format f and the channels it implies (0: any of
 * 1, 2, 4 given by NumChannels); 0 bytes: a format softgpu does not store. */
static unsigned format_bytes(CUarray_format f, unsigned *implied)
{
    *implied = 0;
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: *implied = 1; return 1;
    case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2: *implied = 2; return 1;
    case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4: *implied = 4; return 1;
    case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: *implied = 1; return 2;
    case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: *implied = 2; return 2;
    case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: *implied = 4; return 2;
    default: return 0;
    }
}

/* Checks a descriptor as cuArray3DCreate does; fills the geometry of img. */
static CUresult check_desc(const CUDA_ARRAY3D_DESCRIPTOR *d, soft_image *img)
{
    unsigned implied;
    unsigned cb = format_bytes(d->Format, &implied);
    if (!cb) {
        soft_log("cuArray3DCreate: format 0x%x is not supported (block-compressed and video formats)",
                 (unsigned)d->Format);
        return d->Format == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    }
    unsigned ch = d->NumChannels;
    if ((ch != 1 && ch != 2 && ch != 4) || (implied && ch != implied))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                     CUDA_ARRAY3D_TEXTURE_GATHER;
    if (d->Flags & ~known) {
        soft_log("cuArray3DCreate: flags 0x%x are not supported", d->Flags & ~known);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    bool layered = d->Flags & CUDA_ARRAY3D_LAYERED, cube = d->Flags & CUDA_ARRAY3D_CUBEMAP;
    size_t w = d->Width, h = d->Height, dp = d->Depth;
    if (w == 0 || w > SOFT_ARRAY_MAX_DIM || h > SOFT_ARRAY_MAX_DIM || dp > SOFT_ARRAY_MAX_DEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    if (h == 0 && dp && !layered)
        return CUDA_ERROR_INVALID_VALUE;       /* 3-D needs a height */
    if (layered && dp == 0)
        return CUDA_ERROR_INVALID_VALUE;       /* layers are the depth */
    if (cube && (w != h || (layered ? dp % 6 : dp != 6)))
        return CUDA_ERROR_INVALID_VALUE;
    *img = (soft_image){
        .width = (uint32_t)w, .height = h ? (uint32_t)h : 1, .depth = dp ? (uint32_t)dp : 1,
        .format = d->Format, .channels = ch, .elem = cb * ch, .levels = 1,
        .layered = layered, .cubemap = cube,
    };
    img->pitch = (uint64_t)img->width * img->elem;
    img->slice = img->pitch * img->height;
    return CUDA_SUCCESS;
}

/* A new array of descriptor d (checked) owned by ctx. */
static CUresult array_new(struct CUctx_st *ctx, const CUDA_ARRAY3D_DESCRIPTOR *d, struct CUarray_st **out)
{
    soft_image img;
    SOFT_TRY(check_desc(d, &img));
    uint64_t bytes = img.slice * img.depth;
    struct CUarray_st *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!soft_device_reserve(ctx->device, bytes)) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    img.data = soft_pages_alloc(bytes);
    if (!img.data || !soft_handle_add(a, SOFT_ARRAY)) {
        if (img.data)
            soft_pages_free(img.data, bytes);
        soft_device_unreserve(ctx->device, bytes);
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->desc = *d;
    a->ctx = ctx;
    a->device = ctx->device;
    a->img = img;
    a->bytes = bytes;
    *out = a;
    return CUDA_SUCCESS;
}

static void array_free(struct CUarray_st *a)
{
    soft_handle_remove(a);
    soft_pages_free(a->img.data, a->bytes);
    soft_device_unreserve(a->device, a->bytes);
    free(a);
}

CUresult soft_array_get(CUarray h, struct CUarray_st **out)
{
    SOFT_TRY(soft_check_init());
    if (!h || !soft_handle_valid(h, SOFT_ARRAY))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = h;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    if (!pHandle || !pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    SOFT_TRY(soft_capture_unsafe());
    return array_new(c, pAllocateArray, pHandle);
}

SOFT_API CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    if (!pHandle || !pAllocateArray)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d = {
        .Width = pAllocateArray->Width, .Height = pAllocateArray->Height,
        .Format = pAllocateArray->Format, .NumChannels = pAllocateArray->NumChannels,
    };
    return cuArray3DCreate_v2(pHandle, &d);
}

SOFT_API CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_array_get(hArray, &a));
    if (!pArrayDescriptor)
        return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = a->desc;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor, CUarray hArray)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_array_get(hArray, &a));
    if (!pArrayDescriptor)
        return CUDA_ERROR_INVALID_VALUE;
    /* As the driver: a 3-D or layered array has no 2-D descriptor. */
    if (a->desc.Depth)
        return CUDA_ERROR_INVALID_VALUE;
    *pArrayDescriptor = (CUDA_ARRAY_DESCRIPTOR){
        .Width = a->desc.Width, .Height = a->desc.Height,
        .Format = a->desc.Format, .NumChannels = a->desc.NumChannels,
    };
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                                       CUarray array, CUdevice device)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_array_get(array, &a));
    SOFT_TRY(soft_check_device(device));
    if (!memoryRequirements)
        return CUDA_ERROR_INVALID_VALUE;
    *memoryRequirements = (CUDA_ARRAY_MEMORY_REQUIREMENTS){
        .size = (a->bytes + 65535) & ~(size_t)65535, .alignment = 65536,
    };
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_array_get(hArray, &a));
    if (a->owner)
        return CUDA_ERROR_INVALID_HANDLE;   /* a level goes with its mipmapped array */
    /* As cuMemFree: work still queued may copy to or sample it. */
    if (soft_handle_valid(a->ctx, SOFT_CTX))
        soft_ctx_sync(a->ctx);
    array_free(a);
    return CUDA_SUCCESS;
}

/* ---- mipmapped arrays ---- */

static size_t half(size_t n)
{
    return n > 1 ? n / 2 : n;
}

SOFT_API CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                                 const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                                 unsigned int numMipmapLevels)
{
    if (!pHandle || !pMipmappedArrayDesc || numMipmapLevels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c;
    SOFT_TRY(soft_ctx_enter(&c));
    SOFT_TRY(soft_capture_unsafe());
    const CUDA_ARRAY3D_DESCRIPTOR *d = pMipmappedArrayDesc;
    bool layered = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    size_t big = d->Width > d->Height ? d->Width : d->Height;
    if (!layered && d->Depth > big)
        big = d->Depth;
    unsigned most = 1;
    while (big > 1) {
        big /= 2;
        most++;
    }
    if (numMipmapLevels > most)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUmipmappedArray_st *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->level = calloc(numMipmapLevels, sizeof *m->level);
    if (!m->level) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->desc = *d;
    CUDA_ARRAY3D_DESCRIPTOR ld = *d;
    CUresult r = CUDA_SUCCESS;
    for (unsigned i = 0; i < numMipmapLevels && r == CUDA_SUCCESS; i++) {
        r = array_new(c, &ld, &m->level[i]);
        if (r == CUDA_SUCCESS) {
            m->level[i]->owner = m;
            m->levels++;
        }
        ld.Width = half(ld.Width);
        ld.Height = half(ld.Height);
        if (!layered)
            ld.Depth = half(ld.Depth);
    }
    if (r == CUDA_SUCCESS && !soft_handle_add(m, SOFT_MIPMAP))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        for (unsigned i = 0; i < m->levels; i++)
            array_free(m->level[i]);
        free(m->level);
        free(m);
        return r;
    }
    for (unsigned i = 0; i < m->levels; i++)
        m->level[i]->img.levels = m->levels;
    *pHandle = m;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray hMipmappedArray,
                                                   unsigned int level)
{
    SOFT_TRY(soft_check_init());
    if (!hMipmappedArray || !soft_handle_valid(hMipmappedArray, SOFT_MIPMAP))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pLevelArray || level >= hMipmappedArray->levels)
        return CUDA_ERROR_INVALID_VALUE;
    *pLevelArray = hMipmappedArray->level[level];
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    SOFT_TRY(soft_check_init());
    if (!hMipmappedArray || !soft_handle_valid(hMipmappedArray, SOFT_MIPMAP))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmipmappedArray_st *m = hMipmappedArray;
    soft_handle_remove(m);
    if (m->levels && soft_handle_valid(m->level[0]->ctx, SOFT_CTX))
        soft_ctx_sync(m->level[0]->ctx);
    for (unsigned i = 0; i < m->levels; i++)
        array_free(m->level[i]);
    free(m->level);
    free(m);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                                                CUmipmappedArray mipmap, CUdevice device)
{
    SOFT_TRY(soft_check_init());
    if (!mipmap || !soft_handle_valid(mipmap, SOFT_MIPMAP))
        return CUDA_ERROR_INVALID_HANDLE;
    SOFT_TRY(soft_check_device(device));
    if (!memoryRequirements)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t total = 0;
    for (unsigned i = 0; i < mipmap->levels; i++)
        total += mipmap->level[i]->bytes;
    *memoryRequirements = (CUDA_ARRAY_MEMORY_REQUIREMENTS){
        .size = (total + 65535) & ~(size_t)65535, .alignment = 65536,
    };
    return CUDA_SUCCESS;
}
