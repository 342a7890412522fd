/* Stream attributes (access policy window, synchronization policy,
 * priority, memory sync domains) on proxy streams: the agent's stream holds
 * them and its driver checks them, so each call is a request. The access
 * policy window's base is a device pointer, the same on both ends (the
 * job's window). Request layouts (proto/records.def; answers: u8 0, u32
 * CUresult, outputs):
 *   cuStreamGetAttribute    u64 stream, u32 attribute          -> 64-byte value
 *   cuStreamSetAttribute    u64 stream, u32 attribute, 64-byte value
 *   cuStreamCopyAttributes  u64 destination, u64 source */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/proxy.h"
#include "shim/streams.h"

_Static_assert(sizeof(CUstreamAttrValue) == 64, "the wire carries a 64-byte attribute value");

static CUresult attr_request(proxy_obj *s, const uint8_t *body, size_t len, void *out)
{
    struct iovec iov = { (void *)body, len };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(s->link, &iov, 1, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n != (out ? sizeof(CUstreamAttrValue) : 0))
        rc = link_malformed(s->link, "an answer to a stream attribute request of %zu bytes", n);
    else if (rc == CUDA_SUCCESS && out)
        memcpy(out, o, n);
    frame_release(&f);
    return rc;
}

static CUresult get_attribute(proxy_obj *s, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    if (!value_out)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[4 + rec_stream_attr_get_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuStreamGetAttribute);
    rec_stream_attr_get_put(&w, &(rec_stream_attr_get){ .stream = s->id, .attribute = (uint32_t)attr });
    return attr_request(s, body, w.off, value_out);
}

static CUresult set_attribute(proxy_obj *s, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    uint8_t body[4 + rec_stream_attr_set_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuStreamSetAttribute);
    rec_stream_attr_set v = { .stream = s->id, .attribute = (uint32_t)attr };
    memcpy(v.value, value, sizeof v.value);
    rec_stream_attr_set_put(&w, &v);
    return attr_request(s, body, w.off, NULL);
}

#define GET_EXPORT(sym, per_thread, value)                                             \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return get_attribute(s, attr, value);                               \
    }

#define SET_EXPORT(sym, per_thread, value)                                             \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(hStream, per_thread, &s, &rc);                      \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return set_attribute(s, attr, value);                                   \
    }

GET_EXPORT(cuStreamGetAttribute, false, value)
GET_EXPORT(cuStreamGetAttribute_ptsz, true, value_out)
SET_EXPORT(cuStreamSetAttribute, false, param)
SET_EXPORT(cuStreamSetAttribute_ptsz, true, value)

/* Both proxy streams of one agent: the agent copies; both local: the local
 * driver; one of each: no driver holds both. */
static CUresult copy_attributes(CUstream dst, CUstream src, bool per_thread, bool *local)
{
    proxy_obj *d, *s;
    CUresult rc;
    *local = false;
    int kd = shim_stream(dst, per_thread, &d, &rc);
    if (kd < 0)
        return rc;
    int ks = shim_stream(src, per_thread, &s, &rc);
    if (ks < 0)
        return rc;
    if (kd == 0 && ks == 0) {
        *local = true;
        return CUDA_SUCCESS;
    }
    if (kd == 0 || ks == 0 || d->link != s->link)
        return CUDA_ERROR_INVALID_HANDLE;
    uint8_t body[4 + rec_stream_attr_copy_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, CUDA_OP_cuStreamCopyAttributes);
    rec_stream_attr_copy_put(&w, &(rec_stream_attr_copy){ .dst = d->id, .src = s->id });
    return attr_request(d, body, w.off, NULL);
}

SHIM_EXPORT(cuStreamCopyAttributes)
{
    bool local;
    CUresult rc = copy_attributes(dstStream, srcStream, false, &local);
    return local ? SHIM_LOCAL(cuStreamCopyAttributes) : rc;
}

SHIM_EXPORT(cuStreamCopyAttributes_ptsz)
{
    bool local;
    CUresult rc = copy_attributes(dst, src, true, &local);
    return local ? SHIM_LOCAL(cuStreamCopyAttributes_ptsz) : rc;
}
