// cuSOLVER's dense LU solve through the runtime, as an application writes
// it: cusolverDnSgetrf / cusolverDnDgetrf (partial pivoting) of a 32 x 32
// matrix with a padded leading dimension, then cusolverDnSgetrs /
// cusolverDnDgetrs for three right-hand sides, A plain and transposed,
// checked against a CPU solve (the residual and the solution). On softgpu
// this runs the PTX cuSOLVER (and the cuBLAS it calls) ships. Linked with the
// toolkit's shared libcusolver (see the rule in module.mk).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <utility>
#include <vector>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "check.h"
#include "uniform.h"

// A cuSOLVER call must succeed; else the program says which, where and its
// status, and exits 1.
#define SOLVER(call)                                                            \
    do {                                                                        \
        cusolverStatus_t s_ = (call);                                           \
        if (s_ != CUSOLVER_STATUS_SUCCESS) {                                    \
            printf("%s:%d: %s: cusolverStatus_t %d\n", __FILE__, __LINE__, #call, (int)s_); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

template <typename T> struct lu_of;
template <> struct lu_of<float> {
    static cusolverStatus_t buffer(cusolverDnHandle_t h, int n, float *a, int lda, int *w)
    {
        return cusolverDnSgetrf_bufferSize(h, n, n, a, lda, w);
    }
    static cusolverStatus_t getrf(cusolverDnHandle_t h, int n, float *a, int lda, float *w, int *piv, int *info)
    {
        return cusolverDnSgetrf(h, n, n, a, lda, w, piv, info);
    }
    static cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const float *a,
                                  int lda, const int *piv, float *b, int ldb, int *info)
    {
        return cusolverDnSgetrs(h, op, n, nrhs, a, lda, piv, b, ldb, info);
    }
    static constexpr double tol = 2e-4;
    static constexpr const char *name = "float";
};
template <> struct lu_of<double> {
    static cusolverStatus_t buffer(cusolverDnHandle_t h, int n, double *a, int lda, int *w)
    {
        return cusolverDnDgetrf_bufferSize(h, n, n, a, lda, w);
    }
    static cusolverStatus_t getrf(cusolverDnHandle_t h, int n, double *a, int lda, double *w, int *piv, int *info)
    {
        return cusolverDnDgetrf(h, n, n, a, lda, w, piv, info);
    }
    static cusolverStatus_t getrs(cusolverDnHandle_t h, cublasOperation_t op, int n, int nrhs, const double *a,
                                  int lda, const int *piv, double *b, int ldb, int *info)
    {
        return cusolverDnDgetrs(h, op, n, nrhs, a, lda, piv, b, ldb, info);
    }
    static constexpr double tol = 1e-11;
    static constexpr const char *name = "double";
};

// Solves op(A) X = B on the CPU in double by Gaussian elimination with
// partial pivoting (A n x n column-major, lda); B (n x nrhs, ldb) becomes X.
static void cpu_solve(std::vector<double> a, int n, int lda, bool trans, std::vector<double> &b, int ldb, int nrhs)
{
    auto at = [&](int i, int j) -> double & { return trans ? a[(size_t)i * lda + j] : a[(size_t)j * lda + i]; };
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(at(i, k)) > fabs(at(p, k)))
                p = i;
        for (int j = 0; j < n; j++) std::swap(at(k, j), at(p, j));
        for (int r = 0; r < nrhs; r++) std::swap(b[(size_t)r * ldb + k], b[(size_t)r * ldb + p]);
        for (int i = k + 1; i < n; i++) {
            double f = at(i, k) / at(k, k);
            for (int j = k; j < n; j++) at(i, j) -= f * at(k, j);
            for (int r = 0; r < nrhs; r++) b[(size_t)r * ldb + i] -= f * b[(size_t)r * ldb + k];
        }
    }
    for (int r = 0; r < nrhs; r++)
        for (int i = n - 1; i >= 0; i--) {
            double s = b[(size_t)r * ldb + i];
            for (int j = i + 1; j < n; j++) s -= at(i, j) * b[(size_t)r * ldb + j];
            b[(size_t)r * ldb + i] = s / at(i, i);
        }
}

// Factors A once, solves with A and with A^T; returns the number of wrong
// elements of the solutions.
template <typename T> static int lu(cusolverDnHandle_t h, int n, int nrhs)
{
    int lda = n + 3, ldb = n + 2;
    std::vector<T> a((size_t)lda * n), b((size_t)ldb * nrhs);
    // The rows of a diagonally dominant matrix (well conditioned) in a
    // random order, so that partial pivoting has rows to move.
    std::vector<int> row(n);
    for (int i = 0; i < n; i++) row[i] = i;
    for (int i = n - 1; i > 0; i--) std::swap(row[i], row[(int)((uniform() + 1.0) * 0.5 * (i + 1)) % (i + 1)]);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < lda; i++)
            a[(size_t)j * lda + i] = (T)(uniform() + (i < n && row[i] == j ? 16.0 : 0.0));
    for (auto &e : b) e = (T)uniform();
    T *da, *db, *work;
    int *piv, *info, lwork = 0;
    CHECK(cudaMalloc(&da, a.size() * sizeof(T)));
    CHECK(cudaMalloc(&db, b.size() * sizeof(T)));
    CHECK(cudaMalloc(&piv, n * sizeof(int)));
    CHECK(cudaMalloc(&info, sizeof(int)));
    CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
    SOLVER(lu_of<T>::buffer(h, n, da, lda, &lwork));
    CHECK(cudaMalloc(&work, (lwork ? lwork : 1) * sizeof(T)));
    SOLVER(lu_of<T>::getrf(h, n, da, lda, work, piv, info));
    int hinfo = -1;
    CHECK(cudaMemcpy(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    if (hinfo != 0 && bad++ < 5)
        printf("getrf %s: info %d\n", lu_of<T>::name, hinfo);
    std::vector<double> ad(a.begin(), a.end());
    for (int trans = 0; trans < 2; trans++) {
        CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
        SOLVER(lu_of<T>::getrs(h, trans ? CUBLAS_OP_T : CUBLAS_OP_N, n, nrhs, da, lda, piv, db, ldb, info));
        std::vector<T> got(b.size());
        CHECK(cudaMemcpy(got.data(), db, got.size() * sizeof(T), cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(&hinfo, info, sizeof(int), cudaMemcpyDeviceToHost));
        if (hinfo != 0 && bad++ < 5)
            printf("getrs %s: info %d\n", lu_of<T>::name, hinfo);
        std::vector<double> want(b.begin(), b.end());
        cpu_solve(ad, n, lda, trans, want, ldb, nrhs);
        for (int r = 0; r < nrhs; r++)
            for (int i = 0; i < ldb; i++) {
                size_t k = (size_t)r * ldb + i;
                bool ok = i < n ? fabs(got[k] - want[k]) <= lu_of<T>::tol * (fabs(want[k]) + 1.0) : got[k] == b[k];
                if (!ok && bad++ < 5)
                    printf("getrs %s%s: X[%d,%d] = %.12g, expected %.12g\n", lu_of<T>::name, trans ? " (A^T)" : "",
                           i, r, (double)got[k], i < n ? want[k] : (double)b[k]);
            }
    }
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(work));
    CHECK(cudaFree(piv));
    CHECK(cudaFree(info));
    return bad;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    cusolverDnHandle_t h;
    SOLVER(cusolverDnCreate(&h));
    int bad = lu<float>(h, 32, 3) + lu<double>(h, 32, 3);
    SOLVER(cusolverDnDestroy(h));
    if (bad) {
        printf("cusolverlu: %d wrong elements (seed %u)\n", bad, seed);
        return 1;
    }
    printf("cusolverlu: ok\n");
    return 0;
}
