// Warp-level reduction with shuffles and votes.
extern "C" __global__ void warp_sum(const int *in, int *out, unsigned *ballots, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    unsigned mask = __activemask();
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off);
    unsigned b = __ballot_sync(0xffffffffu, i < n && (in[i] & 1));
    int any = __any_sync(0xffffffffu, i < n && in[i] < 0);
    int all = __all_sync(0xffffffffu, i < n);
    if ((threadIdx.x & 31) == 0) {
        int w = i >> 5;
        out[w] = v;
        ballots[w * 4 + 0] = b;
        ballots[w * 4 + 1] = (unsigned)any;
        ballots[w * 4 + 2] = (unsigned)all;
        ballots[w * 4 + 3] = mask;
    }
}

// Counts bits and finds leading zeros per element.
extern "C" __global__ void bits(const unsigned *in, unsigned *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned x = in[i];
        out[i * 4 + 0] = __popc(x);
        out[i * 4 + 1] = __clz(x);
        out[i * 4 + 2] = __brev(x);
        out[i * 4 + 3] = __ffs(x);
    }
}
