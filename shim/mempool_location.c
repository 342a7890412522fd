/* CUDA 13's pools by location (cuMemGetDefaultMemPool, cuMemGetMemPool,
 * cuMemSetMemPool): a device location with pinned allocations names that
 * device's pools, served as cuDeviceGet*MemPool are (mempool.c). Host and
 * managed pools of a proxy's program would hold the program's own memory,
 * which the agent cannot reach: refused on proxies with a reason; any
 * location when the current context is local goes to the local driver. */
#include "shim/core.h"
#include "shim/exports.h"
#include "shim/log.h"
#include "shim/proxy.h"

/* 1: a proxy device's pinned pools (*dev set); 0: the local driver's
 * business; -1: refused on a proxy (*rc set). */
static int proxy_location(const CUmemLocation *location, CUmemAllocationType type, const char *symbol, CUdevice *dev,
                          CUresult *rc)
{
    if (!location) {
        *rc = CUDA_ERROR_INVALID_VALUE;
        return -1;
    }
    if (location->type == CU_MEM_LOCATION_TYPE_DEVICE) {
        shim_device *d = shim_device_at(location->id);
        if (!d || !d->proxy)
            return 0;
        if (type != CU_MEM_ALLOCATION_TYPE_PINNED) {
            *rc = CUDA_ERROR_NOT_SUPPORTED;
            shim_log(SHIM_LOG_ERROR, "%s on %s: managed pools are not supported on a proxy device", symbol, d->label);
            return -1;
        }
        *dev = location->id;
        return 1;
    }
    if (!shim_current_is_proxy() || shim_local_driver())
        return 0;
    *rc = CUDA_ERROR_NOT_SUPPORTED;
    shim_log(SHIM_LOG_ERROR, "%s: host memory pools need a local driver; a proxy's agent cannot reach the "
                             "program's memory", symbol);
    return -1;
}

SHIM_EXPORT(cuMemGetDefaultMemPool)
{
    CUdevice dev;
    CUresult rc;
    int k = proxy_location(location, type, "cuMemGetDefaultMemPool", &dev, &rc);
    if (k == 0)
        return SHIM_LOCAL(cuMemGetDefaultMemPool);
    return k < 0 ? rc : shim_export_cuDeviceGetDefaultMemPool(pool_out, dev);
}

SHIM_EXPORT(cuMemGetMemPool)
{
    CUdevice dev;
    CUresult rc;
    int k = proxy_location(location, type, "cuMemGetMemPool", &dev, &rc);
    if (k == 0)
        return SHIM_LOCAL(cuMemGetMemPool);
    return k < 0 ? rc : shim_export_cuDeviceGetMemPool(pool_out, dev);
}

SHIM_EXPORT(cuMemSetMemPool)
{
    CUdevice dev;
    CUresult rc;
    int k = proxy_location(location, type, "cuMemSetMemPool", &dev, &rc);
    if (k == 0)
        return SHIM_LOCAL(cuMemSetMemPool);
    return k < 0 ? rc : shim_export_cuDeviceSetMemPool(dev, pool);
}
