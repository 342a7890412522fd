/* Device queries: local devices answer through the real driver under their
 * own ordinals; proxies answer from what the agent reported when the job
 * opened, so the runtime's hundred attribute queries cost no round trip. */
#include <stdio.h>
#include <string.h>

#include "shim/core.h"
#include "shim/proxy.h"

/* The device for ordinal, checking initialisation; NULL sets *rc. */
static shim_device *device_or(int ordinal, CUresult *rc)
{
    if (!shim_initialized()) {
        *rc = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    shim_device *d = shim_device_at(ordinal);
    *rc = d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return d;
}

SHIM_EXPORT(cuInit)
{
    return shim_init(Flags);
}

SHIM_EXPORT(cuDeviceGetCount)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    if (!shim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = shim_device_count();
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGet)
{
    CUresult rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_or(ordinal, &rc))
        return rc;
    *device = ordinal;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGetName)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceGetName);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(uuid->bytes, d->uuid, 16);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGetUuid)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDeviceGetUuid);
    return get_uuid(uuid, dev);
}

SHIM_EXPORT(cuDeviceGetUuid_v2)
{
    shim_device *d = shim_device_at(dev);
    if (d && !d->proxy)
        return SHIM_LOCAL(cuDeviceGetUuid_v2);
    return get_uuid(uuid, dev);
}

SHIM_EXPORT(cuDeviceTotalMem_v2)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceTotalMem_v2);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->total_mem;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceTotalMem)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceTotalMem);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = d->total_mem > 0xffffffffu ? 0xffffffffu : (unsigned)d->total_mem;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGetAttribute)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceGetAttribute);
    if (!pi || (int)attrib <= 0 || (int)attrib >= d->attr_count)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = shim_managed_device_attribute(attrib, d->attrs[attrib]);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceComputeCapability)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceComputeCapability);
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR];
    *minor = d->attrs[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGetPCIBusId)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceGetPCIBusId);
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "%08x:%02x:%02x.0", d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
             d->attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID], d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
    return CUDA_SUCCESS;
}

/* A local device whose bus id matches comes first (local ordinals lead);
 * then the first proxy whose agent reported that domain, bus and device.
 * Ids of different machines may coincide: the lowest ordinal wins. */
SHIM_EXPORT(cuDeviceGetByPCIBusId)
{
    if (!shim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    if (shim_local_driver() && shim_local_driver()->fn_cuDeviceGetByPCIBusId) {
        int local = -1;
        if (shim_local_driver()->fn_cuDeviceGetByPCIBusId(&local, pciBusId) == CUDA_SUCCESS)
            for (int i = 0; i < shim_device_count(); i++)
                if (!shim_device_at(i)->proxy && shim_device_at(i)->local_ordinal == local) {
                    *dev = i;
                    return CUDA_SUCCESS;
                }
    }
    unsigned domain = 0, bus, device, function;
    char tail;
    if (sscanf(pciBusId, "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4 &&
        (domain = 0, sscanf(pciBusId, "%x:%x.%x%c", &bus, &device, &function, &tail) != 3))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < shim_device_count(); i++) {
        const shim_device *d = shim_device_at(i);
        if (d->proxy && (unsigned)d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] == domain &&
            (unsigned)d->attrs[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] == bus &&
            (unsigned)d->attrs[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] == device && function == 0) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

SHIM_EXPORT(cuDeviceGetProperties)
{
    CUresult rc;
    shim_device *d = device_or(dev, &rc);
    if (!d)
        return rc;
    if (!d->proxy)
        return SHIM_LOCAL(cuDeviceGetProperties);
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    const int *a = d->attrs;
    CUdevprop *p = (CUdevprop *)prop;
    p->maxThreadsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    p->maxThreadsDim[0] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X];
    p->maxThreadsDim[1] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y];
    p->maxThreadsDim[2] = a[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
    p->maxGridSize[0] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X];
    p->maxGridSize[1] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y];
    p->maxGridSize[2] = a[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
    p->sharedMemPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
    p->totalConstantMemory = a[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY];
    p->SIMDWidth = a[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
    p->memPitch = a[CU_DEVICE_ATTRIBUTE_MAX_PITCH];
    p->regsPerBlock = a[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK];
    p->clockRate = a[CU_DEVICE_ATTRIBUTE_CLOCK_RATE];
    p->textureAlign = a[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT];
    return CUDA_SUCCESS;
}
