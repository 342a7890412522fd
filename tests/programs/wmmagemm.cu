// A naive tensor-core GEMM, the way the CUDA samples teach it: one warp per
// 16x16 tile of C, nvcuda::wmma fragments, C = alpha * A * B + beta * C.
// f16 inputs (A row-major, B column-major) and bf16 inputs (both row-major),
// f32 accumulators; every element checked against a CPU reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

using namespace nvcuda;

#define CHECK(call)                                                                    \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        if (e_ != cudaSuccess) {                                                       \
            printf("wmmagemm: %s failed: %s\n", #call, cudaGetErrorString(e_));        \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

const int M = 64, N = 64, K = 64;

template <typename L> struct col_layout { static const bool value = false; };
template <> struct col_layout<wmma::col_major> { static const bool value = true; };

template <typename T, typename LB>
__global__ void gemm(const T *a, const T *b, float *c, float alpha, float beta)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    int tm = warp / (N / 16), tn = warp % (N / 16);
    if (tm >= M / 16)
        return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, fc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(fa, a + tm * 16 * K + k, K);
        if (col_layout<LB>::value)
            wmma::load_matrix_sync(fb, b + tn * 16 * K + k, K);
        else
            wmma::load_matrix_sync(fb, b + k * N + tn * 16, N);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    float *tile = c + tm * 16 * N + tn * 16;
    wmma::load_matrix_sync(fc, tile, N, wmma::mem_row_major);
    for (int i = 0; i < fc.num_elements; i++)
        fc.x[i] = alpha * acc.x[i] + beta * fc.x[i];
    wmma::store_matrix_sync(tile, fc, N, wmma::mem_row_major);
}

static unsigned rng = 12345;
static float next_value()
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

// Runs one GEMM on the device and compares with the CPU; fa/fb hold the
// inputs as the device sees them (already rounded to T).
template <typename T, typename LB>
static int run(const char *name, const std::vector<T> &ha, const std::vector<T> &hb,
               const std::vector<float> &fa, const std::vector<float> &fb, bool bcol)
{
    std::vector<float> hc(M * N), out(M * N);
    for (auto &v : hc)
        v = next_value();
    const float alpha = 1.5f, beta = -0.5f;
    T *da, *db;
    float *dc;
    CHECK(cudaMalloc(&da, ha.size() * sizeof(T)));
    CHECK(cudaMalloc(&db, hb.size() * sizeof(T)));
    CHECK(cudaMalloc(&dc, hc.size() * sizeof(float)));
    CHECK(cudaMemcpy(da, ha.data(), ha.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, hb.data(), hb.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dc, hc.data(), hc.size() * sizeof(float), cudaMemcpyHostToDevice));
    int warps = (M / 16) * (N / 16);
    gemm<T, LB><<<warps / 4, 128>>>(da, db, dc, alpha, beta);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dc, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(da));
    CHECK(cudaFree(db));
    CHECK(cudaFree(dc));
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)fa[i * K + k] * (bcol ? fb[j * K + k] : fb[k * N + j]);
                sum += p;
                mag += fabs(p);
            }
            double want = alpha * sum + beta * hc[i * N + j];
            double tol = 1e-3 * (alpha * mag + fabs(beta * hc[i * N + j])) + 1e-5;
            if (fabs(out[i * N + j] - want) > tol && bad++ < 5)
                printf("wmmagemm: %s C[%d][%d] = %.7g, want %.7g\n", name, i, j, out[i * N + j], want);
        }
    return bad;
}

int main()
{
    std::vector<__half> ha(M * K), hb(K * N);
    std::vector<__nv_bfloat16> ba(M * K), bb(K * N);
    std::vector<float> fa(M * K), fb(K * N), ga(M * K), gb(K * N);
    for (int i = 0; i < M * K; i++) {
        float v = next_value();
        ha[i] = __float2half(v);
        fa[i] = __half2float(ha[i]);
        ba[i] = __float2bfloat16(v);
        ga[i] = __bfloat162float(ba[i]);
    }
    for (int i = 0; i < K * N; i++) {   // hb column-major (N x K), bb row-major (K x N)
        float v = next_value();
        hb[i] = __float2half(v);
        fb[i] = __half2float(hb[i]);
        bb[i] = __float2bfloat16(v);
        gb[i] = __bfloat162float(bb[i]);
    }
    int bad = run<__half, wmma::col_major>("f16", ha, hb, fa, fb, true);
    bad += run<__nv_bfloat16, wmma::row_major>("bf16", ba, bb, ga, gb, false);
    if (bad) {
        printf("wmmagemm: %d elements wrong\n", bad);
        return 1;
    }
    printf("wmmagemm: ok\n");
    return 0;
}
