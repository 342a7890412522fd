/* Copies: host to device, device to host, device to device, unified, peer
 * and 2D, synchronous and on streams. Device memory is host memory, so a
 * copy is a memmove on the stream's worker once the ranges check out.
 * Synchronous calls queue on the NULL stream (the thread's default stream
 * for _ptds) and wait, which keeps legacy ordering. */
#include "softgpu/driver.h"

#include <stdlib.h>
#include <string.h>

/* False, with the context poisoned, when a device side was freed since the
 * copy was queued: a GPU would fault on it. */
static bool still_there(struct CUctx_st *ctx, bool dst_dev, uint64_t dst, bool src_dev, uint64_t src, uint64_t n)
{
    if (n == 0)
        return true;
    uint64_t bad = dst_dev && !soft_range_covers(dst, n) ? dst : src_dev && !soft_range_covers(src, n) ? src : 0;
    if (!bad)
        return true;
    soft_ctx_poison(ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
    soft_log("CUDA_ERROR_ILLEGAL_ADDRESS: copy of %llu bytes: 0x%llx was freed before the copy ran",
             (unsigned long long)n, (unsigned long long)bad);
    return false;
}

static void run_copy(soft_op *op, struct CUctx_st *ctx)
{
    soft_mem_use_begin();
    if (still_there(ctx, op->u.copy.dst_dev, (uintptr_t)op->u.copy.dst, op->u.copy.src_dev,
                    (uintptr_t)op->u.copy.src, op->u.copy.n))
        memmove(op->u.copy.dst, op->u.copy.staging ? op->u.copy.staging : op->u.copy.src, op->u.copy.n);
    soft_mem_use_end();
}

static void drop_copy(soft_op *op)
{
    free(op->u.copy.staging);
}

static bool clone_copy(soft_op *op)
{
    if (!op->u.copy.staging)
        return true;
    void *p = malloc(op->u.copy.n);
    if (!p)
        return false;
    memcpy(p, op->u.copy.staging, op->u.copy.n);
    op->u.copy.staging = p;
    return true;
}

/* True when p is page-locked host memory a stream may read later. */
static bool pinned(const void *p, size_t n)
{
    soft_range r;
    return soft_range_find((uintptr_t)p, &r) &&
           (r.kind == SOFT_MEM_HOST || r.kind == SOFT_MEM_REGISTERED) &&
           n <= r.size - ((uintptr_t)p - r.base);
}

/* An asynchronous copy this small on an idle stream is done in the call:
 * waking the stream's worker costs more than the copy, and a program
 * waiting for it (an agent reading a value back) waits for that wake-up. */
#define SOFT_INLINE_COPY_MAX ((size_t)64 << 10)

/* Queues a copy of n bytes on s. stage: take the source bytes now (pageable
 * memory the program may reuse once the call returns). wait: return once
 * done, with the context's error. */
static CUresult submit_copy(struct CUstream_st *s, void *dst, const void *src, size_t n,
                            bool dst_dev, bool src_dev, bool stage, bool wait, bool stage_ok_in_capture)
{
    SOFT_TRY(soft_ctx_status(s->ctx));
    bool captured = soft_capturing(s);
    if (captured) {
        /* Captured: a node that reads and writes its memory when it runs. */
        if (wait && !stage_ok_in_capture)
            return soft_capture_misuse(s);
        stage = wait = false;
    } else if (wait) {
        SOFT_TRY(soft_capture_unsafe());
    }
    if (n == 0)
        return CUDA_SUCCESS;
    soft_op *op = soft_op_new(run_copy);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->drop = drop_copy;
    op->clone = clone_copy;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.n = n;
    op->u.copy.dst_dev = dst_dev;
    op->u.copy.src_dev = src_dev;
    if ((wait || n <= SOFT_INLINE_COPY_MAX) && !captured && soft_stream_idle(s)) {
        /* Nothing to order after: copy here, without a trip to the worker
         * (an asynchronous copy may be done when its call returns). */
        run_copy(op, s->ctx);
        free(op);
        return soft_ctx_status(s->ctx);
    }
    if (stage && !wait) {
        op->u.copy.staging = malloc(n);
        if (!op->u.copy.staging) {
            free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->u.copy.staging, src, n);
    }
    uint64_t v;
    SOFT_TRY(soft_stream_submit(s, op, &v));
    if (wait) {
        soft_stream_wait(s, v);
        return soft_ctx_status(s->ctx);
    }
    return CUDA_SUCCESS;
}

/* Device memory that the device of the copy's context may touch. */
static CUresult device_ok(CUdeviceptr p, size_t n, int dev)
{
    return n == 0 || soft_range_covers_on(p, n, dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

enum dir { HTOD, DTOH, DTOD, ANY };

/* take_source: an asynchronous copy reads a host source in the call, as a
 * batch's "during the call" source order asks (pinned memory too). */
static CUresult copy_from(enum dir d, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool async,
                          bool ptds, bool take_source)
{
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    if (n && (!dst || !src))
        return CUDA_ERROR_INVALID_VALUE;
    int dev = s->ctx->device;
    void *dp = (void *)(uintptr_t)dst;
    const void *sp = (const void *)(uintptr_t)src;
    bool dst_dev = d == HTOD || d == DTOD || (d == ANY && soft_range_covers(dst, n));
    bool src_dev = d == DTOH || d == DTOD || (d == ANY && soft_range_covers(src, n));
    if (dst_dev)
        SOFT_TRY(device_ok(dst, n, dev));
    if (src_dev)
        SOFT_TRY(device_ok(src, n, dev));
    bool stage = false, wait = !async;
    if (async) {
        /* Pageable host memory: read it now, or write it before returning,
         * as the driver does. */
        /* (Page-locked memory is in the table, so a unified copy takes it
         * for the device's: it is asked by name.) */
        if ((d == HTOD || d == ANY) && (take_source ? !src_dev || pinned(sp, n) : !src_dev && !pinned(sp, n)))
            stage = true;
        if ((d == DTOH || d == ANY) && !dst_dev && !pinned(dp, n))
            wait = true;
    }
    return submit_copy(s, dp, sp, n, dst_dev, src_dev, stage, wait, async);
}

static CUresult copy(enum dir d, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool async, bool ptds)
{
    return copy_from(d, dst, src, n, h, async, ptds, false);
}

#define H(p) ((CUdeviceptr)(uintptr_t)(p))

SOFT_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ return copy(HTOD, dstDevice, H(srcHost), ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ return copy(HTOD, dstDevice, H(srcHost), ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ return copy(DTOH, H(dstHost), srcDevice, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ return copy(DTOH, H(dstHost), srcDevice, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ return copy(DTOD, dstDevice, srcDevice, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ return copy(DTOD, dstDevice, srcDevice, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ return copy(ANY, dst, src, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ return copy(ANY, dst, src, ByteCount, NULL, false, true); }

SOFT_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{ return copy(HTOD, dstDevice, H(srcHost), ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{ return copy(HTOD, dstDevice, H(srcHost), ByteCount, hStream, true, true); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ return copy(DTOH, H(dstHost), srcDevice, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ return copy(DTOH, H(dstHost), srcDevice, ByteCount, hStream, true, true); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ return copy(DTOD, dstDevice, srcDevice, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{ return copy(DTOD, dstDevice, srcDevice, ByteCount, hStream, true, true); }
SOFT_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ return copy(ANY, dst, src, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ return copy(ANY, dst, src, ByteCount, hStream, true, true); }

/* cuMemcpyBatchAsync: the batch's copies in order on the stream (CUDA
 * promises none within a batch). A copy from the host reads it on the
 * stream's worker, in stream order, which every source order allows but
 * "during the call": that one is read before the call returns, into a
 * buffer the copy owns (submit_copy's staging). */
static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail, CUstream h,
                           bool ptds)
{
    if (fail)
        *fail = SIZE_MAX;
    SOFT_TRY(soft_check_init());
    if (!dsts || !srcs || !sizes || !attrs || !idxs || count == 0 || nattrs == 0 || nattrs > count ||
        h == CU_STREAM_LEGACY || (!h && !ptds))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        CUmemcpySrcAccessOrder o = attrs[k].srcAccessOrder;
        if ((k == 0 ? idxs[0] != 0 : idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            (o != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && o != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
             o != CU_MEMCPY_SRC_ACCESS_ORDER_ANY))
            return CUDA_ERROR_INVALID_VALUE;
    }
    size_t a = 0;
    for (size_t i = 0; i < count; i++) {
        while (a + 1 < nattrs && idxs[a + 1] <= i)
            a++;
        CUresult rc = sizes[i] == 0 ? CUDA_SUCCESS
                    : attrs[a].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL
                        ? copy_from(ANY, dsts[i], srcs[i], sizes[i], h, true, ptds, true)
                        : copy(ANY, dsts[i], srcs[i], sizes[i], h, true, ptds);
        if (rc) {
            if (fail)
                *fail = i;
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                             CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                             size_t *failIdx, CUstream hStream)
{ return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, false); }
SOFT_API CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                                  CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                                  size_t *failIdx, CUstream hStream)
{ return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, true); }
SOFT_API CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                                CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                                CUstream hStream)
{ return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, false); }
SOFT_API CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                                     size_t count, CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                                     size_t numAttrs, CUstream hStream)
{ return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream, true); }

static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                     CUstream h, bool async, bool ptds)
{
    SOFT_TRY(soft_check_init());
    if (!soft_handle_valid(dctx, SOFT_CTX) || !soft_handle_valid(sctx, SOFT_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy(DTOD, dst, src, n, h, async, ptds);
}

SOFT_API CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                       CUcontext srcContext, size_t ByteCount)
{ return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                            CUcontext srcContext, size_t ByteCount)
{ return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                            CUcontext srcContext, size_t ByteCount, CUstream hStream)
{ return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                                 CUcontext srcContext, size_t ByteCount, CUstream hStream)
{ return peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true, true); }

/* ---- 2D ---- */

static void run_copy2d(soft_op *op, struct CUctx_st *ctx)
{
    const CUDA_MEMCPY2D *p = &op->u.copy2d.p;
    soft_mem_use_begin();
    if (still_there(ctx, op->u.copy2d.dst_dev, p->dstDevice, false, 0, op->u.copy2d.dst_span) &&
        still_there(ctx, op->u.copy2d.src_dev, p->srcDevice, false, 0, op->u.copy2d.src_span))
        for (size_t y = 0; y < p->Height; y++)
            memmove((char *)(uintptr_t)p->dstDevice + y * p->dstPitch,
                    (const char *)(uintptr_t)p->srcDevice + y * p->srcPitch, p->WidthInBytes);
    soft_mem_use_end();
}

/* Resolves one side of a 2D copy to its first byte; checks device ranges. */
static CUresult side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                     size_t pitch, size_t width, size_t height, CUdeviceptr *out, bool *is_host)
{
    CUdeviceptr base;
    switch (type) {
    case CU_MEMORYTYPE_HOST: base = H(host); *is_host = true; break;
    case CU_MEMORYTYPE_DEVICE: base = dev; *is_host = false; break;
    case CU_MEMORYTYPE_UNIFIED: base = dev; *is_host = !soft_range_covers(dev, 1); break;
    case CU_MEMORYTYPE_ARRAY: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (!base)
        return CUDA_ERROR_INVALID_VALUE;
    if (height > 1 && pitch < width)
        return CUDA_ERROR_INVALID_VALUE;
    /* Bytes from the first to one past the last touched. */
    unsigned __int128 off = (unsigned __int128)y * pitch + x;
    unsigned __int128 span = height ? (unsigned __int128)(height - 1) * pitch + width : 0;
    if (off + span > UINT64_MAX - base)
        return CUDA_ERROR_INVALID_VALUE;
    *out = base + (CUdeviceptr)off;
    if (!*is_host && span && !soft_range_covers(*out, (uint64_t)span))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream h, bool async, bool ptds)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return soft_copy2d_array(p, h, async, ptds);
    struct CUstream_st *s;
    SOFT_TRY(soft_stream_get(h, ptds, &s));
    SOFT_TRY(soft_ctx_status(s->ctx));
    soft_op *op = soft_op_new(run_copy2d);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUDA_MEMCPY2D q = *p;
    bool src_host, dst_host;
    CUresult r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
                      p->srcPitch, p->WidthInBytes, p->Height, &q.srcDevice, &src_host);
    if (r == CUDA_SUCCESS)
        r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
                 p->dstPitch, p->WidthInBytes, p->Height, &q.dstDevice, &dst_host);
    if (r != CUDA_SUCCESS) {
        free(op);
        return r;
    }
    if (q.Height <= 1) {
        q.srcPitch = q.srcPitch ? q.srcPitch : q.WidthInBytes;
        q.dstPitch = q.dstPitch ? q.dstPitch : q.WidthInBytes;
    }
    op->u.copy2d.p = q;
    op->u.copy2d.dst_dev = !dst_host;
    op->u.copy2d.src_dev = !src_host;
    if (q.Height) {
        op->u.copy2d.dst_span = (uint64_t)(q.Height - 1) * q.dstPitch + q.WidthInBytes;
        op->u.copy2d.src_span = (uint64_t)(q.Height - 1) * q.srcPitch + q.WidthInBytes;
    }
    /* Host memory on either side: done before returning (pageable memory
     * the program may reuse); captured, a node that runs later. */
    bool wait = !async || src_host || dst_host;
    if (soft_capturing(s)) {
        if (!async) {
            free(op);
            return soft_capture_misuse(s);
        }
        wait = false;
    } else if (!async) {
        CUresult u = soft_capture_unsafe();
        if (u != CUDA_SUCCESS) {
            free(op);
            return u;
        }
    }
    uint64_t v;
    SOFT_TRY(soft_stream_submit(s, op, &v));
    if (wait) {
        soft_stream_wait(s, v);
        return soft_ctx_status(s->ctx);
    }
    return CUDA_SUCCESS;
}

SOFT_API CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, NULL, false, false); }
SOFT_API CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) { return copy2d(pCopy, NULL, false, true); }
SOFT_API CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { return copy2d(pCopy, hStream, true, false); }
SOFT_API CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream) { return copy2d(pCopy, hStream, true, true); }

/* A graph's memcpy node: one layer (Depth 1) of a CUDA_MEMCPY3D, as the 2D
 * copy of the same sides; arrays and depth go to copy3d.c. */
CUresult soft_copy3d_op(const CUDA_MEMCPY3D *p, soft_op **out)
{
    if (p->Depth != 1 || p->srcZ || p->dstZ || p->srcLOD || p->dstLOD ||
        p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return soft_copy3d_any_op(p, out);
    CUDA_MEMCPY2D q = {
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height,
    };
    if (!q.WidthInBytes || !q.Height)
        return CUDA_ERROR_INVALID_VALUE;
    bool src_host, dst_host;
    SOFT_TRY(side(q.srcMemoryType, q.srcHost, q.srcDevice, q.srcXInBytes, q.srcY, q.srcPitch, q.WidthInBytes,
                  q.Height, &q.srcDevice, &src_host));
    SOFT_TRY(side(q.dstMemoryType, q.dstHost, q.dstDevice, q.dstXInBytes, q.dstY, q.dstPitch, q.WidthInBytes,
                  q.Height, &q.dstDevice, &dst_host));
    if (q.Height <= 1) {
        q.srcPitch = q.srcPitch ? q.srcPitch : q.WidthInBytes;
        q.dstPitch = q.dstPitch ? q.dstPitch : q.WidthInBytes;
    }
    soft_op *op = soft_op_new(run_copy2d);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy2d.p = q;
    op->u.copy2d.dst_dev = !dst_host;
    op->u.copy2d.src_dev = !src_host;
    op->u.copy2d.dst_span = (uint64_t)(q.Height - 1) * q.dstPitch + q.WidthInBytes;
    op->u.copy2d.src_span = (uint64_t)(q.Height - 1) * q.srcPitch + q.WidthInBytes;
    *out = op;
    return CUDA_SUCCESS;
}
