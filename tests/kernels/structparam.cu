// Struct parameters passed by value, 64-bit pointer arithmetic, and a
// C++-mangled kernel name.
struct Params {
    const double *src;
    double *dst;
    long long n;
    double scale;
    int stride;
    char tag;
};

struct Small {
    float a;
    short b;
};

__global__ void scale_struct(Params p, Small s)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) {
        const double *src = p.src + i * p.stride;
        p.dst[i] = *src * p.scale + s.a + s.b + p.tag;
    }
}

// Host code takes its address so the mangled symbol is emitted.
void *scale_struct_addr() { return (void *)scale_struct; }
