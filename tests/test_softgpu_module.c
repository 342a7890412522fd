/* softgpu modules and libraries through the driver API: every kernel fatbin
 * in every mode loads (wrapper, container, PTX text), functions and globals
 * are found, parameter layouts and attributes answer, SASS-only and broken
 * images are refused clearly, unloading frees. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/cuda_ok.h"

static CUcontext ctx;

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

TestSuite(module, .init = setup);

static const char *modes[] = { "default", "fast", "debug", "nocomp", "speed", "size" };

static char *image(const char *name, const char *mode, const char *ext)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/%s.%s.%s", RIG_BUILD_DIR, name, mode, ext);
    size_t n;
    char *d = support_read_file(path, &n);
    cr_assert(d, "cannot read %s", path);
    return d;
}

Test(module, every_kernel_loads_in_every_mode)
{
    struct { const char *file, *entry; } ks[] = {
        { "vecadd", "vecadd" }, { "saxpy", "daxpy" }, { "reduce", "reduce_dyn" }, { "matmul", "matmul" },
        { "globals", "use_globals" }, { "printf", "hello" }, { "histogram", "atomics" },
        { "shuffle", "shuffle64" }, { "warpreduce", "bits" }, { "structparam", "_Z12scale_struct6Params5Small" },
        { "gridstride", "gridstride" }, { "math", NULL }, { "int64", "int64ops" }, { "half", "halfops" },
        { "funcs", "call_funcs" },
    };
    for (size_t k = 0; k < sizeof ks / sizeof *ks; k++)
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            char *img = image(ks[k].file, modes[m], "fatbin");
            CUmodule mod;
            CUresult r = cuModuleLoadData(&mod, img);
            cr_expect_eq(r, CUDA_SUCCESS, "%s.%s: %d", ks[k].file, modes[m], r);
            if (r == CUDA_SUCCESS) {
                unsigned count;
                OK(cuModuleGetFunctionCount(&count, mod));
                cr_expect_geq(count, 1, "%s.%s", ks[k].file, modes[m]);
                if (ks[k].entry) {
                    CUfunction f;
                    cr_expect_eq(cuModuleGetFunction(&f, mod, ks[k].entry), CUDA_SUCCESS, "%s.%s %s",
                                 ks[k].file, modes[m], ks[k].entry);
                }
                OK(cuModuleUnload(mod));
            }
            free(img);
        }
}

Test(module, ptx_text_and_wrapper_and_file)
{
    char *ptx = image("vecadd", "default", "ptx");
    CUmodule m1, m2, m3;
    OK(cuModuleLoadData(&m1, ptx));
    char *fb = image("vecadd", "default", "fatbin");
    struct { uint32_t magic, version; const void *data; void *unused; } w = { 0x466243B1u, 1, fb, NULL };
    OK(cuModuleLoadFatBinary(&m2, &w));
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.size.fatbin", RIG_BUILD_DIR);
    OK(cuModuleLoad(&m3, path));
    cr_expect_eq(cuModuleLoad(&m3, "/nonexistent/x.fatbin"), CUDA_ERROR_FILE_NOT_FOUND);
    CUfunction f1, f2;
    OK(cuModuleGetFunction(&f1, m1, "vecadd"));
    OK(cuModuleGetFunction(&f2, m2, "vecadd"));
    cr_expect_neq(f1, f2);
    CUfunction fs[4] = { 0 };
    OK(cuModuleEnumerateFunctions(fs, 4, m1));
    cr_expect(fs[0] == f1 || fs[1] == f1);
    cr_expect_eq(cuModuleGetFunction(&f1, m1, "nope"), CUDA_ERROR_NOT_FOUND);
    CUmodule owner;
    OK(cuFuncGetModule(&owner, f2));
    cr_expect_eq(owner, m2);
    const char *name;
    OK(cuFuncGetName(&name, f2));
    cr_expect_str_eq(name, "vecadd");
    OK(cuModuleUnload(m1));
    OK(cuModuleUnload(m2));
    OK(cuModuleUnload(m3));
    cr_expect_eq(cuModuleUnload(m1), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuModuleGetFunction(&f1, m1, "vecadd"), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuFuncGetName(&name, f2), CUDA_ERROR_INVALID_HANDLE);
    free(ptx);
    free(fb);
}

Test(module, parameter_layout_and_attributes)
{
    char *fb = image("vecadd", "default", "fatbin");
    CUmodule m;
    OK(cuModuleLoadData(&m, fb));
    CUfunction f;
    OK(cuModuleGetFunction(&f, m, "vecadd"));
    size_t want_off[] = { 0, 8, 16, 24 }, want_size[] = { 8, 8, 8, 4 };
    size_t i = 0, off, size;
    for (; cuFuncGetParamInfo(f, i, &off, &size) == CUDA_SUCCESS; i++) {
        cr_assert_lt(i, 4);
        cr_expect_eq(off, want_off[i]);
        cr_expect_eq(size, want_size[i]);
    }
    cr_expect_eq(i, 4);
    cr_expect_eq(cuFuncGetParamInfo(f, 4, &off, &size), CUDA_ERROR_INVALID_VALUE);
    int v;
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    cr_expect_eq(v, 1024);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    cr_expect_eq(v, 48 * 1024);
    OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60 * 1024));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    cr_expect_eq(v, 60 * 1024);
    cr_expect_eq(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 200 * 1024),
                 CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuFuncGetAttribute(&v, (CUfunction_attribute)99, f), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED));
    int blocks, grid, block;
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    cr_expect(blocks >= 1 && blocks <= 4, "%d", blocks);
    OK(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0));
    cr_expect(block >= 32 && block <= 1024 && block % 32 == 0 && grid >= 40, "grid %d block %d", grid, block);
    size_t dyn;
    OK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, f, 2, 128));
    cr_expect_eq(dyn, 32 * 1024);
    cr_expect_eq(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)&v), CUDA_ERROR_INVALID_HANDLE);
    /* The struct-parameter kernel: full-size structs. */
    char *sp = image("structparam", "default", "fatbin");
    CUmodule m2;
    OK(cuModuleLoadData(&m2, sp));
    OK(cuModuleGetFunction(&f, m2, "_Z12scale_struct6Params5Small"));
    OK(cuFuncGetParamInfo(f, 0, &off, &size));
    cr_expect(off == 0 && size == 40, "off %zu size %zu", off, size);
    OK(cuFuncGetParamInfo(f, 1, &off, &size));
    cr_expect(off == 40 && size == 8, "off %zu size %zu", off, size);
    OK(cuModuleUnload(m2));
    OK(cuModuleUnload(m));
    free(sp);
    free(fb);
}

Test(module, a_function_reports_the_ptx_target_it_runs)
{
    /* A library picks launch geometries by the PTX version of a kernel it
     * loaded (cuSPARSE asks its empty_kernel): the target of the PTX softgpu
     * runs, not softgpu's own 7.5. The binary version is the device's. */
    static const char *const texts[] = {
        ".version 9.0\n.target sm_120\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n",
        ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n",
        ".version 7.0\n.target sm_75, texmode_unified\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n",
    };
    static const int want[] = { 120, 80, 75 };
    for (int i = 0; i < 3; i++) {
        CUmodule m;
        CUfunction f;
        int v;
        OK(cuModuleLoadData(&m, texts[i]));
        OK(cuModuleGetFunction(&f, m, "k"));
        OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
        cr_expect_eq(v, want[i], "PTX %d: version %d", i, v);
        OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
        cr_expect_eq(v, 75, "PTX %d: binary version %d", i, v);
        OK(cuModuleUnload(m));
    }
}

Test(module, globals_are_tracked_allocations)
{
    char *fb = image("globals", "default", "fatbin");
    CUmodule m;
    OK(cuModuleLoadData(&m, fb));
    CUdeviceptr p;
    size_t n;
    OK(cuModuleGetGlobal(&p, &n, m, "coeffs"));
    cr_expect_eq(n, 16);
    float c[4];
    OK(cuMemcpyDtoH(c, p, sizeof c));
    cr_expect(c[0] == 1.0f && c[1] == 2.0f && c[2] == 3.0f && c[3] == 0.5f);
    OK(cuModuleGetGlobal(&p, &n, m, "counter"));
    int counter;
    OK(cuMemcpyDtoH(&counter, p, 4));
    cr_expect_eq(counter, 5);
    OK(cuModuleGetGlobal(&p, NULL, m, "table"));
    CUdeviceptr base;
    size_t size;
    OK(cuMemGetAddressRange(&base, &size, p + 4));
    cr_expect(base == p && size == 32);
    OK(cuModuleGetGlobal(&p, &n, m, "offset_c"));
    cr_expect_eq(n, 4);
    int zero = -1;
    OK(cuMemcpyDtoH(&zero, p, 4));
    cr_expect_eq(zero, 0);
    cr_expect_eq(cuModuleGetGlobal(&p, &n, m, "nope"), CUDA_ERROR_NOT_FOUND);
    OK(cuModuleUnload(m));
    cr_expect_eq(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    free(fb);
}

Test(module, libraries)
{
    char *fb = image("globals", "speed", "fatbin");
    struct { uint32_t magic, version; const void *data; void *unused; } w = { 0x466243B1u, 1, fb, NULL };
    CUlibrary lib;
    /* cudart passes the wrapper and no options. */
    OK(cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    OK(cuLibraryGetKernel(&k, lib, "read_counter"));
    CUfunction f;
    OK(cuKernelGetFunction(&f, k));
    size_t off, size;
    OK(cuKernelGetParamInfo(k, 0, &off, &size));
    cr_expect(off == 0 && size == 8);
    CUlibrary back;
    OK(cuKernelGetLibrary(&back, k));
    cr_expect_eq(back, lib);
    unsigned count;
    OK(cuLibraryGetKernelCount(&count, lib));
    cr_expect_eq(count, 2);
    CUdeviceptr p;
    OK(cuLibraryGetGlobal(&p, NULL, lib, "counter"));   /* NULL size, as cuBLAS asks */
    cr_expect_eq(*(int *)(uintptr_t)p, 5);
    CUmodule m;
    OK(cuLibraryGetModule(&m, lib));
    cr_expect_eq(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);   /* the library owns it */
    int v;
    OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
    cr_expect_eq(v, 1024);
    OK(cuLibraryUnload(lib));
    cr_expect_eq(cuLibraryGetKernel(&k, lib, "read_counter"), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuKernelGetFunction(&f, k), CUDA_ERROR_INVALID_HANDLE);
    free(fb);
}

Test(module, sass_only_is_refused_with_a_message)
{
    char path[512];
    snprintf(path, sizeof path, "%s/softgpu-tests/sass_only.fatbin", RIG_BUILD_DIR);
    size_t n;
    char *img = support_read_file(path, &n);
    cr_assert(img);
    CUmodule m;
    char log[256] = "";
    CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *vals[] = { log, (void *)(uintptr_t)sizeof log };
    cr_expect_eq(cuModuleLoadDataEx(&m, img, 2, opts, vals), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect(strstr(log, "SASS"), "log: %s", log);
    /* A library loads lazily (cuBLAS loads SASS-only ones it never runs
     * here): its kernels are known, and each is refused when used. */
    CUlibrary lib;
    cr_assert_eq(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CUkernel k;
    cr_assert_eq(cuLibraryGetKernel(&k, lib, "sass_only"), CUDA_SUCCESS);
    CUfunction f;
    cr_expect_eq(cuKernelGetFunction(&f, k), CUDA_ERROR_NOT_SUPPORTED);
    CUdeviceptr d;
    cr_assert_eq(cuMemAlloc(&d, 4), CUDA_SUCCESS);
    void *args[] = { &d };
    cr_expect_eq(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    cr_expect_eq(cuMemFree(d), CUDA_SUCCESS);
    cr_expect_eq(cuLibraryUnload(lib), CUDA_SUCCESS);
    free(img);
}

/* PTX of a library over 1 MiB (padded with comments) is parsed at its
 * first use, as cuBLAS's are: a fault in it shows there, not at the load. */
static char *large_ptx(const char *body)
{
    size_t pad = (1u << 20) + 4096, n = strlen(body) + pad + 1;
    char *t = malloc(n);
    cr_assert(t);
    size_t at = 0;
    static const char line[] = "// padding to make the library large\n";
    while (at + sizeof line < pad) {
        memcpy(t + at, line, sizeof line - 1);
        at += sizeof line - 1;
    }
    strcpy(t + at, body);
    return t;
}

Test(module, a_large_library_is_parsed_at_its_first_use)
{
    char *good = large_ptx(".version 9.0\n.target sm_120\n.address_size 64\n"
                           ".visible .entry fine(.param .u64 p)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n"
                           "ld.param.u64 %rd1, [p];\nmov.u32 %r1, 7;\nst.global.u32 [%rd1], %r1;\nret;\n}\n");
    char *bad = large_ptx(".version 9.0\n.target sm_75\n.address_size 64\n"
                          ".visible .entry broken()\n{\nadd.u32;\n}\n");
    CUlibrary lib, blib;
    cr_assert_eq(cuLibraryLoadData(&lib, good, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    cr_assert_eq(cuLibraryLoadData(&blib, bad, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    free(good);
    free(bad);   /* the library keeps what it needs */
    CUkernel k;
    cr_expect_eq(cuLibraryGetKernel(&k, blib, "broken"), CUDA_ERROR_INVALID_PTX);
    unsigned count = 9;
    cr_expect_eq(cuLibraryGetKernelCount(&count, blib), CUDA_ERROR_INVALID_PTX);
    cr_expect_eq(cuLibraryUnload(blib), CUDA_SUCCESS);
    cr_assert_eq(cuLibraryGetKernelCount(&count, lib), CUDA_SUCCESS);
    cr_expect_eq(count, 1);
    cr_assert_eq(cuLibraryGetKernel(&k, lib, "fine"), CUDA_SUCCESS);
    CUdeviceptr d;
    cr_assert_eq(cuMemAlloc(&d, 4), CUDA_SUCCESS);
    void *args[] = { &d };
    cr_assert_eq(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    int v = 0;
    cr_assert_eq(cuMemcpyDtoH(&v, d, 4), CUDA_SUCCESS);
    cr_expect_eq(v, 7);
    cr_expect_eq(cuMemFree(d), CUDA_SUCCESS);
    cr_expect_eq(cuLibraryUnload(lib), CUDA_SUCCESS);
}

Test(module, broken_images_are_refused)
{
    CUmodule m;
    cr_expect_eq(cuModuleLoadData(&m, "this is not PTX"), CUDA_ERROR_INVALID_PTX);
    static const unsigned char junk[] = { 0x12, 0x34, 0x56, 0x78, 0x9a, 0 };
    cr_expect_eq(cuModuleLoadData(&m, junk), CUDA_ERROR_INVALID_IMAGE);
    cr_expect_eq(cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuModuleLoadData(NULL, "x"), CUDA_ERROR_INVALID_VALUE);
    /* A fatbin with its PTX entry's compressed bytes damaged. */
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t n;
    char *img = support_read_file(path, &n);
    cr_assert(img);
    memset(img + n - 200, 0xcc, 100);
    cr_expect_eq(cuModuleLoadData(&m, img), CUDA_ERROR_INVALID_IMAGE);
    free(img);
}

/* JIT linking: one PTX or fatbin input links to an image that loads; one
 * kernel linked in twice is a duplicate definition the caller's error log
 * names (test_softgpu_jitlink links several inputs). */
Test(module, jit_link_of_one_input)
{
    char *ptx = image("vecadd", "default", "ptx");
    char *fat = image("vecadd", "default", "fatbin");
    char log[512];
    CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *values[] = { log, (void *)(uintptr_t)sizeof log };
    struct { CUjitInputType type; const char *data; size_t len; } ok[] = {
        { CU_JIT_INPUT_PTX, ptx, strlen(ptx) },           /* no NUL, as NVRTC sizes it */
        { CU_JIT_INPUT_FATBINARY, fat, 0 },
    };
    size_t fat_len;
    free(support_read_file(RIG_BUILD_DIR "/kernels/vecadd.default.fatbin", &fat_len));
    ok[1].len = fat_len;
    for (size_t i = 0; i < 2; i++) {
        CUlinkState link;
        OK(cuLinkCreate(2, opts, values, &link));
        OK(cuLinkAddData(link, ok[i].type, (void *)ok[i].data, ok[i].len, "vecadd", 0, NULL, NULL));
        void *out;
        size_t out_len;
        OK(cuLinkComplete(link, &out, &out_len));
        cr_expect_gt(out_len, 1);
        CUmodule mod;
        OK(cuModuleLoadData(&mod, out));
        CUfunction f;
        cr_expect_eq(cuModuleGetFunction(&f, mod, "vecadd"), CUDA_SUCCESS, "input %zu", i);
        OK(cuModuleUnload(mod));
        OK(cuLinkDestroy(link));
        cr_expect_eq(cuLinkDestroy(link), CUDA_ERROR_INVALID_HANDLE);
    }
    CUlinkState link;
    OK(cuLinkCreate(2, opts, values, &link));
    OK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, strlen(ptx), "a", 0, NULL, NULL));
    OK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx, strlen(ptx), "b", 0, NULL, NULL));
    void *out;
    size_t out_len;
    cr_expect_eq(cuLinkComplete(link, &out, &out_len), CUDA_ERROR_INVALID_IMAGE);
    cr_expect(strstr(log, "Multiple definition of 'vecadd' in 'b'"), "error log: %s", log);
    cr_expect_eq(cuLinkAddData(link, CU_JIT_INPUT_PTX, NULL, 4, "c", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuLinkAddData(link, (CUjitInputType)99, ptx, 4, "c", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuLinkAddFile(link, CU_JIT_INPUT_PTX, "/nonexistent/x.ptx", 0, NULL, NULL),
                 CUDA_ERROR_FILE_NOT_FOUND);
    OK(cuLinkDestroy(link));
    free(ptx);
    free(fat);
}

/* PTX registers are virtual and nvcc declares thousands: the registers
 * reported, like ptxas's, still let a block of .maxntid threads fit, so
 * occupancy is never 0 for a block the kernel allows (CUB's histogram sizes
 * its grid by it). */
Test(module, many_virtual_registers_still_fit_a_block)
{
    static const char ptx[] =
        ".version 9.0\n.target sm_75\n.address_size 64\n"
        ".visible .entry wide(.param .u64 p)\n.maxntid 384, 1, 1\n{\n"
        ".reg .b32 %r<3000>;\n.reg .b64 %rd<2>;\n"
        "ld.param.u64 %rd1, [p];\nmov.u32 %r2999, 7;\nst.global.u32 [%rd1], %r2999;\nret;\n}\n"
        ".visible .entry plain(.param .u64 p)\n{\n"
        ".reg .b32 %r<3000>;\n.reg .b64 %rd<2>;\n"
        "ld.param.u64 %rd1, [p];\nmov.u32 %r2999, 7;\nst.global.u32 [%rd1], %r2999;\nret;\n}\n";
    CUmodule m;
    OK(cuModuleLoadData(&m, ptx));
    CUfunction f;
    int regs, blocks;
    OK(cuModuleGetFunction(&f, m, "wide"));
    OK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    cr_expect(regs >= 1 && regs * 384 <= 65536, "%d registers", regs);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 384, 0));
    cr_expect_eq(blocks, 1);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 512, 0));
    cr_expect_eq(blocks, 0, "more threads than .maxntid");
    OK(cuModuleGetFunction(&f, m, "plain"));
    OK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    cr_expect(regs >= 1 && regs * 1024 <= 65536, "%d registers", regs);
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 1024, 0));
    cr_expect_eq(blocks, 1);
    OK(cuModuleUnload(m));
}

/* Kernels the engine cannot run are refused one by one: the module loads,
 * its other kernels run, and asking for (or launching) a refused kernel
 * fails with CUDA_ERROR_NOT_SUPPORTED and one line naming the kernel, the
 * instruction and its PTX line, on stderr and in the driver log. */
static const char lazy_ptx[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"              /* lines 1-3 */
    ".extern .func nobody();\n"                                      /* 4 */
    ".func helper()\n{\n.reg .b32 %r<3>;\n"                          /* 5-7 */
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%r1}, {%r2}, {%r2}, {%r1};\n"   /* 8 */
    "ret;\n}\n"                                                      /* 9-10 */
    ".visible .entry good(.param .u64 p)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n"   /* 11-14 */
    "ld.param.u64 %rd1, [p];\nmov.u32 %r1, 42;\nst.global.u32 [%rd1], %r1;\nret;\n}\n"  /* 15-19 */
    ".visible .entry bad()\n{\n.reg .b32 %r<5>;\nmov.u32 %r1, 1;\n"  /* 20-23 */
    "frobnicate.b32 %r2, %r1;\n"                                     /* 24 */
    "ret;\n}\n"                                                      /* 25-26 */
    ".visible .entry indirect()\n{\ncall.uni helper, ();\nret;\n}\n"     /* 27-31 */
    ".visible .entry orphan()\n{\ncall.uni nobody, ();\nret;\n}\n";      /* 32-36 */

/* The driver log's lines since it. */
static void log_since(CUlogIterator it, char *buf, size_t size)
{
    OK(cuLogsDumpToMemory(&it, buf, &size, 0));
}

Test(module, a_kernel_it_cannot_run_is_refused_alone)
{
    CUmodule m;
    OK(cuModuleLoadData(&m, lazy_ptx));
    unsigned count;
    OK(cuModuleGetFunctionCount(&count, m));
    cr_expect_eq(count, 4);
    /* The good kernel runs. */
    CUfunction good;
    OK(cuModuleGetFunction(&good, m, "good"));
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 4));
    void *args[] = { &d };
    OK(cuLaunchKernel(good, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    unsigned v = 0;
    OK(cuMemcpyDtoH(&v, d, 4));
    cr_expect_eq(v, 42);
    /* Each bad one says why. */
    static const struct { const char *name, *says[3]; } bad[] = {
        { "bad", { "kernel bad", "line 24", "'frobnicate.b32'" } },
        { "indirect", { "kernel indirect calls helper", "line 8, in function helper", "mma" } },
        { "orphan", { "line 34, in kernel orphan", "'nobody'", "external function" } },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CUlogIterator it;
        OK(cuLogsCurrent(&it, 0));
        CUfunction f = NULL;
        cr_expect_eq(cuModuleGetFunction(&f, m, bad[i].name), CUDA_ERROR_NOT_SUPPORTED, "%s", bad[i].name);
        char log[2048];
        log_since(it, log, sizeof log);
        for (int k = 0; k < 3; k++)
            cr_expect(strstr(log, bad[i].says[k]), "%s: no \"%s\" in the log: %s", bad[i].name, bad[i].says[k],
                      log);
        cr_expect(strstr(log, "CUDA_ERROR_NOT_SUPPORTED") && strstr(log, "softgpu"), "log: %s", log);
    }
    /* Handed out another way (enumeration), it still does not launch, and
     * the context is not poisoned by trying. */
    CUfunction all[4];
    OK(cuModuleEnumerateFunctions(all, 4, m));
    int refused = 0;
    for (int i = 0; i < 4; i++) {
        const char *name = NULL;
        OK(cuFuncGetName(&name, all[i]));
        if (strcmp(name, "good") == 0)
            continue;
        cr_expect_eq(cuLaunchKernel(all[i], 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED,
                     "%s", name);
        refused++;
    }
    cr_expect_eq(refused, 3);
    OK(cuCtxSynchronize());
    OK(cuLaunchKernel(good, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemFree(d));
    OK(cuModuleUnload(m));
    /* A library's kernel is handed out; made a function (where a lazily
     * loading driver compiles it) it is refused. */
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, lazy_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    CUfunction f;
    OK(cuLibraryGetKernel(&k, lib, "good"));
    OK(cuKernelGetFunction(&f, k));
    OK(cuLibraryGetKernel(&k, lib, "bad"));
    cr_expect_eq(cuKernelGetFunction(&f, k), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect_eq(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuLibraryUnload(lib));
}

Test(module, driver_log_iterates_and_refuses_a_buffer_too_small)
{
    CUlogIterator start, end;
    OK(cuLogsCurrent(&start, 0));
    CUmodule m;
    cr_expect_eq(cuModuleLoadData(&m, "this is not PTX"), CUDA_ERROR_INVALID_PTX);
    cr_expect_eq(cuModuleLoadData(&m, "neither is this"), CUDA_ERROR_INVALID_PTX);
    OK(cuLogsCurrent(&end, 0));
    cr_expect_eq(end - start, 2);
    /* A buffer that holds no whole line. */
    char small[8];
    size_t n = sizeof small;
    CUlogIterator it = start;
    cr_expect_eq(cuLogsDumpToMemory(&it, small, &n, 0), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(n, 0);
    cr_expect_eq(it, start);
    /* Both lines, newline-separated, NUL-terminated; the iterator moves past them. */
    char buf[2048];
    n = sizeof buf;
    OK(cuLogsDumpToMemory(&it, buf, &n, 0));
    cr_expect_eq(it, end);
    cr_expect_eq(n, strlen(buf));
    cr_expect(n > 0 && buf[n - 1] == '\n', "%s", buf);
    char *nl = strchr(buf, '\n');
    cr_expect(nl && strchr(nl + 1, '\n') == buf + n - 1, "two lines: %s", buf);
    /* Nothing new: zero bytes. */
    n = sizeof buf;
    OK(cuLogsDumpToMemory(&it, buf, &n, 0));
    cr_expect_eq(n, 0);
}
