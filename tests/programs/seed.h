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

// The programs' random numbers: the high half of a 64-bit LCG (Knuth's
// MMIX constants), started from run_seed's seed (seed_rng), so SEED=N
// repeats the data too.
static unsigned long long seed_state;

static inline void seed_rng(unsigned seed)
{
    seed_state = seed;
}

static inline unsigned seed_next32()
{
    seed_state = seed_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(seed_state >> 32);
}
