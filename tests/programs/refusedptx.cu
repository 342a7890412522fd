// A module whose kernel uses an instruction no driver knows: loading it (or
// getting its function, where the load is lazy) fails with
// CUDA_ERROR_NOT_SUPPORTED or CUDA_ERROR_INVALID_PTX, never a crash; a
// well-formed module loads afterwards. Through an agent, the shim's log line
// carries the driver's own reason (instruction and PTX line): test_remote
// checks it.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>

#define SETUP(call)                                                                   \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            printf("refusedptx: %s: %d\n", #call, (int)r_);                           \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static const char bad[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry refused()\n{\n.reg .b32 %r<5>;\nmov.u32 %r1, 1;\n"
    "frobnicate.b32 %r2, %r1;\n"   // PTX line 8
    "ret;\n}\n";

static const char good[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry fine(.param .u64 p)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n"
    "ld.param.u64 %rd1, [p];\nmov.u32 %r1, 42;\nst.global.u32 [%rd1], %r1;\nret;\n}\n";

int main()
{
    CUdevice dev;
    CUcontext ctx;
    SETUP(cuInit(0));
    SETUP(cuDeviceGet(&dev, 0));
    SETUP(cuDevicePrimaryCtxRetain(&ctx, dev));
    SETUP(cuCtxSetCurrent(ctx));
    CUmodule m;
    CUresult r = cuModuleLoadData(&m, bad);
    if (r == CUDA_SUCCESS) {
        CUfunction f;
        r = cuModuleGetFunction(&f, m, "refused");
        cuModuleUnload(m);
    }
    if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_PTX) {
        printf("refusedptx: a module with an unknown instruction gave %d\n", (int)r);
        return 1;
    }
    SETUP(cuModuleLoadData(&m, good));
    CUfunction f;
    SETUP(cuModuleGetFunction(&f, m, "fine"));
    CUdeviceptr d;
    SETUP(cuMemAlloc(&d, 4));
    void *args[] = { &d };
    SETUP(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    unsigned v = 0;
    SETUP(cuMemcpyDtoH(&v, d, 4));
    if (v != 42) {
        printf("refusedptx: the good module's kernel wrote %u\n", v);
        return 1;
    }
    SETUP(cuMemFree(d));
    SETUP(cuModuleUnload(m));
    SETUP(cuDevicePrimaryCtxRelease(dev));
    printf("refusedptx: ok\n");
    return 0;
}
