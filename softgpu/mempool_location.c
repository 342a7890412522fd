/* CUDA 13's pools by location: a device location with pinned allocations
 * names that device's pools (mempool.c). softgpu has no host or managed
 * pools: those locations are not supported. */
#include "softgpu/driver.h"

static CUresult device_of(const CUmemLocation *location, CUmemAllocationType type, CUdevice *dev)
{
    SOFT_TRY(soft_check_init());
    if (!location)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || type != CU_MEM_ALLOCATION_TYPE_PINNED) {
        soft_log("memory pools of location type %d, allocation type %d: softgpu has device pools only",
                 (int)location->type, (int)type);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *dev = location->id;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                                 CUmemAllocationType type)
{
    CUdevice dev;
    SOFT_TRY(device_of(location, type, &dev));
    return cuDeviceGetDefaultMemPool(pool_out, dev);
}

SOFT_API CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
    CUdevice dev;
    SOFT_TRY(device_of(location, type, &dev));
    return cuDeviceGetMemPool(pool_out, dev);
}

SOFT_API CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    CUdevice dev;
    SOFT_TRY(device_of(location, type, &dev));
    return cuDeviceSetMemPool(dev, pool);
}
