/* ptx_math: the arithmetic that is more than one C operator: cvt in every
 * rounding mode, float ops in directed rounding, f16 conversions and the
 * approximate functions (ex2, lg2, sin, ...). Values are register bits. */
#ifndef RIG_SOFTGPU_PTX_MATH_H
#define RIG_SOFTGPU_PTX_MATH_H

#include "softgpu/ptx_ir.h"

#include <stdint.h>
#include <string.h>

static inline float ptx_f32(uint64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint64_t ptx_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline double ptx_f64(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

static inline uint64_t ptx_f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

float ptx_half_to_float(uint16_t h);
uint16_t ptx_float_to_half(float f);    /* round to nearest even */
uint16_t ptx_double_to_half(double d);  /* round to nearest even, once */

/* Zero for a subnormal f32 (keeping the sign), else x. */
uint64_t ptx_ftz32(uint64_t bits);

/* cvt.rnd.sat.ftz.dt.st of one value, written for a dwidth-byte register. */
uint64_t ptx_cvt(uint64_t v, ptx_type dt, ptx_type st, int rnd, unsigned flags,
                 unsigned dwidth);

/* cvt.rnd.tf32.f32: f32 bits rounded to a 10-bit mantissa (low 13 bits
 * zero); mode 0 .rna (ties away), 1 .rn, 2 .rz. */
uint64_t ptx_cvt_tf32(uint64_t bits, int mode);

/* add/sub/mul/div/fma/sqrt/rcp in f32 or f64 under rounding rnd
 * (RND_RZ/RM/RP); op is OP_ADD ... */
uint64_t ptx_fop_rounded(int op, ptx_type t, int rnd, uint64_t a, uint64_t b, uint64_t c);

/* f16, f16x2, bf16 and bf16x2 add/sub/mul/fma/neg/abs/min/max (to
 * nearest even) with flags F_FTZ, F_SAT, F_NAN and flags2 F2_RELU; a NaN
 * result is the canonical 0x7fff (ptx_narrow.c). */
uint64_t ptx_half_op(int op, ptx_type t, unsigned flags, unsigned flags2, uint64_t a, uint64_t b, uint64_t c);

/* OP_CVTNARROW of one lane (see ptx_ir.h): fmt NF_*, dt the destination
 * (T_F16X2/T_BF16X2 when widening), st the source; b is the low value of
 * a narrowing from two f32. */
uint64_t ptx_cvt_narrow(int fmt, ptx_type dt, ptx_type st, int rnd, unsigned flags, unsigned flags2,
                        uint64_t a, uint64_t b);

/* The value of code of narrow format fmt (NF_*); NaN for its NaNs. */
double ptx_narrow_value(int fmt, unsigned code);

/* cvt.pack.sat: a and b (s32) saturated to width bits, a above b, and for
 * widths under 16 c's bits above both. */
uint64_t ptx_cvt_pack(unsigned width, bool is_signed, uint64_t a, uint64_t b, uint64_t c);

/* Unary approximate or exact float math: OP_RCP, OP_SQRT, OP_RSQRT, OP_EX2,
 * OP_LG2, OP_SIN, OP_COS, OP_TANH; t is T_F32 or T_F64. */
uint64_t ptx_fmath(int op, ptx_type t, uint64_t a);

/* testp.mode.t */
bool ptx_testp(int mode, ptx_type t, uint64_t a);

#endif
