// Cooperative launches: a two-phase reduction across the whole grid with
// cooperative groups' grid.sync() (each block sums its slice into partials,
// the grid waits, every block then reads all partials), run through
// cudaLaunchCooperativeKernel and through cudaLaunchKernelEx with the
// cooperative attribute, several syncs in a row; checked against the CPU
// (seed printed; SEED=N repeats a run). A grid larger than can be resident
// is refused with cudaErrorCooperativeLaunchTooLarge. Says "coop: ok".
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

namespace cg = cooperative_groups;

// out[b] = sum of all of x, computed by block b after the grid barrier;
// rounds times over: each round adds the previous total to every element.
__global__ void grid_sum(long long *x, long long *partial, long long *out, int n, int rounds)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ long long s[256];
    for (int r = 0; r < rounds; r++) {
        long long mine = 0;
        for (int i = grid.thread_rank(); i < n; i += grid.size())
            mine += x[i];
        s[threadIdx.x] = mine;
        __syncthreads();
        for (int k = blockDim.x / 2; k > 0; k /= 2) {
            if (threadIdx.x < k)
                s[threadIdx.x] += s[threadIdx.x + k];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            partial[blockIdx.x] = s[0];
        grid.sync();
        long long total = 0;
        for (int b = 0; b < gridDim.x; b++)
            total += partial[b];
        if (threadIdx.x == 0)
            out[r * gridDim.x + blockIdx.x] = total;
        grid.sync();   // every block read the partials before they change
        for (int i = grid.thread_rank(); i < n; i += grid.size())
            x[i] += total % 1000;
        grid.sync();
    }
}

static int run(bool ex, int blocks, int rounds, const long long *h, int n)
{
    long long *x, *partial, *out;
    CHECK(cudaMalloc(&x, n * sizeof(long long)));
    CHECK(cudaMalloc(&partial, blocks * sizeof(long long)));
    CHECK(cudaMalloc(&out, (size_t)rounds * blocks * sizeof(long long)));
    CHECK(cudaMemcpy(x, h, n * sizeof(long long), cudaMemcpyHostToDevice));
    if (ex) {
        cudaLaunchConfig_t config = {};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeCooperative;
        attr[0].val.cooperative = 1;
        config.gridDim = dim3(blocks);
        config.blockDim = dim3(256);
        config.attrs = attr;
        config.numAttrs = 1;
        CHECK(cudaLaunchKernelEx(&config, grid_sum, x, partial, out, n, rounds));
    } else {
        void *args[] = { &x, &partial, &out, &n, &rounds };
        CHECK(cudaLaunchCooperativeKernel((void *)grid_sum, dim3(blocks), dim3(256), args, 0, 0));
    }
    CHECK(cudaDeviceSynchronize());
    long long *got = (long long *)malloc((size_t)rounds * blocks * sizeof(long long));
    CHECK(cudaMemcpy(got, out, (size_t)rounds * blocks * sizeof(long long), cudaMemcpyDeviceToHost));
    long long *ref = (long long *)malloc(n * sizeof(long long));
    for (int i = 0; i < n; i++)
        ref[i] = h[i];
    int wrong = 0;
    for (int r = 0; r < rounds; r++) {
        long long total = 0;
        for (int i = 0; i < n; i++)
            total += ref[i];
        for (int b = 0; b < blocks; b++)
            if (got[r * blocks + b] != total && wrong++ < 5)
                printf("%s, %d blocks: round %d block %d saw %lld, expected %lld\n",
                       ex ? "cudaLaunchKernelEx" : "cudaLaunchCooperativeKernel", blocks, r, b,
                       got[r * blocks + b], total);
        for (int i = 0; i < n; i++)
            ref[i] += total % 1000;
    }
    free(got);
    free(ref);
    CHECK(cudaFree(x));
    CHECK(cudaFree(partial));
    CHECK(cudaFree(out));
    return wrong;
}

int main()
{
    int dev = 0, coop = 0, sms = 0, per_sm = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sum, 256, 0));
    printf("cooperative launch %d, %d SMs, %d blocks of 256 each\n", coop, sms, per_sm);
    if (!coop) {
        printf("coop: the device has no cooperative launch\n");
        return 1;
    }
    unsigned seed = run_seed(nullptr);
    srand(seed);
    const int n = 50021;
    long long *h = (long long *)malloc(n * sizeof(long long));
    for (int i = 0; i < n; i++)
        h[i] = rand() % 100000 - 50000;
    int wrong = 0;
    wrong += run(false, 7, 3, h, n);
    wrong += run(true, 12, 2, h, n);
    wrong += run(false, 1, 1, h, n);

    // One block more than can be resident: refused, the context unharmed.
    long long *x;
    CHECK(cudaMalloc(&x, sizeof(long long)));
    int blocks = per_sm * sms + 1, one = 1;
    void *args[] = { &x, &x, &x, &one, &one };
    cudaError_t e = cudaLaunchCooperativeKernel((void *)grid_sum, dim3(blocks), dim3(256), args, 0, 0);
    if (e != cudaErrorCooperativeLaunchTooLarge) {
        printf("%d blocks: %s, expected cudaErrorCooperativeLaunchTooLarge\n", blocks, cudaGetErrorName(e));
        wrong++;
    }
    (void)cudaGetLastError();
    CHECK(cudaFree(x));
    wrong += run(false, 5, 1, h, n);
    free(h);
    if (wrong) {
        printf("coop: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("coop: ok\n");
    return 0;
}
