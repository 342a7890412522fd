// Atomics through the runtime, checked on the CPU against random inputs
// (seed printed; SEED=N repeats a run):
//  - a 64-bin histogram counted with atomicAdd in __shared__ memory and
//    merged with global atomicAdd, and the same counted straight in global;
//  - atomicAdd on float (values that sum exactly, so order cannot matter),
//    atomicMax/atomicMin on int, atomicAdd on unsigned long long;
//  - atomicCAS loops: a float max on the bits and a double add (the classic
//    pre-sm_60 atomicAdd), the latter on both global and shared memory;
//  - the values atomics return: atomicAdd tickets form a permutation,
//    atomicInc wraps, atomicAnd/Or/Xor/Exch leave the expected bits.
//  - ~(1u << k) compiles to a rotate (shf.l.wrap.b32, a funnel shift).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

#define BINS 64

__global__ void hist_shared(const int *in, int n, unsigned *hist)
{
    __shared__ unsigned local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[in[i] % BINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b])
            atomicAdd(&hist[b], local[b]);
}

__global__ void hist_global(const int *in, int n, unsigned *hist)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&hist[in[i] % BINS], 1u);
}

struct Totals {
    float fsum;
    int imax, imin;
    unsigned long long usum;
    float fmax;   // by a CAS loop on the bits
    double dsum;  // by a CAS loop on the bits, global
    double dsum_shared;   // per block in shared, then CAS-added here
    unsigned ticket;
    unsigned wrap;
    unsigned andv, orv, xorv;
    int exch;
};

__device__ float cas_max(float *addr, float v)
{
    int *p = (int *)addr;
    int old = *p, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= v)
            break;
        old = atomicCAS(p, assumed, __float_as_int(v));
    } while (old != assumed);
    return __int_as_float(old);
}

__device__ double cas_add(double *addr, double v)
{
    unsigned long long *p = (unsigned long long *)addr;
    unsigned long long old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed, __double_as_longlong(__longlong_as_double(assumed) + v));
    } while (old != assumed);
    return __longlong_as_double(old);
}

__global__ void scalars(const int *in, const float *f, int n, Totals *t, unsigned *tickets, unsigned wrap_limit)
{
    __shared__ double block_sum;
    if (threadIdx.x == 0)
        block_sum = 0.0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        atomicAdd(&t->fsum, f[i]);
        atomicMax(&t->imax, v - 5000);
        atomicMin(&t->imin, v - 5000);
        atomicAdd(&t->usum, (unsigned long long)v * 1000003ULL);
        cas_max(&t->fmax, f[i]);
        cas_add(&t->dsum, (double)f[i] * 0.1);
        cas_add(&block_sum, (double)v);
        tickets[atomicAdd(&t->ticket, 1u)] = i;
        atomicInc(&t->wrap, wrap_limit);
        atomicAnd(&t->andv, ~(1u << (i % 32)) | (v & 1 ? 0u : 1u << (i % 32)));
        atomicOr(&t->orv, 1u << (v % 32));
        atomicXor(&t->xorv, (unsigned)v);
        atomicExch(&t->exch, -1);
    }
    __syncthreads();
    if (threadIdx.x == 0)
        cas_add(&t->dsum_shared, block_sum);
}

int main()
{
    unsigned seed = run_seed(nullptr);
    seed_rng(seed);
    const int n = 20011, block = 128, blocks = (n + block - 1) / block;
    const unsigned wrap_limit = 997;
    int *in = (int *)malloc(n * sizeof(int));
    float *f = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        // skewed, so some bins are hot: contention on the same address
        unsigned r = seed_next32();
        in[i] = (r & 1) ? (int)(r >> 1) % 10000 : (int)((r >> 1) % 7) * BINS;
        f[i] = (float)((int)(seed_next32() % 257) - 128) / 16.0f;   // sums stay exact in float
    }
    int *din;
    float *df;
    unsigned *dh1, *dh2, *dtickets;
    Totals *dt;
    CHECK(cudaMalloc(&din, n * sizeof(int)));
    CHECK(cudaMalloc(&df, n * sizeof(float)));
    CHECK(cudaMalloc(&dh1, BINS * sizeof(unsigned)));
    CHECK(cudaMalloc(&dh2, BINS * sizeof(unsigned)));
    CHECK(cudaMalloc(&dtickets, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&dt, sizeof(Totals)));
    CHECK(cudaMemcpy(din, in, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(df, f, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dh1, 0, BINS * sizeof(unsigned)));
    CHECK(cudaMemset(dh2, 0, BINS * sizeof(unsigned)));
    CHECK(cudaMemset(dtickets, 0xff, n * sizeof(unsigned)));
    Totals t0;
    memset(&t0, 0, sizeof t0);
    t0.imax = -2147483647 - 1;
    t0.imin = 2147483647;
    t0.fmax = -INFINITY;
    t0.andv = 0xffffffffu;
    t0.xorv = 0x5a5a5a5au;
    t0.exch = 7;
    CHECK(cudaMemcpy(dt, &t0, sizeof t0, cudaMemcpyHostToDevice));

    hist_shared<<<23, 96>>>(din, n, dh1);
    CHECK(cudaGetLastError());
    hist_global<<<blocks, block>>>(din, n, dh2);
    CHECK(cudaGetLastError());
    scalars<<<blocks, block>>>(din, df, n, dt, dtickets, wrap_limit);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());

    unsigned h1[BINS], h2[BINS], want[BINS] = { 0 };
    unsigned *tickets = (unsigned *)malloc(n * sizeof(unsigned));
    Totals t;
    CHECK(cudaMemcpy(h1, dh1, sizeof h1, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h2, dh2, sizeof h2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(tickets, dtickets, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&t, dt, sizeof t, cudaMemcpyDeviceToHost));

    int wrong = 0;
    for (int i = 0; i < n; i++)
        want[in[i] % BINS]++;
    for (int b = 0; b < BINS; b++) {
        if (h1[b] != want[b] && wrong++ < 5)
            printf("shared histogram bin %d = %u, expected %u\n", b, h1[b], want[b]);
        if (h2[b] != want[b] && wrong++ < 5)
            printf("global histogram bin %d = %u, expected %u\n", b, h2[b], want[b]);
    }
    printf("histogram: bin 0 %u (hot), bin 1 %u\n", h1[0], h1[1]);

    float fsum = 0.0f, fmax = -INFINITY;
    int imax = -2147483647 - 1, imin = 2147483647, exch = t0.exch;
    unsigned long long usum = 0;
    double dsum = 0.0, isum = 0.0;
    unsigned andv = t0.andv, orv = 0, xorv = t0.xorv;
    for (int i = 0; i < n; i++) {
        int v = in[i];
        fsum += f[i];
        imax = v - 5000 > imax ? v - 5000 : imax;
        imin = v - 5000 < imin ? v - 5000 : imin;
        usum += (unsigned long long)v * 1000003ULL;
        fmax = f[i] > fmax ? f[i] : fmax;
        dsum += (double)f[i] * 0.1;
        isum += (double)v;
        andv &= ~(1u << (i % 32)) | (v & 1 ? 0u : 1u << (i % 32));
        orv |= 1u << (v % 32);
        xorv ^= (unsigned)v;
        exch = -1;
    }
#define EXPECT(cond, ...)                  \
    do {                                   \
        if (!(cond)) {                     \
            printf(__VA_ARGS__);           \
            wrong++;                       \
        }                                  \
    } while (0)
    EXPECT(t.fsum == fsum, "atomicAdd float %.9g, expected %.9g\n", t.fsum, fsum);
    EXPECT(t.imax == imax, "atomicMax %d, expected %d\n", t.imax, imax);
    EXPECT(t.imin == imin, "atomicMin %d, expected %d\n", t.imin, imin);
    EXPECT(t.usum == usum, "atomicAdd u64 %llu, expected %llu\n", t.usum, usum);
    EXPECT(t.fmax == fmax, "CAS float max %.9g, expected %.9g\n", t.fmax, fmax);
    // order differs from the CPU's, so the double sum rounds differently
    EXPECT(fabs(t.dsum - dsum) <= 1e-9 * (fabs(dsum) + 1.0), "CAS double add %.17g, expected %.17g\n", t.dsum, dsum);
    EXPECT(t.dsum_shared == isum, "shared CAS double add %.17g, expected %.17g\n", t.dsum_shared, isum);
    EXPECT(t.ticket == (unsigned)n, "tickets %u, expected %d\n", t.ticket, n);
    EXPECT(t.wrap == (unsigned)n % (wrap_limit + 1), "atomicInc %u, expected %u\n", t.wrap, (unsigned)n % (wrap_limit + 1));
    EXPECT(t.andv == andv, "atomicAnd %#x, expected %#x\n", t.andv, andv);
    EXPECT(t.orv == orv, "atomicOr %#x, expected %#x\n", t.orv, orv);
    EXPECT(t.xorv == xorv, "atomicXor %#x, expected %#x\n", t.xorv, xorv);
    EXPECT(t.exch == exch, "atomicExch %d, expected %d\n", t.exch, exch);
    // each ticket handed out once: every slot holds a distinct thread index
    char *seen = (char *)calloc(n, 1);
    for (int k = 0; k < n; k++) {
        unsigned i = tickets[k];
        if ((i >= (unsigned)n || seen[i]) && wrong++ < 10)
            printf("ticket %d holds %u (%s)\n", k, i, i >= (unsigned)n ? "unwritten" : "twice");
        else if (i < (unsigned)n)
            seen[i] = 1;
    }
    printf("float sum %.4f, max %d min %d, u64 %llu, double %.6f, wrap %u\n", t.fsum, t.imax, t.imin, t.usum,
           t.dsum, t.wrap);
    CHECK(cudaFree(din));
    CHECK(cudaFree(df));
    CHECK(cudaFree(dh1));
    CHECK(cudaFree(dh2));
    CHECK(cudaFree(dtickets));
    CHECK(cudaFree(dt));
    free(in);
    free(f);
    free(tickets);
    free(seen);
    if (wrong) {
        printf("atomics: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("atomics: ok %d\n", n);
    return 0;
}
