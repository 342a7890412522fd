/* Kernel launches on proxies: the parameters are packed here from the
 * layout the agent reported when the function was resolved, and the launch
 * is handed over without waiting. */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/module.h"
#include "shim/proxy.h"
#include "shim/streams.h"

typedef struct launch_dims {
    unsigned grid[3], block[3], shared;
} launch_dims;

long launch_pack_params(proxy_obj *f, void **kernelParams, void **extra, uint8_t *out)
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

/* The most blocks of f a multiprocessor of device holds at once with
 * threads a block and shared dynamic bytes, as the agent's driver counts
 * them (its answer is what it will hold a cooperative launch to); asked
 * once per function and configuration. Request: u32 op, u64 function,
 * u32 device, u32 threads, u32 shared -> i32. */
static CUresult resident_blocks(proxy_obj *f, int device, uint32_t threads, uint32_t shared, int *out)
{
    if (f->u.fn.coop_device == device + 1 && f->u.fn.coop_threads == threads && f->u.fn.coop_shared == shared) {
        *out = f->u.fn.coop_blocks;
        return CUDA_SUCCESS;
    }
    shim_device *d = shim_device_at(device);
    uint8_t body[4 + rec_occupancy_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuOccupancyMaxActiveBlocksPerMultiprocessor);
    rec_occupancy_put(&w, &(rec_occupancy){ .function = f->id, .device = (uint32_t)d->remote_ordinal,
                                            .threads = threads, .shared = shared });
    struct iovec iov = { body, w.off };
    frame fr;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(d->link, &iov, 1, &fr, &o, &n);
    if (rc == CUDA_SUCCESS && n == 4) {
        *out = (int)wire_load_u32(o);
        f->u.fn.coop_device = device + 1;
        f->u.fn.coop_threads = threads;
        f->u.fn.coop_shared = shared;
        f->u.fn.coop_blocks = *out;
    } else if (rc == CUDA_SUCCESS) {
        rc = link_malformed(d->link, "an answer to an occupancy request of %zu bytes, not 4", n);
    }
    frame_release(&fr);
    return rc;
}

/* What the driver refuses of a cooperative launch: a device without them,
 * or more blocks than can be resident at once (a grid-wide barrier would
 * wait for blocks that cannot start). */
static CUresult cooperative_valid(proxy_obj *f, int device, const launch_dims *d)
{
    const int *a = shim_device_at(device)->attrs;
    if (!a[CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH])
        return CUDA_ERROR_NOT_SUPPORTED;
    int per_sm = 0;
    CUresult rc = resident_blocks(f, device, d->block[0] * d->block[1] * d->block[2], d->shared, &per_sm);
    if (rc)
        return rc;
    uint64_t blocks = (uint64_t)d->grid[0] * d->grid[1] * d->grid[2];
    uint64_t most = (uint64_t)(per_sm > 0 ? per_sm : 0) * (uint64_t)(a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] > 0
                                                                           ? a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT]
                                                                           : 0);
    return blocks > most ? CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE : CUDA_SUCCESS;
}

static CUresult launch_proxy(proxy_obj *f, proxy_obj *s, const launch_dims *dims, void **kernelParams,
                             void **extra, bool cooperative)
{
    CUresult rc = shim_function_ready(f, s->device);
    if (rc)
        return rc;
    if (kernelParams && extra)
        return CUDA_ERROR_INVALID_VALUE;
    rc = dims_check(f, s->device, dims);
    if (rc)
        return rc;
    if (cooperative && (rc = cooperative_valid(f, s->device, dims)))
        return rc;
    uint8_t params[JOB_PARAMS_MAX];
    long n = launch_pack_params(f, kernelParams, extra, params);
    if (n < 0)
        return CUDA_ERROR_INVALID_VALUE;
    bool captured;
    if ((rc = capture_check(s, &captured)))
        return rc;
    if (captured) {
        /* A kernel node of the capture, with the parameters packed now; a
         * cooperative launch is a node with that attribute. */
        shim_node t;
        if ((rc = node_kernel(&t, f, s->device, dims->grid, dims->block, dims->shared, kernelParams, extra)))
            return rc;
        CUlaunchAttributeValue attr[SHIM_NODE_ATTRS] = { 0 };
        attr[CU_LAUNCH_ATTRIBUTE_COOPERATIVE].cooperative = 1;
        t.attr = cooperative ? attr : NULL;
        rc = capture_add(s, &t);
        node_free_params(&t);
        return rc;
    }
    /* The fields on the stack; the parameters follow as the record's data. */
    uint8_t body[rec_launch_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_launch_put(&w, &(rec_launch){ .function = f->id, .device = (uint32_t)shim_device_at(s->device)->remote_ordinal,
                                      .grid = { dims->grid[0], dims->grid[1], dims->grid[2] },
                                      .block = { dims->block[0], dims->block[1], dims->block[2] },
                                      .shared = dims->shared });
    /* A cooperative launch is the same record under its own op. */
    handover h = { .op = cooperative ? CUDA_OP_cuLaunchCooperativeKernel : CUDA_OP_cuLaunchKernel, .stream = s, .body = body, .body_len = w.off,
                   .data = params, .data_len = (size_t)n };
    /* Managed and mapped memory the CPU wrote goes first (managed.c). */
    if ((rc = shim_managed_before_launch(s->link, s)))
        return rc;
    rc = link_handover(s->link, &h, NULL);
    shim_managed_after_launch(s->link);
    return rc;
}

/* Decides where a launch goes: a proxy function on a proxy stream, or the
 * local driver (a plain local function, or a proxy kernel whose library is
 * also loaded locally, launched on a local stream). */
static CUresult launch(CUfunction fh, const launch_dims *dims, CUstream hStream, bool per_thread,
                       void **kernelParams, void **extra, bool cooperative, bool *local)
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
        if (cooperative) {
            if (extra)
                return CUDA_ERROR_INVALID_VALUE;
            return (per_thread ? drv->fn_cuLaunchCooperativeKernel_ptsz : drv->fn_cuLaunchCooperativeKernel)(
                lf, dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0], dims->block[1], dims->block[2],
                dims->shared, hStream, kernelParams);
        }
        return (per_thread ? drv->fn_cuLaunchKernel_ptsz : drv->fn_cuLaunchKernel)(
            lf, dims->grid[0], dims->grid[1], dims->grid[2], dims->block[0], dims->block[1], dims->block[2],
            dims->shared, hStream, kernelParams, extra);
    }
    if (f->u.fn.module->device >= 0 && f->u.fn.module->device != s->device)
        return CUDA_ERROR_INVALID_HANDLE;
    return launch_proxy(f, s, dims, kernelParams, extra, cooperative);
}

#define LAUNCH_EXPORT(sym, per_thread)                                          \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        launch_dims dims = { { gridDimX, gridDimY, gridDimZ },                  \
                             { blockDimX, blockDimY, blockDimZ }, sharedMemBytes }; \
        bool local;                                                             \
        CUresult rc = launch(f, &dims, hStream, per_thread, kernelParams, extra, false, &local); \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

LAUNCH_EXPORT(cuLaunchKernel, false)
LAUNCH_EXPORT(cuLaunchKernel_ptsz, true)

#define COOPERATIVE_EXPORT(sym, per_thread)                                     \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        launch_dims dims = { { gridDimX, gridDimY, gridDimZ },                  \
                             { blockDimX, blockDimY, blockDimZ }, sharedMemBytes }; \
        bool local;                                                             \
        CUresult rc = launch(f, &dims, hStream, per_thread, kernelParams, NULL, true, &local); \
        return local ? SHIM_LOCAL(sym) : rc;                                    \
    }

COOPERATIVE_EXPORT(cuLaunchCooperativeKernel, false)
COOPERATIVE_EXPORT(cuLaunchCooperativeKernel_ptsz, true)

/* True when config asks for a cooperative launch; false sets *bad when an
 * attribute list is malformed. */
static bool config_cooperative(const CUlaunchConfig *config, bool *bad)
{
    bool cooperative = false;
    *bad = config->numAttrs && !config->attrs;
    for (unsigned i = 0; !*bad && i < config->numAttrs; i++)
        if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
            cooperative = config->attrs[i].value.cooperative != 0;
    return cooperative;
}

#define LAUNCH_EX_EXPORT(sym, per_thread)                                       \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!config)                                                            \
            return CUDA_ERROR_INVALID_VALUE;                                    \
        if (!arena_get(f, PROXY_FUNCTION))                                      \
            return SHIM_LOCAL(sym);                                             \
        /* Attributes (clusters, priorities, ...) change how, not what: a     \
         * proxy runs the launch plainly, but for cooperation. */               \
        bool bad_;                                                              \
        bool coop_ = config_cooperative(config, &bad_);                         \
        if (bad_)                                                               \
            return CUDA_ERROR_INVALID_VALUE;                                    \
        launch_dims dims = { { config->gridDimX, config->gridDimY, config->gridDimZ }, \
                             { config->blockDimX, config->blockDimY, config->blockDimZ }, \
                             config->sharedMemBytes };                          \
        bool local;                                                             \
        CUresult rc = launch(f, &dims, config->hStream, per_thread, kernelParams, extra, coop_, &local); \
        return local ? CUDA_ERROR_INVALID_CONTEXT : rc;                         \
    }

LAUNCH_EX_EXPORT(cuLaunchKernelEx, false)
LAUNCH_EX_EXPORT(cuLaunchKernelEx_ptsz, true)
