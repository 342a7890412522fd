// cuBLAS level-1 routines through the runtime, as an application writes
// them: cublasSaxpy, cublasSdot, cublasDnrm2, cublasSscal (stride 2),
// cublasIsamax and cublasSasum, results to the host, checked against the
// CPU. On softgpu these run the PTX (compute_120) that cuBLAS ships
// (cublasgemm.cu does GEMM).
// Linked with the toolkit's shared libcublas (see the rule in module.mk).
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

static int bad;
static void expect(const char *what, int i, double got, double want, double tol)
{
    if (fabs(got - want) > tol * (fabs(want) + 1.0)) {
        if (bad++ < 8)
            printf("%s[%d] = %.9g, expected %.9g\n", what, i, got, want);
    }
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (auto &e : x) e = uniform();
    for (auto &e : y) e = uniform();
    std::vector<double> xd(n);
    for (int i = 0; i < n; i++) xd[i] = x[i] * 3.0;

    cublasHandle_t h;
    BLAS(cublasCreate(&h));
    float *dx, *dy;
    double *dxd;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dxd, n * sizeof(double)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dxd, xd.data(), n * sizeof(double), cudaMemcpyHostToDevice));

    // y = 2.5 x + y
    float alpha = 2.5f;
    BLAS(cublasSaxpy(h, n, &alpha, dx, 1, dy, 1));
    std::vector<float> got(n);
    CHECK(cudaMemcpy(got.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) expect("saxpy", i, got[i], 2.5 * x[i] + y[i], 1e-6);
    std::vector<float> got_y = got;

    // x . y (the new y), result to the host
    float dot = 0;
    BLAS(cublasSdot(h, n, dx, 1, dy, 1, &dot));
    double want = 0;
    for (int i = 0; i < n; i++) want += (double)x[i] * got[i];
    expect("sdot", 0, dot, want, 1e-4);

    double nrm = 0;
    BLAS(cublasDnrm2(h, n, dxd, 1, &nrm));
    want = 0;
    for (int i = 0; i < n; i++) want += xd[i] * xd[i];
    expect("dnrm2", 0, nrm, sqrt(want), 1e-12);

    // every other element of x scaled by -0.5
    float s = -0.5f;
    BLAS(cublasSscal(h, n / 2, &s, dx, 2));
    CHECK(cudaMemcpy(got.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) expect("sscal", i, got[i], i % 2 ? x[i] : -0.5 * x[i], 1e-7);

    // the largest magnitude (1-based index) and the sum of magnitudes of the new y
    int imax = 0;
    BLAS(cublasIsamax(h, n, dy, 1, &imax));
    int want_i = 0;
    for (int i = 1; i < n; i++)
        if (fabsf(got_y[i]) > fabsf(got_y[want_i])) want_i = i;
    if (imax != want_i + 1 && bad++ < 8)
        printf("isamax = %d, expected %d\n", imax, want_i + 1);
    float asum = 0;
    BLAS(cublasSasum(h, n, dy, 1, &asum));
    want = 0;
    for (int i = 0; i < n; i++) want += fabs(got_y[i]);
    expect("sasum", 0, asum, want, 1e-5);

    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dxd));
    BLAS(cublasDestroy(h));
    if (bad) {
        printf("cublasblas: %d wrong results (seed %u)\n", bad, seed);
        return 1;
    }
    printf("cublasblas: ok\n");
    return 0;
}
