/* 3-D copies and every copy that touches a CUDA array: cuMemcpy3D*,
 * cuMemcpy3DPeer*, cuMemcpyAtoH/HtoA/AtoD/DtoA/AtoA (and Async), and the
 * 2-D and graph-node copies with an array side that copy.c hands over.
 * Each side resolves to a pitched box (first byte, row pitch, slice
 * pitch), checked against its allocation or the array's extent; the copy
 * is row memmoves on the stream's worker, ordered like the other copies. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

static void run_copy3d(soft_op *op, struct CUctx_st *ctx)
{
    const struct soft_copy3d *c = &op->u.copy3d;
    soft_mem_use_begin();
    const char *gone = c->dst_dev && !soft_range_covers((uintptr_t)c->dst, c->dst_span) ? "destination"
                       : c->src_dev && !soft_range_covers((uintptr_t)c->src, c->src_span) ? "source" : NULL;
    if (gone) {
        soft_ctx_poison(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
        soft_log("CUDA_ERROR_ILLEGAL_ADDRESS: 3-D copy: its %s was freed before the copy ran", gone);
    } else {
        for (uint64_t z = 0; z < c->depth; z++)
            for (uint64_t y = 0; y < c->height; y++)
                memmove(c->dst + z * c->dslice + y * c->dpitch, c->src + z * c->sslice + y * c->spitch,
                        c->width);
    }
    soft_mem_use_end();
}

/* One side of a copy, as CUDA_MEMCPY3D names it. */
typedef struct side {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    CUarray array;
    size_t x, y, z, lod, pitch, height;
} side;

/* Resolves s for a box of width bytes x height rows x depth slices: its
 * first byte, pitches, span and kind. */
static CUresult resolve(const side *s, uint64_t width, uint64_t height, uint64_t depth, uint8_t **base,
                        uint64_t *pitch, uint64_t *slice, uint64_t *span, bool *dev, bool *host)
{
    *dev = *host = false;
    if (s->lod)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->type == CU_MEMORYTYPE_ARRAY) {
        struct CUarray_st *a;
        SOFT_TRY(soft_array_get(s->array, &a));
        const soft_image *m = &a->img;
        if (s->x > m->pitch || width > m->pitch - s->x || s->y > m->height || height > m->height - s->y ||
            s->z > m->depth || depth > m->depth - s->z)
            return CUDA_ERROR_INVALID_VALUE;
        if (s->x % m->elem || width % m->elem)
            return CUDA_ERROR_INVALID_VALUE;
        *base = m->data + s->z * m->slice + s->y * m->pitch + s->x;
        *pitch = m->pitch;
        *slice = m->slice;
        *span = 0;
        return CUDA_SUCCESS;
    }
    uint64_t b;
    switch (s->type) {
    case CU_MEMORYTYPE_HOST: b = (uintptr_t)s->host; *host = true; break;
    case CU_MEMORYTYPE_DEVICE: b = s->dev; *dev = true; break;
    case CU_MEMORYTYPE_UNIFIED: b = s->dev; *dev = soft_range_covers(b, 1); *host = !*dev; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (!b)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t p = s->pitch ? s->pitch : width, rows = s->height ? s->height : height;
    if ((height > 1 || depth > 1) && p < width)
        return CUDA_ERROR_INVALID_VALUE;
    if (depth > 1 && rows < height)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned __int128 sl = (unsigned __int128)rows * p;
    unsigned __int128 off = (unsigned __int128)s->z * sl + (unsigned __int128)s->y * p + s->x;
    unsigned __int128 sp = (unsigned __int128)(depth - 1) * sl + (unsigned __int128)(height - 1) * p + width;
    if (off + sp > UINT64_MAX - b)
        return CUDA_ERROR_INVALID_VALUE;
    *base = (uint8_t *)(uintptr_t)(b + (uint64_t)off);
    *pitch = p;
    *slice = (uint64_t)sl;
    *span = (uint64_t)sp;
    if (*dev && !soft_range_covers((uintptr_t)*base, *span))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Builds the op for a copy between two sides; *has_host: a side is host
 * memory (the call then completes before returning). */
static CUresult build(const side *src, const side *dst, uint64_t width, uint64_t height, uint64_t depth,
                      soft_op **out, bool *has_host)
{
    if (!width || !height || !depth)
        return CUDA_ERROR_INVALID_VALUE;
    struct soft_copy3d c = { .width = width, .height = height, .depth = depth };
    uint8_t *sb;
    bool sh, dh;
    SOFT_TRY(resolve(src, width, height, depth, &sb, &c.spitch, &c.sslice, &c.src_span, &c.src_dev, &sh));
    SOFT_TRY(resolve(dst, width, height, depth, &c.dst, &c.dpitch, &c.dslice, &c.dst_span, &c.dst_dev, &dh));
    c.src = sb;
    soft_op *op = soft_op_new(run_copy3d);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy3d = c;
    *out = op;
    *has_host = sh || dh;
    return CUDA_SUCCESS;
}

/* Queues op on the stream; waits when synchronous or a side is host memory
 * (pageable memory the program may reuse once the call returns). */
static CUresult submit(soft_op *op, bool has_host, CUstream h, bool async, bool ptds)
{
    struct CUstream_st *s;
    CUresult r = soft_stream_get(h, ptds, &s);
    if (r == CUDA_SUCCESS)
        r = soft_ctx_status(s->ctx);
    bool wait = !async || has_host;
    if (r == CUDA_SUCCESS && soft_capturing(s)) {
        if (!async) {
            soft_op_free(op);
            return soft_capture_misuse(s);
        }
        wait = false;
    } else if (r == CUDA_SUCCESS && !async) {
        r = soft_capture_unsafe();
    }
    if (r != CUDA_SUCCESS) {
        soft_op_free(op);
        return r;
    }
    if (wait && soft_stream_idle(s)) {
        run_copy3d(op, s->ctx);
        soft_op_free(op);
        return soft_ctx_status(s->ctx);
    }
    uint64_t v;
    SOFT_TRY(soft_stream_submit(s, op, &v));
    if (wait) {
        soft_stream_wait(s, v);
        return soft_ctx_status(s->ctx);
    }
    return CUDA_SUCCESS;
}

static side src_of(const CUDA_MEMCPY3D *p)
{
    return (side){ p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY,
                   p->srcZ, p->srcLOD, p->srcPitch, p->srcHeight };
}

static side dst_of(const CUDA_MEMCPY3D *p)
{
    return (side){ p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY,
                   p->dstZ, p->dstLOD, p->dstPitch, p->dstHeight };
}

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream h, bool async, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    side s = src_of(p), d = dst_of(p);
    /* A zero-sized copy does nothing, as on the driver. */
    if (!p->WidthInBytes || !p->Height || !p->Depth)
        return CUDA_SUCCESS;
    soft_op *op;
    bool host;
    SOFT_TRY(build(&s, &d, p->WidthInBytes, p->Height, p->Depth, &op, &host));
    return submit(op, host, h, async, ptds);
}

CUresult soft_copy3d_any_op(const CUDA_MEMCPY3D *p, soft_op **out)
{
    side s = src_of(p), d = dst_of(p);
    bool host;
    return build(&s, &d, p->WidthInBytes, p->Height, p->Depth, out, &host);
}

CUresult soft_copy2d_array(const CUDA_MEMCPY2D *p, CUstream h, bool async, bool ptds)
{
    SOFT_TRY(soft_check_init());
    side s = { p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, 0, 0,
               p->srcPitch, 0 };
    side d = { p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, 0, 0,
               p->dstPitch, 0 };
    if (!p->WidthInBytes || !p->Height)
        return CUDA_SUCCESS;
    soft_op *op;
    bool host;
    SOFT_TRY(build(&s, &d, p->WidthInBytes, p->Height, 1, &op, &host));
    return submit(op, host, h, async, ptds);
}

SOFT_API CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) { return copy3d(pCopy, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) { return copy3d(pCopy, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ return copy3d(pCopy, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{ return copy3d(pCopy, hStream, true, true); }

static CUresult peer3d(const CUDA_MEMCPY3D_PEER *p, CUstream h, bool async, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if ((p->srcContext && !soft_handle_valid(p->srcContext, SOFT_CTX)) ||
        (p->dstContext && !soft_handle_valid(p->dstContext, SOFT_CTX)))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUDA_MEMCPY3D q = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
        .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
        .srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
        .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
        .dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
    };
    return copy3d(&q, h, async, ptds);
}

SOFT_API CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy) { return peer3d(pCopy, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy) { return peer3d(pCopy, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{ return peer3d(pCopy, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{ return peer3d(pCopy, hStream, true, true); }

/* ---- linear copies with an array: a byte offset into its elements ---- */

/* One side of a linear copy: n bytes at off of an array, or memory. */
static CUresult linear_side(CUmemorytype type, CUarray a, size_t off, const void *host, CUdeviceptr dev,
                            size_t n, side *out)
{
    *out = (side){ .type = type, .host = host, .dev = dev, .array = a };
    if (type != CU_MEMORYTYPE_ARRAY)
        return CUDA_SUCCESS;
    struct CUarray_st *arr;
    SOFT_TRY(soft_array_get(a, &arr));
    /* Offsets run through the rows and slices of the array, row-major. */
    if (off > arr->bytes || n > arr->bytes - off)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult linear(CUmemorytype dt, CUarray da, size_t doff, void *dh, CUdeviceptr dd,
                       CUmemorytype st, CUarray sa, size_t soff, const void *sh, CUdeviceptr sd,
                       size_t n, CUstream h, bool async, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (n == 0)
        return CUDA_SUCCESS;
    side s, d;
    SOFT_TRY(linear_side(st, sa, soff, sh, sd, n, &s));
    SOFT_TRY(linear_side(dt, da, doff, dh, dd, n, &d));
    /* An array side seen as one long row of its whole storage. */
    struct soft_copy3d c = { .width = n, .height = 1, .depth = 1 };
    bool sdev = false, shost = false, ddev = false, dhost = false;
    uint8_t *sb;
    uint64_t p, sl;
    if (s.type == CU_MEMORYTYPE_ARRAY) {
        sb = s.array->img.data + soff;
    } else {
        SOFT_TRY(resolve(&s, n, 1, 1, &sb, &p, &sl, &c.src_span, &sdev, &shost));
    }
    if (d.type == CU_MEMORYTYPE_ARRAY) {
        c.dst = d.array->img.data + doff;
    } else {
        SOFT_TRY(resolve(&d, n, 1, 1, &c.dst, &p, &sl, &c.dst_span, &ddev, &dhost));
    }
    c.src = sb;
    c.src_dev = sdev;
    c.dst_dev = ddev;
    soft_op *op = soft_op_new(run_copy3d);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy3d = c;
    return submit(op, shost || dhost, h, async, ptds);
}

#define A CU_MEMORYTYPE_ARRAY
#define HM CU_MEMORYTYPE_HOST
#define DM CU_MEMORYTYPE_DEVICE

SOFT_API CUresult CUDAAPI cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ return linear(HM, NULL, 0, dstHost, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ return linear(HM, NULL, 0, dstHost, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, HM, NULL, 0, srcHost, 0, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, HM, NULL, 0, srcHost, 0, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ return linear(DM, NULL, 0, NULL, dstDevice, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{ return linear(DM, NULL, 0, NULL, dstDevice, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, DM, NULL, 0, NULL, srcDevice, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, DM, NULL, 0, NULL, srcDevice, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                                          size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset,
                                               size_t ByteCount)
{ return linear(A, dstArray, dstOffset, NULL, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                               CUstream hStream)
{ return linear(HM, NULL, 0, dstHost, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset,
                                                    size_t ByteCount, CUstream hStream)
{ return linear(HM, NULL, 0, dstHost, 0, A, srcArray, srcOffset, NULL, 0, ByteCount, hStream, true, true); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                               size_t ByteCount, CUstream hStream)
{ return linear(A, dstArray, dstOffset, NULL, 0, HM, NULL, 0, srcHost, 0, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                                    size_t ByteCount, CUstream hStream)
{ return linear(A, dstArray, dstOffset, NULL, 0, HM, NULL, 0, srcHost, 0, ByteCount, hStream, true, true); }
