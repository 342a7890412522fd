/* The seed of a test's random data: RIG_TEST_SEED when set (decimal or
 * 0x hex), else one from the clock and the process. Written to the test's
 * stderr, which make check shows whenever the test fails, so that
 * RIG_TEST_SEED=N repeats the run. */
#ifndef RIG_TESTS_SEED_H
#define RIG_TESTS_SEED_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static __attribute__((unused)) unsigned test_seed(void)
{
    const char *v = getenv("RIG_TEST_SEED");
    unsigned seed = v && *v ? (unsigned)strtoul(v, NULL, 0)
                            : (unsigned)time(NULL) ^ ((unsigned)getpid() << 8) ^ (unsigned)clock();
    /* stderr, not cr_log_warn: Criterion exits 1 after any warning. */
    fprintf(stderr, "seed %u (RIG_TEST_SEED=%u repeats this run)\n", seed, seed);
    return seed;
}

/* test_seed, also given to srand for code that draws with rand(). */
static __attribute__((unused)) unsigned test_srand(void)
{
    unsigned seed = test_seed();
    srand(seed);
    return seed;
}

#endif
