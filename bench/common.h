/* What the bench's programs share: the clock, the one output format, and
 * dying with a message. Every figure is printed as one line
 *     fig NAME MEDIAN UNIT SPREAD N
 * where SPREAD is the interquartile range in percent of the median and N the
 * number of samples; bench/report reads these lines. */
#ifndef RIG_BENCH_COMMON_H
#define RIG_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

/* Prints "bench: <message>" to stderr and exits 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Sorts samples[0..n) in place and prints the figure's line; returns the median. */
double fig_print(const char *name, const char *unit, double *samples, size_t n);

/* Prints a figure that is one value (no spread). */
void fig_value(const char *name, const char *unit, double value);

/* Random bytes (xorshift64 from seed), which no compressor shrinks. */
void fill_random(uint8_t *p, size_t n, uint64_t seed);

#endif
