/* Proxy objects live in one reserved range of slots, so a handle is known
 * to be a proxy's by its address alone, and its slot number is its wire id. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shim/log.h"
#include "shim/proxy.h"

#define SLOT_SIZE 128
#define SLOTS (1u << 20)

_Static_assert(sizeof(proxy_obj) <= SLOT_SIZE, "a proxy object must fit its slot");

static uint8_t *arena;
static uint32_t next_unused = 1;     /* slot 0 is never handed out: id 0 means none */
static uint32_t *free_list;          /* room for every slot: freeing never allocates */
static uint32_t free_count;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;

static bool arena_init(void)
{
    if (arena)
        return true;
    void *p = mmap(NULL, (size_t)SLOT_SIZE * SLOTS, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    /* Pages of either are only backed once touched. */
    void *fl = mmap(NULL, sizeof *free_list * SLOTS, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || fl == MAP_FAILED) {
        if (p != MAP_FAILED)
            munmap(p, (size_t)SLOT_SIZE * SLOTS);
        if (fl != MAP_FAILED)
            munmap(fl, sizeof *free_list * SLOTS);
        shim_log(SHIM_LOG_ERROR, "no memory for the table of handles (%zu MiB of address space)",
                 ((size_t)SLOT_SIZE + sizeof *free_list) * SLOTS >> 20);
        return false;
    }
    free_list = fl;
    __atomic_store_n(&arena, p, __ATOMIC_RELEASE);
    return true;
}

proxy_obj *arena_new(proxy_type type, int device)
{
    pthread_mutex_lock(&arena_lock);
    proxy_obj *o = NULL;
    if (arena_init()) {
        uint32_t slot = 0;
        if (free_count)
            slot = free_list[--free_count];
        else if (next_unused < SLOTS)
            slot = next_unused++;
        if (slot) {
            o = (proxy_obj *)(arena + (size_t)slot * SLOT_SIZE);
            memset(o, 0, sizeof *o);
            o->id = slot;
            o->device = device;
            shim_device *d = shim_device_at(device);
            o->link = d ? d->link : NULL;
            __atomic_store_n(&o->type, type, __ATOMIC_RELEASE);
        } else {
            shim_log(SHIM_LOG_ERROR, "no free handle: all %u are in use", SLOTS - 1);
        }
    }
    pthread_mutex_unlock(&arena_lock);
    return o;
}

void arena_free(proxy_obj *o)
{
    if (!o)
        return;
    pthread_mutex_lock(&arena_lock);
    uint32_t was = __atomic_exchange_n(&o->type, PROXY_FREE, __ATOMIC_ACQ_REL);
    if (was != PROXY_FREE && free_count < SLOTS)   /* each slot is listed at most once */
        free_list[free_count++] = (uint32_t)o->id;
    pthread_mutex_unlock(&arena_lock);
}

bool arena_contains(const void *h)
{
    uint8_t *base = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
    uintptr_t p = (uintptr_t)h;
    return base && p >= (uintptr_t)base + SLOT_SIZE && p < (uintptr_t)base + (size_t)SLOT_SIZE * SLOTS &&
           (p - (uintptr_t)base) % SLOT_SIZE == 0;
}

proxy_obj *arena_get(const void *h, proxy_type type)
{
    if (!arena_contains(h))
        return NULL;
    proxy_obj *o = (proxy_obj *)h;
    uint32_t t = __atomic_load_n(&o->type, __ATOMIC_ACQUIRE);
    if (t == PROXY_FREE || (type != PROXY_FREE && t != type))
        return NULL;
    return o;
}

proxy_obj *arena_from_id(uint64_t id)
{
    uint8_t *base = __atomic_load_n(&arena, __ATOMIC_ACQUIRE);
    if (!base || id == 0 || id >= SLOTS)
        return NULL;
    proxy_obj *o = (proxy_obj *)(base + (size_t)id * SLOT_SIZE);
    return __atomic_load_n(&o->type, __ATOMIC_ACQUIRE) == PROXY_FREE ? NULL : o;
}
