/* The launch calls of CUDA's first API (deprecated, still exported): a
 * function keeps a block shape, a dynamic shared size and a parameter
 * buffer set piecewise, and cuLaunch / cuLaunchGrid(Async) launch it with
 * them as one cuLaunchKernel with a ready parameter buffer. */
#include <stdlib.h>
#include <string.h>

#include "softgpu/driver.h"

/* The old API's limit on a function's parameter bytes. */
#define LEGACY_PARAMS_MAX 4096

struct soft_legacy_launch {
    int block[3];
    unsigned shared;
    unsigned size;                    /* cuParamSetSize */
    uint8_t params[LEGACY_PARAMS_MAX];
};

static pthread_mutex_t legacy_lock = PTHREAD_MUTEX_INITIALIZER;

/* f's legacy state, made on first use; NULL sets *rc. Callers hold legacy_lock. */
static struct soft_legacy_launch *legacy_of(const void *h, CUresult *rc)
{
    *rc = soft_check_init();
    if (*rc)
        return NULL;
    struct CUfunc_st *f = soft_func_get(h);
    if (!f) {
        *rc = CUDA_ERROR_INVALID_HANDLE;
        return NULL;
    }
    if (!f->legacy && !(f->legacy = calloc(1, sizeof *f->legacy)))
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
    return f->legacy;
}

SOFT_API CUresult CUDAAPI cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
    if (x <= 0 || y <= 0 || z <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc;
    pthread_mutex_lock(&legacy_lock);
    struct soft_legacy_launch *l = legacy_of(hfunc, &rc);
    if (l) {
        l->block[0] = x;
        l->block[1] = y;
        l->block[2] = z;
    }
    pthread_mutex_unlock(&legacy_lock);
    return rc;
}

SOFT_API CUresult CUDAAPI cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
    CUresult rc;
    pthread_mutex_lock(&legacy_lock);
    struct soft_legacy_launch *l = legacy_of(hfunc, &rc);
    if (l)
        l->shared = bytes;
    pthread_mutex_unlock(&legacy_lock);
    return rc;
}

SOFT_API CUresult CUDAAPI cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
    if (numbytes > LEGACY_PARAMS_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc;
    pthread_mutex_lock(&legacy_lock);
    struct soft_legacy_launch *l = legacy_of(hfunc, &rc);
    if (l)
        l->size = numbytes;
    pthread_mutex_unlock(&legacy_lock);
    return rc;
}

/* Writes len bytes at offset of f's parameter buffer, within its set size. */
static CUresult param_set(CUfunction hfunc, int offset, const void *bytes, unsigned len)
{
    if (offset < 0 || (len && !bytes))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc;
    pthread_mutex_lock(&legacy_lock);
    struct soft_legacy_launch *l = legacy_of(hfunc, &rc);
    if (l && (uint64_t)offset + len > l->size)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (l)
        memcpy(l->params + offset, bytes, len);
    pthread_mutex_unlock(&legacy_lock);
    return rc;
}

SOFT_API CUresult CUDAAPI cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
    return param_set(hfunc, offset, &value, sizeof value);
}

SOFT_API CUresult CUDAAPI cuParamSetf(CUfunction hfunc, int offset, float value)
{
    return param_set(hfunc, offset, &value, sizeof value);
}

SOFT_API CUresult CUDAAPI cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
    return param_set(hfunc, offset, ptr, numbytes);
}

static CUresult legacy_launch(CUfunction f, int width, int height, CUstream stream)
{
    if (width <= 0 || height <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct soft_legacy_launch copy;
    CUresult rc;
    pthread_mutex_lock(&legacy_lock);
    struct soft_legacy_launch *l = legacy_of(f, &rc);
    if (l)
        copy = *l;
    pthread_mutex_unlock(&legacy_lock);
    if (!l)
        return rc;
    if (copy.block[0] <= 0) {
        soft_log("cuLaunch: no block shape set (cuFuncSetBlockShape)");
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t size = copy.size;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, copy.params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    return cuLaunchKernel(f, (unsigned)width, (unsigned)height, 1, (unsigned)copy.block[0], (unsigned)copy.block[1],
                          (unsigned)copy.block[2], copy.shared, stream, NULL, extra);
}

SOFT_API CUresult CUDAAPI cuLaunch(CUfunction f)
{
    return legacy_launch(f, 1, 1, NULL);
}

SOFT_API CUresult CUDAAPI cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    return legacy_launch(f, grid_width, grid_height, NULL);
}

SOFT_API CUresult CUDAAPI cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    return legacy_launch(f, grid_width, grid_height, hStream);
}
