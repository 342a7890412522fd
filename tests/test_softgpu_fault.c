/* softgpu after a fault, in-process: a kernel's illegal address poisons its
 * context, and what an agent does between jobs (reset the primary context)
 * clears it. Not for proxies, where a fault fails the whole job. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/cuda_ok.h"

static void setup(void)
{
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
}

TestSuite(fault, .init = setup);

static CUmodule load(const char *name, const char *mode)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/%s.%s.fatbin", RIG_BUILD_DIR, name, mode);
    size_t n;
    char *img = support_read_file(path, &n);
    cr_assert(img, "cannot read %s", path);
    CUmodule m;
    CUresult r = cuModuleLoadData(&m, img);
    free(img);
    cr_assert_eq(r, CUDA_SUCCESS, "load %s.%s: %d", name, mode, r);
    return m;
}

static CUfunction fn(CUmodule m, const char *name)
{
    CUfunction f;
    cr_assert_eq(cuModuleGetFunction(&f, m, name), CUDA_SUCCESS, "%s", name);
    return f;
}

static CUdeviceptr upload(const void *h, size_t n)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, n));
    if (h)
        OK(cuMemcpyHtoD(d, h, n));
    return d;
}

Test(fault, primary_context_reset_clears_the_sticky_error)
{
    CUcontext p;
    OK(cuDevicePrimaryCtxRetain(&p, 0));
    OK(cuCtxSetCurrent(p));
    CUmodule mod = load("vecadd", "default");
    CUdeviceptr d = upload(NULL, 256), bad = 0x20000;
    int n = 64;
    void *args[] = { &d, &d, &bad, &n };
    OK(cuLaunchKernel(fn(mod, "vecadd_i32"), 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_expect_eq(cuMemAlloc(&d, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* What an agent does between jobs: everything goes, the error too. */
    OK(cuDevicePrimaryCtxReset(0));
    OK(cuCtxSetCurrent(p));
    OK(cuCtxSynchronize());
    OK(cuMemAlloc(&d, 8));
    cr_expect_eq(cuModuleGetFunction(&(CUfunction){ 0 }, mod, "vecadd"), CUDA_ERROR_INVALID_HANDLE);
    OK(cuDevicePrimaryCtxRelease(0));
}

#include <sys/wait.h>
#include <unistd.h>

Test(fault, a_forked_child_gets_errors_not_a_hang, .timeout = 30)
{
    CUcontext c;
    OK(cuCtxCreate(&c, NULL, 0, 0));
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 64));
    OK(cuMemsetD8Async(d, 1, 64, NULL));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* No stream worker came along: every call must fail at once. */
        int bad = 0;
        bad += cuCtxSynchronize() == CUDA_SUCCESS;
        bad += cuMemsetD8(d, 2, 64) == CUDA_SUCCESS;
        bad += cuStreamSynchronize(NULL) == CUDA_SUCCESS;
        bad += cuInit(0) == CUDA_SUCCESS;
        _exit(bad ? 1 : 0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    /* The parent goes on. */
    OK(cuMemsetD8(d, 3, 64));
    OK(cuCtxSynchronize());
    OK(cuCtxDestroy(c));
}
