/* Page-locked buffers for copies into the program, kept for reuse: a fresh
 * buffer costs its page faults (and the driver's pinning) on every copy,
 * which dominated large copies. Sizes are rounded up to powers of two from
 * 64 KiB, and at most STAGING_KEEP bytes wait in the pool. */
#include <pthread.h>
#include <stdlib.h>

#include "agent/agent.h"

#define STAGING_MIN ((size_t)64 << 10)
#define STAGING_CLASSES 12                     /* 64 KiB .. 128 MiB */
#define STAGING_KEEP ((size_t)512 << 20)

typedef struct spare {
    struct spare *next;
    void *p;
} spare;

static spare *pool[STAGING_CLASSES];
static size_t pooled;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int class_of(size_t n, size_t *size)
{
    size_t s = STAGING_MIN;
    int c = 0;
    while (s < n && c < STAGING_CLASSES - 1) {
        s <<= 1;
        c++;
    }
    *size = s;
    return s >= n ? c : -1;
}

CUresult staging_get(backend *b, size_t n, void **out)
{
    size_t size;
    int c = class_of(n ? n : 1, &size);
    if (c < 0)
        return b->drv.fn_cuMemAllocHost_v2(out, n);
    pthread_mutex_lock(&lock);
    spare *s = pool[c];
    if (s) {
        pool[c] = s->next;
        pooled -= size;
    }
    pthread_mutex_unlock(&lock);
    if (s) {
        *out = s->p;
        free(s);
        return CUDA_SUCCESS;
    }
    return b->drv.fn_cuMemAllocHost_v2(out, size);
}

void staging_put(backend *b, void *p, size_t n)
{
    size_t size;
    int c = class_of(n ? n : 1, &size);
    spare *s = c >= 0 ? malloc(sizeof *s) : NULL;
    pthread_mutex_lock(&lock);
    if (s && pooled + size <= STAGING_KEEP) {
        s->p = p;
        s->next = pool[c];
        pool[c] = s;
        pooled += size;
        s = NULL;
        p = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(s);
    if (p)
        b->drv.fn_cuMemFreeHost(p);
}

void staging_release_all(backend *b)
{
    pthread_mutex_lock(&lock);
    for (int c = 0; c < STAGING_CLASSES; c++)
        while (pool[c]) {
            spare *s = pool[c];
            pool[c] = s->next;
            b->drv.fn_cuMemFreeHost(s->p);
            free(s);
        }
    pooled = 0;
    pthread_mutex_unlock(&lock);
}
