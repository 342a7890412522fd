// cuSPARSE's generic SpMV through the runtime, as an application writes it:
// a 200 x 150 CSR matrix (a few nonzeros per row, some rows empty), dense
// vectors, cusparseSpMV_bufferSize and cusparseSpMV computing
// y = alpha * op(A) * x + beta * y with alpha and beta not 1 and 0, A plain
// and transposed, in float and double, each checked against the CPU. On
// softgpu this runs the PTX cuSPARSE ships. Linked with the toolkit's shared
// libcusparse (see the rule in module.mk).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <vector>
#include <cuda_runtime.h>
#include <cusparse.h>

#include "check.h"
#include "uniform.h"

// A cuSPARSE call must succeed; else the program says which, where and its
// status, and exits 1.
#define SPARSE(call)                                                                          \
    do {                                                                                      \
        cusparseStatus_t s_ = (call);                                                         \
        if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                  \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cusparseGetErrorName(s_));   \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

template <typename T> struct type_of;
template <> struct type_of<float> {
    static constexpr cudaDataType t = CUDA_R_32F;
    static constexpr double tol = 1e-5;
    static constexpr const char *name = "float";
};
template <> struct type_of<double> {
    static constexpr cudaDataType t = CUDA_R_64F;
    static constexpr double tol = 1e-13;
    static constexpr const char *name = "double";
};

// A random CSR matrix: row i has 0 to 6 nonzeros (every seventh row none) in
// distinct, increasing columns.
struct csr {
    int rows, cols;
    std::vector<int> ptr, col;
    std::vector<double> val;
};

static csr random_csr(int rows, int cols)
{
    csr a{ rows, cols, { 0 }, {}, {} };
    for (int i = 0; i < rows; i++) {
        int n = i % 7 == 3 ? 0 : (int)((uniform() + 1.0) * 3.5);
        int c = -1;
        for (int k = 0; k < n && c < cols - 1; k++) {
            c += 1 + (int)((uniform() + 1.0) * 0.5 * (cols - 1 - c) / (n - k));
            if (c >= cols)
                c = cols - 1;
            a.col.push_back(c);
            a.val.push_back(uniform());
        }
        a.ptr.push_back((int)a.col.size());
    }
    return a;
}

// y = alpha * op(A) * x + beta * y on the device; returns the number of wrong
// elements of y.
template <typename T> static int spmv(cusparseHandle_t h, const csr &a, bool trans)
{
    const cudaDataType t = type_of<T>::t;
    int nx = trans ? a.rows : a.cols, ny = trans ? a.cols : a.rows, nnz = (int)a.val.size();
    std::vector<T> val(a.val.begin(), a.val.end()), x(nx), y(ny);
    for (auto &e : x) e = (T)uniform();
    for (auto &e : y) e = (T)uniform();
    T alpha = (T)1.75, beta = (T)-0.5;
    int *dptr, *dcol;
    T *dval, *dx, *dy;
    CHECK(cudaMalloc(&dptr, (a.rows + 1) * sizeof(int)));
    CHECK(cudaMalloc(&dcol, nnz * sizeof(int)));
    CHECK(cudaMalloc(&dval, nnz * sizeof(T)));
    CHECK(cudaMalloc(&dx, nx * sizeof(T)));
    CHECK(cudaMalloc(&dy, ny * sizeof(T)));
    CHECK(cudaMemcpy(dptr, a.ptr.data(), (a.rows + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dcol, a.col.data(), nnz * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dval, val.data(), nnz * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dx, x.data(), nx * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), ny * sizeof(T), cudaMemcpyHostToDevice));

    cusparseSpMatDescr_t ma;
    cusparseDnVecDescr_t vx, vy;
    SPARSE(cusparseCreateCsr(&ma, a.rows, a.cols, nnz, dptr, dcol, dval, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                             CUSPARSE_INDEX_BASE_ZERO, t));
    SPARSE(cusparseCreateDnVec(&vx, nx, dx, t));
    SPARSE(cusparseCreateDnVec(&vy, ny, dy, t));
    cusparseOperation_t op = trans ? CUSPARSE_OPERATION_TRANSPOSE : CUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t bytes = 0;
    SPARSE(cusparseSpMV_bufferSize(h, op, &alpha, ma, vx, &beta, vy, t, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
    void *buf = nullptr;
    CHECK(cudaMalloc(&buf, bytes ? bytes : 1));
    SPARSE(cusparseSpMV(h, op, &alpha, ma, vx, &beta, vy, t, CUSPARSE_SPMV_ALG_DEFAULT, buf));
    std::vector<T> got(ny);
    CHECK(cudaMemcpy(got.data(), dy, ny * sizeof(T), cudaMemcpyDeviceToHost));

    std::vector<double> want(ny), mag(ny);
    for (int i = 0; i < ny; i++) {
        want[i] = (double)beta * y[i];
        mag[i] = fabs(want[i]);
    }
    for (int i = 0; i < a.rows; i++)
        for (int k = a.ptr[i]; k < a.ptr[i + 1]; k++) {
            int r = trans ? a.col[k] : i, c = trans ? i : a.col[k];
            double p = (double)alpha * val[k] * x[c];
            want[r] += p;
            mag[r] += fabs(p);
        }
    int bad = 0;
    for (int i = 0; i < ny; i++)
        if (fabs(got[i] - want[i]) > type_of<T>::tol * (mag[i] + 1.0) && bad++ < 5)
            printf("spmv %s%s: y[%d] = %.12g, expected %.12g\n", type_of<T>::name, trans ? " (A^T)" : "", i,
                   (double)got[i], want[i]);
    SPARSE(cusparseDestroySpMat(ma));
    SPARSE(cusparseDestroyDnVec(vx));
    SPARSE(cusparseDestroyDnVec(vy));
    CHECK(cudaFree(buf));
    CHECK(cudaFree(dptr));
    CHECK(cudaFree(dcol));
    CHECK(cudaFree(dval));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    return bad;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    csr a = random_csr(200, 150);
    cusparseHandle_t h;
    SPARSE(cusparseCreate(&h));
    int bad = spmv<float>(h, a, false) + spmv<float>(h, a, true) + spmv<double>(h, a, false) +
              spmv<double>(h, a, true);
    SPARSE(cusparseDestroy(h));
    if (bad) {
        printf("cusparsespmv: %d wrong elements (seed %u)\n", bad, seed);
        return 1;
    }
    printf("cusparsespmv: ok\n");
    return 0;
}
