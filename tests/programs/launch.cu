// Launch configurations through the runtime, checked on the CPU:
//  - 3-D grids of 3-D blocks (every index and dimension register written
//    out by every thread), a grid wider than 65535 blocks in x;
//  - dynamic shared memory: extern __shared__ sized at launch, above the
//    48 KiB default after cudaFuncSetAttribute(MaxDynamicSharedMemorySize),
//    and static + dynamic shared together;
//  - cudaLaunchKernel with an argument array, a kernel with many parameters
//    of mixed sizes (char, short, double, a 40-byte struct by value), and
//    one with a struct of 32752 bytes by value;
//  - cudaFuncGetAttributes and cudaOccupancyMaxActiveBlocksPerMultiprocessor;
//  - launches the runtime must refuse (1025 threads per block, a zero grid,
//    more dynamic shared memory than the device has): each returns an
//    error from the launch and cudaGetLastError, is not sticky, and the next
//    good launch works.
//
// <<<1, 1025>>>, <<<1, 4096>>> and <<<0, 32>>> must be refused with
// cudaErrorInvalidConfiguration, as CUDA documents: softgpu and the shim
// return CUresult 9, not named in cuda.h, the only code cudart reports as
// cudaErrorInvalidConfiguration (found by a test driver returning each code
// from cuLaunchKernel); scripts/gpu-check shows what a real GPU says.
// (softgpu once gave every kernel the static shared size of all the
// module's .shared variables, so cudaFuncSetAttribute(MaxDynamicShared-
// MemorySize, the opt-in limit) failed; fixed by c41b69a.)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

__global__ void where(unsigned *out)
{
    unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
    unsigned block = (bz * gridDim.y + by) * gridDim.x + bx;
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    unsigned *o = out + ((size_t)block * nt + t) * 4;
    o[0] = bx | by << 10 | bz << 20;
    o[1] = threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20;
    o[2] = gridDim.x | gridDim.y << 10 | gridDim.z << 20;
    o[3] = blockDim.x | blockDim.y << 10 | blockDim.z << 20;
}

__global__ void wide(unsigned *count, unsigned *last)
{
    if (threadIdx.x == 0) {
        atomicAdd(count, 1u);
        atomicMax(last, blockIdx.x);
    }
}

// Reverses n ints through dynamic shared memory (all of it touched).
__global__ void reverse_shared(const int *in, int *out, int n)
{
    extern __shared__ int buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        buf[i] = in[blockIdx.x * n + i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[blockIdx.x * n + i] = buf[n - 1 - i];
}

// Static shared and dynamic shared side by side: neither may overlap.
__global__ void both_shared(int *out, int n)
{
    __shared__ int fixed[256];
    extern __shared__ int dyn[];
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        fixed[i] = 1000000 + i;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        dyn[i] = 2000000 + i;
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        out[i] = fixed[i];
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[256 + i] = dyn[i];
}

struct Blob {
    double d;
    int i[5];
    char c[3];
    short s;
    float f;
};

// A by-value table of 32752 bytes: with the pointer after it, the 32764
// bytes of parameters CUDA 12.1 allows a kernel (softgpu once refused any
// one parameter over 4 KiB).
struct Table {
    int v[8188];
};

__global__ void weigh(Table t, long long *out)
{
    long long sum = 0;
    for (int k = threadIdx.x; k < 8188; k += blockDim.x)
        sum += (long long)t.v[k] * (k + 1);
    atomicAdd((unsigned long long *)out, (unsigned long long)sum);
}

__global__ void many(char c, short s, int i, long long ll, float f, double d, Blob b, const int *p, double *out)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = c;
        out[1] = s;
        out[2] = i;
        out[3] = (double)ll;
        out[4] = f;
        out[5] = d;
        out[6] = b.d;
        out[7] = b.i[0] + b.i[1] * 10 + b.i[2] * 100 + b.i[3] * 1000 + b.i[4] * 10000;
        out[8] = b.c[0] + b.c[1] * 100 + b.c[2] * 10000;
        out[9] = b.s;
        out[10] = b.f;
        out[11] = *p;
    }
}

static int wrong;
#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond)) {                     \
            if (wrong++ < 10)              \
                printf(__VA_ARGS__);       \
        }                                  \
    } while (0)

int main()
{
    int dev = 0;
    CHECK(cudaSetDevice(dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));

    // --- 3-D grid of 3-D blocks ---
    dim3 grid(5, 3, 2), block(4, 3, 5);
    unsigned nb = grid.x * grid.y * grid.z, nt = block.x * block.y * block.z;
    size_t words = (size_t)nb * nt * 4;
    unsigned *dw, *hw = (unsigned *)malloc(words * sizeof(unsigned));
    CHECK(cudaMalloc(&dw, words * sizeof(unsigned)));
    CHECK(cudaMemset(dw, 0xff, words * sizeof(unsigned)));
    where<<<grid, block>>>(dw);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hw, dw, words * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++)
                for (unsigned tz = 0; tz < block.z; tz++)
                    for (unsigned ty = 0; ty < block.y; ty++)
                        for (unsigned tx = 0; tx < block.x; tx++) {
                            size_t b = (bz * grid.y + by) * grid.x + bx, t = (tz * block.y + ty) * block.x + tx;
                            unsigned *o = hw + (b * nt + t) * 4;
                            unsigned want[4] = { bx | by << 10 | bz << 20, tx | ty << 10 | tz << 20,
                                                 grid.x | grid.y << 10 | grid.z << 20,
                                                 block.x | block.y << 10 | block.z << 20 };
                            EXPECT(memcmp(o, want, sizeof want) == 0,
                                   "3-D: block (%u,%u,%u) thread (%u,%u,%u) wrote %#x %#x %#x %#x\n", bx, by, bz, tx,
                                   ty, tz, o[0], o[1], o[2], o[3]);
                        }
    printf("3-D grid %ux%ux%u of %ux%ux%u: checked\n", grid.x, grid.y, grid.z, block.x, block.y, block.z);

    // --- a grid wider than 65535 blocks ---
    unsigned *dc;
    CHECK(cudaMalloc(&dc, 2 * sizeof(unsigned)));
    CHECK(cudaMemset(dc, 0, 2 * sizeof(unsigned)));
    const unsigned wide_blocks = 70001;
    wide<<<wide_blocks, 32>>>(dc, dc + 1);
    CHECK(cudaGetLastError());
    unsigned hc[2];
    CHECK(cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost));
    EXPECT(hc[0] == wide_blocks && hc[1] == wide_blocks - 1, "wide grid: %u blocks ran, last %u; expected %u\n",
           hc[0], hc[1], wide_blocks);

    // --- dynamic shared memory, above 48 KiB ---
    int optin = 0;
    CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int small_n = 1000, big_n = 0;
    size_t big_bytes = 0;
    if (optin > 48 * 1024) {
        big_bytes = (size_t)(optin < 80 * 1024 ? optin : 80 * 1024) & ~(size_t)3;
        big_n = (int)(big_bytes / sizeof(int));
        CHECK(cudaFuncSetAttribute(reverse_shared, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big_bytes));
    }
    int rows = 3, maxn = big_n > small_n ? big_n : small_n;
    size_t elems = (size_t)rows * maxn > 256 + 3000 ? (size_t)rows * maxn : 256 + 3000;   // both_shared's too
    int *hin = (int *)malloc(elems * sizeof(int)), *hout = (int *)malloc(elems * sizeof(int));
    int *din, *dout;
    CHECK(cudaMalloc(&din, elems * sizeof(int)));
    CHECK(cudaMalloc(&dout, elems * sizeof(int)));
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? big_n : small_n;
        if (!n)
            continue;
        for (int i = 0; i < rows * n; i++)
            hin[i] = i * 7 + pass;
        CHECK(cudaMemcpy(din, hin, rows * n * sizeof(int), cudaMemcpyHostToDevice));
        reverse_shared<<<rows, 96, n * sizeof(int)>>>(din, dout, n);
        CHECK(cudaGetLastError());
        CHECK(cudaMemcpy(hout, dout, rows * n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < n; i++)
                EXPECT(hout[r * n + i] == hin[r * n + n - 1 - i], "dynamic shared %zu bytes: out[%d][%d] = %d\n",
                       n * sizeof(int), r, i, hout[r * n + i]);
    }
    printf("dynamic shared: %zu bytes, and %zu bytes after cudaFuncSetAttribute (opt-in limit %d)\n",
           small_n * sizeof(int), big_bytes, optin);
    both_shared<<<1, 128, 3000 * sizeof(int)>>>(dout, 3000);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(hout, dout, (256 + 3000) * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256 + 3000; i++) {
        int want = i < 256 ? 1000000 + i : 2000000 + (i - 256);
        EXPECT(hout[i] == want, "static+dynamic shared: [%d] = %d, expected %d\n", i, hout[i], want);
    }

    // --- cudaLaunchKernel, many parameters ---
    char c = -7;
    short s = -30000;
    int i = 123456789;
    long long ll = -(1LL << 40) - 3;
    float f = 1.5f;
    double d = -2.25e100;
    Blob b;
    memset(&b, 0, sizeof b);
    b.d = 3.125;
    for (int k = 0; k < 5; k++)
        b.i[k] = k + 1;
    b.c[0] = 1;
    b.c[1] = 2;
    b.c[2] = 3;
    b.s = -5;
    b.f = 0.75f;
    int *dp;
    double *dout_d, hd[12];
    int pv = 4242;
    CHECK(cudaMalloc(&dp, sizeof(int)));
    CHECK(cudaMemcpy(dp, &pv, sizeof pv, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&dout_d, sizeof hd));
    const int *cdp = dp;
    void *args[] = { &c, &s, &i, &ll, &f, &d, &b, &cdp, &dout_d };
    CHECK(cudaLaunchKernel((const void *)many, dim3(2), dim3(32), args, 0, 0));
    CHECK(cudaMemcpy(hd, dout_d, sizeof hd, cudaMemcpyDeviceToHost));
    double want_d[12] = { (double)c, (double)s, (double)i, (double)ll, (double)f, d, b.d, 54321.0, 30201.0,
                          (double)b.s, (double)b.f, (double)pv };
    for (int k = 0; k < 12; k++)
        EXPECT(hd[k] == want_d[k], "cudaLaunchKernel parameter %d arrived as %.17g, expected %.17g\n", k, hd[k],
               want_d[k]);

    // --- a by-value parameter of 32752 bytes ---
    static Table t;
    long long want_sum = 0, got_sum = 0, *dsum;
    for (int k = 0; k < 8188; k++) {
        t.v[k] = (int)((k * 7919) % 20001) - 10000;
        want_sum += (long long)t.v[k] * (k + 1);
    }
    CHECK(cudaMalloc(&dsum, sizeof *dsum));
    CHECK(cudaMemset(dsum, 0, sizeof *dsum));
    weigh<<<1, 128>>>(t, dsum);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(&got_sum, dsum, sizeof got_sum, cudaMemcpyDeviceToHost));
    EXPECT(got_sum == want_sum, "a 32752-byte parameter: weighed sum %lld, expected %lld\n", got_sum, want_sum);

    // --- attributes and occupancy ---
    cudaFuncAttributes fa;
    CHECK(cudaFuncGetAttributes(&fa, both_shared));
    printf("both_shared: %zu static shared bytes, %d registers, max %d threads\n", fa.sharedSizeBytes, fa.numRegs,
           fa.maxThreadsPerBlock);
    EXPECT(fa.sharedSizeBytes >= 256 * sizeof(int) && fa.maxThreadsPerBlock >= 128,
           "cudaFuncGetAttributes: sharedSizeBytes %zu maxThreadsPerBlock %d\n", fa.sharedSizeBytes,
           fa.maxThreadsPerBlock);
    int occ = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, where, 128, 0));
    EXPECT(occ >= 1, "occupancy %d blocks per multiprocessor\n", occ);

    // --- launches that must be refused, and are not sticky ---
    where<<<1, 1025>>>(dw);
    cudaError_t e1 = cudaGetLastError();
    EXPECT(e1 == cudaErrorInvalidConfiguration, "1025 threads per block: %s\n", cudaGetErrorName(e1));
    where<<<1, 4096>>>(dw);
    cudaError_t e4 = cudaGetLastError();
    EXPECT(e4 == cudaErrorInvalidConfiguration, "4096 threads per block: %s\n", cudaGetErrorName(e4));
    where<<<dim3(0, 1, 1), 32>>>(dw);
    cudaError_t e2 = cudaGetLastError();
    EXPECT(e2 == cudaErrorInvalidConfiguration, "a zero grid: %s\n", cudaGetErrorName(e2));
    size_t too_much = (size_t)(optin > 0 ? optin : (int)prop.sharedMemPerBlock) + 4096;
    reverse_shared<<<1, 32, too_much>>>(din, dout, 10);
    cudaError_t e3 = cudaGetLastError();
    EXPECT(e3 != cudaSuccess, "%zu bytes of dynamic shared memory: accepted\n", too_much);
    CHECK(cudaGetLastError());   // cleared
    printf("refused: 1025 threads %s, zero grid %s, %zu shared bytes %s\n", cudaGetErrorName(e1),
           cudaGetErrorName(e2), too_much, cudaGetErrorName(e3));
    CHECK(cudaMemset(dc, 0, 2 * sizeof(unsigned)));
    wide<<<100, 64>>>(dc, dc + 1);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost));
    EXPECT(hc[0] == 100, "after the refused launches: %u blocks ran, expected 100\n", hc[0]);

    CHECK(cudaFree(dw));
    CHECK(cudaFree(dc));
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
    CHECK(cudaFree(dp));
    CHECK(cudaFree(dout_d));
    free(hw);
    free(hin);
    free(hout);
    if (wrong) {
        printf("launch: %d wrong\n", wrong);
        return 1;
    }
    printf("launch: ok\n");
    return 0;
}
