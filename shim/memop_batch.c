/* cuStreamBatchMemOp on proxy streams: the operations (waits and writes
 * on device words, flushes, barriers) are plain data whose addresses are
 * device pointers, the same on both ends, so the batch travels as it is,
 * 48 bytes an operation, and the agent's driver queues it on its stream;
 * the call then takes a place on the stream's timeline like any work. In
 * a capture the batch becomes a batch memory-op node (graph.c).
 *   request  u64 stream, u32 flags, u32 count, count x 48 bytes
 *            (proto/records.def's memop_batch) */
#include <stdlib.h>
#include <string.h>

#include "proto/cuda_ops.h"
#include "proto/job.h"
#include "proto/records.h"
#include "proto/wire.h"
#include "shim/core.h"
#include "shim/graph.h"
#include "shim/link.h"
#include "shim/proxy.h"
#include "shim/streams.h"

/* cuda.h maps these names onto their newest versions; here each names its
 * own symbol. */
#undef cuStreamBatchMemOp
#undef cuStreamBatchMemOp_ptsz


static CUresult batch(proxy_obj *s, unsigned count, const CUstreamBatchMemOpParams *ops, unsigned flags)
{
    if ((count && !ops) || count > JOB_BATCH_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    bool captured;
    CUresult rc = capture_check(s, &captured);
    if (rc)
        return rc;
    if (captured) {
        /* A batch memory-op node of the capture. */
        shim_node t;
        if ((rc = node_from_batch(&t, s->device, ops, count, flags)))
            return rc;
        rc = capture_add(s, &t);
        node_free_params(&t);
        return rc;
    }
    /* The operations go straight from the program's array, after the fields. */
    uint8_t head[4 + rec_memop_batch_size];
    wire_writer w = wire_writer_init(head, sizeof head);
    wire_put_u32(&w, CUDA_OP_cuStreamBatchMemOp_v2);
    rec_memop_batch_put(&w, &(rec_memop_batch){ .stream = s->id, .flags = flags, .count = count });
    struct iovec iov[2] = { { head, w.off }, { (void *)ops, count * sizeof *ops } };
    frame f;
    const uint8_t *o;
    size_t n;
    rc = link_request(s->link, iov, 2, &f, &o, &n);
    if (rc == CUDA_SUCCESS && n)
        rc = link_malformed(s->link, "an answer to a memory operation batch with %zu bytes of outputs", n);
    frame_release(&f);
    if (rc == CUDA_SUCCESS) {
        handover mark = { .op = JOB_OP_MARK, .stream = s };
        rc = link_handover(s->link, &mark, NULL);
    }
    return rc;
}

#define BATCH_EXPORT(sym, per_thread)                                           \
    SHIM_EXPORT(sym)                                                            \
    {                                                                           \
        proxy_obj *s;                                                           \
        CUresult rc;                                                            \
        int k = shim_stream(stream, per_thread, &s, &rc);                       \
        if (k <= 0)                                                             \
            return k < 0 ? rc : SHIM_LOCAL(sym);                                \
        return batch(s, count, paramArray, flags);                              \
    }

BATCH_EXPORT(cuStreamBatchMemOp, false)
BATCH_EXPORT(cuStreamBatchMemOp_ptsz, true)
BATCH_EXPORT(cuStreamBatchMemOp_v2, false)
BATCH_EXPORT(cuStreamBatchMemOp_v2_ptsz, true)
