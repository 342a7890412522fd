// Histogram: per-block counts in shared memory with shared atomics, merged
// into the global histogram with global atomics.
#define BINS 64

extern "C" __global__ void histogram(const unsigned char *data, int n, unsigned *hist)
{
    __shared__ unsigned local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % BINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b])
            atomicAdd(&hist[b], local[b]);
}

// Global-only atomics of several kinds.
extern "C" __global__ void atomics(const int *in, int n, int *imax, unsigned *ior,
                                   float *fsum, double *dsum, int *cas_count, int *exch)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int v = in[i];
    atomicMax(imax, v);
    atomicOr(ior, 1u << (v & 31));
    atomicAdd(fsum, (float)(v & 15));
    atomicAdd(dsum, (double)v);
    int old = *cas_count, assumed;
    do {
        assumed = old;
        old = atomicCAS(cas_count, assumed, assumed + 1);
    } while (old != assumed);
    atomicExch(exch, 7);
}
