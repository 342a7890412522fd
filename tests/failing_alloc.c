/* Allocations that fail on demand (see failing_alloc.h). */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tests/failing_alloc.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
void __real_free(void *p);

/* Blocks allocated while armed, not yet freed (a test's paths make tens). */
#define LIVE_MAX 4096
static void *live[LIVE_MAX];
static unsigned long nlive, untracked;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread bool armed, hit;
static __thread unsigned long counted, fail_at;

void failing_alloc_arm(unsigned long nth)
{
    pthread_mutex_lock(&live_lock);
    nlive = untracked = 0;
    pthread_mutex_unlock(&live_lock);
    armed = true;
    hit = false;
    counted = 0;
    fail_at = nth;
}

unsigned long failing_alloc_disarm(void)
{
    armed = false;
    return counted;
}

bool failing_alloc_hit(void)
{
    return hit;
}

unsigned long failing_alloc_live(void)
{
    pthread_mutex_lock(&live_lock);
    unsigned long n = nlive + untracked;
    pthread_mutex_unlock(&live_lock);
    return n;
}

/* Follows p when this thread is armed; returns p. */
static void *track(void *p)
{
    if (p && armed) {
        pthread_mutex_lock(&live_lock);
        if (nlive < LIVE_MAX)
            live[nlive++] = p;
        else
            untracked++;   /* counted as live: a test this large is suspect */
        pthread_mutex_unlock(&live_lock);
    }
    return p;
}

static void forget(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&live_lock);
    for (unsigned long i = 0; i < nlive; i++)
        if (live[i] == p) {
            live[i] = live[--nlive];
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

void __wrap_free(void *p)
{
    forget(p);
    __real_free(p);
}

/* True when this allocation is the one to fail. */
static bool fails(void)
{
    if (!armed)
        return false;
    if (++counted != fail_at)
        return false;
    hit = true;
    errno = ENOMEM;
    return true;
}

void *__wrap_malloc(size_t n)
{
    return fails() ? NULL : track(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fails() ? NULL : track(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fails())
        return NULL;   /* p stays as it was */
    void *q = __real_realloc(p, n);
    if (q) {
        /* A block followed before stays followed under its new address. */
        pthread_mutex_lock(&live_lock);
        bool followed = false;
        for (unsigned long i = 0; p && i < nlive && !followed; i++)
            if (live[i] == p) {
                live[i] = q;
                followed = true;
            }
        pthread_mutex_unlock(&live_lock);
        if (!followed)
            track(q);
    }
    return q;
}

char *__wrap_strdup(const char *s)
{
    return fails() ? NULL : track(__real_strdup(s));
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fails() ? NULL : track(__real_strndup(s, n));
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fails() ? NULL : track(__real_aligned_alloc(align, n));
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
    if (fails())
        return ENOMEM;
    int rc = __real_posix_memalign(out, align, n);
    if (rc == 0)
        track(*out);
    return rc;
}
