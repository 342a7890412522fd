// Texture and surface objects as nvcc 13 emits them for the CUDA runtime's
// tex*/surf* intrinsics: tex (1d/2d/3d, layered, cube, level, grad), tld4,
// suld.b and sust.b (trap, clamp, zero). Coordinates come from arrays so
// that the tests choose them.
#include <cuda_runtime.h>

extern "C" __global__ void tex2d_f4(cudaTextureObject_t t, const float2 *uv, float4 *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex2D<float4>(t, uv[i].x, uv[i].y);
}

extern "C" __global__ void tex2d_f1(cudaTextureObject_t t, const float2 *uv, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex2D<float>(t, uv[i].x, uv[i].y);
}

extern "C" __global__ void tex2d_uchar4(cudaTextureObject_t t, const float2 *uv, uchar4 *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex2D<uchar4>(t, uv[i].x, uv[i].y);
}

extern "C" __global__ void tex1d_fetch(cudaTextureObject_t t, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex1Dfetch<float>(t, i);
}

extern "C" __global__ void tex1d_fetch_int(cudaTextureObject_t t, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex1Dfetch<int>(t, i - 2);
}

extern "C" __global__ void tex1d_f(cudaTextureObject_t t, const float *u, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex1D<float>(t, u[i]);
}

extern "C" __global__ void tex3d_f(cudaTextureObject_t t, const float4 *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex3D<float>(t, p[i].x, p[i].y, p[i].z);
}

extern "C" __global__ void tex1d_layered(cudaTextureObject_t t, const float2 *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex1DLayered<float>(t, p[i].x, (int)p[i].y);
}

extern "C" __global__ void tex2d_layered(cudaTextureObject_t t, const float4 *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex2DLayered<float>(t, p[i].x, p[i].y, (int)p[i].z);
}

extern "C" __global__ void tex_cube(cudaTextureObject_t t, const float4 *p, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = texCubemap<float>(t, p[i].x, p[i].y, p[i].z);
}

extern "C" __global__ void tex2d_lod_grad(cudaTextureObject_t t, const float2 *uv, float2 *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float a = tex2DLod<float>(t, uv[i].x, uv[i].y, 0.0f);
        float b = tex2DGrad<float>(t, uv[i].x, uv[i].y, make_float2(0, 0), make_float2(0, 0));
        out[i] = make_float2(a, b);
    }
}

extern "C" __global__ void tex2d_gather(cudaTextureObject_t t, const float2 *uv, float4 *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex2Dgather<float4>(t, uv[i].x, uv[i].y, 1);
}

// Each element of a w x h float surface times k, in place.
extern "C" __global__ void surf2d_scale(cudaSurfaceObject_t s, int w, int h, float k)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w && y < h) {
        float v = surf2Dread<float>(s, x * 4, y);
        surf2Dwrite(v * k, s, x * 4, y);
    }
}

// Reads every x in [-2, w + 2) of row 0 with clamp, writes with zero.
extern "C" __global__ void surf2d_modes(cudaSurfaceObject_t s, int w, uchar4 *out)
{
    int x = threadIdx.x - 2;
    uchar4 v = surf2Dread<uchar4>(s, x * 4, 0, cudaBoundaryModeClamp);
    out[threadIdx.x] = v;
    surf2Dwrite(make_uchar4(v.x + 1, v.y, v.z, v.w), s, x * 4, 1, cudaBoundaryModeZero);
}

// A trapping read outside the surface.
extern "C" __global__ void surf2d_trap(cudaSurfaceObject_t s, int x, float *out)
{
    out[0] = surf2Dread<float>(s, x * 4, 0);
}

extern "C" __global__ void surf1d_inc(cudaSurfaceObject_t s, int n)
{
    int x = threadIdx.x;
    if (x < n)
        surf1Dwrite<short>(surf1Dread<short>(s, x * 2) + 1, s, x * 2);
}

// Slice z + 1 of a 3-D float4 surface becomes slice z plus (x, y, z, 1).
extern "C" __global__ void surf3d_next(cudaSurfaceObject_t s, int z)
{
    int x = threadIdx.x, y = blockIdx.x;
    float4 v = surf3Dread<float4>(s, x * 16, y, z);
    surf3Dwrite(make_float4(v.x + x, v.y + y, v.z + z, v.w + 1), s, x * 16, y, z + 1);
}

// Layer l + 1 of a layered float2 surface (1-D) becomes layer l doubled.
extern "C" __global__ void surf1d_layered(cudaSurfaceObject_t s, int l)
{
    int x = threadIdx.x;
    float2 v = surf1DLayeredread<float2>(s, x * 8, l);
    surf1DLayeredwrite(make_float2(2 * v.x, 2 * v.y), s, x * 8, l + 1);
}

extern "C" __global__ void surf2d_layered(cudaSurfaceObject_t s, int l)
{
    int x = threadIdx.x, y = blockIdx.x;
    int v = surf2DLayeredread<int>(s, x * 4, y, l);
    surf2DLayeredwrite(v * 3, s, x * 4, y, l + 1);
}
