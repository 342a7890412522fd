/* The driver's virtual memory calls on proxies (PyTorch's allocator uses
 * them): an address range is reserved inside the agent's window, physical
 * memory is created on the agent and mapped into the range there, so the
 * pointers stay the same on both ends. A proxy's allocation handle is the
 * address of a shim object, told apart from the local driver's by range. */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/proxy.h"

/* One request with fixed fields and no outputs but, optionally, a u64. */
static CUresult vmm_request(agent_link *l, const uint8_t *body, size_t n, uint64_t *out)
{
    struct iovec iov = { (void *)body, n };
    frame f;
    const uint8_t *o;
    size_t on;
    CUresult rc = link_request(l, &iov, 1, &f, &o, &on);
    if (rc == CUDA_SUCCESS && out) {
        if (on == 8)
            *out = wire_load_u64(o);
        else
            rc = link_malformed(l, "an answer of %zu bytes where one u64 was due", on);
    } else if (rc == CUDA_SUCCESS && on) {
        rc = link_malformed(l, "an answer with %zu bytes of outputs where none were due", on);
    }
    frame_release(&f);
    return rc;
}

/* The proxy device a location names, or NULL for a local one. */
static shim_device *proxy_location(const CUmemLocation *loc)
{
    if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return NULL;
    shim_device *d = shim_device_at(loc->id);
    return d && d->proxy ? d : NULL;
}

/* The agent whose window holds p, through the device the shim knows. */
static shim_device *window_device(CUdeviceptr p)
{
    int dev = shim_device_of_pointer(p);
    return dev >= 0 ? shim_device_at(dev) : NULL;
}

SHIM_EXPORT(cuMemGetAllocationGranularity)
{
    shim_device *d = prop ? proxy_location(&prop->location) : NULL;
    if (!d)
        return SHIM_LOCAL(cuMemGetAllocationGranularity);
    if (!granularity)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[12];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemGetAllocationGranularity);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u32(&w, (uint32_t)option);
    uint64_t g = 0;
    CUresult rc = vmm_request(d->link, body, w.off, &g);
    if (rc == CUDA_SUCCESS)
        *granularity = g;
    return rc;
}

SHIM_EXPORT(cuMemAddressReserve)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemAddressReserve);
    if (!ptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    shim_device *d = shim_device_at(ctx->device);
    uint8_t body[28];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemAddressReserve);
    wire_put_u64(&w, size);
    wire_put_u64(&w, alignment);
    wire_put_u64(&w, addr);
    (void)flags;
    uint64_t p = 0;
    CUresult rc = vmm_request(d->link, body, w.off, &p);
    if (rc == CUDA_SUCCESS)
        *ptr = p;
    return rc;
}

SHIM_EXPORT(cuMemAddressFree)
{
    shim_device *d = window_device(ptr);
    if (!d)
        return SHIM_LOCAL(cuMemAddressFree);
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemAddressFree);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, size);
    return vmm_request(d->link, body, w.off, NULL);
}

SHIM_EXPORT(cuMemCreate)
{
    shim_device *d = prop ? proxy_location(&prop->location) : NULL;
    if (!d)
        return SHIM_LOCAL(cuMemCreate);
    if (!handle || size == 0 || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    proxy_obj *m = arena_new(PROXY_MEMORY, prop->location.id);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->u.mem.size = size;
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemCreate);
    wire_put_u64(&w, m->id);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u64(&w, size);
    (void)flags;
    CUresult rc = vmm_request(d->link, body, w.off, NULL);
    if (rc) {
        arena_free(m);
        return rc;
    }
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)m;
    return CUDA_SUCCESS;
}

static proxy_obj *memory_of(CUmemGenericAllocationHandle h)
{
    return arena_get((const void *)(uintptr_t)h, PROXY_MEMORY);
}

SHIM_EXPORT(cuMemRelease)
{
    proxy_obj *m = memory_of(handle);
    if (!m)
        return shim_is_proxy_handle((const void *)(uintptr_t)handle) ? CUDA_ERROR_INVALID_VALUE
                                                                      : SHIM_LOCAL(cuMemRelease);
    uint8_t body[12];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemRelease);
    wire_put_u64(&w, m->id);
    CUresult rc = vmm_request(m->link, body, w.off, NULL);
    if (rc == CUDA_SUCCESS)
        arena_free(m);
    return rc;
}

SHIM_EXPORT(cuMemMap)
{
    proxy_obj *m = memory_of(handle);
    if (!m)
        return SHIM_LOCAL(cuMemMap);
    shim_device *d = window_device(ptr);
    if (!d || d->link != m->link || offset != 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[36];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemMap);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, size);
    wire_put_u64(&w, offset);
    wire_put_u64(&w, m->id);
    (void)flags;
    CUresult rc = shim_alloc_reserve();
    if (rc)
        return rc;
    rc = vmm_request(m->link, body, w.off, NULL);
    if (rc == CUDA_SUCCESS)
        shim_alloc_add_reserved(ptr, size, m->device);
    else
        shim_alloc_unreserve();
    return rc;
}

SHIM_EXPORT(cuMemUnmap)
{
    shim_device *d = window_device(ptr);
    if (!d)
        return SHIM_LOCAL(cuMemUnmap);
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemUnmap);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, size);
    CUresult rc = vmm_request(d->link, body, w.off, NULL);
    uint64_t s;
    int dev;
    if (rc == CUDA_SUCCESS)
        shim_alloc_remove(ptr, &s, &dev);
    return rc;
}

SHIM_EXPORT(cuMemSetAccess)
{
    shim_device *d = window_device(ptr);
    if (!d)
        return SHIM_LOCAL(cuMemSetAccess);
    if (!desc || count == 0 || count > 16)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[24 + 16 * 8];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemSetAccess);
    wire_put_u64(&w, ptr);
    wire_put_u64(&w, size);
    wire_put_u32(&w, (uint32_t)count);
    for (size_t i = 0; i < count; i++) {
        shim_device *t = proxy_location(&desc[i].location);
        /* Memory on one agent is only reachable from that agent's devices. */
        if (!t || t->link != d->link)
            return CUDA_ERROR_INVALID_DEVICE;
        wire_put_u32(&w, (uint32_t)t->remote_ordinal);
        wire_put_u32(&w, (uint32_t)desc[i].flags);
    }
    return vmm_request(d->link, body, w.off, NULL);
}

SHIM_EXPORT(cuMemGetAccess)
{
    shim_device *d = window_device(ptr);
    if (!d)
        return SHIM_LOCAL(cuMemGetAccess);
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    shim_device *t = proxy_location(location);
    /* Another agent's device, or the program's, can never reach it. */
    if (!t || t->link != d->link) {
        *flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        return CUDA_SUCCESS;
    }
    uint8_t body[20];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemGetAccess);
    wire_put_u64(&w, ptr);
    wire_put_u32(&w, (uint32_t)t->remote_ordinal);
    uint64_t v = 0;
    CUresult rc = vmm_request(d->link, body, w.off, &v);
    if (rc == CUDA_SUCCESS)
        *flags = v;
    return rc;
}
