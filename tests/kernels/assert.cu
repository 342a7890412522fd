#include <cassert>
// A device-side assert that fails in one thread.
extern "C" __global__ void check_positive(const int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(x[i] >= 0);
}
