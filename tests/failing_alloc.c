/* Allocations that fail on demand (see failing_alloc.h). */
#include <errno.h>
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

static __thread bool armed, hit;
static __thread unsigned long counted, fail_at;

void failing_alloc_arm(unsigned long nth)
{
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
    return fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return fails() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fails() ? NULL : __real_strndup(s, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return fails() ? NULL : __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **out, size_t align, size_t n)
{
    return fails() ? ENOMEM : __real_posix_memalign(out, align, n);
}
