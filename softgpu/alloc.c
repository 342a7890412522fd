/* The allocation table: every range of device-visible memory (allocations,
 * host allocations, registered host memory, mapped VMM ranges, module
 * globals), a treap by base address under a reader-writer lock. It answers
 * the engine's soft_memory.find on cache misses, copy checks and pointer
 * queries. Device memory is host memory at the device address. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;

/* A treap keyed by base address: O(log n) insert, remove and lookup of the
 * range holding an address, whatever order addresses come in. */
typedef struct node {
    soft_range r;
    uint32_t prio;
    struct node *left, *right;
} node;

static node *root;
static uint32_t seed = 2463534242u;

static uint32_t next_prio(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return seed;
}

/* Splits t into keys below key and keys from key on. */
static void split(node *t, uint64_t key, node **lo, node **hi)
{
    if (!t) {
        *lo = *hi = NULL;
    } else if (t->r.base < key) {
        split(t->right, key, &t->right, hi);
        *lo = t;
    } else {
        split(t->left, key, lo, &t->left);
        *hi = t;
    }
}

/* Joins two treaps, every key of a below every key of b. */
static node *merge(node *a, node *b)
{
    if (!a || !b)
        return a ? a : b;
    if (a->prio > b->prio) {
        a->right = merge(a->right, b);
        return a;
    }
    b->left = merge(a, b->left);
    return b;
}

/* The range with the greatest base at or below addr, or NULL. */
static const node *at_or_below(uint64_t addr)
{
    const node *best = NULL;
    for (const node *t = root; t;) {
        if (t->r.base <= addr) {
            best = t;
            t = t->right;
        } else {
            t = t->left;
        }
    }
    return best;
}

/* The range with the smallest base above addr, or NULL. */
static const node *above(uint64_t addr)
{
    const node *best = NULL;
    for (const node *t = root; t;) {
        if (t->r.base > addr) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

static const soft_range *holding(uint64_t addr)
{
    const node *n = at_or_below(addr);
    return n && addr - n->r.base < n->r.size ? &n->r : NULL;
}

CUresult soft_range_add(const soft_range *r)
{
    if (r->size == 0 || r->base + r->size < r->base)
        return CUDA_ERROR_INVALID_VALUE;
    node *n = malloc(sizeof *n);
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->r = *r;
    n->left = n->right = NULL;
    CUresult res = CUDA_SUCCESS;
    pthread_rwlock_wrlock(&lock);
    const node *below = at_or_below(r->base), *next = above(r->base);
    if ((below && below->r.base + below->r.size > r->base) || (next && next->r.base < r->base + r->size)) {
        res = CUDA_ERROR_INVALID_VALUE;
        free(n);
        goto out;
    }
    n->prio = next_prio();
    node *lo, *hi;
    split(root, r->base, &lo, &hi);
    root = merge(merge(lo, n), hi);
out:
    pthread_rwlock_unlock(&lock);
    return res;
}

bool soft_range_remove(uint64_t base, soft_range *out)
{
    pthread_rwlock_wrlock(&lock);
    node *lo, *mid, *hi;
    split(root, base, &lo, &hi);
    split(hi, base + 1, &mid, &hi);
    root = merge(lo, hi);
    pthread_rwlock_unlock(&lock);
    if (mid && out)
        *out = mid->r;
    bool found = mid != NULL;
    free(mid);   /* at most one node: bases are distinct */
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

/* True when dev (-1: any) may touch range r. */
static bool reachable(const soft_range *r, int dev)
{
    return dev < 0 || r->kind != SOFT_MEM_VMM || (dev < 32 && (r->access >> dev & 1));
}

bool soft_range_covers_on(uint64_t addr, uint64_t n, int dev)
{
    pthread_rwlock_rdlock(&lock);
    const soft_range *r = holding(addr);
    bool ok = r && reachable(r, dev);
    /* VMM mappings end to end read as one range, as on a GPU. */
    while (ok && n > r->size - (addr - r->base)) {
        uint64_t end = r->base + r->size;
        const soft_range *next = r->kind == SOFT_MEM_VMM && end != 0 ? holding(end) : NULL;
        ok = next && next->base == end && next->kind == SOFT_MEM_VMM && reachable(next, dev);
        n -= end - addr;
        addr = end;
        r = next;
    }
    pthread_rwlock_unlock(&lock);
    return ok;
}

bool soft_range_covers(uint64_t addr, uint64_t n)
{
    return soft_range_covers_on(addr, n, -1);
}

void soft_range_set_access(uint64_t base, uint32_t mask)
{
    pthread_rwlock_wrlock(&lock);
    const node *n = at_or_below(base);
    if (n && n->r.base == base && n->r.kind == SOFT_MEM_VMM)
        ((node *)n)->r.access = mask;
    pthread_rwlock_unlock(&lock);
}

/* Moves every node owned by ctx from t onto *out (linked through right). */
static node *strip(node *t, struct CUctx_st *ctx, node **out)
{
    if (!t)
        return NULL;
    t->left = strip(t->left, ctx, out);
    t->right = strip(t->right, ctx, out);
    if (t->r.ctx != ctx)
        return t;
    node *rest = merge(t->left, t->right);
    t->left = NULL;
    t->right = *out;
    *out = t;
    return rest;
}

void soft_range_drop_ctx(struct CUctx_st *ctx, void (*fn)(const soft_range *))
{
    node *dropped = NULL;
    pthread_rwlock_wrlock(&lock);
    root = strip(root, ctx, &dropped);
    pthread_rwlock_unlock(&lock);
    while (dropped) {
        node *next = dropped->right;
        if (fn)
            fn(&dropped->r);
        free(dropped);
        dropped = next;
    }
}

/* ctx: 1 + the device the launch runs on, or 0 for any. */
static bool find_cb(void *ctx, uint64_t addr, uint64_t *base, uint64_t *size)
{
    soft_range r;
    if (!soft_range_find(addr, &r) || !reachable(&r, (int)(uintptr_t)ctx - 1))
        return false;
    *base = r.base;
    *size = r.size;
    return true;
}

const soft_memory soft_memory_table = { .ctx = NULL, .find = find_cb };

_Static_assert(SOFT_MAX_DEVICES == 16, "one table per device below");
#define ON(d) { .ctx = (void *)(uintptr_t)((d) + 1), .find = find_cb }
static const soft_memory tables[SOFT_MAX_DEVICES] = {
    ON(0), ON(1), ON(2), ON(3), ON(4), ON(5), ON(6), ON(7),
    ON(8), ON(9), ON(10), ON(11), ON(12), ON(13), ON(14), ON(15),
};
#undef ON

const soft_memory *soft_memory_on(int dev)
{
    return dev >= 0 && dev < SOFT_MAX_DEVICES ? &tables[dev] : &soft_memory_table;
}

static uint64_t page_round(uint64_t n)
{
    return (n + 4095) & ~(uint64_t)4095;
}

/* Small ranges come from malloc, so that many of them do not run into the
 * kernel's limit on mappings (vm.max_map_count, 65530 by default); large
 * ones are their own anonymous mapping. */
#define SMALL (256u << 10)

void *soft_pages_alloc(uint64_t size)
{
    if (size == 0 || size > (1ull << 46))
        return NULL;
    if (size < SMALL) {
        size_t n = (size_t)((size + 255) & ~(uint64_t)255);
        void *p = aligned_alloc(256, n);
        if (p)
            memset(p, 0, n);
        return p;
    }
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
    if (size < SMALL)
        free(p);
    else
        munmap(p, page_round(size));
    soft_mem_retire_end();
}
