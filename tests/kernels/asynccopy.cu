// Tiles staged through shared memory by asynchronous copies, the ways real
// kernels write them. Built for the default target they are plain copies;
// the sm90 mode makes cp.async, cp.async.bulk and mbarrier waits.
#include <cooperative_groups.h>
#include <cuda/barrier>
#include <cuda/pipeline>
#include <cuda_pipeline.h>

namespace cg = cooperative_groups;

#define CHUNK 128
#define STAGES 2

#pragma nv_diag_suppress static_var_with_dynamic_init
// out[i] = 2 * in[i] + 1 over tiles of CHUNK ints that the blocks take in
// turn, double-buffered through a block-wide pipeline.
extern "C" __global__ void staged_copy(const int *in, int *out, int tiles)
{
    __shared__ alignas(16) int buf[STAGES][CHUNK];
    __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, STAGES> state;
    auto block = cg::this_thread_block();
    auto pipe = cuda::make_pipeline(block, &state);
    int mine = (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x;
    int fetched = 0;
    for (int j = 0; j < mine; j++) {
        for (; fetched < mine && fetched < j + STAGES; fetched++) {
            pipe.producer_acquire();
            cuda::memcpy_async(block, buf[fetched % STAGES], in + (blockIdx.x + fetched * gridDim.x) * CHUNK,
                               cuda::aligned_size_t<16>(sizeof(int) * CHUNK), pipe);
            pipe.producer_commit();
        }
        pipe.consumer_wait();
        int t = blockIdx.x + j * gridDim.x;
        for (int i = threadIdx.x; i < CHUNK; i += blockDim.x)
            out[t * CHUNK + i] = 2 * buf[j % STAGES][i] + 1;
        pipe.consumer_release();
    }
}

// Each thread fetches 16 bytes of in (n ints long) with
// __pipeline_memcpy_async, zero-filling past the end; out gets the block's
// shared tile rotated by one thread, so every value crossed shared memory.
extern "C" __global__ void padded_copy(const int *in, int *out, int n)
{
    __shared__ alignas(16) int s[4 * 256];
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    int have = n - base < 0 ? 0 : n - base > 4 ? 4 : n - base;
    __pipeline_memcpy_async(&s[threadIdx.x * 4], in + (have ? base : 0), 16, (4 - have) * 4);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    int from = (threadIdx.x + 1) % blockDim.x;
    for (int k = 0; k < 4; k++)
        out[base + k] = s[from * 4 + k];
}

// Per-thread pipeline of 4-byte copies: out[i] = in[i] + in[i + 1] within a block's tile.
extern "C" __global__ void pairs_copy(const float *in, float *out)
{
    __shared__ float s[257];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    const float *src = in + blockIdx.x * 256;
    pipe.producer_acquire();
    cuda::memcpy_async(&s[threadIdx.x], &src[threadIdx.x], sizeof(float), pipe);
    if (threadIdx.x == 0)
        cuda::memcpy_async(&s[256], &src[256], sizeof(float), pipe);
    pipe.producer_commit();
    pipe.consumer_wait();
    __syncthreads();
    out[blockIdx.x * 256 + threadIdx.x] = s[threadIdx.x] + s[threadIdx.x + 1];
    pipe.consumer_release();
}

// A tile of 256 ints reversed, its copy completing on a cuda::barrier.
extern "C" __global__ void barrier_copy(const int *in, int *out)
{
    __shared__ alignas(16) int s[256];
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    auto block = cg::this_thread_block();
    if (block.thread_rank() == 0)
        init(&bar, block.size());
    block.sync();
    cuda::memcpy_async(block, s, in + blockIdx.x * 256, cuda::aligned_size_t<16>(sizeof(int) * 256), bar);
    bar.arrive_and_wait();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        out[blockIdx.x * 256 + i] = s[255 - i];
}
