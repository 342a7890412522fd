/* Peer copies and event waits between devices of two agents, on the rails
 * between those agents (proto/rail.h, docs/design.md "Peer copies"): each
 * agent gets its half of the work as handover records, with no round
 * trip, and the bytes go from one agent to the other without crossing this
 * process. Signals order the halves: the side on the program's stream
 * follows that stream, the other side runs on the agent's own rail stream
 * and is told when to start (a copy on the destination's stream), or tells
 * the program's stream when the bytes landed (a copy on the source's). */
#include <stdlib.h>
#include <string.h>

#include "proto/job.h"
#include "proto/mesh.h"
#include "proto/rail.h"
#include "shim/core.h"
#include "shim/link.h"
#include "shim/local_driver.h"
#include "shim/rail.h"
#include "shim/streams.h"

/* Signal numbers, per ordered pair of agents (from, to), from 1. */
static uint64_t next_number[MESH_AGENTS_MAX + 1][MESH_AGENTS_MAX + 1];

static uint64_t signal_number(agent_link *from, agent_link *to)
{
    return __atomic_add_fetch(&next_number[from->index][to->index], 1, __ATOMIC_RELAXED);
}

bool shim_rail_usable(agent_link *a, agent_link *b)
{
    static int staged = -1;
    if (staged < 0) {
        const char *v = getenv("RIG_PEER_COPY");
        staged = v && strcmp(v, "staged") == 0;
    }
    return !staged && a != b && a->index >= 1 && a->index <= MESH_AGENTS_MAX && b->index >= 1 &&
           b->index <= MESH_AGENTS_MAX;
}

/* Hands one rail record to l, on stream s (NULL: the agent's own). */
static CUresult hand(agent_link *l, proxy_obj *s, const rail_record *r, uint64_t *value)
{
    uint8_t body[48];
    handover h = { .op = rail_job_op(r->op), .stream = s, .body = body, .body_len = rail_encode(r, body) };
    return link_handover(l, &h, value);
}

/* Orders a copy whose stream is on neither agent after that stream's work,
 * from here: what it waits for cannot be enqueued on either agent. */
static CUresult wait_foreign(proxy_obj *s, int k, CUstream h)
{
    if (k > 0)
        return link_wait(s->link, s, __atomic_load_n(&s->u.stream.tl.submitted, __ATOMIC_ACQUIRE));
    const shim_driver *drv = shim_local_driver();
    return drv && drv->fn_cuStreamSynchronize ? drv->fn_cuStreamSynchronize(h) : CUDA_SUCCESS;
}

CUresult shim_rail_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool per_thread, bool wait)
{
    shim_device *dd = shim_device_at(shim_device_of_pointer(dst));
    shim_device *sd = shim_device_at(shim_device_of_pointer(src));
    agent_link *to = dd->link, *from = sd->link;
    proxy_obj *s;
    CUresult rc;
    int k = shim_stream(h, per_thread, &s, &rc);
    if (k < 0)
        return rc;
    bool on_src = k > 0 && s->link == from, on_dst = k > 0 && s->link == to;
    if (!on_src && !on_dst) {
        if ((rc = wait_foreign(s, k, h)))
            return rc;
        int dev = shim_device_of_pointer(dst);
        if (!(s = per_thread ? shim_per_thread_stream(dev, &rc) : dd->null_stream))
            return rc;
        on_dst = wait = true;
    }
    proxy_obj *src_side = on_src ? s : sd->null_stream, *dst_side = on_dst ? s : dd->null_stream;
    if ((rc = shim_managed_before_access(src_side, src, n)) || (rc = shim_managed_before_access(dst_side, dst, n)))
        return rc;
    uint64_t v = 0;
    /* Chunk i + RAIL_WINDOW is sent once chunk i landed (its *credit*), so
     * the sending agent holds at most RAIL_WINDOW chunks of a copy however
     * much faster its device is than the link. */
    uint64_t credit[RAIL_WINDOW] = { 0 };
    size_t chunks = (n + RAIL_CHUNK - 1) / RAIL_CHUNK;
    uint64_t go = 0, landed = 0;
    if (on_dst) {
        /* The source waits until the program's stream gets here. */
        rail_record start = { .op = RAIL_SIGNAL, .peer = from->index, .signal = signal_number(to, from) };
        go = start.signal;
        rc = hand(to, s, &start, NULL);
    } else {
        /* The program's stream goes on once the last chunk landed. */
        landed = signal_number(to, from);
    }
    for (size_t i = 0; i < chunks && rc == CUDA_SUCCESS; i++) {
        size_t off = i * RAIL_CHUNK, len = n - off < RAIL_CHUNK ? n - off : RAIL_CHUNK;
        uint64_t chunk = signal_number(from, to);
        uint64_t after = i == 0 ? go : i >= RAIL_WINDOW ? credit[i % RAIL_WINDOW] : 0;
        uint64_t then = i + 1 == chunks ? landed : i + RAIL_WINDOW < chunks ? signal_number(to, from) : 0;
        credit[i % RAIL_WINDOW] = then;
        rail_record out = { .op = RAIL_SEND, .peer = to->index, .device = (uint32_t)sd->remote_ordinal,
                            .addr = src + off, .len = len, .signal = chunk, .extra = after };
        rail_record in = { .op = RAIL_RECV, .peer = from->index, .device = (uint32_t)dd->remote_ordinal,
                           .addr = dst + off, .len = len, .signal = chunk, .extra = then };
        if ((rc = hand(from, on_src ? s : NULL, &out, NULL)) == CUDA_SUCCESS)
            rc = hand(to, on_dst ? s : NULL, &in, on_dst ? &v : NULL);
    }
    if (on_src && rc == CUDA_SUCCESS) {
        rail_record back = { .op = RAIL_WAIT, .peer = to->index, .signal = landed };
        rc = hand(from, s, &back, &v);
    }
    /* Neither half may sit in a batch while the other waits for it. */
    if (rc == CUDA_SUCCESS && (rc = link_flush(from)) == CUDA_SUCCESS)
        rc = link_flush(to);
    shim_managed_written(dst, n);
    if (rc == CUDA_SUCCESS && wait)
        rc = link_wait(s->link, s, v);
    return rc;
}

CUresult shim_rail_wait_event(proxy_obj *s, proxy_obj *e)
{
    if (!e->u.event.recorded)
        return link_status(e->link);
    agent_link *from = e->link, *to = s->link;
    rail_record done = { .op = RAIL_SIGNAL, .peer = to->index, .signal = signal_number(from, to), .extra = e->id };
    rail_record hold = { .op = RAIL_WAIT, .peer = from->index, .signal = done.signal };
    CUresult rc = hand(from, NULL, &done, NULL);
    if (rc == CUDA_SUCCESS)
        rc = link_flush(from);
    return rc ? rc : hand(to, s, &hold, NULL);
}
