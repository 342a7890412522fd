// Grid-stride loop with a per-thread local array indexed at run time.
extern "C" __global__ void gridstride(const int *in, int *out, int n, int k)
{
    int local[16];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        for (int j = 0; j < 16; j++)
            local[j] = in[i] * (j + 1);
        int idx = (in[i] + k) & 15;
        local[idx] += 1000;
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += local[(j * 7 + k) & 15] ^ j;
        out[i] = s;
    }
}
