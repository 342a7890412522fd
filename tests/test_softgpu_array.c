/* softgpu's CUDA arrays, 3-D and array copies, texture and surface
 * objects, and the tex/tld4/suld/sust instructions of tests/kernels/images.cu,
 * against CPU references: filtering, address modes, normalized
 * coordinates, read modes, layered, cube and 3-D arrays. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/seed.h"
#include "tests/cuda_ok.h"

static CUcontext ctx;
static CUmodule mod;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/images.default.fatbin", RIG_BUILD_DIR);
    size_t n;
    char *img = support_read_file(path, &n);
    cr_assert(img, "cannot read %s", path);
    cr_assert_eq(cuModuleLoadData(&mod, img), CUDA_SUCCESS);
    free(img);
}

TestSuite(array, .init = setup, .timeout = 60);

static CUfunction fn(const char *name)
{
    CUfunction f;
    cr_assert_eq(cuModuleGetFunction(&f, mod, name), CUDA_SUCCESS, "%s", name);
    return f;
}

static CUdeviceptr upload(const void *h, size_t n)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, n));
    if (h)
        OK(cuMemcpyHtoD(d, h, n));
    else
        OK(cuMemsetD8(d, 0, n));
    return d;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned bx, void **args)
{
    CUresult r = cuLaunchKernel(f, gx, gy, 1, bx, 1, 1, 0, NULL, args, NULL);
    return r == CUDA_SUCCESS ? cuCtxSynchronize() : r;
}

static CUarray array3d(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned flags)
{
    CUDA_ARRAY3D_DESCRIPTOR desc = { .Width = w, .Height = h, .Depth = d, .Format = f,
                                     .NumChannels = ch, .Flags = flags };
    CUarray a;
    OK(cuArray3DCreate(&a, &desc));
    return a;
}

static CUtexObject texobj(CUarray a, CUaddress_mode mode, CUfilter_mode filter, unsigned flags)
{
    CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a };
    CUDA_TEXTURE_DESC t = { .addressMode = { mode, mode, mode }, .filterMode = filter, .flags = flags,
                            .borderColor = { -1, -2, -3, -4 } };
    CUtexObject o;
    OK(cuTexObjectCreate(&o, &r, &t, NULL));
    return o;
}

static CUsurfObject surfobj(CUarray a)
{
    CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a };
    CUsurfObject o;
    OK(cuSurfObjectCreate(&o, &r));
    return o;
}

/* ---- CPU reference sampling of a one-channel float image ---- */

static long addr_ref(long i, long n, CUaddress_mode m, bool norm, bool *border)
{
    *border = false;
    if (!norm && (m == CU_TR_ADDRESS_MODE_WRAP || m == CU_TR_ADDRESS_MODE_MIRROR))
        m = CU_TR_ADDRESS_MODE_CLAMP;
    if (m == CU_TR_ADDRESS_MODE_WRAP)
        return ((i % n) + n) % n;
    if (m == CU_TR_ADDRESS_MODE_MIRROR) {
        long k = ((i % (2 * n)) + 2 * n) % (2 * n);
        return k < n ? k : 2 * n - 1 - k;
    }
    if (m == CU_TR_ADDRESS_MODE_BORDER && (i < 0 || i >= n)) {
        *border = true;
        return 0;
    }
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

static float at2(const float *img, long w, long h, long x, long y, CUaddress_mode m, bool norm, float border)
{
    bool bx, by;
    x = addr_ref(x, w, m, norm, &bx);
    y = addr_ref(y, h, m, norm, &by);
    return bx || by ? border : img[y * w + x];
}

static float ref2(const float *img, long w, long h, float u, float v, CUaddress_mode m, bool linear, bool norm)
{
    double x = norm ? (double)u * w : u, y = norm ? (double)v * h : v;
    if (!linear)
        return at2(img, w, h, (long)floor(x), (long)floor(y), m, norm, -1);
    x -= 0.5;
    y -= 0.5;
    long x0 = (long)floor(x), y0 = (long)floor(y);
    double a = x - x0, b = y - y0;
    return (float)((1 - a) * (1 - b) * at2(img, w, h, x0, y0, m, norm, -1) +
                   a * (1 - b) * at2(img, w, h, x0 + 1, y0, m, norm, -1) +
                   (1 - a) * b * at2(img, w, h, x0, y0 + 1, m, norm, -1) +
                   a * b * at2(img, w, h, x0 + 1, y0 + 1, m, norm, -1));
}

Test(array, create_describe_destroy)
{
    CUDA_ARRAY_DESCRIPTOR d2 = { .Width = 17, .Height = 5, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2 };
    CUarray a;
    OK(cuArrayCreate(&a, &d2));
    CUDA_ARRAY_DESCRIPTOR g2;
    OK(cuArrayGetDescriptor(&g2, a));
    cr_assert(g2.Width == 17 && g2.Height == 5 && g2.Format == CU_AD_FORMAT_HALF && g2.NumChannels == 2);
    CUDA_ARRAY3D_DESCRIPTOR g3;
    OK(cuArray3DGetDescriptor(&g3, a));
    cr_assert(g3.Width == 17 && g3.Height == 5 && g3.Depth == 0);
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    OK(cuArrayGetMemoryRequirements(&req, a, 0));
    cr_assert(req.size >= 17 * 5 * 4 && req.alignment);
    OK(cuArrayDestroy(a));
    cr_assert_eq(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);

    CUarray l = array3d(8, 0, 3, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
    cr_assert_eq(cuArrayGetDescriptor(&g2, l), CUDA_ERROR_INVALID_VALUE);
    OK(cuArray3DGetDescriptor(&g3, l));
    cr_assert(g3.Depth == 3 && g3.Flags == CUDA_ARRAY3D_LAYERED);
    OK(cuArrayDestroy(l));
    CUarray c = array3d(4, 4, 6, CU_AD_FORMAT_UNSIGNED_INT8, 4, CUDA_ARRAY3D_CUBEMAP);
    OK(cuArrayDestroy(c));

    CUDA_ARRAY3D_DESCRIPTOR bad[] = {
        { .Width = 4, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 3 },
        { .Width = 0, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 },
        { .Width = 4, .Height = 4, .Depth = 5, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_CUBEMAP },
        { .Width = 4, .Height = 0, .Depth = 5, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 },
        { .Width = 4, .Height = 4, .Format = CU_AD_FORMAT_UNORM_INT8X2, .NumChannels = 4 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(cuArray3DCreate(&a, &bad[i]), CUDA_ERROR_INVALID_VALUE, "descriptor %zu", i);
    CUDA_ARRAY3D_DESCRIPTOR bc = { .Width = 4, .Height = 4, .Format = CU_AD_FORMAT_BC1_UNORM, .NumChannels = 4 };
    cr_assert_eq(cuArray3DCreate(&a, &bc), CUDA_ERROR_NOT_SUPPORTED);
}

Test(array, mipmapped_levels)
{
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 16, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUmipmappedArray m;
    cr_assert_eq(cuMipmappedArrayCreate(&m, &d, 6), CUDA_ERROR_INVALID_VALUE);
    OK(cuMipmappedArrayCreate(&m, &d, 5));
    size_t want[5][2] = { { 16, 8 }, { 8, 4 }, { 4, 2 }, { 2, 1 }, { 1, 1 } };
    for (unsigned i = 0; i < 5; i++) {
        CUarray l;
        OK(cuMipmappedArrayGetLevel(&l, m, i));
        CUDA_ARRAY3D_DESCRIPTOR g;
        OK(cuArray3DGetDescriptor(&g, l));
        cr_assert(g.Width == want[i][0] && g.Height == want[i][1], "level %u: %zux%zu", i, g.Width, g.Height);
        cr_assert_eq(cuArrayDestroy(l), CUDA_ERROR_INVALID_HANDLE);
    }
    CUarray l;
    cr_assert_eq(cuMipmappedArrayGetLevel(&l, m, 5), CUDA_ERROR_INVALID_VALUE);
    CUDA_ARRAY_MEMORY_REQUIREMENTS req;
    OK(cuMipmappedArrayGetMemoryRequirements(&req, m, 0));
    cr_assert(req.size >= (16 * 8 + 8 * 4 + 4 * 2 + 2 + 1) * 4 && req.alignment, "%zu", req.size);
    /* Level 0 through a texture object. */
    OK(cuMipmappedArrayGetLevel(&l, m, 0));
    float img[16 * 8];
    for (int i = 0; i < 16 * 8; i++)
        img[i] = (float)i;
    OK(cuMemcpyHtoA(l, 0, img, sizeof img));
    CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, .res.mipmap.hMipmappedArray = m };
    CUDA_TEXTURE_DESC t = { .addressMode = { CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP } };
    CUtexObject o;
    OK(cuTexObjectCreate(&o, &r, &t, NULL));
    float uv[2] = { 5.5f, 3.5f };
    CUdeviceptr duv = upload(uv, sizeof uv), dout = upload(NULL, 8);
    int n = 1;
    void *args[] = { &o, &duv, &dout, &n };
    OK(launch(fn("tex2d_lod_grad"), 1, 1, 32, args));
    float out[2];
    OK(cuMemcpyDtoH(out, dout, sizeof out));
    cr_assert(out[0] == 3 * 16 + 5 && out[1] == out[0], "%g %g", out[0], out[1]);
    OK(cuTexObjectDestroy(o));
    OK(cuMipmappedArrayDestroy(m));
    cr_assert_eq(cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFree(duv));
    OK(cuMemFree(dout));
}

Test(array, copies_round_trip)
{
    enum { W = 13, H = 7, D = 5 };
    CUarray a = array3d(W, H, D, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0);   /* 4-byte elements */
    uint32_t src[D][H][W], back[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                src[z][y][x] = (uint32_t)(z * 10000 + y * 100 + x);
    /* Host to array, whole box. */
    CUDA_MEMCPY3D up = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = W * 4, .srcHeight = H,
                         .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                         .WidthInBytes = W * 4, .Height = H, .Depth = D };
    OK(cuMemcpy3D(&up));
    /* Array to a pitched device buffer, a sub-box, on a stream. */
    size_t pitch = 64, rows = 9;
    CUdeviceptr dev = upload(NULL, pitch * rows * D);
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUDA_MEMCPY3D mid = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a, .srcXInBytes = 4, .srcY = 1, .srcZ = 1,
                          .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = pitch, .dstHeight = rows,
                          .WidthInBytes = (W - 2) * 4, .Height = H - 2, .Depth = D - 2 };
    OK(cuMemcpy3DAsync(&mid, s));
    OK(cuStreamSynchronize(s));
    uint8_t *host = malloc(pitch * rows * D);
    OK(cuMemcpyDtoH(host, dev, pitch * rows * D));
    for (int z = 0; z < D - 2; z++)
        for (int y = 0; y < H - 2; y++)
            for (int x = 0; x < W - 2; x++) {
                uint32_t v;
                memcpy(&v, host + z * pitch * rows + y * pitch + x * 4, 4);
                cr_assert_eq(v, src[z + 1][y + 1][x + 1], "(%d,%d,%d)", x, y, z);
            }
    /* Array to array (linear), array to host. */
    CUarray b = array3d(W, H, D, CU_AD_FORMAT_FLOAT, 1, 0);
    OK(cuMemcpyAtoA(b, 0, a, 0, sizeof src));
    OK(cuMemcpyAtoH(back, b, 0, sizeof back));
    cr_assert(memcmp(back, src, sizeof src) == 0);
    /* Device to array and back at an offset. */
    CUdeviceptr lin = upload(src, sizeof src);
    OK(cuMemsetD8(lin, 0, 40));
    OK(cuMemcpyDtoA(b, 40, lin + 40, sizeof src - 40));
    OK(cuMemcpyAtoD(lin, b, 0, sizeof src));
    OK(cuMemcpyDtoH(back, lin, sizeof back));
    cr_assert(memcmp((char *)back + 40, (char *)src + 40, sizeof src - 40) == 0);
    /* Async host copies. */
    memset(back, 0, sizeof back);
    OK(cuMemcpyHtoAAsync(b, 8, src, 64, s));
    OK(cuMemcpyAtoHAsync(back, b, 8, 64, s));
    OK(cuStreamSynchronize(s));
    cr_assert(memcmp(back, src, 64) == 0);
    /* 2-D copy of one slice into a 2-D array. */
    CUarray c = array3d(W, H, 0, CU_AD_FORMAT_SIGNED_INT32, 1, 0);
    CUDA_MEMCPY2D two = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src[2], .srcPitch = W * 4,
                          .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = c,
                          .WidthInBytes = W * 4, .Height = H };
    OK(cuMemcpy2D(&two));
    uint32_t slice[H][W];
    CUDA_MEMCPY2D down = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = c,
                           .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = slice, .dstPitch = W * 4,
                           .WidthInBytes = W * 4, .Height = H };
    OK(cuMemcpy2DAsync(&down, s));
    OK(cuStreamSynchronize(s));
    cr_assert(memcmp(slice, src[2], sizeof slice) == 0);

    /* Bounds against the array's extent. */
    cr_assert_eq(cuMemcpyAtoH(back, b, 8, sizeof src), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoA(b, sizeof src, src, 1), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D over = up;
    over.Depth = D + 1;
    cr_assert_eq(cuMemcpy3D(&over), CUDA_ERROR_INVALID_VALUE);
    over = up;
    over.dstXInBytes = 4;
    cr_assert_eq(cuMemcpy3D(&over), CUDA_ERROR_INVALID_VALUE);
    two.dstY = 1;
    cr_assert_eq(cuMemcpy2D(&two), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyAtoH(back, (CUarray)(uintptr_t)0x1234, 0, 4), CUDA_ERROR_INVALID_HANDLE);

    /* 3-D copies between linear memory (no arrays), through a peer copy. */
    CUDA_MEMCPY3D_PEER pp = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = W * 4,
                              .srcHeight = H, .srcContext = ctx, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                              .dstDevice = dev, .dstPitch = pitch, .dstHeight = rows, .dstContext = ctx,
                              .WidthInBytes = W * 4, .Height = H, .Depth = D };
    OK(cuMemcpy3DPeer(&pp));
    OK(cuMemcpyDtoH(host, dev, pitch * rows * D));
    uint32_t v;
    memcpy(&v, host + 4 * pitch * rows + 6 * pitch + 12 * 4, 4);
    cr_assert_eq(v, src[4][6][12]);

    OK(cuStreamDestroy(s));
    OK(cuArrayDestroy(a));
    OK(cuArrayDestroy(b));
    OK(cuArrayDestroy(c));
    OK(cuMemFree(dev));
    OK(cuMemFree(lin));
    free(host);
}

/* Every address mode, point and linear, normalized or not, on a 2-D float
 * texture, at coordinates inside and well outside. */
Test(array, tex2d_filter_and_address_modes)
{
    enum { W = 7, H = 5, N = 256 };
    float img[W * H];
    for (int i = 0; i < W * H; i++)
        img[i] = (float)((i * 37) % 23) - 4.5f;
    CUarray a = array3d(W, H, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    OK(cuMemcpyHtoA(a, 0, img, sizeof img));
    float uv[N][2];
    test_srand();
    CUdeviceptr duv = upload(NULL, sizeof uv), dout = upload(NULL, N * 4);
    CUfunction f = fn("tex2d_f1");
    CUaddress_mode modes[] = { CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_MIRROR,
                               CU_TR_ADDRESS_MODE_BORDER };
    for (int norm = 0; norm < 2; norm++) {
        for (int i = 0; i < N; i++)
            for (int k = 0; k < 2; k++) {
                float range = norm ? 3.0f : (k ? 3.0f * H : 3.0f * W);
                uv[i][k] = ((float)rand() / RAND_MAX) * range - range / 3;
            }
        OK(cuMemcpyHtoD(duv, uv, sizeof uv));
        for (int mi = 0; mi < 4; mi++)
            for (int lin = 0; lin < 2; lin++) {
                CUtexObject t = texobj(a, modes[mi], lin ? CU_TR_FILTER_MODE_LINEAR : CU_TR_FILTER_MODE_POINT,
                                       norm ? CU_TRSF_NORMALIZED_COORDINATES : 0);
                int n = N;
                void *args[] = { &t, &duv, &dout, &n };
                OK(launch(f, N / 64, 1, 64, args));
                float out[N];
                OK(cuMemcpyDtoH(out, dout, sizeof out));
                for (int i = 0; i < N; i++) {
                    float want = ref2(img, W, H, uv[i][0], uv[i][1], modes[mi], lin, norm);
                    cr_assert(fabsf(out[i] - want) <= 1e-4f * (1 + fabsf(want)),
                              "mode %d linear %d norm %d at (%g, %g): %g, want %g", mi, lin, norm, uv[i][0],
                              uv[i][1], out[i], want);
                }
                OK(cuTexObjectDestroy(t));
            }
    }
    OK(cuArrayDestroy(a));
    OK(cuMemFree(duv));
    OK(cuMemFree(dout));
}

/* 8-bit channels read as normalized floats or as elements, four channels. */
Test(array, tex2d_read_modes)
{
    enum { W = 4, H = 2 };
    uint8_t img[H][W][4];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 4; c++)
                img[y][x][c] = (uint8_t)(y * 100 + x * 30 + c * 7);
    CUarray a = array3d(W, H, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
    CUDA_MEMCPY2D up = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = W * 4,
                         .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .WidthInBytes = W * 4, .Height = H };
    OK(cuMemcpy2D(&up));
    float uv[W * H][2];
    for (int i = 0; i < W * H; i++) {
        uv[i][0] = (float)(i % W) + 0.5f;
        uv[i][1] = (float)(i / W) + 0.5f;
    }
    CUdeviceptr duv = upload(uv, sizeof uv), dout = upload(NULL, W * H * 16);
    int n = W * H;
    CUtexObject norm = texobj(a, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    void *args[] = { &norm, &duv, &dout, &n };
    OK(launch(fn("tex2d_f4"), 1, 1, 32, args));
    float f4[W * H][4];
    OK(cuMemcpyDtoH(f4, dout, sizeof f4));
    for (int i = 0; i < W * H; i++)
        for (int c = 0; c < 4; c++)
            cr_assert(fabsf(f4[i][c] - img[i / W][i % W][c] / 255.0f) < 1e-6f, "%d.%d: %g", i, c, f4[i][c]);
    CUtexObject elem = texobj(a, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, CU_TRSF_READ_AS_INTEGER);
    args[0] = &elem;
    OK(launch(fn("tex2d_uchar4"), 1, 1, 32, args));
    uint8_t u4[W * H][4];
    OK(cuMemcpyDtoH(u4, dout, sizeof u4));
    cr_assert(memcmp(u4, img, sizeof u4) == 0);
    /* The descriptors come back as given. */
    CUDA_TEXTURE_DESC td;
    OK(cuTexObjectGetTextureDesc(&td, elem));
    cr_assert(td.flags == CU_TRSF_READ_AS_INTEGER && td.addressMode[1] == CU_TR_ADDRESS_MODE_CLAMP);
    CUDA_RESOURCE_DESC rd;
    OK(cuTexObjectGetResourceDesc(&rd, elem));
    cr_assert(rd.resType == CU_RESOURCE_TYPE_ARRAY && rd.res.array.hArray == a);
    CUDA_RESOURCE_VIEW_DESC vd;
    cr_assert_eq(cuTexObjectGetResourceViewDesc(&vd, elem), CUDA_ERROR_INVALID_VALUE);
    OK(cuTexObjectDestroy(norm));
    OK(cuTexObjectDestroy(elem));
    cr_assert_eq(cuTexObjectDestroy(elem), CUDA_ERROR_INVALID_HANDLE);
    OK(cuArrayDestroy(a));
    OK(cuMemFree(duv));
    OK(cuMemFree(dout));
}

/* Linear and pitched memory: tex1Dfetch (zero outside), tex1D, tex2D. */
Test(array, tex_linear_and_pitch2d)
{
    enum { N = 40 };
    float v[N];
    int iv[N];
    for (int i = 0; i < N; i++) {
        v[i] = (float)i * 1.25f;
        iv[i] = i * 3 - 7;
    }
    CUdeviceptr dv = upload(v, sizeof v), div = upload(iv, sizeof iv), dout = upload(NULL, N * 4);
    CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_LINEAR,
                             .res.linear = { .devPtr = dv, .format = CU_AD_FORMAT_FLOAT, .numChannels = 1,
                                             .sizeInBytes = sizeof v } };
    CUDA_TEXTURE_DESC t = { .filterMode = CU_TR_FILTER_MODE_POINT };
    CUtexObject o;
    OK(cuTexObjectCreate(&o, &r, &t, NULL));
    int n = N;
    void *args[] = { &o, &dout, &n };
    OK(launch(fn("tex1d_fetch"), 1, 1, 64, args));
    float out[N];
    OK(cuMemcpyDtoH(out, dout, sizeof out));
    cr_assert(memcmp(out, v, sizeof v) == 0);
    OK(cuTexObjectDestroy(o));
    r.res.linear.devPtr = div;
    r.res.linear.format = CU_AD_FORMAT_SIGNED_INT32;
    t.flags = CU_TRSF_READ_AS_INTEGER;
    OK(cuTexObjectCreate(&o, &r, &t, NULL));
    OK(launch(fn("tex1d_fetch_int"), 1, 1, 64, args));
    int iout[N];
    OK(cuMemcpyDtoH(iout, dout, sizeof iout));
    for (int i = 0; i < N; i++)
        cr_assert_eq(iout[i], i >= 2 ? iv[i - 2] : 0, "%d", i);
    OK(cuTexObjectDestroy(o));
    r.res.linear.sizeInBytes = 1 << 20;   /* past the allocation */
    cr_assert_eq(cuTexObjectCreate(&o, &r, &t, NULL), CUDA_ERROR_INVALID_VALUE);

    /* Pitch2D, linear filtering, unnormalized. */
    enum { W = 5, H = 3, P = 32 };
    float img[H][P / 4];
    memset(img, 0, sizeof img);
    float dense[W * H];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            dense[y * W + x] = img[y][x] = (float)(x * x + 3 * y);
    CUdeviceptr dp = upload(img, sizeof img);
    CUDA_RESOURCE_DESC pr = { .resType = CU_RESOURCE_TYPE_PITCH2D,
                              .res.pitch2D = { .devPtr = dp, .format = CU_AD_FORMAT_FLOAT, .numChannels = 1,
                                               .width = W, .height = H, .pitchInBytes = P } };
    CUDA_TEXTURE_DESC pt = { .addressMode = { CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_CLAMP },
                             .filterMode = CU_TR_FILTER_MODE_LINEAR };
    OK(cuTexObjectCreate(&o, &pr, &pt, NULL));
    float uv[4][2] = { { 0.5f, 0.5f }, { 1.75f, 1.25f }, { 4.5f, 2.5f }, { 3.1f, 0.9f } };
    CUdeviceptr duv = upload(uv, sizeof uv);
    n = 4;
    void *a2[] = { &o, &duv, &dout, &n };
    OK(launch(fn("tex2d_f1"), 1, 1, 32, a2));
    OK(cuMemcpyDtoH(out, dout, 16));
    for (int i = 0; i < 4; i++) {
        float want = ref2(dense, W, H, uv[i][0], uv[i][1], CU_TR_ADDRESS_MODE_CLAMP, true, false);
        cr_assert(fabsf(out[i] - want) < 1e-4f, "%d: %g want %g", i, out[i], want);
    }
    OK(cuTexObjectDestroy(o));
    OK(cuMemFree(dv));
    OK(cuMemFree(div));
    OK(cuMemFree(dout));
    OK(cuMemFree(dp));
    OK(cuMemFree(duv));
}

/* 1-D arrays with tex1D, 3-D with tex3D, layered 1-D and 2-D, cubemaps. */
Test(array, tex_geometries)
{
    enum { W = 6, H = 4, D = 3 };
    float img[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                img[z][y][x] = (float)(z * 100 + y * 10 + x);
    CUdeviceptr dout = upload(NULL, 64 * 4), din = upload(NULL, 64 * 16);
    float out[64];
    int n;

    CUarray a3 = array3d(W, H, D, CU_AD_FORMAT_FLOAT, 1, 0);
    CUDA_MEMCPY3D up = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = W * 4, .srcHeight = H,
                         .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a3, .WidthInBytes = W * 4, .Height = H,
                         .Depth = D };
    OK(cuMemcpy3D(&up));
    CUtexObject t3 = texobj(a3, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    float p3[3][4] = { { 2.5f, 1.5f, 1.5f, 0 }, { 3.0f, 2.5f, 2.0f, 0 }, { 0.0f, 0.0f, 9.0f, 0 } };
    OK(cuMemcpyHtoD(din, p3, sizeof p3));
    n = 3;
    void *args[] = { &t3, &din, &dout, &n };
    OK(launch(fn("tex3d_f"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 12));
    cr_assert(fabsf(out[0] - 112) < 1e-4f, "%g", out[0]);
    cr_assert(fabsf(out[1] - (150 + 20 + 2.5f)) < 1e-4f, "%g", out[1]);
    cr_assert(fabsf(out[2] - 200) < 1e-4f, "%g", out[2]);

    /* The 3-D array's slices as layers of a 2-D layered array. */
    CUarray l2 = array3d(W, H, D, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
    up.dstArray = l2;
    OK(cuMemcpy3D(&up));
    CUtexObject tl2 = texobj(l2, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float pl2[3][4] = { { 2.5f, 1.5f, 2, 0 }, { 5.5f, 3.5f, 0, 0 }, { 0.5f, 0.5f, 1, 0 } };
    OK(cuMemcpyHtoD(din, pl2, sizeof pl2));
    args[0] = &tl2;
    OK(launch(fn("tex2d_layered"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 12));
    cr_assert(out[0] == 212 && out[1] == 35 && out[2] == 100, "%g %g %g", out[0], out[1], out[2]);

    /* A 1-D layered array of W x 3 layers: the first row of each slice. */
    CUarray l1 = array3d(W, 0, D, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
    float rows[D][W];
    for (int z = 0; z < D; z++)
        memcpy(rows[z], img[z][0], sizeof rows[z]);
    CUDA_MEMCPY3D up1 = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = rows, .srcPitch = W * 4, .srcHeight = 1,
                          .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = l1, .WidthInBytes = W * 4, .Height = 1,
                          .Depth = D };
    OK(cuMemcpy3D(&up1));
    CUtexObject tl1 = texobj(l1, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    float pl1[2][2] = { { 2.0f, 1 }, { 4.5f, 2 } };
    OK(cuMemcpyHtoD(din, pl1, sizeof pl1));
    n = 2;
    args[0] = &tl1;
    OK(launch(fn("tex1d_layered"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 8));
    cr_assert(fabsf(out[0] - 101.5f) < 1e-4f && fabsf(out[1] - 204) < 1e-4f, "%g %g", out[0], out[1]);

    /* 1-D array, normalized wrap, tex1D. */
    CUarray a1 = array3d(W, 0, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    OK(cuMemcpyHtoA(a1, 0, img[0][0], W * 4));
    CUtexObject t1 = texobj(a1, CU_TR_ADDRESS_MODE_WRAP, CU_TR_FILTER_MODE_POINT, CU_TRSF_NORMALIZED_COORDINATES);
    float u1[3] = { 0.1f, 1.55f, -0.1f };   /* x 0, 3, 5 */
    OK(cuMemcpyHtoD(din, u1, sizeof u1));
    n = 3;
    args[0] = &t1;
    OK(launch(fn("tex1d_f"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 12));
    cr_assert(out[0] == 0 && out[1] == 3 && out[2] == 5, "%g %g %g", out[0], out[1], out[2]);

    /* A cubemap whose faces hold their index: each axis picks its face. */
    enum { C = 4 };
    float cube[6][C][C];
    for (int f = 0; f < 6; f++)
        for (int i = 0; i < C * C; i++)
            cube[f][i / C][i % C] = (float)(f * 1000 + i);
    CUarray ac = array3d(C, C, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP);
    CUDA_MEMCPY3D upc = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = cube, .srcPitch = C * 4, .srcHeight = C,
                          .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = ac, .WidthInBytes = C * 4, .Height = C,
                          .Depth = 6 };
    OK(cuMemcpy3D(&upc));
    CUtexObject tc = texobj(ac, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, CU_TRSF_NORMALIZED_COORDINATES);
    float dirs[6][4] = { { 1, 0.1f, 0.1f, 0 }, { -1, 0.1f, 0.1f, 0 }, { 0.1f, 1, 0.1f, 0 },
                         { 0.1f, -1, 0.1f, 0 }, { 0.1f, 0.1f, 1, 0 }, { 0.1f, 0.1f, -1, 0 } };
    OK(cuMemcpyHtoD(din, dirs, sizeof dirs));
    n = 6;
    args[0] = &tc;
    OK(launch(fn("tex_cube"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 24));
    for (int f = 0; f < 6; f++)
        cr_assert(out[f] >= f * 1000 && out[f] < f * 1000 + C * C, "face %d: %g", f, out[f]);
    /* +x at (1, -0.5, 0.5): sc = -z = -0.5, tc = -y = 0.5 -> s 0.25, t 0.75. */
    float d1[4] = { 1, -0.5f, 0.5f, 0 };
    OK(cuMemcpyHtoD(din, d1, sizeof d1));
    n = 1;
    OK(launch(fn("tex_cube"), 1, 1, 32, args));
    OK(cuMemcpyDtoH(out, dout, 4));
    cr_assert_eq(out[0], cube[0][3][1], "%g", out[0]);

    OK(cuTexObjectDestroy(t3));
    OK(cuTexObjectDestroy(tl2));
    OK(cuTexObjectDestroy(tl1));
    OK(cuTexObjectDestroy(t1));
    OK(cuTexObjectDestroy(tc));
    OK(cuArrayDestroy(a3));
    OK(cuArrayDestroy(l2));
    OK(cuArrayDestroy(l1));
    OK(cuArrayDestroy(a1));
    OK(cuArrayDestroy(ac));
    OK(cuMemFree(din));
    OK(cuMemFree(dout));
}

Test(array, tld4_gather)
{
    enum { W = 4, H = 4 };
    float img[W * H][2];
    for (int i = 0; i < W * H; i++) {
        img[i][0] = (float)i;
        img[i][1] = (float)(100 + i);
    }
    CUarray a = array3d(W, H, 0, CU_AD_FORMAT_FLOAT, 2, 0);
    OK(cuMemcpyHtoA(a, 0, img, sizeof img));
    CUtexObject t = texobj(a, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float uv[2] = { 2.0f, 1.0f };   /* footprint x 1..2, y 0..1 */
    CUdeviceptr duv = upload(uv, sizeof uv), dout = upload(NULL, 16);
    int n = 1;
    void *args[] = { &t, &duv, &dout, &n };
    OK(launch(fn("tex2d_gather"), 1, 1, 32, args));
    float out[4];
    OK(cuMemcpyDtoH(out, dout, sizeof out));
    /* component 1 of (1,1), (2,1), (2,0), (1,0) */
    cr_assert(out[0] == 105 && out[1] == 106 && out[2] == 102 && out[3] == 101, "%g %g %g %g", out[0], out[1],
              out[2], out[3]);
    OK(cuTexObjectDestroy(t));
    OK(cuArrayDestroy(a));
    OK(cuMemFree(duv));
    OK(cuMemFree(dout));
}

Test(array, surfaces)
{
    enum { W = 40, H = 3 };
    float img[H][W];
    for (int i = 0; i < W * H; i++)
        img[i / W][i % W] = (float)i;
    CUarray a = array3d(W, H, 0, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_SURFACE_LDST);
    OK(cuMemcpyHtoA(a, 0, img, sizeof img));
    CUsurfObject s = surfobj(a);
    int w = W, h = H;
    float k = -2;
    void *args[] = { &s, &w, &h, &k };
    OK(launch(fn("surf2d_scale"), 2, H, 32, args));
    float back[H][W];
    OK(cuMemcpyAtoH(back, a, 0, sizeof back));
    for (int i = 0; i < W * H; i++)
        cr_assert_eq(back[i / W][i % W], -2.0f * i);
    CUDA_RESOURCE_DESC rd;
    OK(cuSurfObjectGetResourceDesc(&rd, s));
    cr_assert(rd.resType == CU_RESOURCE_TYPE_ARRAY && rd.res.array.hArray == a);

    /* A surface needs an array made for it. */
    CUarray plain = array3d(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    CUDA_RESOURCE_DESC pr = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = plain };
    CUsurfObject bad;
    cr_assert_eq(cuSurfObjectCreate(&bad, &pr), CUDA_ERROR_INVALID_VALUE);
    OK(cuArrayDestroy(plain));

    /* A read outside a trapping surface fails the launch. */
    CUdeviceptr dout = upload(NULL, 64 * 4);
    int x = W;
    void *targs[] = { &s, &x, &dout };
    cr_assert_eq(launch(fn("surf2d_trap"), 1, 1, 1, targs), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(a));
    OK(cuMemFree(dout));

}

Test(array, surface_modes_and_geometries)
{
    /* uchar4 surface 4 x 2: clamp reads, zero writes. */
    enum { W = 4 };
    uint8_t img[2][W][4];
    for (int i = 0; i < 2 * W * 4; i++)
        ((uint8_t *)img)[i] = (uint8_t)i;
    CUarray a = array3d(W, 2, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, CUDA_ARRAY3D_SURFACE_LDST);
    OK(cuMemcpyHtoA(a, 0, img, sizeof img));
    CUsurfObject s = surfobj(a);
    CUdeviceptr dout = upload(NULL, 64 * 4);
    int w = W;
    void *args[] = { &s, &w, &dout };
    OK(launch(fn("surf2d_modes"), 1, 1, W + 4, args));
    uint8_t out[W + 4][4], back[2][W][4];
    OK(cuMemcpyDtoH(out, dout, sizeof out));
    OK(cuMemcpyAtoH(back, a, 0, sizeof back));
    for (int t = 0; t < W + 4; t++) {
        int x = t - 2 < 0 ? 0 : t - 2 >= W ? W - 1 : t - 2;
        cr_assert(memcmp(out[t], img[0][x], 4) == 0, "thread %d", t);
    }
    for (int x = 0; x < W; x++)
        cr_assert(back[1][x][0] == (uint8_t)(img[0][x][0] + 1) && back[1][x][1] == img[0][x][1], "x %d", x);
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(a));

    /* 1-D short surface. */
    short sv[10];
    for (int i = 0; i < 10; i++)
        sv[i] = (short)(i * -5);
    CUarray a1 = array3d(10, 0, 0, CU_AD_FORMAT_SIGNED_INT16, 1, CUDA_ARRAY3D_SURFACE_LDST);
    OK(cuMemcpyHtoA(a1, 0, sv, sizeof sv));
    s = surfobj(a1);
    int n = 10;
    void *a1args[] = { &s, &n };
    OK(launch(fn("surf1d_inc"), 1, 1, 10, a1args));
    short sb[10];
    OK(cuMemcpyAtoH(sb, a1, 0, sizeof sb));
    for (int i = 0; i < 10; i++)
        cr_assert_eq(sb[i], i * -5 + 1);
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(a1));

    /* 3-D float4 surface: slice 1 from slice 0. */
    CUarray a3 = array3d(3, 2, 2, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SURFACE_LDST);
    float v3[2][2][3][4];
    for (int i = 0; i < 2 * 2 * 3 * 4; i++)
        ((float *)v3)[i] = (float)i;
    OK(cuMemcpyHtoA(a3, 0, v3, sizeof v3));
    s = surfobj(a3);
    int z = 0;
    void *a3args[] = { &s, &z };
    OK(launch(fn("surf3d_next"), 2, 1, 3, a3args));
    float b3[2][2][3][4];
    OK(cuMemcpyAtoH(b3, a3, 0, sizeof b3));
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++) {
            cr_assert_eq(b3[1][y][x][0], v3[0][y][x][0] + x);
            cr_assert_eq(b3[1][y][x][1], v3[0][y][x][1] + y);
            cr_assert_eq(b3[1][y][x][3], v3[0][y][x][3] + 1);
        }
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(a3));

    /* Layered surfaces, 1-D float2 and 2-D int. */
    CUarray l1 = array3d(5, 0, 2, CU_AD_FORMAT_FLOAT, 2, CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_LAYERED);
    float vl1[2][5][2];
    for (int i = 0; i < 20; i++)
        ((float *)vl1)[i] = (float)i + 0.5f;
    OK(cuMemcpyHtoA(l1, 0, vl1, sizeof vl1));
    s = surfobj(l1);
    int l = 0;
    void *largs[] = { &s, &l };
    OK(launch(fn("surf1d_layered"), 1, 1, 5, largs));
    float bl1[2][5][2];
    OK(cuMemcpyAtoH(bl1, l1, 0, sizeof bl1));
    for (int x = 0; x < 5; x++)
        cr_assert(bl1[1][x][0] == 2 * vl1[0][x][0] && bl1[1][x][1] == 2 * vl1[0][x][1]);
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(l1));

    CUarray l2 = array3d(4, 3, 3, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_LAYERED);
    int vl2[3][3][4];
    for (int i = 0; i < 36; i++)
        ((int *)vl2)[i] = i - 10;
    OK(cuMemcpyHtoA(l2, 0, vl2, sizeof vl2));
    s = surfobj(l2);
    l = 1;
    OK(launch(fn("surf2d_layered"), 3, 1, 4, largs));
    int bl2[3][3][4];
    OK(cuMemcpyAtoH(bl2, l2, 0, sizeof bl2));
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++)
            cr_assert_eq(bl2[2][y][x], 3 * vl2[1][y][x]);
    cr_assert(memcmp(bl2[0], vl2[0], sizeof bl2[0]) == 0);
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(l2));
    OK(cuMemFree(dout));
}

Test(array, bad_objects)
{
    CUDA_RESOURCE_DESC r = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = (CUarray)(uintptr_t)0x10 };
    CUDA_TEXTURE_DESC t = { 0 };
    CUtexObject o;
    cr_assert_eq(cuTexObjectCreate(&o, &r, &t, NULL), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuTexObjectCreate(&o, NULL, &t, NULL), CUDA_ERROR_INVALID_VALUE);
    CUarray a = array3d(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    r.res.array.hArray = a;
    t.flags = CU_TRSF_SRGB;
    cr_assert_eq(cuTexObjectCreate(&o, &r, &t, NULL), CUDA_ERROR_NOT_SUPPORTED);
    t.flags = 0;
    t.addressMode[0] = (CUaddress_mode)9;
    cr_assert_eq(cuTexObjectCreate(&o, &r, &t, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexObjectDestroy(12345), CUDA_ERROR_INVALID_HANDLE);
    cr_assert_eq(cuSurfObjectDestroy(0), CUDA_ERROR_INVALID_HANDLE);
    /* A kernel given a handle that names nothing fails, it does not crash. */
    CUdeviceptr duv = upload(NULL, 64), dout = upload(NULL, 64);
    CUtexObject junk = 0xdead0000;
    int n = 1;
    void *args[] = { &junk, &duv, &dout, &n };
    cr_assert_eq(launch(fn("tex2d_f1"), 1, 1, 1, args), CUDA_ERROR_ILLEGAL_ADDRESS);
    OK(cuArrayDestroy(a));
}

/* txq, suq and sust.p, which nvcc emits for no runtime intrinsic: PTX by hand. */
static const char query_ptx[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry q(.param .u64 q_t, .param .u64 q_s, .param .u64 q_out)\n{\n"
    ".reg .b32 %r<12>;\n.reg .b64 %rd<4>;\n.reg .f32 %f<4>;\n"
    "ld.param.u64 %rd1, [q_t];\nld.param.u64 %rd2, [q_s];\nld.param.u64 %rd3, [q_out];\n"
    "txq.width.b32 %r1, [%rd1];\ntxq.height.b32 %r2, [%rd1];\ntxq.depth.b32 %r3, [%rd1];\n"
    "txq.array_size.b32 %r4, [%rd1];\ntxq.normalized_coords.b32 %r5, [%rd1];\n"
    "txq.filter_mode.b32 %r6, [%rd1];\nsuq.width.b32 %r7, [%rd2];\nsuq.height.b32 %r8, [%rd2];\n"
    "suq.array_size.b32 %r9, [%rd2];\n"
    "st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};\nst.global.v4.u32 [%rd3+16], {%r5, %r6, %r7, %r8};\n"
    "st.global.u32 [%rd3+32], %r9;\n"
    "mov.f32 %f1, 0f3F000000;\nmov.f32 %f2, 0fBF800000;\nmov.b32 %r10, 1;\nmov.b32 %r11, 0;\n"
    "sust.p.a2d.v2.b32.trap [%rd2, {%r10, %r10, %r11, %r11}], {%f1, %f2};\n"
    "ret;\n}\n";

Test(array, queries_and_formatted_stores)
{
    CUmodule qm;
    OK(cuModuleLoadData(&qm, query_ptx));
    CUfunction q;
    OK(cuModuleGetFunction(&q, qm, "q"));
    CUarray a = array3d(4, 3, 2, CU_AD_FORMAT_SNORM_INT8X2, 2, CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_LAYERED);
    CUtexObject t = texobj(a, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, CU_TRSF_NORMALIZED_COORDINATES);
    CUsurfObject s = surfobj(a);
    CUdeviceptr dout = upload(NULL, 64);
    void *args[] = { &t, &s, &dout };
    OK(launch(q, 1, 1, 1, args));
    uint32_t out[9];
    OK(cuMemcpyDtoH(out, dout, sizeof out));
    uint32_t want[9] = { 4, 3, 1, 2, 1, CU_TR_FILTER_MODE_LINEAR, 4, 3, 2 };
    for (int i = 0; i < 9; i++)
        cr_assert_eq(out[i], want[i], "query %d: %u", i, out[i]);
    int8_t bytes[2 * 3 * 4 * 2];
    OK(cuMemcpyAtoH(bytes, a, 0, sizeof bytes));
    /* layer 1, row 0, element 1: 0.5 and -1 as SNORM8. */
    cr_assert(bytes[24 + 2] == 64 && bytes[24 + 3] == -127, "%d %d", bytes[26], bytes[27]);
    OK(cuTexObjectDestroy(t));
    OK(cuSurfObjectDestroy(s));
    OK(cuArrayDestroy(a));
    OK(cuModuleUnload(qm));
    OK(cuMemFree(dout));
}

/* Array copies captured into a graph run when the graph does. */
Test(array, captured_array_copies)
{
    enum { W = 16, H = 4 };
    int v[H][W], back[H][W];
    for (int i = 0; i < W * H; i++)
        ((int *)v)[i] = i * 7 - 3;
    CUdeviceptr src = upload(v, sizeof v), dst = upload(NULL, sizeof v);
    CUarray a = array3d(W, H, 0, CU_AD_FORMAT_SIGNED_INT32, 1, 0);
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUDA_MEMCPY3D in = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = src, .srcPitch = W * 4,
                         .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                         .WidthInBytes = W * 4, .Height = H, .Depth = 1 };
    CUDA_MEMCPY3D out = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a, .srcY = 1,
                          .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dst, .dstPitch = W * 4,
                          .WidthInBytes = W * 4, .Height = H - 1, .Depth = 1 };
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemcpy3DAsync(&in, s));
    OK(cuMemcpy3DAsync(&out, s));
    CUgraph g;
    OK(cuStreamEndCapture(s, &g));
    CUgraphExec ge;
    OK(cuGraphInstantiate(&ge, g, 0));
    OK(cuGraphLaunch(ge, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(back, dst, sizeof back));
    cr_assert(memcmp(back, v[1], sizeof v[1] * (H - 1)) == 0);
    OK(cuGraphExecDestroy(ge));
    OK(cuGraphDestroy(g));
    OK(cuStreamDestroy(s));
    OK(cuArrayDestroy(a));
    OK(cuMemFree(src));
    OK(cuMemFree(dst));
}
