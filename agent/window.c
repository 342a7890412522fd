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
        b->drv.fn_cuMemAddressFree(base, size);
        w->reserved = false;
        return false;
    }
    w->holes->base = base;
    w->holes->size = size;
    return true;
}

CUresult window_alloc(window *w, backend *b, int device, uint64_t size, CUdeviceptr *out)
{
    uint64_t g = b->granularity;
    if (size == 0 || size > w->size)
        return CUDA_ERROR_INVALID_VALUE;
    size = (size + g - 1) / g * g;
    window_block **hp = &w->holes;
    while (*hp && (*hp)->size < size)
        hp = &(*hp)->next;
    if (!*hp)
        return CUDA_ERROR_OUT_OF_MEMORY;
    window_block *hole = *hp;
    window_block *blk = calloc(1, sizeof *blk);
    if (!blk)
        return CUDA_ERROR_OUT_OF_MEMORY;
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
        CUmemAccessDesc access = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device },
                                   .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        rc = b->drv.fn_cuMemSetAccess(at, size, &access, 1);
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

/* Gives [base, base + size) back to the holes, merging neighbours. */
static void add_hole(window *w, CUdeviceptr base, uint64_t size)
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
        return;
    }
    if (next && base + size == next->base) {
        next->base = base;
        next->size += size;
        return;
    }
    window_block *h = calloc(1, sizeof *h);
    if (!h)
        return;   /* the range is lost to this job, not corrupted */
    h->base = base;
    h->size = size;
    h->next = next;
    *hp = h;
}

static void unmap_block(window *w, backend *b, window_block *blk)
{
    b->drv.fn_cuMemUnmap(blk->base, blk->size);
    b->drv.fn_cuMemRelease(blk->handle);
    add_hole(w, blk->base, blk->size);
    free(blk);
}

CUresult window_free(window *w, backend *b, CUdeviceptr p)
{
    for (window_block **bp = &w->blocks; *bp; bp = &(*bp)->next)
        if ((*bp)->base == p) {
            window_block *blk = *bp;
            *bp = blk->next;
            /* Work still queued may use the memory: let it finish first. */
            b->drv.fn_cuCtxSetCurrent(b->primary[blk->device]);
            b->drv.fn_cuCtxSynchronize();
            unmap_block(w, b, blk);
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

void window_release(window *w, backend *b)
{
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
