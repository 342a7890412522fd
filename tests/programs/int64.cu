// 64-bit integer arithmetic through the runtime: add/sub/mul, the high half
// of 64x64 products (__umul64hi, __mul64hi), signed and unsigned division
// and remainder (negative operands too), shifts by every amount 0..63
// (arithmetic and logical), bit counts (__popcll, __clzll, __ffsll,
// __brevll), min/max, comparisons, conversions to and from double and float,
// 32x32->64 widening products, and 64-bit atomics (atomicAdd, atomicMin,
// atomicMax, atomicXor on a running checksum). Checked on the CPU against
// random operands mixed with edge values (0, +-1, INT64_MIN, INT64_MAX,
// powers of two); seed printed, SEED=N repeats a run.
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

#define K 24   // results per operand pair

__device__ __host__ inline void ops(long long a, long long b, unsigned long long *r, int s)
{
    unsigned long long ua = (unsigned long long)a, ub = (unsigned long long)b;
    long long bd = b == 0 ? 7 : b;                 // no division by zero
    if (a == LLONG_MIN && bd == -1)                 // nor the one overflowing quotient
        bd = -3;
    unsigned long long ubd = ub == 0 ? 7 : ub;
    r[0] = ua + ub;
    r[1] = ua - ub;
    r[2] = ua * ub;
    r[3] = (unsigned long long)(a / bd);
    r[4] = (unsigned long long)(a % bd);
    r[5] = ua / ubd;
    r[6] = ua % ubd;
    r[7] = ua << s;
    r[8] = ua >> s;
    r[9] = (unsigned long long)(a >> s);
    r[10] = (unsigned long long)(a < b ? a : b);
    r[11] = ua > ub ? ua : ub;
    r[12] = (a < b) | (ua < ub) << 1 | (a == b) << 2 | (a >= 0) << 3;
    r[13] = (unsigned long long)(long long)(double)(a >> 1);   // rounds to 53 bits, never overflows back
    double d = (double)(a >> 11) * 0.5;                // exact, then back
    r[14] = (unsigned long long)(long long)d;
    r[15] = (unsigned long long)(long long)(float)(a >> 40);   // fits a float exactly
    r[16] = (unsigned long long)((long long)(int)a * (long long)(int)b);          // widening, signed
    r[17] = (unsigned long long)(unsigned)a * (unsigned long long)(unsigned)b;    // widening, unsigned
    r[18] = (unsigned long long)(ua >> 11 ? (double)(ua >> 11) : 1.0);
}

__global__ void int64_ops(const long long *a, const long long *b, const int *sh, unsigned long long *r, int n,
                          unsigned long long *acc)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned long long *o = r + (size_t)i * K;
    ops(a[i], b[i], o, sh[i]);
    unsigned long long ua = (unsigned long long)a[i], ub = (unsigned long long)b[i];
    o[19] = __umul64hi(ua, ub);
    o[20] = (unsigned long long)__mul64hi(a[i], b[i]);
    o[21] = (unsigned long long)__popcll(ua) | (unsigned long long)__clzll(ua) << 8 |
            (unsigned long long)__ffsll(a[i]) << 16;
    o[22] = __brevll(ua);
    o[23] = 0;
    atomicAdd(&acc[0], ua);
    atomicMin((long long *)&acc[1], a[i]);
    atomicMax((long long *)&acc[2], a[i]);
    atomicXor(&acc[3], ua * 0x9e3779b97f4a7c15ULL);
    atomicMin(&acc[4], ub);
    atomicMax(&acc[5], ub);
}

static unsigned long long rng;
static unsigned long long next64()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    unsigned long long hi = rng >> 32;
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return hi << 32 | rng >> 32;
}

static long long operand()
{
    static const long long edge[] = { 0, 1, -1, 2, -2, LLONG_MIN, LLONG_MAX, LLONG_MIN + 1, 1LL << 32, -(1LL << 32),
                                      (1LL << 32) - 1, 0xffffffffLL, 1LL << 62, 3, -7, 1000000007 };
    unsigned long long r = next64();
    switch (r % 8) {
    case 0: return edge[(r >> 8) % (sizeof edge / sizeof edge[0])];
    case 1: return (long long)(r >> 40) - (1LL << 23);   // small, either sign
    case 2: return (long long)(int)(r >> 32);            // 32-bit range
    default: return (long long)next64();
    }
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    const int n = 5003;
    long long *a = (long long *)malloc(n * sizeof(long long)), *b = (long long *)malloc(n * sizeof(long long));
    int *sh = (int *)malloc(n * sizeof(int));
    unsigned long long *r = (unsigned long long *)malloc((size_t)n * K * sizeof(unsigned long long));
    for (int i = 0; i < n; i++) {
        a[i] = operand();
        b[i] = operand();
        sh[i] = i % 64;   // every shift amount, many times
    }
    long long *da, *db;
    int *dsh;
    unsigned long long *dr, *dacc;
    CHECK(cudaMalloc(&da, n * sizeof(long long)));
    CHECK(cudaMalloc(&db, n * sizeof(long long)));
    CHECK(cudaMalloc(&dsh, n * sizeof(int)));
    CHECK(cudaMalloc(&dr, (size_t)n * K * sizeof(unsigned long long)));
    CHECK(cudaMalloc(&dacc, 6 * sizeof(unsigned long long)));
    CHECK(cudaMemcpy(da, a, n * sizeof(long long), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, n * sizeof(long long), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dsh, sh, n * sizeof(int), cudaMemcpyHostToDevice));
    unsigned long long acc0[6] = { 0, (unsigned long long)LLONG_MAX, (unsigned long long)LLONG_MIN, 0, ULLONG_MAX, 0 };
    CHECK(cudaMemcpy(dacc, acc0, sizeof acc0, cudaMemcpyHostToDevice));
    int64_ops<<<(n + 127) / 128, 128>>>(da, db, dsh, dr, n, dacc);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    unsigned long long acc[6];
    CHECK(cudaMemcpy(r, dr, (size_t)n * K * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));

    static const char *names[K] = { "add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "shl", "lshr", "ashr",
                                    "smin", "umax", "compare", "to double", "from double", "from float",
                                    "mul.wide.s32", "mul.wide.u32", "u64 to double", "umul64hi", "mul64hi",
                                    "popc/clz/ffs", "brev", "zero" };
    int wrong = 0;
    unsigned long long want_acc[6] = { acc0[0], acc0[1], acc0[2], acc0[3], acc0[4], acc0[5] };
    for (int i = 0; i < n; i++) {
        unsigned long long w[K];
        ops(a[i], b[i], w, sh[i]);
        unsigned long long ua = (unsigned long long)a[i], ub = (unsigned long long)b[i];
        w[19] = (unsigned long long)((unsigned __int128)ua * ub >> 64);
        w[20] = (unsigned long long)((__int128)a[i] * b[i] >> 64);
        w[21] = (unsigned long long)__builtin_popcountll(ua) | (unsigned long long)(ua ? __builtin_clzll(ua) : 64) << 8 |
                (unsigned long long)__builtin_ffsll(a[i]) << 16;
        unsigned long long rev = 0;
        for (int k = 0; k < 64; k++)
            rev |= (ua >> k & 1) << (63 - k);
        w[22] = rev;
        w[23] = 0;
        for (int k = 0; k < K; k++)
            if (r[(size_t)i * K + k] != w[k] && wrong++ < 10)
                printf("%s(%lld, %lld) shift %d = %#llx, expected %#llx\n", names[k], a[i], b[i], sh[i],
                       r[(size_t)i * K + k], w[k]);
        want_acc[0] += ua;
        want_acc[1] = (unsigned long long)((long long)want_acc[1] < a[i] ? (long long)want_acc[1] : a[i]);
        want_acc[2] = (unsigned long long)((long long)want_acc[2] > a[i] ? (long long)want_acc[2] : a[i]);
        want_acc[3] ^= ua * 0x9e3779b97f4a7c15ULL;
        want_acc[4] = want_acc[4] < ub ? want_acc[4] : ub;
        want_acc[5] = want_acc[5] > ub ? want_acc[5] : ub;
    }
    static const char *acc_names[6] = { "atomicAdd u64", "atomicMin s64", "atomicMax s64", "atomicXor u64",
                                        "atomicMin u64", "atomicMax u64" };
    for (int k = 0; k < 6; k++)
        if (acc[k] != want_acc[k] && wrong++ < 20)
            printf("%s = %#llx, expected %#llx\n", acc_names[k], acc[k], want_acc[k]);
    printf("%d operand pairs x %d operations, %d wrong\n", n, K, wrong);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dsh));
    CHECK(cudaFree(dr));
    CHECK(cudaFree(dacc));
    free(a);
    free(b);
    free(sh);
    free(r);
    if (wrong) {
        printf("int64: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("int64: ok %d\n", n);
    return 0;
}
