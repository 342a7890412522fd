// Textures and surfaces through the runtime, checked on the CPU (seed
// printed; SEED=N repeats a run):
//  - an image in a CUDA array (cudaMallocArray, cudaMemcpy2DToArray)
//    resampled to another size by tex2D with linear filtering, normalized
//    coordinates and clamping, against a bilinear reference with a
//    tolerance (a GPU's interpolation weights are 8-bit fixed point);
//  - the same array tiled by point sampling with wrap addressing;
//  - uchar4 texels read as normalized floats;
//  - a surface written by surf2Dwrite, read back with cudaMemcpy2DFromArray;
//  - a 3-D array filled by cudaMemcpy3D and read back by tex3D, and a
//    2-D layered array read by tex2DLayered;
//  - a mipmapped array's level 0 sampled by tex2DLod, its level 1's size,
//    memory requirements of a level and of the whole,
//    array-to-array and asynchronous array copies;
//  - tex1Dfetch over linear memory and tex2D over pitched memory
//    (cudaMallocPitch);
//  - the driver's linear array copies (cuMemcpyHtoA, AtoA, AtoD, DtoA,
//    AtoHAsync) on runtime arrays, and copies past an array's or a buffer's end
//    refused.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include <cuda.h>
#include <cuda_runtime.h>

#include "check.h"

#define CU(call)                                                                      \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            printf("%s:%d: %s: %d\n", __FILE__, __LINE__, #call, (int)r_);            \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("texture: %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void resample(cudaTextureObject_t tex, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w)
        out[y * w + x] = tex2D<float>(tex, (x + 0.5f) / w, (y + 0.5f) / h);
}

__global__ void tile(cudaTextureObject_t tex, float *out, int w, int h, float reps)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w)
        out[y * w + x] = tex2D<float>(tex, reps * (x + 0.5f) / w, reps * (y + 0.5f) / h);
}

__global__ void colors(cudaTextureObject_t tex, float4 *out, int w)
{
    int x = threadIdx.x, y = blockIdx.x;
    out[y * w + x] = tex2D<float4>(tex, x + 0.5f, y + 0.5f);
}

__global__ void paint(cudaSurfaceObject_t surf, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
    if (x < w)
        surf2Dwrite(make_float2(x * 0.5f - y, (float)(x ^ y)), surf, x * sizeof(float2), y);
}

__global__ void volume(cudaTextureObject_t tex, float *out, int w, int h, int d)
{
    int x = threadIdx.x, y = blockIdx.x, z = blockIdx.y;
    out[(z * h + y) * w + x] = tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
}

__global__ void layers(cudaTextureObject_t tex, float *out, int w, int h)
{
    int x = threadIdx.x, y = blockIdx.x, l = blockIdx.y;
    out[(l * h + y) * w + x] = tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, l);
}

__global__ void fetch(cudaTextureObject_t tex, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = 2 * tex1Dfetch<float>(tex, i);
}

__global__ void level0(cudaTextureObject_t tex, float *out, int w, int h)
{
    int x = threadIdx.x, y = blockIdx.x;
    out[y * w + x] = tex2DLod<float>(tex, x + 0.5f, y + 0.5f, 0.0f);
}

static float texel(const std::vector<float> &img, int w, int h, int x, int y)
{
    x = x < 0 ? 0 : x >= w ? w - 1 : x;
    y = y < 0 ? 0 : y >= h ? h - 1 : y;
    return img[y * w + x];
}

static float bilinear(const std::vector<float> &img, int w, int h, float u, float v)
{
    float x = u * w - 0.5f, y = v * h - 0.5f;
    int x0 = (int)floorf(x), y0 = (int)floorf(y);
    float a = x - x0, b = y - y0;
    return (1 - a) * (1 - b) * texel(img, w, h, x0, y0) + a * (1 - b) * texel(img, w, h, x0 + 1, y0) +
           (1 - a) * b * texel(img, w, h, x0, y0 + 1) + a * b * texel(img, w, h, x0 + 1, y0 + 1);
}

static cudaTextureObject_t make_texture(cudaArray_t a, cudaTextureFilterMode filter, cudaTextureAddressMode mode,
                                        bool normalized, cudaTextureReadMode read)
{
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = a;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = mode;
    td.filterMode = filter;
    td.readMode = read;
    td.normalizedCoords = normalized;
    cudaTextureObject_t t;
    CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
    return t;
}

int main()
{
    unsigned seed = run_seed("texture");
    srand(seed);

    // An image resampled up and down with linear filtering.
    const int W = 37, H = 23;
    std::vector<float> img(W * H);
    for (auto &v : img)
        v = (float)rand() / RAND_MAX * 100.0f;
    cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
    cudaArray_t arr;
    CHECK(cudaMallocArray(&arr, &fdesc, W, H));
    CHECK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), W * sizeof(float), W * sizeof(float), H,
                              cudaMemcpyHostToDevice));
    cudaTextureObject_t lin = make_texture(arr, cudaFilterModeLinear, cudaAddressModeClamp, true,
                                           cudaReadModeElementType);
    const int sizes[][2] = { { 80, 50 }, { 16, 9 } };
    for (auto &s : sizes) {
        int w = s[0], h = s[1];
        float *dout;
        CHECK(cudaMalloc(&dout, w * h * sizeof(float)));
        resample<<<dim3((w + 63) / 64, h), 64>>>(lin, dout, w, h);
        CHECK(cudaGetLastError());
        std::vector<float> out(w * h);
        CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                float want = bilinear(img, W, H, (x + 0.5f) / w, (y + 0.5f) / h);
                EXPECT(fabsf(out[y * w + x] - want) < 0.5f, "%dx%d at (%d, %d): %g, want %g", w, h, x, y,
                       out[y * w + x], want);
            }
        CHECK(cudaFree(dout));
    }

    // Tiled three times by wrap addressing, point sampled: exact.
    cudaTextureObject_t wrap = make_texture(arr, cudaFilterModePoint, cudaAddressModeWrap, true,
                                            cudaReadModeElementType);
    {
        int w = 3 * W, h = 3 * H;
        float *dout;
        CHECK(cudaMalloc(&dout, w * h * sizeof(float)));
        tile<<<dim3((w + 63) / 64, h), 64>>>(wrap, dout, w, h, 3.0f);
        std::vector<float> out(w * h);
        CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                EXPECT(out[y * w + x] == img[(y % H) * W + x % W], "tile at (%d, %d): %g", x, y, out[y * w + x]);
        CHECK(cudaFree(dout));
    }
    CHECK(cudaDestroyTextureObject(lin));
    CHECK(cudaDestroyTextureObject(wrap));
    CHECK(cudaFreeArray(arr));

    // A mipmapped array: its level 0 filled on a stream and sampled, level
    // 1 half the size, level 0 copied to a plain array and back.
    {
        cudaMipmappedArray_t mip;
        CHECK(cudaMallocMipmappedArray(&mip, &fdesc, make_cudaExtent(W, H, 0), 3));
        cudaArray_t l0, l1;
        CHECK(cudaGetMipmappedArrayLevel(&l0, mip, 0));
        CHECK(cudaGetMipmappedArrayLevel(&l1, mip, 1));
        cudaChannelFormatDesc d1;
        cudaExtent e1;
        unsigned flags;
        CHECK(cudaArrayGetInfo(&d1, &e1, &flags, l1));
        EXPECT(e1.width == W / 2 && e1.height == H / 2 && d1.x == 32, "level 1 is %zux%zu", e1.width, e1.height);
        int dev;
        CHECK(cudaGetDevice(&dev));
        cudaArrayMemoryRequirements req0, reqm;
        CHECK(cudaArrayGetMemoryRequirements(&req0, l0, dev));
        CHECK(cudaMipmappedArrayGetMemoryRequirements(&reqm, mip, dev));
        EXPECT(req0.size >= W * H * sizeof(float) && req0.alignment && reqm.size >= req0.size && reqm.alignment,
               "memory requirements %zu/%zu, mipmapped %zu/%zu", req0.size, req0.alignment, reqm.size,
               reqm.alignment);
        cudaStream_t st;
        CHECK(cudaStreamCreate(&st));
        CHECK(cudaMemcpy2DToArrayAsync(l0, 0, 0, img.data(), W * sizeof(float), W * sizeof(float), H,
                                       cudaMemcpyHostToDevice, st));
        CHECK(cudaStreamSynchronize(st));
        cudaResourceDesc res = {};
        res.resType = cudaResourceTypeMipmappedArray;
        res.res.mipmap.mipmap = mip;
        cudaTextureDesc td = {};
        td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
        td.filterMode = cudaFilterModePoint;
        td.mipmapFilterMode = cudaFilterModePoint;
        td.maxMipmapLevelClamp = 2;
        cudaTextureObject_t t;
        CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
        float *dout;
        CHECK(cudaMalloc(&dout, W * H * sizeof(float)));
        level0<<<H, W, 0, st>>>(t, dout, W, H);
        std::vector<float> out(W * H);
        CHECK(cudaMemcpyAsync(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost, st));
        CHECK(cudaStreamSynchronize(st));
        EXPECT(out == img, "level 0 through a texture");
        cudaArray_t copy;
        CHECK(cudaMallocArray(&copy, &fdesc, W, H));
        CHECK(cudaMemcpy2DArrayToArray(copy, 0, 0, l0, 0, 0, W * sizeof(float), H, cudaMemcpyDeviceToDevice));
        std::vector<float> back(W * H);
        CHECK(cudaMemcpy2DFromArrayAsync(back.data(), W * sizeof(float), copy, 0, 0, W * sizeof(float), H,
                                         cudaMemcpyDeviceToHost, st));
        CHECK(cudaStreamSynchronize(st));
        EXPECT(back == img, "array to array");
        CHECK(cudaDestroyTextureObject(t));
        CHECK(cudaFreeMipmappedArray(mip));
        CHECK(cudaFreeArray(copy));
        CHECK(cudaFree(dout));
        CHECK(cudaStreamDestroy(st));
    }

    // uchar4 colors read as normalized floats.
    {
        const int w = 8, h = 4;
        std::vector<uchar4> px(w * h);
        for (auto &p : px)
            p = make_uchar4(rand() & 255, rand() & 255, rand() & 255, rand() & 255);
        cudaChannelFormatDesc cdesc = cudaCreateChannelDesc<uchar4>();
        cudaArray_t carr;
        CHECK(cudaMallocArray(&carr, &cdesc, w, h));
        CHECK(cudaMemcpy2DToArray(carr, 0, 0, px.data(), w * 4, w * 4, h, cudaMemcpyHostToDevice));
        cudaTextureObject_t t = make_texture(carr, cudaFilterModePoint, cudaAddressModeClamp, false,
                                             cudaReadModeNormalizedFloat);
        float4 *dout;
        CHECK(cudaMalloc(&dout, w * h * sizeof(float4)));
        colors<<<h, w>>>(t, dout, w);
        std::vector<float4> out(w * h);
        CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float4), cudaMemcpyDeviceToHost));
        for (int i = 0; i < w * h; i++)
            EXPECT(fabsf(out[i].x - px[i].x / 255.0f) < 1e-6f && fabsf(out[i].w - px[i].w / 255.0f) < 1e-6f,
                   "color %d: %g %g", i, out[i].x, out[i].w);
        CHECK(cudaDestroyTextureObject(t));
        CHECK(cudaFreeArray(carr));
        CHECK(cudaFree(dout));
    }

    // A surface painted by a kernel, read back as a 2-D copy.
    {
        const int w = 70, h = 5;
        cudaChannelFormatDesc sdesc = cudaCreateChannelDesc<float2>();
        cudaArray_t sarr;
        CHECK(cudaMallocArray(&sarr, &sdesc, w, h, cudaArraySurfaceLoadStore));
        cudaResourceDesc res = {};
        res.resType = cudaResourceTypeArray;
        res.res.array.array = sarr;
        cudaSurfaceObject_t surf;
        CHECK(cudaCreateSurfaceObject(&surf, &res));
        paint<<<dim3((w + 31) / 32, h), 32>>>(surf, w, h);
        CHECK(cudaGetLastError());
        std::vector<float2> out(w * h);
        CHECK(cudaMemcpy2DFromArray(out.data(), w * sizeof(float2), sarr, 0, 0, w * sizeof(float2), h,
                                    cudaMemcpyDeviceToHost));
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                EXPECT(out[y * w + x].x == x * 0.5f - y && out[y * w + x].y == (float)(x ^ y), "surface (%d, %d)",
                       x, y);
        CHECK(cudaDestroySurfaceObject(surf));
        CHECK(cudaFreeArray(sarr));
    }

    // A 3-D array and a layered one, filled by cudaMemcpy3D.
    {
        const int w = 9, h = 7, d = 4;
        std::vector<float> vol(w * h * d);
        for (auto &v : vol)
            v = (float)(rand() % 1000);
        for (int layered = 0; layered < 2; layered++) {
            cudaArray_t a3;
            CHECK(cudaMalloc3DArray(&a3, &fdesc, make_cudaExtent(w, h, d), layered ? cudaArrayLayered : 0));
            cudaMemcpy3DParms p = {};
            p.srcPtr = make_cudaPitchedPtr(vol.data(), w * sizeof(float), w, h);
            p.dstArray = a3;
            p.extent = make_cudaExtent(w, h, d);
            p.kind = cudaMemcpyHostToDevice;
            CHECK(cudaMemcpy3D(&p));
            cudaTextureObject_t t = make_texture(a3, cudaFilterModePoint, cudaAddressModeClamp, false,
                                                 cudaReadModeElementType);
            float *dout;
            CHECK(cudaMalloc(&dout, vol.size() * sizeof(float)));
            if (layered)
                layers<<<dim3(h, d), w>>>(t, dout, w, h);
            else
                volume<<<dim3(h, d), w>>>(t, dout, w, h, d);
            std::vector<float> out(vol.size());
            CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < vol.size(); i++)
                EXPECT(out[i] == vol[i], "%s element %zu: %g, want %g", layered ? "layered" : "3-D", i, out[i],
                       vol[i]);
            // And back out of the array into a pitched device buffer.
            cudaPitchedPtr back;
            CHECK(cudaMalloc3D(&back, make_cudaExtent(w * sizeof(float), h, d)));
            cudaMemcpy3DParms q = {};
            q.srcArray = a3;
            q.dstPtr = back;
            q.extent = make_cudaExtent(w, h, d);
            q.kind = cudaMemcpyDeviceToDevice;
            CHECK(cudaMemcpy3D(&q));
            std::vector<float> host(vol.size());
            CHECK(cudaMemcpy2D(host.data(), w * sizeof(float), back.ptr, back.pitch, w * sizeof(float), h * d,
                               cudaMemcpyDeviceToHost));
            EXPECT(host == vol, "3-D copy back out of the array");
            // Straight into host memory, the runtime inferring the kind.
            std::vector<float> direct(vol.size());
            cudaMemcpy3DParms r = {};
            r.srcArray = a3;
            r.dstPtr = make_cudaPitchedPtr(direct.data(), w * sizeof(float), w, h);
            r.extent = make_cudaExtent(w, h, d);
            r.kind = cudaMemcpyDefault;
            CHECK(cudaMemcpy3D(&r));
            EXPECT(direct == vol, "3-D copy of kind cudaMemcpyDefault");
            CHECK(cudaFree(back.ptr));
            CHECK(cudaFree(dout));
            CHECK(cudaDestroyTextureObject(t));
            CHECK(cudaFreeArray(a3));
        }
    }

    // Linear memory: tex1Dfetch; pitched memory: tex2D.
    {
        const int n = 1000;
        std::vector<float> v(n);
        for (auto &x : v)
            x = (float)rand() / RAND_MAX;
        float *dv, *dout;
        CHECK(cudaMalloc(&dv, n * sizeof(float)));
        CHECK(cudaMalloc(&dout, n * sizeof(float)));
        CHECK(cudaMemcpy(dv, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        cudaResourceDesc res = {};
        res.resType = cudaResourceTypeLinear;
        res.res.linear.devPtr = dv;
        res.res.linear.desc = fdesc;
        res.res.linear.sizeInBytes = n * sizeof(float);
        cudaTextureDesc td = {};
        td.readMode = cudaReadModeElementType;
        cudaTextureObject_t t;
        CHECK(cudaCreateTextureObject(&t, &res, &td, nullptr));
        fetch<<<(n + 127) / 128, 128>>>(t, dout, n);
        std::vector<float> out(n);
        CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            EXPECT(out[i] == 2 * v[i], "fetch %d: %g", i, out[i]);
        CHECK(cudaDestroyTextureObject(t));

        float *pitched;
        size_t pitch;
        CHECK(cudaMallocPitch(&pitched, &pitch, W * sizeof(float), H));
        CHECK(cudaMemcpy2D(pitched, pitch, img.data(), W * sizeof(float), W * sizeof(float), H,
                           cudaMemcpyHostToDevice));
        cudaResourceDesc pres = {};
        pres.resType = cudaResourceTypePitch2D;
        pres.res.pitch2D.devPtr = pitched;
        pres.res.pitch2D.desc = fdesc;
        pres.res.pitch2D.width = W;
        pres.res.pitch2D.height = H;
        pres.res.pitch2D.pitchInBytes = pitch;
        cudaTextureDesc ptd = {};
        ptd.addressMode[0] = ptd.addressMode[1] = cudaAddressModeClamp;
        ptd.filterMode = cudaFilterModeLinear;
        ptd.normalizedCoords = 1;
        CHECK(cudaCreateTextureObject(&t, &pres, &ptd, nullptr));
        resample<<<dim3(1, 9), 64>>>(t, dout, 16, 9);
        std::vector<float> rs(16 * 9);
        CHECK(cudaMemcpy(rs.data(), dout, rs.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int y = 0; y < 9; y++)
            for (int x = 0; x < 16; x++) {
                float want = bilinear(img, W, H, (x + 0.5f) / 16, (y + 0.5f) / 9);
                EXPECT(fabsf(rs[y * 16 + x] - want) < 0.5f, "pitched (%d, %d): %g, want %g", x, y, rs[y * 16 + x],
                       want);
            }
        CHECK(cudaDestroyTextureObject(t));
        CHECK(cudaFree(pitched));
        CHECK(cudaFree(dv));
        CHECK(cudaFree(dout));
    }
    // The driver's linear array copies on runtime arrays (a cudaArray_t is a
    // CUarray), bounded by the array.
    {
        const int n = 300;
        std::vector<float> v(n), back(n);
        for (auto &x : v)
            x = (float)(rand() % 10000);
        cudaArray_t a1, a2;
        CHECK(cudaMallocArray(&a1, &fdesc, n));
        CHECK(cudaMallocArray(&a2, &fdesc, n));
        float *d;
        CHECK(cudaMalloc(&d, n * sizeof(float)));
        CU(cuMemcpyHtoA((CUarray)a1, 0, v.data(), n * sizeof(float)));
        CU(cuMemcpyAtoA((CUarray)a2, 2 * sizeof(float), (CUarray)a1, 0, (n - 2) * sizeof(float)));
        CU(cuMemcpyAtoD((CUdeviceptr)d, (CUarray)a2, 0, n * sizeof(float)));
        CU(cuMemcpyDtoA((CUarray)a1, 0, (CUdeviceptr)d, n * sizeof(float)));
        CU(cuMemcpyAtoHAsync(back.data(), (CUarray)a1, 0, n * sizeof(float), 0));
        CHECK(cudaDeviceSynchronize());
        for (int i = 2; i < n; i++)
            EXPECT(back[i] == v[i - 2], "linear array copies at %d: %g, want %g", i, back[i], v[i - 2]);
        EXPECT(cuMemcpyHtoA((CUarray)a1, sizeof(float), v.data(), n * sizeof(float)) == CUDA_ERROR_INVALID_VALUE,
               "a copy past the array's end");
        EXPECT(cuMemcpyAtoD((CUdeviceptr)(d + 1), (CUarray)a1, 0, n * sizeof(float)) == CUDA_ERROR_INVALID_VALUE,
               "a copy past the device buffer's end");
        CHECK(cudaFreeArray(a1));
        CHECK(cudaFreeArray(a2));
        CHECK(cudaFree(d));
    }
    CHECK(cudaDeviceSynchronize());
    printf("texture: ok\n");
    return 0;
}
