// A driver-API program: its own context, a module from PTX text
// (cuModuleLoadData), cuLaunchKernel, copies and a memset; checked against
// the CPU. Calls libcuda.so.1's exports directly, no runtime.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>

#include "drvapi_kernel.ptx.h"   // unsigned char drvapi_ptx[], NUL terminated

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

int main()
{
    CHECK(cuInit(0));
    int version = 0, count = 0;
    CHECK(cuDriverGetVersion(&version));
    CHECK(cuDeviceGetCount(&count));
    if (count < 1) {
        printf("no device\n");
        return 1;
    }
    CUdevice dev;
    char name[128];
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDeviceGetName(name, sizeof name, dev));
    printf("drvapi: driver %d, device 0: %s\n", version, name);
    CUcontext ctx;
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, drvapi_ptx));
    CUfunction fn;
    CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));

    const int n = 5000;
    size_t bytes = n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes), *out = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 97);
        y[i] = (float)(i % 13) - 6.0f;
    }
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, bytes));
    CHECK(cuMemAlloc(&dy, bytes));
    CHECK(cuMemcpyHtoD(dx, x, bytes));
    CHECK(cuMemcpyHtoD(dy, y, bytes));
    float a = 3.0f;
    int nn = n;
    void *params[] = { &a, &dx, &dy, &nn };
    CHECK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(out, dy, bytes));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (out[i] != a * x[i] + y[i] && wrong++ < 5)
            printf("y[%d] = %g, expected %g\n", i, out[i], a * x[i] + y[i]);

    // A memset and a copy back on a stream of our own.
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemsetD32Async(dx, 0x3f800000u, n, s));   // 1.0f
    CHECK(cuMemcpyDtoHAsync(out, dx, bytes, s));
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        if (out[i] != 1.0f && wrong++ < 10)
            printf("memset x[%d] = %g\n", i, out[i]);
    CHECK(cuStreamDestroy(s));
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    CHECK(cuModuleUnload(mod));
    CHECK(cuCtxDestroy(ctx));
    free(x);
    free(y);
    free(out);
    if (wrong) {
        printf("drvapi: %d wrong\n", wrong);
        return 1;
    }
    printf("drvapi: ok %d\n", n);
    return 0;
}
