/* Memsets of 8, 16 and 32-bit values, 1D and 2D, synchronous and on streams. */
#include "softgpu/driver.h"

#include <string.h>

static void run_fill(soft_op *op, struct CUctx_st *ctx)
{
    soft_mem_use_begin();
    uint64_t span = (uint64_t)(op->u.fill.height - 1) * op->u.fill.pitch + op->u.fill.width * op->u.fill.elem;
    if (!soft_range_covers(op->u.fill.dst, span)) {
        /* Freed since it was queued: a GPU would fault. */
        soft_ctx_poison(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
        soft_log("CUDA_ERROR_ILLEGAL_ADDRESS: memset of 0x%llx was freed before it ran",
                 (unsigned long long)op->u.fill.dst);
        soft_mem_use_end();
        return;
    }
    unsigned v = op->u.fill.value;
    for (size_t y = 0; y < op->u.fill.height; y++) {
        char *row = (char *)(uintptr_t)op->u.fill.dst + y * op->u.fill.pitch;
        size_t w = op->u.fill.width;
        switch (op->u.fill.elem) {
        case 1:
            memset(row, (int)(v & 0xff), w);
            break;
        case 2:
            for (size_t i = 0; i < w; i++)
                ((uint16_t *)(void *)row)[i] = (uint16_t)v;
            break;
        default:
            for (size_t i = 0; i < w; i++)
                ((uint32_t *)(void *)row)[i] = (uint32_t)v;
            break;
        }
    }
    soft_mem_use_end();
}

/* width in elements; pitch in bytes (height 1: ignored). */
static CUresult fill(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem, size_t width,
                     size_t height, CUstream h, bool async, bool ptds)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    if (!dst || dst % elem)
        return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    if (width > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    size_t wbytes = width * elem;
    if (height == 1)
        pitch = wbytes;
    if (pitch < wbytes || (height > 1 && pitch % elem))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned __int128 span = (unsigned __int128)(height - 1) * pitch + wbytes;
    /* Memory the device of the stream's context may touch. */
    if (span > UINT64_MAX || !soft_range_covers_on(dst, (uint64_t)span, s->ctx->device))
        return CUDA_ERROR_INVALID_VALUE;
    if (!async && soft_capturing(s))
        return soft_capture_misuse(s);
    if (!async)
        SOFT_TRY(soft_capture_unsafe());
    if (!async && soft_stream_idle(s)) {
        /* Nothing to order after: fill here, without a trip to the worker. */
        soft_op local = { .u.fill = { dst, pitch, wbytes / elem, height, value, elem } };
        run_fill(&local, s->ctx);
        return soft_ctx_status(s->ctx);
    }
    soft_op *op = soft_op_new(run_fill);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.fill.dst = dst;
    op->u.fill.pitch = pitch;
    op->u.fill.width = width;
    op->u.fill.height = height;
    op->u.fill.value = value;
    op->u.fill.elem = elem;
    uint64_t v;
    SOFT_TRY(soft_stream_submit(s, op, &v));
    if (!async) {
        soft_stream_wait(s, v);
        return soft_ctx_status(s->ctx);
    }
    return CUDA_SUCCESS;
}

#define MEMSET1D(name, T, elem)                                                                  \
    SOFT_API CUresult CUDAAPI name##_v2(CUdeviceptr d, T v, size_t n)                            \
    { return fill(d, 0, v, elem, n, 1, NULL, false, false); }                                    \
    SOFT_API CUresult CUDAAPI name##_v2_ptds(CUdeviceptr d, T v, size_t n)                       \
    { return fill(d, 0, v, elem, n, 1, NULL, false, true); }                                     \
    SOFT_API CUresult CUDAAPI name##Async(CUdeviceptr d, T v, size_t n, CUstream h)              \
    { return fill(d, 0, v, elem, n, 1, h, true, false); }                                        \
    SOFT_API CUresult CUDAAPI name##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream h)         \
    { return fill(d, 0, v, elem, n, 1, h, true, true); }

#define MEMSET2D(name, T, elem)                                                                  \
    SOFT_API CUresult CUDAAPI name##_v2(CUdeviceptr d, size_t p, T v, size_t w, size_t hgt)     \
    { return fill(d, p, v, elem, w, hgt, NULL, false, false); }                                  \
    SOFT_API CUresult CUDAAPI name##_v2_ptds(CUdeviceptr d, size_t p, T v, size_t w, size_t hgt) \
    { return fill(d, p, v, elem, w, hgt, NULL, false, true); }                                   \
    SOFT_API CUresult CUDAAPI name##Async(CUdeviceptr d, size_t p, T v, size_t w, size_t hgt, CUstream h) \
    { return fill(d, p, v, elem, w, hgt, h, true, false); }                                      \
    SOFT_API CUresult CUDAAPI name##Async_ptsz(CUdeviceptr d, size_t p, T v, size_t w, size_t hgt, CUstream h) \
    { return fill(d, p, v, elem, w, hgt, h, true, true); }

MEMSET1D(cuMemsetD8, unsigned char, 1)
MEMSET1D(cuMemsetD16, unsigned short, 2)
MEMSET1D(cuMemsetD32, unsigned int, 4)
MEMSET2D(cuMemsetD2D8, unsigned char, 1)
MEMSET2D(cuMemsetD2D16, unsigned short, 2)
MEMSET2D(cuMemsetD2D32, unsigned int, 4)

CUresult soft_fill_op(const CUDA_MEMSET_NODE_PARAMS *p, soft_op **out)
{
    unsigned elem = p->elementSize;
    if ((elem != 1 && elem != 2 && elem != 4) || !p->dst || p->dst % elem || !p->width || !p->height ||
        p->width > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    size_t wbytes = p->width * elem, pitch = p->height == 1 ? wbytes : p->pitch;
    if (pitch < wbytes || (p->height > 1 && pitch % elem))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned __int128 span = (unsigned __int128)(p->height - 1) * pitch + wbytes;
    if (span > UINT64_MAX || !soft_range_covers(p->dst, (uint64_t)span))
        return CUDA_ERROR_INVALID_VALUE;
    soft_op *op = soft_op_new(run_fill);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.fill.dst = p->dst;
    op->u.fill.pitch = pitch;
    op->u.fill.width = p->width;
    op->u.fill.height = p->height;
    op->u.fill.value = elem == 1 ? (p->value & 0xff) : elem == 2 ? (p->value & 0xffff) : p->value;
    op->u.fill.elem = elem;
    *out = op;
    return CUDA_SUCCESS;
}
