/* ptx_math: cvt, directed rounding, f16 and approximate functions (see
 * ptx_math.h). Built with -frounding-math: fesetround must not be folded
 * away around the operations it brackets. */
#include "softgpu/ptx_math.h"

#include <fenv.h>
#include <math.h>

float ptx_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {   /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    return ptx_f32(bits);
}

uint16_t ptx_double_to_half(double d)
{
    uint64_t b = ptx_f64_bits(d);
    uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
    double a = fabs(d);
    if (isnan(d))
        return sign | 0x7e00;
    if (a >= 65520.0)   /* rounds to infinity */
        return sign | 0x7c00;
    if (a < 0x1p-25)    /* rounds to zero (ties to even: exactly 2^-25 -> 0) */
        return sign;
    int e;
    frexp(a, &e);       /* a = m * 2^e, m in [0.5, 1) */
    int ue = e - 1;     /* unbiased exponent of a */
    if (ue < -14)
        ue = -14;       /* subnormal range: fixed quantum 2^-24 */
    double q = ldexp(1.0, ue - 10);
    double n = nearbyint(a / q);   /* exact scaling by a power of two; rn */
    uint64_t m = (uint64_t)n;
    /* m is in [0, 2048]; m == 2048 carries into the exponent */
    int he = ue + 15;
    if (m >= 2048) {
        m >>= 1;
        he++;
    }
    if (m < 1024)       /* subnormal */
        return sign | (uint16_t)m;
    if (he >= 31)
        return sign | 0x7c00;
    return sign | (uint16_t)(he << 10) | (uint16_t)(m & 0x3ff);
}

uint16_t ptx_float_to_half(float f)
{
    return ptx_double_to_half((double)f);   /* exact widening, one rounding */
}

uint64_t ptx_ftz32(uint64_t bits)
{
    uint32_t u = (uint32_t)bits;
    if ((u & 0x7f800000u) == 0)
        return u & 0x80000000u;
    return u;
}

uint64_t ptx_cvt_tf32(uint64_t bits, int mode)
{
    uint32_t u = (uint32_t)bits;
    if ((u & 0x7f800000u) == 0x7f800000u)   /* inf stays, NaN becomes the canonical one */
        return (u & 0x007fffffu) ? 0x7fffffffu : u;
    if (mode == 0)
        u += 0x1000u;                       /* ties away: the magnitude rounds up at half */
    else if (mode == 1)
        u += 0xfffu + ((u >> 13) & 1);      /* ties to even */
    return u & 0xffffe000u;                 /* a carry into the exponent is the right result */
}

static int fe_mode(int rnd)
{
    switch (rnd) {
    case RND_RZ: case RND_RZI: return FE_TOWARDZERO;
    case RND_RM: case RND_RMI: return FE_DOWNWARD;
    case RND_RP: case RND_RPI: return FE_UPWARD;
    default: return FE_TONEAREST;
    }
}

static double round_integral(double x, int rnd)
{
    switch (rnd) {
    case RND_RNI: return nearbyint(x);    /* default mode: ties to even */
    case RND_RZI: return trunc(x);
    case RND_RMI: return floor(x);
    case RND_RPI: return ceil(x);
    default: return x;
    }
}

static float round_integral_f(float x, int rnd)
{
    switch (rnd) {
    case RND_RNI: return nearbyintf(x);
    case RND_RZI: return truncf(x);
    case RND_RMI: return floorf(x);
    case RND_RPI: return ceilf(x);
    default: return x;
    }
}

/* Truncates v to type t's size, extends per its signedness, masks to the
 * register's width. */
static uint64_t wr_int(uint64_t v, ptx_type t, unsigned dwidth)
{
    unsigned s = ptx_type_size(t);
    if (s < 8) {
        uint64_t m = (1ull << (8 * s)) - 1;
        v &= m;
        if (ptx_type_signed(t) && (v >> (8 * s - 1)) & 1)
            v |= ~m;
    }
    if (dwidth < 8)
        v &= (1ull << (8 * dwidth)) - 1;
    return v;
}

static int64_t rd_sint(uint64_t v, ptx_type t)
{
    switch (ptx_type_size(t)) {
    case 1: return (int8_t)v;
    case 2: return (int16_t)v;
    case 4: return (int32_t)v;
    default: return (int64_t)v;
    }
}

static uint64_t rd_uint(uint64_t v, ptx_type t)
{
    switch (ptx_type_size(t)) {
    case 1: return (uint8_t)v;
    case 2: return (uint16_t)v;
    case 4: return (uint32_t)v;
    default: return v;
    }
}

static void int_range(ptx_type t, double *lo, double *hi, int64_t *ilo, uint64_t *ihi)
{
    unsigned bits = 8 * ptx_type_size(t);
    if (ptx_type_signed(t)) {
        *ilo = bits == 64 ? INT64_MIN : -(int64_t)(1ull << (bits - 1));
        *ihi = bits == 64 ? (uint64_t)INT64_MAX : (1ull << (bits - 1)) - 1;
    } else {
        *ilo = 0;
        *ihi = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    }
    *lo = (double)*ilo;
    *hi = (double)*ihi;
}

/* float (as double, already integral) to an integer type, saturating. */
static uint64_t float_to_int(double x, ptx_type dt)
{
    double lo, hi;
    int64_t ilo;
    uint64_t ihi;
    int_range(dt, &lo, &hi, &ilo, &ihi);
    if (isnan(x))
        return 0;
    if (x <= lo)
        return (uint64_t)ilo;
    if (x >= hi)   /* hi as a double may round up: clamp on >= */
        return ihi;
    if (ptx_type_signed(dt))
        return (uint64_t)(int64_t)x;
    return (uint64_t)x;
}

uint64_t ptx_cvt(uint64_t v, ptx_type dt, ptx_type st, int rnd, unsigned flags,
                 unsigned dwidth)
{
    if (st == T_BF16)   /* to f32: exact */
        return (uint64_t)((uint32_t)(uint16_t)v << 16);
    if (dt == T_BF16) {   /* from f32, .rn or .rz */
        uint32_t u = (uint32_t)v;
        if ((flags & F_FTZ) && (u & 0x7f800000u) == 0)
            u &= 0x80000000u;
        uint16_t h;
        if ((u & 0x7fffffffu) > 0x7f800000u)
            h = (uint16_t)((u >> 16) | 0x40);   /* quiet NaN */
        else if (rnd == RND_RZ)
            h = (uint16_t)(u >> 16);
        else
            h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        if (flags & F_SAT) {
            float g = ptx_f32((uint64_t)h << 16);
            if (isnan(g) || g < 0)
                h = 0;
            else if (g > 1)
                h = 0x3f80;
        }
        return h;
    }
    bool dfl = ptx_type_float(dt), sfl = ptx_type_float(st);
    if (!dfl && !sfl) {
        uint64_t r;
        if (flags & F_SAT) {
            double lo, hi;
            int64_t ilo;
            uint64_t ihi;
            int_range(dt, &lo, &hi, &ilo, &ihi);
            if (ptx_type_signed(st)) {
                int64_t x = rd_sint(v, st);
                if (x < ilo)
                    x = ilo;
                if (x > 0 && (uint64_t)x > ihi)
                    x = (int64_t)ihi;
                r = (uint64_t)x;
            } else {
                uint64_t x = rd_uint(v, st);
                if (x > ihi)
                    x = ihi;
                r = x;
            }
        } else {
            r = ptx_type_signed(st) ? (uint64_t)rd_sint(v, st) : rd_uint(v, st);
        }
        return wr_int(r, dt, dwidth);
    }
    if (sfl && !dfl) {
        double x;
        if (st == T_F16) {
            x = ptx_half_to_float((uint16_t)v);
        } else if (st == T_F32) {
            uint64_t b = v;
            if (flags & F_FTZ)
                b = ptx_ftz32(b);
            x = ptx_f32(b);
        } else {
            x = ptx_f64(v);
        }
        return wr_int(float_to_int(round_integral(x, rnd), dt), dt, dwidth);
    }
    double x;   /* the source value, exactly */
    bool exact_src = true;
    int64_t si = 0;
    uint64_t ui = 0;
    if (!sfl) {
        if (ptx_type_signed(st))
            si = rd_sint(v, st);
        else
            ui = rd_uint(v, st);
        x = 0;
        exact_src = false;
    } else if (st == T_F16) {
        x = ptx_half_to_float((uint16_t)v);
    } else if (st == T_F32) {
        x = ptx_f32((flags & F_FTZ) ? ptx_ftz32(v) : v);
    } else {
        x = ptx_f64(v);
    }
    uint64_t out;
    int old = fegetround();
    bool directed = rnd == RND_RZ || rnd == RND_RM || rnd == RND_RP;
    if (directed)
        fesetround(fe_mode(rnd));
    if (dt == T_F64) {
        if (!exact_src)
            x = ptx_type_signed(st) ? (double)si : (double)ui;
        else if (rnd >= RND_RNI)
            x = round_integral(x, rnd);
        out = ptx_f64_bits(x);
    } else if (dt == T_F32) {
        float f;
        if (!exact_src) {
            f = ptx_type_signed(st) ? (float)si : (float)ui;
        } else if (st == T_F32 && rnd >= RND_RNI) {
            f = round_integral_f((float)x, rnd);
        } else {
            f = (float)x;
        }
        out = ptx_f32_bits(f);
        if (flags & F_FTZ)
            out = ptx_ftz32(out);
        if (flags & F_SAT) {
            float g = ptx_f32(out);
            if (isnan(g))
                g = 0.0f;
            else if (g < 0.0f)
                g = 0.0f;
            else if (g > 1.0f)
                g = 1.0f;
            out = ptx_f32_bits(g);
        }
    } else {   /* T_F16 */
        double y = exact_src ? x : (ptx_type_signed(st) ? (double)si : (double)ui);
        if (rnd >= RND_RNI)
            y = round_integral(y, rnd);
        if (directed) {
            fesetround(old);
            /* directed rounding to f16: step from the nearest value */
            uint16_t h = ptx_double_to_half(y);
            double hv = ptx_half_to_float(h);
            if ((rnd == RND_RZ && fabs(hv) > fabs(y)) || (rnd == RND_RM && hv > y) ||
                (rnd == RND_RP && hv < y)) {
                bool toward_zero = (hv > 0) == (rnd != RND_RP);
                if (rnd == RND_RZ)
                    toward_zero = true;
                h = toward_zero ? (uint16_t)(h - 1) : (uint16_t)(h + 1);
                if (hv == 0)
                    h = (uint16_t)((rnd == RND_RM ? 0x8000 : 0) | 1);
            }
            out = h;
        } else {
            out = ptx_double_to_half(y);
        }
        if ((flags & F_SAT)) {
            float g = ptx_half_to_float((uint16_t)out);
            if (isnan(g) || g < 0)
                out = 0;
            else if (g > 1)
                out = 0x3c00;
        }
    }
    if (directed)
        fesetround(old);
    if (dt == T_F64 && (flags & F_SAT)) {
        double g = ptx_f64(out);
        if (isnan(g) || g < 0)
            g = 0;
        else if (g > 1)
            g = 1;
        out = ptx_f64_bits(g);
    }
    if (dwidth < 8)
        out &= (1ull << (8 * dwidth)) - 1;
    return out;
}

uint64_t ptx_fop_rounded(int op, ptx_type t, int rnd, uint64_t a, uint64_t b, uint64_t c)
{
    int old = fegetround();
    fesetround(fe_mode(rnd));
    uint64_t r = 0;
    if (t == T_F32) {
        volatile float x = ptx_f32(a), y = ptx_f32(b), z = ptx_f32(c), v = 0;
        switch (op) {
        case OP_ADD: v = x + y; break;
        case OP_SUB: v = x - y; break;
        case OP_MUL: v = x * y; break;
        case OP_DIV: v = x / y; break;
        case OP_FMA: v = fmaf(x, y, z); break;
        case OP_SQRT: v = sqrtf(x); break;
        case OP_RCP: v = 1.0f / x; break;
        }
        r = ptx_f32_bits(v);
    } else {
        volatile double x = ptx_f64(a), y = ptx_f64(b), z = ptx_f64(c), v = 0;
        switch (op) {
        case OP_ADD: v = x + y; break;
        case OP_SUB: v = x - y; break;
        case OP_MUL: v = x * y; break;
        case OP_DIV: v = x / y; break;
        case OP_FMA: v = fma(x, y, z); break;
        case OP_SQRT: v = sqrt(x); break;
        case OP_RCP: v = 1.0 / x; break;
        }
        r = ptx_f64_bits(v);
    }
    fesetround(old);
    return r;
}

uint64_t ptx_fmath(int op, ptx_type t, uint64_t a)
{
    if (t == T_F64) {
        double x = ptx_f64(a), v;
        switch (op) {
        case OP_RCP: v = 1.0 / x; break;
        case OP_SQRT: v = sqrt(x); break;
        case OP_RSQRT: v = 1.0 / sqrt(x); break;
        default: v = NAN; break;
        }
        return ptx_f64_bits(v);
    }
    float x = ptx_f32(a), v;
    switch (op) {
    case OP_RCP: v = 1.0f / x; break;
    case OP_SQRT: v = sqrtf(x); break;
    case OP_RSQRT: v = 1.0f / sqrtf(x); break;
    case OP_EX2: v = exp2f(x); break;
    case OP_LG2: v = log2f(x); break;
    case OP_SIN: v = sinf(x); break;
    case OP_COS: v = cosf(x); break;
    case OP_TANH: v = tanhf(x); break;
    default: v = NAN; break;
    }
    return ptx_f32_bits(v);
}

bool ptx_testp(int mode, ptx_type t, uint64_t a)
{
    double x = t == T_F32 ? (double)ptx_f32(a) : ptx_f64(a);
    int c = t == T_F32 ? fpclassify(ptx_f32(a)) : fpclassify(x);
    switch (mode) {
    case 0: return isfinite(x);
    case 1: return isinf(x);
    case 2: return !isnan(x);
    case 3: return isnan(x);
    case 4: return c == FP_NORMAL;
    case 5: return c == FP_SUBNORMAL;
    default: return false;
    }
}
