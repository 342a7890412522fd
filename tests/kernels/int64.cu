// 64-bit integer math: mul.hi, division, shifts, 128-bit carry chains.
extern "C" __global__ void int64ops(const unsigned long long *a, const unsigned long long *b,
                                    unsigned long long *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned long long x = a[i], y = b[i] | 1;
    long long sx = (long long)x, sy = (long long)y;
    unsigned long long *o = out + (size_t)i * 10;
    o[0] = x * y;
    o[1] = __umul64hi(x, y);
    o[2] = (unsigned long long)__mul64hi(sx, sy);
    o[3] = x / y;
    o[4] = x % y;
    o[5] = (unsigned long long)(sx / (sy >> 40 | 1));
    o[6] = (x << (y & 63)) ^ (x >> (y & 31)) ^ (unsigned long long)(sx >> 7);
    unsigned __int128 p = (unsigned __int128)x * y + (unsigned __int128)x + y;
    o[7] = (unsigned long long)p;
    o[8] = (unsigned long long)(p >> 64);
    o[9] = __popcll(x) + __clzll(y) + (x > y) + (sx < sy);
}
