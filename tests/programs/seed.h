// A run's random seed: SEED=N repeats a run, else the time and the pid. It
// is printed ("NAME: seed N", or "seed N" without a name) so a failed run
// can be repeated exactly.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

static inline unsigned run_seed(const char *name)
{
    const char *env = getenv("SEED");
    unsigned seed = env ? (unsigned)strtoul(env, nullptr, 0) : (unsigned)time(nullptr) ^ (unsigned)getpid();
    if (name)
        printf("%s: seed %u\n", name, seed);
    else
        printf("seed %u\n", seed);
    return seed;
}
