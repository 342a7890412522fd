/* softgpu's texture and surface references (cuModuleGetTexRef/SurfRef,
 * cuTexRef*, cuSurfRef*) with hand-written PTX (nvcc 13 emits none):
 * linear filtering on a 2-D array, a reference on linear memory, a surface
 * reference written then read back, bindings copied at launch, setters and
 * getters, and the errors. */
#define CUDA_ENABLE_DEPRECATED 1
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda_ok.h"

static const char ptx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".global .texref img;\n"
    ".global .texref lin;\n"
    ".global .surfref surf;\n"
    ".tex .u32 oldtex;\n"
    "\n"
    "// out[y * w + x] = tex2D(img, x / 2 + 0.25, y / 2 + 0.25), x = tid, y = ctaid\n"
    ".visible .entry sample2d(.param .u64 p_out, .param .u32 p_w)\n"
    "{\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .f32 %f<10>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
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
    "// out[i] = tex1Dfetch(lin, i) (first channel, as integers)\n"
    ".visible .entry fetch1d(.param .u64 p_out)\n"
    "{\n"
    "  .reg .b32 %r<10>;\n"
    "  .reg .b64 %rd<4>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
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
    "// surf(x, y) = surf(x, y) * 2 + x, through suld and sust (x in bytes)\n"
    ".visible .entry surf_update()\n"
    "{\n"
    "  .reg .b32 %r<8>;\n"
    "  mov.u32 %r1, %tid.x;\n"
    "  mov.u32 %r2, %ctaid.x;\n"
    "  shl.b32 %r3, %r1, 2;\n"
    "  suld.b.2d.b32.trap %r4, [surf, {%r3, %r2}];\n"
    "  shl.b32 %r5, %r4, 1;\n"
    "  add.s32 %r6, %r5, %r1;\n"
    "  sust.b.2d.b32.trap [surf, {%r3, %r2}], %r6;\n"
    "  ret;\n"
    "}\n"
    "\n"
    "// out = { txq.width img, txq.height img, suq.width surf, suq.height surf }\n"
    ".visible .entry query(.param .u64 p_out)\n"
    "{\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<2>;\n"
    "  ld.param.u64 %rd1, [p_out];\n"
    "  txq.width.b32 %r1, [img];\n"
    "  txq.height.b32 %r2, [img];\n"
    "  suq.width.b32 %r3, [surf];\n"
    "  suq.height.b32 %r4, [surf];\n"
    "  st.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};\n"
    "  ret;\n"
    "}\n";

static CUcontext ctx;
static CUmodule mod;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
    cr_assert_eq(cuModuleLoadData(&mod, ptx), CUDA_SUCCESS);
}

TestSuite(texref, .init = setup, .timeout = 60);

static CUfunction fn(const char *name)
{
    CUfunction f;
    cr_assert_eq(cuModuleGetFunction(&f, mod, name), CUDA_SUCCESS, "%s", name);
    return f;
}

static CUtexref texref(const char *name)
{
    CUtexref r;
    OK(cuModuleGetTexRef(&r, mod, name));
    return r;
}

static CUarray array2d(size_t w, size_t h, CUarray_format f, unsigned ch, unsigned flags)
{
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = w, .Height = h, .Format = f, .NumChannels = ch, .Flags = flags };
    CUarray a;
    OK(cuArray3DCreate(&a, &d));
    return a;
}

static void to_array(CUarray a, const void *src, size_t row_bytes, size_t h)
{
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = row_bytes,
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                        .WidthInBytes = row_bytes, .Height = h };
    OK(cuMemcpy2D(&c));
}

/* Bilinear sample at unnormalized (u, v) with clamped addresses, as CUDA
 * defines it (exact weights). */
static float bilinear(const float *t, long w, long h, float u, float v)
{
    float x = u - 0.5f, y = v - 0.5f;
    long i = (long)floorf(x), j = (long)floorf(y);
    float a = x - (float)i, b = y - (float)j;
#define AT(X, Y) t[((Y) < 0 ? 0 : (Y) >= h ? h - 1 : (Y)) * w + ((X) < 0 ? 0 : (X) >= w ? w - 1 : (X))]
    return (1 - a) * (1 - b) * AT(i, j) + a * (1 - b) * AT(i + 1, j) + (1 - a) * b * AT(i, j + 1) +
           a * b * AT(i + 1, j + 1);
#undef AT
}

Test(texref, linear_filtering_on_a_2d_array)
{
    enum { W = 5, H = 4, OW = 2 * W + 2, OH = 2 * H + 1 };
    float t[W * H];
    for (int i = 0; i < W * H; i++)
        t[i] = (float)((i * 7) % 11) - 3.5f;
    CUarray a = array2d(W, H, CU_AD_FORMAT_FLOAT, 1, 0);
    to_array(a, t, W * sizeof(float), H);
    CUtexref r = texref("img");
    OK(cuTexRefSetArray(r, a, CU_TRSA_OVERRIDE_FORMAT));
    OK(cuTexRefSetFilterMode(r, CU_TR_FILTER_MODE_LINEAR));
    OK(cuTexRefSetAddressMode(r, 0, CU_TR_ADDRESS_MODE_CLAMP));
    OK(cuTexRefSetAddressMode(r, 1, CU_TR_ADDRESS_MODE_CLAMP));
    OK(cuTexRefSetFlags(r, 0));
    OK(cuParamSetTexRef(fn("sample2d"), CU_PARAM_TR_DEFAULT, r));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, OW * OH * sizeof(float)));
    unsigned ow = OW;
    void *args[] = { &out, &ow };
    OK(cuLaunchKernel(fn("sample2d"), OH, 1, 1, OW, 1, 1, 0, NULL, args, NULL));
    float got[OW * OH];
    OK(cuMemcpyDtoH(got, out, sizeof got));
    for (int y = 0; y < OH; y++)
        for (int x = 0; x < OW; x++) {
            float want = bilinear(t, W, H, x * 0.5f + 0.25f, y * 0.5f + 0.25f);
            cr_assert(fabsf(got[y * OW + x] - want) < 1e-5f, "(%d, %d): %g, want %g", x, y, got[y * OW + x], want);
        }
    /* Point filtering now: the next launch sees the new state. */
    OK(cuTexRefSetFilterMode(r, CU_TR_FILTER_MODE_POINT));
    OK(cuLaunchKernel(fn("sample2d"), OH, 1, 1, OW, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(got, out, sizeof got));
    for (int y = 0; y < OH; y++)
        for (int x = 0; x < OW; x++) {
            int i = x / 2 >= W ? W - 1 : x / 2, j = y / 2 >= H ? H - 1 : y / 2;
            cr_assert_eq(got[y * OW + x], t[j * W + i], "(%d, %d)", x, y);
        }
    unsigned q[4];
    void *qargs[] = { &out };
    CUarray s = array2d(3, 2, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST);
    CUsurfref sr;
    OK(cuModuleGetSurfRef(&sr, mod, "surf"));
    OK(cuSurfRefSetArray(sr, s, 0));
    OK(cuLaunchKernel(fn("query"), 1, 1, 1, 1, 1, 1, 0, NULL, qargs, NULL));
    OK(cuMemcpyDtoH(q, out, sizeof q));
    cr_assert(q[0] == W && q[1] == H && q[2] == 3 && q[3] == 2, "txq/suq: %u %u %u %u", q[0], q[1], q[2], q[3]);
    OK(cuMemFree(out));
    OK(cuArrayDestroy(s));
    OK(cuArrayDestroy(a));
}

Test(texref, linear_memory_and_bindings_copied_at_launch)
{
    enum { N = 100, T = 128 };
    int a[N], b[N];
    for (int i = 0; i < N; i++) {
        a[i] = i * 3 - 50;
        b[i] = 1000 + i;
    }
    CUdeviceptr da, db, o1, o2;
    OK(cuMemAlloc(&da, sizeof a));
    OK(cuMemAlloc(&db, sizeof b));
    OK(cuMemAlloc(&o1, T * 4));
    OK(cuMemAlloc(&o2, T * 4));
    OK(cuMemcpyHtoD(da, a, sizeof a));
    OK(cuMemcpyHtoD(db, b, sizeof b));
    CUtexref r = texref("lin");
    OK(cuTexRefSetFormat(r, CU_AD_FORMAT_SIGNED_INT32, 1));
    size_t off = 99;
    OK(cuTexRefSetAddress(&off, r, da, sizeof a));
    cr_assert_eq(off, 0);
    CUstream st;
    OK(cuStreamCreate(&st, 0));
    /* The rebind comes while the first launch may still be queued. */
    void *a1[] = { &o1 }, *a2[] = { &o2 };
    OK(cuLaunchKernel(fn("fetch1d"), T / 32, 1, 1, 32, 1, 1, 0, st, a1, NULL));
    OK(cuTexRefSetAddress(NULL, r, db, sizeof b));
    OK(cuLaunchKernel(fn("fetch1d"), T / 32, 1, 1, 32, 1, 1, 0, st, a2, NULL));
    OK(cuStreamSynchronize(st));
    int g1[T], g2[T];
    OK(cuMemcpyDtoH(g1, o1, sizeof g1));
    OK(cuMemcpyDtoH(g2, o2, sizeof g2));
    for (int i = 0; i < T; i++) {
        cr_assert_eq(g1[i], i < N ? a[i] : 0, "first launch [%d]: %d", i, g1[i]);
        cr_assert_eq(g2[i], i < N ? b[i] : 0, "second launch [%d]: %d", i, g2[i]);
    }
    CUdeviceptr got;
    OK(cuTexRefGetAddress(&got, r));
    cr_assert_eq(got, db);
    /* A 2-D pitched binding of the same memory: rows of 10 as 16-bit pairs. */
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 10, .Height = 10, .Format = CU_AD_FORMAT_SIGNED_INT16, .NumChannels = 2 };
    OK(cuTexRefSetAddress2D(r, &d, db, 40));
    CUarray_format f;
    int ch;
    OK(cuTexRefGetFormat(&f, &ch, r));
    cr_assert(f == CU_AD_FORMAT_SIGNED_INT16 && ch == 2);
    OK(cuStreamDestroy(st));
}

Test(texref, surface_reference_write_then_read_back)
{
    enum { W = 7, H = 5 };
    int v[W * H];
    for (int i = 0; i < W * H; i++)
        v[i] = i * i - 40;
    CUarray s = array2d(W, H, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST);
    to_array(s, v, W * 4, H);
    CUsurfref sr;
    OK(cuModuleGetSurfRef(&sr, mod, "surf"));
    OK(cuSurfRefSetArray(sr, s, 0));
    CUarray back;
    OK(cuSurfRefGetArray(&back, sr));
    cr_assert_eq(back, s);
    OK(cuLaunchKernel(fn("surf_update"), H, 1, 1, W, 1, 1, 0, NULL, NULL, NULL));
    int got[W * H];
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = s, .dstMemoryType = CU_MEMORYTYPE_HOST,
                        .dstHost = got, .dstPitch = W * 4, .WidthInBytes = W * 4, .Height = H };
    OK(cuMemcpy2D(&c));
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            cr_assert_eq(got[y * W + x], v[y * W + x] * 2 + x, "(%d, %d)", x, y);
    OK(cuArrayDestroy(s));
}

Test(texref, setters_and_getters)
{
    CUtexref r = texref("img"), old = texref("oldtex");
    cr_assert_neq(r, old);
    OK(cuTexRefSetAddressMode(r, 2, CU_TR_ADDRESS_MODE_MIRROR));
    CUaddress_mode am;
    OK(cuTexRefGetAddressMode(&am, r, 2));
    cr_assert_eq(am, CU_TR_ADDRESS_MODE_MIRROR);
    OK(cuTexRefSetFilterMode(r, CU_TR_FILTER_MODE_LINEAR));
    CUfilter_mode fm;
    OK(cuTexRefGetFilterMode(&fm, r));
    cr_assert_eq(fm, CU_TR_FILTER_MODE_LINEAR);
    OK(cuTexRefSetMipmapFilterMode(r, CU_TR_FILTER_MODE_LINEAR));
    OK(cuTexRefGetMipmapFilterMode(&fm, r));
    cr_assert_eq(fm, CU_TR_FILTER_MODE_LINEAR);
    OK(cuTexRefSetFlags(r, CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_READ_AS_INTEGER));
    unsigned fl;
    OK(cuTexRefGetFlags(&fl, r));
    cr_assert_eq(fl, CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_READ_AS_INTEGER);
    float border[4] = { 1, 2, 3, 4 }, bo[4];
    OK(cuTexRefSetBorderColor(r, border));
    OK(cuTexRefGetBorderColor(bo, r));
    cr_assert(memcmp(border, bo, sizeof bo) == 0);
    OK(cuTexRefSetMaxAnisotropy(r, 8));
    int an;
    OK(cuTexRefGetMaxAnisotropy(&an, r));
    cr_assert_eq(an, 8);
    OK(cuTexRefSetMipmapLevelBias(r, 0.5f));
    float bias, lo, hi;
    OK(cuTexRefGetMipmapLevelBias(&bias, r));
    cr_assert_eq(bias, 0.5f);
    OK(cuTexRefSetMipmapLevelClamp(r, 1.0f, 3.0f));
    OK(cuTexRefGetMipmapLevelClamp(&lo, &hi, r));
    cr_assert(lo == 1.0f && hi == 3.0f);
    CUarray a = array2d(4, 4, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0), ga;
    OK(cuTexRefSetArray(r, a, CU_TRSA_OVERRIDE_FORMAT));
    OK(cuTexRefGetArray(&ga, r));
    cr_assert_eq(ga, a);
    CUarray_format f;
    int ch;
    OK(cuTexRefGetFormat(&f, &ch, r));
    cr_assert(f == CU_AD_FORMAT_UNSIGNED_INT8 && ch == 4, "the array's format overrides");
    CUdeviceptr dp;
    cr_assert_eq(cuTexRefGetAddress(&dp, r), CUDA_ERROR_INVALID_VALUE, "bound to an array, not memory");
    CUDA_ARRAY3D_DESCRIPTOR md = { .Width = 8, .Height = 8, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUmipmappedArray m, gm;
    OK(cuMipmappedArrayCreate(&m, &md, 3));
    OK(cuTexRefSetMipmappedArray(r, m, CU_TRSA_OVERRIDE_FORMAT));
    OK(cuTexRefGetMipmappedArray(&gm, r));
    cr_assert_eq(gm, m);
    cr_assert_eq(cuTexRefGetArray(&ga, r), CUDA_ERROR_INVALID_VALUE);
    /* A reference of its own: bindable, destroyable; a module's is not. */
    CUtexref mine;
    OK(cuTexRefCreate(&mine));
    OK(cuTexRefSetArray(mine, a, CU_TRSA_OVERRIDE_FORMAT));
    cr_assert_eq(cuParamSetTexRef(fn("sample2d"), CU_PARAM_TR_DEFAULT, mine), CUDA_ERROR_INVALID_VALUE);
    OK(cuTexRefDestroy(mine));
    cr_assert_eq(cuTexRefDestroy(r), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMipmappedArrayDestroy(m));
    OK(cuArrayDestroy(a));
}

Test(texref, errors)
{
    CUtexref r = texref("lin"), x;
    CUsurfref sr;
    cr_assert_eq(cuModuleGetTexRef(&x, mod, "surf"), CUDA_ERROR_NOT_FOUND, "a surface is no texture");
    cr_assert_eq(cuModuleGetSurfRef(&sr, mod, "img"), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(cuModuleGetTexRef(&x, mod, "nope"), CUDA_ERROR_NOT_FOUND);
    cr_assert_eq(cuModuleGetTexRef(NULL, mod, "img"), CUDA_ERROR_INVALID_VALUE);
    /* Wrong formats and modes. */
    cr_assert_eq(cuTexRefSetFormat(r, (CUarray_format)0x77, 1), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexRefSetFormat(r, CU_AD_FORMAT_FLOAT, 3), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexRefSetAddressMode(r, 3, CU_TR_ADDRESS_MODE_CLAMP), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexRefSetFilterMode(r, (CUfilter_mode)5), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexRefSetFlags(r, 0x100), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuTexRefSetFlags(r, CU_TRSF_SRGB), CUDA_ERROR_NOT_SUPPORTED);
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 4, .Height = 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
    CUdeviceptr p;
    OK(cuMemAlloc(&p, 64));
    cr_assert_eq(cuTexRefSetAddress2D(r, &d, p, 8), CUDA_ERROR_INVALID_VALUE, "pitch under a row");
    cr_assert_eq(cuTexRefSetAddress2D(r, &d, p, 32), CUDA_ERROR_INVALID_VALUE, "past the allocation");
    cr_assert_eq(cuTexRefSetAddress(NULL, r, p, 128), CUDA_ERROR_INVALID_VALUE, "past the allocation");
    CUarray plain = array2d(2, 2, CU_AD_FORMAT_FLOAT, 1, 0);
    OK(cuModuleGetSurfRef(&sr, mod, "surf"));
    cr_assert_eq(cuSurfRefSetArray(sr, plain, 0), CUDA_ERROR_INVALID_VALUE, "no SURFACE_LDST");
    cr_assert_eq(cuTexRefSetArray(r, plain, 0x10), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuParamSetTexRef(fn("fetch1d"), 0, r), CUDA_ERROR_INVALID_VALUE, "texunit other than default");
    cr_assert_eq(cuTexRefSetArray((CUtexref)(void *)sr, plain, CU_TRSA_OVERRIDE_FORMAT), CUDA_ERROR_INVALID_HANDLE);
    /* PTX that misuses references. */
    CUmodule bad;
    static const char wrong_kind[] =
        ".version 6.0\n.target sm_50\n.address_size 64\n.global .texref t;\n"
        ".visible .entry k() { .reg .b32 %r<2>; suld.b.1d.b32.trap %r1, [t, {%r0}]; ret; }\n";
    cr_assert_eq(cuModuleLoadData(&bad, wrong_kind), CUDA_ERROR_INVALID_PTX);
    static const char independent[] =
        ".version 6.0\n.target sm_50, texmode_independent\n.address_size 64\n.global .texref t;\n"
        ".visible .entry k() { ret; }\n";
    cr_assert_eq(cuModuleLoadData(&bad, independent), CUDA_ERROR_NOT_SUPPORTED);
    /* An unbound reference at launch: the kernel faults, naming it. */
    void *args[] = { &p };
    OK(cuLaunchKernel(fn("fetch1d"), 1, 1, 1, 16, 1, 1, 0, NULL, args, NULL));
    cr_assert_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}
