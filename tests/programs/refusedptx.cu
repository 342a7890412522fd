// A module one of whose kernels uses an instruction no driver knows: a GPU's
// JIT refuses the whole module (CUDA_ERROR_INVALID_PTX); softgpu loads it,
// runs its other kernel and refuses only that one, at cuModuleGetFunction
// (CUDA_ERROR_NOT_SUPPORTED). A module softgpu cannot load at all (32-bit
// addresses) is refused whole. Never a crash; a well-formed module loads
// afterwards. Softgpu's own reasons (kernel, instruction and PTX line) reach
// stderr, through an agent as the shim's log line: test_shim_face and
// test_remote check them.
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
    "ret;\n}\n"
    ".visible .entry fine_too(.param .u64 p)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\n"
    "ld.param.u64 %rd1, [p];\nmov.u32 %r1, 7;\nst.global.u32 [%rd1], %r1;\nret;\n}\n";

static const char narrow[] =
    ".version 8.0\n.target sm_75\n.address_size 32\n"
    ".visible .entry small()\n{\nret;\n}\n";

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
    CUdeviceptr d;
    SETUP(cuMemAlloc(&d, 4));
    CUmodule m;
    CUresult r = cuModuleLoadData(&m, bad);
    if (r == CUDA_SUCCESS) {
        // Loaded: the bad kernel alone is refused, the other one runs.
        CUfunction f;
        r = cuModuleGetFunction(&f, m, "refused");
        if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_PTX) {
            printf("refusedptx: the kernel with an unknown instruction gave %d\n", (int)r);
            return 1;
        }
        SETUP(cuModuleGetFunction(&f, m, "fine_too"));
        void *args[] = { &d };
        SETUP(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        unsigned v = 0;
        SETUP(cuMemcpyDtoH(&v, d, 4));
        if (v != 7) {
            printf("refusedptx: the loaded module's good kernel wrote %u\n", v);
            return 1;
        }
        SETUP(cuModuleUnload(m));
        printf("refusedptx: the module loaded; its bad kernel alone was refused\n");
    } else if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_PTX) {
        printf("refusedptx: the module was refused whole\n");
    } else {
        printf("refusedptx: a module with an unknown instruction gave %d\n", (int)r);
        return 1;
    }
    r = cuModuleLoadData(&m, narrow);
    if (r == CUDA_SUCCESS)
        SETUP(cuModuleUnload(m));
    else if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_PTX) {
        printf("refusedptx: a module of 32-bit addresses gave %d\n", (int)r);
        return 1;
    }
    SETUP(cuModuleLoadData(&m, good));
    CUfunction f;
    SETUP(cuModuleGetFunction(&f, m, "fine"));
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
