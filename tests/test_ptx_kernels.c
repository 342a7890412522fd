/* The engine alone runs every kernel of tests/kernels, in every build mode,
 * on fresh random inputs, against a CPU reference. Sizes give many blocks
 * and partial warps; tolerances only where approximate math needs them. */
#include "tests/test_ptx_util.h"

#include <math.h>
#include <time.h>
#include "tests/seed.h"

static uint64_t seed;

static void setup(void)
{
    seed = test_seed();
    tp_state = seed;
}

static void teardown(void)
{
    tp_free_all();
}

TestSuite(ptx_kernels, .init = setup, .fini = teardown);

#define FOR_MODES(mode) \
    for (unsigned mi_ = 0; mi_ < TP_NMODES; mi_++) \
        for (const char *mode = tp_modes[mi_]; mode; mode = NULL)

Test(ptx_kernels, vecadd)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("vecadd", mode);
        int n = 10000 + (int)(tp_rand() % 1000);
        float *a = tp_alloc(n * 4), *b = tp_alloc(n * 4), *c = tp_alloc(n * 4);
        for (int i = 0; i < n; i++) {
            a[i] = tp_randf(-100, 100);
            b[i] = tp_randf(-100, 100);
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        TP_ARG(&args, n);
        tp_launch(p, "vecadd", mode, (n + 99) / 100, 1, 100, 1, 0, &args);
        for (int i = 0; i < n; i++)
            cr_assert_eq(c[i], a[i] + b[i], "%s: c[%d] = %g, want %g (seed %llu)", mode, i,
                         c[i], a[i] + b[i], (unsigned long long)seed);
        int *ia = tp_alloc(n * 4), *ib = tp_alloc(n * 4), *ic = tp_alloc(n * 4);
        for (int i = 0; i < n; i++) {
            ia[i] = (int)tp_rand();
            ib[i] = (int)tp_rand();
        }
        tp_args a2 = { 0 };
        TP_ARG(&a2, ia);
        TP_ARG(&a2, ib);
        TP_ARG(&a2, ic);
        TP_ARG(&a2, n);
        tp_launch(p, "vecadd_i32", mode, (n + 255) / 256, 1, 256, 1, 0, &a2);
        for (int i = 0; i < n; i++)
            cr_assert_eq(ic[i], (int)((unsigned)ia[i] + (unsigned)ib[i]), "%s: i32 [%d]", mode, i);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, saxpy)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("saxpy", mode);
        int n = 5000 + (int)(tp_rand() % 500);
        float a = tp_randf(-3, 3);
        float *x = tp_alloc(n * 4), *y = tp_alloc(n * 4), *y0 = tp_alloc(n * 4);
        for (int i = 0; i < n; i++) {
            x[i] = tp_randf(-10, 10);
            y[i] = y0[i] = tp_randf(-10, 10);
        }
        tp_args args = { 0 };
        TP_ARG(&args, n);
        TP_ARG(&args, a);
        TP_ARG(&args, x);
        TP_ARG(&args, y);
        tp_launch(p, "saxpy", mode, (n + 127) / 128, 1, 128, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            /* fused or not depends on the build mode */
            float want = fmaf(a, x[i], y0[i]), alt = a * x[i] + y0[i];
            cr_assert(y[i] == want || y[i] == alt, "%s: y[%d] = %.9g, want %.9g", mode, i,
                      y[i], want);
        }
        double da = tp_randf(-3, 3);
        double *dx = tp_alloc(n * 8), *dy = tp_alloc(n * 8), *dy0 = tp_alloc(n * 8);
        for (int i = 0; i < n; i++) {
            dx[i] = tp_randf(-10, 10);
            dy[i] = dy0[i] = tp_randf(-10, 10);
        }
        tp_args a2 = { 0 };
        TP_ARG(&a2, n);
        TP_ARG(&a2, da);
        TP_ARG(&a2, dx);
        TP_ARG(&a2, dy);
        tp_launch(p, "daxpy", mode, (n + 63) / 64, 1, 64, 1, 0, &a2);
        for (int i = 0; i < n; i++) {
            double want = fma(da, dx[i], dy0[i]), alt = da * dx[i] + dy0[i];
            cr_assert(dy[i] == want || dy[i] == alt, "%s: dy[%d]", mode, i);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, reduce)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("reduce", mode);
        int n = 100000 + (int)(tp_rand() % 1000);
        int blocks = (n + 511) / 512;
        float *in = tp_alloc(n * 4), *out = tp_alloc(blocks * 4);
        for (int i = 0; i < n; i++)
            in[i] = tp_randf(-1, 1);
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, out);
        TP_ARG(&args, n);
        tp_launch(p, "reduce_sum", mode, blocks, 1, 256, 1, 0, &args);
        for (int b = 0; b < blocks; b++) {
            double want = 0;
            for (int i = b * 512; i < b * 512 + 512 && i < n; i++)
                want += in[i];
            cr_assert(tp_close(out[b], want, 1e-4, 1e-4), "%s: block %d sum %g, want %g", mode,
                      b, out[b], want);
        }
        int *iin = tp_alloc(n * 4), *sum = tp_alloc(4);
        long long want = 0;
        for (int i = 0; i < n; i++) {
            iin[i] = (int)(tp_rand() % 2001) - 1000;
            want += iin[i];
        }
        tp_args a2 = { 0 };
        TP_ARG(&a2, iin);
        TP_ARG(&a2, sum);
        TP_ARG(&a2, n);
        tp_launch(p, "reduce_dyn", mode, 37, 1, 128, 1, 128 * 4, &a2);
        cr_assert_eq(*sum, want, "%s: dynamic shared sum %d, want %lld", mode, *sum, want);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, warp_reduce)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("warpreduce", mode);
        int n = 1000;
        int *in = tp_alloc(n * 4), *out = tp_alloc(32 * 4);
        unsigned *ballots = tp_alloc(32 * 16);
        for (int i = 0; i < n; i++)
            in[i] = (int)(tp_rand() % 1000) - (i == 77 ? 5000 : 0);
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, out);
        TP_ARG(&args, ballots);
        TP_ARG(&args, n);
        tp_launch(p, "warp_sum", mode, 8, 1, 128, 1, 0, &args);
        for (int w = 0; w < 32; w++) {
            int s = 0;
            unsigned ballot = 0, any = 0, all = 1;
            for (int l = 0; l < 32; l++) {
                int i = w * 32 + l;
                if (i < n) {
                    s += in[i];
                    ballot |= (unsigned)(in[i] & 1) << l;
                    any |= in[i] < 0;
                } else {
                    all = 0;
                }
            }
            cr_assert_eq(out[w], s, "%s: warp %d sum %d want %d", mode, w, out[w], s);
            cr_assert_eq(ballots[w * 4 + 0], ballot, "%s: warp %d ballot", mode, w);
            cr_assert_eq(ballots[w * 4 + 1], any, "%s: warp %d any", mode, w);
            cr_assert_eq(ballots[w * 4 + 2], all, "%s: warp %d all", mode, w);
            cr_assert_eq(ballots[w * 4 + 3], 0xffffffffu, "%s: warp %d activemask", mode, w);
        }
        int nb = 3000;
        unsigned *bin = tp_alloc(nb * 4), *bout = tp_alloc(nb * 16);
        for (int i = 0; i < nb; i++)
            bin[i] = i % 17 == 0 ? 0 : (unsigned)tp_rand() >> (tp_rand() % 32);
        tp_args a2 = { 0 };
        TP_ARG(&a2, bin);
        TP_ARG(&a2, bout);
        TP_ARG(&a2, nb);
        tp_launch(p, "bits", mode, (nb + 95) / 96, 1, 96, 1, 0, &a2);
        for (int i = 0; i < nb; i++) {
            unsigned x = bin[i], r = 0;
            for (int k = 0; k < 32; k++)
                r |= ((x >> k) & 1u) << (31 - k);
            cr_assert_eq(bout[i * 4 + 0], (unsigned)__builtin_popcount(x), "%s: popc", mode);
            cr_assert_eq(bout[i * 4 + 1], x ? (unsigned)__builtin_clz(x) : 32u, "%s: clz", mode);
            cr_assert_eq(bout[i * 4 + 2], r, "%s: brev", mode);
            cr_assert_eq(bout[i * 4 + 3], (unsigned)__builtin_ffs((int)x), "%s: ffs", mode);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, histogram)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("histogram", mode);
        int n = 100000 + (int)(tp_rand() % 100);
        unsigned char *data = tp_alloc(n);
        unsigned *hist = tp_alloc(64 * 4), want[64] = { 0 };
        for (int i = 0; i < n; i++) {
            data[i] = (unsigned char)tp_rand();
            want[data[i] % 64]++;
        }
        tp_args args = { 0 };
        TP_ARG(&args, data);
        TP_ARG(&args, n);
        TP_ARG(&args, hist);
        tp_launch(p, "histogram", mode, 20, 1, 200, 1, 0, &args);
        for (int b = 0; b < 64; b++)
            cr_assert_eq(hist[b], want[b], "%s: bin %d = %u, want %u", mode, b, hist[b], want[b]);

        int m = 3000;
        int *in = tp_alloc(m * 4), *imax = tp_alloc(4), *cas = tp_alloc(4), *exch = tp_alloc(4);
        unsigned *ior = tp_alloc(4);
        float *fsum = tp_alloc(4);
        double *dsum = tp_alloc(8);
        *imax = INT32_MIN;
        int wmax = INT32_MIN;
        unsigned wor = 0;
        float wf = 0;
        double wd = 0;
        for (int i = 0; i < m; i++) {
            in[i] = (int)(tp_rand() % 2000001) - 1000000;
            wmax = in[i] > wmax ? in[i] : wmax;
            wor |= 1u << (in[i] & 31);
            wf += (float)(in[i] & 15);
            wd += in[i];
        }
        tp_args a2 = { 0 };
        TP_ARG(&a2, in);
        TP_ARG(&a2, m);
        TP_ARG(&a2, imax);
        TP_ARG(&a2, ior);
        TP_ARG(&a2, fsum);
        TP_ARG(&a2, dsum);
        TP_ARG(&a2, cas);
        TP_ARG(&a2, exch);
        tp_launch(p, "atomics", mode, (m + 127) / 128, 1, 128, 1, 0, &a2);
        cr_assert_eq(*imax, wmax, "%s: atomicMax", mode);
        cr_assert_eq(*ior, wor, "%s: atomicOr", mode);
        cr_assert_eq(*fsum, wf, "%s: atomicAdd f32 %g want %g", mode, *fsum, wf);
        cr_assert_eq(*dsum, wd, "%s: atomicAdd f64", mode);
        cr_assert_eq(*cas, m, "%s: atomicCAS loop %d", mode, *cas);
        cr_assert_eq(*exch, 7, "%s: atomicExch", mode);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, matmul)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("matmul", mode);
        int M = 70 + (int)(tp_rand() % 5), N = 45, K = 33;
        float *A = tp_alloc(M * K * 4), *B = tp_alloc(K * N * 4), *C = tp_alloc(M * N * 4);
        for (int i = 0; i < M * K; i++)
            A[i] = tp_randf(-1, 1);
        for (int i = 0; i < K * N; i++)
            B[i] = tp_randf(-1, 1);
        tp_args args = { 0 };
        TP_ARG(&args, A);
        TP_ARG(&args, B);
        TP_ARG(&args, C);
        TP_ARG(&args, M);
        TP_ARG(&args, N);
        TP_ARG(&args, K);
        tp_launch(p, "matmul", mode, (N + 15) / 16, (M + 15) / 16, 16, 16, 0, &args);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double want = 0;
                for (int k = 0; k < K; k++)
                    want += (double)A[i * K + k] * B[k * N + j];
                cr_assert(tp_close(C[i * N + j], want, 1e-4, 1e-5), "%s: C[%d][%d] = %g want %g",
                          mode, i, j, C[i * N + j], want);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, float_math)
{
    FOR_MODES(mode) {
        bool fast = strcmp(mode, "fast") == 0;
        soft_program *p = tp_load("math", mode);
        int n = 1000;
        float *x = tp_alloc(n * 4), *o = tp_alloc(n * 12 * 4);
        for (int i = 0; i < n; i++)
            x[i] = tp_randf(0.1f, 10.0f);
        tp_args args = { 0 };
        TP_ARG(&args, x);
        TP_ARG(&args, o);
        TP_ARG(&args, n);
        tp_launch(p, "fmath", mode, (n + 63) / 64, 1, 64, 1, 0, &args);
        double rel = fast ? 2e-6 : 1e-6;
        for (int i = 0; i < n; i++) {
            float v = x[i];
            const float *r = o + i * 12;
            cr_assert(tp_close(r[0], sqrt(v), rel, 0), "%s: sqrt(%g) = %g", mode, v, r[0]);
            cr_assert(tp_close(r[1], exp(v), fast ? 1e-5 : rel, 0), "%s: exp(%g) = %g", mode, v, r[1]);
            cr_assert(tp_close(r[2], log(v), fast ? 1e-5 : rel, 1e-6), "%s: log(%g) = %g", mode, v, r[2]);
            cr_assert(tp_close(r[3], sin(v), rel, fast ? 1e-5 : 1e-6), "%s: sin(%g) = %g", mode, v, r[3]);
            cr_assert(tp_close(r[4], cos(v), rel, fast ? 1e-5 : 1e-6), "%s: cos(%g) = %g", mode, v, r[4]);
            cr_assert(tp_close(r[5], 1 / sqrt(v), fast ? 1e-5 : 1e-6, 0), "%s: rsqrt", mode);
            cr_assert(tp_close(r[6], 1.0 / v, rel, 0), "%s: rcp", mode);
            cr_assert(tp_close(r[7], tanh(v), 1e-5, 1e-6), "%s: tanh(%g) = %.9g", mode, v, r[7]);
            cr_assert_eq(r[8], fminf(v, 2.0f) + fmaxf(v, 0.5f), "%s: min/max", mode);
            float fl = floorf(v * 3.3f) + ceilf(v) + truncf(v * 7.1f) + rintf(v * 2.5f);
            cr_assert(tp_close(r[9], fl, 1e-6, 0), "%s: rounding %g want %g", mode, r[9], fl);
            cr_assert_eq(r[10], copysignf(v, -1.0f) + fabsf(-v), "%s: copysign", mode);
            float cv = (float)(int)(v * 100.0f) + (float)(unsigned)(v * 10.0f);
            cr_assert(tp_close(r[11], cv, 1e-6, 0), "%s: conversions %g want %g", mode, r[11], cv);
        }
        double *dx = tp_alloc(n * 8), *d = tp_alloc(n * 8 * 8);
        for (int i = 0; i < n; i++)
            dx[i] = tp_randf(0.1f, 10.0f) + tp_randf(0, 1) * 1e-7;
        tp_args a2 = { 0 };
        TP_ARG(&a2, dx);
        TP_ARG(&a2, d);
        TP_ARG(&a2, n);
        tp_launch(p, "dmath", mode, (n + 95) / 96, 1, 96, 1, 0, &a2);
        for (int i = 0; i < n; i++) {
            double v = dx[i];
            const double *r = d + i * 8;
            cr_assert(tp_close(r[0], sqrt(v), 1e-15, 0), "%s: dsqrt", mode);
            cr_assert(tp_close(r[1], exp(v), 1e-14, 0), "%s: dexp(%g) %.17g want %.17g", mode, v, r[1], exp(v));
            cr_assert(tp_close(r[2], log(v), 1e-14, 1e-15), "%s: dlog", mode);
            cr_assert(tp_close(r[3], sin(v), 1e-14, 1e-15), "%s: dsin(%.17g) %.17g want %.17g", mode, v, r[3], sin(v));
            cr_assert(tp_close(r[4], 1 / v, 1e-15, 0), "%s: drcp", mode);
            cr_assert(tp_close(r[5], v / 3.0, 1e-15, 0), "%s: ddiv", mode);
            double fl = floor(v * 3.3) + ceil(v) + fmin(v, 1.5) + fmax(v, 0.75);
            cr_assert(tp_close(r[6], fl, 1e-15, 0), "%s: drounding", mode);
            double cv = (double)(long long)(v * 1000.0) + (double)(float)v;
            cr_assert(tp_close(r[7], cv, 1e-15, 0), "%s: dconversions", mode);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

struct Params {
    const double *src;
    double *dst;
    long long n;
    double scale;
    int stride;
    char tag;
};

struct Small {
    float a;
    short b;
};

Test(ptx_kernels, struct_params)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("structparam", mode);
        const char *name = "_Z12scale_struct6Params5Small";
        long long n = 3000 + (long long)(tp_rand() % 100);
        struct Params ps = { 0 };
        double *src = tp_alloc(n * 2 * 8), *dst = tp_alloc(n * 8);
        for (long long i = 0; i < n * 2; i++)
            src[i] = tp_randf(-5, 5);
        ps.src = src;
        ps.dst = dst;
        ps.n = n;
        ps.scale = tp_randf(-2, 2);
        ps.stride = 2;
        ps.tag = 'x';
        struct Small s = { .a = tp_randf(-1, 1), .b = -1234 };
        tp_args args = { 0 };
        TP_ARG(&args, ps);
        TP_ARG(&args, s);
        tp_launch(p, name, mode, (uint32_t)((n + 255) / 256), 1, 256, 1, 0, &args);
        for (long long i = 0; i < n; i++) {
            double want = src[i * 2] * ps.scale + s.a + s.b + ps.tag;
            double alt = fma(src[i * 2], ps.scale, (double)s.a) + s.b + ps.tag;
            cr_assert(tp_close(dst[i], want, 1e-15, 1e-12) || dst[i] == alt,
                      "%s: dst[%lld] = %.17g, want %.17g", mode, i, dst[i], want);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, grid_stride_local_array)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("gridstride", mode);
        int n = 5000 + (int)(tp_rand() % 77), k = (int)(tp_rand() % 16);
        int *in = tp_alloc(n * 4), *out = tp_alloc(n * 4);
        for (int i = 0; i < n; i++)
            in[i] = (int)(tp_rand() % 100000) - 50000;
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, out);
        TP_ARG(&args, n);
        TP_ARG(&args, k);
        tp_launch(p, "gridstride", mode, 7, 1, 70, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            int local[16];
            for (int j = 0; j < 16; j++)
                local[j] = (int)((unsigned)in[i] * (unsigned)(j + 1));
            local[(in[i] + k) & 15] += 1000;
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += local[(j * 7 + k) & 15] ^ j;
            cr_assert_eq(out[i], s, "%s: out[%d] = %d want %d", mode, i, out[i], s);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

typedef struct sink {
    char *text;
    size_t len;
    unsigned calls;
} sink;

static void sink_print(void *ctx, const char *text, size_t len)
{
    sink *s = ctx;
    s->text = realloc(s->text, s->len + len + 1);
    cr_assert(s->text);
    memcpy(s->text + s->len, text, len);
    s->len += len;
    s->text[s->len] = 0;
    s->calls++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(ptx_kernels, printf)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("printf", mode);
        tp_args args = { 0 };
        int base = 7;
        double d = 0.5;
        TP_ARG(&args, base);
        TP_ARG(&args, d);
        sink s = { 0 };
        char msg[256];
        CUresult rc = tp_launch_ex(p, "hello", 2, 1, 40, 1, 0, &args, sink_print, &s, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_SUCCESS, "%s: %s", mode, msg);
        char *got[80], *want[80];
        unsigned ng = 0, nw = 0;
        for (char *line = strtok(s.text, "\n"); line && ng < 80; line = strtok(NULL, "\n"))
            got[ng++] = line;
        char buf[80][160];
        for (int t = 0; t < 80; t++)
            if (t % 3 == 0) {
                snprintf(buf[nw], sizeof buf[nw], "thread %d base %d val %.3f hex %x str %s c %c ll %lld",
                         t, base, d * t, (unsigned)t * 0x1111u, "ok", 'A' + (t % 26),
                         (long long)t * 10000000000LL);
                want[nw] = buf[nw];
                nw++;
            }
        cr_assert_eq(s.calls, nw, "%s: %u printf calls, want %u", mode, s.calls, nw);
        cr_assert_eq(ng, nw, "%s: %u lines", mode, ng);
        qsort(got, ng, sizeof got[0], cmp_str);
        qsort(want, nw, sizeof want[0], cmp_str);
        for (unsigned i = 0; i < nw; i++)
            cr_assert_str_eq(got[i], want[i], "%s", mode);
        free(s.text);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, globals)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("globals", mode);
        int *off = tp_global(p, "offset_c");
        *off = 2;
        int n = 1000;
        float *x = tp_alloc(n * 4), *y = tp_alloc(n * 4);
        for (int i = 0; i < n; i++)
            x[i] = tp_randf(-2, 2);
        tp_args args = { 0 };
        TP_ARG(&args, x);
        TP_ARG(&args, y);
        TP_ARG(&args, n);
        tp_launch(p, "use_globals", mode, (n + 63) / 64, 1, 64, 1, 0, &args);
        static const float table[8] = { 0, 1, 4, 9, 16, 25, 36, 49 };
        for (int i = 0; i < n; i++) {
            float v = x[i];
            double want = 1.0 + 2.0 * v + 3.0 * v * v + 0.5 * table[i & 7] + 2;
            cr_assert(tp_close(y[i], want, 1e-5, 1e-5), "%s: y[%d] = %g want %g", mode, i, y[i], want);
        }
        int *res = tp_alloc(4);
        tp_args a2 = { 0 };
        TP_ARG(&a2, res);
        tp_launch(p, "read_counter", mode, 1, 1, 1, 1, 0, &a2);
        cr_assert_eq(*res, 5 + n, "%s: counter %d", mode, *res);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, shuffles)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("shuffle", mode);
        int n = 200, threads = 256, delta = 1 + (int)(tp_rand() % 7);
        int *in = tp_alloc(n * 4), *out = tp_alloc(threads * 6 * 4);
        for (int i = 0; i < n; i++)
            in[i] = (int)(tp_rand() % 100000);
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, out);
        TP_ARG(&args, n);
        TP_ARG(&args, delta);
        tp_launch(p, "shuffles", mode, threads / 64, 1, 64, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            int lane = i & 31, w0 = i - lane;
#define V(j) ((w0 + (j)) < n ? in[w0 + (j)] : -1)
            int up = lane >= delta ? V(lane - delta) : V(lane);
            int down = lane + delta <= 31 ? V(lane + delta) : V(lane);
            int x = V(lane ^ delta);
            int idx = V((lane * 7 + delta) & 31);
            int w8 = V((lane & ~7) + (delta & 7));
            int f = (lane % 16) + 1 < 16 ? V(lane + 1) : V(lane);
#undef V
            const int *o = out + i * 6;
            cr_assert_eq(o[0], up, "%s: up lane %d", mode, i);
            cr_assert_eq(o[1], down, "%s: down lane %d", mode, i);
            cr_assert_eq(o[2], x, "%s: xor lane %d", mode, i);
            cr_assert_eq(o[3], idx, "%s: idx lane %d", mode, i);
            cr_assert_eq(o[4], w8, "%s: width 8 lane %d", mode, i);
            cr_assert_eq(o[5], f, "%s: float down width 16 lane %d", mode, i);
        }
        double *din = tp_alloc(n * 8), *dout = tp_alloc(n * 8);
        for (int i = 0; i < n; i++)
            din[i] = (double)(tp_rand() % 1000000) - 500000;
        tp_args a2 = { 0 };
        TP_ARG(&a2, din);
        TP_ARG(&a2, dout);
        TP_ARG(&a2, n);
        tp_launch(p, "shuffle64", mode, threads / 64, 1, 64, 1, 0, &a2);
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = i & ~31; j < (i & ~31) + 32; j++)
                s += j < n ? din[j] : 0;
            cr_assert_eq(dout[i], s, "%s: shuffle64 [%d] %g want %g", mode, i, dout[i], s);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, int64)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("int64", mode);
        int n = 2000;
        unsigned long long *a = tp_alloc(n * 8), *b = tp_alloc(n * 8), *o = tp_alloc(n * 80);
        for (int i = 0; i < n; i++) {
            a[i] = tp_rand() >> (tp_rand() % 64);
            b[i] = tp_rand() >> (tp_rand() % 64);
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, o);
        TP_ARG(&args, n);
        tp_launch(p, "int64ops", mode, (n + 159) / 160, 1, 160, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            unsigned long long x = a[i], y = b[i] | 1;
            long long sx = (long long)x, sy = (long long)y;
            unsigned long long w[10];
            w[0] = x * y;
            w[1] = (unsigned long long)(((unsigned __int128)x * y) >> 64);
            w[2] = (unsigned long long)(((__int128)sx * sy) >> 64);
            w[3] = x / y;
            w[4] = x % y;
            long long dv = (sy >> 40) | 1;
            w[5] = (sx == INT64_MIN && dv == -1) ? (unsigned long long)sx : (unsigned long long)(sx / dv);
            w[6] = (x << (y & 63)) ^ (x >> (y & 31)) ^ (unsigned long long)(sx >> 7);
            unsigned __int128 pr = (unsigned __int128)x * y + (unsigned __int128)x + y;
            w[7] = (unsigned long long)pr;
            w[8] = (unsigned long long)(pr >> 64);
            w[9] = (unsigned long long)(__builtin_popcountll(x) + (y ? __builtin_clzll(y) : 64) + (x > y) + (sx < sy));
            for (int k = 0; k < 10; k++)
                cr_assert_eq(o[i * 10 + k], w[k], "%s: [%d] op %d: %llx want %llx (x %llx y %llx)",
                             mode, i, k, o[i * 10 + k], w[k], x, y);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, half)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("half", mode);
        int n = 999;
        float *a = tp_alloc(n * 4), *b = tp_alloc(n * 4), *o = tp_alloc(n * 12);
        for (int i = 0; i < n; i++) {
            a[i] = tp_randf(-4, 4);
            b[i] = tp_randf(-4, 4);
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, o);
        TP_ARG(&args, n);
        tp_launch(p, "halfops", mode, (n + 127) / 128, 1, 128, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            _Float16 x = (_Float16)a[i], y = (_Float16)b[i];
            _Float16 s = (_Float16)((float)x + (float)y);
            _Float16 m = (_Float16)((float)x * (float)y);
            double f = fma((double)x, (double)y, (double)s);
            cr_assert_eq(o[i * 3 + 0], (float)s, "%s: hadd [%d] %g want %g", mode, i, o[i * 3], (float)s);
            cr_assert_eq(o[i * 3 + 1], (float)m, "%s: hmul [%d]", mode, i);
            cr_assert(tp_close(o[i * 3 + 2], f, 1e-3, 1e-3), "%s: hfma [%d] %g want %g", mode, i,
                      o[i * 3 + 2], f);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, device_functions)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("funcs", mode);
        int n = 777;
        int *a = tp_alloc(n * 4), *b = tp_alloc(n * 4), *g = tp_alloc(n * 4);
        float *f = tp_alloc(n * 8);
        for (int i = 0; i < n; i++) {
            a[i] = 1 + (int)(tp_rand() % 5000);
            b[i] = 1 + (int)(tp_rand() % 5000);
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, g);
        TP_ARG(&args, f);
        TP_ARG(&args, n);
        tp_launch(p, "call_funcs", mode, (n + 63) / 64, 1, 64, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            int x = a[i], y = b[i];
            while (y) {
                int t = x % y;
                x = y;
                y = t;
            }
            cr_assert_eq(g[i], x, "%s: gcd(%d, %d) = %d want %d", mode, a[i], b[i], g[i], x);
            cr_assert_eq(f[i * 2], (float)a[i] + (float)b[i], "%s: pair.x", mode);
            cr_assert_eq(f[i * 2 + 1], (float)a[i] * (float)b[i], "%s: pair.y", mode);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, block_votes_funnel_match)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("sync", mode);
        int n = 1000, bs = 96, blocks = (n + bs - 1) / bs;
        int *in = tp_alloc(n * 4), *out = tp_alloc(blocks * 12);
        for (int i = 0; i < n; i++)
            in[i] = (int)(tp_rand() % 1100) - (i % 5 == 0 ? 200 : 0);
        in[5] = 0;
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, out);
        TP_ARG(&args, n);
        tp_launch(p, "block_votes", mode, blocks, 1, bs, 1, 0, &args);
        for (int b = 0; b < blocks; b++) {
            int count = 0, all = 1, any = 0;
            for (int t = 0; t < bs; t++) {
                int i = b * bs + t, v = i < n ? in[i] : 0;
                count += v > 0;
                all &= v != 0;
                any |= v > 1000;
            }
            cr_assert_eq(out[b * 3 + 0], count, "%s: block %d count %d want %d", mode, b, out[b * 3], count);
            cr_assert_eq(out[b * 3 + 1], all, "%s: block %d and", mode, b);
            cr_assert_eq(out[b * 3 + 2], any, "%s: block %d or", mode, b);
        }
        unsigned *a = tp_alloc(n * 4), *bb = tp_alloc(n * 4), *o = tp_alloc(n * 20);
        for (int i = 0; i < n; i++) {
            a[i] = (unsigned)tp_rand();
            bb[i] = (unsigned)tp_rand();
        }
        tp_args a2 = { 0 };
        TP_ARG(&a2, a);
        TP_ARG(&a2, bb);
        TP_ARG(&a2, o);
        TP_ARG(&a2, n);
        tp_launch(p, "funnel_match", mode, (n + 127) / 128, 1, 128, 1, 0, &a2);
        for (int i = 0; i < n; i++) {
            unsigned x = a[i], y = bb[i], s = y & 63;
            uint64_t cat = (uint64_t)y << 32 | x;
            cr_assert_eq(o[i * 5 + 0], (unsigned)((cat << (s & 31)) >> 32), "%s: shf.l.wrap", mode);
            cr_assert_eq(o[i * 5 + 1], (unsigned)(cat >> (s & 31)), "%s: shf.r.wrap", mode);
            unsigned c = s > 32 ? 32 : s;
            cr_assert_eq(o[i * 5 + 2], (unsigned)((cat << c) >> 32), "%s: shf.l.clamp", mode);
            unsigned want = 0;
            for (int j = i & ~31; j < (i & ~31) + 32; j++) {
                unsigned kj = j < n ? a[j] & 3 : 0;
                want |= (unsigned)(kj == (x & 3)) << (j & 31);
            }
            cr_assert_eq(o[i * 5 + 3], want, "%s: match.any lane %d", mode, i);
            cr_assert_eq(o[i * 5 + 4], 0xffffffffu + 1u, "%s: match.all", mode);
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_kernels, libm)
{
    FOR_MODES(mode) {
        bool fast = strcmp(mode, "fast") == 0;
        soft_program *p = tp_load("libm", mode);
        int n = 500;
        float *x = tp_alloc(n * 4), *y = tp_alloc(n * 4), *o = tp_alloc(n * 14 * 4);
        double *dx = tp_alloc(n * 8), *dy = tp_alloc(n * 8), *d = tp_alloc(n * 14 * 8);
        for (int i = 0; i < n; i++) {
            x[i] = tp_randf(0.1f, 8.0f);
            y[i] = tp_randf(-3.5f, 3.5f);
            dx[i] = x[i];
            dy[i] = y[i];
        }
        tp_args args = { 0 };
        TP_ARG(&args, x);
        TP_ARG(&args, y);
        TP_ARG(&args, o);
        TP_ARG(&args, n);
        tp_launch(p, "libm_f32", mode, (n + 63) / 64, 1, 64, 1, 0, &args);
        tp_args a2 = { 0 };
        TP_ARG(&a2, dx);
        TP_ARG(&a2, dy);
        TP_ARG(&a2, d);
        TP_ARG(&a2, n);
        tp_launch(p, "libm_f64", mode, (n + 63) / 64, 1, 64, 1, 0, &a2);
        for (int i = 0; i < n; i++) {
            double a = x[i], b = y[i];
            double want[14] = {
                pow(a, b), atan2(a, b), erf(b), expm1(b), log1p(a), cbrt(b), hypot(a, b),
                fmod((double)(x[i] * 10.0f), b), sinh(b), asin((double)(y[i] / 4.0f)), lgamma(a),
                pow(10.0, b), log2(a) + log10(a), tan(b),
            };
            for (int k = 0; k < 14; k++) {
                double rel = fast ? 1e-4 : 2e-6, abs_tol = fast ? 1e-4 : 1e-6;
                if (k == 7)   /* fmod of a rounded product: compare the float computation */
                    want[k] = fmodf(x[i] * 10.0f, y[i]);
                cr_assert(tp_close(o[i * 14 + k], want[k], rel, abs_tol),
                          "%s: f32 fn %d (%g, %g) = %.9g want %.9g", mode, k, a, b, o[i * 14 + k], want[k]);
                if (k == 7)
                    want[k] = fmod(a * 10.0, b);
                cr_assert(tp_close(d[i * 14 + k], want[k], 1e-13, 1e-14),
                          "%s: f64 fn %d (%g, %g) = %.17g want %.17g", mode, k, a, b, d[i * 14 + k], want[k]);
            }
        }
        soft_program_free(p);
        tp_free_all();
    }
}
