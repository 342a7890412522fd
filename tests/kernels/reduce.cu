// Block reductions: static shared memory with __syncthreads, and the same
// with dynamic (extern) shared memory sized at launch.
#define BLOCK 256

extern "C" __global__ void reduce_sum(const float *in, float *out, int n)
{
    __shared__ float s[BLOCK];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x * 2 + t;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + blockDim.x < n) v += in[i + blockDim.x];
    s[t] = v;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

extern "C" __global__ void reduce_dyn(const int *in, int *out, int n)
{
    extern __shared__ int d[];
    unsigned t = threadIdx.x;
    int v = 0;
    for (unsigned i = blockIdx.x * blockDim.x + t; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    d[t] = v;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            d[t] += d[t + stride];
        __syncthreads();
    }
    if (t == 0)
        atomicAdd(out, d[0]);
}
