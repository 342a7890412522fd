// Reductions through the runtime, in int and float:
//  - a block tree reduction in dynamic __shared__ memory with __syncthreads,
//    one partial per block, then a second one-block pass over the partials;
//  - a warp-shuffle reduction (__shfl_down_sync for the sum, __shfl_xor_sync
//    for the max, so every lane holds it) with one shared slot per warp;
//  - __ballot_sync/__popc counting the negative inputs per warp.
// n is not a multiple of the block, so the last block is partial; every
// result is checked on the CPU against random inputs (seed printed; SEED=N
// repeats a run).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

template <typename T>
__global__ void block_sum(const T *in, T *out, int n)
{
    extern __shared__ unsigned char smem[];
    T *part = (T *)smem;
    T v = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += in[i];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

// One partial sum, one max and one negative count per block; blockDim.x is a
// multiple of 32 and at most 1024.
template <typename T>
__global__ void warp_reduce(const T *in, T *sums, T *maxes, int *negatives, int n)
{
    __shared__ T wsum[32];
    __shared__ T wmax[32];
    __shared__ int wneg[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    bool live = i < n;
    T x = live ? in[i] : T(0);
    T s = x;
    for (int off = 16; off > 0; off >>= 1)
        s += __shfl_down_sync(0xffffffffu, s, off);
    T m = live ? x : in[blockIdx.x * blockDim.x];   // the block's first element is always live
    for (int off = 16; off > 0; off >>= 1) {
        T o = __shfl_xor_sync(0xffffffffu, m, off);
        m = o > m ? o : m;
    }
    unsigned neg = __ballot_sync(0xffffffffu, live && x < T(0));
    // Every lane holds the warp's max after the butterfly; check that here.
    T lane0max = __shfl_sync(0xffffffffu, m, 0);
    if (lane0max != m)
        m = T(-1e9);   // poisons the result: the CPU check then fails
    if (lane == 0) {
        wsum[warp] = s;
        wmax[warp] = m;
        wneg[warp] = __popc(neg);
    }
    __syncthreads();
    if (warp == 0) {
        T ps = lane < warps ? wsum[lane] : T(0);
        T pm = lane < warps ? wmax[lane] : wmax[0];
        int pn = lane < warps ? wneg[lane] : 0;
        for (int off = 16; off > 0; off >>= 1) {
            ps += __shfl_down_sync(0xffffffffu, ps, off);
            T o = __shfl_down_sync(0xffffffffu, pm, off);
            pm = o > pm ? o : pm;
            pn += __shfl_down_sync(0xffffffffu, pn, off);
        }
        if (lane == 0) {
            sums[blockIdx.x] = ps;
            maxes[blockIdx.x] = pm;
            negatives[blockIdx.x] = pn;
        }
    }
}

static unsigned long long rng;
static unsigned next32()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng >> 32);
}
static void fill(int *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (int)(next32() % 2001) - 1000;
}
static void fill(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)((double)next32() / 4294967296.0 * 2.0 - 1.0);
}
// int sums are exact; a float sum is within n * eps * sum|x| of the truth
static bool close(int got, double want, double) { return (double)got == want; }
static bool close(float got, double want, double mag) { return fabs((double)got - want) <= 2e-6 * mag + 1e-6; }

template <typename T>
static int run(const char *type, int n)
{
    T *h = (T *)malloc(n * sizeof(T));
    fill(h, n);
    double want = 0.0, mag = 0.0;
    for (int i = 0; i < n; i++) {
        want += (double)h[i];
        mag += fabs((double)h[i]);
    }
    int wrong = 0;
    T *din, *dpart, *dtotal;
    const int block = 256, blocks = 37;   // the grid-stride loop wraps several times
    CHECK(cudaMalloc(&din, n * sizeof(T)));
    CHECK(cudaMalloc(&dpart, blocks * sizeof(T)));
    CHECK(cudaMalloc(&dtotal, sizeof(T)));
    CHECK(cudaMemcpy(din, h, n * sizeof(T), cudaMemcpyHostToDevice));

    // Two-pass shared-memory tree: 37 partials, then one block of 64.
    block_sum<T><<<blocks, block, block * sizeof(T)>>>(din, dpart, n);
    CHECK(cudaGetLastError());
    block_sum<T><<<1, 64, 64 * sizeof(T)>>>(dpart, dtotal, blocks);
    CHECK(cudaGetLastError());
    T total;
    CHECK(cudaMemcpy(&total, dtotal, sizeof(T), cudaMemcpyDeviceToHost));
    if (!close(total, want, mag)) {
        printf("%s block_sum total %.9g, expected %.9g\n", type, (double)total, want);
        wrong++;
    }

    // Warp shuffles: one element per thread, a partial last block.
    const int wblock = 160, wblocks = (n + wblock - 1) / wblock;
    T *dsums, *dmaxes;
    int *dneg;
    CHECK(cudaMalloc(&dsums, wblocks * sizeof(T)));
    CHECK(cudaMalloc(&dmaxes, wblocks * sizeof(T)));
    CHECK(cudaMalloc(&dneg, wblocks * sizeof(int)));
    warp_reduce<T><<<wblocks, wblock>>>(din, dsums, dmaxes, dneg, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    T *sums = (T *)malloc(wblocks * sizeof(T)), *maxes = (T *)malloc(wblocks * sizeof(T));
    int *negs = (int *)malloc(wblocks * sizeof(int));
    CHECK(cudaMemcpy(sums, dsums, wblocks * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(maxes, dmaxes, wblocks * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(negs, dneg, wblocks * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < wblocks; b++) {
        double s = 0.0, m = 0.0;
        T mx = h[b * wblock];
        int neg = 0;
        for (int i = b * wblock; i < n && i < (b + 1) * wblock; i++) {
            s += (double)h[i];
            m += fabs((double)h[i]);
            mx = h[i] > mx ? h[i] : mx;
            neg += h[i] < T(0);
        }
        if (!close(sums[b], s, m) && wrong++ < 5)
            printf("%s warp_reduce block %d sum %.9g, expected %.9g\n", type, b, (double)sums[b], s);
        if (maxes[b] != mx && wrong++ < 5)
            printf("%s warp_reduce block %d max %.9g, expected %.9g\n", type, b, (double)maxes[b], (double)mx);
        if (negs[b] != neg && wrong++ < 5)
            printf("%s warp_reduce block %d negatives %d, expected %d\n", type, b, negs[b], neg);
    }
    printf("%s n %d: sum %.9g (block tree), %d warp blocks, %d wrong\n", type, n, (double)total, wblocks, wrong);
    CHECK(cudaFree(din));
    CHECK(cudaFree(dpart));
    CHECK(cudaFree(dtotal));
    CHECK(cudaFree(dsums));
    CHECK(cudaFree(dmaxes));
    CHECK(cudaFree(dneg));
    free(h);
    free(sums);
    free(maxes);
    free(negs);
    return wrong;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    const int n = 30011;
    int wrong = run<int>("int", n);
    wrong += run<float>("float", n);
    if (wrong) {
        printf("reduce: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("reduce: ok %d int float\n", n);
    return 0;
}
