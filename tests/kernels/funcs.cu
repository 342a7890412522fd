// Device functions that stay calls (.func with the .param ABI), and
// recursion, which nvcc cannot inline.
__device__ __noinline__ int gcd(int a, int b)
{
    return b == 0 ? a : gcd(b, a % b);
}

__device__ __noinline__ float2 pair(float x, float y)
{
    return make_float2(x + y, x * y);
}

extern "C" __global__ void call_funcs(const int *a, const int *b, int *g, float *f, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        g[i] = gcd(a[i], b[i]);
        float2 p = pair((float)a[i], (float)b[i]);
        f[i * 2] = p.x;
        f[i * 2 + 1] = p.y;
    }
}
