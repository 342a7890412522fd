/* Page-locked buffers for copies into the program and for the data of
 * large copies to the device (handover_recv), kept for reuse: a fresh
 * buffer costs its page faults (and the driver's pinning) on every copy,
 * which dominated large copies. Sizes are rounded up to powers of two from
 * 64 KiB, and at most STAGING_KEEP bytes wait in the pool.
 *
 * staging_put never calls the driver: freeing pinned memory synchronises
 * the whole context, and the sender (or a marker, on the driver's callback
 * thread) that gives buffers back must never wait for kernels nor call the
 * driver. Buffers past the pool's size go to a thread of their own that
 * frees them. Each buffer carries its list record in a header before the
 * bytes its user sees, so giving one back allocates nothing and cannot
 * fail, and a device copy still writing the user's bytes (a failing job
 * gives its buffers back early) cannot touch the list. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/agent.h"

#define STAGING_MIN ((size_t)64 << 10)
#define STAGING_CLASSES 12                     /* 64 KiB .. 128 MiB */
#define STAGING_KEEP ((size_t)512 << 20)

typedef struct spare {           /* the header of each buffer */
    struct spare *next;
} spare;

#define STAGING_HEADER ((size_t)64)    /* keeps the user's bytes 64-byte aligned */

static spare *pool[STAGING_CLASSES];
static size_t pooled;
static spare *excess;                          /* waiting for the freeing thread */
static backend *excess_backend;
static bool freer_started;
static int freeing;                            /* buffers the freeing thread holds */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t excess_ready = PTHREAD_COND_INITIALIZER;

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

static void *freer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        while (!excess)
            pthread_cond_wait(&excess_ready, &lock);
        spare *s = excess;
        excess = s->next;
        freeing++;
        backend *b = excess_backend;
        pthread_mutex_unlock(&lock);
        b->drv.fn_cuMemFreeHost(s);
        pthread_mutex_lock(&lock);
        freeing--;
    }
    return NULL;
}

/* The driver's allocation; *out NULL when it fails (what a driver leaves
 * there then is nothing to give back). */
static CUresult alloc_host(backend *b, size_t n, void **out)
{
    void *base = NULL;
    CUresult rc = b->drv.fn_cuMemAllocHost_v2(&base, n + STAGING_HEADER);
    *out = rc == CUDA_SUCCESS ? (uint8_t *)base + STAGING_HEADER : NULL;
    return rc;
}

CUresult staging_get(backend *b, size_t n, void **out)
{
    size_t size;
    int c = class_of(n ? n : 1, &size);
    if (c < 0)
        return alloc_host(b, n, out);
    pthread_mutex_lock(&lock);
    spare *s = pool[c];
    if (s) {
        pool[c] = s->next;
        pooled -= size;
    }
    pthread_mutex_unlock(&lock);
    if (s) {
        *out = (uint8_t *)s + STAGING_HEADER;
        return CUDA_SUCCESS;
    }
    return alloc_host(b, size, out);
}

void staging_put(backend *b, void *p, size_t n)
{
    if (!p)
        return;
    size_t size;
    int c = class_of(n ? n : 1, &size);
    spare *s = (spare *)((uint8_t *)p - STAGING_HEADER);
    pthread_mutex_lock(&lock);
    if (c >= 0 && pooled + size <= STAGING_KEEP) {
        s->next = pool[c];
        pool[c] = s;
        pooled += size;
    } else {
        s->next = excess;
        excess = s;
        excess_backend = b;
        if (!freer_started) {
            pthread_t t;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            freer_started = pthread_create(&t, &attr, freer_main, NULL) == 0;
            pthread_attr_destroy(&attr);
        }
        pthread_cond_signal(&excess_ready);
    }
    pthread_mutex_unlock(&lock);
}

void staging_drop(backend *b)
{
    pthread_mutex_lock(&lock);
    for (int c = 0; c < STAGING_CLASSES; c++)
        while (pool[c]) {
            spare *s = pool[c];
            pool[c] = s->next;
            b->drv.fn_cuMemFreeHost(s);
        }
    pooled = 0;
    /* The freeing thread frees outside the lock: wait until it has none. */
    while (excess || freeing) {
        pthread_mutex_unlock(&lock);
        usleep(1000);
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
}
