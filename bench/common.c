/* The bench's clock, output, exit and random bytes; see common.h. */
#include "bench/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted v, interpolated. */
static double quantile(const double *v, size_t n, double q)
{
    double at = q * (double)(n - 1);
    size_t i = (size_t)at;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (at - (double)i) * (v[i + 1] - v[i]);
}

double fig_print(const char *name, const char *unit, double *samples, size_t n)
{
    if (n == 0)
        return 0;
    qsort(samples, n, sizeof *samples, cmp_double);
    double med = quantile(samples, n, 0.5);
    double iqr = quantile(samples, n, 0.75) - quantile(samples, n, 0.25);
    printf("fig %s %.6g %s %.1f %zu\n", name, med, unit, med > 0 ? 100.0 * iqr / med : 0.0, n);
    fflush(stdout);
    return med;
}

void fig_value(const char *name, const char *unit, double value)
{
    printf("fig %s %.6g %s 0 1\n", name, value, unit);
    fflush(stdout);
}

/* Random bytes (xorshift64), which no compressor shrinks. */
void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)(x >> (8 * (i % 8)));
}
