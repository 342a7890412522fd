/* Kernel launches on proxies: the parameters are packed here from the
 * layout the agent reported when the function was resolved, and the launch
 * is handed over without waiting. */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/module.h"
#include "shim/proxy.h"
#include "shim/streams.h"

typedef struct launch_dims {
    unsigned grid[3], block[3], shared;
} launch_dims;

/* Packs kernelParams (one pointer per parameter) or extra (a ready buffer)
 * into out; returns the byte count or -1. */
static long pack_params(proxy_obj *f, void **kernelParams, void **extra, uint8_t *out)
{
    uint32_t bytes = f->u.fn.param_bytes;
    if (kernelParams) {
        memset(out, 0, bytes);
        for (uint32_t i = 0; i < f->u.fn.param_count; i++) {
            if (!kernelParams[i])
                return -1;
            memcpy(out + f->u.fn.params[i].offset, kernelParams[i], f->u.fn.params[i].size);
        }
        return bytes;
    }
    if (!extra)
        return f->u.fn.param_count == 0 ? 0 : -1;
    void *buffer = NULL;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buffer = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            size = *(size_t *)extra[i + 1];
            have_size = true;
        } else
            return -1;
    }
    /* The buffer must be exactly the kernel's parameters, as the driver checks. */
    if (!buffer || !have_size || size != bytes)
        return -1;
    memcpy(out, buffer, bytes);
    return bytes;
}

/* What the driver refuses at once, refused here at once: a launch is
 * handed over without an answer, so a bad one must not reach the agent
 * (there it would fail the whole job). */
/* A geometry no device can run is what cudart reports as
 * cudaErrorInvalidConfiguration (core.h); more threads than the kernel
 * allows, out of resources; too much shared memory, a bad value: as the
 * driver answers each. */
static CUresult dims_check(proxy_obj *f, int device, const launch_dims *d)
{
    const int *a = shim_device_at(device)->attrs;
    static const int grid_max[3] = { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                                     CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z };
    static const int block_max[3] = { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                      CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z };
    uint64_t threads = 1;
    for (int i = 0; i < 3; i++) {
        if (d->grid[i] == 0 || d->block[i] == 0)
            return CUDA_ERROR_INVALID_CONFIGURATION;
        if (a[grid_max[i]] > 0 && d->grid[i] > (unsigned)a[grid_max[i]])
            return CUDA_ERROR_INVALID_CONFIGURATION;
        if (a[block_max[i]] > 0 && d->block[i] > (unsigned)a[block_max[i]])
            return CUDA_ERROR_INVALID_CONFIGURATION;
        threads *= d->block[i];
    }
    int device_threads = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    if (device_threads > 0 && threads > (uint64_t)device_threads)
        return CUDA_ERROR_INVALID_CONFIGURATION;
    int max_threads = f->u.fn.attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    if (max_threads > 0 && threads > (uint64_t)max_threads)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    uint64_t stat = (uint64_t)f->u.fn.attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
    uint64_t dyn_max = (uint64_t)f->u.fn.attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
    uint64_t block_shared = (uint64_t)a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
    uint64_t limit = stat + dyn_max > block_shared ? stat + dyn_max : block_shared;
    return stat + d->shared <= limit ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult launch_proxy(proxy_obj *f, proxy_obj *s, const launch_dims *dims, void **kernelParams,
                             void **extra)
{
    CUresult rc = shim_function_ready(f, s->device);
    if (rc)
        return rc;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    rc = dims_check(f, s->device, dims);
    if (rc)
        return rc;
    uint8_t params[JOB_PARAMS_MAX];
    long n = pack_params(f, kernelParams, extra, params);
    if (n < 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[48];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u64(&w, f->id);
    wire_put_u32(&w, (uint32_t)shim_device_at(s->device)->remote_ordinal);
    for (int i = 0; i < 3; i++)
        wire_put_u32(&w, dims->grid[i]);
    for (int i = 0; i < 3; i++)
        wire_put_u32(&w, dims->block[i]);
    wire_put_u32(&w, dims->shared);
    handover h = { .op = CUDA_OP_cuLaunchKernel, .stream = s, .body = body, .body_len = w.off,
                   .data = params, .data_len = (size_t)n };
    return link_handover(s->link, &h, NULL);
}

/* Decides where a launch goes: a proxy function on a proxy stream, or the
 * local driver (a plain local function, or a proxy kernel whose library is
 * also loaded locally, launched on a local stream). */
static CUresult launch(CUfunction fh, const launch_dims *dims, CUstream hStream, bool per_thread,
                       void **kernelParams, void **extra, bool *local)
{
    proxy_obj *f = arena_get(fh, PROXY_FUNCTION);
    *local = false;
    if (!f) {
        /* Not ours: the local driver's, if there is one to judge it. */
        if (shim_is_proxy_handle(fh) || !shim_local_driver())
            return CUDA_ERROR_INVALID_HANDLE;
        *local = true;
        return CUDA_SUCCESS;
    }
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(hStream, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    if (k == 0) {
        /* A proxy function on a stream that is not a proxy's: only a kernel
         * whose library the local driver also holds can run there. */
        if (!f->u.fn.local)
            return hStream ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
        const shim_driver *drv = shim_local_driver();
        CUfunction lf = (CUfunction)f->u.fn.local;
        return (per_thread ? drv->fn_cuLaunchKernel_ptsz : drv->fn_cuLaunchKernel)(
            lf, dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0], dims->block[1], dims->block[2],
            dims->shared, hStream, kernelParams, extra);
    }
    if (f->u.fn.module->device >= 0 && f->u.fn.module->device != s->device)
        return CUDA_ERROR_INVALID_HANDLE;
    return launch_proxy(f, s, dims, kernelParams, extra);
}

#define LAUNCH_EXPORT(sym, per_thread)                                          \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        launch_dims dims = { { gridDimX, gridDimY, gridDimZ },                  \
                             { blockDimX, blockDimY, blockDimZ }, sharedMemBytes }; \
        bool local;                                                             \
        CUresult rc = launch(f, &dims, hStream, per_thread, kernelParams, extra, &local); \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

LAUNCH_EXPORT(cuLaunchKernel, false)
LAUNCH_EXPORT(cuLaunchKernel_ptsz, true)

#define LAUNCH_EX_EXPORT(sym, per_thread)                                       \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!config)                                                            \
            return CUDA_ERROR_INVALID_VALUE;                                    \
        if (!arena_get(f, PROXY_FUNCTION))                                      \
            return SHIM_LOCAL(sym);                                             \
        /* Attributes (clusters, priorities, ...) change how, not what: a     \
         * proxy runs the launch plainly. */                                    \
        launch_dims dims = { { config->gridDimX, config->gridDimY, config->gridDimZ }, \
                             { config->blockDimX, config->blockDimY, config->blockDimZ }, \
                             config->sharedMemBytes };                          \
        bool local;                                                             \
        CUresult rc = launch(f, &dims, config->hStream, per_thread, kernelParams, extra, &local); \
        return local ? CUDA_ERROR_INVALID_CONTEXT : rc;                         \
    }

LAUNCH_EX_EXPORT(cuLaunchKernelEx, false)
LAUNCH_EX_EXPORT(cuLaunchKernelEx_ptsz, true)
