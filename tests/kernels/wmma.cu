// Tensor-core kernels: nvcuda::wmma in each shape and type nvcc emits, and
// mma.sync with ldmatrix and movmatrix the way CUTLASS-style code writes
// them in inline PTX. Built for sm_80 (bf16, tf32 and f64 need it); the
// tests check every result against a CPU reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

using namespace nvcuda;

// C (MxN, f32, row-major) = alpha * A (MxK) * B (KxN); one warp per 16x16
// tile. a_col/b_col pick each input's memory layout; the scaling touches
// the accumulator's elements directly, as real epilogues do.
template <typename L> struct is_col { static const bool v = false; };
template <> struct is_col<wmma::col_major> { static const bool v = true; };

template <typename LA, typename LB>
__device__ void gemm_f16(const half *a, const half *b, float *c, int M, int N, int K, float alpha)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int tm = warp / (N / 16), tn = warp % (N / 16);
    if (tm >= M / 16)
        return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    const bool acol = is_col<LA>::v, bcol = is_col<LB>::v;
    for (int k = 0; k < K; k += 16) {
        const half *pa = acol ? a + k * M + tm * 16 : a + tm * 16 * K + k;
        const half *pb = bcol ? b + tn * 16 * K + k : b + k * N + tn * 16;
        wmma::load_matrix_sync(fa, pa, acol ? M : K);
        wmma::load_matrix_sync(fb, pb, bcol ? K : N);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    for (int i = 0; i < fc.num_elements; i++)
        fc.x[i] *= alpha;
    wmma::store_matrix_sync(c + tm * 16 * N + tn * 16, fc, N, wmma::mem_row_major);
}

extern "C" __global__ void wmma_f16_rr(const half *a, const half *b, float *c, int M, int N, int K, float alpha)
{
    gemm_f16<wmma::row_major, wmma::row_major>(a, b, c, M, N, K, alpha);
}

extern "C" __global__ void wmma_f16_cc(const half *a, const half *b, float *c, int M, int N, int K, float alpha)
{
    gemm_f16<wmma::col_major, wmma::col_major>(a, b, c, M, N, K, alpha);
}

// D (f16) = A * B + C for one m32n8k16 (or m8n32k16) tile, accumulators in
// f16, C loaded column-major from memory and D stored column-major.
extern "C" __global__ void wmma_h32x8(const half *a, const half *b, const half *c, half *d)
{
    wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, half> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 8);
    wmma::load_matrix_sync(fc, c, 32, wmma::mem_col_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 32, wmma::mem_col_major);
}

extern "C" __global__ void wmma_h8x32(const half *a, const half *b, const half *c, half *d)
{
    __shared__ half sa[8 * 16];
    for (int i = threadIdx.x; i < 8 * 16; i += blockDim.x)
        sa[i] = a[i];
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 8, 32, 16, half, wmma::col_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 32, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 8, 32, 16, half> fc;
    wmma::load_matrix_sync(fa, sa, 8);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(fc, c, 32, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 32, wmma::mem_row_major);
}

// bf16 in every shape, f32 accumulators: shape s is 0 m16n16k16, 1 m32n8k16,
// 2 m8n32k16; A row-major (M x 16), B row-major (16 x N), C row-major.
template <int M, int N>
__device__ void bf16_tile(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c)
{
    wmma::fragment<wmma::matrix_a, M, N, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, M, N, 16, __nv_bfloat16, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, M, N, 16, float> fc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, N);
    wmma::load_matrix_sync(fc, c, N, wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, N, wmma::mem_row_major);
}

extern "C" __global__ void wmma_bf16(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c, int shape)
{
    if (shape == 0)
        bf16_tile<16, 16>(a, b, c);
    else if (shape == 1)
        bf16_tile<32, 8>(a, b, c);
    else
        bf16_tile<8, 32>(a, b, c);
}

// tf32: C (16x16) = tf32(A) (16x8, row) * tf32(B) (8x16, col).
extern "C" __global__ void wmma_tf32(const float *a, const float *b, float *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 8);
    wmma::load_matrix_sync(fb, b, 8);
    for (int i = 0; i < fa.num_elements; i++)
        fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; i++)
        fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// f64: C (8x8) += A (8x4, row) * B (4x8, row), strides from the caller.
extern "C" __global__ void wmma_f64(const double *a, const double *b, double *c, int lda, int ldb)
{
    wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 8, 8, 4, double> fc;
    wmma::load_matrix_sync(fc, c, 8, wmma::mem_row_major);
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 8, wmma::mem_row_major);
}

// s8 x u8 -> s32: C (16x16) = A (16x16 s8, row) * B (16x16 u8, col).
extern "C" __global__ void wmma_s8(const signed char *a, const unsigned char *b, int *c)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
    wmma::fill_fragment(fc, 7);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, (const signed char *)b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// ---- mma.sync, fragments as the PTX ISA lays them out ----

__device__ uint32_t pack_h2(half lo, half hi)
{
    return (uint32_t)__half_as_ushort(lo) | (uint32_t)__half_as_ushort(hi) << 16;
}

// D (16x8 f32) = A (16x16 f16 row-major) * B (16x8 f16, given as N x K
// row-major, i.e. col-major B) + C: fragments built from the ISA's formulas
// for m16n8k16 by each lane itself.
extern "C" __global__ void mma_f16_frag(const half *a, const half *bt, const float *c, float *d)
{
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    uint32_t ra[4], rb[2];
    float rc[4], rd[4];
    for (int i = 0; i < 8; i += 2) {
        int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        int col = t * 2 + (i >= 4 ? 8 : 0);
        ra[i / 2] = pack_h2(a[row * 16 + col], a[row * 16 + col + 1]);
    }
    for (int i = 0; i < 4; i += 2) {
        int row = t * 2 + (i >= 2 ? 8 : 0);   // k
        rb[i / 2] = pack_h2(bt[g * 16 + row], bt[g * 16 + row + 1]);
    }
    for (int i = 0; i < 4; i++)
        rc[i] = c[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                 : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                   "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
    for (int i = 0; i < 4; i++)
        d[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = rd[i];
}

// The same product, CUTLASS-style: A and B staged in shared memory, A
// fragments by ldmatrix.x4, B (K x N row-major in shared) by
// ldmatrix.x2.trans, accumulators in place (d and c the same registers).
// One warp per 16x8 tile of C (M x N), K a multiple of 16.
extern "C" __global__ void mma_ldmatrix(const half *a, const half *b, float *c, int M, int N, int K)
{
    __shared__ __align__(16) half sa[16 * 16];
    __shared__ __align__(16) half sb[16 * 8];
    int lane = threadIdx.x, g = lane >> 2, t = lane % 4;
    int tm = blockIdx.y, tn = blockIdx.x;
    float acc[4] = { 0, 0, 0, 0 };
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int i = lane; i < 256; i += 32)
            sa[i] = a[(tm * 16 + i / 16) * K + k0 + i % 16];
        for (int i = lane; i < 128; i += 32)
            sb[i] = b[(k0 + i / 8) * N + tn * 8 + i % 8];
        __syncwarp();
        uint32_t ra[4], rb[2];
        // x4: lanes 0-15 name rows 0-15 at column 0, lanes 16-31 at column 8
        uint32_t pa = (uint32_t)__cvta_generic_to_shared(&sa[(lane % 16) * 16 + (lane / 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(ra[0]), "=r"(ra[1]), "=r"(ra[2]), "=r"(ra[3])
                     : "r"(pa));
        uint32_t pb = (uint32_t)__cvta_generic_to_shared(&sb[(lane % 16) * 8]);
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(rb[0]), "=r"(rb[1])
                     : "r"(pb));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        __syncwarp();
    }
    for (int i = 0; i < 4; i++)
        c[(tm * 16 + (i < 2 ? g : g + 8)) * N + tn * 8 + t * 2 + (i & 1)] = acc[i];
}

// Other mma shapes, fragments from the ISA's formulas: which = 0 bf16
// m16n8k16, 1 f16 m16n8k8 with f16 accumulators, 2 tf32 m16n8k8, 3 f64
// m8n8k4, 4 s8 m16n8k32. A is M x K row-major, B is K x N row-major, C and
// D are M x N row-major; element types as the shape takes them.
extern "C" __global__ void mma_shapes(const void *a, const void *b, const void *c, void *d, int which)
{
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    if (which == 0) {
        const __nv_bfloat16 *A = (const __nv_bfloat16 *)a, *B = (const __nv_bfloat16 *)b;
        uint32_t ra[4], rb[2];
        float rc[4], rd[4];
        for (int r = 0; r < 4; r++) {
            int row = g + ((r & 1) ? 8 : 0), col = t * 2 + (r >= 2 ? 8 : 0);
            ra[r] = (uint32_t)__bfloat16_as_ushort(A[row * 16 + col]) |
                    (uint32_t)__bfloat16_as_ushort(A[row * 16 + col + 1]) << 16;
        }
        for (int r = 0; r < 2; r++) {
            int k = t * 2 + r * 8;
            rb[r] = (uint32_t)__bfloat16_as_ushort(B[k * 8 + g]) |
                    (uint32_t)__bfloat16_as_ushort(B[(k + 1) * 8 + g]) << 16;
        }
        for (int i = 0; i < 4; i++)
            rc[i] = ((const float *)c)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
        for (int i = 0; i < 4; i++)
            ((float *)d)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = rd[i];
    } else if (which == 1) {
        const half *A = (const half *)a, *B = (const half *)b, *C = (const half *)c;
        uint32_t ra[2], rb, rc[2], rd[2];
        for (int r = 0; r < 2; r++)
            ra[r] = pack_h2(A[(g + r * 8) * 8 + t * 2], A[(g + r * 8) * 8 + t * 2 + 1]);
        rb = pack_h2(B[(t * 2) * 8 + g], B[(t * 2 + 1) * 8 + g]);
        for (int r = 0; r < 2; r++)
            rc[r] = pack_h2(C[(g + r * 8) * 8 + t * 2], C[(g + r * 8) * 8 + t * 2 + 1]);
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 "
                     "{%0,%1}, {%2,%3}, {%4}, {%5,%6};\n"
                     : "=r"(rd[0]), "=r"(rd[1])
                     : "r"(ra[0]), "r"(ra[1]), "r"(rb), "r"(rc[0]), "r"(rc[1]));
        for (int r = 0; r < 2; r++)
            ((uint32_t *)d)[((g + r * 8) * 8 + t * 2) / 2] = rd[r];
    } else if (which == 2) {
        const float *A = (const float *)a, *B = (const float *)b;
        uint32_t ra[4], rb[2];
        float rc[4], rd[4];
        for (int r = 0; r < 4; r++) {
            int row = g + ((r & 1) ? 8 : 0), col = t + (r >= 2 ? 4 : 0);
            asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(ra[r]) : "f"(A[row * 8 + col]));
        }
        for (int r = 0; r < 2; r++)
            asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(rb[r]) : "f"(B[(t + r * 4) * 8 + g]));
        for (int i = 0; i < 4; i++)
            rc[i] = ((const float *)c)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                     : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
        for (int i = 0; i < 4; i++)
            ((float *)d)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = rd[i];
    } else if (which == 3) {
        const double *A = (const double *)a, *B = (const double *)b, *C = (const double *)c;
        double ra = A[g * 4 + t], rb = B[t * 8 + g], rc0 = C[g * 8 + t * 2], rc1 = C[g * 8 + t * 2 + 1];
        double rd0, rd1;
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};\n"
                     : "=d"(rd0), "=d"(rd1)
                     : "d"(ra), "d"(rb), "d"(rc0), "d"(rc1));
        ((double *)d)[g * 8 + t * 2] = rd0;
        ((double *)d)[g * 8 + t * 2 + 1] = rd1;
    } else {
        const signed char *A = (const signed char *)a, *B = (const signed char *)b;
        uint32_t ra[4], rb[2];
        int rc[4], rd[4];
        for (int r = 0; r < 4; r++) {
            int row = g + ((r & 1) ? 8 : 0), col = t * 4 + (r >= 2 ? 16 : 0);
            uint32_t v = 0;
            for (int i = 0; i < 4; i++)
                v |= (uint32_t)(uint8_t)A[row * 32 + col + i] << (8 * i);
            ra[r] = v;
        }
        for (int r = 0; r < 2; r++) {
            uint32_t v = 0;
            for (int i = 0; i < 4; i++)
                v |= (uint32_t)(uint8_t)B[(t * 4 + i + r * 16) * 8 + g] << (8 * i);
            rb[r] = v;
        }
        for (int i = 0; i < 4; i++)
            rc[i] = ((const int *)c)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
        asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                     : "=r"(rd[0]), "=r"(rd[1]), "=r"(rd[2]), "=r"(rd[3])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "r"(rc[0]), "r"(rc[1]), "r"(rc[2]), "r"(rc[3]));
        for (int i = 0; i < 4; i++)
            ((int *)d)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = rd[i];
    }
}

// movmatrix.trans of the 8x8 matrix m (row-major, 16-bit) held as ldmatrix
// holds it; out receives each lane's register (then stored row-major).
extern "C" __global__ void movmatrix_t(const unsigned short *m, unsigned short *out)
{
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    uint32_t r = (uint32_t)m[g * 8 + t * 2] | (uint32_t)m[g * 8 + t * 2 + 1] << 16, s;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(s) : "r"(r));
    out[g * 8 + t * 2] = (unsigned short)s;
    out[g * 8 + t * 2 + 1] = (unsigned short)(s >> 16);
}

// ldmatrix.x1 without and with .trans from shared memory: each lane writes
// its register back where its elements sit (row l / 4, columns 2 (l % 4)).
extern "C" __global__ void ldmatrix_x1(const unsigned short *m, unsigned short *out, unsigned short *out_t)
{
    __shared__ __align__(16) unsigned short s[64];
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    s[lane] = m[lane];
    s[lane + 32] = m[lane + 32];
    __syncwarp();
    uint32_t p = (uint32_t)__cvta_generic_to_shared(&s[(lane % 8) * 8]), r, rt;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(rt) : "r"(p));
    out[g * 8 + t * 2] = (unsigned short)r;
    out[g * 8 + t * 2 + 1] = (unsigned short)(r >> 16);
    out_t[g * 8 + t * 2] = (unsigned short)rt;
    out_t[g * 8 + t * 2 + 1] = (unsigned short)(rt >> 16);
}

// stmatrix.x4 (sm_90; a no-op below): four 8x8 matrices m[j] (row-major)
// held as ldmatrix holds them, stored through shared memory to out, plain
// when trans is 0, transposed when 1.
extern "C" __global__ void stmatrix_x4(const unsigned short *m, unsigned short *out, int trans)
{
#if __CUDA_ARCH__ >= 900
    __shared__ __align__(16) unsigned short s[256];
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    uint32_t r[4];
    for (int j = 0; j < 4; j++)
        r[j] = (uint32_t)m[j * 64 + g * 8 + t * 2] | (uint32_t)m[j * 64 + g * 8 + t * 2 + 1] << 16;
    uint32_t p = (uint32_t)__cvta_generic_to_shared(&s[(lane / 8) * 64 + (lane % 8) * 8]);
    if (trans)
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n"
                     :: "r"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    else
        asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n"
                     :: "r"(p), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
    __syncwarp();
    for (int i = lane; i < 256; i += 32)
        out[i] = s[i];
#endif
}

// u8 -> s32 in m32n8k16: C (32x8, row) = A (32x16 u8, row) * B (16x8 u8, col) + C.
extern "C" __global__ void wmma_u8(const unsigned char *a, const unsigned char *b, int *c)
{
    wmma::fragment<wmma::matrix_a, 32, 8, 16, unsigned char, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 32, 8, 16, unsigned char, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 32, 8, 16, int> fc;
    wmma::load_matrix_sync(fc, c, 8, wmma::mem_row_major);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 8, wmma::mem_row_major);
}
