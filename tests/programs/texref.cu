// A driver-API program of the CUDA 11 era: its PTX (written by hand, as
// nvcc 13 no longer emits references) declares texture and surface
// references; the host binds them with cuModuleGetTexRef/SurfRef and the
// cuTexRef*/cuSurfRef* calls to a 2-D array (linear filtering), linear
// memory (tex1Dfetch), pitched memory and a surface array, launches, and
// checks every result against the CPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>

// References are deprecated, and used here on purpose.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static const char ptx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".global .texref img;\n"
    ".global .texref lin;\n"
    ".global .texref pit;\n"
    ".global .surfref surf;\n"
    "\n"
    // out[y * w + x] = tex2D(img, x / 2 + 0.25, y / 2 + 0.25)
    ".visible .entry sample2d(.param .u64 p_out, .param .u32 p_w)\n"
    "{\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<10>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  ld.param.u32 %r1, [p_w];\n"
    "  mov.u32 %r2, %tid.x;\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  cvt.rn.f32.u32 %f1, %r2;\n"
    "  cvt.rn.f32.u32 %f2, %r3;\n"
    "  fma.rn.f32 %f3, %f1, 0f3F000000, 0f3E800000;\n"
    "  fma.rn.f32 %f4, %f2, 0f3F000000, 0f3E800000;\n"
    "  tex.2d.v4.f32.f32 {%f5, %f6, %f7, %f8}, [img, {%f3, %f4}];\n"
    "  mad.lo.u32 %r4, %r3, %r1, %r2;\n"
    "  mul.wide.u32 %rd2, %r4, 4;\n"
    "  add.s64 %rd3, %rd1, %rd2;\n"
    "  st.global.f32 [%rd3], %f5;\n"
    "  ret;\n"
    "}\n"
    "\n"
    // out[i] = tex1Dfetch(lin, i)
    ".visible .entry fetch1d(.param .u64 p_out)\n"
    "{\n"
    "  .reg .b32 %r<10>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  mov.u32 %r3, %ntid.x;\n"
    "  mad.lo.u32 %r4, %r2, %r3, %r1;\n"
    "  tex.1d.v4.s32.s32 {%r5, %r6, %r7, %r8}, [lin, {%r4}];\n"
    "  mul.wide.u32 %rd2, %r4, 4;\n"
    "  add.s64 %rd3, %rd1, %rd2;\n"
    "  st.global.u32 [%rd3], %r5;\n"
    "  ret;\n"
    "}\n"
    "\n"
    // out[y * w + x] = tex2D(pit, x + 0.5, y + 0.5), point sampled
    ".visible .entry pitched(.param .u64 p_out, .param .u32 p_w)\n"
    "{\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<10>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  cvta.to.global.u64 %rd1, %rd1;\n"
    "  ld.param.u32 %r1, [p_w];\n"
    "  mov.u32 %r2, %tid.x;\n"
    "  mov.u32 %r3, %ctaid.x;\n"
    "  cvt.rn.f32.u32 %f1, %r2;\n"
    "  cvt.rn.f32.u32 %f2, %r3;\n"
    "  add.f32 %f3, %f1, 0f3F000000;\n"
    "  add.f32 %f4, %f2, 0f3F000000;\n"
    "  tex.2d.v4.f32.f32 {%f5, %f6, %f7, %f8}, [pit, {%f3, %f4}];\n"
    "  mad.lo.u32 %r4, %r3, %r1, %r2;\n"
    "  mul.wide.u32 %rd2, %r4, 4;\n"
    "  add.s64 %rd3, %rd1, %rd2;\n"
    "  st.global.f32 [%rd3], %f5;\n"
    "  ret;\n"
    "}\n"
    "\n"
    // surf(x, y) = surf(x, y) * 2 + x (x in bytes for suld.b / sust.b)
    ".visible .entry surf_update()\n"
    "{\n"
    "  .reg .b32 %r<8>;\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  shl.b32 %r3, %r1, 2;\n"
    "  suld.b.2d.b32.trap {%r4}, [surf, {%r3, %r2}];\n"
    "  shl.b32 %r5, %r4, 1;\n"
    "  add.s32 %r6, %r5, %r1;\n"
    "  sust.b.2d.b32.trap [surf, {%r3, %r2}], {%r6};\n"
    "  ret;\n"
    "}\n";

#define CHECK(call)                                                                   \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            const char *name_ = "?";                                                  \
            cuGetErrorName(r_, &name_);                                               \
            printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, name_);              \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

// Bilinear sample at unnormalized (u, v), addresses clamped.
static float bilinear(const float *t, int w, int h, float u, float v)
{
    float x = u - 0.5f, y = v - 0.5f;
    int i = (int)floorf(x), j = (int)floorf(y);
    float a = x - i, b = y - j;
    auto at = [&](int X, int Y) {
        X = X < 0 ? 0 : X >= w ? w - 1 : X;
        Y = Y < 0 ? 0 : Y >= h ? h - 1 : Y;
        return t[Y * w + X];
    };
    return (1 - a) * (1 - b) * at(i, j) + a * (1 - b) * at(i + 1, j) + (1 - a) * b * at(i, j + 1) +
           a * b * at(i + 1, j + 1);
}

int main()
{
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, ptx));
    CUfunction sample2d, fetch1d, pitched, surf_update;
    CHECK(cuModuleGetFunction(&sample2d, mod, "sample2d"));
    CHECK(cuModuleGetFunction(&fetch1d, mod, "fetch1d"));
    CHECK(cuModuleGetFunction(&pitched, mod, "pitched"));
    CHECK(cuModuleGetFunction(&surf_update, mod, "surf_update"));
    CUtexref img, lin, pit;
    CUsurfref surf;
    CHECK(cuModuleGetTexRef(&img, mod, "img"));
    CHECK(cuModuleGetTexRef(&lin, mod, "lin"));
    CHECK(cuModuleGetTexRef(&pit, mod, "pit"));
    CHECK(cuModuleGetSurfRef(&surf, mod, "surf"));
    CUtexref again;
    CHECK(cuModuleGetTexRef(&again, mod, "img"));
    EXPECT(again == img);

    // A float 2-D array, linearly filtered.
    const int W = 19, H = 13, OW = 2 * W + 3, OH = 2 * H + 1;
    float t[W * H], maxabs = 0;
    for (int i = 0; i < W * H; i++) {
        t[i] = (float)((i * 37) % 101) / 10.0f - 5.0f;
        maxabs = fmaxf(maxabs, fabsf(t[i]));
    }
    CUDA_ARRAY_DESCRIPTOR ad = {};
    ad.Width = W;
    ad.Height = H;
    ad.Format = CU_AD_FORMAT_FLOAT;
    ad.NumChannels = 1;
    CUarray arr;
    CHECK(cuArrayCreate(&arr, &ad));
    CUDA_MEMCPY2D up = {};
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = t;
    up.srcPitch = W * sizeof(float);
    up.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    up.dstArray = arr;
    up.WidthInBytes = W * sizeof(float);
    up.Height = H;
    CHECK(cuMemcpy2D(&up));
    CHECK(cuTexRefSetArray(img, arr, CU_TRSA_OVERRIDE_FORMAT));
    CHECK(cuTexRefSetFilterMode(img, CU_TR_FILTER_MODE_LINEAR));
    CHECK(cuTexRefSetAddressMode(img, 0, CU_TR_ADDRESS_MODE_CLAMP));
    CHECK(cuTexRefSetAddressMode(img, 1, CU_TR_ADDRESS_MODE_CLAMP));
    CHECK(cuTexRefSetFlags(img, 0));
    float border[4] = { 0.5f, 1.5f, 2.5f, 3.5f }, border_back[4];
    CHECK(cuTexRefSetBorderColor(img, border));
    CHECK(cuTexRefGetBorderColor(border_back, img));
    EXPECT(memcmp(border, border_back, sizeof border) == 0);
    CHECK(cuParamSetTexRef(sample2d, CU_PARAM_TR_DEFAULT, img));
    CUfilter_mode fm;
    CUaddress_mode am;
    CUarray_format fmt;
    int channels;
    unsigned flags;
    CUarray arr_back;
    CHECK(cuTexRefGetFilterMode(&fm, img));
    CHECK(cuTexRefGetAddressMode(&am, img, 1));
    CHECK(cuTexRefGetFormat(&fmt, &channels, img));
    CHECK(cuTexRefGetFlags(&flags, img));
    CHECK(cuTexRefGetArray(&arr_back, img));
    EXPECT(fm == CU_TR_FILTER_MODE_LINEAR && am == CU_TR_ADDRESS_MODE_CLAMP);
    EXPECT(fmt == CU_AD_FORMAT_FLOAT && channels == 1 && flags == 0 && arr_back == arr);

    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, OW * OH * sizeof(float)));
    unsigned ow = OW;
    void *sargs[] = { &out, &ow };
    CHECK(cuLaunchKernel(sample2d, OH, 1, 1, OW, 1, 1, 0, NULL, sargs, NULL));
    float got[OW * OH];
    CHECK(cuMemcpyDtoH(got, out, sizeof got));
    // A GPU filters with 8-bit fixed-point weights: within 1/128 of the range.
    for (int y = 0; y < OH; y++)
        for (int x = 0; x < OW; x++) {
            float want = bilinear(t, W, H, x * 0.5f + 0.25f, y * 0.5f + 0.25f);
            if (fabsf(got[y * OW + x] - want) > maxabs / 128) {
                printf("texref: tex2D at (%d, %d): %g, want %g\n", x, y, got[y * OW + x], want);
                return 1;
            }
        }

    // Linear memory: tex1Dfetch, zero past the end.
    const int N = 300, T = 320;
    int v[N];
    for (int i = 0; i < N; i++)
        v[i] = i * 7 - 1000;
    CUdeviceptr dv, dout;
    CHECK(cuMemAlloc(&dv, sizeof v));
    CHECK(cuMemAlloc(&dout, T * sizeof(int)));
    CHECK(cuMemcpyHtoD(dv, v, sizeof v));
    CHECK(cuTexRefSetFormat(lin, CU_AD_FORMAT_SIGNED_INT32, 1));
    size_t offset = 1;
    CHECK(cuTexRefSetAddress(&offset, lin, dv, sizeof v));
    EXPECT(offset == 0);
    CUdeviceptr dv_back;
    CHECK(cuTexRefGetAddress(&dv_back, lin));
    EXPECT(dv_back == dv);
    void *fargs[] = { &dout };
    CHECK(cuLaunchKernel(fetch1d, T / 64, 1, 1, 64, 1, 1, 0, NULL, fargs, NULL));
    int vgot[T];
    CHECK(cuMemcpyDtoH(vgot, dout, sizeof vgot));
    for (int i = 0; i < T; i++)
        if (vgot[i] != (i < N ? v[i] : 0)) {
            printf("texref: tex1Dfetch(%d): %d, want %d\n", i, vgot[i], i < N ? v[i] : 0);
            return 1;
        }

    // Pitched memory, point sampled.
    const int PW = 24, PH = 10;
    float p[PW * PH];
    for (int i = 0; i < PW * PH; i++)
        p[i] = (float)(i % 29) * 0.25f;
    CUdeviceptr dp;
    size_t pitch;
    CHECK(cuMemAllocPitch(&dp, &pitch, PW * sizeof(float), PH, 4));
    CUDA_MEMCPY2D pu = {};
    pu.srcMemoryType = CU_MEMORYTYPE_HOST;
    pu.srcHost = p;
    pu.srcPitch = PW * sizeof(float);
    pu.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    pu.dstDevice = dp;
    pu.dstPitch = pitch;
    pu.WidthInBytes = PW * sizeof(float);
    pu.Height = PH;
    CHECK(cuMemcpy2D(&pu));
    CUDA_ARRAY_DESCRIPTOR pd = {};
    pd.Width = PW;
    pd.Height = PH;
    pd.Format = CU_AD_FORMAT_FLOAT;
    pd.NumChannels = 1;
    CHECK(cuTexRefSetAddress2D(pit, &pd, dp, pitch));
    CHECK(cuTexRefSetFilterMode(pit, CU_TR_FILTER_MODE_POINT));
    unsigned pw = PW;
    void *pargs[] = { &out, &pw };
    CHECK(cuLaunchKernel(pitched, PH, 1, 1, PW, 1, 1, 0, NULL, pargs, NULL));
    float pgot[PW * PH];
    CHECK(cuMemcpyDtoH(pgot, out, sizeof pgot));
    for (int i = 0; i < PW * PH; i++)
        if (pgot[i] != p[i]) {
            printf("texref: pitched tex2D [%d]: %g, want %g\n", i, pgot[i], p[i]);
            return 1;
        }

    // A surface reference: read, update, write back in place.
    const int SW = 33, SH = 9;
    int s[SW * SH];
    for (int i = 0; i < SW * SH; i++)
        s[i] = i * 3 - 100;
    CUDA_ARRAY3D_DESCRIPTOR sd = {};
    sd.Width = SW;
    sd.Height = SH;
    sd.Format = CU_AD_FORMAT_SIGNED_INT32;
    sd.NumChannels = 1;
    sd.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CUarray sarr;
    CHECK(cuArray3DCreate(&sarr, &sd));
    up.srcHost = s;
    up.srcPitch = SW * sizeof(int);
    up.dstArray = sarr;
    up.WidthInBytes = SW * sizeof(int);
    up.Height = SH;
    CHECK(cuMemcpy2D(&up));
    CHECK(cuSurfRefSetArray(surf, sarr, 0));
    CUarray sarr_back;
    CHECK(cuSurfRefGetArray(&sarr_back, surf));
    EXPECT(sarr_back == sarr);
    CHECK(cuLaunchKernel(surf_update, SH, 1, 1, SW, 1, 1, 0, NULL, NULL, NULL));
    int sgot[SW * SH];
    CUDA_MEMCPY2D down = {};
    down.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    down.srcArray = sarr;
    down.dstMemoryType = CU_MEMORYTYPE_HOST;
    down.dstHost = sgot;
    down.dstPitch = SW * sizeof(int);
    down.WidthInBytes = SW * sizeof(int);
    down.Height = SH;
    CHECK(cuMemcpy2D(&down));
    for (int y = 0; y < SH; y++)
        for (int x = 0; x < SW; x++)
            if (sgot[y * SW + x] != s[y * SW + x] * 2 + x) {
                printf("texref: surface (%d, %d): %d, want %d\n", x, y, sgot[y * SW + x], s[y * SW + x] * 2 + x);
                return 1;
            }

    // Errors the driver reports: a texture unit other than the default.
    EXPECT(cuParamSetTexRef(sample2d, 0, img) == CUDA_ERROR_INVALID_VALUE);

    CHECK(cuArrayDestroy(sarr));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuMemFree(dp));
    CHECK(cuMemFree(dv));
    CHECK(cuMemFree(dout));
    CHECK(cuMemFree(out));
    CHECK(cuModuleUnload(mod));
    CHECK(cuCtxDestroy(ctx));
    printf("texref: ok\n");
    return 0;
}
