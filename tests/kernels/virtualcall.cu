// Virtual functions on objects built with new in the kernel, a table of
// device function pointers in an initialiser, and recursion through a
// function pointer (the callee's registers must survive the inner call).
#include <climits>

struct Op {
    __device__ virtual ~Op() {}
    __device__ virtual int apply(int x) const = 0;
};
struct AddK : Op {
    int k;
    __device__ explicit AddK(int k) : k(k) {}
    __device__ int apply(int x) const override { return x + k; }
};
struct MulK : Op {
    int k;
    __device__ explicit MulK(int k) : k(k) {}
    __device__ int apply(int x) const override { return x * k; }
};
struct NegAdd : AddK {
    __device__ explicit NegAdd(int k) : AddK(k) {}
    __device__ int apply(int x) const override { return -AddK::apply(x); }
};

typedef int (*fn_t)(int);
__device__ int square(int x) { return x * x; }
__device__ int halve(int x) { return x / 2; }
__device__ int fact(int n);
__device__ fn_t table[3] = { square, halve, fact };
__device__ int fact(int n) { return n <= 1 ? 1 : n * table[2](n - 1); }

// out[i] = op_i(in[i]) + table[i % 2](in[i]) + (i % 8)!, op_i by i % 3:
// in[i] + i, in[i] * 3, -(in[i] + 5).
extern "C" __global__ void virtual_calls(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    Op *o;
    switch (i % 3) {
    case 0: o = new AddK(i); break;
    case 1: o = new MulK(3); break;
    default: o = new NegAdd(5); break;
    }
    if (!o) {
        out[i] = INT_MIN;
        return;
    }
    out[i] = o->apply(in[i]) + table[i % 2](in[i]) + table[2](i % 8);
    delete o;
}
