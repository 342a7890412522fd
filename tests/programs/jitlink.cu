// An NVRTC + JIT link pipeline, the way Numba-, CuPy- and hashcat-style
// tools build kernels at run time: CUDA C++ source compiled to PTX by NVRTC,
// linked with cuLinkCreate / cuLinkAddData (and cuLinkAddFile from a file
// the program wrote), cuLinkComplete, the image loaded with
// cuModuleLoadData and launched; results checked against the CPU. Then two
// translation units compiled by NVRTC with -rdc=true (separate compilation)
// linked into one image: the kernel of one calls a device function of the
// other and reads its __device__ variable, each has a static function of the
// same name. A link of an input that is not code must fail with an error
// log, not crash.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <nvrtc.h>
#include <unistd.h>

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

static const char source[] =
    "extern \"C\" __global__ void scale_add(const float *x, float *y, float a, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i] * 0.5f;\n"
    "}\n";

// Separate compilation: the library unit defines poly() and offset, the
// kernel's unit uses both; twist() is file-local in each, with other bodies.
static const char lib_source[] =
    "__device__ float offset = 3.0f;\n"
    "static __device__ __noinline__ float twist(float v) { return v + 1.0f; }\n"
    "__device__ __noinline__ float poly(float v) { return twist(v) * v + offset; }\n";
static const char main_source[] =
    "extern __device__ float offset;\n"
    "extern __device__ float poly(float v);\n"
    "static __device__ __noinline__ float twist(float v) { return v * 3.0f; }\n"
    "extern \"C\" __global__ void apply(const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = poly(x[i]) + twist(x[i]) - 2.0f * offset;\n"
    "}\n";

// NVRTC's PTX for source (malloc'd), or NULL after printing its log.
static char *compile(const char *src, const char *name, bool rdc, size_t *len)
{
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL) != NVRTC_SUCCESS) {
        printf("jitlink: nvrtcCreateProgram failed\n");
        return NULL;
    }
    const char *opts[] = { "--gpu-architecture=compute_75", "-rdc=true" };
    nvrtcResult nr = nvrtcCompileProgram(prog, rdc ? 2 : 1, opts);
    if (nr != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        char *log = (char *)calloc(1, n + 1);
        nvrtcGetProgramLog(prog, log);
        printf("jitlink: NVRTC: %s: %s\n%s\n", name, nvrtcGetErrorString(nr), log);
        return NULL;
    }
    nvrtcGetPTXSize(prog, len);
    char *ptx = (char *)malloc(*len);
    nvrtcGetPTX(prog, ptx);
    nvrtcDestroyProgram(&prog);
    return ptx;
}

// Links the two -rdc units, sets offset through the module, runs apply and
// checks it against the CPU; returns 0 when every element is right.
static int run_separate(int n)
{
    size_t lib_len, main_len;
    char *lib = compile(lib_source, "lib.cu", true, &lib_len);
    char *mainp = compile(main_source, "main.cu", true, &main_len);
    if (!lib || !mainp)
        return 1;
    char error_log[4096] = "";
    CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *values[] = { error_log, (void *)(uintptr_t)sizeof error_log };
    CUlinkState link;
    CHECK(cuLinkCreate(2, opts, values, &link));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, mainp, main_len, "main.ptx", 0, NULL, NULL));
    CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, lib, lib_len, "lib.ptx", 0, NULL, NULL));
    void *image;
    size_t image_len;
    CUresult done = cuLinkComplete(link, &image, &image_len);
    if (done != CUDA_SUCCESS) {
        printf("jitlink: link of two units failed (%d): %s\n", (int)done, error_log);
        return 1;
    }
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuLinkDestroy(link));
    CUfunction fn;
    CHECK(cuModuleGetFunction(&fn, mod, "apply"));
    CUdeviceptr doff;
    size_t off_size;
    CHECK(cuModuleGetGlobal(&doff, &off_size, mod, "offset"));
    float off = 1.25f;
    CHECK(cuMemcpyHtoD(doff, &off, sizeof off));
    size_t bytes = (size_t)n * sizeof(float);
    float *x = (float *)malloc(bytes), *out = (float *)malloc(bytes);
    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 101) - 50.0f;
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, bytes));
    CHECK(cuMemAlloc(&dy, bytes));
    CHECK(cuMemcpyHtoD(dx, x, bytes));
    void *params[] = { &dx, &dy, &n };
    CHECK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(out, dy, bytes));
    int bad = off_size != sizeof(float);
    for (int i = 0; i < n; i++) {
        float want = (x[i] + 1.0f) * x[i] + off + x[i] * 3.0f - 2.0f * off;
        if (fabsf(out[i] - want) > 1e-3f * (1.0f + fabsf(want)) && bad++ < 5)
            printf("jitlink: apply y[%d] = %g, expected %g\n", i, out[i], want);
    }
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    CHECK(cuModuleUnload(mod));
    free(x);
    free(out);
    free(lib);
    free(mainp);
    return bad != 0;
}

// Links ptx (from memory, or from a file when path is given) and runs
// scale_add on n elements; returns 0 when every element is right.
static int run(const char *ptx, size_t ptx_len, const char *path, float a, int n)
{
    char error_log[4096] = "x";
    CUjit_option opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *values[] = { error_log, (void *)(uintptr_t)sizeof error_log };
    CUlinkState link;
    CHECK(cuLinkCreate(2, opts, values, &link));
    if (path)
        CHECK(cuLinkAddFile(link, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
    else
        CHECK(cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)ptx, ptx_len, "scale_add.ptx", 0, NULL, NULL));
    void *image;
    size_t image_len;
    CHECK(cuLinkComplete(link, &image, &image_len));
    if (image_len == 0) {
        printf("jitlink: an empty image\n");
        return 1;
    }
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, image));
    CHECK(cuLinkDestroy(link));   // the module keeps what it loaded
    CUfunction fn;
    CHECK(cuModuleGetFunction(&fn, mod, "scale_add"));
    size_t bytes = (size_t)n * sizeof(float);
    float *x = (float *)malloc(bytes), *y = (float *)malloc(bytes), *out = (float *)malloc(bytes);
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 101) - 50.0f;
        y[i] = (float)(i % 7);
    }
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, bytes));
    CHECK(cuMemAlloc(&dy, bytes));
    CHECK(cuMemcpyHtoD(dx, x, bytes));
    CHECK(cuMemcpyHtoD(dy, y, bytes));
    void *params[] = { &dx, &dy, &a, &n };
    CHECK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(out, dy, bytes));
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (out[i] != a * x[i] + y[i] * 0.5f && bad++ < 5)
            printf("jitlink: y[%d] = %g, expected %g\n", i, out[i], a * x[i] + y[i] * 0.5f);
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    CHECK(cuModuleUnload(mod));
    free(x);
    free(y);
    free(out);
    return bad != 0;
}

int main()
{
    size_t ptx_len = 0;
    char *ptx = compile(source, "scale_add.cu", false, &ptx_len);
    if (!ptx)
        return 1;

    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    if (run(ptx, ptx_len, NULL, 2.5f, 10000) != 0)
        return 1;
    char path[] = "/tmp/jitlink-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, ptx, ptx_len) != (ssize_t)ptx_len) {
        printf("jitlink: cannot write %s\n", path);
        return 1;
    }
    close(fd);
    int from_file = run(NULL, 0, path, -1.0f, 3000);
    unlink(path);
    if (from_file != 0)
        return 1;

    if (run_separate(5000) != 0)
        return 1;

    // Bytes that are no code: the link fails with a reason in the log.
    char error_log[4096] = "";
    CUjit_option lopts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *lvalues[] = { error_log, (void *)(uintptr_t)sizeof error_log };
    CUlinkState link;
    CHECK(cuLinkCreate(2, lopts, lvalues, &link));
    static const char junk[] = "this is not an object file";
    CUresult added = cuLinkAddData(link, CU_JIT_INPUT_OBJECT, (void *)junk, sizeof junk, "junk.o", 0, NULL, NULL);
    void *image = NULL;
    size_t image_len = 0;
    CUresult done = added == CUDA_SUCCESS ? cuLinkComplete(link, &image, &image_len) : added;
    CHECK(cuLinkDestroy(link));
    if (done == CUDA_SUCCESS) {
        printf("jitlink: a link of junk succeeded\n");
        return 1;
    }
    printf("jitlink: a link of junk refused (%d): %s\n", (int)done, error_log[0] ? error_log : "(no log)");
    printf("jitlink: ok\n");
    return 0;
}
