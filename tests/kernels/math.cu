// Float and double math functions, element-wise.
extern "C" __global__ void fmath(const float *x, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    float *o = out + (size_t)i * 12;
    o[0] = sqrtf(v);
    o[1] = expf(v);
    o[2] = logf(v);
    o[3] = sinf(v);
    o[4] = cosf(v);
    o[5] = rsqrtf(v);
    o[6] = 1.0f / v;
    o[7] = tanhf(v);
    o[8] = fminf(v, 2.0f) + fmaxf(v, 0.5f);
    o[9] = floorf(v * 3.3f) + ceilf(v) + truncf(v * 7.1f) + rintf(v * 2.5f);
    o[10] = copysignf(v, -1.0f) + fabsf(-v);
    o[11] = (float)(int)(v * 100.0f) + (float)(unsigned)(v * 10.0f);
}

extern "C" __global__ void dmath(const double *x, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    double v = x[i];
    double *o = out + (size_t)i * 8;
    o[0] = sqrt(v);
    o[1] = exp(v);
    o[2] = log(v);
    o[3] = sin(v);
    o[4] = 1.0 / v;
    o[5] = v / 3.0;
    o[6] = floor(v * 3.3) + ceil(v) + fmin(v, 1.5) + fmax(v, 0.75);
    o[7] = (double)(long long)(v * 1000.0) + (double)(float)v;
}
