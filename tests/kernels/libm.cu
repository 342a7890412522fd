// A wider slice of the CUDA math library: each function compiles to a
// different mix of libdevice code paths.
#define NF 14
extern "C" __global__ void libm_f32(const float *x, const float *y, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float a = x[i], b = y[i];
    float *o = out + (size_t)i * NF;
    o[0] = powf(a, b);
    o[1] = atan2f(a, b);
    o[2] = erff(b);
    o[3] = expm1f(b);
    o[4] = log1pf(a);
    o[5] = cbrtf(b);
    o[6] = hypotf(a, b);
    o[7] = fmodf(a * 10.0f, b);
    o[8] = sinhf(b);
    o[9] = asinf(b / 4.0f);
    o[10] = lgammaf(a);
    o[11] = exp10f(b);
    o[12] = log2f(a) + log10f(a);
    o[13] = tanf(b);
}

extern "C" __global__ void libm_f64(const double *x, const double *y, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double a = x[i], b = y[i];
    double *o = out + (size_t)i * NF;
    o[0] = pow(a, b);
    o[1] = atan2(a, b);
    o[2] = erf(b);
    o[3] = expm1(b);
    o[4] = log1p(a);
    o[5] = cbrt(b);
    o[6] = hypot(a, b);
    o[7] = fmod(a * 10.0, b);
    o[8] = sinh(b);
    o[9] = asin(b / 4.0);
    o[10] = lgamma(a);
    o[11] = exp10(b);
    o[12] = log2(a) + log10(a);
    o[13] = tan(b);
}
