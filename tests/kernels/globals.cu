// __constant__ and __device__ globals with initialisers, read and written.
__constant__ float coeffs[4] = {1.0f, 2.0f, 3.0f, 0.5f};
__constant__ int offset_c;
__device__ int counter = 5;
__device__ float table[8] = {0, 1, 4, 9, 16, 25, 36, 49};

extern "C" __global__ void use_globals(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = coeffs[0] + coeffs[1] * v + coeffs[2] * v * v + coeffs[3] * table[i & 7] + offset_c;
        atomicAdd(&counter, 1);
    }
}

extern "C" __global__ void read_counter(int *out)
{
    *out = counter;
}
