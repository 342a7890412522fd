/* softgpu launches through the driver API: each kernel of tests/kernels,
 * loaded from its fatbin in every mode, runs on fresh random inputs and
 * matches a CPU reference; both parameter forms and cuLaunchKernelEx work;
 * bad launches get clear errors; an illegal address poisons the context
 * with one line naming the kernel; work is really asynchronous. */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tests/seed.h"
#include "tests/cuda_ok.h"

static CUcontext ctx;

static void setup(void)
{
    test_srand();
    cr_assert_eq(cuInit(0), CUDA_SUCCESS);
    cr_assert_eq(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
}

TestSuite(launch, .init = setup, .timeout = 60);

static const char *modes[] = { "default", "fast", "debug", "nocomp", "speed", "size" };
#define NMODES (sizeof modes / sizeof *modes)

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
    OK(cuMemAlloc(&d, n ? n : 1));
    if (n && h)
        OK(cuMemcpyHtoD(d, h, n));
    else if (n)
        OK(cuMemsetD8(d, 0, n));
    return d;
}

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

Test(launch, vecadd_every_mode)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("vecadd", modes[m]);
        CUfunction f = fn(mod, "vecadd");
        int n = 1 + rand() % 5000;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
        for (int i = 0; i < n; i++) {
            a[i] = frand();
            b[i] = frand();
        }
        CUdeviceptr da = upload(a, n * 4), db = upload(b, n * 4), dc = upload(NULL, n * 4);
        void *args[] = { &da, &db, &dc, &n };
        OK(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
        OK(cuMemcpyDtoH(c, dc, n * 4));
        for (int i = 0; i < n; i++)
            cr_assert_eq(c[i], a[i] + b[i], "%s: c[%d] = %f, want %f", modes[m], i, c[i], a[i] + b[i]);
        cuMemFree(da);
        cuMemFree(db);
        cuMemFree(dc);
        OK(cuModuleUnload(mod));
        free(a);
        free(b);
        free(c);
    }
}

Test(launch, saxpy_and_daxpy_every_mode)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("saxpy", modes[m]);
        int n = 1 + rand() % 3000;
        float a = frand();
        double ad = frand();
        float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
        double *xd = malloc(n * 8), *yd = malloc(n * 8), *outd = malloc(n * 8);
        for (int i = 0; i < n; i++) {
            x[i] = frand();
            y[i] = frand();
            xd[i] = frand();
            yd[i] = frand();
        }
        CUdeviceptr dx = upload(x, n * 4), dy = upload(y, n * 4), dxd = upload(xd, n * 8), dyd = upload(yd, n * 8);
        void *args[] = { &n, &a, &dx, &dy };
        void *argsd[] = { &n, &ad, &dxd, &dyd };
        OK(cuLaunchKernel(fn(mod, "saxpy"), (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        OK(cuLaunchKernel(fn(mod, "daxpy"), (n + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, argsd, NULL));
        OK(cuMemcpyDtoH(out, dy, n * 4));
        OK(cuMemcpyDtoH(outd, dyd, n * 8));
        for (int i = 0; i < n; i++) {
            cr_assert_float_eq(out[i], fmaf(a, x[i], y[i]), 1e-6f, "%s saxpy[%d]", modes[m], i);
            cr_assert_float_eq(outd[i], fma(ad, xd[i], yd[i]), 1e-12, "%s daxpy[%d]", modes[m], i);
        }
        cuMemFree(dx);
        cuMemFree(dy);
        cuMemFree(dxd);
        cuMemFree(dyd);
        OK(cuModuleUnload(mod));
        free(x); free(y); free(out); free(xd); free(yd); free(outd);
    }
}

Test(launch, reductions_static_and_dynamic_shared)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("reduce", modes[m]);
        int n = 1 + rand() % 20000;
        float *in = malloc(n * 4);
        int *ii = malloc(n * 4);
        double want = 0;
        long long iwant = 0;
        for (int i = 0; i < n; i++) {
            in[i] = (float)(rand() % 100) / 4.0f;   /* exact in float sums */
            ii[i] = rand() % 1000 - 500;
            want += in[i];
            iwant += ii[i];
        }
        int blocks = (n + 511) / 512;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, blocks * 4), dii = upload(ii, n * 4),
                    dsum = upload(NULL, 4);
        void *args[] = { &din, &dout, &n };
        OK(cuLaunchKernel(fn(mod, "reduce_sum"), blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        OK(cuMemsetD32(dsum, 0, 1));
        void *args2[] = { &dii, &dsum, &n };
        unsigned threads = 128;
        OK(cuLaunchKernel(fn(mod, "reduce_dyn"), 7, 1, 1, threads, 1, 1, threads * 4, NULL, args2, NULL));
        float *partial = malloc(blocks * 4);
        OK(cuMemcpyDtoH(partial, dout, blocks * 4));
        double got = 0;
        for (int b = 0; b < blocks; b++)
            got += partial[b];
        cr_assert_float_eq(got, want, 1e-3, "%s: sum %f want %f", modes[m], got, want);
        int isum;
        OK(cuMemcpyDtoH(&isum, dsum, 4));
        cr_assert_eq(isum, iwant, "%s: %d want %lld", modes[m], isum, iwant);
        cuMemFree(din); cuMemFree(dout); cuMemFree(dii); cuMemFree(dsum);
        OK(cuModuleUnload(mod));
        free(in); free(ii); free(partial);
    }
}

Test(launch, matmul_against_reference)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("matmul", modes[m]);
        int M = 1 + rand() % 48, N = 1 + rand() % 48, K = 1 + rand() % 48;
        float *A = malloc(M * K * 4), *B = malloc(K * N * 4), *C = malloc(M * N * 4);
        for (int i = 0; i < M * K; i++)
            A[i] = frand();
        for (int i = 0; i < K * N; i++)
            B[i] = frand();
        CUdeviceptr dA = upload(A, M * K * 4), dB = upload(B, K * N * 4), dC = upload(NULL, M * N * 4);
        void *args[] = { &dA, &dB, &dC, &M, &N, &K };
        OK(cuLaunchKernel(fn(mod, "matmul"), (N + 15) / 16, (M + 15) / 16, 1, 16, 16, 1, 0, NULL, args, NULL));
        OK(cuMemcpyDtoH(C, dC, M * N * 4));
        for (int r = 0; r < M; r++)
            for (int c = 0; c < N; c++) {
                double want = 0;
                for (int k = 0; k < K; k++)
                    want += (double)A[r * K + k] * B[k * N + c];
                cr_assert_float_eq(C[r * N + c], want, 1e-4, "%s C[%d][%d]", modes[m], r, c);
            }
        cuMemFree(dA); cuMemFree(dB); cuMemFree(dC);
        OK(cuModuleUnload(mod));
        free(A); free(B); free(C);
    }
}

Test(launch, histogram_and_gridstride)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("histogram", modes[m]);
        int n = 1 + rand() % 50000;
        unsigned char *data = malloc(n);
        unsigned want[64] = { 0 }, got[64];
        for (int i = 0; i < n; i++) {
            data[i] = (unsigned char)rand();
            want[data[i] % 64]++;
        }
        CUdeviceptr dd = upload(data, n), dh = upload(NULL, sizeof got);
        OK(cuMemsetD32(dh, 0, 64));
        void *args[] = { &dd, &n, &dh };
        OK(cuLaunchKernel(fn(mod, "histogram"), 13, 1, 1, 96, 1, 1, 0, NULL, args, NULL));
        OK(cuMemcpyDtoH(got, dh, sizeof got));
        cr_assert_eq(memcmp(got, want, sizeof got), 0, "%s histogram", modes[m]);
        cuMemFree(dd); cuMemFree(dh);
        OK(cuModuleUnload(mod));
        free(data);

        mod = load("gridstride", modes[m]);
        n = 1 + rand() % 5000;
        int k = rand() % 100;
        int *in = malloc(n * 4), *out = malloc(n * 4);
        for (int i = 0; i < n; i++)
            in[i] = rand() % 1000;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, n * 4);
        void *args2[] = { &din, &dout, &n, &k };
        OK(cuLaunchKernel(fn(mod, "gridstride"), 5, 1, 1, 64, 1, 1, 0, NULL, args2, NULL));
        OK(cuMemcpyDtoH(out, dout, n * 4));
        for (int i = 0; i < n; i++) {
            int local[16];
            for (int j = 0; j < 16; j++)
                local[j] = in[i] * (j + 1);
            local[(in[i] + k) & 15] += 1000;
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += local[(j * 7 + k) & 15] ^ j;
            cr_assert_eq(out[i], s, "%s gridstride[%d]", modes[m], i);
        }
        cuMemFree(din); cuMemFree(dout);
        OK(cuModuleUnload(mod));
        free(in); free(out);
    }
}

struct Params { const double *src; double *dst; long long n; double scale; int stride; char tag; };
struct Small { float a; short b; };

Test(launch, struct_parameters_and_extra_form)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("structparam", modes[m]);
        CUfunction f = fn(mod, "_Z12scale_struct6Params5Small");
        int n = 1 + rand() % 1000, stride = 1 + rand() % 3;
        double *src = malloc(n * stride * 8), *dst = malloc(n * 8);
        for (int i = 0; i < n * stride; i++)
            src[i] = frand();
        CUdeviceptr ds = upload(src, n * stride * 8), dd = upload(NULL, n * 8);
        struct Params p = { (const double *)(uintptr_t)ds, (double *)(uintptr_t)dd, n, frand(), stride, (char)(rand() % 50) };
        struct Small s = { frand(), (short)(rand() % 100) };
        if (m % 2 == 0) {
            void *args[] = { &p, &s };
            OK(cuLaunchKernel(f, (n + 31) / 32, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
        } else {
            /* The extra form: one packed buffer, offsets per the entry. */
            unsigned char buf[48] = { 0 };
            memcpy(buf, &p, 40);
            memcpy(buf + 40, &s, 8);
            size_t size = sizeof buf;
            void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                              CU_LAUNCH_PARAM_END };
            OK(cuLaunchKernel(f, (n + 31) / 32, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
        }
        OK(cuMemcpyDtoH(dst, dd, n * 8));
        for (int i = 0; i < n; i++) {
            double want = src[i * stride] * p.scale + s.a + s.b + p.tag;
            cr_assert_float_eq(dst[i], want, 1e-9, "%s dst[%d]", modes[m], i);
        }
        cuMemFree(ds); cuMemFree(dd);
        OK(cuModuleUnload(mod));
        free(src); free(dst);
    }
}

static int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }

Test(launch, device_functions_and_int64)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("funcs", modes[m]);
        int n = 1 + rand() % 2000;
        int *a = malloc(n * 4), *b = malloc(n * 4), *g = malloc(n * 4);
        float *f = malloc(n * 8);
        for (int i = 0; i < n; i++) {
            a[i] = 1 + rand() % 10000;
            b[i] = rand() % 10000;
        }
        CUdeviceptr da = upload(a, n * 4), db = upload(b, n * 4), dg = upload(NULL, n * 4), df = upload(NULL, n * 8);
        void *args[] = { &da, &db, &dg, &df, &n };
        OK(cuLaunchKernel(fn(mod, "call_funcs"), (n + 63) / 64, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
        OK(cuMemcpyDtoH(g, dg, n * 4));
        OK(cuMemcpyDtoH(f, df, n * 8));
        for (int i = 0; i < n; i++) {
            cr_assert_eq(g[i], gcd(a[i], b[i]), "%s gcd[%d]", modes[m], i);
            cr_assert_eq(f[2 * i], (float)a[i] + (float)b[i]);
            cr_assert_eq(f[2 * i + 1], (float)a[i] * (float)b[i]);
        }
        cuMemFree(da); cuMemFree(db); cuMemFree(dg); cuMemFree(df);
        OK(cuModuleUnload(mod));
        free(a); free(b); free(g); free(f);
    }
}

Test(launch, globals_constant_and_device)
{
    CUmodule mod = load("globals", "default");
    CUdeviceptr off;
    OK(cuModuleGetGlobal(&off, NULL, mod, "offset_c"));
    int o = rand() % 100;
    OK(cuMemcpyHtoD(off, &o, 4));
    int n = 1 + rand() % 1000;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (int i = 0; i < n; i++)
        x[i] = frand();
    CUdeviceptr dx = upload(x, n * 4), dy = upload(NULL, n * 4), dc = upload(NULL, 4);
    void *args[] = { &dx, &dy, &n };
    OK(cuLaunchKernel(fn(mod, "use_globals"), (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    void *args2[] = { &dc };
    OK(cuLaunchKernel(fn(mod, "read_counter"), 1, 1, 1, 1, 1, 1, 0, NULL, args2, NULL));
    OK(cuMemcpyDtoH(y, dy, n * 4));
    static const float table[8] = { 0, 1, 4, 9, 16, 25, 36, 49 };
    for (int i = 0; i < n; i++) {
        float v = x[i];
        float want = 1.0f + 2.0f * v + 3.0f * v * v + 0.5f * table[i & 7] + (float)o;
        cr_assert_float_eq(y[i], want, 1e-4, "y[%d]", i);
    }
    int counter;
    OK(cuMemcpyDtoH(&counter, dc, 4));
    cr_expect_eq(counter, 5 + n);
    OK(cuModuleUnload(mod));
    free(x);
    free(y);
}

Test(launch, library_kernel_as_function_and_launch_ex)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernels/vecadd.default.fatbin", RIG_BUILD_DIR);
    size_t sz;
    char *img = support_read_file(path, &sz);
    struct { uint32_t magic, version; const void *data; void *unused; } w = { 0x466243B1u, 1, img, NULL };
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, &w, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    OK(cuLibraryGetKernel(&k, lib, "vecadd_i32"));
    int n = 1000;
    int *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (int i = 0; i < n; i++) {
        a[i] = rand();
        b[i] = rand() % 1000;
    }
    CUdeviceptr da = upload(a, n * 4), db = upload(b, n * 4), dc = upload(NULL, n * 4);
    void *args[] = { &da, &db, &dc, &n };
    /* cudart hands the CUkernel where a CUfunction is expected. */
    OK(cuLaunchKernel((CUfunction)k, 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    OK(cuMemcpyDtoH(c, dc, n * 4));
    for (int i = 0; i < n; i++)
        cr_assert_eq(c[i], (int)((unsigned)a[i] + (unsigned)b[i]));
    OK(cuMemsetD32(dc, 0, n));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value.priority = 0 };
    CUlaunchConfig cfg = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 256, .blockDimY = 1,
                           .blockDimZ = 1, .hStream = s, .attrs = &attr, .numAttrs = 1 };
    CUfunction f;
    OK(cuKernelGetFunction(&f, k));
    OK(cuLaunchKernelEx(&cfg, f, args, NULL));
    OK(cuStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        cr_assert_eq(((int *)(uintptr_t)dc)[i], (int)((unsigned)a[i] + (unsigned)b[i]));
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    cr_expect_eq(cuLaunchKernelEx(&cfg, f, args, NULL), CUDA_ERROR_NOT_SUPPORTED);
    OK(cuStreamDestroy(s));
    OK(cuLibraryUnload(lib));
    free(img); free(a); free(b); free(c);
}

Test(launch, bad_launches_get_clear_errors)
{
    CUmodule mod = load("vecadd", "default");
    CUfunction f = fn(mod, "vecadd");
    CUdeviceptr d = upload(NULL, 64);
    int n = 16;
    void *args[] = { &d, &d, &d, &n };
    /* A geometry no device runs: CUresult 9, which cudart reports as
     * cudaErrorInvalidConfiguration (not named in cuda.h). */
    const CUresult invalid_configuration = (CUresult)9;
    cr_expect_eq(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL), invalid_configuration);
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), invalid_configuration);
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, args, NULL), invalid_configuration);
    cr_expect_eq(cuLaunchKernel(f, 1, 70000, 1, 32, 1, 1, 0, NULL, args, NULL), invalid_configuration);
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 60000, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    void *holes[] = { &d, NULL, &d, &n };
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, holes, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(cuLaunchKernel((CUfunction)&n, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)&n, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    /* extra with the wrong parameter size: 28 bytes are needed. */
    unsigned char buf[64] = { 0 };
    size_t sizes[] = { 0, 8, 27, 64 };
    for (size_t i = 0; i < 4; i++) {
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &sizes[i],
                          CU_LAUNCH_PARAM_END };
        cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_INVALID_VALUE,
                     "size %zu", sizes[i]);
    }
    size_t good = 28;
    void *no_end[] = { CU_LAUNCH_PARAM_BUFFER_SIZE, &good, (void *)0x77, NULL, CU_LAUNCH_PARAM_END };
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, no_end), CUDA_ERROR_INVALID_VALUE);
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &good, CU_LAUNCH_PARAM_END };
    cr_expect_eq(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
    /* None of that poisoned the context. */
    OK(cuCtxSynchronize());
    OK(cuModuleUnload(mod));
}

/* Runs fn with fd `fd` captured into a pipe; returns what was written. */
static char *capture(int fd, void (*fn)(void *), void *arg)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    int saved = dup(fd);
    dup2(p[1], fd);
    close(p[1]);
    fn(arg);
    dup2(saved, fd);
    close(saved);
    char *out = calloc(1, 1 << 16);
    size_t n = 0;
    ssize_t r;
    while ((r = read(p[0], out + n, (1 << 16) - 1 - n)) > 0)
        n += (size_t)r;
    close(p[0]);
    return out;
}

static void oob_launch(void *arg)
{
    CUresult *res = arg;
    CUmodule mod = load("vecadd", "default");
    CUfunction f = fn(mod, "vecadd_i32");
    CUdeviceptr d = upload(NULL, 64 * 4);
    CUdeviceptr bad = 0x10000;   /* no allocation */
    int n = 64;
    void *args[] = { &d, &d, &bad, &n };
    res[0] = cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL);
    res[1] = cuCtxSynchronize();
}

Test(launch, illegal_address_is_sticky_and_named)
{
    CUresult res[2];
    char *err = capture(2, oob_launch, res);
    cr_expect_eq(res[0], CUDA_SUCCESS);               /* asynchronous */
    cr_expect_eq(res[1], CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_log_info("stderr: %s", err);
    cr_expect(strstr(err, "vecadd_i32") && strstr(err, "ILLEGAL_ADDRESS"), "stderr: %s", err);
    cr_expect(strstr(err, "0x10000") || strstr(err, "0x0000000000010000") || strstr(err, "10000"), "stderr: %s", err);
    cr_expect_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s", err);
    free(err);
    /* Sticky: every later call in the context says so. */
    CUdeviceptr p;
    cr_expect_eq(cuMemAlloc(&p, 8), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_expect_eq(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    cr_expect_eq(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* Another context is unaffected. */
    CUcontext other;
    OK(cuCtxCreate(&other, NULL, 0, 0));
    OK(cuMemAlloc(&p, 8));
    OK(cuCtxDestroy(other));
}

static void printf_launch(void *arg)
{
    (void)arg;
    CUmodule mod = load("printf", "default");
    int base = 5;
    double d = 0.5;
    void *args[] = { &base, &d };
    OK(cuLaunchKernel(fn(mod, "hello"), 2, 1, 1, 8, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuModuleUnload(mod));
}

Test(launch, device_printf_goes_to_fd_1)
{
    char *out = capture(1, printf_launch, NULL);
    /* Threads 0, 3, 6, 9, 12, 15 print. */
    int lines = 0;
    for (char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    cr_expect_eq(lines, 6, "output: %s", out);
    cr_expect(strstr(out, "thread 3 base 5 val 1.500 hex 3333 str ok c D ll 30000000000\n"), "output: %s", out);
    free(out);
}

Test(launch, stream_is_busy_while_a_kernel_runs)
{
    CUmodule mod = load("matmul", "debug");
    int M = 192, N = 192, K = 192;
    CUdeviceptr dA = upload(NULL, M * K * 4), dB = upload(NULL, K * N * 4), dC = upload(NULL, M * N * 4);
    OK(cuMemsetD32(dA, 0x3f800000, M * K));
    OK(cuMemsetD32(dB, 0x3f800000, K * N));
    /* The memsets are asynchronous on the NULL stream, which a non-blocking
     * stream does not wait for (through rig they really are). */
    OK(cuCtxSynchronize());
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent start, stop;
    OK(cuEventCreate(&start, 0));
    OK(cuEventCreate(&stop, 0));
    void *args[] = { &dA, &dB, &dC, &M, &N, &K };
    OK(cuEventRecord(start, s));
    OK(cuLaunchKernel(fn(mod, "matmul"), N / 16, M / 16, 1, 16, 16, 1, 0, s, args, NULL));
    OK(cuEventRecord(stop, s));
    cr_expect_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    cr_expect_eq(cuEventQuery(stop), CUDA_ERROR_NOT_READY);
    OK(cuStreamSynchronize(s));
    OK(cuStreamQuery(s));
    float ms;
    OK(cuEventElapsedTime(&ms, start, stop));
    cr_log_info("matmul 192^3 (debug build) took %.1f ms", ms);
    cr_expect_gt(ms, 0.0f);
    float c;
    OK(cuMemcpyDtoH(&c, dC + 4 * 100, 4));
    cr_expect_eq(c, (float)K);
    OK(cuStreamDestroy(s));
    OK(cuModuleUnload(mod));
}

Test(launch, concurrent_streams_and_event_ordering)
{
    CUmodule mod = load("vecadd", "default");
    CUfunction f = fn(mod, "vecadd");
    enum { S = 4, ROUNDS = 10 };
    int n = 20000;
    float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 4);
    for (int i = 0; i < n; i++) {
        a[i] = frand();
        b[i] = frand();
    }
    CUdeviceptr da = upload(a, n * 4), db = upload(b, n * 4);
    CUstream s[S];
    CUdeviceptr c[S], d[S];
    CUevent e[S];
    for (int k = 0; k < S; k++) {
        OK(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
        OK(cuEventCreate(&e[k], CU_EVENT_DISABLE_TIMING));
        c[k] = upload(NULL, n * 4);
        d[k] = upload(NULL, n * 4);
    }
    /* Stream k computes c = a + b; stream k+1 waits for it and computes
     * d = c + b. All streams run at once. */
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < S; k++) {
            void *args[] = { &da, &db, &c[k], &n };
            OK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s[k], args, NULL));
            OK(cuEventRecord(e[k], s[k]));
        }
        for (int k = 0; k < S; k++) {
            int src = (k + S - 1) % S;
            OK(cuStreamWaitEvent(s[k], e[src], 0));
            void *args[] = { &c[src], &db, &d[k], &n };
            OK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s[k], args, NULL));
        }
    }
    OK(cuCtxSynchronize());
    for (int k = 0; k < S; k++) {
        OK(cuMemcpyDtoH(out, d[k], n * 4));
        for (int i = 0; i < n; i++)
            cr_assert_eq(out[i], (a[i] + b[i]) + b[i], "stream %d [%d]", k, i);
        OK(cuStreamDestroy(s[k]));
        OK(cuEventDestroy(e[k]));
    }
    OK(cuModuleUnload(mod));
    free(a); free(b); free(out);
}

Test(launch, unload_waits_for_queued_launches)
{
    CUmodule mod = load("matmul", "debug");
    int M = 128, N = 128, K = 128;
    CUdeviceptr dA = upload(NULL, M * K * 4), dB = upload(NULL, K * N * 4), dC = upload(NULL, M * N * 4);
    OK(cuMemsetD32(dA, 0x40000000, M * K));   /* 2.0f */
    OK(cuMemsetD32(dB, 0x3f800000, K * N));   /* 1.0f */
    OK(cuCtxSynchronize());   /* a non-blocking stream does not wait for them */
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    void *args[] = { &dA, &dB, &dC, &M, &N, &K };
    for (int i = 0; i < 3; i++)
        OK(cuLaunchKernel(fn(mod, "matmul"), N / 16, M / 16, 1, 16, 16, 1, 0, s, args, NULL));
    OK(cuModuleUnload(mod));   /* returns once the queued launches ran */
    OK(cuStreamSynchronize(s));
    float c;
    OK(cuMemcpyDtoH(&c, dC + 4 * 777, 4));
    cr_expect_eq(c, 2.0f * K);
    OK(cuStreamDestroy(s));
}

/* Cooperative launches: every block runs at once (here each block's first
 * thread waits, in a spin on global memory, until every block arrived:
 * blocks run one after another would never finish), the grid workspace in
 * %envreg1:%envreg2 is set for them alone, and a grid larger than can be
 * resident is refused. */
static const char coop_ptx[] =
    ".version 9.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry arrive(.param .u64 counter, .param .u64 out)\n{\n"
    "  .reg .pred %p<4>;\n  .reg .b32 %r<10>;\n  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [counter];\n  ld.param.u64 %rd2, [out];\n"
    "  mov.u32 %r1, %tid.x;\n  setp.ne.u32 %p1, %r1, 0;\n  @%p1 bra DONE;\n"
    "  mov.u32 %r2, %nctaid.x;\n  atom.add.release.gpu.u32 %r3, [%rd1], 1;\n"
    "SPIN:\n  ld.acquire.gpu.u32 %r4, [%rd1];\n  setp.lt.u32 %p2, %r4, %r2;\n  @%p2 bra SPIN;\n"
    "  mov.u32 %r5, %ctaid.x;\n  mul.wide.u32 %rd3, %r5, 8;\n  add.s64 %rd4, %rd2, %rd3;\n"
    "  mov.u32 %r6, %envreg1;\n  mov.u32 %r7, %envreg2;\n"
    "  st.global.u32 [%rd4], %r7;\n  st.global.u32 [%rd4+4], %r6;\n"
    "  cvt.u64.u32 %rd5, %r6;\n  cvt.u64.u32 %rd6, %r7;\n  bfi.b64 %rd7, %rd5, %rd6, 32, 32;\n"
    "  setp.eq.u64 %p3, %rd7, 0;\n  @%p3 bra DONE;\n"
    "  membar.gl;\n  atom.add.release.gpu.u32 %r8, [%rd7+4], 1;\n"
    "DONE:\n  ret;\n}\n";

Test(launch, cooperative_blocks_run_at_once)
{
    int coop = 0, sms = 0, per_sm = 0;
    OK(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0));
    OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    cr_expect_eq(coop, 1);
    CUmodule m;
    OK(cuModuleLoadData(&m, coop_ptx));
    CUfunction f = fn(m, "arrive");
    OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 64, 0));
    cr_assert_gt(per_sm, 0);
    const unsigned blocks = 48;   /* more than this machine's cores or the pool's threads */
    cr_assert_leq(blocks, (unsigned)(per_sm * sms));
    CUdeviceptr counter = upload(NULL, 4), out = upload(NULL, blocks * 8);
    void *args[] = { &counter, &out };
    OK(cuLaunchCooperativeKernel(f, blocks, 1, 1, 64, 1, 1, 0, NULL, args));
    OK(cuCtxSynchronize());
    uint64_t ws[48];
    OK(cuMemcpyDtoH(ws, out, sizeof ws));
    for (unsigned b = 0; b < blocks; b++) {
        cr_expect_neq(ws[b], 0, "block %u saw no workspace", b);
        cr_expect_eq(ws[b], ws[0], "block %u saw another workspace", b);
    }
    /* The same through cuLaunchKernelEx's attribute. */
    OK(cuMemsetD8(counter, 0, 4));
    CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1 };
    CUlaunchConfig cfg = { .gridDimX = blocks, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64, .blockDimY = 1,
                           .blockDimZ = 1, .attrs = &attr, .numAttrs = 1 };
    OK(cuLaunchKernelEx(&cfg, f, args, NULL));
    OK(cuCtxSynchronize());
    uint32_t arrived = 0;
    OK(cuMemcpyDtoH(&arrived, counter, 4));
    cr_expect_eq(arrived, blocks);
    /* A plain launch has no workspace (grid.sync() traps on it, as on a GPU). */
    OK(cuMemsetD8(counter, 0x7f, 4));   /* already past every block: no wait */
    OK(cuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(ws, out, 16));
    cr_expect(ws[0] == 0 && ws[1] == 0, "%#llx %#llx", (unsigned long long)ws[0], (unsigned long long)ws[1]);
    /* One block more than can be resident. */
    cr_expect_eq(cuLaunchCooperativeKernel(f, (unsigned)(per_sm * sms) + 1, 1, 1, 64, 1, 1, 0, NULL, args),
                 CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    cfg.gridDimX = (unsigned)(per_sm * sms) + 1;
    cr_expect_eq(cuLaunchKernelEx(&cfg, f, args, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    OK(cuCtxSynchronize());
    OK(cuMemFree(counter));
    OK(cuMemFree(out));
    OK(cuModuleUnload(m));
}
