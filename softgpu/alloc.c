/* The allocation table: every range of device-visible memory (allocations,
 * host allocations, registered host memory, mapped VMM ranges, module
 * globals), sorted by base address under a reader-writer lock. It answers
 * the engine's soft_memory.find on cache misses, copy checks and pointer
 * queries. Device memory is host memory at the device address. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static soft_range *table;
static size_t count, cap;

/* Index of the first range whose base is above addr. */
static size_t upper(uint64_t addr)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (table[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const soft_range *holding(uint64_t addr)
{
    size_t i = upper(addr);
    if (i == 0)
        return NULL;
    const soft_range *r = &table[i - 1];
    return addr - r->base < r->size ? r : NULL;
}

CUresult soft_range_add(const soft_range *r)
{
    if (r->size == 0 || r->base + r->size < r->base)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult res = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(r->base);
    if ((i > 0 && table[i - 1].base + table[i - 1].size > r->base) ||
        (i < count && table[i].base < r->base + r->size)) {
        res = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (count == cap) {
        size_t ncap = cap ? cap * 2 : 64;
        soft_range *n = realloc(table, ncap * sizeof *n);
        if (!n) {
            res = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        table = n;
        cap = ncap;
    }
    memmove(&table[i + 1], &table[i], (count - i) * sizeof *table);
    table[i] = *r;
    count++;
out:
    pthread_rwlock_unlock(&lock);
    return res;
}

bool soft_range_remove(uint64_t base, soft_range *out)
{
    bool found = false;
    pthread_rwlock_wrlock(&lock);
    size_t i = upper(base);
    if (i > 0 && table[i - 1].base == base) {
        if (out)
            *out = table[i - 1];
        memmove(&table[i - 1], &table[i], (count - i) * sizeof *table);
        count--;
        found = true;
    }
    pthread_rwlock_unlock(&lock);
    return found;
}

bool soft_range_find(uint64_t addr, soft_range *out)
{
    pthread_rwlock_rdlock(&lock);
    const soft_range *r = holding(addr);
    if (r && out)
        *out = *r;
    pthread_rwlock_unlock(&lock);
    return r != NULL;
}

bool soft_range_covers(uint64_t addr, uint64_t n)
{
    pthread_rwlock_rdlock(&lock);
    const soft_range *r = holding(addr);
    bool ok = r && n <= r->size - (addr - r->base);
    pthread_rwlock_unlock(&lock);
    return ok;
}

void soft_range_drop_ctx(struct CUctx_st *ctx, void (*fn)(const soft_range *))
{
    pthread_rwlock_wrlock(&lock);
    size_t j = 0, nd = 0;
    soft_range *dropped = NULL;
    for (size_t i = 0; i < count; i++)
        nd += table[i].ctx == ctx;
    if (nd)
        dropped = malloc(nd * sizeof *dropped);
    nd = 0;
    for (size_t i = 0; i < count; i++) {
        if (table[i].ctx == ctx) {
            if (dropped)
                dropped[nd++] = table[i];
            continue;
        }
        table[j++] = table[i];
    }
    count = j;
    pthread_rwlock_unlock(&lock);
    for (size_t i = 0; fn && i < nd; i++)
        fn(&dropped[i]);
    free(dropped);
}

static bool find_cb(void *ctx, uint64_t addr, uint64_t *base, uint64_t *size)
{
    (void)ctx;
    soft_range r;
    if (!soft_range_find(addr, &r))
        return false;
    *base = r.base;
    *size = r.size;
    return true;
}

const soft_memory soft_memory_table = { .ctx = NULL, .find = find_cb };

static uint64_t page_round(uint64_t n)
{
    return (n + 4095) & ~(uint64_t)4095;
}

void *soft_pages_alloc(uint64_t size)
{
    if (size == 0 || size > (1ull << 46))
        return NULL;
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static pthread_rwlock_t life;
static pthread_once_t life_once = PTHREAD_ONCE_INIT;

static void life_init(void)
{
    /* Writers first: a free must not wait behind an endless run of launches. */
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&life, &a);
    pthread_rwlockattr_destroy(&a);
}

void soft_mem_use_begin(void)
{
    pthread_once(&life_once, life_init);
    pthread_rwlock_rdlock(&life);
}

void soft_mem_use_end(void)
{
    pthread_rwlock_unlock(&life);
}

void soft_mem_retire_begin(void)
{
    pthread_once(&life_once, life_init);
    pthread_rwlock_wrlock(&life);
}

void soft_mem_retire_end(void)
{
    pthread_rwlock_unlock(&life);
}

void soft_pages_free(void *p, uint64_t size)
{
    if (!p)
        return;
    soft_mem_retire_begin();
    munmap(p, page_round(size));
    soft_mem_retire_end();
}
