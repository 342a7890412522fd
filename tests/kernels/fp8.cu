// fp8 and bf16 as cuBLASLt's kernels use them: mma.sync m16n8k32 on e4m3
// and e5m2 (f32 and f16 accumulators) in inline PTX with the PTX ISA's
// fragment layout, the cuda_fp8.h conversions, and bf16x2 arithmetic from
// cuda_bf16.h. Built for sm_89 (fp8 needs it); the tests check every
// result against a CPU reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

// D (16x8) = A (16x32, row-major bytes) * B (32x8, row-major bytes) + C;
// which 0: f32.e4m3.e4m3.f32, 1: f32.e5m2.e4m3.f32, 2: f16.e4m3.e5m2.f16
// (C and D halves).
extern "C" __global__ void mma_fp8(const uint8_t *a, const uint8_t *b, const void *c, void *d, int which)
{
    int lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
    uint32_t ra[4], rb[2];
    for (int r = 0; r < 4; r++) {
        int row = g + ((r & 1) ? 8 : 0), col = t * 4 + (r >= 2 ? 16 : 0);
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
            v |= (uint32_t)a[row * 32 + col + i] << (8 * i);
        ra[r] = v;
    }
    for (int r = 0; r < 2; r++) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++)
            v |= (uint32_t)b[(t * 4 + i + r * 16) * 8 + g] << (8 * i);
        rb[r] = v;
    }
    if (which < 2) {
        float rc[4], rd[4];
        for (int i = 0; i < 4; i++)
            rc[i] = ((const float *)c)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)];
        if (which == 0)
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                         : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                         : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                           "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
        else
            asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
                         : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                         : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                           "f"(rc[0]), "f"(rc[1]), "f"(rc[2]), "f"(rc[3]));
        for (int i = 0; i < 4; i++)
            ((float *)d)[(i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = rd[i];
    } else {
        const unsigned short *C = (const unsigned short *)c;
        uint32_t rc[2], rd[2];
        for (int r = 0; r < 2; r++)
            rc[r] = (uint32_t)C[(g + r * 8) * 8 + t * 2] | (uint32_t)C[(g + r * 8) * 8 + t * 2 + 1] << 16;
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e5m2.f16 "
                     "{%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"
                     : "=r"(rd[0]), "=r"(rd[1])
                     : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]),
                       "r"(rc[0]), "r"(rc[1]));
        unsigned short *D = (unsigned short *)d;
        for (int r = 0; r < 2; r++) {
            D[(g + r * 8) * 8 + t * 2] = (unsigned short)rd[r];
            D[(g + r * 8) * 8 + t * 2 + 1] = (unsigned short)(rd[r] >> 16);
        }
    }
}

// Each float2 to e4m3x2 and e5m2x2 (saturating) and back to half2, as a
// quantising epilogue does.
extern "C" __global__ void cvt_fp8(const float2 *in, unsigned short *e4, unsigned short *e5, __half2 *back, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    __nv_fp8x2_storage_t x4 = __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E4M3);
    __nv_fp8x2_storage_t x5 = __nv_cvt_float2_to_fp8x2(in[i], __NV_SATFINITE, __NV_E5M2);
    e4[i] = x4;
    e5[i] = x5;
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(x4, __NV_E4M3);
    back[i] = __half2(h);
}

// bf16x2 arithmetic: add, mul, fma, max, min, neg, abs, fma with relu.
extern "C" __global__ void bf16_ops(const __nv_bfloat162 *a, const __nv_bfloat162 *b, const __nv_bfloat162 *c,
                                    __nv_bfloat162 *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    __nv_bfloat162 x = a[i], y = b[i], z = c[i];
    out[8 * i + 0] = __hadd2(x, y);
    out[8 * i + 1] = __hmul2(x, y);
    out[8 * i + 2] = __hfma2(x, y, z);
    out[8 * i + 3] = __hmax2(x, y);
    out[8 * i + 4] = __hmin2(x, y);
    out[8 * i + 5] = __hneg2(x);
    out[8 * i + 6] = __habs2(x);
    out[8 * i + 7] = __hfma2_relu(x, y, z);
}
