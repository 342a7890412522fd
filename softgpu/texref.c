/* Texture and surface references (the driver API's legacy binding
 * model): a module's `.global .texref` / `.global .surfref` variables as
 * objects the host binds to an array, a mipmapped array's level 0, or
 * linear or pitched device memory, with sampling state set piecewise. A
 * launch copies every binding of its module as it is then (soft_refs_snapshot);
 * kernels sample through the texture-object code (ptx_image.c). */
#define CUDA_ENABLE_DEPRECATED 1
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

enum bind { BIND_NONE, BIND_ARRAY, BIND_MIPMAP, BIND_LINEAR, BIND_PITCH2D };

struct CUtexref_st {
    struct CUmod_st *mod;            /* NULL: made by cuTexRefCreate */
    uint32_t index;                  /* its soft_program_ref index */
    bool surface;                    /* a CUsurfref */
    enum bind bind;
    struct CUarray_st *array;
    struct CUmipmappedArray_st *mip;
    CUdeviceptr dptr;
    size_t bytes, pitch, width, height;   /* linear: bytes; pitched: the rest */
    CUarray_format format;
    int channels;
    CUaddress_mode address[3];
    CUfilter_mode filter, mip_filter;
    unsigned flags, max_aniso;
    float border[4], bias, min_clamp, max_clamp;
};

/* Guards every reference's state: setters against launches copying it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned channel_bytes(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static struct CUtexref_st *ref_new(struct CUmod_st *mod, uint32_t index, bool surface)
{
    struct CUtexref_st *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    *r = (struct CUtexref_st){ .mod = mod, .index = index, .surface = surface,
                               .format = CU_AD_FORMAT_FLOAT, .channels = 1, .max_aniso = 1 };
    if (!soft_handle_add(r, surface ? SOFT_SURFREF : SOFT_TEXREF)) {
        free(r);
        return NULL;
    }
    return r;
}

CUresult soft_refs_make(struct CUmod_st *mod)
{
    uint32_t n = soft_program_ref_count(mod->prog);
    if (!n)
        return CUDA_SUCCESS;
    mod->refs = calloc(n, sizeof *mod->refs);
    if (!mod->refs)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n; i++) {
        bool surface = false;
        soft_program_ref(mod->prog, i, &surface);
        if (!(mod->refs[i] = ref_new(mod, i, surface)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        mod->nrefs = i + 1;
    }
    return CUDA_SUCCESS;
}

void soft_refs_free(struct CUmod_st *mod)
{
    for (uint32_t i = 0; i < mod->nrefs; i++) {
        soft_handle_remove(mod->refs[i]);
        free(mod->refs[i]);
    }
    free(mod->refs);
    mod->refs = NULL;
    mod->nrefs = 0;
}

/* What reference r names now, with its sampling state; false: unbound or
 * its array or memory gone. Called with lock held. */
static bool ref_image(const struct CUtexref_st *r, soft_image *img)
{
    *img = (soft_image){ 0 };
    unsigned cb = channel_bytes(r->format), ch = (unsigned)r->channels;
    switch (r->bind) {
    case BIND_ARRAY:
        if (!soft_handle_valid(r->array, SOFT_ARRAY))
            return false;
        *img = r->array->img;
        break;
    case BIND_MIPMAP:
        if (!soft_handle_valid(r->mip, SOFT_MIPMAP))
            return false;
        *img = r->mip->level[0]->img;   /* level 0 only, as for texture objects */
        break;
    case BIND_LINEAR: {
        uint64_t n = r->bytes / (cb * ch);
        if (!n || !soft_range_covers(r->dptr, r->bytes))
            return false;
        *img = (soft_image){ .data = (uint8_t *)(uintptr_t)r->dptr, .width = (uint32_t)n, .height = 1,
                             .depth = 1, .levels = 1, .linear = true, .device_memory = true };
        img->pitch = img->slice = n * cb * ch;
        break;
    }
    case BIND_PITCH2D:
        if (r->pitch < r->width * cb * ch ||
            !soft_range_covers(r->dptr, (r->height - 1) * r->pitch + r->width * cb * ch))
            return false;
        *img = (soft_image){ .data = (uint8_t *)(uintptr_t)r->dptr, .width = (uint32_t)r->width,
                             .height = (uint32_t)r->height, .depth = 1, .levels = 1, .pitch = r->pitch,
                             .slice = r->pitch * r->height, .device_memory = true };
        break;
    default:
        return false;
    }
    if (r->bind == BIND_LINEAR || r->bind == BIND_PITCH2D) {
        img->format = r->format;
        img->channels = ch;
        img->elem = cb * ch;
    }
    if (!r->surface) {
        for (int i = 0; i < 3; i++)
            img->address[i] = r->address[i];
        img->filter = r->filter;
        img->normalized = r->flags & CU_TRSF_NORMALIZED_COORDINATES;
        img->read_as_integer = r->flags & CU_TRSF_READ_AS_INTEGER;
        memcpy(img->border, r->border, sizeof img->border);
    }
    return img->data != NULL;
}

CUresult soft_refs_snapshot(struct CUmod_st *mod, soft_image **out)
{
    *out = NULL;
    if (!mod->nrefs)
        return CUDA_SUCCESS;
    soft_image *s = calloc(mod->nrefs, sizeof *s);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    for (uint32_t i = 0; i < mod->nrefs; i++)
        if (!ref_image(mod->refs[i], &s[i]))
            s[i] = (soft_image){ 0 };
    pthread_mutex_unlock(&lock);
    *out = s;
    return CUDA_SUCCESS;
}

void soft_refs_recheck(soft_image *refs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (refs[i].device_memory &&
            !soft_range_covers((uintptr_t)refs[i].data,
                               (refs[i].height - 1) * refs[i].pitch + (uint64_t)refs[i].width * refs[i].elem))
            refs[i].data = NULL;
}

/* ---- getting references ---- */

static CUresult module_ref(struct CUtexref_st **out, CUmodule hmod, const char *name, bool surface)
{
    SOFT_TRY(soft_check_init());
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || !soft_handle_valid(hmod, SOFT_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUmod_st *m = hmod;
    for (uint32_t i = 0; i < m->nrefs; i++) {
        bool s = false;
        const char *n = soft_program_ref(m->prog, i, &s);
        if (s == surface && n && strcmp(n, name) == 0) {
            *out = m->refs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

SOFT_API CUresult CUDAAPI cuModuleGetTexRef(CUtexref *pTexRef, CUmodule hmod, const char *name)
{
    return module_ref(pTexRef, hmod, name, false);
}

SOFT_API CUresult CUDAAPI cuModuleGetSurfRef(CUsurfref *pSurfRef, CUmodule hmod, const char *name)
{
    struct CUtexref_st *r = NULL;
    SOFT_TRY(module_ref(pSurfRef ? &r : NULL, hmod, name, true));
    *pSurfRef = (CUsurfref)(void *)r;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTexRefCreate(CUtexref *pTexRef)
{
    SOFT_TRY(soft_check_init());
    if (!pTexRef)
        return CUDA_ERROR_INVALID_VALUE;
    /* Bindable, but no kernel can name it: only module references reach
     * launches (as on a GPU, where cuParamSetTexRef needs a module's). */
    struct CUtexref_st *r = ref_new(NULL, 0, false);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pTexRef = r;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuTexRefDestroy(CUtexref hTexRef)
{
    SOFT_TRY(soft_check_init());
    if (!hTexRef || !soft_handle_valid(hTexRef, SOFT_TEXREF) || hTexRef->mod)
        return CUDA_ERROR_INVALID_HANDLE;   /* a module's goes with its module */
    soft_handle_remove(hTexRef);
    free(hTexRef);
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuParamSetTexRef(CUfunction hfunc, int texunit, CUtexref hTexRef)
{
    SOFT_TRY(soft_check_init());
    struct CUfunc_st *f = soft_func_get(hfunc);
    if (!f || !hTexRef || !soft_handle_valid(hTexRef, SOFT_TEXREF))
        return CUDA_ERROR_INVALID_HANDLE;
    /* Every launch sees its module's references already; only the one
     * texture unit CUDA still accepts. */
    if (texunit != CU_PARAM_TR_DEFAULT || hTexRef->mod != f->mod)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- setters and getters: each takes the lock over the reference ---- */

/* The live texture reference h, locked; NULL sets *rc. */
static struct CUtexref_st *locked(const void *h, bool surface, CUresult *rc)
{
    *rc = soft_check_init();
    if (*rc)
        return NULL;
    if (!h || !soft_handle_valid(h, surface ? SOFT_SURFREF : SOFT_TEXREF)) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    pthread_mutex_lock(&lock);
    return (struct CUtexref_st *)(uintptr_t)h;
}

#define WITH_REF(h, surface, ...)                              \
    do {                                                       \
        CUresult rc_;                                          \
        struct CUtexref_st *r = locked((h), (surface), &rc_);  \
        if (!r)                                                \
            return rc_;                                        \
        __VA_ARGS__                                            \
        pthread_mutex_unlock(&lock);                           \
        return rc_;                                            \
    } while (0)

static void unbind(struct CUtexref_st *r)
{
    r->bind = BIND_NONE;
    r->array = NULL;
    r->mip = NULL;
    r->dptr = 0;
    r->bytes = r->pitch = r->width = r->height = 0;
}

SOFT_API CUresult CUDAAPI cuTexRefSetArray(CUtexref hTexRef, CUarray hArray, unsigned int Flags)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_check_init());
    SOFT_TRY(soft_array_get(hArray, &a));
    if (Flags & ~(unsigned)CU_TRSA_OVERRIDE_FORMAT)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        unbind(r);
        r->bind = BIND_ARRAY;
        r->array = a;
        r->format = a->desc.Format;   /* the array's format overrides the reference's */
        r->channels = (int)a->desc.NumChannels;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefSetMipmappedArray(CUtexref hTexRef, CUmipmappedArray hMipmappedArray,
                                                    unsigned int Flags)
{
    SOFT_TRY(soft_check_init());
    if (!hMipmappedArray || !soft_handle_valid(hMipmappedArray, SOFT_MIPMAP))
        return CUDA_ERROR_INVALID_HANDLE;
    if (Flags & ~(unsigned)CU_TRSA_OVERRIDE_FORMAT)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        unbind(r);
        r->bind = BIND_MIPMAP;
        r->mip = hMipmappedArray;
        r->format = hMipmappedArray->desc.Format;
        r->channels = (int)hMipmappedArray->desc.NumChannels;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefSetAddress_v2(size_t *ByteOffset, CUtexref hTexRef, CUdeviceptr dptr,
                                                size_t bytes)
{
    SOFT_TRY(soft_check_init());
    /* 2^27 elements at most (the 1-D linear width a GPU allows) */
    if (!dptr || !bytes || bytes > ((size_t)1 << 27) * 16 || !soft_range_covers(dptr, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        unbind(r);
        r->bind = BIND_LINEAR;
        r->dptr = dptr;
        r->bytes = bytes;
        /* No alignment rule here: fetches need no offset. */
        if (ByteOffset)
            *ByteOffset = 0;
    });
}

static CUresult set_address2d(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc, CUdeviceptr dptr, size_t Pitch)
{
    SOFT_TRY(soft_check_init());
    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned cb = channel_bytes(desc->Format), ch = desc->NumChannels;
    size_t w = desc->Width, h = desc->Height;
    if (!cb || (ch != 1 && ch != 2 && ch != 4) || !w || !h || w > 65536 || h > 65536 || Pitch < w * cb * ch ||
        !dptr || !soft_range_covers(dptr, (h - 1) * Pitch + w * cb * ch))
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        unbind(r);
        r->bind = BIND_PITCH2D;
        r->dptr = dptr;
        r->width = w;
        r->height = h;
        r->pitch = Pitch;
        r->format = desc->Format;
        r->channels = (int)ch;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefSetAddress2D_v2(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc,
                                                  CUdeviceptr dptr, size_t Pitch)
{
    return set_address2d(hTexRef, desc, dptr, Pitch);
}

SOFT_API CUresult CUDAAPI cuTexRefSetAddress2D_v3(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR *desc,
                                                  CUdeviceptr dptr, size_t Pitch)
{
    return set_address2d(hTexRef, desc, dptr, Pitch);
}

SOFT_API CUresult CUDAAPI cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt, int NumPackedComponents)
{
    if (!channel_bytes(fmt) || (NumPackedComponents != 1 && NumPackedComponents != 2 && NumPackedComponents != 4))
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        r->format = fmt;
        r->channels = NumPackedComponents;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefSetAddressMode(CUtexref hTexRef, int dim, CUaddress_mode am)
{
    if (dim < 0 || dim > 2 || (unsigned)am > CU_TR_ADDRESS_MODE_BORDER)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { r->address[dim] = am; });
}

SOFT_API CUresult CUDAAPI cuTexRefSetFilterMode(CUtexref hTexRef, CUfilter_mode fm)
{
    if ((unsigned)fm > CU_TR_FILTER_MODE_LINEAR)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { r->filter = fm; });
}

SOFT_API CUresult CUDAAPI cuTexRefSetMipmapFilterMode(CUtexref hTexRef, CUfilter_mode fm)
{
    if ((unsigned)fm > CU_TR_FILTER_MODE_LINEAR)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { r->mip_filter = fm; });
}

SOFT_API CUresult CUDAAPI cuTexRefSetMipmapLevelBias(CUtexref hTexRef, float bias)
{
    WITH_REF(hTexRef, false, { r->bias = bias; });
}

SOFT_API CUresult CUDAAPI cuTexRefSetMipmapLevelClamp(CUtexref hTexRef, float minMipmapLevelClamp,
                                                      float maxMipmapLevelClamp)
{
    WITH_REF(hTexRef, false, {
        r->min_clamp = minMipmapLevelClamp;
        r->max_clamp = maxMipmapLevelClamp;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefSetMaxAnisotropy(CUtexref hTexRef, unsigned int maxAniso)
{
    if (maxAniso > 16)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { r->max_aniso = maxAniso; });
}

SOFT_API CUresult CUDAAPI cuTexRefSetBorderColor(CUtexref hTexRef, float *pBorderColor)
{
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { memcpy(r->border, pBorderColor, sizeof r->border); });
}

SOFT_API CUresult CUDAAPI cuTexRefSetFlags(CUtexref hTexRef, unsigned int Flags)
{
    if (Flags & ~(unsigned)(CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
                            CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_TRSF_SRGB) {
        soft_log("cuTexRefSetFlags: sRGB textures are not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    WITH_REF(hTexRef, false, { r->flags = Flags; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetAddress_v2(CUdeviceptr *pdptr, CUtexref hTexRef)
{
    if (!pdptr)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        if (r->bind == BIND_LINEAR || r->bind == BIND_PITCH2D)
            *pdptr = r->dptr;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefGetArray(CUarray *phArray, CUtexref hTexRef)
{
    if (!phArray)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        if (r->bind == BIND_ARRAY)
            *phArray = r->array;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefGetMipmappedArray(CUmipmappedArray *phMipmappedArray, CUtexref hTexRef)
{
    if (!phMipmappedArray)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        if (r->bind == BIND_MIPMAP)
            *phMipmappedArray = r->mip;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefGetAddressMode(CUaddress_mode *pam, CUtexref hTexRef, int dim)
{
    if (!pam || dim < 0 || dim > 2)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pam = r->address[dim]; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetFilterMode(CUfilter_mode *pfm, CUtexref hTexRef)
{
    if (!pfm)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pfm = r->filter; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetFormat(CUarray_format *pFormat, int *pNumChannels, CUtexref hTexRef)
{
    if (!pFormat && !pNumChannels)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        if (pFormat)
            *pFormat = r->format;
        if (pNumChannels)
            *pNumChannels = r->channels;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefGetMipmapFilterMode(CUfilter_mode *pfm, CUtexref hTexRef)
{
    if (!pfm)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pfm = r->mip_filter; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetMipmapLevelBias(float *pbias, CUtexref hTexRef)
{
    if (!pbias)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pbias = r->bias; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetMipmapLevelClamp(float *pminMipmapLevelClamp, float *pmaxMipmapLevelClamp,
                                                      CUtexref hTexRef)
{
    if (!pminMipmapLevelClamp || !pmaxMipmapLevelClamp)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, {
        *pminMipmapLevelClamp = r->min_clamp;
        *pmaxMipmapLevelClamp = r->max_clamp;
    });
}

SOFT_API CUresult CUDAAPI cuTexRefGetMaxAnisotropy(int *pmaxAniso, CUtexref hTexRef)
{
    if (!pmaxAniso)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pmaxAniso = (int)r->max_aniso; });
}

SOFT_API CUresult CUDAAPI cuTexRefGetBorderColor(float *pBorderColor, CUtexref hTexRef)
{
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { memcpy(pBorderColor, r->border, sizeof r->border); });
}

SOFT_API CUresult CUDAAPI cuTexRefGetFlags(unsigned int *pFlags, CUtexref hTexRef)
{
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF(hTexRef, false, { *pFlags = r->flags; });
}

SOFT_API CUresult CUDAAPI cuSurfRefSetArray(CUsurfref hSurfRef, CUarray hArray, unsigned int Flags)
{
    struct CUarray_st *a;
    SOFT_TRY(soft_check_init());
    SOFT_TRY(soft_array_get(hArray, &a));
    if (Flags || !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST))
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF((const void *)hSurfRef, true, {
        unbind(r);
        r->bind = BIND_ARRAY;
        r->array = a;
        r->format = a->desc.Format;
        r->channels = (int)a->desc.NumChannels;
    });
}

SOFT_API CUresult CUDAAPI cuSurfRefGetArray(CUarray *phArray, CUsurfref hSurfRef)
{
    if (!phArray)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_REF((const void *)hSurfRef, true, {
        if (r->bind == BIND_ARRAY)
            *phArray = r->array;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}
