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

CUstream job_real_stream(agent_obj *s)
{
    return s->u.stream.null ? NULL : s->u.stream.real;
}

/* ---- host-to-device data straight into staging ---- */

/* A JOB_FRAME_STAGED frame's payload: the record's header and its head
 * (u64 dst and the chunk header; the body length rewritten to that head),
 * then where the data went. */
#define RECORD_HEAD 24
#define STAGED_HEAD (RECORD_HEAD + COPY_HTOD_HEAD)
typedef struct staged {
    void *data;           /* a staging buffer holding the original bytes; NULL once replayed */
    size_t len;           /* the original bytes */
    size_t wire;          /* the bytes the record carried after its head (stored) */
} staged;

uint8_t *job_buffer(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return *buf;
    uint8_t *p = realloc(*buf, need);
    if (!p)
        return NULL;
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
 * driver would otherwise stage it itself); a compressed chunk is read into
 * the job's buffer and decoded into the staging buffer. */
int handover_recv(job *j, frame *f, int64_t deadline, int idle_ms, rig_why *why)
{
    int rc = conn_recv_split(&j->c, f, FRAME_HANDOVER, STAGED_HEAD, CONN_READ_BUF, deadline, idle_ms, why);
    uint64_t rest = conn_rest(&j->c);
    if (rc < 0 || !rest)
        return rc;
    wire_reader r = wire_reader_init(f->payload, f->len);
    uint32_t op = wire_get_u32(&r), len = wire_get_u32(&r);
    wire_get_u64(&r);
    uint64_t value = wire_get_u64(&r);
    void *data = NULL;
    copy_htod_head c;
    rig_why bad = { "" };
    /* Only a copy with a place on a timeline: its marker gives the buffer
     * back. A malformed head is read whole, for the replay to name. */
    if (!r.err && op == CUDA_OP_cuMemcpyHtoDAsync_v2 && value && len == COPY_HTOD_HEAD + rest &&
        copy_htod_read(f->payload + RECORD_HEAD, COPY_HTOD_HEAD, len, &c, &bad) == 0) {
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
        if (data)
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
        if (data)
            staging_put(j->b, data, original);
        frame_release(f);
        return rc;
    }
    if (!data) {
        f->len += rest;   /* whole, as conn_recv gives it */
        return 0;
    }
    wire_store_u32(p + 4, COPY_HTOD_HEAD);
    staged st = { data, original, rest };
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

/* Replays one record; returns the staging buffer of a copy into the
 * program through *staging. */
static CUresult replay_record(job *j, uint32_t op, agent_obj *s, uint64_t object, wire_reader *r, staged *st,
                              void **staging, size_t *staging_len)
{
    const cuda_driver *d = &j->b->drv;
    CUstream rs = s ? job_real_stream(s) : NULL;
    CUresult rc;
    if (s && (rc = job_use_device(j, s->device)))
        return rc;
    switch (op) {
    case JOB_OP_STREAM_CREATE: {
        uint32_t device = wire_get_u32(r), flags = wire_get_u32(r);
        int32_t priority = (int32_t)wire_get_u32(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        agent_obj *o = objects_put(&j->objs, object, AOBJ_STREAM, (int)device);
        if (!o && errno == ENOMEM) {
            job_log_nomem(j, "the record of stream %llu", (unsigned long long)object);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = job_use_device(j, (int)device)))
            return rc;
        if (flags & JOB_STREAM_NULL) {
            o->u.stream.null = true;
            return CUDA_SUCCESS;
        }
        return d->fn_cuStreamCreateWithPriority(&o->u.stream.real, flags, priority);
    }
    case JOB_OP_EVENT_CREATE: {
        uint32_t device = wire_get_u32(r), flags = wire_get_u32(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        agent_obj *o = objects_put(&j->objs, object, AOBJ_EVENT, (int)device);
        if (!o && errno == ENOMEM) {
            job_log_nomem(j, "the record of event %llu", (unsigned long long)object);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!o)
            return CUDA_ERROR_INVALID_HANDLE;
        if ((rc = job_use_device(j, (int)device)))
            return rc;
        return d->fn_cuEventCreate(&o->u.event.real, flags);
    }
    case JOB_OP_MARK:
        return CUDA_SUCCESS;
    case JOB_OP_GRAPH_LAUNCH:
        return s ? graph_launch(j, s, r) : CUDA_ERROR_INVALID_VALUE;
    case CUDA_OP_cuMemFreeAsync: {
        uint64_t base = wire_get_u64(r);
        if (wire_reader_finish(r) || !s)
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
        /* Decoded into a staging buffer, which the marker gives back. */
        if (!s)
            return CUDA_ERROR_INVALID_VALUE;
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
        if ((rc = staging_get(j->b, n, staging)))
            return rc;
        *staging_len = n;
        return d->fn_cuMemcpyDtoHAsync_v2(*staging, src, n, rs);
    }
    case CUDA_OP_cuMemcpyDtoDAsync_v2: {
        uint64_t dst = wire_get_u64(r), src = wire_get_u64(r), n = wire_get_u64(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        return d->fn_cuMemcpyDtoDAsync_v2(dst, src, n, rs);
    }
    case CUDA_OP_cuMemcpy2DAsync_v2: {
        uint8_t dir = wire_get_u8(r);
        uint64_t dst = wire_get_u64(r), dpitch = wire_get_u64(r), src = wire_get_u64(r), spitch = wire_get_u64(r);
        uint64_t width = wire_get_u64(r), height = wire_get_u64(r);
        size_t n = wire_remaining(r);
        const uint8_t *data = wire_get_view(r, n);
        /* width * height may wrap: a wrapped product must not pass for a
         * small copy (the driver would then read past the frame). */
        uint64_t area;
        if (r->err || dir > 2 || __builtin_mul_overflow(width, height, &area) ||
            area > JOB_COPY_CHUNK || (dir == 0 && n != area) || (dir != 0 && n != 0))
            return CUDA_ERROR_INVALID_VALUE;
        CUDA_MEMCPY2D c = { .WidthInBytes = width, .Height = height };
        if (dir == 0) {
            c.srcMemoryType = CU_MEMORYTYPE_HOST;
            c.srcHost = data;
            c.srcPitch = width;
            c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
            c.dstDevice = dst;
            c.dstPitch = dpitch;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        if (dir == 1) {
            if ((rc = staging_get(j->b, area, staging)))
                return rc;
            *staging_len = area;
            c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
            c.srcDevice = src;
            c.srcPitch = spitch;
            c.dstMemoryType = CU_MEMORYTYPE_HOST;
            c.dstHost = *staging;
            c.dstPitch = width;
            return d->fn_cuMemcpy2DAsync_v2(&c, rs);
        }
        c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = src;
        c.srcPitch = spitch;
        c.dstDevice = dst;
        c.dstPitch = dpitch;
        return d->fn_cuMemcpy2DAsync_v2(&c, rs);
    }
    case CUDA_OP_cuMemcpy3DAsync_v2:
        return s ? image_copy(j, s, r, staging, staging_len) : CUDA_ERROR_INVALID_VALUE;
    case CUDA_OP_cuMemsetD2D32Async: {
        uint64_t dst = wire_get_u64(r), pitch = wire_get_u64(r);
        uint32_t value = wire_get_u32(r), elem = wire_get_u32(r);
        uint64_t width = wire_get_u64(r), height = wire_get_u64(r);
        if (wire_reader_finish(r))
            return CUDA_ERROR_INVALID_VALUE;
        if (height == 1) {
            switch (elem) {
            case 1: return d->fn_cuMemsetD8Async(dst, (unsigned char)value, width, rs);
            case 2: return d->fn_cuMemsetD16Async(dst, (unsigned short)value, width, rs);
            case 4: return d->fn_cuMemsetD32Async(dst, value, width, rs);
            }
            return CUDA_ERROR_INVALID_VALUE;
        }
        switch (elem) {
        case 1: return d->fn_cuMemsetD2D8Async(dst, pitch, (unsigned char)value, width, height, rs);
        case 2: return d->fn_cuMemsetD2D16Async(dst, pitch, (unsigned short)value, width, height, rs);
        case 4: return d->fn_cuMemsetD2D32Async(dst, pitch, value, width, height, rs);
        }
        return CUDA_ERROR_INVALID_VALUE;
    }
    case CUDA_OP_cuStreamWaitEvent: {
        agent_obj *e = objects_get(&j->objs, wire_get_u64(r), AOBJ_EVENT);
        uint32_t flags = wire_get_u32(r);
        if (wire_reader_finish(r) || !e)
            return CUDA_ERROR_INVALID_HANDLE;
        return d->fn_cuStreamWaitEvent(rs, e->u.event.real, flags);
    }
    case CUDA_OP_cuEventRecordWithFlags: {
        agent_obj *e = objects_get(&j->objs, wire_get_u64(r), AOBJ_EVENT);
        uint32_t flags = wire_get_u32(r);
        if (wire_reader_finish(r) || !e)
            return CUDA_ERROR_INVALID_HANDLE;
        return flags ? d->fn_cuEventRecordWithFlags(e->u.event.real, rs, flags) : d->fn_cuEventRecord(e->u.event.real, rs);
    }
    case CUDA_OP_cuLaunchKernel:
    case CUDA_OP_cuLaunchCooperativeKernel: {
        agent_obj *fn = objects_get(&j->objs, wire_get_u64(r), AOBJ_FUNCTION);
        uint32_t device = wire_get_u32(r), dims[7];
        for (int i = 0; i < 7; i++)
            dims[i] = wire_get_u32(r);
        size_t n = wire_remaining(r);
        const uint8_t *params = wire_get_view(r, n);
        if (r->err || !fn)
            return CUDA_ERROR_INVALID_HANDLE;
        CUfunction f;
        if ((rc = job_function_on(j, fn, (int)device, &f)))
            return rc;
        snprintf(j->last_kernel[device], sizeof j->last_kernel[device], "%s", fn->u.fn.name);
        size_t size = n;
        void *buffer = (void *)params;
        void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                          CU_LAUNCH_PARAM_END };
        if (op == CUDA_OP_cuLaunchCooperativeKernel) {
            /* cuLaunchCooperativeKernel takes no packed buffer; the same
             * launch through cuLaunchKernelEx does. */
            CUlaunchAttribute coop = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value = { .cooperative = 1 } };
            CUlaunchConfig config = { .gridDimX = dims[0], .gridDimY = dims[1], .gridDimZ = dims[2],
                                      .blockDimX = dims[3], .blockDimY = dims[4], .blockDimZ = dims[5],
                                      .sharedMemBytes = dims[6], .hStream = rs, .attrs = &coop, .numAttrs = 1 };
            return d->fn_cuLaunchKernelEx(&config, f, NULL, n ? extra : NULL);
        }
        return d->fn_cuLaunchKernel(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], rs, NULL,
                                    n ? extra : NULL);
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Puts a marker for (stream, value) behind the work enqueued so far. */
static bool mark(job *j, agent_obj *s, uint64_t stream, uint64_t value, void *staging, size_t staging_len,
                 bool inbound)
{
    note *n = note_new(j);
    if (!n) {
        if (staging)
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
    replay_records(j, f->payload, records, st.data ? &st : NULL, t, &nt);
    if (st.data)
        staging_put(j->b, st.data, st.len);
    for (size_t i = 0; i < nt && !job_failed(j); i++)
        if (t[i].value && !mark(j, t[i].s, t[i].stream, t[i].value, NULL, 0, false))
            return;
}

/* The records of one frame; st: the data of its staged copy (taken when
 * replayed). Streams touched but not yet marked are left in t. */
static void replay_records(job *j, const uint8_t *payload, size_t size, staged *st, touched *t, size_t *ntp)
{
    size_t nt = *ntp;
    wire_reader fr = wire_reader_init(payload, size);
    while (wire_remaining(&fr) && !job_failed(j)) {
        uint32_t op = wire_get_u32(&fr), len = wire_get_u32(&fr);
        uint64_t stream = wire_get_u64(&fr), value = wire_get_u64(&fr);
        const uint8_t *body = wire_get_view(&fr, len);
        if (fr.err) {
            job_fail(j, "controller: malformed handover");
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
        /* A staged copy's bytes came after its record; they count too. */
        size_t carried = st && st->data ? st->wire : 0;
        CUresult rc = replay_record(j, op, s, stream, &r, st, &staging, &staging_len);
        bool inbound = staging && op == CUDA_OP_cuMemcpyHtoDAsync_v2;
        if (!st || st->data)
            carried = 0;
        if (rc) {
            if ((op == CUDA_OP_cuLaunchKernel || op == CUDA_OP_cuLaunchCooperativeKernel) && !job_sticky(rc)) {
                const char *name = NULL;
                j->b->drv.fn_cuGetErrorName(rc, &name);
                wire_reader k = wire_reader_init(body, len);
                agent_obj *fn = objects_get(&j->objs, wire_get_u64(&k), AOBJ_FUNCTION);
                job_fail(j, "CUDA:%d: %s in kernel %s", s ? s->device : 0, name ? name : "error",
                         fn ? fn->u.fn.name : "?");
            } else {
                job_fail_driver(j, s ? s->device : -1, rc, job_op_name(op));
            }
            if (staging)
                staging_put(j->b, staging, staging_len);
            return;
        }
        if (!value) {
            /* Bytes into the program need a place on a timeline to arrive
             * at: a copy without one is the controller's error. */
            if (staging) {
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
            if (!mark(j, s, stream, value, staging, staging_len, inbound))
                return;
            if (i < nt)
                t[i].value = 0;
            continue;
        }
        if (i == nt) {
            if (nt == TOUCHED_MAX) {
                if (!mark(j, s, stream, value, NULL, 0, false))
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
    uint32_t op = wire_get_u32(&r);
    uint64_t id = wire_get_u64(&r);
    if (wire_reader_finish(&r)) {
        job_fail(j, "controller: malformed drop");
        return;
    }
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

