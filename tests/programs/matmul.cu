// Tiled matrix multiply through the runtime: C = A * B with 16x16 tiles
// staged in __shared__ memory and __syncthreads between phases, in float
// and in double, on sizes that are not multiples of the tile (partial tiles
// at every edge); a 2-D grid of many blocks. Checked against a CPU GEMM in
// double on random inputs (seed printed; SEED=N repeats a run).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

#define TILE 16

template <typename T>
__global__ void matmul(const T *a, const T *b, T *c, int m, int k, int n)
{
    __shared__ T as[TILE][TILE];
    __shared__ T bs[TILE][TILE + 1];   // padded: a different bank pattern
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    T acc = 0;
    for (int t = 0; t < k; t += TILE) {
        int ak = t + threadIdx.x, bk = t + threadIdx.y;
        as[threadIdx.y][threadIdx.x] = (row < m && ak < k) ? a[(size_t)row * k + ak] : T(0);
        bs[threadIdx.y][threadIdx.x] = (bk < k && col < n) ? b[(size_t)bk * n + col] : T(0);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; i++)
            acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = acc;
}

static unsigned long long rng;
static double uniform()   // in [-1, 1)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

template <typename T>
static int run(const char *type, int m, int k, int n, double tol)
{
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    T *a = (T *)malloc(na * sizeof(T)), *b = (T *)malloc(nb * sizeof(T)), *c = (T *)malloc(nc * sizeof(T));
    for (size_t i = 0; i < na; i++)
        a[i] = (T)uniform();
    for (size_t i = 0; i < nb; i++)
        b[i] = (T)uniform();
    T *da, *db, *dc;
    CHECK(cudaMalloc(&da, na * sizeof(T)));
    CHECK(cudaMalloc(&db, nb * sizeof(T)));
    CHECK(cudaMalloc(&dc, nc * sizeof(T)));
    CHECK(cudaMemcpy(da, a, na * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b, nb * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dc, 0xff, nc * sizeof(T)));   // NaN where a block never writes
    dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
    matmul<T><<<grid, block>>>(da, db, dc, m, k, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(c, dc, nc * sizeof(T), cudaMemcpyDeviceToHost));
    int wrong = 0;
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double want = 0.0, mag = 0.0;
            for (int p = 0; p < k; p++) {
                want += (double)a[(size_t)i * k + p] * (double)b[(size_t)p * n + j];
                mag += fabs((double)a[(size_t)i * k + p] * (double)b[(size_t)p * n + j]);
            }
            double got = (double)c[(size_t)i * n + j];
            double err = fabs(got - want) / (mag > 1.0 ? mag : 1.0);
            if (!(err <= tol)) {   // NaN fails too
                if (wrong++ < 5)
                    printf("%s C[%d][%d] = %.17g, expected %.17g\n", type, i, j, got, want);
            } else if (err > worst)
                worst = err;
        }
    printf("%s %dx%dx%d: grid %ux%u, %d wrong, worst relative error %.3g\n", type, m, k, n, grid.x, grid.y,
           wrong, worst);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    free(a);
    free(b);
    free(c);
    return wrong;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    const int m = 97, k = 83, n = 113;
    int wrong = run<float>("float", m, k, n, 1e-5);
    wrong += run<double>("double", m, k, n, 1e-13);
    if (wrong) {
        printf("matmul: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("matmul: ok %dx%dx%d float double\n", m, k, n);
    return 0;
}
