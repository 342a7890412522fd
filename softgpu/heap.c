/* Device malloc and free: each context's heap, one device range of
 * CU_LIMIT_MALLOC_HEAP_SIZE bytes made at the first malloc and carved first
 * fit. Each block has a 16-byte header (size and a check word) in the heap,
 * as on a GPU; the free list lives here, so a kernel writing past a block
 * can break at most the header, which free checks. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

typedef struct extent {
    uint64_t off, size;
} extent;

struct soft_heap {
    uint64_t base, size;
    extent *free_list;   /* sorted by offset, never adjacent */
    size_t nfree, cap;
};

#define HDR 16u
#define CHECK 0x6d616c6c6f63ull   /* "malloc" */

/* One lock for every heap: device malloc is rare next to the work around it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct soft_heap *heap_make(struct CUctx_st *c)
{
    uint64_t size = c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] & ~(uint64_t)(HDR - 1);
    struct soft_heap *h = calloc(1, sizeof *h);
    if (!h || size < 2 * HDR || !soft_device_reserve(c->device, size)) {
        free(h);
        return NULL;
    }
    void *p = soft_pages_alloc(size);
    soft_range r = { .base = (uintptr_t)p, .size = size, .kind = SOFT_MEM_DEVICE,
                     .device = c->device, .ctx = c };
    h->free_list = malloc(16 * sizeof *h->free_list);
    if (!p || !h->free_list || soft_range_add(&r) != CUDA_SUCCESS) {
        /* Pages that were made stay: freeing them waits for the launches
         * to end, and one of them is this caller. */
        if (!p)
            soft_device_unreserve(c->device, size);
        free(h->free_list);
        free(h);
        return NULL;
    }
    h->base = r.base;
    h->size = size;
    h->cap = 16;
    h->nfree = 1;
    h->free_list[0] = (extent){ 0, size };
    return h;
}

uint64_t soft_heap_alloc(void *ctx, uint64_t bytes)
{
    struct CUctx_st *c = ctx;
    if (bytes == 0 || bytes > (1ull << 46))
        return 0;
    uint64_t need = (bytes + HDR - 1) / HDR * HDR + HDR;
    uint64_t addr = 0;
    pthread_mutex_lock(&lock);
    if (!c->heap)
        c->heap = heap_make(c);
    struct soft_heap *h = c->heap;
    for (size_t i = 0; h && i < h->nfree; i++) {
        extent *e = &h->free_list[i];
        if (e->size < need)
            continue;
        uint64_t off = e->off;
        e->off += need;
        e->size -= need;
        if (e->size == 0) {
            memmove(e, e + 1, (h->nfree - i - 1) * sizeof *e);
            h->nfree--;
        }
        uint64_t hdr[2] = { need, CHECK ^ off ^ need };
        memcpy((void *)(uintptr_t)(h->base + off), hdr, sizeof hdr);
        addr = h->base + off + HDR;
        break;
    }
    pthread_mutex_unlock(&lock);
    return addr;
}

void soft_heap_free(void *ctx, uint64_t addr)
{
    struct CUctx_st *c = ctx;
    pthread_mutex_lock(&lock);
    struct soft_heap *h = c->heap;
    const char *bad = NULL;
    uint64_t hdr[2] = { 0, 0 };
    uint64_t off = addr - HDR - (h ? h->base : 0);
    if (!h || addr < h->base + HDR || off >= h->size || off % HDR) {
        bad = "not from device malloc";
    } else {
        memcpy(hdr, (void *)(uintptr_t)(h->base + off), sizeof hdr);
        if (hdr[1] != (CHECK ^ off ^ hdr[0]) || hdr[0] > h->size - off)
            bad = "freed twice, or its header was overwritten";
    }
    size_t i = 0;
    if (!bad) {
        /* First free extent past the block; neighbours must not overlap it. */
        size_t lo = 0, hi = h->nfree;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (h->free_list[mid].off > off)
                hi = mid;
            else
                lo = mid + 1;
        }
        i = lo;
        if ((i > 0 && h->free_list[i - 1].off + h->free_list[i - 1].size > off) ||
            (i < h->nfree && off + hdr[0] > h->free_list[i].off))
            bad = "freed twice";
    }
    if (bad) {
        pthread_mutex_unlock(&lock);
        soft_log("device free(%#llx): %s; ignored", (unsigned long long)addr, bad);
        return;
    }
    uint64_t zero[2] = { 0, 0 };
    memcpy((void *)(uintptr_t)(h->base + off), zero, sizeof zero);
    uint64_t size = hdr[0];
    bool join_prev = i > 0 && h->free_list[i - 1].off + h->free_list[i - 1].size == off;
    bool join_next = i < h->nfree && off + size == h->free_list[i].off;
    if (join_prev && join_next) {
        h->free_list[i - 1].size += size + h->free_list[i].size;
        memmove(&h->free_list[i], &h->free_list[i + 1], (h->nfree - i - 1) * sizeof *h->free_list);
        h->nfree--;
    } else if (join_prev) {
        h->free_list[i - 1].size += size;
    } else if (join_next) {
        h->free_list[i].off = off;
        h->free_list[i].size += size;
    } else {
        if (h->nfree == h->cap) {
            extent *n = realloc(h->free_list, 2 * h->cap * sizeof *n);
            if (!n) {   /* the block stays lost: the heap is still sound */
                pthread_mutex_unlock(&lock);
                return;
            }
            h->free_list = n;
            h->cap *= 2;
        }
        memmove(&h->free_list[i + 1], &h->free_list[i], (h->nfree - i) * sizeof *h->free_list);
        h->free_list[i] = (extent){ off, size };
        h->nfree++;
    }
    pthread_mutex_unlock(&lock);
}

bool soft_heap_made(struct CUctx_st *c)
{
    pthread_mutex_lock(&lock);
    bool made = c->heap != NULL;
    pthread_mutex_unlock(&lock);
    return made;
}

void soft_heap_drop(struct CUctx_st *c)
{
    pthread_mutex_lock(&lock);
    struct soft_heap *h = c->heap;
    c->heap = NULL;
    pthread_mutex_unlock(&lock);
    if (h)
        free(h->free_list);
    free(h);
}
