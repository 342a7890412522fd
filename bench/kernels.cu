/* The bench's kernels: an empty one (launch cost), a spin that keeps a
 * stream busy (outstanding work), a tiled matmul and a block reduction
 * (the real workload). extern "C" so the bench finds them by name. */

extern "C" __global__ void empty(void) {}

/* One thread loops n times; the result goes to *out so nothing folds away. */
extern "C" __global__ void spin(long long n, int *out)
{
    int x = 1;
    for (long long i = 0; i < n; i++)
        x = x * 3 + (int)i;
    *out = x;
}

#define TILE 16

/* c = a * b, n x n row-major, n a multiple of TILE, TILE x TILE blocks. */
extern "C" __global__ void matmul(const float *a, const float *b, float *c, int n)
{
    __shared__ float ta[TILE][TILE], tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        ta[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        tb[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = sum;
}

/* out[blockIdx.x] = sum of the block's 256 elements of in. */
extern "C" __global__ void reduce(const float *in, float *out, int n)
{
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int half = 128; half > 0; half >>= 1) {
        if (threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = s[0];
}
