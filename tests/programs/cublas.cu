// cuBLAS through the runtime: cublasCreate, cublasSetStream, cublasSgemm
// (column-major, C = alpha * op(A) * op(B) + beta * C, once plain and once
// with A transposed, on sizes that are not multiples of any tile) and
// cublasDestroy, checked against a CPU GEMM on random inputs (seed printed;
// SEED=N repeats a run). Linked with the toolkit's shared libcublas (see the
// rule in module.mk).
//
// On softgpu cuBLASLt picks kernels that carry PTX (softgpu declares
// CUDA_FORCE_PTX_JIT=1). Told otherwise (CUDA_FORCE_PTX_JIT=0), it picks a
// SASS-only kernel softgpu refuses: then the program prints the failing call
// with its cuBLAS or CUDA error and exits 1; it must never crash or hang.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "blas.h"
#include "seed.h"

// C (m x n, leading dimension ldc) = alpha * op(A) * B + beta * C, column-major.
static int gemm_check(cublasHandle_t h, bool transa, int m, int n, int k, float alpha, float beta)
{
    int lda = transa ? k + 3 : m + 2, ldb = k + 1, ldc = m + 5;   // padded leading dimensions
    size_t na = (size_t)lda * (transa ? m : k), nb = (size_t)ldb * n, nc = (size_t)ldc * n;
    float *a = (float *)malloc(na * sizeof(float)), *b = (float *)malloc(nb * sizeof(float));
    float *c = (float *)malloc(nc * sizeof(float)), *out = (float *)malloc(nc * sizeof(float));
    for (size_t i = 0; i < na; i++)
        a[i] = uniform();
    for (size_t i = 0; i < nb; i++)
        b[i] = uniform();
    for (size_t i = 0; i < nc; i++)
        c[i] = uniform();
    float *da, *db, *dc;
    CHECK(cudaMalloc(&da, na * sizeof(float)));
    CHECK(cudaMalloc(&db, nb * sizeof(float)));
    CHECK(cudaMalloc(&dc, nc * sizeof(float)));
    BLAS(cublasSetMatrix(transa ? k : m, transa ? m : k, sizeof(float), a, lda, da, lda));
    CHECK(cudaMemcpy(db, b, nb * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c, nc * sizeof(float), cudaMemcpyHostToDevice));
    BLAS(cublasSgemm(h, transa ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, lda, db, ldb, &beta,
                     dc, ldc));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(out, dc, nc * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    double worst = 0.0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldc; i++) {
            double got = out[(size_t)j * ldc + i];
            if (i >= m) {   // rows past m are outside C and stay as they were
                if (got != c[(size_t)j * ldc + i] && wrong++ < 5)
                    printf("C padding [%d][%d] changed to %g\n", i, j, got);
                continue;
            }
            double want = beta * (double)c[(size_t)j * ldc + i], mag = fabs(want);
            for (int p = 0; p < k; p++) {
                double av = transa ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i];
                want += alpha * av * (double)b[(size_t)j * ldb + p];
                mag += fabs(alpha * av * (double)b[(size_t)j * ldb + p]);
            }
            // tensor-core paths may round inputs (TF32 is off by default, but be lenient)
            double err = fabs(got - want) / (mag > 1.0 ? mag : 1.0);
            if (!(err <= 1e-4)) {
                if (wrong++ < 5)
                    printf("C[%d][%d] = %.9g, expected %.9g\n", i, j, got, want);
            } else if (err > worst)
                worst = err;
        }
    printf("sgemm %s %dx%dx%d alpha %g beta %g: %d wrong, worst relative error %.3g\n", transa ? "T,N" : "N,N", m, n,
           k, alpha, beta, wrong, worst);
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    free(a);
    free(b);
    free(c);
    free(out);
    return wrong;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    cublasHandle_t h;
    BLAS(cublasCreate(&h));
    int version = 0;
    BLAS(cublasGetVersion(h, &version));
    printf("cuBLAS %d\n", version);
    cudaStream_t st;
    CHECK(cudaStreamCreate(&st));
    BLAS(cublasSetStream(h, st));
    int wrong = gemm_check(h, false, 67, 45, 33, 1.0f, 0.0f);
    wrong += gemm_check(h, true, 50, 71, 29, -0.5f, 2.0f);
    BLAS(cublasDestroy(h));
    CHECK(cudaStreamDestroy(st));
    if (wrong) {
        printf("cublas: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("cublas: ok sgemm\n");
    return 0;
}
