/* The engine runs tensor-core code: the kernels of tests/kernels/wmma.cu
 * (nvcuda::wmma in every shape and type, mma.sync with fragments the PTX
 * ISA lays out, ldmatrix, movmatrix) in every build mode, against CPU
 * references. Inputs are small multiples of 1/64, so f16/bf16 products and
 * their f32 sums are exact and results compare exactly; tf32 and f64 with
 * tolerances. */
#include "tests/test_ptx_util.h"

#include <math.h>
#include "tests/seed.h"

static uint64_t seed;

static void setup(void)
{
    seed = test_seed();
    tp_state = seed;
}

TestSuite(ptx_mma, .init = setup, .fini = tp_free_all);

#define FOR_MODES(mode) \
    for (unsigned mi_ = 0; mi_ < TP_NMODES; mi_++) \
        for (const char *mode = tp_modes[mi_]; mode; mode = NULL)

/* ---- 16-bit floats ---- */

static float h2f(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                       : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* f16 bits of f, rounded to nearest even (normal range and zero). */
static uint16_t f2h(float f)
{
    uint16_t s = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (a == 0)
        return s;
    int e;
    frexpf(a, &e);                       /* a = m * 2^e, m in [0.5, 1) */
    float q = ldexpf(1.0f, e - 11);      /* f16 spacing at a */
    float r = nearbyintf(a / q) * q;
    frexpf(r, &e);
    int m = (int)ldexpf(r, 11 - e);      /* 11 significant bits */
    cr_assert(e + 14 >= 1 && e + 14 <= 30, "%g outside the normal f16 range", f);
    return (uint16_t)(s | (e + 14) << 10 | (m & 0x3ff));
}

static float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f2bf(float f)   /* exact for the inputs used */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    cr_assert((u & 0xffff) == 0);
    return (uint16_t)(u >> 16);
}

/* A random multiple of 1/64 in [-2, 2]: exact in f16 and bf16. */
static float small(void)
{
    return (float)((int)(tp_rand() % 257) - 128) / 64.0f;
}

/* The f32 round of an exact sum (the inputs keep every sum exact). */
static float fsum(const float *a, int as, const float *b, int bs, int k, float c)
{
    double acc = c;
    for (int i = 0; i < k; i++)
        acc += (double)a[i * as] * b[i * bs];
    return (float)acc;
}

/* ---- wmma ---- */

Test(ptx_mma, wmma_f16_gemm)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        const int M = 64, N = 48, K = 32;
        for (int v = 0; v < 2; v++) {   /* row-major inputs, then column-major */
            bool col = v == 1;
            float *fa = tp_alloc(M * K * 4), *fb = tp_alloc(K * N * 4);
            uint16_t *a = tp_alloc(M * K * 2), *b = tp_alloc(K * N * 2);
            float *c = tp_alloc(M * N * 4);
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) {
                    fa[i * K + k] = small();
                    a[col ? k * M + i : i * K + k] = f2h(fa[i * K + k]);
                }
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++) {
                    fb[k * N + j] = small();
                    b[col ? j * K + k : k * N + j] = f2h(fb[k * N + j]);
                }
            int m = M, n = N, kk = K;
            float alpha = 0.5f;
            tp_args args = { 0 };
            TP_ARG(&args, a);
            TP_ARG(&args, b);
            TP_ARG(&args, c);
            TP_ARG(&args, m);
            TP_ARG(&args, n);
            TP_ARG(&args, kk);
            TP_ARG(&args, alpha);
            /* 12 tiles, two warps per block */
            tp_launch(p, col ? "wmma_f16_cc" : "wmma_f16_rr", mode, 6, 1, 64, 1, 0, &args);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    float want = 0.5f * fsum(&fa[i * K], 1, &fb[j], N, K, 0);
                    cr_assert_eq(c[i * N + j], want, "%s %s: C[%d][%d] = %g, want %g (seed %llu)",
                                 mode, col ? "col" : "row", i, j, c[i * N + j], want,
                                 (unsigned long long)seed);
                }
        }
        soft_program_free(p);
        tp_free_all();
    }
}

/* m32n8k16 and m8n32k16 with f16 accumulators, C and D through memory in
 * either layout. */
Test(ptx_mma, wmma_f16_accumulators)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        for (int s = 0; s < 2; s++) {
            int M = s ? 8 : 32, N = s ? 32 : 8, K = 16;
            float fa[512], fb[512], fc[256];
            uint16_t *a = tp_alloc(512 * 2), *b = tp_alloc(512 * 2), *c = tp_alloc(256 * 2),
                     *d = tp_alloc(256 * 2);
            /* s 0: A row (lda 16), B row (ldb 8), C/D col (ld 32);
             * s 1: A col (lda 8), B col (ldb 16), C/D row (ld 32) */
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) {
                    fa[i * K + k] = small();
                    a[s ? k * 8 + i : i * 16 + k] = f2h(fa[i * K + k]);
                }
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++) {
                    fb[k * N + j] = small();
                    b[s ? j * 16 + k : k * 8 + j] = f2h(fb[k * N + j]);
                }
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    fc[i * N + j] = small();
                    c[s ? i * 32 + j : j * 32 + i] = f2h(fc[i * N + j]);
                }
            tp_args args = { 0 };
            TP_ARG(&args, a);
            TP_ARG(&args, b);
            TP_ARG(&args, c);
            TP_ARG(&args, d);
            tp_launch(p, s ? "wmma_h8x32" : "wmma_h32x8", mode, 1, 1, 32, 1, 0, &args);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    float want = h2f(f2h(fsum(&fa[i * K], 1, &fb[j], N, K, fc[i * N + j])));
                    float got = h2f(d[s ? i * 32 + j : j * 32 + i]);
                    cr_assert_eq(got, want, "%s m%dn%d: D[%d][%d] = %g, want %g (seed %llu)", mode,
                                 M, N, i, j, got, want, (unsigned long long)seed);
                }
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, wmma_bf16_shapes)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        static const int shapes[3][2] = { { 16, 16 }, { 32, 8 }, { 8, 32 } };
        for (int s = 0; s < 3; s++) {
            int M = shapes[s][0], N = shapes[s][1], K = 16;
            float fa[512], fb[512], fc[256];
            uint16_t *a = tp_alloc(M * K * 2), *b = tp_alloc(K * N * 2);
            float *c = tp_alloc(M * N * 4);
            for (int i = 0; i < M * K; i++)
                a[i] = f2bf(fa[i] = small());
            for (int i = 0; i < K * N; i++)
                b[i] = f2bf(fb[i] = small());
            for (int i = 0; i < M * N; i++)
                c[i] = fc[i] = small();
            tp_args args = { 0 };
            TP_ARG(&args, a);
            TP_ARG(&args, b);
            TP_ARG(&args, c);
            TP_ARG(&args, s);
            tp_launch(p, "wmma_bf16", mode, 1, 1, 32, 1, 0, &args);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    float want = fsum(&fa[i * K], 1, &fb[j], N, K, fc[i * N + j]);
                    cr_assert_eq(c[i * N + j], want, "%s m%dn%d: C[%d][%d] = %g, want %g", mode, M,
                                 N, i, j, c[i * N + j], want);
                }
            (void)bf2f;
        }
        soft_program_free(p);
        tp_free_all();
    }
}

/* cvt.rna.tf32.f32 as the reference sees it. */
static float tf32_rna(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&f, &u, 4);
    return f;
}

Test(ptx_mma, wmma_tf32)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        float *a = tp_alloc(16 * 8 * 4), *b = tp_alloc(16 * 8 * 4), *c = tp_alloc(256 * 4);
        for (int i = 0; i < 128; i++) {
            a[i] = tp_randf(-1, 1);
            b[i] = tp_randf(-1, 1);   /* B column-major: b[j * 8 + k] */
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        tp_launch(p, "wmma_tf32", mode, 1, 1, 32, 1, 0, &args);
        int far_from_f32 = 0;
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                double want = 0, full = 0;
                for (int k = 0; k < 8; k++) {
                    want += (double)tf32_rna(a[i * 8 + k]) * tf32_rna(b[j * 8 + k]);
                    full += (double)a[i * 8 + k] * b[j * 8 + k];
                }
                cr_assert(tp_close(c[i * 16 + j], want, 1e-6, 1e-6),
                          "%s: C[%d][%d] = %.9g, want %.9g (seed %llu)", mode, i, j, c[i * 16 + j],
                          want, (unsigned long long)seed);
                far_from_f32 += fabs(want - full) > 1e-5;
            }
        cr_assert(far_from_f32 > 0, "%s: inputs never showed tf32's rounding", mode);
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, wmma_f64_strides)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        int lda = 6, ldb = 10;
        double *a = tp_alloc(8 * lda * 8), *b = tp_alloc(4 * ldb * 8), *c = tp_alloc(64 * 8);
        double c0[64];
        for (int i = 0; i < 8 * lda; i++)
            a[i] = tp_randf(-1, 1);
        for (int i = 0; i < 4 * ldb; i++)
            b[i] = tp_randf(-1, 1);
        for (int i = 0; i < 64; i++)
            c[i] = c0[i] = tp_randf(-1, 1);
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        TP_ARG(&args, lda);
        TP_ARG(&args, ldb);
        tp_launch(p, "wmma_f64", mode, 1, 1, 32, 1, 0, &args);
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) {
                double want = c0[i * 8 + j];
                for (int k = 0; k < 4; k++)
                    want += a[i * lda + k] * b[k * ldb + j];
                cr_assert(tp_close(c[i * 8 + j], want, 1e-14, 1e-14), "%s: C[%d][%d] = %.17g, want %.17g",
                          mode, i, j, c[i * 8 + j], want);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, wmma_s8)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        int8_t *a = tp_alloc(256);
        uint8_t *b = tp_alloc(256);
        int *c = tp_alloc(256 * 4);
        for (int i = 0; i < 256; i++) {
            a[i] = (int8_t)tp_rand();
            b[i] = (uint8_t)tp_rand();   /* read as s8 by the kernel */
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        tp_launch(p, "wmma_s8", mode, 1, 1, 32, 1, 0, &args);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 16; j++) {
                int want = 7;
                for (int k = 0; k < 16; k++)
                    want += a[i * 16 + k] * (int8_t)b[j * 16 + k];
                cr_assert_eq(c[i * 16 + j], want, "%s: C[%d][%d] = %d, want %d", mode, i, j,
                             c[i * 16 + j], want);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, wmma_u8_m32n8k16)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        uint8_t *a = tp_alloc(32 * 16), *b = tp_alloc(16 * 8);
        int *c = tp_alloc(32 * 8 * 4), c0[256];
        for (int i = 0; i < 32 * 16; i++)
            a[i] = (uint8_t)tp_rand();
        for (int i = 0; i < 16 * 8; i++)
            b[i] = (uint8_t)tp_rand();   /* column-major: b[j * 16 + k] */
        for (int i = 0; i < 256; i++)
            c[i] = c0[i] = (int)(tp_rand() % 2001) - 1000;
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        tp_launch(p, "wmma_u8", mode, 1, 1, 32, 1, 0, &args);
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 8; j++) {
                int want = c0[i * 8 + j];
                for (int k = 0; k < 16; k++)
                    want += a[i * 16 + k] * b[j * 16 + k];
                cr_assert_eq(c[i * 8 + j], want, "%s: C[%d][%d] = %d, want %d", mode, i, j,
                             c[i * 8 + j], want);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

/* ---- mma.sync, ldmatrix, movmatrix ---- */

Test(ptx_mma, mma_isa_fragments)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        float fa[256], fbt[128];
        uint16_t *a = tp_alloc(256 * 2), *bt = tp_alloc(128 * 2);
        float *c = tp_alloc(128 * 4), *d = tp_alloc(128 * 4);
        for (int i = 0; i < 256; i++)
            a[i] = f2h(fa[i] = small());
        for (int i = 0; i < 128; i++) {
            bt[i] = f2h(fbt[i] = small());
            c[i] = small();
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, bt);
        TP_ARG(&args, c);
        TP_ARG(&args, d);
        tp_launch(p, "mma_f16_frag", mode, 1, 1, 32, 1, 0, &args);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                float want = fsum(&fa[i * 16], 1, &fbt[j * 16], 1, 16, c[i * 8 + j]);
                cr_assert_eq(d[i * 8 + j], want, "%s: D[%d][%d] = %g, want %g (seed %llu)", mode, i,
                             j, d[i * 8 + j], want, (unsigned long long)seed);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, mma_ldmatrix_gemm)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        const int M = 32, N = 24, K = 48;
        float fa[M * K], fb[K * N];
        uint16_t *a = tp_alloc(M * K * 2), *b = tp_alloc(K * N * 2);
        float *c = tp_alloc(M * N * 4);
        for (int i = 0; i < M * K; i++)
            a[i] = f2h(fa[i] = small());
        for (int i = 0; i < K * N; i++)
            b[i] = f2h(fb[i] = small());
        int m = M, n = N, k = K;
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        TP_ARG(&args, m);
        TP_ARG(&args, n);
        TP_ARG(&args, k);
        tp_launch(p, "mma_ldmatrix", mode, N / 8, M / 16, 32, 1, 0, &args);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float want = fsum(&fa[i * K], 1, &fb[j], N, K, 0);
                cr_assert_eq(c[i * N + j], want, "%s: C[%d][%d] = %g, want %g (seed %llu)", mode, i,
                             j, c[i * N + j], want, (unsigned long long)seed);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

/* mma_shapes: 0 bf16 m16n8k16, 1 f16 m16n8k8 (f16 accumulators), 2 tf32
 * m16n8k8, 3 f64 m8n8k4, 4 s8 m16n8k32 .satfinite. */
Test(ptx_mma, mma_shapes)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        static const int mnk[5][3] = { { 16, 8, 16 }, { 16, 8, 8 }, { 16, 8, 8 }, { 8, 8, 4 }, { 16, 8, 32 } };
        for (int w = 0; w < 5; w++) {
            int M = mnk[w][0], N = mnk[w][1], K = mnk[w][2];
            double A[512], B[256], C[128];
            void *a = tp_alloc(M * K * 8), *b = tp_alloc(K * N * 8), *c = tp_alloc(M * N * 8),
                 *d = tp_alloc(M * N * 8);
            for (int i = 0; i < M * K; i++) {
                switch (w) {
                case 0: ((uint16_t *)a)[i] = f2bf((float)(A[i] = small())); break;
                case 1: ((uint16_t *)a)[i] = f2h((float)(A[i] = small())); break;
                case 2: ((float *)a)[i] = tp_randf(-1, 1); A[i] = tf32_rna(((float *)a)[i]); break;
                case 3: ((double *)a)[i] = A[i] = tp_randf(-1, 1); break;
                default: ((int8_t *)a)[i] = (int8_t)(A[i] = (int8_t)tp_rand()); break;
                }
            }
            for (int i = 0; i < K * N; i++) {
                switch (w) {
                case 0: ((uint16_t *)b)[i] = f2bf((float)(B[i] = small())); break;
                case 1: ((uint16_t *)b)[i] = f2h((float)(B[i] = small())); break;
                case 2: ((float *)b)[i] = tp_randf(-1, 1); B[i] = tf32_rna(((float *)b)[i]); break;
                case 3: ((double *)b)[i] = B[i] = tp_randf(-1, 1); break;
                default: ((int8_t *)b)[i] = (int8_t)(B[i] = (int8_t)tp_rand()); break;
                }
            }
            for (int i = 0; i < M * N; i++) {
                switch (w) {
                case 1: ((uint16_t *)c)[i] = f2h((float)(C[i] = small())); break;
                case 3: ((double *)c)[i] = C[i] = tp_randf(-1, 1); break;
                /* near the s32 limits: the sum saturates in some */
                case 4: ((int *)c)[i] = (int)(C[i] = (i % 3 ? 2147480000.0 : -2147480000.0) *
                                                      (i % 2)); break;
                default: ((float *)c)[i] = (float)(C[i] = small()); break;
                }
            }
            tp_args args = { 0 };
            TP_ARG(&args, (const void *)a);
            TP_ARG(&args, (const void *)b);
            TP_ARG(&args, (const void *)c);
            TP_ARG(&args, d);
            TP_ARG(&args, w);
            tp_launch(p, "mma_shapes", mode, 1, 1, 32, 1, 0, &args);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double want = C[i * N + j], got;
                    for (int q = 0; q < K; q++)
                        want += A[i * K + q] * B[q * N + j];
                    switch (w) {
                    case 1: got = h2f(((uint16_t *)d)[i * N + j]); want = h2f(f2h((float)want)); break;
                    case 3: got = ((double *)d)[i * N + j]; break;
                    case 4:
                        got = ((int *)d)[i * N + j];
                        want = want > 2147483647.0 ? 2147483647.0 : want < -2147483648.0 ? -2147483648.0 : want;
                        break;
                    default: got = ((float *)d)[i * N + j]; break;
                    }
                    double tol = w == 2 ? 1e-6 : w == 3 ? 1e-14 : 0;
                    cr_assert(tp_close(got, want, tol, tol), "%s shape %d: D[%d][%d] = %.17g, want %.17g (seed %llu)",
                              mode, w, i, j, got, want, (unsigned long long)seed);
                }
        }
        soft_program_free(p);
        tp_free_all();
    }
}

Test(ptx_mma, movmatrix_transposes)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        uint16_t *m = tp_alloc(128), *out = tp_alloc(128);
        for (int i = 0; i < 64; i++)
            m[i] = (uint16_t)tp_rand();
        tp_args args = { 0 };
        TP_ARG(&args, m);
        TP_ARG(&args, out);
        tp_launch(p, "movmatrix_t", mode, 1, 1, 32, 1, 0, &args);
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++)
                cr_assert_eq(out[r * 8 + c], m[c * 8 + r], "%s: out[%d][%d]", mode, r, c);
        soft_program_free(p);
        tp_free_all();
    }
}

/* A fragment that reaches past its buffer faults with the address; a
 * wrong fragment size is bad PTX. */
Test(ptx_mma, errors)
{
    soft_program *p = tp_load("wmma", "default");
    double *a = tp_alloc(32 * 8), *b = tp_alloc(32 * 8), *c = tp_alloc(20 * 8);   /* C needs 64 */
    int lda = 4, ldb = 8;
    tp_args args = { 0 };
    TP_ARG(&args, a);
    TP_ARG(&args, b);
    TP_ARG(&args, c);
    TP_ARG(&args, lda);
    TP_ARG(&args, ldb);
    char msg[256];
    CUresult rc = tp_launch_ex(p, "wmma_f64", 1, 1, 32, 1, 0, &args, NULL, NULL, msg, sizeof msg);
    cr_assert_eq(rc, CUDA_ERROR_ILLEGAL_ADDRESS, "result %d (%s)", rc, msg);
    cr_assert(strstr(msg, "wmma_f64") && strstr(msg, "0x"), "message '%s'", msg);
    soft_program_free(p);

    static const char *const bad[] = {
        "wmma.load.a.sync.aligned.row.m16n16k16.f16 {%r1, %r2}, [%rd1], %r3;",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r1, %r2, %r3, %r4}, {%r1}, {%r2, %r3}, {%r1, %r2, %r3, %r4};",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 ".version 9.0\n.target sm_80\n.address_size 64\n"
                 ".visible .entry k()\n{\n.reg .b32 %%r<5>;\n.reg .b64 %%rd<3>;\n%s\nret;\n}\n", bad[i]);
        soft_program *q = NULL;
        rc = soft_program_parse(text, strlen(text), &q, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_ERROR_INVALID_PTX, "%s: result %d (%s)", bad[i], rc, msg);
        cr_assert(strstr(msg, "registers"), "message '%s'", msg);
    }
}

Test(ptx_mma, ldmatrix_x1)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("wmma", mode);
        uint16_t *m = tp_alloc(128), *out = tp_alloc(128), *out_t = tp_alloc(128);
        for (int i = 0; i < 64; i++)
            m[i] = (uint16_t)tp_rand();
        tp_args args = { 0 };
        TP_ARG(&args, m);
        TP_ARG(&args, out);
        TP_ARG(&args, out_t);
        tp_launch(p, "ldmatrix_x1", mode, 1, 1, 32, 1, 0, &args);
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                cr_assert_eq(out[r * 8 + c], m[r * 8 + c], "%s: out[%d][%d]", mode, r, c);
                cr_assert_eq(out_t[r * 8 + c], m[c * 8 + r], "%s: out_t[%d][%d]", mode, r, c);
            }
        soft_program_free(p);
        tp_free_all();
    }
}

/* stmatrix needs sm_90: the sm90 build only (the others build a no-op). */
Test(ptx_mma, stmatrix_x4)
{
    soft_program *p = tp_load("wmma", "sm90");
    for (int trans = 0; trans < 2; trans++) {
        uint16_t *m = tp_alloc(512), *out = tp_alloc(512);
        for (int i = 0; i < 256; i++)
            m[i] = (uint16_t)tp_rand();
        tp_args args = { 0 };
        TP_ARG(&args, m);
        TP_ARG(&args, out);
        TP_ARG(&args, trans);
        tp_launch(p, "stmatrix_x4", "sm90", 1, 1, 32, 1, 0, &args);
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < 8; c++) {
                    uint16_t want = trans ? m[j * 64 + c * 8 + r] : m[j * 64 + r * 8 + c];
                    cr_assert_eq(out[j * 64 + r * 8 + c], want, "trans %d: out[%d][%d][%d]", trans,
                                 j, r, c);
                }
    }
    soft_program_free(p);
}

static const char *const tensor_kernel =
    ".version 9.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    ".visible .entry k(.param .u64 k_p0)\n"
    "{\n"
    ".reg .b32 %r<40>;\n"
    ".reg .f32 %f<20>;\n"
    ".reg .b64 %rd<4>;\n"
    ".shared .align 16 .b8 sm[512];\n"
    "ld.param.u64 %rd1, [k_p0];\n"
    "mov.u32 %r1, 16;\n"
    "mov.u32 %r18, sm;\n"
    /* the instructions mutated below start here */
    "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, [%rd1], %r1;\n"
    "wmma.load.b.sync.aligned.col.m16n16k16.global.f16 {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17}, [%rd1+64], %r1;\n"
    "wmma.load.c.sync.aligned.row.m16n16k16.global.f32 {%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8}, [%rd1], %r1;\n"
    "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16}, "
    "{%r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9}, {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17}, "
    "{%f1, %f2, %f3, %f4, %f5, %f6, %f7, %f8};\n"
    "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%rd1], {%f9, %f10, %f11, %f12, %f13, %f14, %f15, %f16}, %r1;\n"
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r18];\n"
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r20, %r21, %r22, %r23}, "
    "{%r2, %r3}, {%f1, %f2, %f3, %f4};\n"
    "movmatrix.sync.aligned.m8n8.trans.b16 %r24, %r20;\n"
    "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%r18+16], {%r24, %r21};\n"
    "cvt.rna.tf32.f32 %r25, %f1;\n"
    "ret;\n"
    "}\n";

/* Every bit flip of the tensor instructions of a small kernel: a clear
 * error, or a program that runs (or faults) on a 4 KiB buffer; never a
 * crash (run under ASan/UBSan with SAN=1). */
Test(ptx_mma, every_bit_flip)
{
    size_t n = strlen(tensor_kernel), from = (size_t)(strstr(tensor_kernel, "wmma") - tensor_kernel);
    unsigned ok = 0;
    {
        soft_program *p = NULL;
        char msg[256];
        CUresult rc = soft_program_parse(tensor_kernel, n, &p, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_SUCCESS, "the unmutated kernel: %s", msg);
        void *buf = tp_alloc(4096);
        uint64_t ptr = (uintptr_t)buf;
        soft_launch l = { .entry = 0, .grid = { 2, 1, 1 }, .block = { 48, 1, 1 },
                          .params = &ptr, .memory = &tp_memory, .threads = 1 };
        rc = soft_program_launch(p, &l, msg, sizeof msg);
        cr_assert_eq(rc, CUDA_SUCCESS, "the unmutated kernel's launch: %s", msg);
        soft_program_free(p);
        tp_free_all();
    }
    for (size_t i = from; i < n; i++)
        for (unsigned bit = 0; bit < 8; bit++) {
            char *copy = malloc(n);
            memcpy(copy, tensor_kernel, n);
            copy[i] ^= (char)(1u << bit);
            soft_program *p = NULL;
            char msg[256];
            CUresult rc = soft_program_parse(copy, n, &p, msg, sizeof msg);
            free(copy);
            if (rc != CUDA_SUCCESS) {
                cr_assert(rc == CUDA_ERROR_INVALID_PTX || rc == CUDA_ERROR_NOT_SUPPORTED,
                          "flip %zu.%u: result %d", i, bit, rc);
                cr_assert(msg[0], "flip %zu.%u: no message", i, bit);
                continue;
            }
            ok++;
            void *buf = tp_alloc(4096);
            uint64_t ptr = (uintptr_t)buf;
            soft_launch l = { .entry = 0, .grid = { 2, 1, 1 }, .block = { 48, 1, 1 },
                              .params = &ptr, .memory = &tp_memory, .threads = 1 };
            soft_program_launch(p, &l, msg, sizeof msg);
            soft_program_free(p);
            tp_free_all();
        }
    cr_assert(ok > 0);
}

/* ---- fp8 (tests/kernels/fp8.cu, built for sm_89) ---- */

/* The value of an e4m3 (e5 false) or e5m2 code; NaN for NaNs. */
static double f8val(unsigned c, bool e5)
{
    unsigned mb = e5 ? 2 : 3, e = (c >> mb) & (e5 ? 31 : 15), m = c & ((1u << mb) - 1);
    int bias = e5 ? 15 : 7;
    double s = (c & 0x80) ? -1 : 1;
    if ((e5 && e == 31) || (!e5 && (c & 0x7f) == 0x7f))
        return e5 && !m ? s * INFINITY : NAN;
    return s * (e ? ldexp(m + (1u << mb), (int)e - bias - (int)mb) : ldexp(m, 1 - bias - (int)mb));
}

/* A random code of magnitude 2^-2 .. 2^2 (sums of 32 products stay exact in f32). */
static uint8_t rand_f8(bool e5)
{
    uint64_t r = tp_rand();
    unsigned mb = e5 ? 2 : 3, e = (e5 ? 13 : 5) + (unsigned)(r % 5);
    return (uint8_t)((r >> 8 & 0x80) | e << mb | (r >> 16 & ((1u << mb) - 1)));
}

/* The nearest finite code to x (ties to the even code, .satfinite). */
static unsigned f8near(double x, bool e5)
{
    if (isnan(x))
        return 0x7f;
    double max = e5 ? 57344 : 448;
    if (fabs(x) > max)
        x = copysign(max, x);
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned c = 0; c < 256; c++) {
        double v = f8val(c, e5);
        if (!isfinite(v))
            continue;
        double d = fabs(v - x);
        if (d < bd || (d == bd && (best & 1) && !(c & 1)) ||
            (d == bd && v == 0 && (bool)signbit(v) == (bool)signbit(x))) {
            bd = d;
            best = c;
        }
    }
    return best;
}

/* mma_fp8: 0 f32.e4m3.e4m3.f32, 1 f32.e5m2.e4m3.f32, 2 f16.e4m3.e5m2.f16,
 * all m16n8k32; products are exact in f32 and so are these sums. */
Test(ptx_mma, mma_fp8)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("fp8", mode);
        for (int which = 0; which < 3; which++) {
            bool ae5 = which == 1, be5 = which == 2;
            uint8_t *a = tp_alloc(16 * 32), *b = tp_alloc(32 * 8);
            float *c = tp_alloc(16 * 8 * 4), *d = tp_alloc(16 * 8 * 4), cf[128];
            uint16_t *ch = (uint16_t *)c, *dh = (uint16_t *)d;
            for (int i = 0; i < 16 * 32; i++)
                a[i] = rand_f8(ae5);
            for (int i = 0; i < 32 * 8; i++)
                b[i] = rand_f8(be5);
            for (int i = 0; i < 128; i++) {
                cf[i] = small();
                if (which == 2)
                    ch[i] = f2h(cf[i]);
                else
                    c[i] = cf[i];
            }
            tp_args args = { 0 };
            TP_ARG(&args, a);
            TP_ARG(&args, b);
            TP_ARG(&args, c);
            TP_ARG(&args, d);
            TP_ARG(&args, which);
            tp_launch(p, "mma_fp8", mode, 1, 1, 32, 1, 0, &args);
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 8; j++) {
                    double acc = cf[i * 8 + j];
                    for (int q = 0; q < 32; q++)
                        acc += f8val(a[i * 32 + q], ae5) * f8val(b[q * 8 + j], be5);
                    if (which == 2)
                        cr_assert_eq(dh[i * 8 + j], f2h((float)acc), "%s: f16 D[%d][%d] = %#x, want %g (seed %llu)",
                                     mode, i, j, dh[i * 8 + j], acc, (unsigned long long)seed);
                    else
                        cr_assert_eq(d[i * 8 + j], (float)acc, "%s %d: D[%d][%d] = %g, want %g (seed %llu)", mode,
                                     which, i, j, d[i * 8 + j], acc, (unsigned long long)seed);
                }
            tp_free_all();
        }
        soft_program_free(p);
    }
}

/* cuda_fp8.h's saturating conversions both ways. */
Test(ptx_mma, cvt_fp8)
{
    static const float edges[] = { 0.0f, -0.0f, NAN, INFINITY, -INFINITY, 448, 464, 480, 57344, 61440,
                                   1e9f, 0x1p-10f, 0x1p-9f, 0x1p-17f, 0x1.8p-16f, -3.5f, 0x1.1p0f };
    FOR_MODES(mode) {
        soft_program *p = tp_load("fp8", mode);
        int n = 512;
        float *in = tp_alloc((size_t)n * 8);
        uint16_t *e4 = tp_alloc((size_t)n * 2), *e5 = tp_alloc((size_t)n * 2), *back = tp_alloc((size_t)n * 4);
        for (int i = 0; i < 2 * n; i++)
            in[i] = i < 34 ? edges[i % 17] : (i % 3 ? tp_randf(-600, 600) : tp_randf(-0.05f, 0.05f));
        tp_args args = { 0 };
        TP_ARG(&args, in);
        TP_ARG(&args, e4);
        TP_ARG(&args, e5);
        TP_ARG(&args, back);
        TP_ARG(&args, n);
        tp_launch(p, "cvt_fp8", mode, (unsigned)n / 128, 1, 128, 1, 0, &args);
        for (int i = 0; i < n; i++) {
            double x = in[2 * i], y = in[2 * i + 1];   /* float2 .x is the low byte */
            unsigned w4 = f8near(y, false) << 8 | f8near(x, false), w5 = f8near(y, true) << 8 | f8near(x, true);
            cr_assert_eq(e4[i], w4, "%s: e4m3x2 of %a, %a: %#x, want %#x", mode, x, y, e4[i], w4);
            cr_assert_eq(e5[i], w5, "%s: e5m2x2 of %a, %a: %#x, want %#x", mode, x, y, e5[i], w5);
            for (int h = 0; h < 2; h++) {
                double v = f8val((w4 >> (8 * h)) & 0xff, false);
                uint16_t want = isnan(v) ? 0x7fff : v == 0 ? (signbit(v) ? 0x8000 : 0) : f2h((float)v);
                cr_assert_eq(back[2 * i + h], want, "%s: f16 of e4m3 %#x: %#x, want %#x", mode,
                             (w4 >> (8 * h)) & 0xff, back[2 * i + h], want);
            }
        }
        soft_program_free(p);
        tp_free_all();
    }
}

/* bf16 of an f32 that is exact (the inputs keep it so), to nearest even. */
static uint16_t bf_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* cuda_bf16.h's bf16x2 arithmetic. */
Test(ptx_mma, bf16x2_arithmetic)
{
    FOR_MODES(mode) {
        soft_program *p = tp_load("fp8", mode);
        int n = 256;
        uint16_t *a = tp_alloc((size_t)n * 4), *b = tp_alloc((size_t)n * 4), *c = tp_alloc((size_t)n * 4);
        uint16_t *out = tp_alloc((size_t)n * 32);
        for (int i = 0; i < 2 * n; i++) {
            a[i] = f2bf(small());
            b[i] = i % 9 == 0 ? a[i] : f2bf(small());
            c[i] = f2bf(small());
        }
        tp_args args = { 0 };
        TP_ARG(&args, a);
        TP_ARG(&args, b);
        TP_ARG(&args, c);
        TP_ARG(&args, out);
        TP_ARG(&args, n);
        tp_launch(p, "bf16_ops", mode, (unsigned)n / 64, 1, 64, 1, 0, &args);
        for (int i = 0; i < 2 * n; i++) {
            float x = bf2f(a[i]), y = bf2f(b[i]), z = bf2f(c[i]);
            uint16_t fma = bf_rne(x * y + z);   /* exact in f32 for these inputs */
            uint16_t want[8] = { bf_rne(x + y), bf_rne(x * y), fma,
                                 x > y || (x == y && !(a[i] & 0x8000)) ? a[i] : b[i],
                                 x < y || (x == y && (a[i] & 0x8000)) ? a[i] : b[i],
                                 (uint16_t)(a[i] ^ 0x8000), (uint16_t)(a[i] & 0x7fff),
                                 (fma & 0x8000) ? 0 : fma };
            for (int k = 0; k < 8; k++) {
                uint16_t got = out[(i / 2) * 16 + k * 2 + (i % 2)];
                cr_assert_eq(got, want[k], "%s: op %d of %g, %g, %g: %#x, want %#x", mode, k, x, y, z, got, want[k]);
            }
        }
        soft_program_free(p);
        tp_free_all();
    }
}
