// A kernel whose time grows linearly with ROUNDS on softgpu: each thread runs
// a dependent chain of ROUNDS steps, checkable on the CPU with chain().
// (No clock64 or %globaltimer: softgpu refuses them, and the work must be
// real anyway.)
#pragma once

__device__ __host__ inline unsigned chain(unsigned x, long long rounds)
{
    for (long long r = 0; r < rounds; r++)
        x = x * 1664525u + 1013904223u + (x >> 13);
    return x;
}

__global__ void work(unsigned *out, long long rounds)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = chain(i * 2654435761u + 1u, rounds);
}
