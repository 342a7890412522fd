// Asynchronous copies into shared memory, as real kernels stage their tiles,
// each checked against the CPU (built for sm_80: cp.async and mbarrier):
//  - tiled matrix multiply whose tiles are double-buffered through a
//    per-thread cuda::pipeline (cuda::memcpy_async of each thread's elements,
//    cp.async with commit and wait groups);
//  - a block-wide cuda::pipeline of several stages (cuda::memcpy_async of a
//    whole tile by the thread block, mbarriers in shared memory) scaling an
//    array;
//  - __pipeline_memcpy_async of 16-byte chunks, the last partial chunk
//    zero-filled through its source size, summed per block;
//  - cuda::memcpy_async of a tile completing on a cuda::barrier.
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>
#include <vector>

#include "check.h"

namespace cg = cooperative_groups;

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("memcpyasync: %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define TILE 16

// C (m x n) = A (m x k) * B (k x n), all multiples of TILE; two stages.
__global__ void matmul_pipelined(const float *A, const float *B, float *C, int m, int n, int k)
{
    __shared__ float As[2][TILE][TILE], Bs[2][TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    int tiles = k / TILE;
    float acc = 0;
    auto fetch = [&](int t) {
        pipe.producer_acquire();
        cuda::memcpy_async(&As[t & 1][ty][tx], &A[row * k + t * TILE + tx], sizeof(float), pipe);
        cuda::memcpy_async(&Bs[t & 1][ty][tx], &B[(t * TILE + ty) * n + col], sizeof(float), pipe);
        pipe.producer_commit();
    };
    fetch(0);
    for (int t = 0; t < tiles; t++) {
        if (t + 1 < tiles)
            fetch(t + 1);
        pipe.consumer_wait();   // the oldest batch: tile t
        __syncthreads();
        for (int i = 0; i < TILE; i++)
            acc += As[t & 1][ty][i] * Bs[t & 1][i][tx];
        __syncthreads();
        pipe.consumer_release();
    }
    C[row * n + col] = acc;
}

#define STAGES 3
#define CHUNK 256

#pragma nv_diag_suppress static_var_with_dynamic_init
// out[i] = 3 * in[i] + tile number, for CHUNK-sized tiles the block takes in turn.
__global__ void scale_staged(const float *in, float *out, int tiles)
{
    __shared__ alignas(16) float buf[STAGES][CHUNK];
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;
    auto block = cg::this_thread_block();
    auto pipe = cuda::make_pipeline(block, &state);
    int mine = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;   // tiles blockIdx.x + j * gridDim.x
    int fetched = 0;
    for (int j = 0; j < mine; j++) {
        for (; fetched < mine && fetched < j + STAGES; fetched++) {
            int t = blockIdx.x + fetched * gridDim.x;
            pipe.producer_acquire();
            cuda::memcpy_async(block, buf[fetched % STAGES], in + (size_t)t * CHUNK,
                               cuda::aligned_size_t<16>(sizeof(float) * CHUNK), pipe);
            pipe.producer_commit();
        }
        int t = blockIdx.x + j * gridDim.x;
        pipe.consumer_wait();
        for (int i = threadIdx.x; i < CHUNK; i += blockDim.x)
            out[(size_t)t * CHUNK + i] = 3 * buf[j % STAGES][i] + t;
        pipe.consumer_release();
    }
}

// Block b sums bytes [b * 1024, b * 1024 + 1024) of in, n bytes long: each
// thread copies a 16-byte chunk, the source cut short (zero-filled) at n.
__global__ void sum_bytes(const unsigned char *in, long n, unsigned *sums)
{
    __shared__ alignas(16) unsigned char s[1024];
    long base = (long)blockIdx.x * 1024 + threadIdx.x * 16;
    long left = n - base;
    size_t have = left >= 16 ? 16 : left > 0 ? (size_t)left : 0;
    // a chunk past the end reads nothing: point it at the start
    __pipeline_memcpy_async(&s[threadIdx.x * 16], in + (have ? base : 0), 16, 16 - have);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = 0;
        for (int i = 0; i < 1024; i++)
            t += s[i];
        sums[blockIdx.x] = t;
    }
}

// out = reversed tile of in, staged through a cuda::barrier.
__global__ void reverse_tile(const int *in, int *out)
{
    __shared__ alignas(16) int s[512];
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0)
        init(&bar, block.size());
    block.sync();
    const int *src = in + blockIdx.x * 512;
    cuda::memcpy_async(block, s, src, cuda::aligned_size_t<16>(sizeof(int) * 512), bar);
    bar.arrive_and_wait();
    for (int i = threadIdx.x; i < 512; i += blockDim.x)
        out[blockIdx.x * 512 + i] = s[511 - i];
}

static void check_matmul(void)
{
    int m = 48, n = 64, k = 80;
    std::vector<float> A(m * k), B(k * n), C(m * n);
    for (auto &x : A)
        x = (float)(rand() % 17 - 8) / 4;
    for (auto &x : B)
        x = (float)(rand() % 13 - 6) / 2;
    float *dA, *dB, *dC;
    CHECK(cudaMalloc(&dA, A.size() * 4));
    CHECK(cudaMalloc(&dB, B.size() * 4));
    CHECK(cudaMalloc(&dC, C.size() * 4));
    CHECK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
    matmul_pipelined<<<dim3(n / TILE, m / TILE), dim3(TILE, TILE)>>>(dA, dB, dC, m, n, k);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float want = 0;   // small multiples of 1/8: exact in any order
            for (int t = 0; t < k; t++)
                want += A[i * k + t] * B[t * n + j];
            EXPECT(C[i * n + j] == want, "matmul C[%d][%d] = %g, want %g", i, j, C[i * n + j], want);
        }
    CHECK(cudaFree(dA));
    CHECK(cudaFree(dB));
    CHECK(cudaFree(dC));
}

static void check_staged(void)
{
    int tiles = 37;
    std::vector<float> in(tiles * CHUNK), out(in.size());
    for (size_t i = 0; i < in.size(); i++)
        in[i] = (float)(rand() % 1000);
    float *din, *dout;
    CHECK(cudaMalloc(&din, in.size() * 4));
    CHECK(cudaMalloc(&dout, in.size() * 4));
    CHECK(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dout, 0xff, in.size() * 4));
    scale_staged<<<5, 128>>>(din, dout, tiles);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < in.size(); i++) {
        float want = 3 * in[i] + (float)(i / CHUNK);
        EXPECT(out[i] == want, "staged out[%zu] = %g, want %g", i, out[i], want);
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
}

static void check_zero_fill(void)
{
    long n = 5 * 1024 + 333;   // the last block has 333 bytes: a chunk of 13, then nothing
    int blocks = (int)((n + 1023) / 1024);
    std::vector<unsigned char> in(n);
    for (auto &x : in)
        x = (unsigned char)(1 + rand() % 255);
    unsigned char *din;
    unsigned *dsums;
    // the allocation is exactly n bytes: a copy past it would fault
    CHECK(cudaMalloc(&din, n));
    CHECK(cudaMalloc(&dsums, blocks * sizeof(unsigned)));
    CHECK(cudaMemcpy(din, in.data(), n, cudaMemcpyHostToDevice));
    sum_bytes<<<blocks, 64>>>(din, n, dsums);
    CHECK(cudaGetLastError());
    std::vector<unsigned> sums(blocks);
    CHECK(cudaMemcpy(sums.data(), dsums, blocks * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        unsigned want = 0;
        for (long i = (long)b * 1024; i < n && i < (long)(b + 1) * 1024; i++)
            want += in[i];
        EXPECT(sums[b] == want, "zero-filled sum of block %d = %u, want %u", b, sums[b], want);
    }
    CHECK(cudaFree(din));
    CHECK(cudaFree(dsums));
}

static void check_barrier(void)
{
    int blocks = 6;
    std::vector<int> in(blocks * 512), out(in.size());
    for (size_t i = 0; i < in.size(); i++)
        in[i] = rand();
    int *din, *dout;
    CHECK(cudaMalloc(&din, in.size() * 4));
    CHECK(cudaMalloc(&dout, in.size() * 4));
    CHECK(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
    reverse_tile<<<blocks, 96>>>(din, dout);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int i = 0; i < 512; i++)
            EXPECT(out[b * 512 + i] == in[b * 512 + 511 - i], "barrier tile %d element %d", b, i);
    CHECK(cudaFree(din));
    CHECK(cudaFree(dout));
}

int main(void)
{
    srand(7);
    check_matmul();
    check_staged();
    check_zero_fill();
    check_barrier();
    CHECK(cudaDeviceSynchronize());
    printf("memcpyasync: ok\n");
    return 0;
}
