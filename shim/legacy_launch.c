/* The launch calls of CUDA's first API (deprecated, still exported) on
 * proxy functions: the block shape, shared size and parameter buffer are
 * kept here, and cuLaunch / cuLaunchGrid(Async) become one cuLaunchKernel
 * with that buffer, so the agent sees an ordinary launch. Local functions
 * keep theirs in the local driver. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/core.h"
#include "shim/exports.h"
#include "shim/log.h"
#include "shim/proxy.h"

/* The old API's limit on a function's parameter bytes. */
#define LEGACY_PARAMS_MAX 4096

struct shim_legacy_launch {
    int block[3];
    unsigned shared;
    unsigned size;                    /* cuParamSetSize */
    uint8_t params[LEGACY_PARAMS_MAX];
};

static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;

/* f's state, made on first use (NULL: out of memory). Callers hold legacy_lock. */
static struct shim_legacy_launch *legacy_of(proxy_obj *f)
{
    if (!f->u.fn.legacy && !(f->u.fn.legacy = calloc(1, sizeof *f->u.fn.legacy)))
        shim_nomem("a function's legacy launch settings");
    return f->u.fn.legacy;
}

SHIM_EXPORT(cuFuncSetBlockShape)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    if (!f)
        return SHIM_LOCAL(cuFuncSetBlockShape);
    if (x <= 0 || y <= 0 || z <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&legacy_lock);
    struct shim_legacy_launch *l = legacy_of(f);
    if (l) {
        l->block[0] = x;
        l->block[1] = y;
        l->block[2] = z;
    }
    pthread_mutex_unlock(&legacy_lock);
    return l ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SHIM_EXPORT(cuFuncSetSharedSize)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    if (!f)
        return SHIM_LOCAL(cuFuncSetSharedSize);
    pthread_mutex_lock(&legacy_lock);
    struct shim_legacy_launch *l = legacy_of(f);
    if (l)
        l->shared = bytes;
    pthread_mutex_unlock(&legacy_lock);
    return l ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SHIM_EXPORT(cuParamSetSize)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    if (!f)
        return SHIM_LOCAL(cuParamSetSize);
    if (numbytes > LEGACY_PARAMS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&legacy_lock);
    struct shim_legacy_launch *l = legacy_of(f);
    if (l)
        l->size = numbytes;
    pthread_mutex_unlock(&legacy_lock);
    return l ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Writes len bytes at offset of f's parameter buffer, within its set size. */
static CUresult param_set(proxy_obj *f, int offset, const void *bytes, unsigned len)
{
    if (offset < 0 || (len && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&legacy_lock);
    struct shim_legacy_launch *l = legacy_of(f);
    if (!l)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if ((uint64_t)offset + len > l->size)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        memcpy(l->params + offset, bytes, len);
    pthread_mutex_unlock(&legacy_lock);
    return rc;
}

SHIM_EXPORT(cuParamSeti)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    return f ? param_set(f, offset, &value, sizeof value) : SHIM_LOCAL(cuParamSeti);
}

SHIM_EXPORT(cuParamSetf)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    return f ? param_set(f, offset, &value, sizeof value) : SHIM_LOCAL(cuParamSetf);
}

SHIM_EXPORT(cuParamSetv)
{
    proxy_obj *f = arena_get(hfunc, PROXY_FUNCTION);
    return f ? param_set(f, offset, ptr, numbytes) : SHIM_LOCAL(cuParamSetv);
}

static CUresult legacy_launch(proxy_obj *f, int width, int height, CUstream stream)
{
    if (width <= 0 || height <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct shim_legacy_launch *copy = malloc(sizeof *copy);
    if (!copy)
        return shim_nomem("a copy of a function's legacy launch settings");
    pthread_mutex_lock(&legacy_lock);
    struct shim_legacy_launch *l = legacy_of(f);
    if (l)
        *copy = *l;
    pthread_mutex_unlock(&legacy_lock);
    CUresult rc = !l ? CUDA_ERROR_OUT_OF_MEMORY : copy->block[0] <= 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        size_t size = copy->size;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, copy->params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        rc = shim_export_cuLaunchKernel((CUfunction)f, (unsigned)width, (unsigned)height, 1,
                                        (unsigned)copy->block[0], (unsigned)copy->block[1], (unsigned)copy->block[2],
                                        copy->shared, stream, NULL, extra);
    }
    free(copy);
    return rc;
}

SHIM_EXPORT(cuLaunch)
{
    proxy_obj *pf = arena_get(f, PROXY_FUNCTION);
    return pf ? legacy_launch(pf, 1, 1, NULL) : SHIM_LOCAL(cuLaunch);
}

SHIM_EXPORT(cuLaunchGrid)
{
    proxy_obj *pf = arena_get(f, PROXY_FUNCTION);
    return pf ? legacy_launch(pf, grid_width, grid_height, NULL) : SHIM_LOCAL(cuLaunchGrid);
}

SHIM_EXPORT(cuLaunchGridAsync)
{
    proxy_obj *pf = arena_get(f, PROXY_FUNCTION);
    return pf ? legacy_launch(pf, grid_width, grid_height, hStream) : SHIM_LOCAL(cuLaunchGridAsync);
}
