/* Virtual memory management, as the agent uses it to place allocations at
 * addresses it chooses: a reservation is an inaccessible anonymous mapping
 * at the requested address (MAP_FIXED_NOREPLACE, so nothing already there is
 * ever replaced), physical memory is a memfd, and mapping it puts the memfd
 * over the reservation (MAP_FIXED|MAP_SHARED). A mapped range becomes device
 * memory, in the allocation table, once cuMemSetAccess grants access to a
 * device; the table keeps which devices have it, and copies and kernels of
 * the others find no memory there, as their GPUs would. */
#include "softgpu/driver.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ull
#define GRAN_MIN (64ull << 10)
#define GRAN_RECOMMENDED (2ull << 20)

typedef struct vmm_handle {
    int fd;
    uint64_t size;
    int refs;                  /* owed releases plus mappings */
    int owed;                  /* cuMemRelease calls due: 1 from create, 1 per retain */
    CUmemAllocationProp prop;
} vmm_handle;

typedef struct span {
    uint64_t base, size;
    vmm_handle *h;             /* mappings only */
    uint8_t access[SOFT_MAX_DEVICES];   /* mappings: CUmemAccess_flags per device */
} span;

/* The devices span m grants any access to, one bit each. */
static uint32_t access_mask(const span *m)
{
    uint32_t mask = 0;
    for (int d = 0; d < SOFT_MAX_DEVICES; d++)
        if (m->access[d] != CU_MEM_ACCESS_FLAGS_PROT_NONE)
            mask |= 1u << d;
    return mask;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static span *reserved, *mapped;
static size_t nreserved, nmapped;

static bool push(span **v, size_t *n, span s)
{
    span *m = realloc(*v, (*n + 1) * sizeof *m);
    if (!m)
        return false;
    m[(*n)++] = s;
    *v = m;
    return true;
}

static void erase(span *v, size_t *n, size_t i)
{
    memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof *v);
    (*n)--;
}

static void handle_unref(vmm_handle *h)
{
    if (--h->refs > 0)
        return;
    soft_handle_remove(h);
    close(h->fd);
    soft_device_unreserve(h->prop.location.id, h->size);
    free(h);
}

static vmm_handle *handle_get(CUmemGenericAllocationHandle handle)
{
    vmm_handle *h = (vmm_handle *)(uintptr_t)handle;
    return soft_handle_valid(h, SOFT_VMM) ? h : NULL;
}

static bool aligned(uint64_t v, uint64_t a) { return (v & (a - 1)) == 0; }

static CUresult check_prop(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = soft_check_device(prop->location.id);
    return r == CUDA_ERROR_INVALID_DEVICE ? CUDA_ERROR_INVALID_DEVICE : r;
}

SOFT_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                        CUmemAllocationGranularity_flags option)
{
    if (!granularity)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    SOFT_TRY(check_prop(prop));
    switch (option) {
    case CU_MEM_ALLOC_GRANULARITY_MINIMUM: *granularity = GRAN_MIN; return CUDA_SUCCESS;
    case CU_MEM_ALLOC_GRANULARITY_RECOMMENDED: *granularity = GRAN_RECOMMENDED; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

SOFT_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                              CUdeviceptr addr, unsigned long long flags)
{
    if (!ptr || size == 0 || !aligned(size, PAGE) || flags != 0 ||
        (alignment & (alignment - 1)) || alignment > (1ull << 40) || !aligned(addr, PAGE) ||
        (alignment && !aligned(addr, alignment)) || addr + size < addr)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (alignment < PAGE)
        alignment = PAGE;
    void *p;
    if (addr) {
        p = mmap((void *)(uintptr_t)addr, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED || p != (void *)(uintptr_t)addr) {
            /* Kernels before 4.17 take the flag as a hint only. */
            if (p != MAP_FAILED)
                munmap(p, size);
            soft_log("cuMemAddressReserve: 0x%llx+0x%zx is not free (%s)", (unsigned long long)addr,
                     size, p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else {
        if (size > SIZE_MAX - alignment)
            return CUDA_ERROR_INVALID_VALUE;
        char *q = mmap(NULL, size + alignment, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (q == MAP_FAILED)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uintptr_t a = ((uintptr_t)q + alignment - 1) & ~(uintptr_t)(alignment - 1);
        if (a > (uintptr_t)q)
            munmap(q, a - (uintptr_t)q);
        size_t tail = (uintptr_t)q + size + alignment - (a + size);
        if (tail)
            munmap((void *)(a + size), tail);
        p = (void *)a;
    }
    pthread_mutex_lock(&lock);
    bool ok = push(&reserved, &nreserved, (span){ .base = (uintptr_t)p, .size = size });
    pthread_mutex_unlock(&lock);
    if (!ok) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

/* Undoes mapping i (lock held): back to an inaccessible reservation. */
static void unmap_at(size_t i)
{
    span m = mapped[i];
    if (access_mask(&m))
        soft_range_remove(m.base, NULL);
    soft_mem_retire_begin();
    mmap((void *)(uintptr_t)m.base, m.size, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    soft_mem_retire_end();
    erase(mapped, &nmapped, i);
    handle_unref(m.h);
}

SOFT_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nreserved; i++) {
        if (reserved[i].base != ptr || reserved[i].size != size)
            continue;
        /* Mappings still inside go with it. */
        for (size_t j = nmapped; j-- > 0;)
            if (mapped[j].base >= ptr && mapped[j].base - ptr < size)
                unmap_at(j);
        soft_mem_retire_begin();
        munmap((void *)(uintptr_t)ptr, size);
        soft_mem_retire_end();
        erase(reserved, &nreserved, i);
        r = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                      const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || flags != 0 || size == 0 || !aligned(size, GRAN_MIN))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    SOFT_TRY(check_prop(prop));
    int dev = prop->location.id;
    if (!soft_device_reserve(dev, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    vmm_handle *h = calloc(1, sizeof *h);
    int fd = memfd_create("softgpu", MFD_CLOEXEC);
    if (!h || fd < 0 || ftruncate(fd, (off_t)size) != 0 || !soft_handle_add(h, SOFT_VMM)) {
        if (fd >= 0)
            close(fd);
        free(h);
        soft_device_unreserve(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->fd = fd;
    h->size = size;
    h->refs = 1;
    h->owed = 1;
    h->prop = *prop;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    vmm_handle *h = handle_get(handle);
    if (!h || h->owed == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        h->owed--;
        handle_unref(h);
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Index of the reservation holding [base, base + size), or -1. */
static long reservation_of(uint64_t base, uint64_t size)
{
    for (size_t i = 0; i < nreserved; i++)
        if (base >= reserved[i].base && base - reserved[i].base <= reserved[i].size &&
            size <= reserved[i].size - (base - reserved[i].base))
            return (long)i;
    return -1;
}

SOFT_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                   CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (!ptr || size == 0 || flags != 0 || !aligned(ptr, PAGE) || !aligned(size, PAGE) ||
        !aligned(offset, PAGE))
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    vmm_handle *h = handle_get(handle);
    if (!h || h->owed == 0) {
        r = CUDA_ERROR_INVALID_HANDLE;
        goto out;
    }
    if (offset > h->size || size > h->size - offset || reservation_of(ptr, size) < 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (size_t i = 0; i < nmapped; i++)
        if (mapped[i].base < ptr + size && ptr < mapped[i].base + mapped[i].size) {
            r = CUDA_ERROR_ALREADY_MAPPED;
            goto out;
        }
    if (!push(&mapped, &nmapped, (span){ .base = ptr, .size = size, .h = h })) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset);
    if (p == MAP_FAILED) {
        nmapped--;
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    h->refs++;
out:
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    if (!ptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    /* The range must be whole mappings, end to end. */
    uint64_t covered = 0;
    for (size_t i = 0; i < nmapped; i++) {
        const span *m = &mapped[i];
        bool inside = m->base >= ptr && m->base - ptr < size;
        bool overlaps = m->base < ptr + size && ptr < m->base + m->size;
        if (overlaps && (!inside || m->size > size - (m->base - ptr))) {
            r = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
        if (inside)
            covered += m->size;
    }
    if (covered != size) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (size_t j = nmapped; j-- > 0;)
        if (mapped[j].base >= ptr && mapped[j].base - ptr < size)
            unmap_at(j);
out:
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    if (!ptr || size == 0 || !desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return CUDA_ERROR_INVALID_VALUE;
        SOFT_TRY(soft_check_device(desc[i].location.id));
    }
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    uint64_t covered = 0;
    for (size_t i = 0; i < nmapped; i++) {
        const span *m = &mapped[i];
        bool overlaps = m->base < ptr + size && ptr < m->base + m->size;
        if (overlaps && (m->base < ptr || m->size > size - (m->base - ptr))) {
            r = CUDA_ERROR_INVALID_VALUE;   /* partial mappings */
            goto out;
        }
        if (overlaps)
            covered += m->size;
    }
    if (covered != size) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (size_t i = 0; i < nmapped; i++) {
        span *m = &mapped[i];
        if (!(m->base >= ptr && m->base - ptr < size))
            continue;
        span next = *m;
        for (size_t k = 0; k < count; k++)
            next.access[desc[k].location.id] = (uint8_t)desc[k].flags;
        uint32_t was = access_mask(m), now = access_mask(&next);
        /* One host memory serves every device, readable and writable:
         * read-only device access is not enforced (a write would be a
         * fault that kills the whole process, where a GPU reports an
         * error); which devices may touch it is, through the table. */
        if (!was && now) {
            if (mprotect((void *)(uintptr_t)m->base, m->size, PROT_READ | PROT_WRITE) != 0) {
                r = CUDA_ERROR_INVALID_VALUE;
                goto out;
            }
            soft_range rg = { .base = m->base, .size = m->size, .kind = SOFT_MEM_VMM,
                              .device = m->h->prop.location.id, .access = now };
            r = soft_range_add(&rg);
            if (r != CUDA_SUCCESS)
                goto out;
        } else if (was && !now) {
            soft_range_remove(m->base, NULL);
            soft_mem_retire_begin();
            mprotect((void *)(uintptr_t)m->base, m->size, PROT_NONE);
            soft_mem_retire_end();
        } else if (was != now) {
            soft_range_set_access(m->base, now);
            if (was & ~now) {
                /* Work already running on a device that lost access ends first. */
                soft_mem_retire_begin();
                soft_mem_retire_end();
            }
        }
        *m = next;
    }
out:
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_device(location->id));
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmapped; i++)
        if (ptr >= mapped[i].base && ptr - mapped[i].base < mapped[i].size) {
            *flags = mapped[i].access[location->id];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                                 CUmemGenericAllocationHandle handle)
{
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    vmm_handle *h = handle_get(handle);
    if (h)
        *prop = h->prop;
    else
        r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uintptr_t)addr;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmapped; i++)
        if (a >= mapped[i].base && a - mapped[i].base < mapped[i].size) {
            /* Each retain is undone by one cuMemRelease. */
            mapped[i].h->refs++;
            mapped[i].h->owed++;
            *handle = (CUmemGenericAllocationHandle)(uintptr_t)mapped[i].h;
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

SOFT_API CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                                       CUmemAllocationHandleType handleType,
                                                       unsigned long long flags)
{
    if (!shareableHandle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    SOFT_TRY(soft_check_init());
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&lock);
    vmm_handle *h = handle_get(handle);
    if (!h || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        int fd = dup(h->fd);
        if (fd < 0)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *(int *)shareableHandle = fd;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
