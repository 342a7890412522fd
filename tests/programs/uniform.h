// The programs' number generator: uniform numbers in [-1, 1) from a seed, the
// same sequence on every machine (a 64-bit LCG, its top 53 bits).
#pragma once

// The generator's state: a program seeds it (rng = seed) before drawing.
static unsigned long long rng;

static double uniform()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}
