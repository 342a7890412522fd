/* ptx_narrow: the floating-point formats narrower than f32: f16 and bf16
 * arithmetic, the 8-, 6- and 4-bit formats' conversions (e4m3, e5m2,
 * e2m3, e3m2, e2m1, ue8m0) and cvt.pack (see ptx_math.h). Every value of
 * these formats is exact in a double, so each result is computed exactly
 * (or rounded to odd, which a second rounding to 8 or fewer bits leaves
 * correct) and then rounded once to its format. */
#include "softgpu/ptx_math.h"

#include <math.h>
#include <stdbool.h>

/* A binary format: mbits stored mantissa bits, emin the exponent of its
 * smallest normal, bias; max its largest finite value; nan its canonical
 * NaN (0: none, inf: has infinities); bits its width. */
typedef struct nfmt {
    int mbits, emin, bias;
    double max;
    bool inf;
    unsigned nan, bits;
} nfmt;

static const nfmt F16 = { 10, -14, 15, 65504.0, true, 0x7fff, 16 };
static const nfmt BF16 = { 7, -126, 127, 0x1.fep127, true, 0x7fff, 16 };
static const nfmt NARROW[] = {
    [NF_E4M3] = { 3, -6, 7, 448.0, false, 0x7f, 8 },
    [NF_E5M2] = { 2, -14, 15, 57344.0, true, 0x7f, 8 },
    [NF_E2M3] = { 3, 0, 1, 7.5, false, 0, 6 },
    [NF_E3M2] = { 2, -2, 3, 28.0, false, 0, 6 },
    [NF_E2M1] = { 1, 0, 1, 6.0, false, 0, 4 },
};

static double decode(const nfmt *f, unsigned code)
{
    unsigned e = (code >> f->mbits) & ((1u << (f->bits - 1 - f->mbits)) - 1);
    unsigned man = code & ((1u << f->mbits) - 1);
    unsigned emax = (1u << (f->bits - 1 - f->mbits)) - 1;
    bool neg = (code >> (f->bits - 1)) & 1;
    double v;
    if (f->inf && e == emax)
        v = man ? NAN : INFINITY;
    else if (f->nan && !f->inf && (code & ((1u << (f->bits - 1)) - 1)) == (f->nan & ((1u << (f->bits - 1)) - 1)))
        v = NAN;   /* e4m3: S.1111.111 */
    else if (e == 0)
        v = ldexp((double)man, f->emin - f->mbits);
    else
        v = ldexp((double)(man | 1u << f->mbits), (int)e - f->bias - f->mbits);
    return neg ? -v : v;
}

/* |a| rounded to f's precision (unbounded exponent above), to nearest
 * even or toward zero. */
static double round_mag(const nfmt *f, double a, bool rz)
{
    if (a == 0)
        return 0;
    int e;
    frexp(a, &e);
    int ue = e - 1 < f->emin ? f->emin : e - 1;
    int q = ue - f->mbits;
    double n = ldexp(a, -q), fl = floor(n), diff = n - fl;   /* n < 2^(mbits+2): exact */
    if (!rz && (diff > 0.5 || (diff == 0.5 && fmod(fl, 2.0) != 0)))
        fl += 1;
    return ldexp(fl, q);
}

/* x rounded to f; sat: an overflow gives the largest finite value (NaN of
 * a format without one: +max), else infinity or NaN. */
static unsigned encode(const nfmt *f, double x, bool rz, bool sat)
{
    unsigned sign = signbit(x) ? 1u << (f->bits - 1) : 0;
    unsigned emax = (1u << (f->bits - 1 - f->mbits)) - 1;
    unsigned maxcode = f->inf ? (emax << f->mbits) - 1 : f->nan ? (f->nan & ~(sign | (1u << (f->bits - 1)))) - 1
                                                            : (1u << (f->bits - 1)) - 1;
    if (isnan(x))
        return f->nan ? f->nan : maxcode;
    double r = isinf(x) ? INFINITY : round_mag(f, fabs(x), rz);
    if (r > f->max) {
        if (sat || (!f->inf && !f->nan))
            return sign | maxcode;
        return f->inf ? sign | emax << f->mbits : f->nan;
    }
    if (r == 0)
        return sign;
    int e;
    frexp(r, &e);
    if (e - 1 < f->emin)
        return sign | (unsigned)ldexp(r, f->mbits - f->emin);
    unsigned man = (unsigned)ldexp(r, f->mbits - (e - 1)) - (1u << f->mbits);
    return sign | (unsigned)(e - 1 + f->bias) << f->mbits | man;
}

/* x * y + z rounded to odd in double: exact when that is exact, else the
 * neighbour with an odd last bit, so a later rounding to a format of at
 * most 51 bits rounds as the exact value would. */
static double fma_odd(double x, double y, double z)
{
    double p = x * y;   /* exact: both have at most 11 significant bits */
    double s = p + z;
    if (!isfinite(s))
        return s;
    double bb = s - p, err = (p - (s - bb)) + (z - bb);   /* s + err == p + z */
    if (err != 0 && !(ptx_f64_bits(s) & 1))
        s = nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return s;
}

static unsigned half_op(const nfmt *f, int op, unsigned flags, unsigned flags2, unsigned a, unsigned b,
                        unsigned c)
{
    unsigned sbit = 1u << (f->bits - 1);
    if ((flags & F_FTZ) && !(a & (sbit - 1) & ~((1u << f->mbits) - 1)))
        a &= sbit;   /* .ftz: a subnormal source is a zero of its sign */
    if (op == OP_NEG)
        return a ^ sbit;
    if (op == OP_ABS)
        return a & (sbit - 1);
    double x = decode(f, a), y = decode(f, b), z = decode(f, c), r;
    bool ftz = flags & F_FTZ;
    if (ftz) {   /* subnormal inputs are zeros of their sign */
        double tiny = ldexp(1.0, f->emin);
        if (fabs(x) < tiny) x = copysign(0.0, x);
        if (fabs(y) < tiny) y = copysign(0.0, y);
        if (fabs(z) < tiny) z = copysign(0.0, z);
    }
    unsigned out;
    switch (op) {
    case OP_ADD: r = x + y; break;   /* one rounding to 53 bits, then to at most 11: exact as once */
    case OP_SUB: r = x - y; break;
    case OP_MUL: r = x * y; break;   /* exact */
    case OP_FMA: r = fma_odd(x, y, z); break;
    case OP_MIN: case OP_MAX: {
        bool mx = op == OP_MAX;
        if (isnan(x) && isnan(y))
            out = f->nan;
        else if ((flags & F_NAN) && (isnan(x) || isnan(y)))
            out = f->nan;
        else if (isnan(x))
            out = b;
        else if (isnan(y))
            out = a;
        else if (x == y)   /* -0 is below +0 */
            out = ((a & sbit) != 0) == !mx ? a : b;
        else
            out = (mx ? x > y : x < y) ? a : b;
        if ((flags2 & F2_RELU) && (out & sbit) && out != f->nan)
            out = 0;
        return out;
    }
    default: return f->nan;
    }
    if (isnan(r))
        return (flags & F_SAT) ? 0 : f->nan;
    out = encode(f, r, false, false);
    if (ftz && (out & (sbit - 1)) != 0 && ((out >> f->mbits) & ((sbit - 1) >> f->mbits)) == 0)
        out &= sbit;   /* a subnormal result is a zero of its sign */
    if ((flags & F_SAT)) {
        double v = decode(f, out);
        out = v > 1.0 ? encode(f, 1.0, false, false) : (v > 0 ? out : 0);
    }
    if ((flags2 & F2_RELU) && (out & sbit))
        out = 0;
    return out;
}

uint64_t ptx_half_op(int op, ptx_type t, unsigned flags, unsigned flags2, uint64_t a, uint64_t b, uint64_t c)
{
    const nfmt *f = (t == T_BF16 || t == T_BF16X2) ? &BF16 : &F16;
    uint64_t lo = half_op(f, op, flags, flags2, (uint16_t)a, (uint16_t)b, (uint16_t)c);
    if (t == T_F16 || t == T_BF16)
        return lo;
    uint64_t hi = half_op(f, op, flags, flags2, (uint16_t)(a >> 16), (uint16_t)(b >> 16), (uint16_t)(c >> 16));
    return lo | hi << 16;
}

/* ue8m0 (a power of two 2^(code-127), 0xff NaN) of the f32 with bits u:
 * its exponent, for .rp raised when |x| is not a power of two. */
static unsigned to_ue8m0(uint32_t u, int rnd, bool sat)
{
    uint32_t ua = u & 0x7fffffffu;
    if (ua > 0x7f800000u)
        return 0xff;
    unsigned code = ua >> 23;
    /* above 2^-127 (code 0) and finite with mantissa bits: the next power up */
    if (rnd == RND_RP && (ua & 0x7fffffu) && ua > 0x00400000u && ua < 0x7f800000u)
        code++;
    if (sat && code == 0xff)
        code = 0xfe;
    return code;
}

static unsigned narrow_one(int fmt, double x, int rnd, unsigned flags, unsigned flags2)
{
    const nfmt *f = &NARROW[fmt];
    if ((flags2 & F2_RELU) && x < 0)
        x = 0;
    return encode(f, x, rnd == RND_RZ, flags & F_SAT);
}

double ptx_narrow_value(int fmt, unsigned code)
{
    if (fmt == NF_UE8M0)
        return code == 0xff ? NAN : ldexp(1.0, (int)code - 127);
    return decode(&NARROW[fmt], code & ((1u << NARROW[fmt].bits) - 1));
}

/* An f16 or bf16 half's value. */
static double half_value(ptx_type t, unsigned h)
{
    return decode(t == T_BF16X2 ? &BF16 : &F16, h);
}

uint64_t ptx_cvt_narrow(int fmt, ptx_type dt, ptx_type st, int rnd, unsigned flags, unsigned flags2,
                        uint64_t a, uint64_t b)
{
    if (dt == T_F16X2 || dt == T_BF16X2) {   /* widening: exact */
        unsigned w = fmt == NF_E2M1 ? 4 : 8, hv[2] = { (unsigned)(a >> w) & ((1u << w) - 1),
                                                      (unsigned)a & ((1u << w) - 1) };
        uint64_t out = 0;
        for (unsigned i = 0; i < 2; i++) {
            unsigned h;
            if (fmt == NF_UE8M0) {
                h = hv[i] == 0xff ? 0x7fff : hv[i] == 0 ? 0x0040 : hv[i] << 7;
            } else {
                const nfmt *f = &NARROW[fmt];
                double v = decode(f, hv[i] & ((1u << f->bits) - 1));
                if ((flags2 & F2_RELU) && v < 0)
                    v = 0;
                h = isnan(v) ? 0x7fff : encode(&F16, v, false, false);
            }
            out = out << 16 | h;
        }
        return out;
    }
    unsigned hi, lo;
    if (fmt == NF_UE8M0) {
        uint32_t ua = st == T_F32 ? (uint32_t)a : (uint32_t)(a >> 16) << 16;
        uint32_t ub = st == T_F32 ? (uint32_t)b : (uint32_t)a << 16;
        hi = to_ue8m0(ua, rnd, flags & F_SAT);
        lo = to_ue8m0(ub, rnd, flags & F_SAT);
    } else if (st == T_F32) {
        hi = narrow_one(fmt, ptx_f32(a), rnd, flags, flags2);
        lo = narrow_one(fmt, ptx_f32(b), rnd, flags, flags2);
    } else {
        hi = narrow_one(fmt, half_value(st, (uint16_t)(a >> 16)), rnd, flags, flags2);
        lo = narrow_one(fmt, half_value(st, (uint16_t)a), rnd, flags, flags2);
    }
    unsigned w = fmt == NF_E2M1 ? 4 : 8;
    return (uint64_t)hi << w | lo;
}

uint64_t ptx_cvt_pack(unsigned width, bool is_signed, uint64_t a, uint64_t b, uint64_t c)
{
    int64_t lo = is_signed ? -(int64_t)(1ll << (width - 1)) : 0;
    int64_t hi = is_signed ? (int64_t)(1ll << (width - 1)) - 1 : (int64_t)(1ll << width) - 1;
    int64_t x = (int32_t)a, y = (int32_t)b;
    x = x < lo ? lo : x > hi ? hi : x;
    y = y < lo ? lo : y > hi ? hi : y;
    uint64_t mask = (1ull << width) - 1;
    uint64_t d = ((uint64_t)x & mask) << width | ((uint64_t)y & mask);
    if (width < 16)
        d |= (uint64_t)(uint32_t)c << (2 * width);
    return d & 0xffffffffu;
}
