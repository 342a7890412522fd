/* Instruction forms nvcc's output rarely reaches, one hand-written PTX
 * body at a time: carry chains, every cvt rounding, bit fields, unordered
 * compares, directed rounding, f16, atomics of every kind, lane registers.
 * Each of 64 threads reads 64 bytes of input and writes 64 bytes of output;
 * a C function gives the expected output per thread. */
#include "tests/test_ptx_util.h"

#include <fenv.h>
#include <math.h>
#include "tests/seed.h"

#define NT 64

TestSuite(ptx_isa, .fini = tp_free_all);

typedef union slot {
    uint64_t u[8];
    uint32_t w[16];
    float f[16];
    double d[8];
} slot;

static const char *prologue =
    ".version 9.0\n.target sm_75\n.address_size 64\n"
    ".shared .align 8 .b8 sh[512];\n"
    ".visible .entry t(.param .u64 p_out, .param .u64 p_in)\n{\n"
    ".reg .pred %p<8>;\n.reg .b16 %h<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<32>;\n"
    ".reg .f32 %f<16>;\n.reg .f64 %fd<16>;\n"
    "ld.param.u64 %rd30, [p_out];\nld.param.u64 %rd31, [p_in];\n"
    "mov.u32 %r31, %tid.x;\nmov.u32 %r30, %ctaid.x;\nmov.u32 %r29, %ntid.x;\n"
    "mad.lo.s32 %r28, %r30, %r29, %r31;\nmul.wide.u32 %rd29, %r28, 64;\n"
    "add.s64 %rd28, %rd31, %rd29;\nadd.s64 %rd27, %rd30, %rd29;\n"
    "ld.global.u64 %rd1, [%rd28];\nld.global.u64 %rd2, [%rd28+8];\nld.global.u64 %rd3, [%rd28+16];\n"
    "ld.global.u32 %r1, [%rd28];\nld.global.u32 %r2, [%rd28+8];\nld.global.u32 %r3, [%rd28+16];\n"
    "ld.global.f32 %f1, [%rd28+24];\nld.global.f32 %f2, [%rd28+28];\n"
    "ld.global.f64 %fd1, [%rd28+32];\nld.global.f64 %fd2, [%rd28+40];\n";

/* Runs body on NT threads (one block unless blocks > 1). */
static void run_body(const char *body, const slot *in, slot *out, unsigned blocks)
{
    size_t n = strlen(prologue) + strlen(body) + 32;
    char *text = malloc(n);
    cr_assert(text);
    snprintf(text, n, "%s%s\nret;\n}\n", prologue, body);
    soft_program *p = NULL;
    char msg[256];
    CUresult rc = soft_program_parse(text, strlen(text), &p, msg, sizeof msg);
    free(text);
    cr_assert_eq(rc, CUDA_SUCCESS, "parse: %s", msg);
    slot *din = tp_alloc(sizeof(slot) * NT * blocks), *dout = tp_alloc(sizeof(slot) * NT * blocks);
    memcpy(din, in, sizeof(slot) * NT * blocks);
    memcpy(dout, out, sizeof(slot) * NT * blocks);
    tp_args a = { 0 };
    TP_ARG(&a, dout);
    TP_ARG(&a, din);
    soft_launch l = { .entry = 0, .grid = { blocks, 1, 1 }, .block = { NT, 1, 1 },
                      .params = a.buf, .memory = &tp_memory, .threads = 1 };
    rc = soft_program_launch(p, &l, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_SUCCESS, "launch: %s", msg);
    memcpy(out, dout, sizeof(slot) * NT * blocks);
    soft_program_free(p);
}

static void random_inputs(slot *in, unsigned n)
{
    tp_state = test_seed();
    for (unsigned i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            in[i].u[k] = tp_rand();
}

Test(ptx_isa, carry_chains)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    in[0].u[0] = in[0].u[1] = ~0ull;   /* carries all the way */
    in[1].u[0] = 0;                    /* borrows all the way */
    run_body(
        "add.cc.u32 %r4, %r1, %r2;\naddc.cc.u32 %r5, %r1, %r3;\naddc.u32 %r6, 0, 0;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u32 [%rd27+8], %r6;\n"
        "sub.cc.u32 %r7, %r1, %r2;\nsubc.cc.u32 %r8, %r2, %r3;\nsubc.u32 %r9, 0, 0;\n"
        "st.global.u32 [%rd27+12], %r7;\nst.global.u32 [%rd27+16], %r8;\nst.global.u32 [%rd27+20], %r9;\n"
        "add.cc.u64 %rd4, %rd1, %rd2;\naddc.u64 %rd5, %rd3, 0;\n"
        "st.global.u64 [%rd27+24], %rd4;\nst.global.u64 [%rd27+32], %rd5;\n"
        "sub.cc.u64 %rd6, %rd1, %rd2;\nsubc.u64 %rd7, %rd3, %rd3;\n"
        "st.global.u64 [%rd27+40], %rd6;\nst.global.u64 [%rd27+48], %rd7;\n"
        "mad.lo.cc.u32 %r10, %r1, %r2, %r3;\nmadc.hi.u32 %r11, %r1, %r2, 0;\n"
        "st.global.u32 [%rd27+56], %r10;\nst.global.u32 [%rd27+60], %r11;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        uint32_t a = (uint32_t)in[t].u[0], b = (uint32_t)in[t].u[1], c = (uint32_t)in[t].u[2];
        uint64_t s0 = (uint64_t)a + b, s1 = (uint64_t)a + c + (s0 >> 32);
        cr_assert_eq(out[t].w[0], (uint32_t)s0);
        cr_assert_eq(out[t].w[1], (uint32_t)s1);
        cr_assert_eq(out[t].w[2], (uint32_t)(s1 >> 32), "thread %d carry", t);
        uint32_t bw0 = a < b;
        uint32_t d1 = b - c - bw0, bw1 = (uint64_t)b < (uint64_t)c + bw0;
        cr_assert_eq(out[t].w[3], a - b);
        cr_assert_eq(out[t].w[4], d1, "thread %d subc", t);
        cr_assert_eq(out[t].w[5], 0u - bw1, "thread %d borrow", t);
        unsigned __int128 x = in[t].u[0], y = in[t].u[1];
        unsigned __int128 s = x + y;
        cr_assert_eq(out[t].u[3], (uint64_t)s);
        cr_assert_eq(out[t].u[4], in[t].u[2] + (uint64_t)(s >> 64));
        cr_assert_eq(out[t].u[5], in[t].u[0] - in[t].u[1]);
        cr_assert_eq(out[t].u[6], 0ull - (in[t].u[0] < in[t].u[1]));
        uint64_t prod = (uint64_t)a * b;
        uint64_t lo = (uint64_t)(uint32_t)prod + c;
        cr_assert_eq(out[t].w[14], (uint32_t)lo);
        cr_assert_eq(out[t].w[15], (uint32_t)((prod >> 32) + (lo >> 32)));
    }
}

static int32_t f2i_sat(double x)
{
    if (isnan(x)) return 0;
    if (x <= -2147483648.0) return INT32_MIN;
    if (x >= 2147483647.0) return INT32_MAX;
    return (int32_t)x;
}

Test(ptx_isa, cvt_rounding)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        static const float special[] = { 2.5f, -2.5f, 3.5f, -0.5f, 1e10f, -1e10f, NAN, 0.49999997f };
        in[t].f[6] = t < 8 ? special[t] : tp_randf(-1000, 1000);
        in[t].f[7] = tp_randf(-2, 2);
        in[t].d[4] = (double)tp_randf(-1e6f, 1e6f) + (double)tp_randf(0, 1) * 1e-9;
    }
    run_body(
        "cvt.rni.s32.f32 %r4, %f1;\ncvt.rzi.s32.f32 %r5, %f1;\ncvt.rmi.s32.f32 %r6, %f1;\n"
        "cvt.rpi.s32.f32 %r7, %f1;\ncvt.rzi.u32.f32 %r8, %f1;\ncvt.sat.f32.f32 %f3, %f2;\n"
        "cvt.rni.f32.f32 %f4, %f1;\ncvt.rn.f32.f64 %f5, %fd1;\ncvt.rz.f32.f64 %f6, %fd1;\n"
        "cvt.rm.f32.f64 %f7, %fd1;\ncvt.rp.f32.f64 %f8, %fd1;\ncvt.rn.f32.u64 %f9, %rd1;\n"
        "cvt.sat.s8.s32 %r9, %r1;\ncvt.s16.s32 %h1, %r1;\ncvt.s32.s16 %r10, %h1;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u32 [%rd27+8], %r6;\n"
        "st.global.u32 [%rd27+12], %r7;\nst.global.u32 [%rd27+16], %r8;\nst.global.f32 [%rd27+20], %f3;\n"
        "st.global.f32 [%rd27+24], %f4;\nst.global.f32 [%rd27+28], %f5;\nst.global.f32 [%rd27+32], %f6;\n"
        "st.global.f32 [%rd27+36], %f7;\nst.global.f32 [%rd27+40], %f8;\nst.global.f32 [%rd27+44], %f9;\n"
        "st.global.u32 [%rd27+48], %r9;\nst.global.u32 [%rd27+52], %r10;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        float x = in[t].f[6];
        double d = in[t].d[4];
        cr_assert_eq((int32_t)out[t].w[0], f2i_sat(nearbyint(x)), "rni %g", x);
        cr_assert_eq((int32_t)out[t].w[1], f2i_sat(trunc(x)), "rzi %g", x);
        cr_assert_eq((int32_t)out[t].w[2], f2i_sat(floor(x)), "rmi %g", x);
        cr_assert_eq((int32_t)out[t].w[3], f2i_sat(ceil(x)), "rpi %g", x);
        uint32_t u = isnan(x) || x <= 0 ? 0 : x >= 4294967295.0f ? UINT32_MAX : (uint32_t)x;
        cr_assert_eq(out[t].w[4], u, "rzi.u32 %g", x);
        float y = in[t].f[7];
        cr_assert_eq(out[t].f[5], y < 0 ? 0.0f : y > 1 ? 1.0f : y, "sat %g", y);
        if (!isnan(x))
            cr_assert_eq(out[t].f[6], nearbyintf(x));
        cr_assert_eq(out[t].f[7], (float)d);
        int modes[3] = { FE_TOWARDZERO, FE_DOWNWARD, FE_UPWARD };
        for (int k = 0; k < 3; k++) {
            fesetround(modes[k]);
            volatile double vd = d;
            float want = (float)vd;
            fesetround(FE_TONEAREST);
            cr_assert_eq(out[t].f[8 + k], want, "directed %d of %.17g", k, d);
        }
        cr_assert_eq(out[t].f[11], (float)in[t].u[0]);
        int32_t s = (int32_t)in[t].u[0];
        cr_assert_eq(out[t].w[12], (uint32_t)(s < -128 ? -128 : s > 127 ? 127 : s), "sat.s8");
        cr_assert_eq(out[t].w[13], (uint32_t)(int32_t)(int16_t)s, "s16 round trip");
    }
}

Test(ptx_isa, bit_fields)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    in[0].u[0] = 0;
    in[1].u[0] = ~0ull;
    run_body(
        "and.b32 %r20, %r2, 31;\nand.b32 %r21, %r3, 15;\n"
        "bfe.u32 %r4, %r1, %r20, %r21;\nbfe.s32 %r5, %r1, %r20, %r21;\n"
        "bfi.b32 %r6, %r2, %r1, %r20, %r21;\nprmt.b32 %r7, %r1, %r2, %r3;\n"
        "lop3.b32 %r8, %r1, %r2, %r3, 0xe8;\nbfind.u32 %r9, %r1;\nbfind.s32 %r10, %r1;\n"
        "bfind.shiftamt.u32 %r11, %r1;\nbrev.b64 %rd4, %rd1;\npopc.b64 %r12, %rd1;\n"
        "clz.b64 %r13, %rd1;\nshr.s32 %r14, %r1, 40;\nshl.b32 %r15, %r1, 33;\n"
        "shr.u64 %rd5, %rd1, %r20;\nnot.b32 %r16, %r1;\ncnot.b32 %r17, %r20;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u32 [%rd27+8], %r6;\n"
        "st.global.u32 [%rd27+12], %r7;\nst.global.u32 [%rd27+16], %r8;\nst.global.u32 [%rd27+20], %r9;\n"
        "st.global.u32 [%rd27+24], %r10;\nst.global.u32 [%rd27+28], %r11;\nst.global.u64 [%rd27+32], %rd4;\n"
        "st.global.u32 [%rd27+40], %r12;\nst.global.u32 [%rd27+44], %r13;\nst.global.u32 [%rd27+48], %r14;\n"
        "st.global.u32 [%rd27+52], %r15;\nst.global.u32 [%rd27+56], %r16;\nst.global.u32 [%rd27+60], %r17;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        uint32_t a = (uint32_t)in[t].u[0], b = (uint32_t)in[t].u[1], c = (uint32_t)in[t].u[2];
        uint32_t pos = b & 31, len = c & 15;
        uint32_t mask = len ? ((len == 32 ? ~0u : (1u << len) - 1)) : 0;
        uint32_t ex = (a >> pos) & mask;
        if (pos + len > 32)
            ex = a >> pos;
        cr_assert_eq(out[t].w[0], ex, "bfe.u32 thread %d", t);
        int32_t sx;
        if (len == 0) {
            sx = 0;
        } else {
            unsigned top = pos + len - 1 < 31 ? pos + len - 1 : 31;
            uint32_t sbit = (a >> top) & 1;
            uint32_t v = 0;
            for (unsigned i = 0; i < 32; i++)
                v |= ((i < len && pos + i <= 31) ? (a >> (pos + i)) & 1 : sbit) << i;
            sx = (int32_t)v;
        }
        cr_assert_eq((int32_t)out[t].w[1], sx, "bfe.s32 thread %d", t);
        uint32_t ins = a;
        for (unsigned i = 0; i < len && pos + i < 32; i++)
            ins = (ins & ~(1u << (pos + i))) | (((b >> i) & 1) << (pos + i));
        cr_assert_eq(out[t].w[2], ins, "bfi thread %d", t);
        uint64_t bytes = (uint64_t)b << 32 | a;
        uint32_t pr = 0;
        for (int i = 0; i < 4; i++) {
            unsigned sel = (c >> (4 * i)) & 15;
            uint32_t by = (uint32_t)(bytes >> (8 * (sel & 7))) & 0xff;
            if (sel & 8)
                by = by & 0x80 ? 0xff : 0;
            pr |= by << (8 * i);
        }
        cr_assert_eq(out[t].w[3], pr, "prmt");
        cr_assert_eq(out[t].w[4], (a & b) | (a & c) | (b & c), "lop3 majority");
        cr_assert_eq(out[t].w[5], a ? 31u - (uint32_t)__builtin_clz(a) : ~0u, "bfind.u32");
        uint32_t na = (int32_t)a < 0 ? ~a : a;
        cr_assert_eq(out[t].w[6], na ? 31u - (uint32_t)__builtin_clz(na) : ~0u, "bfind.s32");
        cr_assert_eq(out[t].w[7], a ? (uint32_t)__builtin_clz(a) : ~0u, "bfind.shiftamt");
        uint64_t x = in[t].u[0], r = 0;
        for (int i = 0; i < 64; i++)
            r |= ((x >> i) & 1) << (63 - i);
        cr_assert_eq(out[t].u[4], r, "brev.b64");
        cr_assert_eq(out[t].w[10], (uint32_t)__builtin_popcountll(x));
        cr_assert_eq(out[t].w[11], x ? (uint32_t)__builtin_clzll(x) : 64u);
        cr_assert_eq(out[t].w[12], (uint32_t)((int32_t)a >> 31), "shr.s32 by 40");
        cr_assert_eq(out[t].w[13], 0u, "shl by 33");
        cr_assert_eq(out[t].w[14], ~a);
        cr_assert_eq(out[t].w[15], pos == 0 ? 1u : 0u, "cnot");
    }
}

Test(ptx_isa, float_compare_and_select)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        in[t].f[6] = t % 5 == 0 ? NAN : tp_randf(-2, 2);
        in[t].f[7] = t % 7 == 0 ? NAN : tp_randf(-2, 2);
        in[t].d[4] = t % 3 == 0 ? -0.0 : tp_randf(-9, 9);
        in[t].d[5] = tp_randf(-9, 9);
    }
    run_body(
        "setp.lt.f32 %p1, %f1, %f2;\nsetp.ltu.f32 %p2, %f1, %f2;\nsetp.nan.f32 %p3, %f1, %f2;\n"
        "setp.num.f32 %p4, %f1, %f2;\nsetp.ge.and.f32 %p5|%p6, %f1, %f2, %p4;\n"
        "selp.u32 %r4, 1, 0, %p1;\nselp.u32 %r5, 2, 0, %p2;\nselp.u32 %r6, 4, 0, %p3;\n"
        "selp.u32 %r7, 8, 0, %p4;\nselp.u32 %r8, 16, 0, %p5;\nselp.u32 %r9, 32, 0, %p6;\n"
        "or.b32 %r4, %r4, %r5;\nor.b32 %r4, %r4, %r6;\nor.b32 %r4, %r4, %r7;\n"
        "or.b32 %r4, %r4, %r8;\nor.b32 %r4, %r4, %r9;\n"
        "set.gtu.u32.f32 %r10, %f1, %f2;\nmin.f32 %f3, %f1, %f2;\nmax.f32 %f4, %f1, %f2;\n"
        "copysign.f64 %fd3, %fd1, %fd2;\nabs.f64 %fd4, %fd1;\nneg.f64 %fd5, %fd2;\n"
        "testp.notanumber.f32 %p7, %f1;\nselp.b32 %r11, -1, 7, %p7;\n"
        "div.rn.f32 %f5, %f1, %f2;\nfma.rm.f32 %f6, %f1, %f2, %f2;\nadd.rp.f64 %fd6, %fd1, %fd2;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r10;\nst.global.f32 [%rd27+8], %f3;\n"
        "st.global.f32 [%rd27+12], %f4;\nst.global.f64 [%rd27+16], %fd3;\nst.global.f64 [%rd27+24], %fd4;\n"
        "st.global.f64 [%rd27+32], %fd5;\nst.global.u32 [%rd27+40], %r11;\nst.global.f32 [%rd27+44], %f5;\n"
        "st.global.f32 [%rd27+48], %f6;\nst.global.f64 [%rd27+56], %fd6;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        float a = in[t].f[6], b = in[t].f[7];
        bool un = isnan(a) || isnan(b);
        bool ge = !un && a >= b;
        uint32_t want = (uint32_t)(!un && a < b) | (uint32_t)(un || a < b) << 1 |
                        (uint32_t)un << 2 | (uint32_t)!un << 3 | (uint32_t)(ge && !un) << 4 |
                        (uint32_t)(!ge && !un) << 5;
        cr_assert_eq(out[t].w[0], want, "setp thread %d (%g, %g): %x want %x", t, a, b, out[t].w[0], want);
        cr_assert_eq(out[t].w[1], (un || a > b) ? ~0u : 0u, "set.gtu");
        float mn = fminf(a, b), mx = fmaxf(a, b);
        cr_assert(out[t].f[2] == mn || (isnan(mn) && isnan(out[t].f[2])), "min");
        cr_assert(out[t].f[3] == mx || (isnan(mx) && isnan(out[t].f[3])), "max");
        double x = in[t].d[4], y = in[t].d[5];
        cr_assert_eq(out[t].d[2], copysign(y, x), "copysign takes the sign of a");
        cr_assert_eq(out[t].d[3], fabs(x));
        cr_assert_eq(out[t].d[4], -y);
        cr_assert_eq(out[t].w[10], isnan(a) ? ~0u : 7u, "testp");
        float q = a / b;
        cr_assert(out[t].f[11] == q || (isnan(q) && isnan(out[t].f[11])), "div.rn");
        fesetround(FE_DOWNWARD);
        volatile float va = a, vb = b;
        float fm = fmaf(va, vb, vb);
        fesetround(FE_UPWARD);
        volatile double vx = x, vy = y;
        double sum = vx + vy;
        fesetround(FE_TONEAREST);
        cr_assert(out[t].f[12] == fm || (isnan(fm) && isnan(out[t].f[12])), "fma.rm");
        cr_assert_eq(out[t].d[7], sum, "add.rp");
    }
}

Test(ptx_isa, integer_mul_div)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    in[0].u[1] = 0;                                   /* divide by zero: no trap */
    in[1].u[0] = 0x80000000u;
    in[1].u[1] = 0xffffffffu;                         /* INT_MIN / -1 */
    run_body(
        "mul.hi.s32 %r4, %r1, %r2;\nmul.hi.u32 %r5, %r1, %r2;\nmul.hi.u64 %rd4, %rd1, %rd2;\n"
        "mul.hi.s64 %rd5, %rd1, %rd2;\nmad.hi.u32 %r6, %r1, %r2, %r3;\nmul.wide.s32 %rd6, %r1, %r2;\n"
        "div.s32 %r7, %r1, %r2;\nrem.u32 %r8, %r1, %r2;\nmin.s32 %r9, %r1, %r2;\nmax.u32 %r10, %r1, %r2;\n"
        "abs.s32 %r11, %r1;\nneg.s64 %rd7, %rd1;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u64 [%rd27+8], %rd4;\n"
        "st.global.u64 [%rd27+16], %rd5;\nst.global.u32 [%rd27+24], %r6;\nst.global.u64 [%rd27+32], %rd6;\n"
        "st.global.u32 [%rd27+40], %r9;\nst.global.u32 [%rd27+44], %r10;\nst.global.u32 [%rd27+48], %r11;\n"
        "setp.ne.s32 %p1, %r2, 0;\n@%p1 st.global.v2.u32 [%rd27+56], {%r7, %r8};\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        int32_t a = (int32_t)in[t].u[0], b = (int32_t)in[t].u[1];
        uint32_t ua = (uint32_t)a, ub = (uint32_t)b, uc = (uint32_t)in[t].u[2];
        cr_assert_eq(out[t].w[0], (uint32_t)(((int64_t)a * b) >> 32));
        cr_assert_eq(out[t].w[1], (uint32_t)(((uint64_t)ua * ub) >> 32));
        cr_assert_eq(out[t].u[1], (uint64_t)(((unsigned __int128)in[t].u[0] * in[t].u[1]) >> 64));
        cr_assert_eq(out[t].u[2], (uint64_t)(((__int128)(int64_t)in[t].u[0] * (int64_t)in[t].u[1]) >> 64));
        cr_assert_eq(out[t].w[6], (uint32_t)(((uint64_t)ua * ub) >> 32) + uc);
        cr_assert_eq(out[t].u[4], (uint64_t)((int64_t)a * b));
        if (b != 0) {
            int32_t q = (a == INT32_MIN && b == -1) ? INT32_MIN : a / b;
            cr_assert_eq((int32_t)out[t].w[14], q, "div.s32 %d / %d", a, b);
            cr_assert_eq(out[t].w[15], ua % ub);
        }
        cr_assert_eq((int32_t)out[t].w[10], a < b ? a : b);
        cr_assert_eq(out[t].w[11], ua > ub ? ua : ub);
        cr_assert_eq(out[t].w[12], a < 0 ? 0u - ua : ua);
    }
}

Test(ptx_isa, atomics_every_kind)
{
    slot in[NT * 4], out[NT * 4];
    memset(out, 0, sizeof out);
    random_inputs(in, NT * 4);
    uint64_t *cells = tp_alloc(8 * 8);
    cells[2] = UINT64_MAX;
    cells[3] = 1000;
    char body[4096];
    snprintf(body, sizeof body,
             "mov.u64 %%rd10, %llu;\n"
             "atom.global.inc.u32 %%r4, [%%rd10], 100;\n"
             "atom.global.dec.u32 %%r5, [%%rd10+4], 50;\n"
             "atom.global.min.u64 %%rd4, [%%rd10+16], %%rd1;\n"
             "atom.global.max.s64 %%rd5, [%%rd10+8], %%rd2;\n"
             "atom.global.add.u64 %%rd6, [%%rd10+24], 1;\n"
             "atom.global.xor.b32 %%r6, [%%rd10+32], %%r1;\n"
             "atom.global.and.b64 %%rd7, [%%rd10+40], %%rd2;\n"
             "red.global.add.u32 [%%rd10+48], 2;\n"
             "atom.global.exch.b64 %%rd8, [%%rd10+56], %%rd3;\n"
             "mov.u32 %%r20, sh;\n"
             "setp.eq.u32 %%p1, %%r31, 0;\n@%%p1 st.shared.f32 [%%r20+8], 0f00000000;\nbar.sync 0;\n"
             "atom.shared.cas.b32 %%r7, [%%r20], %%r31, 0;\n"
             "atom.shared.add.f32 %%f3, [%%r20+8], 1.0;\n"
             "bar.sync 0;\n"
             "ld.shared.f32 %%f4, [%%r20+8];\n"
             "st.global.f32 [%%rd27], %%f4;\n",
             (unsigned long long)(uintptr_t)cells);
    cells[5] = ~0ull;
    run_body(body, in, out, 4);
    unsigned n = NT * 4;
    uint32_t inc = 0, dec = 0;
    for (unsigned i = 0; i < n; i++) {
        inc = inc >= 100 ? 0 : inc + 1;
        dec = (dec == 0 || dec > 50) ? 50 : dec - 1;
    }
    cr_assert_eq((uint32_t)cells[0], inc, "inc %u want %u", (uint32_t)cells[0], inc);
    cr_assert_eq((uint32_t)(cells[0] >> 32), dec, "dec");
    uint64_t mn = UINT64_MAX, x = 0, a = ~0ull;
    int64_t mx = 0;
    for (unsigned i = 0; i < n; i++) {
        mn = in[i].u[0] < mn ? in[i].u[0] : mn;
        mx = (int64_t)in[i].u[1] > mx ? (int64_t)in[i].u[1] : mx;
        x ^= (uint32_t)in[i].u[0];
        a &= in[i].u[1];
    }
    cr_assert_eq(cells[2], mn, "min.u64");
    cr_assert_eq((int64_t)cells[1], mx, "max.s64");
    cr_assert_eq(cells[3], 1000 + n, "add.u64");
    cr_assert_eq((uint32_t)cells[4], (uint32_t)x, "xor");
    cr_assert_eq(cells[5], a, "and.b64");
    cr_assert_eq((uint32_t)cells[6], 2 * n, "red");
    bool seen = false;
    for (unsigned i = 0; i < n; i++)
        seen |= cells[7] == in[i].u[2];
    cr_assert(seen, "exch.b64 left a value some thread wrote");
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(out[i].f[0], (float)NT, "shared add per block: %g", out[i].f[0]);
}

Test(ptx_isa, lanes_pack_and_half)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        in[t].f[6] = tp_randf(-100, 100);
        in[t].f[7] = t == 0 ? 1e-6f : tp_randf(-100, 100);
    }
    run_body(
        "mov.u32 %r4, %laneid;\nmov.u32 %r5, %lanemask_lt;\nmov.u32 %r6, %warpid;\n"
        "mov.b64 {%r7, %r8}, %rd1;\nmov.b64 %rd4, {%r8, %r7};\n"
        "cvt.rn.f16.f32 %h1, %f1;\ncvt.rn.f16.f32 %h2, %f2;\nmov.b32 %r9, {%h1, %h2};\n"
        "add.f16x2 %r10, %r9, %r9;\nneg.f16 %h3, %h1;\ncvt.f32.f16 %f3, %h3;\n"
        "cvt.rz.f16.f32 %h4, %f2;\ncvt.f32.f16 %f4, %h4;\n"
        "vote.sync.uni.pred %p1, %p1, -1;\nactivemask.b32 %r11;\n"
        "setp.lt.u32 %p2, %r4, 5;\n@%p2 bra $skip;\nvote.sync.ballot.b32 %r12, %p2, -1;\n"
        "st.global.u32 [%rd27+44], %r12;\n$skip:\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u32 [%rd27+8], %r6;\n"
        "st.global.u64 [%rd27+16], %rd4;\nst.global.u32 [%rd27+24], %r9;\nst.global.u32 [%rd27+28], %r10;\n"
        "st.global.f32 [%rd27+32], %f3;\nst.global.f32 [%rd27+36], %f4;\nst.global.u32 [%rd27+40], %r11;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        cr_assert_eq(out[t].w[0], (uint32_t)(t % 32));
        cr_assert_eq(out[t].w[1], (1u << (t % 32)) - 1);
        cr_assert_eq(out[t].w[2], (uint32_t)(t / 32));
        uint64_t v = in[t].u[0];
        cr_assert_eq(out[t].u[2], (v << 32) | (v >> 32), "pack/unpack");
        _Float16 h1 = (_Float16)in[t].f[6], h2 = (_Float16)in[t].f[7];
        uint16_t b1, b2;
        memcpy(&b1, &h1, 2);
        memcpy(&b2, &h2, 2);
        cr_assert_eq(out[t].w[6], (uint32_t)b2 << 16 | b1, "f16 pack thread %d", t);
        _Float16 s1 = (_Float16)((float)h1 + (float)h1), s2 = (_Float16)((float)h2 + (float)h2);
        uint16_t c1, c2;
        memcpy(&c1, &s1, 2);
        memcpy(&c2, &s2, 2);
        cr_assert_eq(out[t].w[7], (uint32_t)c2 << 16 | c1, "add.f16x2");
        cr_assert_eq(out[t].f[8], -(float)h1);
        float f = in[t].f[7];
        float hz = (float)h2;
        if (fabsf(hz) > fabsf(f)) {   /* rz: step toward zero */
            uint16_t bz = (uint16_t)(b2 - 1);
            _Float16 z;
            memcpy(&z, &bz, 2);
            hz = (float)z;
        }
        cr_assert_eq(out[t].f[9], hz, "cvt.rz.f16 of %g: %g want %g", f, out[t].f[9], hz);
        cr_assert_eq(out[t].w[10], 0xffffffffu, "activemask");
        if (t % 32 >= 5)
            cr_assert_eq(out[t].w[11], 0u, "ballot of false in the diverged lanes");
    }
}

Test(ptx_isa, divergence_and_barrier)
{
    /* Lanes take different trip counts through a loop, meet at bar.sync,
     * then read what other warps wrote before the barrier. */
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    run_body(
        "and.b32 %r4, %r1, 15;\nmov.u32 %r5, 0;\nmov.u32 %r6, 0;\n"
        "$loop:\nsetp.ge.u32 %p1, %r6, %r4;\n@%p1 bra $done;\n"
        "add.s32 %r5, %r5, %r6;\nadd.s32 %r6, %r6, 1;\nbra.uni $loop;\n$done:\n"
        "mov.u32 %r20, sh;\nshl.b32 %r21, %r31, 2;\nadd.s32 %r22, %r20, %r21;\n"
        "st.shared.u32 [%r22], %r5;\nbar.sync 0;\n"
        "xor.b32 %r23, %r31, 63;\nshl.b32 %r24, %r23, 2;\nadd.s32 %r25, %r20, %r24;\n"
        "ld.shared.u32 %r26, [%r25];\nst.global.u32 [%rd27], %r5;\nst.global.u32 [%rd27+4], %r26;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        uint32_t k = (uint32_t)in[t].u[0] & 15, s = k * (k - 1) / 2;
        uint32_t k2 = (uint32_t)in[t ^ 63].u[0] & 15, s2 = k2 * (k2 - 1) / 2;
        cr_assert_eq(out[t].w[0], s);
        cr_assert_eq(out[t].w[1], s2, "value from thread %d after the barrier", t ^ 63);
    }
}

Test(ptx_isa, redux_dp4a_bf16_isspacep)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++)
        in[t].f[6] = t == 0 ? NAN : tp_randf(-1e5f, 1e5f);
    run_body(
        "redux.sync.add.u32 %r4, %r1, -1;\nredux.sync.max.s32 %r5, %r1, -1;\n"
        "redux.sync.xor.b32 %r6, %r1, -1;\nredux.sync.min.u32 %r12, %r1, -1;\n"
        "dp4a.s32.u32 %r7, %r1, %r2, %r3;\n"
        "cvt.rn.bf16.f32 %h1, %f1;\ncvt.f32.bf16 %f3, %h1;\n"
        "cvt.rz.bf16.f32 %h2, %f1;\ncvt.f32.bf16 %f4, %h2;\n"
        "prefetch.global.L2 [%rd1];\n"
        "mov.u64 %rd9, sh;\ncvta.shared.u64 %rd10, %rd9;\n"
        "isspacep.shared %p1, %rd10;\nisspacep.global %p2, %rd10;\nisspacep.global %p3, %rd27;\n"
        "selp.u32 %r8, 1, 0, %p1;\nselp.u32 %r9, 2, 0, %p2;\nselp.u32 %r10, 4, 0, %p3;\n"
        "or.b32 %r8, %r8, %r9;\nor.b32 %r8, %r8, %r10;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\nst.global.u32 [%rd27+8], %r6;\n"
        "st.global.u32 [%rd27+12], %r7;\nst.global.f32 [%rd27+16], %f3;\nst.global.f32 [%rd27+20], %f4;\n"
        "st.global.u32 [%rd27+24], %r8;\nst.global.u32 [%rd27+28], %r12;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        int w0 = t & ~31;
        uint32_t sum = 0, x = 0, mn = UINT32_MAX;
        int32_t mx = INT32_MIN;
        for (int j = w0; j < w0 + 32; j++) {
            uint32_t v = (uint32_t)in[j].u[0];
            sum += v;
            x ^= v;
            mn = v < mn ? v : mn;
            mx = (int32_t)v > mx ? (int32_t)v : mx;
        }
        cr_assert_eq(out[t].w[0], sum, "redux.add");
        cr_assert_eq((int32_t)out[t].w[1], mx, "redux.max.s32");
        cr_assert_eq(out[t].w[2], x, "redux.xor");
        cr_assert_eq(out[t].w[7], mn, "redux.min.u32");
        uint32_t a = (uint32_t)in[t].u[0], b = (uint32_t)in[t].u[1];
        int32_t acc = (int32_t)(uint32_t)in[t].u[2];
        for (int i = 0; i < 4; i++)
            acc = (int32_t)((uint32_t)acc + (uint32_t)((int32_t)(int8_t)(a >> (8 * i)) * (int32_t)((b >> (8 * i)) & 0xff)));
        cr_assert_eq((int32_t)out[t].w[3], acc, "dp4a.s32.u32");
        float f = in[t].f[6];
        uint32_t u;
        memcpy(&u, &f, 4);
        uint32_t rn = ((u + 0x7fffu + ((u >> 16) & 1)) >> 16) << 16, rz = (u >> 16) << 16;
        float frn, frz;
        memcpy(&frn, &rn, 4);
        memcpy(&frz, &rz, 4);
        if (isnan(f)) {
            cr_assert(isnan(out[t].f[4]) && isnan(out[t].f[5]), "bf16 NaN");
        } else {
            cr_assert_eq(out[t].f[4], frn, "bf16 rn of %g", f);
            cr_assert_eq(out[t].f[5], frz, "bf16 rz of %g", f);
            cr_assert(fabsf(frn - f) <= fabsf(f) / 256, "bf16 rn close");
        }
        cr_assert_eq(out[t].w[6], 1u | 4u, "isspacep");
    }
}

/* A .func with a shuffle, placed before the entry, called from both sides of
 * a divergent branch: the lanes must meet at the shuffle (shfl.sync waits
 * for its member mask) although the first group reaches it long before the
 * second leaves its side of the branch. */
Test(ptx_isa, shfl_sync_waits_for_members)
{
    const char *text =
        ".version 9.0\n.target sm_75\n.address_size 64\n"
        ".func (.param .b32 r) swap(.param .b32 v)\n{\n"
        ".reg .b32 %r<4>;\n.reg .pred %p<2>;\n"
        "ld.param.u32 %r1, [v];\n"
        "shfl.sync.bfly.b32 %r2|%p1, %r1, 2, 31, -1;\n"
        "st.param.b32 [r], %r2;\nret;\n}\n"
        ".visible .entry k(.param .u64 k_out)\n{\n"
        ".reg .b32 %r<10>;\n.reg .b64 %rd<4>;\n.reg .pred %p<3>;\n"
        "ld.param.u64 %rd1, [k_out];\nmov.u32 %r1, %laneid;\n"
        "and.b32 %r2, %r1, 2;\nsetp.ne.u32 %p1, %r2, 0;\n"
        "mul.lo.u32 %r3, %r1, 10;\n"
        "@%p1 bra $other;\n"
        "{\n.param .b32 a;\n.param .b32 b;\nst.param.b32 [a], %r3;\n"
        "call.uni (b), swap, (a);\nld.param.b32 %r4, [b];\n}\n"
        "bra.uni $join;\n"
        "$other:\n"
        "mov.u32 %r5, 0;\n$spin:\nadd.s32 %r5, %r5, 1;\nsetp.lt.u32 %p2, %r5, 50;\n@%p2 bra $spin;\n"
        "add.s32 %r6, %r3, 1;\n"
        "{\n.param .b32 a;\n.param .b32 b;\nst.param.b32 [a], %r6;\n"
        "call.uni (b), swap, (a);\nld.param.b32 %r4, [b];\n}\n"
        "$join:\n"
        "mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r4;\n"
        "ret;\n}\n";
    soft_program *p = NULL;
    char msg[256];
    cr_assert_eq(soft_program_parse(text, strlen(text), &p, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    uint32_t *out = tp_alloc(32 * 4);
    tp_args a = { 0 };
    TP_ARG(&a, out);
    soft_launch l = { .entry = 0, .grid = { 1, 1, 1 }, .block = { 32, 1, 1 },
                      .params = a.buf, .memory = &tp_memory, .threads = 1 };
    cr_assert_eq(soft_program_launch(p, &l, msg, sizeof msg), CUDA_SUCCESS, "%s", msg);
    for (unsigned lane = 0; lane < 32; lane++) {
        unsigned src = lane ^ 2;
        uint32_t want = src * 10 + ((src & 2) ? 1 : 0);
        cr_assert_eq(out[lane], want, "lane %u got %u want %u", lane, out[lane], want);
    }
    soft_program_free(p);
}

/* bmsk (CUB's radix sort makes digit masks with bmsk.clamp), both modes,
 * with positions and widths past 32 so clamping and wrapping both show. */
Test(ptx_isa, bmsk_clamp_and_wrap)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    in[0].u[0] = 32; in[0].u[1] = 5;   /* clamp: nothing left */
    in[1].u[0] = 0; in[1].u[1] = 32;   /* clamp: all ones; wrap: none */
    in[2].u[0] = 28; in[2].u[1] = 9;   /* runs off the top */
    run_body(
        "and.b32 %r20, %r1, 63;\nand.b32 %r21, %r2, 63;\n"
        "bmsk.clamp.b32 %r4, %r20, %r21;\nbmsk.wrap.b32 %r5, %r20, %r21;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.u32 [%rd27+4], %r5;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        uint32_t a = (uint32_t)in[t].u[0] & 63, b = (uint32_t)in[t].u[1] & 63;
        uint32_t ca = a > 32 ? 32 : a, cb = b > 32 ? 32 : b, wa = a & 31, wb = b & 31;
        uint32_t clamp = 0, wrap = 0;
        for (uint32_t i = 0; i < 32; i++) {
            clamp |= (uint32_t)(i >= ca && i < ca + cb) << i;
            wrap |= (uint32_t)(i >= wa && i < wa + wb) << i;
        }
        cr_assert_eq(out[t].w[0], clamp, "bmsk.clamp thread %d (%u, %u)", t, a, b);
        cr_assert_eq(out[t].w[1], wrap, "bmsk.wrap thread %d (%u, %u)", t, a, b);
    }
    cr_assert_eq(out[0].w[0], 0u);
    cr_assert_eq(out[1].w[0], ~0u);
    cr_assert_eq(out[1].w[1], 0u);
    cr_assert_eq(out[2].w[0], 0xf0000000u);
}

/* Forms the CUDA libraries' compute_120 PTX uses: a load with a cache
 * policy operand, programmatic-dependent-launch controls, NaN-propagating
 * min/max, two floats packed into f16x2/bf16x2, 256-bit .v8 loads/stores. */
Test(ptx_isa, library_forms_of_newer_targets)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        in[t].f[6] = (float)(t - 20) * 0.5f;   /* exact in f16 and bf16 */
        in[t].f[7] = (float)(t % 7) * -0.25f;
    }
    in[0].f[6] = NAN;
    in[1].f[7] = NAN;
    run_body(
        "createpolicy.fractional.L2::evict_last.b64 %rd10, 1.0;\n"
        "ld.global.L2::cache_hint.u32 %r4, [%rd28], %rd10;\n"
        "griddepcontrol.wait;\ngriddepcontrol.launch_dependents;\n"
        "max.NaN.f32 %f3, %f1, %f2;\nmin.NaN.f32 %f4, %f1, %f2;\n"
        "cvt.rn.f16x2.f32 %r5, %f1, %f2;\ncvt.rn.bf16x2.f32 %r6, %f1, %f2;\n"
        "st.global.u32 [%rd27], %r4;\nst.global.f32 [%rd27+4], %f3;\nst.global.f32 [%rd27+8], %f4;\n"
        "st.global.u32 [%rd27+12], %r5;\nst.global.u32 [%rd27+16], %r6;\n"
        "ld.global.nc.v8.f32 {%f5, %f6, %f7, %f8, %f9, %f10, %f11, %f12}, [%rd28+32];\n"
        "st.global.v8.f32 [%rd27+32], {%f12, %f11, %f10, %f9, %f8, %f7, %f6, %f5};\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        float a = in[t].f[6], b = in[t].f[7];
        cr_assert_eq(out[t].w[0], in[t].w[0], "ld.L2::cache_hint thread %d", t);
        if (isnan(a) || isnan(b)) {
            cr_assert_eq(out[t].w[1], 0x7fffffffu, "max.NaN thread %d", t);
            cr_assert_eq(out[t].w[2], 0x7fffffffu, "min.NaN thread %d", t);
            continue;
        }
        cr_assert_eq(out[t].f[1], fmaxf(a, b), "max.NaN thread %d", t);
        cr_assert_eq(out[t].f[2], fminf(a, b), "min.NaN thread %d", t);
        _Float16 ha = (_Float16)a, hb = (_Float16)b;
        uint16_t ua, ub;
        memcpy(&ua, &ha, 2);
        memcpy(&ub, &hb, 2);
        cr_assert_eq(out[t].w[3], (uint32_t)ua << 16 | ub, "cvt.rn.f16x2 thread %d: %08x", t, out[t].w[3]);
        uint32_t ba, bb;
        memcpy(&ba, &a, 4);
        memcpy(&bb, &b, 4);
        cr_assert_eq(out[t].w[4], (ba & 0xffff0000u) | bb >> 16, "cvt.rn.bf16x2 thread %d: %08x", t, out[t].w[4]);
        for (int i = 0; i < 8; i++)
            cr_assert_eq(out[t].w[8 + i], in[t].w[15 - i], "v8 element %d thread %d", i, t);
    }
}

/* A kernel parameter's address taken with mov and read through ld.param
 * [%rd+off], as CUB does with a by-value struct. */
Test(ptx_isa, kernel_parameter_address)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    run_body(
        "mov.b64 %rd4, p_in;\nld.param.u64 %rd5, [%rd4];\n"
        "mov.u64 %rd6, p_out;\nld.param.u32 %r4, [%rd6+4];\nld.param.v2.u32 {%r5, %r6}, [%rd6];\n"
        "sub.s64 %rd7, %rd5, %rd31;\nsub.s64 %rd8, %rd6, %rd4;\n"
        "st.global.u64 [%rd27], %rd7;\nst.global.u64 [%rd27+8], %rd8;\n"
        "st.global.u32 [%rd27+16], %r4;\nst.global.u32 [%rd27+20], %r5;\nst.global.u32 [%rd27+24], %r6;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        cr_assert_eq(out[t].u[0], 0ull, "p_in read through its address, thread %d", t);
        cr_assert_eq(out[t].u[1], (uint64_t)-8, "p_out is 8 bytes before p_in");
    }
    /* the high and low halves of p_out match one another across threads */
    uint64_t pout = (uint64_t)out[0].w[5] | (uint64_t)out[0].w[6] << 32;
    cr_assert_eq(out[0].w[4], (uint32_t)(pout >> 32));
    cr_assert_neq(pout, 0ull);
}

/* Reading past the parameter buffer through such an address faults with the
 * PTX line, not a stray host read. */
Test(ptx_isa, kernel_parameter_address_out_of_bounds)
{
    const char *text =
        ".version 9.0\n.target sm_75\n.address_size 64\n"
        ".visible .entry t(.param .u64 p_out, .param .u64 p_in)\n{\n"
        ".reg .b64 %rd<8>;\n"
        "mov.b64 %rd1, p_in;\nld.param.u64 %rd2, [%rd1+8];\n"
        "ld.param.u64 %rd3, [p_out];\nst.global.u64 [%rd3], %rd2;\nret;\n}\n";
    soft_program *p = NULL;
    char msg[256];
    CUresult rc = soft_program_parse(text, strlen(text), &p, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_SUCCESS, "parse: %s", msg);
    uint64_t *dout = tp_alloc(8 * NT);
    tp_args a = { 0 };
    TP_ARG(&a, dout);
    TP_ARG(&a, dout);
    soft_launch l = { .entry = 0, .grid = { 1, 1, 1 }, .block = { 32, 1, 1 },
                      .params = a.buf, .memory = &tp_memory, .threads = 1 };
    rc = soft_program_launch(p, &l, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_ADDRESS, "launch: %d %s", rc, msg);
    cr_assert(strstr(msg, "illegal address 0x10 (param load of 8 bytes, PTX line 8)"), "%s", msg);
    soft_program_free(p);
}

/* The special registers beyond the thread's coordinates, WARP_SZ as an
 * operand, and clocks that advance: a loop spinning until %clock64 passes a
 * bound ends. Registers that must read 0 are or-ed into one word. */
Test(ptx_isa, special_registers_and_clocks)
{
    slot in[NT * 2] = { 0 }, out[NT * 2] = { 0 };
    run_body(
        "mov.u32 %r4, WARP_SZ;\nadd.u32 %r5, %laneid, WARP_SZ;\n"
        "mov.u32 %r6, %lanemask_ge;\nmov.u32 %r7, %lanemask_gt;\n"
        "mov.u32 %r8, %lanemask_le;\nmov.u32 %r9, %lanemask_eq;\n"
        "mov.u32 %r10, %nwarpid;\nmov.u32 %r11, %nsmid;\nshl.b32 %r11, %r11, 8;\nor.b32 %r10, %r10, %r11;\n"
        "mov.u32 %r11, %cluster_nctarank;\nshl.b32 %r11, %r11, 16;\nor.b32 %r10, %r10, %r11;\n"
        "mov.u32 %r11, %cluster_nctaid.y;\nshl.b32 %r11, %r11, 24;\nor.b32 %r10, %r10, %r11;\n"
        "mov.u32 %r12, %clusterid.x;\nmov.u32 %r13, %nclusterid.x;\nshl.b32 %r13, %r13, 16;\nor.b32 %r12, %r12, %r13;\n"
        "mov.u32 %r14, %cluster_ctarank;\nmov.u32 %r15, %pm3;\nor.b32 %r14, %r14, %r15;\n"
        "mov.u32 %r15, %envreg5;\nor.b32 %r14, %r14, %r15;\n"
        "mov.u32 %r16, %aggr_smem_size;\nmov.u32 %r17, %total_smem_size;\nxor.b32 %r16, %r16, %r17;\nor.b32 %r14, %r14, %r16;\n"
        "mov.u32 %r16, %reserved_smem_offset_1;\nxor.b32 %r16, %r16, %r17;\nor.b32 %r14, %r14, %r16;\n"
        "mov.u64 %rd9, %pm5_64;\ncvt.u32.u64 %r16, %rd9;\nor.b32 %r14, %r14, %r16;\n"
        "mov.pred %p3, %is_explicit_cluster;\nselp.u32 %r20, 7, 9, %p3;\n"
        "mov.u64 %rd5, %clock64;\nadd.u64 %rd6, %rd5, 200000;\n"
        "$spin:\nmov.u64 %rd7, %clock64;\nsetp.lt.u64 %p4, %rd7, %rd6;\n@%p4 bra $spin;\n"
        "mov.u64 %rd8, %globaltimer;\nmov.u32 %r23, %globaltimer_hi;\nmov.u32 %r24, %clock_hi;\n"
        "st.global.v4.u32 [%rd27], {%r4, %r5, %r6, %r7};\n"
        "st.global.v4.u32 [%rd27+16], {%r8, %r9, %r10, %r12};\n"
        "st.global.v4.u32 [%rd27+32], {%r14, %r20, %r23, %r24};\n"
        "sub.u64 %rd10, %rd7, %rd5;\nst.global.u64 [%rd27+48], %rd10;\n"
        "st.global.u64 [%rd27+56], %rd8;\n",
        in, out, 2);
    for (int t = 0; t < NT * 2; t++) {
        const uint32_t *w = out[t].w;
        unsigned l = (unsigned)(t % 32);
        cr_assert_eq(w[0], 32u, "WARP_SZ");
        cr_assert_eq(w[1], l + 32, "add with WARP_SZ");
        cr_assert_eq(w[2], (uint32_t)(~0ull << l), "lanemask_ge");
        cr_assert_eq(w[3], (uint32_t)(~0ull << (l + 1)), "lanemask_gt");
        cr_assert_eq(w[4], (uint32_t)((2ull << l) - 1), "lanemask_le");
        cr_assert_eq(w[5], 1u << l, "lanemask_eq");
        cr_assert_eq(w[6], 2u | 1u << 8 | 1u << 16 | 1u << 24,
                     "nwarpid 2, nsmid 1, a cluster of one CTA: %#x", w[6]);
        cr_assert_eq(w[7], (uint32_t)(t / NT) | 2u << 16, "clusterid is the ctaid, nclusterid the grid");
        cr_assert_eq(w[8], 0u, "ctarank, pm3, envreg5, pm5_64 read 0; aggregate and reserved offset are the total");
        cr_assert_eq(w[9], 9u, "no explicit cluster");
        cr_assert_geq(out[t].u[6], 200000u, "%%clock64 advanced past the bound");
        uint64_t gt = out[t].u[7];
        cr_assert(gt > 0, "globaltimer runs");
        cr_assert(w[10] == (uint32_t)(gt >> 32) || w[10] == (uint32_t)(gt >> 32) + 1, "globaltimer_hi");
        cr_assert(w[11] == (uint32_t)(gt >> 32) || w[11] == (uint32_t)(gt >> 32) + 1, "clock_hi");
    }
}

/* mbarrier phases across the block's two warps: every thread arrives and
 * waits on its token (a failed wait lets the other warp run), parities of
 * completed and current phases, a phase held open by an expected
 * transaction count until complete_tx, arrive_drop shrinking the next
 * phases, and the pending count an arrive's token carries. */
Test(ptx_isa, mbarrier_phases)
{
    slot in[NT] = { 0 }, out[NT] = { 0 };
    run_body(
        ".shared .align 8 .b64 mb;\n"
        "mov.u32 %r4, mb;\nsetp.eq.u32 %p1, %r31, 0;\n"
        "@%p1 mbarrier.init.shared.b64 [%r4], 64;\nbar.sync 0;\n"
        "mbarrier.arrive.shared.b64 %rd4, [%r4];\nmbarrier.pending_count.b64 %r5, %rd4;\n"
        "$w1:\nmbarrier.test_wait.shared.b64 %p2, [%r4], %rd4;\n@!%p2 bra $w1;\n"
        "mbarrier.test_wait.parity.shared.b64 %p3, [%r4], 0;\nselp.u32 %r6, 1, 0, %p3;\n"
        "mbarrier.test_wait.parity.shared.b64 %p3, [%r4], 1;\nselp.u32 %r7, 1, 0, %p3;\n"
        "bar.sync 0;\n"
        "@%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd5, [%r4], 32;\n"
        "@!%p1 mbarrier.arrive.shared::cta.b64 %rd5, [%r4];\nbar.sync 0;\n"
        "mbarrier.test_wait.parity.shared.b64 %p3, [%r4], 1;\nselp.u32 %r8, 1, 0, %p3;\nbar.sync 0;\n"
        "@%p1 mbarrier.complete_tx.shared.b64 [%r4], 20;\n@%p1 mbarrier.complete_tx.shared.b64 [%r4], 12;\n"
        "bar.sync 0;\n"
        "mbarrier.try_wait.parity.shared.b64 %p3, [%r4], 1;\nselp.u32 %r9, 1, 0, %p3;\n"
        "and.b32 %r10, %r31, 1;\nsetp.eq.u32 %p4, %r10, 1;\n"
        "@%p4 mbarrier.arrive_drop.shared.b64 _, [%r4];\n@!%p4 mbarrier.arrive.shared.b64 _, [%r4];\n"
        "bar.sync 0;\n"
        "@!%p4 mbarrier.arrive.shared.b64 %rd6, [%r4];\n"
        "$w2:\nmbarrier.try_wait.parity.relaxed.cta.shared.b64 %p5, [%r4], 1, 1000;\n@!%p5 bra $w2;\n"
        "mbarrier.test_wait.parity.shared.b64 %p3, [%r4], 0;\nselp.u32 %r11, 1, 0, %p3;\n"
        "bar.sync 0;\n@%p1 mbarrier.inval.shared.b64 [%r4];\nbar.sync 0;\nld.shared.u64 %rd7, [mb];\n"
        "st.global.v4.u32 [%rd27], {%r5, %r6, %r7, %r8};\n"
        "st.global.v4.u32 [%rd27+16], {%r9, %r11, 0, 0};\nst.global.u64 [%rd27+32], %rd7;\n",
        in, out, 1);
    uint64_t seen = 0;
    for (int t = 0; t < NT; t++) {
        const uint32_t *w = out[t].w;
        cr_assert_lt(w[0], 64u, "thread %d: pending count %u after its arrive", t, w[0]);
        seen |= 1ull << w[0];
        cr_assert_eq(w[1], 1u, "thread %d: phase 0 (parity 0) complete", t);
        cr_assert_eq(w[2], 0u, "thread %d: phase 1 (parity 1) not yet", t);
        cr_assert_eq(w[3], 0u, "thread %d: phase 1 held open by 32 expected bytes", t);
        cr_assert_eq(w[4], 1u, "thread %d: phase 1 complete once the bytes came", t);
        cr_assert_eq(w[5], 0u, "thread %d: phase 4 (parity 0) not complete", t);
        cr_assert_eq(out[t].u[4], 0u, "thread %d: inval clears the object", t);
    }
    cr_assert_eq(seen, ~0ull, "each arrive's token has its own pending count");
}

/* cp.async of 4, 8 and 16 bytes: a source size short of the copy zero-fills
 * the rest (an immediate, a register), ignore-src zero-fills it all, cache
 * hints and prefetch sizes change nothing; bytes not copied keep theirs. */
Test(ptx_isa, cp_async_sizes_and_zero_fill)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    run_body(
        ".shared .align 16 .b8 cpbuf[4096];\n"
        "mov.u32 %r4, cpbuf;\nmad.lo.u32 %r5, %r31, 64, %r4;\n"
        "mov.u32 %r6, -1414812757;\n"
        "st.shared.v4.u32 [%r5], {%r6, %r6, %r6, %r6};\nst.shared.v4.u32 [%r5+16], {%r6, %r6, %r6, %r6};\n"
        "st.shared.v4.u32 [%r5+32], {%r6, %r6, %r6, %r6};\nst.shared.v4.u32 [%r5+48], {%r6, %r6, %r6, %r6};\n"
        "mov.u64 %rd9, 0;\nsetp.ne.u32 %p1, %r31, 1000;\nrem.u32 %r7, %r31, 17;\n"
        "cp.async.ca.shared.global [%r5], [%rd28], 4;\n"
        "cp.async.ca.shared.global [%r5+8], [%rd28+8], 8, 5;\n"
        "cp.async.cg.shared.global.L2::cache_hint [%r5+16], [%rd28+16], 16, %rd9;\n"
        "cp.async.cg.shared.global [%r5+32], [%rd28+32], 16, %p1;\n"
        "cp.async.ca.shared.global.L2::128B [%r5+48], [%rd28+48], 16, %r7;\n"
        "cp.async.commit_group;\ncp.async.wait_group 0;\ncp.async.wait_all;\n"
        "ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r5];\nst.global.v4.u32 [%rd27], {%r8, %r9, %r10, %r11};\n"
        "ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r5+16];\nst.global.v4.u32 [%rd27+16], {%r8, %r9, %r10, %r11};\n"
        "ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r5+32];\nst.global.v4.u32 [%rd27+32], {%r8, %r9, %r10, %r11};\n"
        "ld.shared.v4.u32 {%r8, %r9, %r10, %r11}, [%r5+48];\nst.global.v4.u32 [%rd27+48], {%r8, %r9, %r10, %r11};\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        const uint8_t *i = (const uint8_t *)&in[t], *o = (const uint8_t *)&out[t];
        uint8_t want[64];
        memset(want, 0xab, sizeof want);
        memcpy(want, i, 4);
        memset(want + 8, 0, 8);
        memcpy(want + 8, i + 8, 5);
        memcpy(want + 16, i + 16, 16);
        memset(want + 32, 0, 16);
        memset(want + 48, 0, 16);
        memcpy(want + 48, i + 48, (size_t)(t % 17 < 16 ? t % 17 : 16));
        for (int b = 0; b < 64; b++)
            cr_assert_eq(o[b], want[b], "thread %d byte %d: %#x, want %#x", t, b, o[b], want[b]);
    }
}

/* cp.async.bulk: one thread copies the block's 4 KiB into shared memory,
 * completing an mbarrier's expected bytes; everyone waits on it; then one
 * bulk copy back out to global memory in a bulk group. The one-CTA
 * cluster's shared::cluster addresses are the CTA's shared ones. */
Test(ptx_isa, cp_async_bulk)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    run_body(
        ".shared .align 16 .b8 bulkbuf[4096];\n.shared .align 8 .b64 bmb;\n"
        "mov.u32 %r4, bulkbuf;\nmov.u32 %r5, bmb;\nsetp.eq.u32 %p1, %r31, 0;\n"
        "@%p1 mbarrier.init.shared::cta.b64 [%r5], 1;\nfence.mbarrier_init.release.cluster;\nbar.sync 0;\n"
        "@%p1 cp.async.bulk.prefetch.L2.global [%rd31], 4096;\n"
        "@%p1 mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r5], 4096;\n"
        "@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r4], [%rd31], 4096, [%r5];\n"
        "$w:\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r5], 0;\n@!%p2 bra $w;\n"
        "mad.lo.u32 %r6, %r31, 64, %r4;\nld.shared.u32 %r7, [%r6+60];\nnot.b32 %r7, %r7;\n"
        "st.shared.u32 [%r6+60], %r7;\n"
        "cvt.u64.u32 %rd11, %r6;\ncvta.shared::cluster.u64 %rd10, %rd11;\n"
        "isspacep.shared::cluster %p3, %rd10;\nselp.u32 %r8, 1, 0, %p3;\n"
        "ld.shared::cluster.u32 %r9, [%r6+52];\nadd.u32 %r9, %r9, %r8;\nst.shared::cta.u32 [%r6+52], %r9;\n"
        "fence.proxy.async.shared::cta;\nbar.sync 0;\n"
        "@%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd30], [%r4], 4096;\n"
        "cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        for (int k = 0; k < 15; k++)
            cr_assert_eq(out[t].w[k], in[t].w[k] + (k == 13), "thread %d word %d (13: +1 if a cluster "
                         "address of its own shared memory is shared)", t, k);
        cr_assert_eq(out[t].w[15], ~in[t].w[15], "thread %d: the last word went through shared memory", t);
    }
}

/* ---- bf16 arithmetic and the narrow float formats ---- */

static double bf16_val(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* bf16 of an exact double in bf16's normal range: its bits rounded to 8
 * significant bits, nearest even, then read as an f32's top half. */
static uint16_t bf16_of(double x)
{
    if (isnan(x))
        return 0x7fff;
    if (x == 0)
        return signbit(x) ? 0x8000 : 0;
    uint64_t u;
    memcpy(&u, &x, 8);
    u = (u + (1ull << 44) - 1 + ((u >> 45) & 1)) & ~((1ull << 45) - 1);
    memcpy(&x, &u, 8);
    float f = (float)x;
    uint32_t w;
    memcpy(&w, &f, 4);
    return (uint16_t)(w >> 16);
}

/* A random bf16 of magnitude 2^-6 .. 2^7 (sums and fma exact in double). */
static uint16_t rand_bf16(void)
{
    uint64_t r = tp_rand();
    return (uint16_t)((r & 0x8000) | (uint16_t)(127 - 6 + (r >> 8) % 13) << 7 | (r >> 24 & 0x7f));
}

static uint16_t minmax_bf16(uint16_t a, uint16_t b, bool mx, bool nan_mode)
{
    double x = bf16_val(a), y = bf16_val(b);
    if (isnan(x) && isnan(y))
        return 0x7fff;
    if (nan_mode && (isnan(x) || isnan(y)))
        return 0x7fff;
    if (isnan(x))
        return b;
    if (isnan(y))
        return a;
    if (x == y)
        return (uint16_t)(mx ? ((a & 0x8000) ? b : a) : ((a & 0x8000) ? a : b));
    return (mx ? x > y : x < y) ? a : b;
}

static uint16_t relu16(uint16_t h)
{
    return (h & 0x8000) && h != 0x7fff ? 0 : h;
}

Test(ptx_isa, bf16_arithmetic)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        uint16_t v[6];
        for (int i = 0; i < 6; i++)
            v[i] = rand_bf16();
        if (t % 8 == 1)
            v[2] = v[0];                   /* a - a, min and max of equals */
        if (t % 8 == 2)
            v[2] = v[0] ^ 0x8000;          /* a + -a */
        if (t == 3) {
            v[0] = 0x7fc0;                 /* NaN */
            v[3] = 0xffc1;
        }
        if (t == 4) {
            v[0] = 0x8000;                 /* -0 and +0 */
            v[2] = 0;
        }
        in[t].w[0] = (uint32_t)v[1] << 16 | v[0];
        in[t].w[2] = (uint32_t)v[3] << 16 | v[2];
        in[t].w[4] = (uint32_t)v[5] << 16 | v[4];
    }
    run_body(
        ".reg .b16 %k<16>;\n"
        "add.rn.bf16x2 %r4, %r1, %r2;\nsub.rn.bf16x2 %r5, %r1, %r2;\nmul.rn.bf16x2 %r6, %r1, %r2;\n"
        "fma.rn.bf16x2 %r7, %r1, %r2, %r3;\nfma.rn.relu.bf16x2 %r8, %r1, %r2, %r3;\n"
        "min.bf16x2 %r9, %r1, %r2;\nmax.bf16x2 %r10, %r1, %r2;\nmax.relu.bf16x2 %r11, %r3, %r2;\n"
        "neg.bf16x2 %r12, %r1;\nabs.bf16x2 %r13, %r1;\n"
        "mov.b32 {%k1, %k2}, %r1;\nmov.b32 {%k3, %k4}, %r2;\nmov.b32 {%k5, %k6}, %r3;\n"
        "add.bf16 %k7, %k1, %k3;\nmul.rn.bf16 %k8, %k1, %k3;\nfma.rn.bf16 %k9, %k1, %k3, %k5;\n"
        "neg.bf16 %k10, %k1;\nmin.NaN.bf16 %k11, %k1, %k4;\nmax.NaN.bf16 %k12, %k2, %k3;\n"
        "sub.bf16 %k13, %k1, %k3;\n"
        "st.global.v4.u32 [%rd27], {%r4, %r5, %r6, %r7};\nst.global.v4.u32 [%rd27+16], {%r8, %r9, %r10, %r11};\n"
        "st.global.v2.u32 [%rd27+32], {%r12, %r13};\n"
        "st.global.v4.u16 [%rd27+40], {%k7, %k8, %k9, %k10};\nst.global.v2.u16 [%rd27+48], {%k11, %k12};\n"
        "st.global.u16 [%rd27+52], %k13;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        uint16_t a[2] = { (uint16_t)in[t].w[0], (uint16_t)(in[t].w[0] >> 16) };
        uint16_t b[2] = { (uint16_t)in[t].w[2], (uint16_t)(in[t].w[2] >> 16) };
        uint16_t c[2] = { (uint16_t)in[t].w[4], (uint16_t)(in[t].w[4] >> 16) };
        for (int h = 0; h < 2; h++) {
            double x = bf16_val(a[h]), y = bf16_val(b[h]), z = bf16_val(c[h]);
            uint16_t want[10] = {
                bf16_of(x + y), bf16_of(x - y), bf16_of(x * y), bf16_of(x * y + z),
                relu16(bf16_of(x * y + z)), minmax_bf16(a[h], b[h], false, false),
                minmax_bf16(a[h], b[h], true, false), relu16(minmax_bf16(c[h], b[h], true, false)),
                (uint16_t)(a[h] ^ 0x8000), (uint16_t)(a[h] & 0x7fff),
            };
            static const char *const names[10] = { "add", "sub", "mul", "fma", "fma.relu", "min", "max",
                                                    "max.relu", "neg", "abs" };
            for (int k = 0; k < 10; k++)
                cr_assert_eq((uint16_t)(out[t].w[k] >> (16 * h)), want[k],
                             "%s.bf16x2 thread %d half %d of %#x, %#x, %#x: %#x, want %#x", names[k], t, h,
                             a[h], b[h], c[h], (uint16_t)(out[t].w[k] >> (16 * h)), want[k]);
        }
        double x = bf16_val(a[0]), y = bf16_val(b[0]), z = bf16_val(c[0]);
        uint16_t got[7], want[7] = { bf16_of(x + y), bf16_of(x * y), bf16_of(x * y + z), (uint16_t)(a[0] ^ 0x8000),
                                     minmax_bf16(a[0], b[1], false, true), minmax_bf16(a[1], b[0], true, true),
                                     bf16_of(x - y) };
        memcpy(got, (uint8_t *)&out[t] + 40, sizeof got);
        for (int k = 0; k < 7; k++)
            cr_assert_eq(got[k], want[k], "bf16 scalar op %d thread %d: %#x, want %#x", k, t, got[k], want[k]);
    }
}

/* The f16 modifiers: .sat, .ftz, .relu, .NaN, on both halves. */
Test(ptx_isa, f16_modifiers)
{
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    for (int t = 0; t < NT; t++) {
        _Float16 v[6];
        for (int i = 0; i < 6; i++)
            v[i] = (_Float16)tp_randf(-2.5f, 2.5f);
        if (t == 1)
            v[0] = (_Float16)0x1p-20f;   /* subnormal */
        if (t == 2)
            v[2] = (_Float16)NAN;
        memcpy(&in[t].w[0], v, 4);
        memcpy(&in[t].w[2], v + 2, 4);
        memcpy(&in[t].w[4], v + 4, 4);
    }
    run_body(
        "add.sat.f16x2 %r4, %r1, %r2;\nfma.rn.relu.f16x2 %r5, %r1, %r2, %r3;\nmin.NaN.f16x2 %r6, %r1, %r2;\n"
        "mul.ftz.f16x2 %r7, %r1, %r1;\nmax.relu.f16x2 %r8, %r1, %r2;\n"
        "st.global.v4.u32 [%rd27], {%r4, %r5, %r6, %r7};\nst.global.u32 [%rd27+16], %r8;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        for (int h = 0; h < 2; h++) {
            _Float16 a, b, c, r[5];
            memcpy(&a, (uint8_t *)&in[t].w[0] + 2 * h, 2);
            memcpy(&b, (uint8_t *)&in[t].w[2] + 2 * h, 2);
            memcpy(&c, (uint8_t *)&in[t].w[4] + 2 * h, 2);
            for (int k = 0; k < 5; k++)
                memcpy(&r[k], (uint8_t *)&out[t].w[k] + 2 * h, 2);
            double x = a, y = b;
            double s = x + y;
            _Float16 sat = isnan(s) ? (_Float16)0 : (_Float16)s > 1 ? (_Float16)1 : (_Float16)s < 0 ? (_Float16)0 : (_Float16)s;
            uint16_t bits[5], wantb[5];
            _Float16 f = (_Float16)(x * y + (double)c);   /* exact in double, one rounding */
            _Float16 want[5] = { sat, isnan((double)f) ? f : f < 0 ? (_Float16)0 : f,
                                 isnan(x) || isnan(y) ? (_Float16)NAN : (x < y ? a : b),
                                 fabs(x) < 0x1p-14 || fabs((double)(_Float16)(x * x)) < 0x1p-14 ? (_Float16)0
                                                                                               : (_Float16)(x * x),
                                 isnan(y) ? (a < 0 ? (_Float16)0 : a) : (x > y ? a : b) < 0 ? (_Float16)0 : (x > y ? a : b) };
            memcpy(bits, r, sizeof bits);
            memcpy(wantb, want, sizeof wantb);
            for (int k = 0; k < 5; k++) {
                if (isnan((double)want[k])) {
                    cr_assert_eq(bits[k], 0x7fff, "f16 op %d thread %d half %d: %#x, want the canonical NaN", k, t, h, bits[k]);
                    continue;
                }
                if (k == 1 && (wantb[k] == 0x8000))
                    wantb[k] = 0;
                cr_assert_eq(bits[k], wantb[k], "f16 op %d thread %d half %d: %#x, want %#x", k, t, h, bits[k], wantb[k]);
            }
        }
    }
}

/* A narrow format for the references below: exponent and mantissa bits,
 * bias; e5m2 has infinities, e4m3 one NaN per sign, the rest neither. */
typedef struct rfmt { int eb, mb, bias; bool inf, nan1; } rfmt;
static const rfmt R_E4M3 = { 4, 3, 7, false, true }, R_E5M2 = { 5, 2, 15, true, false },
                  R_E2M3 = { 2, 3, 1, false, false }, R_E3M2 = { 3, 2, 3, false, false },
                  R_E2M1 = { 2, 1, 1, false, false };

static double rdecode(const rfmt *f, unsigned c)
{
    unsigned bits = 1 + f->eb + f->mb, e = (c >> f->mb) & ((1u << f->eb) - 1), m = c & ((1u << f->mb) - 1);
    double s = (c >> (bits - 1)) & 1 ? -1 : 1;
    if (f->inf && e == (1u << f->eb) - 1)
        return m ? NAN : s * INFINITY;
    if (f->nan1 && (c & ((1u << (bits - 1)) - 1)) == (1u << (bits - 1)) - 1)
        return NAN;
    if (e == 0)
        return s * ldexp(m, 1 - f->bias - f->mb);
    return s * ldexp(m + (1u << f->mb), (int)e - f->bias - f->mb);
}

/* cvt.rn.satfinite: the nearest finite value by search, ties to the even
 * code, zero keeping its sign; NaN is the format's NaN or +max. */
static unsigned rencode(const rfmt *f, double x, bool relu)
{
    unsigned bits = 1 + f->eb + f->mb, n = 1u << bits, best = 0;
    if (isnan(x))
        return f->nan1 || f->inf ? 0x7f : (1u << (bits - 1)) - 1;
    if (relu && x < 0)
        x = 0;
    double max = 0;   /* .satfinite: beyond the largest finite value is that value */
    for (unsigned c = 0; c < n / 2; c++)
        if (isfinite(rdecode(f, c)) && rdecode(f, c) > max)
            max = rdecode(f, c);
    if (fabs(x) > max)
        x = copysign(max, x);
    double bd = INFINITY;
    for (unsigned c = 0; c < n; c++) {
        double v = rdecode(f, c);
        if (!isfinite(v))
            continue;
        double d = fabs(v - x);
        bool better = d < bd || (d == bd && (best & 1) && !(c & 1)) ||
                      (d == bd && (c & 1) == (best & 1) && v == 0 && (bool)signbit(v) == (bool)signbit(x));
        if (better) {
            bd = d;
            best = c;
        }
    }
    return best;
}

/* ue8m0 by search: rz the largest 2^(c-127) not above |x|, rp the smallest
 * not below it; beyond them 0xff (NaN), or 0xfe with .satfinite. */
static unsigned rue8m0(double x, bool rp, bool sat)
{
    if (isnan(x))
        return 0xff;
    double a = fabs(x);
    int pick = -1;
    for (int c = 0; c < 255; c++) {
        double v = ldexp(1.0, c - 127);
        if (!rp && v <= a)
            pick = c;
        if (rp && v >= a && pick < 0)
            pick = c;
    }
    if (!rp && pick < 0)
        pick = 0;
    if (pick < 0 || isinf(a))
        pick = 255;
    return sat && pick == 255 ? 0xfe : (unsigned)pick;
}

static uint16_t f16_bits(double v)
{
    if (isnan(v))
        return 0x7fff;
    _Float16 h = (_Float16)v;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

static int64_t sat_int(int32_t v, unsigned w, bool s)
{
    int64_t lo = s ? -(1ll << (w - 1)) : 0, hi = s ? (1ll << (w - 1)) - 1 : (1ll << w) - 1;
    return v < lo ? lo : v > hi ? hi : v;
}

/* cvt to and from e4m3x2, e5m2x2, e2m3x2, e3m2x2, e2m1x2 and ue8m0x2, and
 * cvt.pack, against references found by search over every code; the
 * widening forms see every code, the narrowing ones random values,
 * midpoints and edges. */
Test(ptx_isa, narrow_float_conversions)
{
    enum { NB = 4 };
    static slot in[NT * NB], out[NT * NB];
    memset(out, 0, sizeof out);
    random_inputs(in, NT * NB);
    static const double edges[] = { 0.0, -0.0, NAN, INFINITY, -INFINITY, 448, 464, 480, 57344, 61440, 65536,
                                    1e30, 0x1p-10, 0x1p-17, 7.5, 7.75, 8, 28, 30, 32, 6, 7, 0.25, 0.125,
                                    0x1p-127, 0x1.8p-127, 0x1p-130, 0x1.000002p0, -3.5, -0x1p-9, 0x1p127, 3e38 };
    for (int t = 0; t < NT * NB; t++) {
        float v[2];
        for (int i = 0; i < 2; i++) {
            uint64_t r = tp_rand();
            int kind = (t + i) % 4;
            if (kind == 0)
                v[i] = ldexpf(1.0f + (float)(r >> 41) / 0x1p23f, (int)(r % 41) - 22);
            else if (kind == 1)   /* few mantissa bits: many ties */
                v[i] = ldexpf(1.0f + (float)(r >> 59) / 32.0f, (int)(r % 33) - 16);
            else if (kind == 2)
                v[i] = (float)edges[(t / 4 + i) % (sizeof edges / sizeof *edges)];
            else
                v[i] = ldexpf(1.0f + (float)(r >> 41) / 0x1p23f, (int)(r % 17) - 12);
            if ((r >> 20) & 1 && kind != 2)
                v[i] = -v[i];
        }
        in[t].f[6] = v[0];
        in[t].f[7] = v[1];
        in[t].w[8] = (uint32_t)f16_bits((double)(_Float16)tp_randf(-600, 600)) << 16 |
                     f16_bits(t % 3 ? (double)(_Float16)tp_randf(-2, 2) : edges[t % 12]);
        in[t].w[10] = (uint32_t)t << 8 | (255u - (uint32_t)t % 256) |
                      ((uint32_t)(t & 63) << 8 | (uint32_t)((t * 7) & 63)) << 16;
        in[t].w[11] = (uint32_t)(t & 255) | ((uint32_t)(t & 255) << 8 | (255u - (uint32_t)(t & 255))) << 16;
        in[t].w[12] = (uint32_t)(t % 5 == 0 ? 70000 - 1000 * (t % 40) : (int32_t)tp_rand() >> (t % 30));
        in[t].w[13] = (uint32_t)(t % 7 == 0 ? -200 + t : (int32_t)tp_rand() >> (t % 31));
    }
    run_body(
        ".reg .b16 %k<24>;\n.reg .b8 %q<4>;\n.reg .b32 %s<16>;\n"
        "ld.global.u32 %s1, [%rd28+32];\nld.global.u32 %s2, [%rd28+36];\n"
        "ld.global.u16 %k1, [%rd28+40];\nld.global.u16 %k2, [%rd28+42];\nld.global.b8 %q1, [%rd28+44];\n"
        "ld.global.u16 %k3, [%rd28+46];\n"
        "ld.global.u32 %s3, [%rd28+48];\nld.global.u32 %s4, [%rd28+52];\nld.global.u32 %s5, [%rd28+56];\n"
        "cvt.rn.satfinite.e4m3x2.f32 %k4, %f1, %f2;\ncvt.rn.satfinite.relu.e4m3x2.f32 %k5, %f1, %f2;\n"
        "cvt.rn.satfinite.e5m2x2.f32 %k6, %f1, %f2;\ncvt.rn.satfinite.relu.e5m2x2.f32 %k7, %f1, %f2;\n"
        "cvt.rn.satfinite.e2m3x2.f32 %k8, %f1, %f2;\ncvt.rn.satfinite.e3m2x2.f32 %k9, %f1, %f2;\n"
        "cvt.rn.satfinite.e2m1x2.f32 %q2, %f1, %f2;\ncvt.u16.u8 %k10, %q2;\n"
        "cvt.rz.satfinite.ue8m0x2.f32 %k11, %f1, %f2;\ncvt.rp.ue8m0x2.f32 %k12, %f1, %f2;\n"
        "cvt.rn.satfinite.e4m3x2.f16x2 %k13, %s1;\ncvt.rn.satfinite.relu.e5m2x2.f16x2 %k14, %s1;\n"
        "cvt.rp.satfinite.ue8m0x2.bf16x2 %k15, %s2;\n"
        "st.global.v4.u16 [%rd27], {%k4, %k5, %k6, %k7};\nst.global.v4.u16 [%rd27+8], {%k8, %k9, %k10, %k11};\n"
        "st.global.v4.u16 [%rd27+16], {%k12, %k13, %k14, %k15};\n"
        "cvt.rn.f16x2.e4m3x2 %s6, %k1;\ncvt.rn.f16x2.e5m2x2 %s7, %k1;\ncvt.rn.f16x2.e2m3x2 %s8, %k2;\n"
        "cvt.rn.f16x2.e3m2x2 %s9, %k2;\ncvt.rn.relu.f16x2.e4m3x2 %s10, %k1;\ncvt.rn.f16x2.e2m1x2 %s11, %q1;\n"
        "cvt.rn.bf16x2.ue8m0x2 %s12, %k3;\n"
        "st.global.u32 [%rd27+24], %s6;\nst.global.v4.u32 [%rd27+28], {%s7, %s8, %s9, %s10};\n"
        "st.global.v2.u32 [%rd27+44], {%s11, %s12};\n"
        "cvt.pack.sat.s16.s32.b32 %s13, %s3, %s4;\ncvt.pack.sat.u8.s32.b32 %s14, %s3, %s4, %s5;\n"
        "cvt.pack.sat.s4.s32.b32 %s15, %s4, %s3, %s5;\n"
        "st.global.u32 [%rd27+52], %s13;\nst.global.v2.u32 [%rd27+56], {%s14, %s15};\n",
        in, out, NB);
    for (int t = 0; t < NT * NB; t++) {
        double a = in[t].f[6], b = in[t].f[7];
        const uint16_t *o = (const uint16_t *)&out[t];
        const rfmt *fm[6] = { &R_E4M3, &R_E4M3, &R_E5M2, &R_E5M2, &R_E2M3, &R_E3M2 };
        for (int k = 0; k < 6; k++) {
            unsigned want = rencode(fm[k], a, k == 1 || k == 3) << 8 | rencode(fm[k], b, k == 1 || k == 3);
            cr_assert_eq(o[k], want, "narrowing %d thread %d of %a, %a: %#x, want %#x", k, t, a, b, o[k], want);
        }
        unsigned w4 = rencode(&R_E2M1, a, false) << 4 | rencode(&R_E2M1, b, false);
        cr_assert_eq(o[6], w4, "e2m1x2 thread %d of %a, %a: %#x, want %#x", t, a, b, o[6], w4);
        unsigned ue = rue8m0(a, false, true) << 8 | rue8m0(b, false, true);
        cr_assert_eq(o[7], ue, "ue8m0x2.rz.satfinite thread %d of %a, %a: %#x, want %#x", t, a, b, o[7], ue);
        ue = rue8m0(a, true, false) << 8 | rue8m0(b, true, false);
        cr_assert_eq(o[8], ue, "ue8m0x2.rp thread %d of %a, %a: %#x, want %#x", t, a, b, o[8], ue);
        _Float16 hh[2];
        memcpy(hh, &in[t].w[8], 4);
        unsigned h8 = rencode(&R_E4M3, (double)hh[1], false) << 8 | rencode(&R_E4M3, (double)hh[0], false);
        cr_assert_eq(o[9], h8, "e4m3x2.f16x2 thread %d: %#x, want %#x", t, o[9], h8);
        h8 = rencode(&R_E5M2, (double)hh[1], true) << 8 | rencode(&R_E5M2, (double)hh[0], true);
        cr_assert_eq(o[10], h8, "e5m2x2.relu.f16x2 thread %d: %#x, want %#x", t, o[10], h8);
        ue = rue8m0(bf16_val((uint16_t)(in[t].w[9] >> 16)), true, true) << 8 |
             rue8m0(bf16_val((uint16_t)in[t].w[9]), true, true);
        cr_assert_eq(o[11], ue, "ue8m0x2.bf16x2 thread %d of %#x: %#x, want %#x", t, in[t].w[9], o[11], ue);

        const uint32_t *ow = (const uint32_t *)&out[t];
        unsigned c8 = in[t].w[10] & 0xffff, c6 = in[t].w[10] >> 16, c4 = in[t].w[11] & 0xff,
                 cu = in[t].w[11] >> 16;
        const rfmt *wf[4] = { &R_E4M3, &R_E5M2, &R_E2M3, &R_E3M2 };
        for (int k = 0; k < 5; k++) {
            const rfmt *f = k == 4 ? &R_E4M3 : wf[k];
            unsigned c = k >= 2 && k < 4 ? c6 : c8;
            double hi = rdecode(f, c >> 8), lo = rdecode(f, c & 0xff);
            if (k == 4) {
                hi = hi < 0 ? 0 : hi;
                lo = lo < 0 ? 0 : lo;
            }
            uint32_t want = (uint32_t)f16_bits(hi) << 16 | f16_bits(lo);
            cr_assert_eq(ow[6 + k], want, "widening %d thread %d of %#x: %#x, want %#x", k, t, c, ow[6 + k], want);
        }
        uint32_t want = (uint32_t)f16_bits(rdecode(&R_E2M1, c4 >> 4)) << 16 | f16_bits(rdecode(&R_E2M1, c4 & 15));
        cr_assert_eq(ow[11], want, "f16x2.e2m1x2 thread %d of %#x: %#x, want %#x", t, c4, ow[11], want);
        uint32_t hb = (cu >> 8) == 0xff ? 0x7fff : (uint32_t)f16_bits(0) | bf16_of(ldexp(1.0, (int)(cu >> 8) - 127));
        uint32_t lb = (cu & 0xff) == 0xff ? 0x7fff : bf16_of(ldexp(1.0, (int)(cu & 0xff) - 127));
        if ((cu >> 8) == 0)
            hb = 0x40;
        if ((cu & 0xff) == 0)
            lb = 0x40;
        cr_assert_eq(ow[12], hb << 16 | lb, "bf16x2.ue8m0x2 thread %d of %#x: %#x", t, cu, ow[12]);

        int32_t pa = (int32_t)in[t].w[12], pb = (int32_t)in[t].w[13];
        uint32_t pc = in[t].w[14];
        uint32_t p16 = (uint32_t)(sat_int(pa, 16, true) & 0xffff) << 16 | (uint32_t)(sat_int(pb, 16, true) & 0xffff);
        uint32_t p8 = pc << 16 | (uint32_t)sat_int(pa, 8, false) << 8 | (uint32_t)sat_int(pb, 8, false);
        uint32_t p4 = pc << 8 | (uint32_t)(sat_int(pb, 4, true) & 15) << 4 | (uint32_t)(sat_int(pa, 4, true) & 15);
        cr_assert_eq(ow[13], p16, "cvt.pack.s16 thread %d of %d, %d: %#x, want %#x", t, pa, pb, ow[13], p16);
        cr_assert_eq(ow[14], p8, "cvt.pack.u8 thread %d: %#x, want %#x", t, ow[14], p8);
        cr_assert_eq(ow[15], p4, "cvt.pack.s4 thread %d: %#x, want %#x", t, ow[15], p4);
    }
}

/* cp.async.bulk.tensor, tile mode, 2-D: two boxes loaded into shared
 * memory completing on an mbarrier, one at the tensor's far edge and one at
 * negative coordinates (outside elements arrive as zero), then a box stored
 * back across another tensor's edge (outside elements are not written). The
 * tensor maps are softgpu's layout (engine.h), in global memory. */
Test(ptx_isa, cp_async_bulk_tensor)
{
    enum { W = 20, H = 13, PITCH = 24 };
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    uint32_t *src = tp_alloc(PITCH * H * 4), *dst = tp_alloc(PITCH * H * 4);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < PITCH; x++) {
            src[y * PITCH + x] = x < W ? (uint32_t)(y * 1000 + x) : 0xdeadbeefu;
            dst[y * PITCH + x] = 0xaaaaaaaau;
        }
    soft_tensor_map *maps = tp_alloc(2 * sizeof *maps);
    for (int i = 0; i < 2; i++)
        maps[i] = (soft_tensor_map){ .magic = SOFT_TMAP_MAGIC, .type = CU_TENSOR_MAP_DATA_TYPE_UINT32, .rank = 2,
                                     .elem = 4, .address = (uintptr_t)(i ? dst : src), .dim = { W, H },
                                     .stride = { PITCH * 4 }, .box = { 8, 4 }, .estride = { 1, 1 } };
    in[0].u[7] = (uintptr_t)&maps[0];
    in[0].u[6] = (uintptr_t)&maps[1];
    run_body(
        ".shared .align 128 .b8 tbox[256];\n.shared .align 8 .b64 tmb;\n"
        "ld.global.u64 %rd5, [%rd31+56];\nld.global.u64 %rd6, [%rd31+48];\n"
        "mov.u32 %r4, tbox;\nmov.u32 %r5, tmb;\nsetp.eq.u32 %p1, %r31, 0;\n"
        "@%p1 mbarrier.init.shared::cta.b64 [%r5], 1;\nbar.sync 0;\n"
        "@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 256;\n"
        "mov.u32 %r6, 16;\nmov.u32 %r7, 11;\nmov.u32 %r8, -4;\nmov.u32 %r9, -2;\n"
        "@%p1 cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%rd5, {%r6, %r7}];\n"
        "@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], "
        "[%rd5, {%r6, %r7}], [%r5];\n"
        "add.u32 %r10, %r4, 128;\n"
        "@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r10], "
        "[%rd5, {%r8, %r9}], [%r5];\n"
        "$w:\nmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;\n@!%p2 bra $w;\n"
        "shl.b32 %r11, %r31, 2;\nadd.u32 %r12, %r4, %r11;\nld.shared.u32 %r13, [%r12];\n"
        "st.global.u32 [%rd27], %r13;\n"
        "fence.proxy.async.shared::cta;\nbar.sync 0;\n"
        "@%p1 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd6, {14, 10}], [%r4];\n"
        "cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        int b = t / 32, j1 = (t % 32) / 8, j0 = t % 8;
        int x = (b ? -4 : 16) + j0, y = (b ? -2 : 11) + j1;
        uint32_t want = x >= 0 && x < W && y >= 0 && y < H ? (uint32_t)(y * 1000 + x) : 0;
        cr_assert_eq(out[t].w[0], want, "box %d element (%d, %d): %#x, want %#x", b, j0, j1, out[t].w[0], want);
    }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < PITCH; x++) {
            int j0 = x - 14, j1 = y - 10;
            uint32_t want = 0xaaaaaaaau;
            if (x < W && j0 >= 0 && j0 < 8 && j1 >= 0 && j1 < 4) {
                int sx = 16 + j0, sy = 11 + j1;
                want = sx < W && sy < H ? (uint32_t)(sy * 1000 + sx) : 0;
            }
            cr_assert_eq(dst[y * PITCH + x], want, "stored (%d, %d): %#x, want %#x", x, y, dst[y * PITCH + x], want);
        }
}

/* A 3-D box of 16-bit elements across three edges at once (one of them
 * below zero), its tensor map in global memory. */
Test(ptx_isa, cp_async_bulk_tensor_3d)
{
    enum { X = 12, Y = 5, Z = 3, PITCH = 16 };
    slot in[NT], out[NT] = { 0 };
    random_inputs(in, NT);
    uint16_t *src = tp_alloc(PITCH * Y * Z * 2);
    for (int i = 0; i < PITCH * Y * Z; i++)
        src[i] = (uint16_t)(i % PITCH < X ? 1 + i : 0xdead);
    soft_tensor_map *map = tp_alloc(sizeof *map);
    *map = (soft_tensor_map){ .magic = SOFT_TMAP_MAGIC, .type = CU_TENSOR_MAP_DATA_TYPE_UINT16, .rank = 3,
                              .elem = 2, .address = (uintptr_t)src, .dim = { X, Y, Z },
                              .stride = { PITCH * 2, PITCH * Y * 2 }, .box = { 8, 2, 2 },
                              .estride = { 1, 1, 1 } };
    in[0].u[7] = (uintptr_t)map;
    run_body(
        ".shared .align 128 .b8 tbox[64];\n.shared .align 8 .b64 tmb;\n"
        "ld.global.u64 %rd5, [%rd31+56];\n"
        "mov.u32 %r4, tbox;\nmov.u32 %r5, tmb;\nsetp.eq.u32 %p1, %r31, 0;\n"
        "@%p1 mbarrier.init.shared::cta.b64 [%r5], 1;\nbar.sync 0;\n"
        "@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 64;\n"
        "@%p1 cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r4], "
        "[%rd5, {8, 4, -1}], [%r5];\n"
        "$w:\nmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;\n@!%p2 bra $w;\n"
        "and.b32 %r6, %r31, 31;\nshl.b32 %r6, %r6, 1;\nadd.u32 %r7, %r4, %r6;\nld.shared.u16 %r8, [%r7];\n"
        "st.global.u32 [%rd27], %r8;\n",
        in, out, 1);
    for (int t = 0; t < NT; t++) {
        int e = t % 32, x = 8 + e % 8, y = 4 + (e / 8) % 2, z = -1 + e / 16;
        uint32_t want = x < X && y < Y && z >= 0 ? src[(z * Y + y) * PITCH + x] : 0;
        cr_assert_eq(out[t].w[0], want, "element %d (%d, %d, %d): %#x, want %#x", e, x, y, z, out[t].w[0], want);
    }
}
