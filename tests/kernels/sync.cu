// Block-wide votes (__syncthreads_count/and/or), funnel shifts and warp
// matches.
extern "C" __global__ void block_votes(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    int count = __syncthreads_count(v > 0);
    int all = __syncthreads_and(v != 0);
    int any = __syncthreads_or(v > 1000);
    if (threadIdx.x == 0) {
        out[blockIdx.x * 3 + 0] = count;
        out[blockIdx.x * 3 + 1] = all;
        out[blockIdx.x * 3 + 2] = any;
    }
}

extern "C" __global__ void funnel_match(const unsigned *a, const unsigned *b, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = i < n ? a[i] : 0, y = i < n ? b[i] : 0;
    unsigned key = x & 3;
    unsigned any = __match_any_sync(0xffffffffu, key);
    int pred;
    unsigned all = __match_all_sync(0xffffffffu, key & 0, &pred);
    if (i < n) {
        out[i * 5 + 0] = __funnelshift_l(x, y, y & 63);
        out[i * 5 + 1] = __funnelshift_r(x, y, y & 63);
        out[i * 5 + 2] = __funnelshift_lc(x, y, y & 63);
        out[i * 5 + 3] = any;
        out[i * 5 + 4] = all + pred;
    }
}
