/* Live-object registry: which pointers are contexts, streams, events, ...
 * so that a stale or made-up handle gets CUDA_ERROR_INVALID_HANDLE instead
 * of a crash. An open-addressing hash set keyed by pointer value. */
#include "softgpu/driver.h"

#include <stdlib.h>

typedef struct slot { uintptr_t key; int kind; } slot;  /* kind 0: free, -1: tombstone */

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;   /* lookups share it */
static slot *slots;
static size_t cap, used;   /* used counts live and tombstones */

static size_t hash(uintptr_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

static slot *lookup(uintptr_t key)
{
    if (!cap)
        return NULL;
    for (size_t i = hash(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (slots[i].kind == 0)
            return NULL;
        if (slots[i].kind > 0 && slots[i].key == key)
            return &slots[i];
    }
}

static bool grow(void)
{
    size_t live = 0;
    for (size_t i = 0; i < cap; i++)
        live += slots[i].kind > 0;
    /* Mostly tombstones: rehash at the same size. */
    size_t ncap = !cap ? 256 : (live + 1) * 4 > cap ? cap * 2 : cap;
    slot *n = calloc(ncap, sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < cap; i++) {
        if (slots[i].kind <= 0)
            continue;
        size_t j = hash(slots[i].key) & (ncap - 1);
        while (n[j].kind)
            j = (j + 1) & (ncap - 1);
        n[j] = slots[i];
    }
    free(slots);
    slots = n;
    cap = ncap;
    used = 0;
    for (size_t i = 0; i < cap; i++)
        used += slots[i].kind > 0;
    return true;
}

bool soft_handle_add(const void *p, soft_kind k)
{
    uintptr_t key = (uintptr_t)p;
    bool ok = true;
    pthread_rwlock_wrlock(&lock);
    slot *s = lookup(key);
    if (s) {
        s->kind = (int)k;
        goto out;
    }
    if ((used + 1) * 2 > cap && !grow()) {
        ok = false;
        goto out;
    }
    size_t i = hash(key) & (cap - 1);
    while (slots[i].kind > 0)
        i = (i + 1) & (cap - 1);
    if (slots[i].kind == 0)
        used++;
    slots[i].key = key;
    slots[i].kind = (int)k;
out:
    pthread_rwlock_unlock(&lock);
    return ok;
}

bool soft_handle_valid(const void *p, soft_kind k)
{
    if (!p)
        return false;
    pthread_rwlock_rdlock(&lock);
    slot *s = lookup((uintptr_t)p);
    bool ok = s && s->kind == (int)k;
    pthread_rwlock_unlock(&lock);
    return ok;
}

void soft_handle_remove(const void *p)
{
    pthread_rwlock_wrlock(&lock);
    slot *s = lookup((uintptr_t)p);
    if (s)
        s->kind = -1;
    pthread_rwlock_unlock(&lock);
}
