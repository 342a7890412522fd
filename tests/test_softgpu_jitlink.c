/* softgpu's JIT linker (cuLink*) joining several PTX inputs as nvlink joins
 * relocatable device code: calls and variables resolved across inputs,
 * file-local names of different inputs kept apart, a visible definition
 * beating a weak one; an undefined reference, a duplicate definition and a
 * SASS-only input fail cuLinkComplete with the reason in the error log. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <glob.h>
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

TestSuite(jitlink, .init = setup);

/* The kernel's unit: calls twice() and reads bias of another unit; its own
 * helper() and local_v clash with the library's file-local ones. helper is
 * declared before the kernel and defined after it. */
static const char main_ptx[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".extern .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0);\n"
    ".extern .global .align 4 .u32 bias;\n"
    ".extern .func unused_elsewhere();\n"
    ".global .align 4 .u32 local_v = 100;\n"
    ".func (.param .b32 func_retval0) helper(.param .b32 helper_param_0);\n"
    ".visible .entry k(.param .u64 k_param_0)\n"
    "{\n"
    "  .reg .b32 %r<6>;\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [k_param_0];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mov.u32 %r1, 7;\n"
    "  { .param .b32 p0; .param .b32 rv;\n"
    "    st.param.b32 [p0], %r1;\n"
    "    call.uni (rv), twice, (p0);\n"
    "    ld.param.b32 %r2, [rv]; }\n"
    "  { .param .b32 p0; .param .b32 rv;\n"
    "    st.param.b32 [p0], %r1;\n"
    "    call.uni (rv), helper, (p0);\n"
    "    ld.param.b32 %r3, [rv]; }\n"
    "  ld.global.u32 %r4, [bias];\n"
    "  st.global.u32 [%rd2], %r2;\n"
    "  st.global.u32 [%rd2+4], %r3;\n"
    "  st.global.u32 [%rd2+8], %r4;\n"
    "  ret;\n"
    "}\n"
    "// helper: x + local_v\n"
    ".func (.param .b32 func_retval0) helper(.param .b32 helper_param_0)\n"
    "{\n"
    "  .reg .b32 %r<3>;\n"
    "  ld.param.u32 %r1, [helper_param_0];\n"
    "  ld.global.u32 %r2, [local_v];\n"
    "  add.s32 %r1, %r1, %r2;\n"
    "  st.param.b32 [func_retval0], %r1;\n"
    "  ret;\n"
    "}\n";

/* The library: twice(x) = helper(x) + bias with its own helper (x * local_v). */
static const char lib_ptx[] =
    ".version 7.8\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .global .align 4 .u32 bias = 5;\n"
    ".global .align 4 .u32 local_v = 1000;\n"
    ".func (.param .b32 func_retval0) helper(.param .b32 helper_param_0)\n"
    "{\n"
    "  .reg .b32 %r<3>;\n"
    "  ld.param.u32 %r1, [helper_param_0];\n"
    "  ld.global.u32 %r2, [local_v];\n"
    "  mul.lo.s32 %r1, %r1, %r2;\n"
    "  st.param.b32 [func_retval0], %r1;\n"
    "  ret;\n"
    "}\n"
    ".visible .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)\n"
    "{\n"
    "  .reg .b32 %r<4>;\n"
    "  ld.param.u32 %r1, [twice_param_0];\n"
    "  { .param .b32 p0; .param .b32 rv;\n"
    "    st.param.b32 [p0], %r1;\n"
    "    call.uni (rv), helper, (p0);\n"
    "    ld.param.b32 %r2, [rv]; }\n"
    "  ld.global.u32 %r3, [bias];\n"
    "  add.s32 %r2, %r2, %r3;\n"
    "  st.param.b32 [func_retval0], %r2;\n"
    "  ret;\n"
    "}\n";

/* A weak twice() (as nvcc emits inline and template functions): the
 * library's visible one wins whatever the order. Its header is on one line,
 * and a stray ';' follows it. */
static const char weak_ptx[] =
    ".version 7.0 .target sm_52, texmode_unified .address_size 64 ;\n"
    ".weak .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)\n"
    "{\n"
    "  .reg .b32 %r<2>;\n"
    "  mov.u32 %r1, 0;\n"
    "  st.param.b32 [func_retval0], %r1;\n"
    "  ret;\n"
    "}\n";

static char log_buf[1024];

static CUlinkState new_link(void)
{
    static CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    static void *values[] = { log_buf, (void *)(uintptr_t)sizeof log_buf };
    CUlinkState link;
    OK(cuLinkCreate(2, opts, values, &link));
    return link;
}

static void add(CUlinkState link, const char *ptx, const char *name)
{
    OK(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx), name, 0, NULL, NULL));
}

/* Loads the linked image and runs k: out = { twice(7), helper(7), bias }. */
static void run_linked(CUlinkState link)
{
    void *img;
    size_t len;
    OK(cuLinkComplete(link, &img, &len));
    CUmodule mod;
    char log[512] = "";
    CUjit_option o[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *v[] = { log, (void *)(uintptr_t)sizeof log };
    cr_assert_eq(cuModuleLoadDataEx(&mod, img, 2, o, v), CUDA_SUCCESS, "load: %s\n%s", log, (char *)img);
    CUfunction k;
    OK(cuModuleGetFunction(&k, mod, "k"));
    CUdeviceptr out, bias;
    size_t bias_size;
    OK(cuMemAlloc(&out, 3 * sizeof(uint32_t)));
    void *args[] = { &out };
    OK(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    uint32_t got[3];
    OK(cuMemcpyDtoH(got, out, sizeof got));
    cr_expect_eq(got[0], 7 * 1000 + 5, "twice(7) = %u", got[0]);
    cr_expect_eq(got[1], 7 + 100, "helper(7) = %u", got[1]);
    cr_expect_eq(got[2], 5, "bias = %u", got[2]);
    OK(cuModuleGetGlobal(&bias, &bias_size, mod, "bias"));
    cr_expect_eq(bias_size, 4);
    OK(cuMemFree(out));
    OK(cuModuleUnload(mod));
}

Test(jitlink, cross_call_and_variable_with_local_clashes)
{
    CUlinkState link = new_link();
    add(link, main_ptx, "main.ptx");
    add(link, lib_ptx, "lib.ptx");
    run_linked(link);
    /* one header: the highest version, the newest target */
    void *img;
    size_t len;
    OK(cuLinkComplete(link, &img, &len));
    cr_expect(strstr(img, ".version 7.8") && strstr(img, ".target sm_75") && !strstr(img, ".version 7.0"),
              "%s", (char *)img);
    OK(cuLinkDestroy(link));
}

Test(jitlink, visible_definition_beats_weak_in_any_order)
{
    CUlinkState link = new_link();
    add(link, weak_ptx, "weak.ptx");
    add(link, main_ptx, "main.ptx");
    add(link, lib_ptx, "lib.ptx");
    run_linked(link);
    OK(cuLinkDestroy(link));
    link = new_link();
    add(link, main_ptx, "main.ptx");
    add(link, lib_ptx, "lib.ptx");
    add(link, weak_ptx, "weak.ptx");
    run_linked(link);
    OK(cuLinkDestroy(link));
}

Test(jitlink, input_from_a_file)
{
    char path[] = "/tmp/rig-jitlink-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(lib_ptx, f);
    fclose(f);
    CUlinkState link = new_link();
    add(link, main_ptx, "main.ptx");
    OK(cuLinkAddFile(link, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
    run_linked(link);
    OK(cuLinkDestroy(link));
    remove(path);
}

Test(jitlink, undefined_reference_names_the_symbol)
{
    CUlinkState link = new_link();
    add(link, main_ptx, "main.ptx");
    void *img;
    size_t len;
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_INVALID_IMAGE);
    cr_expect(strstr(log_buf, "Undefined reference to 'twice' in 'main.ptx'"), "log: %s", log_buf);
    OK(cuLinkDestroy(link));
    /* The weak unit alone defines twice, but nothing defines bias. */
    link = new_link();
    add(link, weak_ptx, "weak.ptx");
    add(link, main_ptx, "main.ptx");
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_INVALID_IMAGE);
    cr_expect(strstr(log_buf, "Undefined reference to 'bias' in 'main.ptx'"), "log: %s", log_buf);
    OK(cuLinkDestroy(link));
    /* a function declared where a variable of that name is defined */
    static const char var_twice[] = ".version 7.0\n.target sm_52\n.address_size 64\n"
                                    ".visible .global .u32 twice;\n.visible .global .u32 bias;\n";
    link = new_link();
    add(link, main_ptx, "main.ptx");
    add(link, var_twice, "vars.ptx");
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_INVALID_IMAGE);
    cr_expect(strstr(log_buf, "'twice' is declared as a function in 'main.ptx' but defined as a variable in 'vars.ptx'"),
              "log: %s", log_buf);
    OK(cuLinkDestroy(link));
}

Test(jitlink, duplicate_definition_names_both_inputs)
{
    CUlinkState link = new_link();
    add(link, main_ptx, "main.ptx");
    add(link, lib_ptx, "lib1.ptx");
    add(link, lib_ptx, "lib2.ptx");
    void *img;
    size_t len;
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_INVALID_IMAGE);
    cr_expect(strstr(log_buf, "Multiple definition of 'bias' in 'lib2.ptx', first defined in 'lib1.ptx'"),
              "log: %s", log_buf);
    OK(cuLinkDestroy(link));
}

Test(jitlink, sass_only_input_is_refused_with_a_reason)
{
    char path[512];
    snprintf(path, sizeof path, "%s/softgpu-tests/sass_only.fatbin", RIG_BUILD_DIR);
    CUlinkState link = new_link();
    add(link, lib_ptx, "lib.ptx");
    OK(cuLinkAddFile(link, CU_JIT_INPUT_FATBINARY, path, 0, NULL, NULL));
    void *img;
    size_t len;
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect(strstr(log_buf, "sass_only.fatbin") && strstr(log_buf, "SASS"), "log: %s", log_buf);
    OK(cuLinkDestroy(link));
    /* A host object with no fatbin in it. */
    static const char junk[] = "\x7f" "ELF not really an object";
    link = new_link();
    OK(cuLinkAddData(link, CU_JIT_INPUT_OBJECT, (void *)junk, sizeof junk, "x.o", 0, NULL, NULL));
    cr_expect_eq(cuLinkComplete(link, &img, &len), CUDA_ERROR_NOT_SUPPORTED);
    cr_expect(strstr(log_buf, "x.o") && strstr(log_buf, "no fatbin"), "log: %s", log_buf);
    OK(cuLinkDestroy(link));
}

/* Every kernel fatbin of tests/kernels (nvcc's PTX in every mode: debug
 * sections, .file and .loc lines, forward declarations) links alone to an
 * image that loads with the same kernels; all of one mode link together. */
Test(jitlink, every_kernel_fatbin_links_alone_and_together)
{
    static const char *modes[] = { "default", "fast", "debug", "nocomp", "speed", "size", "sm90" };
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        char pattern[512];
        snprintf(pattern, sizeof pattern, "%s/kernels/*.%s.fatbin", RIG_BUILD_DIR, modes[m]);
        glob_t g;
        cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "no %s", pattern);
        CUlinkState all = new_link();
        unsigned entries = 0;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            CUlinkState link = new_link();
            OK(cuLinkAddFile(link, CU_JIT_INPUT_FATBINARY, g.gl_pathv[i], 0, NULL, NULL));
            OK(cuLinkAddFile(all, CU_JIT_INPUT_FATBINARY, g.gl_pathv[i], 0, NULL, NULL));
            void *img;
            size_t len;
            cr_assert_eq(cuLinkComplete(link, &img, &len), CUDA_SUCCESS, "%s: %s", g.gl_pathv[i], log_buf);
            CUmodule linked, plain;
            cr_assert_eq(cuModuleLoadData(&linked, img), CUDA_SUCCESS, "%s linked", g.gl_pathv[i]);
            OK(cuModuleLoad(&plain, g.gl_pathv[i]));
            unsigned n_linked, n_plain;
            OK(cuModuleGetFunctionCount(&n_linked, linked));
            OK(cuModuleGetFunctionCount(&n_plain, plain));
            cr_expect_eq(n_linked, n_plain, "%s: %u kernels linked, %u plain", g.gl_pathv[i], n_linked, n_plain);
            entries += n_plain;
            OK(cuModuleUnload(linked));
            OK(cuModuleUnload(plain));
            OK(cuLinkDestroy(link));
        }
        void *img;
        size_t len;
        cr_assert_eq(cuLinkComplete(all, &img, &len), CUDA_SUCCESS, "all of %s: %s", modes[m], log_buf);
        CUmodule mod;
        cr_assert_eq(cuModuleLoadData(&mod, img), CUDA_SUCCESS, "all of %s", modes[m]);
        unsigned n;
        OK(cuModuleGetFunctionCount(&n, mod));
        cr_expect_eq(n, entries, "all of %s: %u kernels, %u in the inputs", modes[m], n, entries);
        OK(cuModuleUnload(mod));
        OK(cuLinkDestroy(all));
        globfree(&g);
    }
}

/* A host object or library holds its device code as fatbin containers
 * among other bytes: each one's PTX is an input of the link. */
Test(jitlink, object_input_links_the_fatbins_inside)
{
    size_t a_len, b_len;
    char *a = support_read_file(RIG_BUILD_DIR "/kernels/vecadd.default.fatbin", &a_len);
    char *b = support_read_file(RIG_BUILD_DIR "/kernels/saxpy.default.fatbin", &b_len);
    cr_assert(a && b);
    size_t pad = 64, a_at = pad, b_at = (a_at + a_len + pad + 7) / 8 * 8;
    size_t len = b_at + b_len + pad;
    uint8_t *obj = calloc(1, len);
    cr_assert(obj);
    memcpy(obj, "\x7f" "ELF", 4);
    memcpy(obj + a_at, a, a_len);
    memcpy(obj + b_at, b, b_len);
    CUjitInputType types[] = { CU_JIT_INPUT_OBJECT, CU_JIT_INPUT_LIBRARY };
    for (size_t t = 0; t < 2; t++) {
        CUlinkState link = new_link();
        OK(cuLinkAddData(link, types[t], obj, len, "kernels.o", 0, NULL, NULL));
        void *img;
        size_t img_len;
        cr_assert_eq(cuLinkComplete(link, &img, &img_len), CUDA_SUCCESS, "%s", log_buf);
        CUmodule mod;
        OK(cuModuleLoadData(&mod, img));
        CUfunction f;
        OK(cuModuleGetFunction(&f, mod, "vecadd"));
        OK(cuModuleGetFunction(&f, mod, "saxpy"));
        OK(cuModuleUnload(mod));
        OK(cuLinkDestroy(link));
    }
    free(obj);
    free(a);
    free(b);
}
