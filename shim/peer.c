/* Peer access between devices. Two devices of one agent are peers as its
 * driver says (softgpu's share the process's memory; a GPU host's as its
 * driver reports): the agent answers, and enables access on its driver.
 * Devices of different agents, or a proxy and a local device, are never
 * peers here (bytes between two agents' devices go on the rails,
 * shim/rail.c; between a proxy and a local device, through the program). Request layouts (proto/records.def; answers: u8 0, u32
 * CUresult, outputs):
 *   cuDeviceCanAccessPeer    u32 device, u32 peer            -> i32
 *   cuDeviceGetP2PAttribute  u32 attribute, u32 src, u32 dst -> i32
 *   cuCtxEnablePeerAccess    u32 device, u32 peer, u32 flags
 *   cuCtxDisablePeerAccess   u32 device, u32 peer
 * with the agent's own device ordinals. */
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/proxy.h"

/* Devices a and b, checking initialisation; false sets *rc. */
static bool two_devices(CUdevice a, CUdevice b, shim_device **da, shim_device **db, CUresult *rc)
{
    if (!shim_initialized()) {
        *rc = CUDA_ERROR_NOT_INITIALIZED;
        return false;
    }
    *da = shim_device_at(a);
    *db = shim_device_at(b);
    *rc = *da && *db ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    return *rc == CUDA_SUCCESS;
}

static bool same_agent(const shim_device *a, const shim_device *b)
{
    return a->proxy && b->proxy && a->link == b->link;
}

/* Sends op with its fields (written through proto/records.h) to d's agent;
 * the answer's i32 goes to *out when out is given (it must then be there). */
static CUresult peer_request(shim_device *d, uint32_t op, const wire_writer *fields, int *out)
{
    uint8_t head[4];
    wire_store_u32(head, op);
    struct iovec iov[2] = { { head, sizeof head }, { fields->p, fields->off } };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(d->link, iov, 2, &f, &o, &n);
    if (rc == CUDA_SUCCESS && out && n == 4)
        *out = (int)wire_load_u32(o);
    else if (rc == CUDA_SUCCESS && n != (out ? 4u : 0u))
        rc = link_malformed(d->link, "an answer to %s of %zu bytes", cuda_op_by_number(op)->symbol, n);
    frame_release(&f);
    return rc;
}

SHIM_EXPORT(cuDeviceCanAccessPeer)
{
    CUresult rc;
    shim_device *a, *b;
    if (!two_devices(dev, peerDev, &a, &b, &rc))
        return rc;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a->proxy && !b->proxy)
        return SHIM_LOCAL(cuDeviceCanAccessPeer);
    if (!same_agent(a, b)) {
        *canAccessPeer = 0;
        return CUDA_SUCCESS;
    }
    uint8_t body[rec_peer_pair_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_peer_pair_put(&w, &(rec_peer_pair){ .device = (uint32_t)a->remote_ordinal, .peer = (uint32_t)b->remote_ordinal });
    int v = 0;
    rc = peer_request(a, CUDA_OP_cuDeviceCanAccessPeer, &w, &v);
    if (rc == CUDA_SUCCESS)
        *canAccessPeer = v != 0;
    return rc;
}

SHIM_EXPORT(cuDeviceGetP2PAttribute)
{
    CUresult rc;
    shim_device *a, *b;
    if (!two_devices(srcDevice, dstDevice, &a, &b, &rc))
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a->proxy && !b->proxy)
        return SHIM_LOCAL(cuDeviceGetP2PAttribute);
    if (!same_agent(a, b)) {
        /* Not peers: every capability of the link is absent. */
        if (srcDevice == dstDevice)
            return CUDA_ERROR_INVALID_DEVICE;
        if ((int)attrib < CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ||
            (int)attrib > CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED)
            return CUDA_ERROR_INVALID_VALUE;
        *value = 0;
        return CUDA_SUCCESS;
    }
    uint8_t body[rec_p2p_attribute_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_p2p_attribute_put(&w, &(rec_p2p_attribute){ .attribute = (uint32_t)attrib, .src = (uint32_t)a->remote_ordinal,
                                                    .dst = (uint32_t)b->remote_ordinal });
    int v = 0;
    rc = peer_request(a, CUDA_OP_cuDeviceGetP2PAttribute, &w, &v);
    if (rc == CUDA_SUCCESS)
        *value = v;
    return rc;
}

/* Each operation's capability bits over the link from a to b as the
 * agent's driver reports them.
 *   cuDeviceGetP2PAtomicCapabilities  u32 src, u32 dst, u32 count, count x u32 operation
 *                                     -> count x u32 capabilities */
static CUresult atomic_request(shim_device *a, shim_device *b, const CUatomicOperation *ops, unsigned count,
                               unsigned *caps)
{
    uint8_t head[4 + rec_atomic_caps_size];
    wire_writer w = wire_writer_init(head, sizeof head);
    wire_put_u32(&w, CUDA_OP_cuDeviceGetP2PAtomicCapabilities);
    rec_atomic_caps_put(&w, &(rec_atomic_caps){ .src = (uint32_t)a->remote_ordinal, .dst = (uint32_t)b->remote_ordinal,
                                                .count = count });
    uint32_t wire_ops[REC_ATOMIC_OPS_MAX];
    for (unsigned i = 0; i < count; i++)
        wire_store_u32((uint8_t *)&wire_ops[i], (uint32_t)ops[i]);
    struct iovec iov[2] = { { head, w.off }, { wire_ops, count * 4 } };
    frame f;
    const uint8_t *o;
    size_t n;
    CUresult rc = link_request(a->link, iov, 2, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n != count * 4)
        rc = link_malformed(a->link, "an answer of %zu bytes to an atomic capability request for %u operations", n,
                            count);
    for (unsigned i = 0; rc == CUDA_SUCCESS && i < count; i++)
        caps[i] = wire_load_u32(o + 4 * i);
    frame_release(&f);
    return rc;
}

static CUresult atomic_args(unsigned *caps, const CUatomicOperation *ops, unsigned count)
{
    /* Asking one operation several times is allowed; more than that is not. */
    if (!caps || !ops || count == 0 || count > CU_ATOMIC_OPERATION_MAX * 4)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++)
        if ((unsigned)ops[i] >= CU_ATOMIC_OPERATION_MAX)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SHIM_EXPORT(cuDeviceGetP2PAtomicCapabilities)
{
    CUresult rc;
    shim_device *a, *b;
    if (!two_devices(srcDevice, dstDevice, &a, &b, &rc))
        return rc;
    if (!a->proxy && !b->proxy)
        return SHIM_LOCAL(cuDeviceGetP2PAtomicCapabilities);
    if (srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    if ((rc = atomic_args(capabilities, operations, count)))
        return rc;
    if (!same_agent(a, b)) {
        memset(capabilities, 0, count * sizeof *capabilities);   /* no link between them at all */
        return CUDA_SUCCESS;
    }
    return atomic_request(a, b, operations, count, capabilities);
}

/* The program's host and a proxy device share no memory, so no atomic
 * reaches across that link natively. */
SHIM_EXPORT(cuDeviceGetHostAtomicCapabilities)
{
    CUresult rc;
    shim_device *a, *b;
    if (!two_devices(dev, dev, &a, &b, &rc))
        return rc;
    if (!a->proxy)
        return SHIM_LOCAL(cuDeviceGetHostAtomicCapabilities);
    if ((rc = atomic_args(capabilities, operations, count)))
        return rc;
    memset(capabilities, 0, count * sizeof *capabilities);
    return CUDA_SUCCESS;
}

/* The proxy contexts of a peer call: the current one and peerContext's;
 * 0 when both are the local driver's (the caller passes it on), else a
 * CUDA error or -1 when both are proxies of one agent. */
static int peer_contexts(CUcontext peerContext, proxy_obj **cur, proxy_obj **peer, CUresult unsupported)
{
    *cur = shim_proxy_current();
    *peer = arena_get(peerContext, PROXY_CONTEXT);
    if (!*cur && !*peer && !shim_is_proxy_handle(peerContext))
        return 0;
    if (!*peer)
        return (int)(!peerContext || shim_is_proxy_handle(peerContext) || !shim_local_driver()
                         ? CUDA_ERROR_INVALID_CONTEXT : unsupported);
    if (!*cur)
        return (int)(shim_local_driver() ? unsupported : CUDA_ERROR_INVALID_CONTEXT);
    return same_agent(shim_device_at((*cur)->device), shim_device_at((*peer)->device)) ? -1 : (int)unsupported;
}

SHIM_EXPORT(cuCtxEnablePeerAccess)
{
    proxy_obj *cur, *peer;
    int k = peer_contexts(peerContext, &cur, &peer, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    if (k == 0)
        return SHIM_LOCAL(cuCtxEnablePeerAccess);
    if (k > 0)
        return (CUresult)k;
    shim_device *a = shim_device_at(cur->device), *b = shim_device_at(peer->device);
    uint8_t body[rec_peer_enable_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_peer_enable_put(&w, &(rec_peer_enable){ .device = (uint32_t)a->remote_ordinal, .peer = (uint32_t)b->remote_ordinal,
                                                .flags = Flags });
    return peer_request(a, CUDA_OP_cuCtxEnablePeerAccess, &w, NULL);
}

SHIM_EXPORT(cuCtxDisablePeerAccess)
{
    proxy_obj *cur, *peer;
    int k = peer_contexts(peerContext, &cur, &peer, CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    if (k == 0)
        return SHIM_LOCAL(cuCtxDisablePeerAccess);
    if (k > 0)
        return (CUresult)k;
    shim_device *a = shim_device_at(cur->device), *b = shim_device_at(peer->device);
    uint8_t body[rec_peer_pair_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_peer_pair_put(&w, &(rec_peer_pair){ .device = (uint32_t)a->remote_ordinal, .peer = (uint32_t)b->remote_ordinal });
    return peer_request(a, CUDA_OP_cuCtxDisablePeerAccess, &w, NULL);
}
