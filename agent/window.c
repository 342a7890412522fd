/* Device memory of a job inside its pointer window: the window is reserved
 * once through the driver's VMM at the address the controller chose, and
 * each allocation is physical memory mapped at a free range of it, so a
 * pointer has the same value in the program as here. */
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

struct window_block {
    window_block *next;
    CUdeviceptr base;
    uint64_t size;
    CUmemGenericAllocationHandle handle;   /* blocks only */
    int device;
};

bool window_reserve(window *w, backend *b, uint64_t base, uint64_t size)
{
    memset(w, 0, sizeof *w);
    CUdeviceptr got = 0;
    if (b->drv.fn_cuMemAddressReserve(&got, size, 0, base, 0) != CUDA_SUCCESS)
        return false;
    if (got != base) {
        b->drv.fn_cuMemAddressFree(got, size);
        return false;
    }
    w->base = base;
    w->size = size;
    w->reserved = true;
    w->holes = calloc(1, sizeof *w->holes);
    if (!w->holes) {
        agent_log("no memory for the free list of a pointer window");
        b->drv.fn_cuMemAddressFree(base, size);
        w->reserved = false;
        return false;
    }
    w->holes->base = base;
    w->holes->size = size;
    return true;
}

/* Takes [at, at + size) out of the hole h (which holds it), splitting h. */
static bool carve(window *w, window_block **hp, CUdeviceptr at, uint64_t size)
{
    window_block *h = *hp;
    uint64_t before = at - h->base, after = h->base + h->size - (at + size);
    if (before && after) {
        window_block *tail = calloc(1, sizeof *tail);
        if (!tail) {
            agent_log("no memory to split a free range of the pointer window");
            return false;
        }
        tail->base = at + size;
        tail->size = after;
        tail->next = h->next;
        h->next = tail;
        h->size = before;
    } else if (before) {
        h->size = before;
    } else if (after) {
        h->base = at + size;
        h->size = after;
    } else {
        *hp = h->next;
        free(h);
    }
    (void)w;
    return true;
}

CUresult window_take_range(window *w, backend *b, uint64_t size, uint64_t align, uint64_t hint, CUdeviceptr *out)
{
    uint64_t g = b->granularity;
    if (size == 0 || size % g != 0 || (align && (align & (align - 1))))
        return CUDA_ERROR_INVALID_VALUE;
    if (align < g)
        align = g;
    for (window_block **hp = &w->holes; *hp; hp = &(*hp)->next) {
        window_block *h = *hp;
        /* The hint is honoured when it is free, as the driver does. */
        CUdeviceptr at = hint && hint >= h->base && hint + size <= h->base + h->size && hint % align == 0
                             ? hint
                             : (h->base + align - 1) / align * align;
        if (at + size > h->base + h->size)
            continue;
        /* The record first: once carved, the range must not be lost. */
        window_block *r = calloc(1, sizeof *r);
        if (!r) {
            agent_log("no memory for the record of a reserved range of %llu bytes", (unsigned long long)size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!carve(w, hp, at, size)) {
            free(r);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        r->base = at;
        r->size = size;
        r->next = w->ranges;
        w->ranges = r;
        *out = at;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void add_hole(window *w, window_block *rec, CUdeviceptr base, uint64_t size);

CUresult window_give_range(window *w, CUdeviceptr p, uint64_t size)
{
    for (window_block **rp = &w->ranges; *rp; rp = &(*rp)->next)
        if ((*rp)->base == p && (*rp)->size == size) {
            for (window_block *m = w->maps; m; m = m->next)
                if (m->base >= p && m->base < p + size)
                    return CUDA_ERROR_INVALID_VALUE;   /* still mapped */
            window_block *r = *rp;
            *rp = r->next;
            add_hole(w, r, p, size);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult window_map(window *w, backend *b, CUdeviceptr p, uint64_t size, CUmemGenericAllocationHandle h)
{
    bool inside = false;
    for (window_block *r = w->ranges; r && !inside; r = r->next)
        inside = p >= r->base && p + size <= r->base + r->size;
    if (!inside)
        return CUDA_ERROR_INVALID_VALUE;
    window_block *m = calloc(1, sizeof *m);
    if (!m) {
        agent_log("no memory for the record of a mapping of %llu bytes", (unsigned long long)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = b->drv.fn_cuMemMap(p, size, 0, h, 0);
    if (rc) {
        free(m);
        return rc;
    }
    m->base = p;
    m->size = size;
    m->next = w->maps;
    w->maps = m;
    return CUDA_SUCCESS;
}

CUresult window_unmap(window *w, backend *b, CUdeviceptr p, uint64_t size)
{
    for (window_block **mp = &w->maps; *mp; mp = &(*mp)->next)
        if ((*mp)->base == p && (*mp)->size == size) {
            window_block *m = *mp;
            CUresult rc = b->drv.fn_cuMemUnmap(p, size);
            if (rc)
                return rc;
            *mp = m->next;
            free(m);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult window_alloc(window *w, backend *b, int device, uint64_t size, CUdeviceptr *out)
{
    uint64_t g = b->granularity;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* More than the window holds is out of memory, as the driver says for
     * more than the device holds (allocators free caches and retry on it). */
    if (size > w->size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size = (size + g - 1) / g * g;
    window_block **hp = &w->holes;
    while (*hp && (*hp)->size < size)
        hp = &(*hp)->next;
    if (!*hp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    window_block *hole = *hp;
    window_block *blk = calloc(1, sizeof *blk);
    if (!blk) {
        agent_log("no memory for the record of an allocation of %llu bytes", (unsigned long long)size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device } };
    CUresult rc = b->drv.fn_cuMemCreate(&blk->handle, size, &prop, 0);
    if (rc) {
        free(blk);
        return rc;
    }
    CUdeviceptr at = hole->base;
    rc = b->drv.fn_cuMemMap(at, size, 0, blk->handle, 0);
    if (rc == CUDA_SUCCESS) {
        /* The devices that can be its peers may map it too: VMM memory
         * ignores cuCtxEnablePeerAccess, so a peer kernel reading it after
         * the program enabled access needs the mapping made here. */
        CUmemAccessDesc access[AGENT_DEVICES_MAX] = {
            { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device },
              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE } };
        int n = 1;   /* the owner first: softgpu records it as the range's device */
        for (int d = 0; d < b->device_count && d < AGENT_DEVICES_MAX; d++) {
            int can = 0;
            if (d != device && b->drv.fn_cuDeviceCanAccessPeer &&
                b->drv.fn_cuDeviceCanAccessPeer(&can, d, device) != CUDA_SUCCESS)
                can = 0;
            if (can)
                access[n++] = (CUmemAccessDesc){ .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d },
                                                 .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        }
        rc = b->drv.fn_cuMemSetAccess(at, size, access, (size_t)n);
        if (rc)
            b->drv.fn_cuMemUnmap(at, size);
    }
    if (rc) {
        b->drv.fn_cuMemRelease(blk->handle);
        free(blk);
        return rc;
    }
    hole->base += size;
    hole->size -= size;
    if (hole->size == 0) {
        *hp = hole->next;
        free(hole);
    }
    blk->base = at;
    blk->size = size;
    blk->device = device;
    blk->next = w->blocks;
    w->blocks = blk;
    *out = at;
    return CUDA_SUCCESS;
}

/* Gives [base, base + size) back to the holes, merging neighbours. rec,
 * the record of what is given back, becomes the new hole or is freed: a
 * range given back needs no allocation and is never lost. */
static void add_hole(window *w, window_block *rec, CUdeviceptr base, uint64_t size)
{
    window_block **hp = &w->holes, *prev = NULL;
    while (*hp && (*hp)->base < base) {
        prev = *hp;
        hp = &(*hp)->next;
    }
    window_block *next = *hp;
    if (prev && prev->base + prev->size == base) {
        prev->size += size;
        if (next && prev->base + prev->size == next->base) {
            prev->size += next->size;
            prev->next = next->next;
            free(next);
        }
        free(rec);
        return;
    }
    if (next && base + size == next->base) {
        next->base = base;
        next->size += size;
        free(rec);
        return;
    }
    window_block *h = rec;
    memset(h, 0, sizeof *h);
    h->base = base;
    h->size = size;
    h->next = next;
    *hp = h;
}

static void unmap_block(window *w, backend *b, window_block *blk)
{
    b->drv.fn_cuMemUnmap(blk->base, blk->size);
    b->drv.fn_cuMemRelease(blk->handle);
    add_hole(w, blk, blk->base, blk->size);
}

static CUresult free_block(window *w, backend *b, CUdeviceptr p, bool wait)
{
    for (window_block **bp = &w->blocks; *bp; bp = &(*bp)->next)
        if ((*bp)->base == p) {
            window_block *blk = *bp;
            *bp = blk->next;
            /* Work still queued may use the memory: let it finish first. */
            if (wait) {
                b->drv.fn_cuCtxSetCurrent(b->primary[blk->device]);
                b->drv.fn_cuCtxSynchronize();
            }
            unmap_block(w, b, blk);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult window_free(window *w, backend *b, CUdeviceptr p)
{
    return free_block(w, b, p, true);
}

CUresult window_free_idle(window *w, backend *b, CUdeviceptr p)
{
    return free_block(w, b, p, false);
}

void window_release(window *w, backend *b)
{
    while (w->maps) {
        window_block *m = w->maps;
        w->maps = m->next;
        b->drv.fn_cuMemUnmap(m->base, m->size);
        free(m);
    }
    while (w->ranges) {
        window_block *r = w->ranges;
        w->ranges = r->next;
        free(r);
    }
    while (w->blocks) {
        window_block *blk = w->blocks;
        w->blocks = blk->next;
        unmap_block(w, b, blk);
    }
    while (w->holes) {
        window_block *h = w->holes;
        w->holes = h->next;
        free(h);
    }
    if (w->reserved)
        b->drv.fn_cuMemAddressFree(w->base, w->size);
    w->reserved = false;
}
