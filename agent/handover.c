/* Handovers and drops: records enqueued on the job's real streams in the
 * order sent, with a marker behind them so the program learns the values
 * its streams reach; objects the program is done with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/job.h"
#include "proto/compress.h"
#include "proto/copy.h"
#include "proto/cuda_ops.h"
#include "proto/deadline.h"
#include "proto/job.h"
#include "proto/records.h"

CUstream job_real_stream(agent_obj *s)
{
    return s->u.stream.null ? NULL : s->u.stream.real;
}

/* ---- host-to-device data straight into staging ---- */

/* A JOB_FRAME_STAGED frame's payload: the record's header and its head
 * (u64 dst and the chunk header; the body length rewritten to that head),
 * then where the data went. */
#define STAGED_HEAD (rec_record_head_size + COPY_HTOD_HEAD)
typedef struct staged {
    void *data;           /* a staging buffer holding the original bytes; NULL once replayed */
    size_t len;           /* the original bytes */
    size_t wire;          /* the bytes the record carried after its head (stored) */
    bool in_place;        /* the bytes are in the device memory already; false once replayed */
} staged;

uint8_t *job_buffer(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return *buf;
    uint8_t *p = realloc(*buf, need);
    if (!p)
        return NULL;
    /* Its new pages touched now, not in a compression's timing (a fresh
     * page can cost tens of microseconds in a VM). */
    memset(p + *cap, 0, need - *cap);
    *buf = p;
    *cap = need;
    return p;
}

/* Reads a compressed chunk's stored bytes into the job's buffer and decodes
 * them into data (h->original bytes). */
static int inflate_into(job *j, const copy_htod_head *c, void *data, rig_why *why)
{
    uint8_t *in = job_buffer(&j->packed_in, &j->packed_in_cap, c->chunk.stored);
    if (!in) {
        /* Read on and drop, so the connection stays in step for the abort. */
        for (uint64_t left = c->chunk.stored; left;) {
            uint8_t sink[4096];
            size_t n = left < sizeof sink ? (size_t)left : sizeof sink;
            int rc = conn_recv_rest(&j->c, sink, n, deadline_after(-1), JOB_SILENCE_MS, why);
            if (rc < 0)
                return rc;
            left -= n;
        }
        return why_set(why, RIG_E_NOMEM, "no memory for a compressed chunk of %u bytes", c->chunk.stored);
    }
    int rc = conn_recv_rest(&j->c, in, c->chunk.stored, deadline_after(-1), JOB_SILENCE_MS, why);
    if (rc < 0)
        return rc;
    rig_why bad = { "" };
    if (compress_body_decode(&c->chunk, in, data, c->chunk.original, &bad) < 0)
        return why_set(why, RIG_E_MALFORMED, "cuMemcpyHtoDAsync_v2 to %#llx: %s", (unsigned long long)c->dst,
                       bad.text);
    return 0;
}

/* Handover frames above CONN_READ_BUF bytes (payloads that large are read
 * straight into their buffer anyway) come in two steps: their first record's
 * header and head, then the rest. The data of a lone host-to-device copy
 * goes into a page-locked staging buffer, which the device copies from
 * asynchronously, with no copy through pageable memory on the way (the
 * driver would otherwise stage it itself). A compressed chunk read in
 * order onto an idle stream is decoded into the device memory itself; any
 * other is read whole and decoded when replayed (replay_record). */
int handover_recv(job *j, frame *f, int64_t deadline, int idle_ms, bool in_order, rig_why *why)
{
    int rc = conn_recv_split(&j->c, f, FRAME_HANDOVER, STAGED_HEAD, CONN_READ_BUF, deadline, idle_ms, why);
    uint64_t rest = conn_rest(&j->c);
    if (rc < 0 || !rest)
        return rc;
    wire_reader r = wire_reader_init(f->payload, f->len);
    rec_record_head h;
    void *data = NULL;
    bool in_place = false;
    copy_htod_head c;
    rig_why bad = { "" };
    agent_obj *s;
    /* Only a copy with a place on a timeline: its marker gives the buffer
     * back. A malformed head is read whole, for the replay to name. */
    bool htod = rec_record_head_get(&r, &h, &bad) == 0 && h.op == CUDA_OP_cuMemcpyHtoDAsync_v2 && h.value &&
                h.length == COPY_HTOD_HEAD + rest &&
                copy_htod_read(f->payload + rec_record_head_size, COPY_HTOD_HEAD, h.length, &c, &bad) == 0;
    if (htod && in_order && (s = objects_get(&j->objs, h.stream, AOBJ_STREAM)) && job_stream_idle(j, s) &&
        (data = job_device_bytes(j, s->device, c.dst, c.chunk.original))) {
        /* Everything before it is done and nothing after it replays until
         * it is in: the bytes may land in the device memory itself. */
        in_place = true;
    } else if (htod && c.chunk.method == COMPRESS_RAW) {
        /* The pool's buffers are allocated in the first device's context
         * (a staging_get that finds none allocates here). */
        static __thread bool has_context;
        if (!has_context)
            has_context = j->b->drv.fn_cuCtxSetCurrent(j->b->primary[0]) == CUDA_SUCCESS;
        if (!has_context || staging_get(j->b, c.chunk.original, &data) != CUDA_SUCCESS)
            data = NULL;
    }
    size_t original = data ? c.chunk.original : 0;
    uint8_t *p = realloc(f->payload, data ? STAGED_HEAD + sizeof(staged) : f->len + rest);
    if (!p) {
        if (data && !in_place)
            staging_put(j->b, data, original);
        uint64_t whole = f->len + rest;
        frame_release(f);
        return why_set(why, RIG_E_NOMEM, "no memory for a handover frame of %llu bytes", (unsigned long long)whole);
    }
    f->payload = p;
    /* Once begun, the frame is read to its end: only silence stops it. */
    if (data && c.chunk.method != COMPRESS_RAW)
        rc = inflate_into(j, &c, data, why);
    else
        rc = conn_recv_rest(&j->c, data ? data : p + f->len, rest, deadline_after(-1), JOB_SILENCE_MS, why);
    if (rc < 0) {
        if (data && !in_place)
            staging_put(j->b, data, original);
        frame_release(f);
        return rc;
    }
    if (!data) {
        f->len += rest;   /* whole, as conn_recv gives it */
        return 0;
    }
    /* The record's length now its head's alone: the data is elsewhere. */
    h.length = COPY_HTOD_HEAD;
    wire_writer hw = wire_writer_init(p, rec_record_head_size);
    rec_record_head_put(&hw, &h);
    staged st = { in_place ? NULL : data, original, rest, in_place };
    memcpy(p + STAGED_HEAD, &st, sizeof st);
    f->len = STAGED_HEAD + sizeof st;
    f->kind = JOB_FRAME_STAGED;
    return 0;
}

void handover_frame_release(job *j, frame *f)
{
    if (f->kind == JOB_FRAME_STAGED && f->payload) {
        staged st;
        memcpy(&st, f->payload + STAGED_HEAD, sizeof st);
        if (st.data)
            staging_put(j->b, st.data, st.len);
    }
    frame_release(f);
}

/* A body that breaks its layout (proto/records.def) fails the job, naming
 * the field; the CUresult only stops the replay. */
static CUresult malformed(job *j, const rig_why *why)
{
    job_fail(j, "controller: malformed %s", why->text);
    return CUDA_ERROR_INVALID_VALUE;
}

/* Replays one record; returns the staging buffer of a copy into the
 * program through *staging, and whether a copy's piece is quiet
 * (COPY_QUIET: no word for it). */
static CUresult replay_record(job *j, uint32_t op, agent_obj *s, uint64_t object, wire_reader *r, staged *st,
                              void **staging, size_t *staging_len, bool *in_place, bool *quiet)
{
    const cuda_driver *d = &j->b->drv;
    CUstream rs = s ? job_real_stream(s) : NULL;
    CUresult rc;
    rig_why why;
    if (s && (rc = job_use_device(j, s->device)))
        return rc;
    switch (op) {
    case JOB_OP_STREAM_CREATE: {
        rec_stream_create v;
        if (rec_stream_create_get(r, &v, &why))
            return malformed(j, &why);
        agent_obj *o = objects_put(&j->objs, object, AOBJ_STREAM, (int)v.device);
        if (!o && errno == ENOMEM) {
            job_log_nomem(j, "the record of stream %llu", (unsigned long long)object);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = job_use_device(j, (int)v.device)))
            return rc;
        if (v.flags & JOB_STREAM_NULL) {
            o->u.stream.null = true;
            return CUDA_SUCCESS;
        }
        return d->fn_cuStreamCreateWithPriority(&o->u.stream.real, v.flags, v.priority);
    }
    case JOB_OP_EVENT_CREATE: {
        rec_event_create v;
        if (rec_event_create_get(r, &v, &why))
            return malformed(j, &why);
        agent_obj *o = objects_put(&j->objs, object, AOBJ_EVENT, (int)v.device);
        if (!o && errno == ENOMEM) {
            job_log_nomem(j, "the record of event %llu", (unsigned long long)object);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = job_use_device(j, (int)v.device)))
            return rc;
        return d->fn_cuEventCreate(&o->u.event.real, v.flags);
    }
    case JOB_OP_MARK: {
        rec_mark v;
        return rec_mark_get(r, &v, &why) ? malformed(j, &why) : CUDA_SUCCESS;
    }
    case JOB_OP_GRAPH_LAUNCH: {
        rec_graph_launch v;
        if (rec_graph_launch_get(r, &v, &why))
            return malformed(j, &why);
        return s ? graph_launch(j, s, v.graph) : CUDA_ERROR_INVALID_VALUE;
    }
    case JOB_OP_RAIL_SEND:
    case JOB_OP_RAIL_RECV:
    case JOB_OP_SIGNAL:
    case JOB_OP_WAIT: {
        size_t n = wire_remaining(r);
        return rail_replay(j, op, s, wire_get_view(r, n), n);
    }
    case CUDA_OP_cuMemFreeAsync: {
        rec_free_async v;
        if (rec_free_async_get(r, &v, &why))
            return malformed(j, &why);
        uint64_t base = v.pointer;
        if (!s)
            return CUDA_ERROR_INVALID_VALUE;
        bool found;
        rc = pool_free_async(j, s, object, base, &found);
        if (found || rc)
            return rc;
        /* cuMemAlloc'd memory freed on a stream: once the device is done
         * (which may make another device's context current). */
        rc = window_free(&j->win, j->b, base);
        j->current = -1;
        return rc;
    }
    case CUDA_OP_cuMemcpyHtoDAsync_v2: {
        size_t have = wire_remaining(r);
        const uint8_t *body = wire_get_view(r, have);
        copy_htod_head c;
        rig_why why = { "" };
        if (copy_htod_read(body, have, st ? COPY_HTOD_HEAD + st->wire : have, &c, &why) < 0) {
            job_fail(j, "controller: %s", why.text);
            return CUDA_ERROR_INVALID_VALUE;
        }
        *quiet = c.quiet;
        if (st && st->in_place) {
            /* Landed in place: nothing left to copy. */
            st->in_place = false;
            return c.data_len != 0 || c.chunk.original != st->len ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        }
        if (st) {
            /* Staged (and decoded): the marker behind it gives the buffer back. */
            if (c.data_len != 0 || c.chunk.original != st->len)
                return CUDA_ERROR_INVALID_VALUE;
            *staging = st->data;
            *staging_len = st->len;
            st->data = NULL;
            return d->fn_cuMemcpyHtoDAsync_v2(c.dst, *staging, *staging_len, rs);
        }
        if (c.chunk.method == COMPRESS_RAW)
            return d->fn_cuMemcpyHtoDAsync_v2(c.dst, c.data, c.data_len, rs);
        if (!s)
            return CUDA_ERROR_INVALID_VALUE;
        /* On an idle stream decoded into the device memory itself, sparing
         * a pass through staging; else into a staging buffer, which the
         * marker gives back. */
        void *at = job_stream_idle(j, s) ? job_device_bytes(j, s->device, c.dst, c.chunk.original) : NULL;
        if (at) {
            if (compress_body_decode(&c.chunk, c.data, at, c.chunk.original, &why) < 0) {
                job_fail(j, "controller: cuMemcpyHtoDAsync_v2 to %#llx: %s", (unsigned long long)c.dst, why.text);
                return CUDA_ERROR_INVALID_VALUE;
            }
            return CUDA_SUCCESS;
        }
        if ((rc = staging_get(j->b, c.chunk.original, staging)))
            return rc;
        *staging_len = c.chunk.original;
        if (compress_body_decode(&c.chunk, c.data, *staging, *staging_len, &why) < 0) {
            job_fail(j, "controller: cuMemcpyHtoDAsync_v2 to %#llx: %s", (unsigned long long)c.dst, why.text);
            return CUDA_ERROR_INVALID_VALUE;
        }
        return d->fn_cuMemcpyHtoDAsync_v2(c.dst, *staging, *staging_len, rs);
    }
    case CUDA_OP_cuMemcpyDtoHAsync_v2: {
        size_t have = wire_remaining(r);
        uint64_t src, n;
        rig_why why = { "" };
        if (copy_dtoh_read(wire_get_view(r, have), have, &src, &n, &why) < 0) {
            job_fail(j, "controller: %s", why.text);
            return CUDA_ERROR_INVALID_VALUE;
        }
        /* On an idle stream the bytes go from the device memory itself,
         * sent before the next record replays. */
        void *at = s && job_stream_idle(j, s) ? job_device_bytes(j, s->device, src, n) : NULL;
        if (at) {
            *staging = at;
            *staging_len = n;
            *in_place = true;
            return CUDA_SUCCESS;
        }
        if ((rc = staging_get(j->b, n, staging)))
            return rc;
        *staging_len = n;
        return d->fn_cuMemcpyDtoHAsync_v2(*staging, src, n, rs);
    }
    case CUDA_OP_cuMemcpyDtoDAsync_v2: {
        rec_copy_dtod v;
        if (rec_copy_dtod_get(r, &v, &why))
            return malformed(j, &why);
        return d->fn_cuMemcpyDtoDAsync_v2(v.dst, v.src, v.length, rs);
    }
    case CUDA_OP_cuMemcpy2DAsync_v2: {
        /* The decoder holds width x height to a chunk, unwrapped, and the
         * rows' length to it. */
        rec_copy_2d v;
        if (rec_copy_2d_get(r, &v, &why))
            return malformed(j, &why);
        CUDA_MEMCPY2D c = { .WidthInBytes = v.width, .Height = v.height };
        if (v.direction == REC_COPY_TO_DEVICE) {
            c.srcMemoryType = CU_MEMORYTYPE_HOST;
            c.srcHost = v.rows;
            c.srcPitch = v.width;
            c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            c.dstDevice = v.dst;
            c.dstPitch = v.dst_pitch;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        if (v.direction == REC_COPY_TO_PROGRAM) {
            size_t area = v.width * v.height;
            if ((rc = staging_get(j->b, area, staging)))
                return rc;
            *staging_len = area;
            c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            c.srcDevice = v.src;
            c.srcPitch = v.src_pitch;
            c.dstMemoryType = CU_MEMORYTYPE_HOST;
            c.dstHost = *staging;
            c.dstPitch = v.width;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = v.src;
        c.srcPitch = v.src_pitch;
        c.dstDevice = v.dst;
        c.dstPitch = v.dst_pitch;
        return d->fn_cuMemcpy2DAsync_v2(&c, rs);
    }
    case CUDA_OP_cuMemcpy3DAsync_v2: {
        rec_copy_3d v;
        if (rec_copy_3d_get(r, &v, &why))
            return malformed(j, &why);
        return s ? image_copy(j, s, &v, staging, staging_len) : CUDA_ERROR_INVALID_VALUE;
    }
    case CUDA_OP_cuMemsetD2D32Async: {
        rec_memset v;
        if (rec_memset_get(r, &v, &why))
            return malformed(j, &why);
        /* The decoder allows element sizes 1, 2 and 4 only. */
        if (v.height == 1) {
            switch (v.element_size) {
            case 1: return d->fn_cuMemsetD8Async(v.dst, (unsigned char)v.value, v.width, rs);
            case 2: return d->fn_cuMemsetD16Async(v.dst, (unsigned short)v.value, v.width, rs);
            default: return d->fn_cuMemsetD32Async(v.dst, v.value, v.width, rs);
            }
        }
        switch (v.element_size) {
        case 1: return d->fn_cuMemsetD2D8Async(v.dst, v.pitch, (unsigned char)v.value, v.width, v.height, rs);
        case 2: return d->fn_cuMemsetD2D16Async(v.dst, v.pitch, (unsigned short)v.value, v.width, v.height, rs);
        default: return d->fn_cuMemsetD2D32Async(v.dst, v.pitch, v.value, v.width, v.height, rs);
        }
    }
    case CUDA_OP_cuStreamWaitEvent: {
        rec_wait_event v;
        if (rec_wait_event_get(r, &v, &why))
            return malformed(j, &why);
        agent_obj *e = objects_get(&j->objs, v.event, AOBJ_EVENT);
        if (!e)
            return CUDA_ERROR_INVALID_HANDLE;
        return d->fn_cuStreamWaitEvent(rs, e->u.event.real, v.flags);
    }
    case CUDA_OP_cuEventRecordWithFlags: {
        rec_event_record v;
        if (rec_event_record_get(r, &v, &why))
            return malformed(j, &why);
        agent_obj *e = objects_get(&j->objs, v.event, AOBJ_EVENT);
        if (!e)
            return CUDA_ERROR_INVALID_HANDLE;
        return v.flags ? d->fn_cuEventRecordWithFlags(e->u.event.real, rs, v.flags)
                       : d->fn_cuEventRecord(e->u.event.real, rs);
    }
    case CUDA_OP_cuLaunchKernel:
    case CUDA_OP_cuLaunchCooperativeKernel: {
        /* Decoded in place: the parameters stay in the frame. */
        rec_launch v;
        if (rec_launch_get(r, &v, &why))
            return malformed(j, &why);
        agent_obj *fn = objects_get(&j->objs, v.function, AOBJ_FUNCTION);
        if (!fn)
            return CUDA_ERROR_INVALID_HANDLE;
        CUfunction f;
        if ((rc = job_function_on(j, fn, (int)v.device, &f)))
            return rc;
        /* Copied only when the kernel changes: a loop of launches would
         * pay a formatted copy each. */
        char *last = j->last_kernel[v.device];
        if (strncmp(last, fn->u.fn.name, sizeof j->last_kernel[v.device] - 1) != 0)
            snprintf(last, sizeof j->last_kernel[v.device], "%s", fn->u.fn.name);
        size_t n = v.params_len, size = n;
        void *buffer = (void *)v.params;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        if (op == CUDA_OP_cuLaunchCooperativeKernel) {
            /* cuLaunchCooperativeKernel takes no packed buffer; the same
             * launch through cuLaunchKernelEx does. */
            CUlaunchAttribute coop = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value = { .cooperative = 1 } };
            CUlaunchConfig config = { .gridDimX = v.grid[0], .gridDimY = v.grid[1], .gridDimZ = v.grid[2],
                                      .blockDimX = v.block[0], .blockDimY = v.block[1], .blockDimZ = v.block[2],
                                      .sharedMemBytes = v.shared, .hStream = rs, .attrs = &coop, .numAttrs = 1 };
            return d->fn_cuLaunchKernelEx(&config, f, NULL, n ? extra : NULL);
        }
        return d->fn_cuLaunchKernel(f, v.grid[0], v.grid[1], v.grid[2], v.block[0], v.block[1], v.block[2], v.shared,
                                    rs, NULL, n ? extra : NULL);
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Puts a marker for (stream, value) behind the work enqueued so far; a
 * quiet one (a staged piece of a copy to the device with more behind it)
 * only gives its buffer back. */
static bool mark(job *j, agent_obj *s, uint64_t stream, uint64_t value, void *staging, size_t staging_len,
                 bool inbound, bool in_place, bool quiet)
{
    /* A marker or a word sent now may be of a later value than in-place
     * bytes still gathered: those go first. */
    if (!in_place)
        job_flush_in_place(j);
    note *n = note_new(j);
    if (!n) {
        if (staging && !in_place)
            staging_put(j->b, staging, staging_len);
        job_fail(j, "agent: out of memory");
        return false;
    }
    n->stream = stream;
    n->value = value;
    n->bytes = s->u.stream.bytes;
    n->staging = staging;
    n->len = staging_len;
    n->inbound = inbound;
    n->in_place = in_place;
    n->quiet = quiet;
    if (in_place) {
        job_send_in_place(j, n);
        return !job_failed(j);
    }
    /* Work already done (a small copy the driver made in the call): the
     * word goes now, from this thread, sparing the driver's callback
     * thread's wake-up on the way of a synchronous wait. */
    if (job_use_device(j, s->device) == CUDA_SUCCESS &&
        j->b->drv.fn_cuStreamQuery(job_real_stream(s)) == CUDA_SUCCESS) {
        if (quiet) {
            staging_put(j->b, staging, staging_len);
            note_free(j, n);
            return true;
        }
        if (job_send_reached(j, n))
            return true;
    }
    pthread_mutex_lock(&j->q_lock);
    j->pending_markers++;
    pthread_mutex_unlock(&j->q_lock);
    CUresult rc = j->b->drv.fn_cuLaunchHostFunc(job_real_stream(s), job_marker, n);
    if (rc) {
        pthread_mutex_lock(&j->q_lock);
        j->pending_markers--;
        pthread_mutex_unlock(&j->q_lock);
        if (staging)
            staging_put(j->b, staging, staging_len);
        note_free(j, n);
        job_fail_driver(j, s->device, rc, "following the stream (cuLaunchHostFunc)");
        return false;
    }
    return true;
}

/* The streams a frame touched and their last value not yet marked: a
 * frame of many records costs one marker per stream, not one per record. */
#define TOUCHED_MAX 64
typedef struct touched {
    agent_obj *s;
    uint64_t stream, value;
} touched;

static void replay_records(job *j, const uint8_t *payload, size_t size, staged *st, touched *t, size_t *ntp);

void replay_handover(job *j, const frame *f)
{
    touched t[TOUCHED_MAX];
    size_t nt = 0;
    staged st = { 0 };
    size_t records = f->len;
    if (f->kind == JOB_FRAME_STAGED) {
        memcpy(&st, f->payload + STAGED_HEAD, sizeof st);
        /* Taken here: the frame no longer owns the buffer. */
        memset(f->payload + STAGED_HEAD, 0, sizeof st);
        records = STAGED_HEAD;
    }
    replay_records(j, f->payload, records, st.data || st.in_place ? &st : NULL, t, &nt);
    job_flush_in_place(j);
    if (st.data)
        staging_put(j->b, st.data, st.len);
    for (size_t i = 0; i < nt && !job_failed(j); i++)
        if (t[i].value && !mark(j, t[i].s, t[i].stream, t[i].value, NULL, 0, false, false, false))
            return;
}

/* The records of one frame; st: the data of its staged copy (taken when
 * replayed). Streams touched but not yet marked are left in t. */
static void replay_records(job *j, const uint8_t *payload, size_t size, staged *st, touched *t, size_t *ntp)
{
    size_t nt = *ntp;
    wire_reader fr = wire_reader_init(payload, size);
    while (wire_remaining(&fr) && !job_failed(j)) {
        rec_record_head h;
        rig_why why;
        if (rec_record_head_get(&fr, &h, &why)) {
            job_fail(j, "controller: malformed handover: %s", why.text);
            return;
        }
        uint32_t op = h.op, len = h.length;
        uint64_t stream = h.stream, value = h.value;
        const uint8_t *body = wire_get_view(&fr, len);
        if (fr.err) {
            job_fail(j, "controller: malformed handover: a %s record of %u bytes, %zu left in the frame",
                     job_op_name(op), len, wire_remaining(&fr));
            return;
        }
        wire_reader r = wire_reader_init(body, len);
        agent_obj *s = NULL;
        if (value) {
            s = objects_get(&j->objs, stream, AOBJ_STREAM);
            if (!s) {
                job_fail(j, "controller: %s on stream %llu, which this job does not hold", job_op_name(op),
                         (unsigned long long)stream);
                return;
            }
        }
        void *staging = NULL;
        size_t staging_len = 0;
        bool in_place = false, quiet = false;
        /* A staged copy's bytes came after its record; they count too. */
        size_t carried = st && (st->data || st->in_place) ? st->wire : 0;
        /* In-place bytes gathered are device memory that anything but
         * another copy out could change. */
        if (op != CUDA_OP_cuMemcpyDtoHAsync_v2)
            job_flush_in_place(j);
        CUresult rc = replay_record(j, op, s, stream, &r, st, &staging, &staging_len, &in_place, &quiet);
        bool inbound = staging && op == CUDA_OP_cuMemcpyHtoDAsync_v2;
        if (!st || st->data || st->in_place)
            carried = 0;
        if (rc) {
            if ((op == CUDA_OP_cuLaunchKernel || op == CUDA_OP_cuLaunchCooperativeKernel) && !job_sticky(rc)) {
                const char *name = NULL;
                j->b->drv.fn_cuGetErrorName(rc, &name);
                wire_reader k = wire_reader_init(body, len);
                rec_launch v;
                agent_obj *fn = rec_launch_get(&k, &v, &why) ? NULL : objects_get(&j->objs, v.function, AOBJ_FUNCTION);
                job_fail(j, "CUDA:%d: %s in kernel %s", s ? s->device : 0, name ? name : "error",
                         fn ? fn->u.fn.name : "?");
            } else {
                job_fail_driver(j, s ? s->device : -1, rc, job_op_name(op));
            }
            if (staging && !in_place)
                staging_put(j->b, staging, staging_len);
            return;
        }
        if (!value) {
            /* Bytes into the program need a place on a timeline to arrive
             * at: a copy without one is the controller's error. */
            if (staging) {
                if (!in_place)
                    staging_put(j->b, staging, staging_len);
                job_fail(j, "controller: %s without a stream value", job_op_name(op));
                return;
            }
            continue;
        }
        s->u.stream.bytes += len + carried;
        size_t i = 0;
        while (i < nt && t[i].s != s)
            i++;
        /* Copies into the program carry bytes and host functions run in the
         * program when reached: each gets its own marker, at once. */
        if (staging || op == JOB_OP_MARK) {
            if (!mark(j, s, stream, value, staging, staging_len, inbound, in_place, quiet))
                return;
            if (i < nt && !quiet)
                t[i].value = 0;
            continue;
        }
        if (quiet)
            continue;   /* a later piece's word reports it */
        if (i == nt) {
            if (nt == TOUCHED_MAX) {
                if (!mark(j, s, stream, value, NULL, 0, false, false, false))
                    return;
                continue;
            }
            t[nt++] = (touched){ s, stream, 0 };
        }
        t[i].value = value;
    }
    *ntp = nt;
}

void replay_drop(job *j, const frame *f)
{
    wire_reader r = wire_reader_init(f->payload, f->len);
    rec_drop v;
    rig_why why;
    if (rec_drop_get(&r, &v, &why)) {
        job_fail(j, "controller: malformed %s", why.text);
        return;
    }
    uint32_t op = v.op;
    uint64_t id = v.object;
    const cuda_driver *d = &j->b->drv;
    agent_obj *o;
    switch (op) {
    case CUDA_OP_cuMemFree_v2:
        if (!pool_free_now(j, id) && window_free(&j->win, j->b, id) != CUDA_SUCCESS)
            job_fail(j, "controller: frees %#llx, which this job did not allocate", (unsigned long long)id);
        return;
    case CUDA_OP_cuStreamDestroy_v2:
        if ((o = objects_get(&j->objs, id, AOBJ_STREAM))) {
            /* Its markers still run: keep the object until the job ends,
             * destroy the real stream now (the driver lets queued work finish). */
            if (!o->u.stream.null && o->u.stream.real) {
                job_use_device(j, o->device);
                d->fn_cuStreamDestroy_v2(o->u.stream.real);
                o->u.stream.real = NULL;
                o->u.stream.null = true;
            }
            return;
        }
        break;
    case CUDA_OP_cuEventDestroy_v2:
        if ((o = objects_get(&j->objs, id, AOBJ_EVENT))) {
            d->fn_cuEventDestroy_v2(o->u.event.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    case CUDA_OP_cuModuleUnload:
        if ((o = objects_get(&j->objs, id, AOBJ_MODULE))) {
            job_use_device(j, o->device);
            d->fn_cuCtxSynchronize();
            d->fn_cuModuleUnload(o->u.module.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    case CUDA_OP_cuArrayDestroy:
    case CUDA_OP_cuMipmappedArrayDestroy:
    case CUDA_OP_cuTexObjectDestroy:
    case CUDA_OP_cuSurfObjectDestroy:
        if (image_drop(j, op, id))
            return;
        break;
    case CUDA_OP_cuMemPoolDestroy:
        if (pool_destroy(j, id))
            return;
        break;
    case CUDA_OP_cuGraphExecDestroy:
        if (graph_drop(j, id))
            return;
        break;
    case CUDA_OP_cuTexRefDestroy:
        /* A module's reference, forgotten before its module unloads. */
        if (objects_get(&j->objs, id, AOBJ_TEXREF)) {
            objects_remove(&j->objs, id);
            return;
        }
        break;
    case CUDA_OP_cuLibraryUnload:
        if ((o = objects_get(&j->objs, id, AOBJ_LIBRARY))) {
            d->fn_cuLibraryUnload(o->u.library.real);
            objects_remove(&j->objs, id);
            return;
        }
        break;
    default:
        job_fail(j, "controller: drop of an unknown kind (%u)", op);
        return;
    }
    job_fail(j, "controller: drops object %llu, which this job does not hold", (unsigned long long)id);
}

