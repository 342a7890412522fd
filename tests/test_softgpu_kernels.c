/* softgpu running the remaining kernels of tests/kernels through the driver
 * API, in every mode, on fresh random inputs against CPU references: warp
 * shuffles and votes, bit operations, 64-bit and 128-bit integer math, f16,
 * float and double math, global atomics, asynchronous copies into shared
 * memory (cp.async and mbarriers in the sm90 mode), virtual functions and
 * function pointers. (test_softgpu_launch has the others.) */
#include "tests/support.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <limits.h>
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

TestSuite(kernels, .init = setup, .timeout = 60);

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

static void run(CUfunction f, unsigned grid, unsigned block, void **args)
{
    OK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, NULL, args, NULL));
    OK(cuCtxSynchronize());
}

static uint64_t rand64(void)
{
    return (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ (uint64_t)rand();
}

Test(kernels, warp_sum_and_votes)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("warpreduce", modes[m]);
        int n = 1 + rand() % 3000;
        int blocks = (n + 127) / 128, warps = blocks * 4;
        int *in = malloc(n * 4), *out = malloc(warps * 4);
        unsigned *ballots = malloc(warps * 16);
        for (int i = 0; i < n; i++)
            in[i] = rand() % 2001 - 1000;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, warps * 4), db = upload(NULL, warps * 16);
        void *args[] = { &din, &dout, &db, &n };
        run(fn(mod, "warp_sum"), blocks, 128, args);
        OK(cuMemcpyDtoH(out, dout, warps * 4));
        OK(cuMemcpyDtoH(ballots, db, warps * 16));
        for (int w = 0; w < warps; w++) {
            int sum = 0, any = 0, all = 1;
            unsigned ballot = 0;
            for (int l = 0; l < 32; l++) {
                int i = w * 32 + l;
                if (i < n) {
                    sum += in[i];
                    ballot |= (unsigned)(in[i] & 1) << l;
                    any |= in[i] < 0;
                } else {
                    all = 0;
                }
            }
            cr_assert_eq(out[w], sum, "%s warp %d sum", modes[m], w);
            cr_assert_eq(ballots[w * 4 + 0], ballot, "%s warp %d ballot", modes[m], w);
            cr_assert_eq(ballots[w * 4 + 1], (unsigned)any, "%s warp %d any", modes[m], w);
            cr_assert_eq(ballots[w * 4 + 2], (unsigned)all, "%s warp %d all", modes[m], w);
            cr_assert_eq(ballots[w * 4 + 3], 0xffffffffu, "%s warp %d activemask", modes[m], w);
        }
        /* Bit operations. */
        unsigned *u = malloc(n * 4), *bits = malloc(n * 16);
        for (int i = 0; i < n; i++)
            u[i] = i % 17 == 0 ? 0 : (unsigned)rand64();
        CUdeviceptr du = upload(u, n * 4), dbits = upload(NULL, n * 16);
        void *args2[] = { &du, &dbits, &n };
        run(fn(mod, "bits"), (n + 63) / 64, 64, args2);
        OK(cuMemcpyDtoH(bits, dbits, n * 16));
        for (int i = 0; i < n; i++) {
            unsigned x = u[i], r = 0;
            for (int b = 0; b < 32; b++)
                r |= ((x >> b) & 1u) << (31 - b);
            cr_assert_eq(bits[i * 4 + 0], (unsigned)__builtin_popcount(x), "%s popc(%#x)", modes[m], x);
            cr_assert_eq(bits[i * 4 + 1], x ? (unsigned)__builtin_clz(x) : 32u, "%s clz(%#x)", modes[m], x);
            cr_assert_eq(bits[i * 4 + 2], r, "%s brev(%#x)", modes[m], x);
            cr_assert_eq(bits[i * 4 + 3], (unsigned)__builtin_ffs((int)x), "%s ffs(%#x)", modes[m], x);
        }
        cuMemFree(din); cuMemFree(dout); cuMemFree(db); cuMemFree(du); cuMemFree(dbits);
        OK(cuModuleUnload(mod));
        free(in); free(out); free(ballots); free(u); free(bits);
    }
}

Test(kernels, shuffles)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("shuffle", modes[m]);
        int n = 1 + rand() % 2000, delta = 1 + rand() % 7;
        int threads = (n + 63) / 64 * 64;
        int *in = malloc(n * 4), *out = malloc((size_t)threads * 24);
        for (int i = 0; i < n; i++)
            in[i] = rand() % 100000;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, (size_t)threads * 24);
        void *args[] = { &din, &dout, &n, &delta };
        run(fn(mod, "shuffles"), threads / 64, 64, args);
        OK(cuMemcpyDtoH(out, dout, (size_t)n * 24));
        for (int i = 0; i < n; i++) {
            int w = i & ~31, l = i & 31;
            #define V(lane) ((w + (lane)) < n ? in[w + (lane)] : -1)
            int want[6];
            want[0] = l >= delta ? V(l - delta) : V(l);
            want[1] = l + delta < 32 ? V(l + delta) : V(l);
            want[2] = V(l ^ delta);
            want[3] = V((l * 7 + delta) & 31);
            want[4] = V((l & ~7) + (delta & 7));
            int seg = l & 15;
            float f = seg + 1 < 16 ? (float)V(l + 1) * 0.5f : (float)V(l) * 0.5f;
            want[5] = (int)(f * 2.0f);
            #undef V
            for (int k = 0; k < 6; k++)
                cr_assert_eq(out[i * 6 + k], want[k], "%s thread %d value %d delta %d", modes[m], i, k, delta);
        }
        /* A butterfly sum of doubles in every lane. */
        double *d = malloc(threads * 8), *dsum = malloc(threads * 8);
        for (int i = 0; i < n; i++)
            d[i] = rand() % 1000;
        CUdeviceptr dd = upload(d, n * 8), ds = upload(NULL, threads * 8);
        void *args2[] = { &dd, &ds, &n };
        run(fn(mod, "shuffle64"), threads / 64, 64, args2);
        OK(cuMemcpyDtoH(dsum, ds, n * 8));
        for (int i = 0; i < n; i++) {
            double want = 0;
            for (int l = 0; l < 32; l++)
                want += (i & ~31) + l < n ? d[(i & ~31) + l] : 0.0;
            cr_assert_eq(dsum[i], want, "%s shuffle64[%d]", modes[m], i);
        }
        cuMemFree(din); cuMemFree(dout); cuMemFree(dd); cuMemFree(ds);
        OK(cuModuleUnload(mod));
        free(in); free(out); free(d); free(dsum);
    }
}

Test(kernels, int64_and_int128)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("int64", modes[m]);
        int n = 1 + rand() % 2000;
        uint64_t *a = malloc(n * 8), *b = malloc(n * 8), *out = malloc((size_t)n * 80);
        for (int i = 0; i < n; i++) {
            a[i] = rand64();
            b[i] = i % 5 == 0 ? rand64() >> (rand() % 60) : rand64();
        }
        CUdeviceptr da = upload(a, n * 8), db = upload(b, n * 8), dout = upload(NULL, (size_t)n * 80);
        void *args[] = { &da, &db, &dout, &n };
        run(fn(mod, "int64ops"), (n + 127) / 128, 128, args);
        OK(cuMemcpyDtoH(out, dout, (size_t)n * 80));
        for (int i = 0; i < n; i++) {
            uint64_t x = a[i], y = b[i] | 1;
            int64_t sx = (int64_t)x, sy = (int64_t)y;
            int64_t div = sy >> 40 | 1;
            uint64_t want[10];
            want[0] = x * y;
            want[1] = (uint64_t)(((unsigned __int128)x * y) >> 64);
            want[2] = (uint64_t)(((__int128)sx * sy) >> 64);
            want[3] = x / y;
            want[4] = x % y;
            want[5] = (sx == INT64_MIN && div == -1) ? out[i * 10 + 5] : (uint64_t)(sx / div);
            want[6] = (x << (y & 63)) ^ (x >> (y & 31)) ^ (uint64_t)(sx >> 7);
            unsigned __int128 p = (unsigned __int128)x * y + (unsigned __int128)x + y;
            want[7] = (uint64_t)p;
            want[8] = (uint64_t)(p >> 64);
            want[9] = (uint64_t)(__builtin_popcountll(x) + __builtin_clzll(y) + (x > y) + (sx < sy));
            for (int k = 0; k < 10; k++)
                cr_assert_eq(out[i * 10 + k], want[k], "%s [%d] op %d: %#llx vs %#llx (x %#llx y %#llx)", modes[m], i,
                             k, (unsigned long long)out[i * 10 + k], (unsigned long long)want[k],
                             (unsigned long long)x, (unsigned long long)y);
        }
        cuMemFree(da); cuMemFree(db); cuMemFree(dout);
        OK(cuModuleUnload(mod));
        free(a); free(b); free(out);
    }
}

Test(kernels, half_precision)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("half", modes[m]);
        int n = 1 + rand() % 2000;
        float *a = malloc(n * 4), *b = malloc(n * 4), *out = malloc(n * 12);
        for (int i = 0; i < n; i++) {
            a[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 16.0f;
            b[i] = ((float)rand() / (float)RAND_MAX - 0.5f) * 16.0f;
        }
        CUdeviceptr da = upload(a, n * 4), db = upload(b, n * 4), dout = upload(NULL, n * 12);
        void *args[] = { &da, &db, &dout, &n };
        run(fn(mod, "halfops"), (n + 127) / 128, 128, args);
        OK(cuMemcpyDtoH(out, dout, n * 12));
        for (int i = 0; i < n; i++) {
            _Float16 x = (_Float16)a[i], y = (_Float16)b[i];
            /* Sums and products of two halves are exact in double: one rounding. */
            _Float16 s = (_Float16)((double)x + (double)y);
            _Float16 p = (_Float16)((double)x * (double)y);
            double f = (double)x * (double)y + (double)s;
            cr_assert_eq(out[i * 3 + 0], (float)s, "%s hadd(%g, %g)", modes[m], (double)x, (double)y);
            cr_assert_eq(out[i * 3 + 1], (float)p, "%s hmul(%g, %g)", modes[m], (double)x, (double)y);
            cr_assert_float_eq(out[i * 3 + 2], f, fabs(f) / 1024 + 1e-3, "%s hfma", modes[m]);
        }
        cuMemFree(da); cuMemFree(db); cuMemFree(dout);
        OK(cuModuleUnload(mod));
        free(a); free(b); free(out);
    }
}

static void near(double got, double want, double rel, double abs, const char *what, const char *mode, int i)
{
    cr_assert(fabs(got - want) <= abs + rel * fabs(want), "%s %s[%d]: %.9g vs %.9g", mode, what, i, got, want);
}

Test(kernels, float_and_double_math)
{
    for (size_t m = 0; m < NMODES; m++) {
        bool fast = strcmp(modes[m], "fast") == 0;
        CUmodule mod = load("math", modes[m]);
        int n = 1 + rand() % 1000;
        float *x = malloc(n * 4), *out = malloc((size_t)n * 48);
        double *xd = malloc(n * 8), *outd = malloc((size_t)n * 64);
        for (int i = 0; i < n; i++) {
            x[i] = 0.1f + (float)rand() / (float)RAND_MAX * 2.9f;
            xd[i] = 0.1 + (double)rand() / RAND_MAX * 2.9;
        }
        CUdeviceptr dx = upload(x, n * 4), dout = upload(NULL, (size_t)n * 48);
        CUdeviceptr dxd = upload(xd, n * 8), doutd = upload(NULL, (size_t)n * 64);
        void *args[] = { &dx, &dout, &n };
        void *argsd[] = { &dxd, &doutd, &n };
        run(fn(mod, "fmath"), (n + 127) / 128, 128, args);
        run(fn(mod, "dmath"), (n + 127) / 128, 128, argsd);
        OK(cuMemcpyDtoH(out, dout, (size_t)n * 48));
        OK(cuMemcpyDtoH(outd, doutd, (size_t)n * 64));
        double rel = fast ? 2e-3 : 2e-6, abs = fast ? 2e-3 : 1e-6;
        for (int i = 0; i < n; i++) {
            float v = x[i];
            const float *o = out + (size_t)i * 12;
            near(o[0], sqrt(v), rel, abs, "sqrtf", modes[m], i);
            near(o[1], exp(v), rel, abs, "expf", modes[m], i);
            near(o[2], log(v), rel, abs, "logf", modes[m], i);
            near(o[3], sin(v), rel, abs, "sinf", modes[m], i);
            near(o[4], cos(v), rel, abs, "cosf", modes[m], i);
            near(o[5], 1 / sqrt(v), rel, abs, "rsqrtf", modes[m], i);
            near(o[6], 1.0 / v, rel, abs, "1/v", modes[m], i);
            near(o[7], tanh(v), rel, abs, "tanhf", modes[m], i);
            cr_assert_eq(o[8], fminf(v, 2.0f) + fmaxf(v, 0.5f), "%s min/max[%d]", modes[m], i);
            cr_assert_eq(o[9], floorf(v * 3.3f) + ceilf(v) + truncf(v * 7.1f) + rintf(v * 2.5f), "%s rounding[%d]",
                         modes[m], i);
            cr_assert_eq(o[10], copysignf(v, -1.0f) + fabsf(-v), "%s copysign[%d]", modes[m], i);
            cr_assert_eq(o[11], (float)(int)(v * 100.0f) + (float)(unsigned)(v * 10.0f), "%s cvt[%d]", modes[m], i);
            double w = xd[i];
            const double *od = outd + (size_t)i * 8;
            near(od[0], sqrt(w), 1e-15, 0, "sqrt", modes[m], i);
            near(od[1], exp(w), 1e-14, 0, "exp", modes[m], i);
            near(od[2], log(w), 1e-14, 1e-15, "log", modes[m], i);
            near(od[3], sin(w), 1e-14, 1e-15, "sin", modes[m], i);
            near(od[4], 1.0 / w, 1e-15, 0, "1/w", modes[m], i);
            near(od[5], w / 3.0, 1e-15, 0, "w/3", modes[m], i);
            cr_assert_eq(od[6], floor(w * 3.3) + ceil(w) + fmin(w, 1.5) + fmax(w, 0.75), "%s drounding[%d]", modes[m], i);
            cr_assert_eq(od[7], (double)(long long)(w * 1000.0) + (double)(float)w, "%s dcvt[%d]", modes[m], i);
        }
        cuMemFree(dx); cuMemFree(dout); cuMemFree(dxd); cuMemFree(doutd);
        OK(cuModuleUnload(mod));
        free(x); free(out); free(xd); free(outd);
    }
}

Test(kernels, global_atomics)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("histogram", modes[m]);
        int n = 1 + rand() % 5000;
        int *in = malloc(n * 4);
        int imax = INT_MIN;
        unsigned ior = 0;
        float fsum = 0;
        double dsum = 0;
        for (int i = 0; i < n; i++) {
            in[i] = rand() % 200001 - 100000;
            if (in[i] > imax)
                imax = in[i];
            ior |= 1u << (in[i] & 31);
            fsum += (float)(in[i] & 15);
            dsum += in[i];
        }
        struct { int imax; unsigned ior; float fsum; int pad; double dsum; int cas, exch; } init = { INT_MIN, 0, 0, 0, 0, 0, 0 }, got;
        CUdeviceptr din = upload(in, n * 4), dv = upload(&init, sizeof init);
        CUdeviceptr pimax = dv, pior = dv + 4, pf = dv + 8, pd = dv + 16, pcas = dv + 24, pexch = dv + 28;
        void *args[] = { &din, &n, &pimax, &pior, &pf, &pd, &pcas, &pexch };
        run(fn(mod, "atomics"), (n + 255) / 256, 256, args);
        OK(cuMemcpyDtoH(&got, dv, sizeof got));
        cr_assert_eq(got.imax, imax, "%s max", modes[m]);
        cr_assert_eq(got.ior, ior, "%s or", modes[m]);
        cr_assert_eq(got.fsum, fsum, "%s float sum", modes[m]);
        cr_assert_eq(got.dsum, dsum, "%s double sum", modes[m]);
        cr_assert_eq(got.cas, n, "%s cas count", modes[m]);
        cr_assert_eq(got.exch, 7, "%s exch", modes[m]);
        cuMemFree(din); cuMemFree(dv);
        OK(cuModuleUnload(mod));
        free(in);
    }
}

Test(kernels, vector_accesses_are_never_torn)
{
    for (size_t m = 0; m < NMODES; m++) {
        CUmodule mod = load("pairs", modes[m]);
        unsigned rounds = 400000, result[3];
        CUdeviceptr pair = upload(NULL, 8), quad = upload(NULL, 16), dres = upload(NULL, sizeof result);
        void *args[] = { &pair, &quad, &rounds, &dres };
        run(fn(mod, "torn_pairs"), 2, 32, args);
        OK(cuMemcpyDtoH(result, dres, sizeof result));
        cr_assert_eq(result[0], 0, "%s: %u of %u reads saw a vector half written", modes[m], result[0], result[1]);
        cr_assert_eq(result[2], rounds, "%s: the reader ended at %u", modes[m], result[2]);
        OK(cuMemFree(pair));
        OK(cuMemFree(quad));
        OK(cuMemFree(dres));
        OK(cuModuleUnload(mod));
    }
}

/* Every mode and the sm90 one, whose asynchronous copies are cp.async,
 * cp.async.bulk and mbarrier waits. */
static const char *all_modes[] = { "default", "fast", "debug", "nocomp", "speed", "size", "sm90" };
#define NALL (sizeof all_modes / sizeof *all_modes)

Test(kernels, async_copies)
{
    for (size_t m = 0; m < NALL; m++) {
        const char *md = all_modes[m];
        CUmodule mod = load("asynccopy", md);
        /* a block-wide pipeline over tiles the blocks take in turn */
        int tiles = 1 + rand() % 40, blocks = 1 + rand() % 6, n = tiles * 128;
        int *in = malloc(n * 4), *out = malloc(n * 4);
        for (int i = 0; i < n; i++)
            in[i] = rand() - RAND_MAX / 2;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, n * 4);
        void *a1[] = { &din, &dout, &tiles };
        run(fn(mod, "staged_copy"), blocks, 64, a1);
        OK(cuMemcpyDtoH(out, dout, n * 4));
        for (int i = 0; i < n; i++)
            cr_assert_eq(out[i], 2 * in[i] + 1, "%s staged %d of %d tiles, %d blocks", md, i, tiles, blocks);
        cuMemFree(din); cuMemFree(dout);
        free(in); free(out);

        /* zero-filled 16-byte copies: the input ends mid-chunk, exactly at
         * its allocation's end */
        int len = 1 + rand() % 3000, threads = 128, pblocks = (len + 4 * threads - 1) / (4 * threads);
        int total = pblocks * threads * 4;
        in = malloc(len * 4);
        out = malloc(total * 4);
        for (int i = 0; i < len; i++)
            in[i] = rand() | 1;
        din = upload(in, len * 4);
        dout = upload(NULL, total * 4);
        void *a2[] = { &din, &dout, &len };
        run(fn(mod, "padded_copy"), pblocks, threads, a2);
        OK(cuMemcpyDtoH(out, dout, total * 4));
        for (int b = 0; b < pblocks; b++)
            for (int t = 0; t < threads; t++)
                for (int k = 0; k < 4; k++) {
                    int src = (b * threads + (t + 1) % threads) * 4 + k;
                    int want = src < len ? in[src] : 0;
                    cr_assert_eq(out[(b * threads + t) * 4 + k], want, "%s padded: block %d thread %d word %d (len %d)",
                                 md, b, t, k, len);
                }
        cuMemFree(din); cuMemFree(dout);
        free(in); free(out);

        /* per-thread pipeline of 4-byte copies */
        int pb = 1 + rand() % 5;
        float *fin = malloc((pb * 256 + 1) * 4), *fout = malloc(pb * 256 * 4);
        for (int i = 0; i < pb * 256 + 1; i++)
            fin[i] = (float)(rand() % 1000);
        din = upload(fin, (pb * 256 + 1) * 4);
        dout = upload(NULL, pb * 256 * 4);
        void *a3[] = { &din, &dout };
        run(fn(mod, "pairs_copy"), pb, 256, a3);
        OK(cuMemcpyDtoH(fout, dout, pb * 256 * 4));
        for (int i = 0; i < pb * 256; i++)
            cr_assert_eq(fout[i], fin[i] + fin[i + 1], "%s pairs %d", md, i);
        cuMemFree(din); cuMemFree(dout);
        free(fin); free(fout);

        /* a tile completing on a cuda::barrier */
        int bb = 1 + rand() % 5;
        in = malloc(bb * 256 * 4);
        out = malloc(bb * 256 * 4);
        for (int i = 0; i < bb * 256; i++)
            in[i] = rand();
        din = upload(in, bb * 256 * 4);
        dout = upload(NULL, bb * 256 * 4);
        void *a4[] = { &din, &dout };
        run(fn(mod, "barrier_copy"), bb, 96, a4);
        OK(cuMemcpyDtoH(out, dout, bb * 256 * 4));
        for (int b = 0; b < bb; b++)
            for (int i = 0; i < 256; i++)
                cr_assert_eq(out[b * 256 + i], in[b * 256 + 255 - i], "%s barrier tile %d element %d", md, b, i);
        cuMemFree(din); cuMemFree(dout);
        free(in); free(out);
        OK(cuModuleUnload(mod));
    }
}

static int fact_cpu(int n)
{
    return n <= 1 ? 1 : n * fact_cpu(n - 1);
}

Test(kernels, virtual_functions)
{
    for (size_t m = 0; m < NALL; m++) {
        const char *md = all_modes[m];
        CUmodule mod = load("virtualcall", md);
        int n = 1 + rand() % 2000;
        int *in = malloc(n * 4), *out = malloc(n * 4);
        for (int i = 0; i < n; i++)
            in[i] = rand() % 2001 - 1000;
        CUdeviceptr din = upload(in, n * 4), dout = upload(NULL, n * 4);
        void *args[] = { &din, &dout, &n };
        run(fn(mod, "virtual_calls"), (n + 127) / 128, 128, args);
        OK(cuMemcpyDtoH(out, dout, n * 4));
        for (int i = 0; i < n; i++) {
            int x = in[i];
            int op = i % 3 == 0 ? x + i : i % 3 == 1 ? x * 3 : -(x + 5);
            int want = op + (i % 2 ? x / 2 : x * x) + fact_cpu(i % 8);
            cr_assert_eq(out[i], want, "%s element %d: %d, want %d", md, i, out[i], want);
        }
        cuMemFree(din); cuMemFree(dout);
        free(in); free(out);
        OK(cuModuleUnload(mod));
    }
}
