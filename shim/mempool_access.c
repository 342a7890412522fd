/* Other devices' access to a proxy's memory pool. Pool memory lives in the
 * agent's window, which is already mapped for every device of that agent
 * that can be its peer (agent/window.c), so granting access changes no
 * mapping: it is checked as the driver checks it (the owner keeps
 * read-write; a device must be a peer, so of the same agent) and read back.
 * Devices of another agent, or local ones, can never reach it. */
#include "shim/core.h"
#include "shim/exports.h"
#include "shim/proxy.h"

static bool can_reach(const proxy_obj *pool, int device)
{
    shim_device *owner = shim_device_at(pool->device), *d = shim_device_at(device);
    if (!owner || !d || !d->proxy || d->link != owner->link)
        return false;
    int can = 0;
    return shim_export_cuDeviceCanAccessPeer(&can, device, pool->device) == CUDA_SUCCESS && can;
}

SHIM_EXPORT(cuMemPoolSetAccess)
{
    proxy_obj *p = arena_get(pool, PROXY_POOL);
    if (!p)
        return SHIM_LOCAL(cuMemPoolSetAccess);
    if (!map && count)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUmemAccessDesc *d = &map[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || d->flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
            d->flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
            return CUDA_ERROR_INVALID_VALUE;
        if (!shim_device_at(d->location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        if (d->location.id == p->device ? d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                        : d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && !can_reach(p, d->location.id))
            return CUDA_ERROR_INVALID_DEVICE;
    }
    for (size_t i = 0; i < count; i++)
        if (map[i].location.id != p->device)
            __atomic_store_n(&p->u.pool.access[map[i].location.id], (unsigned char)map[i].flags, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemPoolGetAccess)
{
    proxy_obj *p = arena_get(memPool, PROXY_POOL);
    if (!p)
        return SHIM_LOCAL(cuMemPoolGetAccess);
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!shim_device_at(location->id))
        return CUDA_ERROR_INVALID_DEVICE;
    *flags = location->id == p->device
                 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 : (CUmemAccess_flags)__atomic_load_n(&p->u.pool.access[location->id], __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}
