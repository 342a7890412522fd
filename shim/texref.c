/* Texture and surface references of proxy modules (layouts in
 * proto/texref.h). A reference is an object the controller names, one per
 * module and name, as the driver hands out one; the agent holds its
 * driver's. Bindings and the border colour are requests; the scalar
 * setters and getters go the generic way (kind 'T'); the bindings and the
 * border colour are answered here from what the program set. Requests are
 * answered in order with the launches handed over before them, so a
 * launch sees the bindings made before it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/texref.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/log.h"
#include "shim/proxy.h"

/* Every reference handed out, to hand out the same one again. */
static pthread_mutex_t refs_lock = PTHREAD_MUTEX_INITIALIZER;
static proxy_obj **refs;
static size_t nrefs, caprefs;

static CUresult request(agent_link *l, const texref_req *q, uint64_t *value)
{
    uint8_t body[64 + TEXREF_NAME_MAX];
    wire_writer w = wire_writer_init(body, sizeof body);
    texref_put_request(&w, q);
    if (w.err)
        return CUDA_ERROR_INVALID_VALUE;
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(l, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n != (value ? 8u : 0u))
        rc = link_malformed(l, "an answer to a texture reference request of %zu bytes", n);
    else if (rc == CUDA_SUCCESS && value)
        *value = wire_load_u64(o);
    frame_release(&f);
    return rc;
}

static CUresult module_ref(void *out, const void *hmod, const char *name, bool surface)
{
    proxy_obj *m = arena_get(hmod, PROXY_MODULE);
    if (!out || !name || strlen(name) > TEXREF_NAME_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (m->u.module.library || m->device < 0) {
        shim_log_unsupported_once(surface ? "cuModuleGetSurfRef (a library's module)"
                                          : "cuModuleGetTexRef (a library's module)",
                                  shim_current_device_label());
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    pthread_mutex_lock(&refs_lock);
    for (size_t i = 0; i < nrefs; i++) {
        proxy_obj *r = refs[i];
        if (r->u.texref.module == m && r->u.texref.surface == surface && strcmp(r->u.texref.name, name) == 0) {
            pthread_mutex_unlock(&refs_lock);
            *(proxy_obj **)out = r;
            return CUDA_SUCCESS;
        }
    }
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    proxy_obj *r = NULL;
    if (nrefs == caprefs) {
        size_t cap = caprefs ? 2 * caprefs : 16;
        proxy_obj **v = realloc(refs, cap * sizeof *v);
        if (!v) {
            shim_nomem("the table of %zu texture references", cap);
            goto out;
        }
        refs = v;
        caprefs = cap;
    }
    if (!(r = arena_new(PROXY_TEXREF, m->device)))
        goto out;
    if (!(r->u.texref.name = strdup(name))) {
        shim_nomem("the name of texture reference %s", name);
        arena_free(r);
        goto out;
    }
    r->u.texref.module = m;
    r->u.texref.surface = surface;
    texref_req q = { .op = surface ? CUDA_OP_cuModuleGetSurfRef : CUDA_OP_cuModuleGetTexRef, .ref = r->id,
                     .object = m->id, .name = name, .name_len = (uint32_t)strlen(name) };
    rc = request(m->link, &q, NULL);
    if (rc) {
        free(r->u.texref.name);
        arena_free(r);
        goto out;
    }
    refs[nrefs++] = r;
    *(proxy_obj **)out = r;
out:
    pthread_mutex_unlock(&refs_lock);
    return rc;
}

void shim_texref_module_gone(proxy_obj *m)
{
    pthread_mutex_lock(&refs_lock);
    size_t kept = 0;
    for (size_t i = 0; i < nrefs; i++) {
        proxy_obj *r = refs[i];
        if (r->u.texref.module != m) {
            refs[kept++] = r;
            continue;
        }
        /* The agent forgets it before the module goes; a later call with
         * the handle is an invalid handle, never a stale reference. */
        link_drop(r->link, CUDA_OP_cuTexRefDestroy, r->id);
        free(r->u.texref.name);
        arena_free(r);
    }
    nrefs = kept;
    pthread_mutex_unlock(&refs_lock);
}

SHIM_EXPORT(cuModuleGetTexRef)
{
    if (!arena_get(hmod, PROXY_MODULE))
        return SHIM_LOCAL(cuModuleGetTexRef);
    return module_ref(pTexRef, hmod, name, false);
}

SHIM_EXPORT(cuModuleGetSurfRef)
{
    if (!arena_get(hmod, PROXY_MODULE))
        return SHIM_LOCAL(cuModuleGetSurfRef);
    return module_ref(pSurfRef, hmod, name, true);
}

/* The proxy reference h (a surface one when surface) whose module is still
 * loaded; NULL with *rc CUDA_ERROR_NOT_FOUND when h is no proxy's (the
 * caller asks the local driver), else another error. */
static proxy_obj *ref_of(const void *h, bool surface, CUresult *rc)
{
    proxy_obj *r = arena_get(h, PROXY_TEXREF);
    *rc = CUDA_SUCCESS;
    if (!r) {
        *rc = shim_is_proxy_handle(h) ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_FOUND;
        return NULL;
    }
    if (r->u.texref.surface != surface || !arena_get(r->u.texref.module, PROXY_MODULE)) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    return r;
}

/* A binding to an array or mipmapped array of the reference's agent. */
static CUresult bind_array(proxy_obj *r, uint32_t op, const void *h, proxy_type type, unsigned flags)
{
    proxy_obj *a = arena_get(h, type);
    if (!a || a->link != r->link)
        return CUDA_ERROR_INVALID_HANDLE;
    texref_req q = { .op = op, .ref = r->id, .object = a->id, .flags = flags };
    CUresult rc = request(r->link, &q, NULL);
    if (rc == CUDA_SUCCESS) {
        r->u.texref.array = type == PROXY_ARRAY ? a : NULL;
        r->u.texref.mipmap = type == PROXY_MIPMAP ? a : NULL;
    }
    return rc;
}

SHIM_EXPORT(cuTexRefSetArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetArray) : rc;
    return bind_array(r, CUDA_OP_cuTexRefSetArray, hArray, PROXY_ARRAY, Flags);
}

SHIM_EXPORT(cuTexRefSetMipmappedArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetMipmappedArray) : rc;
    return bind_array(r, CUDA_OP_cuTexRefSetMipmappedArray, hMipmappedArray, PROXY_MIPMAP, Flags);
}

SHIM_EXPORT(cuSurfRefSetArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hSurfRef, true, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuSurfRefSetArray) : rc;
    return bind_array(r, CUDA_OP_cuSurfRefSetArray, hArray, PROXY_ARRAY, Flags);
}

/* True when [p, p + n) lies in one allocation on the reference's device:
 * the agent binds nothing outside the job's memory. */
static bool in_allocation(const proxy_obj *r, uint64_t p, uint64_t n)
{
    uint64_t base, size;
    int dev;
    return n && shim_alloc_find(p, &base, &size, &dev) && dev == r->device && n <= size - (p - base);
}

SHIM_EXPORT(cuTexRefSetAddress_v2)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetAddress_v2) : rc;
    if (!in_allocation(r, dptr, bytes))
        return CUDA_ERROR_INVALID_VALUE;
    texref_req q = { .op = CUDA_OP_cuTexRefSetAddress_v2, .ref = r->id, .address = dptr, .bytes = bytes };
    uint64_t offset = 0;
    rc = request(r->link, &q, &offset);
    if (rc == CUDA_SUCCESS) {
        r->u.texref.array = r->u.texref.mipmap = NULL;
        if (ByteOffset)
            *ByteOffset = (size_t)offset;
    }
    return rc;
}

static CUresult set_address2d(proxy_obj *r, const CUDA_ARRAY_DESCRIPTOR *desc, CUdeviceptr dptr, size_t pitch)
{
    if (!desc || !desc->Width || !desc->Height || !pitch || desc->Height > UINT64_MAX / pitch ||
        !in_allocation(r, dptr, desc->Height * pitch))
        return CUDA_ERROR_INVALID_VALUE;
    texref_req q = { .op = CUDA_OP_cuTexRefSetAddress2D_v3, .ref = r->id, .width = desc->Width,
                     .height = desc->Height, .format = (uint32_t)desc->Format, .channels = desc->NumChannels,
                     .address = dptr, .bytes = pitch };
    CUresult rc = request(r->link, &q, NULL);
    if (rc == CUDA_SUCCESS)
        r->u.texref.array = r->u.texref.mipmap = NULL;
    return rc;
}

SHIM_EXPORT(cuTexRefSetAddress2D_v3)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetAddress2D_v3) : rc;
    return set_address2d(r, desc, dptr, Pitch);
}

SHIM_EXPORT(cuTexRefSetAddress2D_v2)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetAddress2D_v2) : rc;
    return set_address2d(r, desc, dptr, Pitch);
}

SHIM_EXPORT(cuTexRefSetBorderColor)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefSetBorderColor) : rc;
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    texref_req q = { .op = CUDA_OP_cuTexRefSetBorderColor, .ref = r->id };
    memcpy(q.border, pBorderColor, sizeof q.border);
    rc = request(r->link, &q, NULL);
    if (rc == CUDA_SUCCESS)
        memcpy(r->u.texref.border, pBorderColor, sizeof r->u.texref.border);
    return rc;
}

SHIM_EXPORT(cuTexRefGetBorderColor)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefGetBorderColor) : rc;
    if (!pBorderColor)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(pBorderColor, r->u.texref.border, sizeof r->u.texref.border);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuTexRefGetArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefGetArray) : rc;
    if (!phArray || !r->u.texref.array)
        return CUDA_ERROR_INVALID_VALUE;
    *phArray = (CUarray)r->u.texref.array;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuTexRefGetMipmappedArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hTexRef, false, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuTexRefGetMipmappedArray) : rc;
    if (!phMipmappedArray || !r->u.texref.mipmap)
        return CUDA_ERROR_INVALID_VALUE;
    *phMipmappedArray = (CUmipmappedArray)r->u.texref.mipmap;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuSurfRefGetArray)
{
    CUresult rc;
    proxy_obj *r = ref_of(hSurfRef, true, &rc);
    if (!r)
        return rc == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(cuSurfRefGetArray) : rc;
    if (!phArray || !r->u.texref.array)
        return CUDA_ERROR_INVALID_VALUE;
    *phArray = (CUarray)r->u.texref.array;
    return CUDA_SUCCESS;
}
