/* Memory on proxies: allocations are requests (the agent maps them inside
 * this job's pointer window, so the pointer is the same on both ends);
 * copies and memsets are handovers; pointer queries are answered from the
 * shim's own table. Host memory "pinned" on a proxy context is plain memory
 * of this process: the wire is what moves it. */
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdlib.h>

#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/htod.h"
#include "shim/link.h"
#include "shim/rail.h"
#include "shim/log.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps this name onto its newest version; here it names its own
 * symbol, the 12.8 form with failIdx. */
#undef cuMemcpyBatchAsync

/* ---- allocation ---- */

static CUresult proxy_alloc(proxy_obj *ctx, size_t size, CUdeviceptr *out, bool in_graph)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult unsafe = in_graph ? CUDA_SUCCESS : capture_unsafe();
    if (unsafe)
        return unsafe;
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    shim_device *d = shim_device_at(ctx->device);
    uint8_t body[16];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    wire_put_u64(&w, size);
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = shim_alloc_reserve();
    if (rc)
        return rc;
    rc = link_request(d->link, &iov, 1, &f, &o, &n);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && shim_pool_release_kept(NULL, true) == CUDA_SUCCESS) {
        frame_release(&f);
        rc = link_request(d->link, &iov, 1, &f, &o, &n);   /* pool blocks kept for reuse were what it lacked */
    }
    if (rc != CUDA_SUCCESS)
        shim_alloc_unreserve();
    if (rc == CUDA_SUCCESS) {
        uint64_t p = n == 8 ? wire_load_u64(o) : 0;
        agent_link *l = d->link;
        if (n != 8)
            rc = link_malformed(l, "an answer to cuMemAlloc of %zu bytes, not 8", n);
        else if (p < l->window_base || p - l->window_base >= l->window_size ||
                 size > l->window_size - (p - l->window_base))
            rc = link_malformed(l, "an allocation at %#llx of %zu bytes, outside its pointer window",
                                (unsigned long long)p, size);
        else {
            *out = p;
            shim_alloc_add_reserved(p, size, ctx->device);
        }
        if (rc)
            shim_alloc_unreserve();
    }
    frame_release(&f);
    return rc;
}

CUresult shim_mem_alloc(proxy_obj *ctx, size_t size, CUdeviceptr *out)
{
    return proxy_alloc(ctx, size, out, false);
}

CUresult shim_mem_alloc_for_graph(proxy_obj *ctx, size_t size, CUdeviceptr *out)
{
    return proxy_alloc(ctx, size, out, true);
}


SHIM_EXPORT(cuMemAlloc_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    return ctx ? proxy_alloc(ctx, bytesize, dptr, false) : SHIM_LOCAL(cuMemAlloc_v2);
}

SHIM_EXPORT(cuMemAllocPitch_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemAllocPitch_v2);
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    CUresult rc = proxy_alloc(ctx, pitch * Height, dptr, false);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

static CUresult proxy_free(CUdeviceptr p, bool in_graph)
{
    uint64_t size;
    int device;
    CUresult unsafe = in_graph ? CUDA_SUCCESS : capture_unsafe();
    if (unsafe)
        return unsafe;
    if (!shim_alloc_remove(p, &size, &device))
        return CUDA_ERROR_INVALID_VALUE;
    shim_pool_forget(p);
    shim_device *d = shim_device_at(device);
    return link_drop(d->link, CUDA_OP_cuMemFree_v2, p);
}

CUresult shim_mem_free_for_graph(CUdeviceptr p)
{
    return proxy_free(p, true);
}

SHIM_EXPORT(cuMemFree_v2)
{
    if (dptr == 0)
        return shim_proxy_current() ? CUDA_SUCCESS : SHIM_LOCAL(cuMemFree_v2);
    if (shim_device_of_pointer(dptr) < 0)
        return SHIM_LOCAL(cuMemFree_v2);
    if (gmem_free(dptr))
        return CUDA_SUCCESS;   /* a graph allocation: its nodes keep the memory */
    shim_managed_info m;
    if (shim_managed_find(dptr, &m) && (m.host || m.base != dptr))
        return CUDA_ERROR_INVALID_VALUE;   /* mapped host memory, or inside an allocation */
    return shim_managed_free(dptr, false) ? CUDA_SUCCESS : proxy_free(dptr, false);
}

SHIM_EXPORT(cuMemGetInfo_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemGetInfo_v2);
    shim_device *d = shim_device_at(ctx->device);
    /* Pool blocks the program freed count as the pool's, not its. */
    CUresult kept = shim_pool_release_kept(NULL, true);
    if (kept)
        return kept;
    uint8_t body[8];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuMemGetInfo_v2);
    wire_put_u32(&w, (uint32_t)d->remote_ordinal);
    struct iovec iov = { body, w.off };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(d->link, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n == 16) {
        if (free)
            *free = wire_load_u64(o);
        if (total)
            *total = wire_load_u64(o + 8);
    } else if (rc == CUDA_SUCCESS) {
        rc = link_malformed(d->link, "an answer to cuMemGetInfo of %zu bytes, not 16", n);
    }
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuMemGetAddressRange_v2)
{
    if (shim_device_of_pointer(dptr) < 0)
        return SHIM_LOCAL(cuMemGetAddressRange_v2);
    uint64_t base, size;
    int device;
    if (!shim_alloc_find(dptr, &base, &size, &device))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

/* ---- host memory on proxy contexts ---- */

typedef struct host_block {
    struct host_block *next;
    void *p;
    size_t size;
    unsigned flags;
} host_block;

static host_block *host_blocks;
static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    host_block *b = malloc(sizeof *b);
    if (p == MAP_FAILED || !b) {
        if (p != MAP_FAILED)
            munmap(p, size ? size : 1);
        free(b);
        return shim_nomem("%zu bytes of page-locked host memory", size);
    }
    *b = (host_block){ NULL, p, size ? size : 1, flags };
    pthread_mutex_lock(&host_lock);
    b->next = host_blocks;
    host_blocks = b;
    pthread_mutex_unlock(&host_lock);
    *pp = p;
    return CUDA_SUCCESS;
}

/* The block holding p (removed from the list when take), or NULL. */
static host_block *host_find(const void *p, bool take)
{
    pthread_mutex_lock(&host_lock);
    host_block **pp = &host_blocks, *b = NULL;
    for (; *pp; pp = &(*pp)->next)
        if ((const uint8_t *)p >= (uint8_t *)(*pp)->p && (const uint8_t *)p < (uint8_t *)(*pp)->p + (*pp)->size) {
            b = *pp;
            if (take)
                *pp = b->next;
            break;
        }
    pthread_mutex_unlock(&host_lock);
    return b;
}

SHIM_EXPORT(cuMemAllocHost_v2)
{
    return shim_proxy_current() ? host_alloc(pp, bytesize, 0) : SHIM_LOCAL(cuMemAllocHost_v2);
}

SHIM_EXPORT(cuMemHostAlloc)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemHostAlloc);
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    /* Mapped: kernels reach it at its own address (managed.c). */
    if (Flags & CU_MEMHOSTALLOC_DEVICEMAP)
        return shim_managed_host_alloc(ctx, bytesize, Flags, pp);
    return host_alloc(pp, bytesize, Flags);
}

SHIM_EXPORT(cuMemFreeHost)
{
    if (p && shim_managed_free((uint64_t)(uintptr_t)p, true))
        return CUDA_SUCCESS;
    host_block *b = host_find(p, true);
    if (!b)
        return SHIM_LOCAL(cuMemFreeHost);
    munmap(b->p, b->size);
    free(b);
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemHostGetFlags)
{
    shim_managed_info m;
    if (shim_managed_find((uint64_t)(uintptr_t)p, &m) && m.host) {
        if (!pFlags)
            return CUDA_ERROR_INVALID_VALUE;
        *pFlags = m.flags;
        return CUDA_SUCCESS;
    }
    host_block *b = host_find(p, false);
    if (!b)
        return SHIM_LOCAL(cuMemHostGetFlags);
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = b->flags;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemHostRegister_v2)
{
    proxy_obj *ctx = shim_proxy_current();
    if (!ctx)
        return SHIM_LOCAL(cuMemHostRegister_v2);
    if (!p || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Mapped: a device copy kept in step with it (hostmap.c). Else
     * registering only pins; for a proxy the wire reads it either way. */
    return Flags & CU_MEMHOSTREGISTER_DEVICEMAP ? shim_hostmap_register(ctx, p, bytesize) : CUDA_SUCCESS;
}

SHIM_EXPORT(cuMemHostUnregister)
{
    if (shim_hostmap_unregister(p))
        return CUDA_SUCCESS;
    return shim_proxy_current() ? CUDA_SUCCESS : SHIM_LOCAL(cuMemHostUnregister);
}

/* ---- copies ---- */

/* A copy goes in pieces, each its own record and marker on the agent, so
 * the agent's device copy of one piece overlaps the transfer of the next.
 * The first pieces are small, so the overlap starts at once (a 1 MiB copy
 * is three); then they double up to COPY_PIECE_MAX, where the cost of a
 * piece (a record, a marker, a word) is lost in its transfer time. A raw
 * copy to an agent on softgpu moves its bytes from the socket into device
 * memory in place (agent/backend.c, host_memory): no device copy to
 * overlap, so its pieces are COPY_PIECE_MAX from the start. (A 1 MiB copy
 * to the device and a synchronize took 324-427 us at the median in three
 * pieces, 249-284 us in one: each piece's word woke the shim's receiver,
 * which took the socket's lock against the program thread sending the
 * next piece.) A compressed copy keeps the ramp, so compressing overlaps
 * the transfer; so do copies out, which the agent may compress. */
#define COPY_PIECE_MIN ((size_t)256 << 10)
#define COPY_PIECE_MAX ((size_t)4 << 20)
_Static_assert(COPY_PIECE_MAX <= JOB_COPY_CHUNK, "a piece must fit in a chunk the agent accepts");
/* At most this many bytes of a copy in go before a piece the agent reports:
 * under the link's limit on unreported work (UNREPORTED_LIMIT, 64 MiB),
 * which a piece after a quiet one does not wait for. */
#define COPY_QUIET_RUN ((size_t)16 << 20)

/* The length of the piece at off of a copy of n bytes; ramp: the first
 * pieces are small. */
static size_t piece_at(size_t off, size_t n, bool ramp)
{
    size_t piece = off > COPY_PIECE_MAX || !ramp ? COPY_PIECE_MAX : off < COPY_PIECE_MIN ? COPY_PIECE_MIN : off;
    return n - off < piece ? n - off : piece;
}

/* Copies program memory to a proxy in pieces; returns the last value. The
 * agent sends a word for the last piece and after each COPY_QUIET_RUN bytes
 * of pieces, not for each (COPY_QUIET): every word woke the program's
 * reader against the thread still sending the next piece. */
static CUresult copy_htod(proxy_obj *s, CUdeviceptr dst, const void *src, size_t n, uint64_t *last)
{
    CUresult rc = CUDA_SUCCESS;
    *last = 0;
    uint8_t method = shim_htod_compress(s->link, s, src, n, true);
    bool ramp = method != COMPRESS_RAW || !link_on_softgpu(s->link);
    size_t quiet_run = 0;
    for (size_t off = 0, len; off < n && rc == CUDA_SUCCESS; off += len) {
        len = piece_at(off, n, ramp);
        bool quiet = off + len < n && quiet_run + len < COPY_QUIET_RUN;
        rc = shim_htod_record(s->link, s, dst + off, (const uint8_t *)src + off, len, method, true, quiet,
                              quiet_run > 0, last);
        quiet_run = quiet ? quiet_run + len : 0;
    }
    return rc;
}

static CUresult copy_dtoh(proxy_obj *s, void *dst, CUdeviceptr src, size_t n, uint64_t *last)
{
    CUresult rc = CUDA_SUCCESS;
    *last = 0;
    for (size_t off = 0, len; off < n && rc == CUDA_SUCCESS; off += len) {
        len = piece_at(off, n, true);
        uint8_t body[COPY_DTOH_BODY];
        copy_dtoh_write(body, src + off, len);
        handover h = { .op = CUDA_OP_cuMemcpyDtoHAsync_v2, .stream = s, .body = body, .body_len = sizeof body,
                       .dst = (uint8_t *)dst + off, .dst_len = len };
        rc = link_handover(s->link, &h, last);
    }
    return rc;
}

static CUresult copy_dtod(proxy_obj *s, CUdeviceptr dst, CUdeviceptr src, size_t n, uint64_t *last)
{
    uint8_t body[rec_copy_dtod_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_copy_dtod_put(&w, &(rec_copy_dtod){ .dst = dst, .src = src, .length = n });
    handover h = { .op = CUDA_OP_cuMemcpyDtoDAsync_v2, .stream = s, .body = body, .body_len = w.off };
    return link_handover(s->link, &h, last);
}

/* What a pointer is, for copies whose direction the call does not say. */
typedef enum place { PLACE_HOST, PLACE_PROXY, PLACE_LOCAL } place;

static place where(CUdeviceptr p)
{
    if (shim_device_of_pointer(p) >= 0)
        return PLACE_PROXY;
    const shim_driver *drv = shim_local_driver();
    unsigned type = 0;
    if (drv && drv->fn_cuPointerGetAttribute &&
        drv->fn_cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS &&
        type == CU_MEMORYTYPE_DEVICE)
        return PLACE_LOCAL;
    return PLACE_HOST;
}

/* NULL is no program memory: the driver refuses a copy to or from it (and a
 * copy into it would have bytes come back that no pending copy expects). */
static bool null_program_side(place pd, uint64_t dst, place ps, uint64_t src)
{
    return (pd == PLACE_HOST && !dst) || (ps == PLACE_HOST && !src);
}

/* The stream a copy between proxy memory and anything else goes on: the
 * given one, or the default stream of the proxy device that p is on. */
static proxy_obj *stream_for(CUstream h, bool per_thread, CUdeviceptr p, CUresult *rc)
{
    proxy_obj *s = NULL;
    int k = shim_stream(h, per_thread, &s, rc);
    if (k < 0)
        return NULL;
    if (k > 0 && s->device == shim_device_of_pointer(p))
        return s;
    if (k > 0 && s->link == shim_device_at(shim_device_of_pointer(p))->link)
        return s;
    /* A local stream, or one on another agent: order through the proxy's
     * own default stream, waiting, as a staged copy must. */
    int dev = shim_device_of_pointer(p);
    if (per_thread)
        return shim_per_thread_stream(dev, rc);
    return shim_device_at(dev)->null_stream;
}

/* Copies between two places of which at least one is a proxy; wait=true
 * for synchronous semantics. Staging through host memory covers proxy to
 * local and proxy to another agent. */
static CUresult copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread, bool wait)
{
    if (n == 0)
        return CUDA_SUCCESS;
    place pd = where(dst), ps = where(src);
    if (null_program_side(pd, dst, ps, src))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    uint64_t v = 0;
    proxy_obj *s;
    bool posted = false;
    /* Managed and mapped memory: what the CPU wrote goes first, and what
     * the copy writes is the device's until the next touch (managed.c). */
    if (pd == PLACE_PROXY && ps == PLACE_HOST) {
        if (!(s = stream_for(h, per_thread, dst, &rc)) || (rc = shim_managed_before_access(s, dst, n)))
            return rc;
        /* Synchronous, with nothing to wait for before it: it returns once
         * the bytes are sent (docs/design.md "One copy"). Not into managed
         * memory, which the program may touch next (managed.c). */
        shim_managed_info m;
        posted = wait && !shim_managed_find(dst, &m) && link_may_post(s->link, s);
        if (posted)
            shim_managed_synced(s->link);   /* its stream sync found the work done, as a wait would */
        rc = copy_htod(s, dst, (const void *)(uintptr_t)src, n, &v);
        shim_managed_written(dst, n);
    } else if (pd == PLACE_HOST && ps == PLACE_PROXY) {
        if (!(s = stream_for(h, per_thread, src, &rc)) || (rc = shim_managed_before_access(s, src, n)))
            return rc;
        rc = copy_dtoh(s, (void *)(uintptr_t)dst, src, n, &v);
    } else if (pd == PLACE_PROXY && ps == PLACE_PROXY &&
               shim_device_at(shim_device_of_pointer(dst))->link == shim_device_at(shim_device_of_pointer(src))->link) {
        if (!(s = stream_for(h, per_thread, dst, &rc)) || (rc = shim_managed_before_access(s, dst, n)) ||
            (rc = shim_managed_before_access(s, src, n)))
            return rc;
        rc = copy_dtod(s, dst, src, n, &v);
        shim_managed_written(dst, n);
    } else if (pd == PLACE_PROXY && ps == PLACE_PROXY &&
               shim_rail_usable(shim_device_at(shim_device_of_pointer(dst))->link,
                                shim_device_at(shim_device_of_pointer(src))->link)) {
        /* Two agents: straight between them. */
        return shim_rail_copy(dst, src, n, h, per_thread, wait);
    } else {
        /* Staged: whole, synchronous, through this process. */
        void *tmp = malloc(n);
        if (!tmp)
            return shim_nomem("staging a copy of %zu bytes", n);
        rc = copy_any((CUdeviceptr)(uintptr_t)tmp, src, n, h, per_thread, true);
        if (rc == CUDA_SUCCESS) {
            if (pd == PLACE_LOCAL) {
                const shim_driver *drv = shim_local_driver();
                rc = drv->fn_cuMemcpyHtoD_v2(dst, tmp, n);
            } else {
                rc = copy_any(dst, (CUdeviceptr)(uintptr_t)tmp, n, h, per_thread, true);
            }
        }
        free(tmp);
        return rc;
    }
    if (rc == CUDA_SUCCESS && posted)
        rc = link_post(s->link, s, v);
    else if (rc == CUDA_SUCCESS && wait)
        rc = link_wait(s->link, s, v);
    return rc;
}

/* A staged copy from local device memory to a proxy reads it out first. */
static CUresult copy_from_local(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread)
{
    void *tmp = malloc(n ? n : 1);
    if (!tmp)
        return shim_nomem("staging a copy of %zu bytes from a local device", n);
    const shim_driver *drv = shim_local_driver();
    CUresult rc = drv->fn_cuMemcpyDtoH_v2(tmp, src, n);
    if (rc == CUDA_SUCCESS)
        rc = copy_any(dst, (CUdeviceptr)(uintptr_t)tmp, n, h, per_thread, true);
    free(tmp);
    return rc;
}

static bool involves_proxy(CUdeviceptr a, CUdeviceptr b)
{
    return shim_device_of_pointer(a) >= 0 || shim_device_of_pointer(b) >= 0;
}

/* Capture (graph.h): a synchronous copy is unsafe during a capture and
 * cannot use a capturing stream; an asynchronous one on a capturing stream
 * becomes a memcpy node (*captured) that reads and writes its memory, the
 * program's included, each time the graph runs. */
static CUresult copy_capture(const CUDA_MEMCPY3D *c, CUstream h, bool per_thread, bool wait, bool *captured)
{
    *captured = false;
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    if (wait) {
        if (k > 0 && (rc = capture_misuse(s)))
            return rc;
        if ((rc = capture_unsafe()))
            return rc;
    }
    if (k == 0 || (rc = capture_check(s, captured)) || !*captured)
        return rc;
    if (wait)
        return capture_misuse(s);
    shim_node t = { .type = CU_GRAPH_NODE_TYPE_MEMCPY, .u.copy = *c };
    return capture_add(s, &t);
}

static CUmemorytype copy_type(CUdeviceptr p)
{
    return where(p) == PLACE_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
}

static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread, bool wait)
{
    CUDA_MEMCPY3D c = { .srcMemoryType = copy_type(src), .dstMemoryType = copy_type(dst), .WidthInBytes = n,
                        .Height = 1, .Depth = 1 };
    if (c.srcMemoryType == CU_MEMORYTYPE_HOST)
        c.srcHost = (const void *)(uintptr_t)src;
    else
        c.srcDevice = src;
    if (c.dstMemoryType == CU_MEMORYTYPE_HOST)
        c.dstHost = (void *)(uintptr_t)dst;
    else
        c.dstDevice = dst;
    bool captured;
    CUresult rc = copy_capture(&c, h, per_thread, wait, &captured);
    if (rc || captured)
        return rc;
    if (where(src) == PLACE_LOCAL)
        return copy_from_local(dst, src, n, h, per_thread);
    return copy_any(dst, src, n, h, per_thread, wait);
}

/* Without a local driver, memory that is not a proxy's is this process's:
 * a unified copy between two such places is a plain one. */
static CUresult copy_host(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    if (!shim_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (n && (!dst || !src))
        return CUDA_ERROR_INVALID_VALUE;   /* as the driver says; never a crash */
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

#define COPY_EXPORT(sym, dstp, srcp, stream, per_thread, wait)                  \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!involves_proxy((CUdeviceptr)(uintptr_t)(dstp), (CUdeviceptr)(uintptr_t)(srcp))) \
            return shim_local_driver() ? SHIM_LOCAL(sym)                         \
                                       : copy_host((CUdeviceptr)(uintptr_t)(dstp), \
                                                   (CUdeviceptr)(uintptr_t)(srcp), ByteCount); \
        return copy_unified((CUdeviceptr)(uintptr_t)(dstp), (CUdeviceptr)(uintptr_t)(srcp), ByteCount, \
                            stream, per_thread, wait);                          \
    }

COPY_EXPORT(cuMemcpy, dst, src, NULL, false, true)
COPY_EXPORT(cuMemcpy_ptds, dst, src, NULL, true, true)
COPY_EXPORT(cuMemcpyAsync, dst, src, hStream, false, false)
COPY_EXPORT(cuMemcpyAsync_ptsz, dst, src, hStream, true, false)
COPY_EXPORT(cuMemcpyHtoD_v2, dstDevice, srcHost, NULL, false, true)
COPY_EXPORT(cuMemcpyHtoD_v2_ptds, dstDevice, srcHost, NULL, true, true)
COPY_EXPORT(cuMemcpyDtoH_v2, dstHost, srcDevice, NULL, false, true)
COPY_EXPORT(cuMemcpyDtoH_v2_ptds, dstHost, srcDevice, NULL, true, true)
COPY_EXPORT(cuMemcpyDtoD_v2, dstDevice, srcDevice, NULL, false, false)
COPY_EXPORT(cuMemcpyDtoD_v2_ptds, dstDevice, srcDevice, NULL, true, false)
COPY_EXPORT(cuMemcpyHtoDAsync_v2, dstDevice, srcHost, hStream, false, false)
COPY_EXPORT(cuMemcpyHtoDAsync_v2_ptsz, dstDevice, srcHost, hStream, true, false)
COPY_EXPORT(cuMemcpyDtoHAsync_v2, dstHost, srcDevice, hStream, false, false)
COPY_EXPORT(cuMemcpyDtoHAsync_v2_ptsz, dstHost, srcDevice, hStream, true, false)
COPY_EXPORT(cuMemcpyDtoDAsync_v2, dstDevice, srcDevice, hStream, false, false)
COPY_EXPORT(cuMemcpyDtoDAsync_v2_ptsz, dstDevice, srcDevice, hStream, true, false)

static CUresult copy_peer(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread, bool wait)
{
    return copy_unified(dst, src, n, h, per_thread, wait);
}

SHIM_EXPORT(cuMemcpyPeer)
{
    (void)dstContext;
    (void)srcContext;
    if (!involves_proxy(dstDevice, srcDevice))
        return SHIM_LOCAL(cuMemcpyPeer);
    return copy_peer(dstDevice, srcDevice, ByteCount, NULL, false, true);
}

SHIM_EXPORT(cuMemcpyPeer_ptds)
{
    (void)dstContext;
    (void)srcContext;
    if (!involves_proxy(dstDevice, srcDevice))
        return SHIM_LOCAL(cuMemcpyPeer_ptds);
    return copy_peer(dstDevice, srcDevice, ByteCount, NULL, true, true);
}

SHIM_EXPORT(cuMemcpyPeerAsync)
{
    (void)dstContext;
    (void)srcContext;
    if (!involves_proxy(dstDevice, srcDevice))
        return SHIM_LOCAL(cuMemcpyPeerAsync);
    return copy_peer(dstDevice, srcDevice, ByteCount, hStream, false, false);
}

SHIM_EXPORT(cuMemcpyPeerAsync_ptsz)
{
    (void)dstContext;
    (void)srcContext;
    if (!involves_proxy(dstDevice, srcDevice))
        return SHIM_LOCAL(cuMemcpyPeerAsync_ptsz);
    return copy_peer(dstDevice, srcDevice, ByteCount, hStream, true, false);
}

/* ---- batches ---- */

/* cuMemcpyBatchAsync (CUDA 12.8): each copy as cuMemcpyAsync makes it, in
 * the batch's order, on the stream (CUDA promises no order within a batch,
 * so this one is allowed). Every source order is kept: a copy from the
 * program reads its bytes in the call, which "during the call" asks and the
 * others allow. *local: the batch touches no proxy, so the local driver
 * takes it whole. failIdx (the 12.8 form's): the copy that failed, SIZE_MAX
 * for a fault of the batch itself. */
static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail, CUstream h,
                           bool per_thread, bool *local)
{
    *local = false;
    if (fail)
        *fail = SIZE_MAX;
    if (!dsts || !srcs || !sizes || !attrs || !idxs || count == 0 || nattrs == 0 || nattrs > count)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++) {
        CUmemcpySrcAccessOrder o = attrs[k].srcAccessOrder;
        if ((k == 0 ? idxs[0] != 0 : idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            (o != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && o != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
             o != CU_MEMCPY_SRC_ACCESS_ORDER_ANY))
            return CUDA_ERROR_INVALID_VALUE;
    }
    bool proxies = false;
    for (size_t i = 0; i < count && !proxies; i++)
        proxies = involves_proxy(dsts[i], srcs[i]);
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    if (!proxies && k == 0) {
        *local = true;
        return CUDA_SUCCESS;
    }
    /* Not the legacy NULL stream, as CUDA says. */
    if (h == CU_STREAM_LEGACY || (!h && !per_thread))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (sizes[i] == 0)
            continue;
        rc = involves_proxy(dsts[i], srcs[i]) ? copy_unified(dsts[i], srcs[i], sizes[i], h, per_thread, false)
                                              : copy_host(dsts[i], srcs[i], sizes[i]);
        if (rc) {
            if (fail)
                *fail = i;
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

#define BATCH_EXPORT(sym, fail, per_thread)                                     \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        bool local;                                                             \
        CUresult rc_ = copy_batch(dsts, srcs, sizes, count, attrs, attrIdxs, numAttrs, fail, hStream, \
                                  per_thread, &local);                          \
        return local ? SHIM_LOCAL(sym) : rc_;                                   \
    }

BATCH_EXPORT(cuMemcpyBatchAsync, failIdx, false)
BATCH_EXPORT(cuMemcpyBatchAsync_ptsz, failIdx, true)
BATCH_EXPORT(cuMemcpyBatchAsync_v2, NULL, false)
BATCH_EXPORT(cuMemcpyBatchAsync_v2_ptsz, NULL, true)

/* ---- 2D copies ---- */

static CUresult copy2d_now(const CUDA_MEMCPY2D *c, CUstream h, bool per_thread, bool wait);

static uint64_t side_pointer(CUmemorytype type, const void *host, CUdeviceptr dev)
{
    return type == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)host : dev;
}

static bool copy2d_involves_proxy(const CUDA_MEMCPY2D *c)
{
    return c && (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY ||shim_device_of_pointer(side_pointer(c->srcMemoryType, c->srcHost, c->srcDevice)) >= 0 ||
                 shim_device_of_pointer(side_pointer(c->dstMemoryType, c->dstHost, c->dstDevice)) >= 0);
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream h, bool per_thread, bool wait)
{
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
        bool local;
        CUresult rc = shim_copy2d_array(c, h, per_thread, wait, &local);
        return local ? CUDA_ERROR_NOT_FOUND : rc;
    }
    CUDA_MEMCPY3D c3 = { .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
                         .srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcPitch = c->srcPitch,
                         .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
                         .dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstPitch = c->dstPitch,
                         .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = 1 };
    bool captured;
    CUresult crc = copy_capture(&c3, h, per_thread, wait, &captured);
    if (crc || captured)
        return crc;
    return copy2d_now(c, h, per_thread, wait);
}

static CUresult copy2d_now(const CUDA_MEMCPY2D *c, CUstream h, bool per_thread, bool wait)
{
    if (c->srcXInBytes || c->srcY || c->dstXInBytes || c->dstY) {
        /* Offsets fold into the pointers. */
        CUDA_MEMCPY2D k = *c;
        uint64_t so = c->srcY * c->srcPitch + c->srcXInBytes, dof = c->dstY * c->dstPitch + c->dstXInBytes;
        k.srcHost = c->srcHost ? (const uint8_t *)c->srcHost + so : NULL;
        k.srcDevice = c->srcDevice ? c->srcDevice + so : 0;
        k.dstHost = c->dstHost ? (uint8_t *)c->dstHost + dof : NULL;
        k.dstDevice = c->dstDevice ? c->dstDevice + dof : 0;
        k.srcXInBytes = k.srcY = k.dstXInBytes = k.dstY = 0;
        return copy2d_now(&k, h, per_thread, wait);
    }
    uint64_t src = side_pointer(c->srcMemoryType, c->srcHost, c->srcDevice);
    uint64_t dst = side_pointer(c->dstMemoryType, c->dstHost, c->dstDevice);
    size_t w = c->WidthInBytes, rows = c->Height;
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (w == 0 || rows == 0)
        return CUDA_SUCCESS;
    if ((c->srcPitch && c->srcPitch < w) || (c->dstPitch && c->dstPitch < w))
        return CUDA_ERROR_INVALID_VALUE;
    size_t spitch = c->srcPitch ? c->srcPitch : w, dpitch = c->dstPitch ? c->dstPitch : w;
    place pd = where(dst), ps = where(src);
    if (null_program_side(pd, dst, ps, src))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    proxy_obj *s;
    uint64_t dext = dpitch * (rows - 1) + w, sext = spitch * (rows - 1) + w;
    bool to_device = pd == PLACE_PROXY && ps == PLACE_HOST, to_program = pd == PLACE_HOST && ps == PLACE_PROXY;
    if (!to_device && !to_program && !(pd == PLACE_PROXY && ps == PLACE_PROXY))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!(s = stream_for(h, per_thread, pd == PLACE_PROXY ? dst : src, &rc)) ||
        (pd == PLACE_PROXY && (rc = shim_managed_before_access(s, dst, dext))) ||
        (ps == PLACE_PROXY && (rc = shim_managed_before_access(s, src, sext))))
        return rc;
    /* The rows are read now: earlier work writing them goes first. */
    if (to_device && (rc = link_wait_program_writes(s->link, s)))
        return rc;
    /* In bands of whole rows of COPY_PIECE_MAX at most, a row longer than
     * that in pieces of its own: each band its own record (the agent takes
     * a chunk at most), and the agent's copy of one band overlaps the
     * transfer of the next, as a flat copy's pieces do. */
    size_t band = w >= COPY_PIECE_MAX ? 1 : COPY_PIECE_MAX / w, piece_w = w > COPY_PIECE_MAX ? COPY_PIECE_MAX : w;
    /* Rows are packed here so the wire carries no gaps (a band of one row,
     * or of rows without gaps, goes from the program's memory itself). */
    uint8_t *packed = NULL;
    if (to_device && spitch != w && band > 1 && !(packed = malloc(band * w < w * rows ? band * w : w * rows)))
        return shim_nomem("%zu bytes of packed rows of a 2-D copy", band * w);
    uint64_t v = 0;
    for (size_t y = 0; y < rows && rc == CUDA_SUCCESS; y += band) {
        for (size_t x = 0; x < w && rc == CUDA_SUCCESS; x += piece_w) {
            size_t ph = rows - y < band ? rows - y : band, pw = w - x < piece_w ? w - x : piece_w;
            uint64_t sp = src + y * spitch + x, dp = dst + y * dpitch + x;
            uint8_t body[rec_copy_2d_size];
            wire_writer bw = wire_writer_init(body, sizeof body);
            handover ho = { .op = CUDA_OP_cuMemcpy2DAsync_v2, .stream = s, .body = body };
            if (to_device) {
                const uint8_t *rows_at = (const uint8_t *)(uintptr_t)sp;
                if (ph > 1 && spitch != pw) {
                    for (size_t r = 0; r < ph; r++)
                        memcpy(packed + r * pw, rows_at + r * spitch, pw);
                    rows_at = packed;
                }
                rec_copy_2d_put(&bw, &(rec_copy_2d){ .direction = REC_COPY_TO_DEVICE, .dst = dp, .dst_pitch = dpitch,
                                                     .src_pitch = pw, .width = pw, .height = ph });
                ho.data = rows_at;
                ho.data_len = pw * ph;
                ho.reads_program = true;
            } else if (to_program) {
                rec_copy_2d_put(&bw, &(rec_copy_2d){ .direction = REC_COPY_TO_PROGRAM, .dst_pitch = pw, .src = sp,
                                                     .src_pitch = spitch, .width = pw, .height = ph });
                ho.dst = (void *)(uintptr_t)dp;
                ho.dst_len = pw * ph;
                ho.dst_pitch = dpitch;
                ho.dst_width = pw;
            } else {
                rec_copy_2d_put(&bw, &(rec_copy_2d){ .direction = REC_COPY_DEVICE, .dst = dp, .dst_pitch = dpitch,
                                                     .src = sp, .src_pitch = spitch, .width = pw, .height = ph });
            }
            ho.body_len = bw.off;
            rc = link_handover(s->link, &ho, &v);
        }
    }
    free(packed);
    if (pd == PLACE_PROXY)
        shim_managed_written(dst, dext);
    if (rc == CUDA_SUCCESS && wait)
        rc = link_wait(s->link, s, v);
    return rc;
}

#define COPY2D_EXPORT(sym, stream, per_thread, wait)                            \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (!copy2d_involves_proxy(pCopy))                                      \
            return SHIM_LOCAL(sym);                                             \
        CUresult rc_ = copy2d(pCopy, stream, per_thread, wait);                 \
        /* an array copy of the local driver's */                               \
        return rc_ == CUDA_ERROR_NOT_FOUND ? SHIM_LOCAL(sym) : rc_;             \
    }

COPY2D_EXPORT(cuMemcpy2D_v2, NULL, false, true)
COPY2D_EXPORT(cuMemcpy2D_v2_ptds, NULL, true, true)
COPY2D_EXPORT(cuMemcpy2DUnaligned_v2, NULL, false, true)
COPY2D_EXPORT(cuMemcpy2DUnaligned_v2_ptds, NULL, true, true)
COPY2D_EXPORT(cuMemcpy2DAsync_v2, hStream, false, false)
COPY2D_EXPORT(cuMemcpy2DAsync_v2_ptsz, hStream, true, false)

/* ---- memsets ---- */

static CUresult memset_proxy(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem, size_t width,
                             size_t height, CUstream h, bool per_thread, bool sync)
{
    CUresult rc;
    proxy_obj *s = stream_for(h, per_thread, dst, &rc);
    if (!s)
        return rc;
    /* Capture: a synchronous fill is unsafe; an asynchronous one on a
     * capturing stream becomes a memset node. */
    if (sync && ((rc = capture_misuse(s)) || (rc = capture_unsafe())))
        return rc;
    bool captured;
    if ((rc = capture_check(s, &captured)))
        return rc;
    if (captured) {
        if (sync)
            return capture_misuse(s);
        if (width == 0 || height == 0)
            return CUDA_SUCCESS;
        shim_node t = { .type = CU_GRAPH_NODE_TYPE_MEMSET,
                        .u.set = { .dst = dst, .pitch = pitch ? pitch : width * elem, .value = value,
                                   .elementSize = elem, .width = width, .height = height } };
        return capture_add(s, &t);
    }
    if (width == 0 || height == 0)
        return CUDA_SUCCESS;
    uint64_t extent = (pitch ? pitch : width * elem) * (height - 1) + width * elem;
    if ((rc = shim_managed_before_access(s, dst, extent)))
        return rc;
    uint8_t body[rec_memset_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_memset_put(&w, &(rec_memset){ .dst = dst, .pitch = pitch ? pitch : width * elem, .value = value,
                                      .element_size = elem, .width = width, .height = height });
    handover ho = { .op = CUDA_OP_cuMemsetD2D32Async, .stream = s, .body = body, .body_len = w.off };
    rc = link_handover(s->link, &ho, NULL);
    shim_managed_written(dst, extent);
    return rc;
}

#define MEMSET_EXPORT(sym, value, elem, pitch, width, height, stream, per_thread, sync) \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        if (shim_device_of_pointer(dstDevice) < 0)                              \
            return SHIM_LOCAL(sym);                                             \
        return memset_proxy(dstDevice, pitch, value, elem, width, height, stream, per_thread, \
                            sync);                                              \
    }

MEMSET_EXPORT(cuMemsetD8_v2, uc, 1, 0, N, 1, NULL, false, true)
MEMSET_EXPORT(cuMemsetD8_v2_ptds, uc, 1, 0, N, 1, NULL, true, true)
MEMSET_EXPORT(cuMemsetD16_v2, us, 2, 0, N, 1, NULL, false, true)
MEMSET_EXPORT(cuMemsetD16_v2_ptds, us, 2, 0, N, 1, NULL, true, true)
MEMSET_EXPORT(cuMemsetD32_v2, ui, 4, 0, N, 1, NULL, false, true)
MEMSET_EXPORT(cuMemsetD32_v2_ptds, ui, 4, 0, N, 1, NULL, true, true)
MEMSET_EXPORT(cuMemsetD8Async, uc, 1, 0, N, 1, hStream, false, false)
MEMSET_EXPORT(cuMemsetD8Async_ptsz, uc, 1, 0, N, 1, hStream, true, false)
MEMSET_EXPORT(cuMemsetD16Async, us, 2, 0, N, 1, hStream, false, false)
MEMSET_EXPORT(cuMemsetD16Async_ptsz, us, 2, 0, N, 1, hStream, true, false)
MEMSET_EXPORT(cuMemsetD32Async, ui, 4, 0, N, 1, hStream, false, false)
MEMSET_EXPORT(cuMemsetD32Async_ptsz, ui, 4, 0, N, 1, hStream, true, false)
MEMSET_EXPORT(cuMemsetD2D8_v2, uc, 1, dstPitch, Width, Height, NULL, false, true)
MEMSET_EXPORT(cuMemsetD2D8_v2_ptds, uc, 1, dstPitch, Width, Height, NULL, true, true)
MEMSET_EXPORT(cuMemsetD2D16_v2, us, 2, dstPitch, Width, Height, NULL, false, true)
MEMSET_EXPORT(cuMemsetD2D16_v2_ptds, us, 2, dstPitch, Width, Height, NULL, true, true)
MEMSET_EXPORT(cuMemsetD2D32_v2, ui, 4, dstPitch, Width, Height, NULL, false, true)
MEMSET_EXPORT(cuMemsetD2D32_v2_ptds, ui, 4, dstPitch, Width, Height, NULL, true, true)
MEMSET_EXPORT(cuMemsetD2D8Async, uc, 1, dstPitch, Width, Height, hStream, false, false)
MEMSET_EXPORT(cuMemsetD2D8Async_ptsz, uc, 1, dstPitch, Width, Height, hStream, true, false)
MEMSET_EXPORT(cuMemsetD2D16Async, us, 2, dstPitch, Width, Height, hStream, false, false)
MEMSET_EXPORT(cuMemsetD2D16Async_ptsz, us, 2, dstPitch, Width, Height, hStream, true, false)
MEMSET_EXPORT(cuMemsetD2D32Async, ui, 4, dstPitch, Width, Height, hStream, false, false)
MEMSET_EXPORT(cuMemsetD2D32Async_ptsz, ui, 4, dstPitch, Width, Height, hStream, true, false)

/* ---- pointer attributes ---- */

static CUresult proxy_attribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    uint64_t base, size;
    int device;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (!shim_alloc_find(p, &base, &size, &device))
        return CUDA_ERROR_INVALID_VALUE;
    shim_device *d = shim_device_at(device);
    shim_managed_info m;
    if (shim_managed_find(p, &m)) {
        /* Managed memory is device memory the CPU reaches too; mapped host
         * memory is host memory at its device address. */
        switch (a) {
        case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = !m.host; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *(unsigned *)data = m.host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = (void *)(uintptr_t)p; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = m.size; return CUDA_SUCCESS;
        default: break;
        }
    }
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)d->primary; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = NULL; break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = base; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = device; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(CUmemoryPool *)data = NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* Zero of an attribute's own size: what the driver reports for memory it
 * does not know. */
static void zero_attribute(void *data, CUpointer_attribute a)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        memset(data, 0, 8);
        break;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        memset(data, 0, sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS));
        break;
    default:
        memset(data, 0, 4);
        break;
    }
}

/* Host memory allocated on a proxy context, or (with no local driver to
 * ask) any other host memory. */
static CUresult host_attribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    host_block *b = host_find((const void *)(uintptr_t)p, false);
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (!b)
        return CUDA_ERROR_INVALID_VALUE;   /* unregistered memory, as the driver says */
    proxy_obj *ctx = shim_proxy_current();
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = ctx ? (CUcontext)shim_device_at(ctx->device)->primary : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_HOST; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = (void *)(uintptr_t)p; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = ctx ? ctx->device : 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = (CUdeviceptr)(uintptr_t)b->p; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = b->size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuPointerGetAttribute)
{
    if (shim_device_of_pointer(ptr) >= 0)
        return proxy_attribute(data, attribute, ptr);
    if (host_find((const void *)(uintptr_t)ptr, false) || !shim_local_driver())
        return host_attribute(data, attribute, ptr);
    return SHIM_LOCAL(cuPointerGetAttribute);
}

SHIM_EXPORT(cuPointerGetAttributes)
{
    bool proxy = shim_device_of_pointer(ptr) >= 0;
    if (!proxy && shim_local_driver() && !host_find((const void *)(uintptr_t)ptr, false))
        return SHIM_LOCAL(cuPointerGetAttributes);
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++) {
        /* An attribute that cannot be given reads as zero, as the driver's
         * do: unregistered host memory is memory type 0. */
        if (data[i] && (proxy ? proxy_attribute(data[i], attributes[i], ptr)
                              : host_attribute(data[i], attributes[i], ptr)) != CUDA_SUCCESS)
            zero_attribute(data[i], attributes[i]);
    }
    return CUDA_SUCCESS;
}
