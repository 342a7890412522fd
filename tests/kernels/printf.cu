#include <cstdio>
// Device printf with several argument kinds.
extern "C" __global__ void hello(int base, double d)
{
    int t = threadIdx.x + blockIdx.x * blockDim.x;
    if (t % 3 == 0)
        printf("thread %d base %d val %.3f hex %x str %s c %c ll %lld\n",
               t, base, d * t, (unsigned)t * 0x1111u, "ok", 'A' + (t % 26),
               (long long)t * 10000000000LL);
}
