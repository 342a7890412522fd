// Device math functions through the runtime, in float and double, checked
// against the host's libm (float functions against double, double functions
// against long double) in units in the last place, with the maximum errors
// the CUDA Programming Guide documents (plus one ulp for the reference's own
// rounding), on random arguments in each function's range mixed with special
// values (+-0, +-inf, NaN, +-1, denormals): a special result (NaN, inf,
// signed zero) must match exactly. Also the fast intrinsics __expf, __sinf,
// __fdividef against their documented error bounds. Seed printed; SEED=N
// repeats a run.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <unistd.h>
#include <cuda_runtime.h>

#include "check.h"

enum {
    F_SQRT, F_RSQRT, F_CBRT, F_EXP, F_EXP2, F_EXP10, F_EXPM1, F_LOG, F_LOG2, F_LOG10, F_LOG1P, F_SIN, F_COS, F_TAN,
    F_ASIN, F_ACOS, F_ATAN, F_ATAN2, F_SINH, F_COSH, F_TANH, F_POW, F_ERF, F_ERFC, F_HYPOT, F_FMOD, F_FMA, F_DIV,
    F_FLOOR, F_CEIL, F_ROUND, F_TRUNC, F_RINT, F_FMIN, F_FMAX, F_SINCOS_S, F_SINCOS_C, F_LGAMMA,
    F_COUNT
};

struct Fn {
    const char *name;
    double lo, hi;      // argument range of x (y is in [ylo, yhi])
    double ylo, yhi;
    int ulp_f, ulp_d;   // documented maximum error, float and double
};

static const Fn fns[F_COUNT] = {
    { "sqrt", 0, 1e30, 0, 0, 0, 0 },       { "rsqrt", 1e-30, 1e30, 0, 0, 2, 1 },
    { "cbrt", -1e30, 1e30, 0, 0, 1, 1 },   { "exp", -80, 80, 0, 0, 2, 1 },
    { "exp2", -120, 120, 0, 0, 2, 1 },     { "exp10", -35, 35, 0, 0, 2, 1 },
    { "expm1", -20, 20, 0, 0, 1, 1 },      { "log", 1e-30, 1e30, 0, 0, 1, 1 },
    { "log2", 1e-30, 1e30, 0, 0, 1, 1 },   { "log10", 1e-30, 1e30, 0, 0, 2, 1 },
    { "log1p", -0.999, 1e10, 0, 0, 1, 1 }, { "sin", -1e4, 1e4, 0, 0, 2, 2 },
    { "cos", -1e4, 1e4, 0, 0, 2, 2 },      { "tan", -1e3, 1e3, 0, 0, 4, 2 },
    { "asin", -1, 1, 0, 0, 2, 2 },         { "acos", -1, 1, 0, 0, 2, 2 },
    { "atan", -1e4, 1e4, 0, 0, 2, 2 },     { "atan2", -1e3, 1e3, -1e3, 1e3, 3, 2 },
    { "sinh", -80, 80, 0, 0, 3, 2 },       { "cosh", -80, 80, 0, 0, 2, 1 },
    { "tanh", -20, 20, 0, 0, 2, 1 },       { "pow", 0.01, 100, -15, 15, 4, 2 },
    { "erf", -5, 5, 0, 0, 2, 2 },          { "erfc", -5, 9, 0, 0, 4, 5 },
    { "hypot", -1e15, 1e15, -1e15, 1e15, 3, 2 },
    { "fmod", -1e6, 1e6, -1e3, 1e3, 0, 0 },
    { "fma", -1e3, 1e3, -1e3, 1e3, 0, 0 }, { "div", -1e6, 1e6, -1e3, 1e3, 0, 0 },
    { "floor", -1e7, 1e7, 0, 0, 0, 0 },    { "ceil", -1e7, 1e7, 0, 0, 0, 0 },
    { "round", -1e7, 1e7, 0, 0, 0, 0 },    { "trunc", -1e7, 1e7, 0, 0, 0, 0 },
    { "rint", -1e7, 1e7, 0, 0, 0, 0 },     { "fmin", -1e3, 1e3, -1e3, 1e3, 0, 0 },
    { "fmax", -1e3, 1e3, -1e3, 1e3, 0, 0 },
    { "sincos.sin", -1e4, 1e4, 0, 0, 2, 2 },
    { "sincos.cos", -1e4, 1e4, 0, 0, 2, 2 },
    { "lgamma", 0.01, 1e3, 0, 0, 6, 4 },
};

template <typename T>
__device__ T fdev(int f, T x, T y);

template <>
__device__ float fdev<float>(int f, float x, float y)
{
    float s, c;
    switch (f) {
    case F_SQRT: return sqrtf(x);
    case F_RSQRT: return rsqrtf(x);
    case F_CBRT: return cbrtf(x);
    case F_EXP: return expf(x);
    case F_EXP2: return exp2f(x);
    case F_EXP10: return exp10f(x);
    case F_EXPM1: return expm1f(x);
    case F_LOG: return logf(x);
    case F_LOG2: return log2f(x);
    case F_LOG10: return log10f(x);
    case F_LOG1P: return log1pf(x);
    case F_SIN: return sinf(x);
    case F_COS: return cosf(x);
    case F_TAN: return tanf(x);
    case F_ASIN: return asinf(x);
    case F_ACOS: return acosf(x);
    case F_ATAN: return atanf(x);
    case F_ATAN2: return atan2f(x, y);
    case F_SINH: return sinhf(x);
    case F_COSH: return coshf(x);
    case F_TANH: return tanhf(x);
    case F_POW: return powf(x, y);
    case F_ERF: return erff(x);
    case F_ERFC: return erfcf(x);
    case F_HYPOT: return hypotf(x, y);
    case F_FMOD: return fmodf(x, y);
    case F_FMA: return fmaf(x, y, x);
    case F_DIV: return x / y;
    case F_FLOOR: return floorf(x);
    case F_CEIL: return ceilf(x);
    case F_ROUND: return roundf(x);
    case F_TRUNC: return truncf(x);
    case F_RINT: return rintf(x);
    case F_FMIN: return fminf(x, y);
    case F_FMAX: return fmaxf(x, y);
    case F_SINCOS_S: sincosf(x, &s, &c); return s;
    case F_SINCOS_C: sincosf(x, &s, &c); return c;
    case F_LGAMMA: return lgammaf(x);
    }
    return 0;
}

template <>
__device__ double fdev<double>(int f, double x, double y)
{
    double s, c;
    switch (f) {
    case F_SQRT: return sqrt(x);
    case F_RSQRT: return rsqrt(x);
    case F_CBRT: return cbrt(x);
    case F_EXP: return exp(x);
    case F_EXP2: return exp2(x);
    case F_EXP10: return exp10(x);
    case F_EXPM1: return expm1(x);
    case F_LOG: return log(x);
    case F_LOG2: return log2(x);
    case F_LOG10: return log10(x);
    case F_LOG1P: return log1p(x);
    case F_SIN: return sin(x);
    case F_COS: return cos(x);
    case F_TAN: return tan(x);
    case F_ASIN: return asin(x);
    case F_ACOS: return acos(x);
    case F_ATAN: return atan(x);
    case F_ATAN2: return atan2(x, y);
    case F_SINH: return sinh(x);
    case F_COSH: return cosh(x);
    case F_TANH: return tanh(x);
    case F_POW: return pow(x, y);
    case F_ERF: return erf(x);
    case F_ERFC: return erfc(x);
    case F_HYPOT: return hypot(x, y);
    case F_FMOD: return fmod(x, y);
    case F_FMA: return fma(x, y, x);
    case F_DIV: return x / y;
    case F_FLOOR: return floor(x);
    case F_CEIL: return ceil(x);
    case F_ROUND: return round(x);
    case F_TRUNC: return trunc(x);
    case F_RINT: return rint(x);
    case F_FMIN: return fmin(x, y);
    case F_FMAX: return fmax(x, y);
    case F_SINCOS_S: sincos(x, &s, &c); return s;
    case F_SINCOS_C: sincos(x, &s, &c); return c;
    case F_LGAMMA: return lgamma(x);
    }
    return 0;
}

template <typename T>
__global__ void eval(const int *f, const T *x, const T *y, T *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = fdev<T>(f[i], x[i], y[i]);
}

// The fast intrinsics: __expf, __sinf, __fdividef.
__global__ void fast(const float *x, const float *y, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[3 * i] = __expf(x[i] * 0.01f);   // in [-10, 10]
        out[3 * i + 1] = __sinf(y[i] * 0.003f);   // in [-pi, pi]
        out[3 * i + 2] = __fdividef(x[i], y[i]);
    }
}

// The reference, one precision up.
static long double ref(int f, long double x, long double y)
{
    switch (f) {
    case F_SQRT: return sqrtl(x);
    case F_RSQRT: return 1.0L / sqrtl(x);
    case F_CBRT: return cbrtl(x);
    case F_EXP: return expl(x);
    case F_EXP2: return exp2l(x);
    case F_EXP10: return powl(10.0L, x);
    case F_EXPM1: return expm1l(x);
    case F_LOG: return logl(x);
    case F_LOG2: return log2l(x);
    case F_LOG10: return log10l(x);
    case F_LOG1P: return log1pl(x);
    case F_SIN: case F_SINCOS_S: return sinl(x);
    case F_COS: case F_SINCOS_C: return cosl(x);
    case F_TAN: return tanl(x);
    case F_ASIN: return asinl(x);
    case F_ACOS: return acosl(x);
    case F_ATAN: return atanl(x);
    case F_ATAN2: return atan2l(x, y);
    case F_SINH: return sinhl(x);
    case F_COSH: return coshl(x);
    case F_TANH: return tanhl(x);
    case F_POW: return powl(x, y);
    case F_ERF: return erfl(x);
    case F_ERFC: return erfcl(x);
    case F_HYPOT: return hypotl(x, y);
    case F_FMOD: return fmodl(x, y);
    case F_FMA: return fmal(x, y, x);
    case F_DIV: return x / y;
    case F_FLOOR: return floorl(x);
    case F_CEIL: return ceill(x);
    case F_ROUND: return roundl(x);
    case F_TRUNC: return truncl(x);
    case F_RINT: return rintl(x);
    case F_FMIN: return fminl(x, y);
    case F_FMAX: return fmaxl(x, y);
    case F_LGAMMA: return lgammal(x);
    }
    return 0;
}

// One unit in the last place of T at w (the spacing of T's values there).
template <typename T>
static long double ulp_of(T w)
{
    const int digits = std::numeric_limits<T>::digits;
    long double a = fabsl((long double)w);
    if (a < (long double)std::numeric_limits<T>::min())
        return (long double)std::numeric_limits<T>::denorm_min();
    int e;
    frexpl(a, &e);
    return ldexpl(1.0L, e - digits);
}

// Distance in ulps of T between got and the (higher-precision) reference.
template <typename T>
static double ulps(T got, long double want)
{
    T w = (T)want;
    if (std::isinf(w)) {
        // the reference overflows T only just: measure from T's max
        if (!std::isfinite(got))
            return got == w ? 0.0 : INFINITY;
        w = w > 0 ? std::numeric_limits<T>::max() : -std::numeric_limits<T>::max();
        return (double)(fabsl((long double)got - (long double)w) / ulp_of<T>(w)) + 1.0;
    }
    if (!std::isfinite(got))
        return INFINITY;
    return (double)(fabsl((long double)got - want) / ulp_of<T>(w));
}

static unsigned long long rng;
static double uniform01()
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng >> 11) / (double)(1ULL << 53);
}

// Half the time uniform in [lo, hi], half log-uniform in magnitude (so tiny
// and huge arguments both appear), clipped to the range.
static double arg(double lo, double hi)
{
    if (uniform01() < 0.5 || lo == hi)
        return lo + (hi - lo) * uniform01();
    double amax = fmax(fabs(lo), fabs(hi));
    double m = amax * pow(2.0, -60.0 * uniform01());
    double v = (lo < 0 && uniform01() < 0.5) ? -m : m;
    return v < lo ? lo : v > hi ? hi : v;
}

template <typename T>
static int run(const char *type, int per_fn, double *worst_ratio)
{
    static const double specials[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, 2.0, 1e-40, -1e-310 };
    const int nspec = sizeof specials / sizeof specials[0];
    const int per = per_fn + nspec;
    const int n = F_COUNT * per;
    int *f = (int *)malloc(n * sizeof(int));
    T *x = (T *)malloc(n * sizeof(T)), *y = (T *)malloc(n * sizeof(T)), *out = (T *)malloc(n * sizeof(T));
    for (int k = 0; k < F_COUNT; k++)
        for (int j = 0; j < per; j++) {
            int i = k * per + j;
            f[i] = k;
            if (j < nspec) {   // special x, ordinary y
                x[i] = (T)specials[j];
                y[i] = fns[k].ylo == fns[k].yhi ? (T)0 : (T)arg(fns[k].ylo, fns[k].yhi);
                if (y[i] == 0)
                    y[i] = (T)1.5;
            } else {
                x[i] = (T)arg(fns[k].lo, fns[k].hi);
                y[i] = (T)arg(fns[k].ylo, fns[k].yhi);
            }
            if ((k == F_DIV || k == F_FMOD) && y[i] == 0)
                y[i] = (T)3;
        }
    int *df;
    T *dx, *dy, *dout;
    CHECK(cudaMalloc(&df, n * sizeof(int)));
    CHECK(cudaMalloc(&dx, n * sizeof(T)));
    CHECK(cudaMalloc(&dy, n * sizeof(T)));
    CHECK(cudaMalloc(&dout, n * sizeof(T)));
    CHECK(cudaMemcpy(df, f, n * sizeof(int), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dx, x, n * sizeof(T), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, n * sizeof(T), cudaMemcpyHostToDevice));
    eval<T><<<61, 128>>>(df, dx, dy, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(out, dout, n * sizeof(T), cudaMemcpyDeviceToHost));
    int wrong = 0;
    bool isf = sizeof(T) == 4;
    for (int k = 0; k < F_COUNT; k++) {
        double worst = 0.0;
        int bad = 0;
        int tol = isf ? fns[k].ulp_f : fns[k].ulp_d;
        for (int j = 0; j < per; j++) {
            int i = k * per + j;
            long double want = ref(k, (long double)x[i], (long double)y[i]);
            // correctly rounded operations: the host's own, in T, with no
            // double rounding through long double
            if (k == F_SQRT)
                want = (long double)std::sqrt(x[i]);
            else if (k == F_DIV)
                want = (long double)(x[i] / y[i]);
            else if (k == F_FMA)
                want = (long double)std::fma(x[i], y[i], x[i]);
            T wt = (T)want;
            T got = out[i];
            bool ok;
            double u = 0.0;
            if (std::isinf(wt) && tol > 0) {
                u = ulps<T>(got, want);
                ok = u <= tol + 1.0;
            } else if (std::isnan(wt) || std::isinf(wt) || wt == 0 || tol == 0) {
                // special or exact results must match exactly (zero's sign too)
                ok = (std::isnan(wt) && std::isnan(got)) ||
                     (got == wt && std::signbit(got) == std::signbit(wt));
                // a nonzero result within a denormal of zero is fine
                if (!ok && wt == 0 && !std::isnan(got) && tol > 0)
                    ok = fabsl((long double)got) <= (long double)std::numeric_limits<T>::denorm_min() * (tol + 1);
                if (!ok && tol == 0 && !std::isnan(wt) && !std::isinf(wt) && wt != 0)
                    u = ulps<T>(got, want), ok = u <= 0.5000001;   // correctly rounded
            } else {
                u = ulps<T>(got, want);
                ok = u <= tol + 1.0;
            }
            if (!ok) {
                if (bad++ < 3 && wrong < 20)
                    printf("%s %s(%.9g, %.9g) = %.17g, expected %.17Lg (%.1f ulp, limit %d)\n", type, fns[k].name,
                           (double)x[i], (double)y[i], (double)got, want, u, tol);
            } else if (u > worst)
                worst = u;
        }
        wrong += bad;
        double ratio = worst / (tol + 1.0);
        if (ratio > *worst_ratio)
            *worst_ratio = ratio;
    }
    CHECK(cudaFree(df));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dout));
    free(f);
    free(x);
    free(y);
    free(out);
    printf("%s: %d functions x %d arguments, %d wrong\n", type, F_COUNT, per, wrong);
    return wrong;
}

int main()
{
    unsigned seed = run_seed(nullptr);
    rng = seed;
    double worst = 0.0;
    int wrong = run<float>("float", 300, &worst);
    wrong += run<double>("double", 300, &worst);

    // fast intrinsics
    const int n = 2000;
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    float *out = (float *)malloc(3 * n * sizeof(float));
    for (int i = 0; i < n; i++) {
        x[i] = (float)arg(-1000, 1000);
        y[i] = (float)arg(-1000, 1000);
        if (fabsf(y[i]) < 1e-3f)
            y[i] = 1.0f;
    }
    float *dx, *dy, *dout;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMalloc(&dout, 3 * n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice));
    fast<<<(n + 127) / 128, 128>>>(dx, dy, dout, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(out, dout, 3 * n * sizeof(float), cudaMemcpyDeviceToHost));
    int fast_wrong = 0;
    for (int i = 0; i < n; i++) {
        float ex = x[i] * 0.01f, sx = y[i] * 0.003f;
        double e = ulps<float>(out[3 * i], expl((long double)ex));
        double e_lim = 2.0 + floor(fabs(1.173 * ex)) + 1.0;
        double serr = fabs((double)out[3 * i + 1] - sin((double)sx));
        double d = ulps<float>(out[3 * i + 2], (long double)x[i] / (long double)y[i]);
        if (e > e_lim && fast_wrong++ < 3)
            printf("__expf(%.9g) = %.9g, %.1f ulp (limit %.0f)\n", ex, out[3 * i], e, e_lim);
        if (serr > ldexp(1.0, -21) && fast_wrong++ < 6)   // documented 2^-21.41
            printf("__sinf(%.9g) = %.9g, error %.3g\n", sx, out[3 * i + 1], serr);
        if (d > 3.0 && fast_wrong++ < 9)   // 2 ulp for |y| in [2^-126, 2^126]
            printf("__fdividef(%.9g, %.9g) = %.9g, %.1f ulp\n", x[i], y[i], out[3 * i + 2], d);
    }
    printf("fast intrinsics: %d arguments, %d wrong\n", n, fast_wrong);
    wrong += fast_wrong;
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dout));
    free(x);
    free(y);
    free(out);
    if (wrong) {
        printf("mathfn: %d wrong (seed %u)\n", wrong, seed);
        return 1;
    }
    printf("mathfn: ok %d functions float double, worst %.2f of the limit\n", F_COUNT, worst);
    return 0;
}
