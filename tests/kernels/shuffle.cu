// Shuffles in every mode, with full and partial warps.
extern "C" __global__ void shuffles(const int *in, int *out, int n, int delta)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : -1;
    int *o = out + (size_t)i * 6;
    int up = __shfl_up_sync(0xffffffffu, v, delta);
    int down = __shfl_down_sync(0xffffffffu, v, delta);
    int x = __shfl_xor_sync(0xffffffffu, v, delta);
    int idx = __shfl_sync(0xffffffffu, v, (threadIdx.x * 7 + delta) & 31);
    int w8 = __shfl_sync(0xffffffffu, v, delta, 8);
    float f = __shfl_down_sync(0xffffffffu, (float)v * 0.5f, 1, 16);
    if (i < n) {
        o[0] = up; o[1] = down; o[2] = x; o[3] = idx; o[4] = w8; o[5] = (int)(f * 2.0f);
    }
}

extern "C" __global__ void shuffle64(const double *in, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    double v = i < n ? in[i] : 0.0;
    for (int off = 1; off < 32; off <<= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (i < n)
        out[i] = v;
}
