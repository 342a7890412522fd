// cuBLAS GEMM through the runtime, as an application writes it: a handle,
// cublasSgemm and cublasDgemm on column-major matrices with padded leading
// dimensions (64x48x40; A plain, A transposed, and both transposed), alpha
// and beta not 1 and 0, checked against a CPU GEMM on random inputs (seed
// printed; SEED=N repeats a run). On softgpu this runs the PTX cuBLAS ships
// (compute_120): softgpu declares CUDA_FORCE_PTX_JIT=1, so cuBLASLt picks
// kernels that carry PTX. Linked with the toolkit's shared libcublas (see
// the rule in module.mk).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "blas.h"
#include "seed.h"

template <typename T> struct gemm_of;
template <> struct gemm_of<float> {
    static cublasStatus_t run(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                              float *c, int ldc)
    {
        return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    static constexpr double tol = 1e-4;
    static constexpr const char *name = "cublasSgemm";
};
template <> struct gemm_of<double> {
    static cublasStatus_t run(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const double *alpha, const double *a, int lda, const double *b, int ldb,
                              const double *beta, double *c, int ldc)
    {
        return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    }
    static constexpr double tol = 1e-12;
    static constexpr const char *name = "cublasDgemm";
};

// C (m x n, ldc) = alpha * op(A) * op(B) + beta * C, column-major; returns
// the number of wrong elements.
template <typename T> static int check(cublasHandle_t h, bool transa, bool transb, int m, int n, int k)
{
    int lda = transa ? k + 3 : m + 2, ldb = transb ? n + 4 : k + 1, ldc = m + 5;
    std::vector<T> a((size_t)lda * (transa ? m : k)), b((size_t)ldb * (transb ? k : n)), c((size_t)ldc * n);
    for (auto &x : a) x = (T)uniform();
    for (auto &x : b) x = (T)uniform();
    for (auto &x : c) x = (T)uniform();
    T alpha = (T)1.5, beta = (T)-0.75;
    T *da, *db, *dc;
    CHECK(cudaMalloc(&da, a.size() * sizeof(T)));
    CHECK(cudaMalloc(&db, b.size() * sizeof(T)));
    CHECK(cudaMalloc(&dc, c.size() * sizeof(T)));
    CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, c.data(), c.size() * sizeof(T), cudaMemcpyHostToDevice));
    BLAS(gemm_of<T>::run(h, transa ? CUBLAS_OP_T : CUBLAS_OP_N, transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                         da, lda, db, ldb, &beta, dc, ldc));
    std::vector<T> got(c.size());
    CHECK(cudaMemcpy(got.data(), dc, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ldc; i++) {
            double want = c[(size_t)j * ldc + i];   // rows past m stay as they were
            if (i < m) {
                double s = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double x = transa ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i];
                    double y = transb ? b[(size_t)p * ldb + j] : b[(size_t)j * ldb + p];
                    s += x * y;
                    mag += fabs(x * y);
                }
                want = alpha * s + beta * want;
                if (fabs(got[(size_t)j * ldc + i] - want) > gemm_of<T>::tol * (mag + 1.0)) {
                    if (bad++ < 5)
                        printf("%s%s%s: C[%d,%d] = %.10g, expected %.10g\n", gemm_of<T>::name, transa ? " (A^T)" : "",
                               transb ? " (B^T)" : "", i, j, (double)got[(size_t)j * ldc + i], want);
                }
            } else if (got[(size_t)j * ldc + i] != (T)want) {
                if (bad++ < 5)
                    printf("%s: padding C[%d,%d] changed\n", gemm_of<T>::name, i, j);
            }
        }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    return bad;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    cublasHandle_t h;
    BLAS(cublasCreate(&h));
    int bad = 0;
    for (int t = 0; t < 3; t++)   // N,N; T,N; T,T
        bad += check<float>(h, t > 0, t > 1, 64, 48, 40) + check<double>(h, t > 0, t > 1, 64, 48, 40);
    BLAS(cublasDestroy(h));
    if (bad) {
        printf("cublasgemm: %d wrong elements (seed %u)\n", bad, seed);
        return 1;
    }
    printf("cublasgemm: ok\n");
    return 0;
}
