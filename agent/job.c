/* One job's life, from the proven connection to its end. The job thread
 * reads frames (itself when it is free, else through the reader's inbox)
 * and replays them in the order sent (request.c,
 * handover.c); markers the driver runs behind handed-over work give notes
 * to the sender thread (sender.c), which sends the bytes of copies into the
 * program and then the words. The job runs in a worker process of its own
 * (worker.c): when it ends, by close or failure, the process exits and the
 * driver reclaims everything the job held, so nothing here waits for the
 * devices to finish. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/job.h"
#include "proto/cuda_ops.h"
#include "proto/deadline.h"
#include "proto/job.h"
#include "proto/text.h"

/* Wakes every thread of the job that waits under q_lock (a failure,
 * stopping); the caller holds q_lock. */
static void job_wake_all(job *j)
{
    pthread_cond_broadcast(&j->q_cond);
    pthread_cond_broadcast(&j->send_cond);
    pthread_cond_broadcast(&j->sent_cond);
    pthread_cond_broadcast(&j->tick_cond);
    pthread_cond_broadcast(&j->rd_cond);
}

void job_fail(job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->q_lock);
    if (!j->failed) {
        j->failed = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->cause, sizeof j->cause, fmt, ap);
        va_end(ap);
    }
    job_wake_all(j);
    pthread_mutex_unlock(&j->q_lock);
}

bool job_failed(job *j)
{
    pthread_mutex_lock(&j->q_lock);
    bool f = j->failed;
    pthread_mutex_unlock(&j->q_lock);
    return f;
}

/* A send's failure fails the job. */
static int sent(job *j, int rc, const rig_why *why)
{
    if (rc == RIG_E_CLOSED)
        job_fail(j, "controller: closed its connection");
    else if (rc < 0)
        job_fail(j, "controller: %s", why->text);
    return rc;
}

int job_send(job *j, frame_kind kind, const struct iovec *iov, int n)
{
    rig_why why = { "" };
    pthread_mutex_lock(&j->send_lock);
    int rc = conn_sendv(&j->c, kind, iov, n, deadline_after(JOB_STALL_MS), &why);
    pthread_mutex_unlock(&j->send_lock);
    return sent(j, rc, &why);
}

int job_send2(job *j, frame_kind kind1, const struct iovec *iov1, int n1, frame_kind kind2,
              const struct iovec *iov2, int n2)
{
    rig_why why = { "" };
    pthread_mutex_lock(&j->send_lock);
    int rc = conn_sendv2(&j->c, kind1, iov1, n1, kind2, iov2, n2, deadline_after(JOB_STALL_MS), &why);
    pthread_mutex_unlock(&j->send_lock);
    return sent(j, rc, &why);
}

int job_send_gather(job *j, conn_gather *g)
{
    rig_why why = { "" };
    pthread_mutex_lock(&j->send_lock);
    int rc = conn_gather_send(&j->c, g, deadline_after(JOB_STALL_MS), &why);
    pthread_mutex_unlock(&j->send_lock);
    return sent(j, rc, &why);
}

void job_send_abort(job *j)
{
    forward_output(j);
    pthread_mutex_lock(&j->q_lock);
    bool already = j->abort_sent;
    j->abort_sent = true;
    char why[sizeof j->cause];
    memcpy(why, j->cause, sizeof why);
    pthread_mutex_unlock(&j->q_lock);
    if (already)
        return;
    mesh_end(j, why);
    uint8_t buf[JOB_REASON_MAX + 4];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    size_t n = strlen(why);
    wire_put_string(&w, why, n < JOB_REASON_MAX ? n : JOB_REASON_MAX);
    struct iovec iov = { buf, w.off };
    rig_why ignored;
    pthread_mutex_lock(&j->send_lock);
    conn_sendv(&j->c, FRAME_ABORT, &iov, 1, deadline_after(2000), &ignored);
    shutdown(j->c.fd, SHUT_WR);
    pthread_mutex_unlock(&j->send_lock);
}

CUresult job_use_device(job *j, int device)
{
    if (device < 0 || device >= j->b->device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    if (j->current != device) {
        CUresult rc = j->b->drv.fn_cuCtxSetCurrent(j->b->primary[device]);
        if (rc)
            return rc;
        j->current = device;
    }
    return CUDA_SUCCESS;
}

/* Errors that a fault of earlier work leaves on the context: whatever call
 * meets them first, the cause is the last kernel launched there. */
bool job_sticky(CUresult rc)
{
    switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED: case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS: case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR: case CUDA_ERROR_ASSERT: case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return true;
    default:
        return false;
    }
}

void job_fail_driver(job *j, int device, CUresult rc, const char *what)
{
    const char *name = NULL;
    j->b->drv.fn_cuGetErrorName(rc, &name);
    if (!name)
        name = "error";
    if (job_sticky(rc) && device >= 0 && device < AGENT_DEVICES_MAX && j->last_kernel[device][0])
        job_fail(j, "CUDA:%d: %s in kernel %s", device, name, j->last_kernel[device]);
    else
        job_fail(j, "CUDA:%d: %s in %s", device < 0 ? 0 : device, name, what);
}

const char *job_op_name(uint32_t op)
{
    switch (op) {
    case JOB_OP_STREAM_CREATE: return "stream creation";
    case JOB_OP_EVENT_CREATE: return "event creation";
    case JOB_OP_MARK: return "host function";
    case JOB_OP_GRAPH_LAUNCH: return "graph launch";
    case JOB_OP_RAIL_SEND: return "rail send";
    case JOB_OP_RAIL_RECV: return "rail receive";
    case JOB_OP_SIGNAL: return "signal to an agent";
    case JOB_OP_WAIT: return "wait for an agent's signal";
    }
    const cuda_op_info *info = cuda_op_by_number(op);
    return info ? info->symbol : "an unknown operation";
}

void job_cleanup(job *j)
{
    const cuda_driver *d = &j->b->drv;
    pool_cleanup(j);
    for (uint64_t id = 0; id < j->objs.cap; id++) {
        agent_obj *o = j->objs.v[id];
        if (!o)
            continue;
        if (o->device >= 0 && o->device < j->b->device_count)
            d->fn_cuCtxSetCurrent(j->b->primary[o->device]);
        switch (o->type) {
        case AOBJ_STREAM:
            if (!o->u.stream.null && o->u.stream.real)
                d->fn_cuStreamDestroy_v2(o->u.stream.real);
            break;
        case AOBJ_EVENT: d->fn_cuEventDestroy_v2(o->u.event.real); break;
        case AOBJ_MODULE: d->fn_cuModuleUnload(o->u.module.real); break;
        case AOBJ_LIBRARY: d->fn_cuLibraryUnload(o->u.library.real); break;
        case AOBJ_MEMORY: d->fn_cuMemRelease(o->u.memory.real); break;
        case AOBJ_GRAPH: graph_free_real(j, o); break;
        case AOBJ_ARRAY: case AOBJ_MIPMAP: case AOBJ_TEXTURE: case AOBJ_SURFACE: image_release(j, o); break;
        default: break;
        }
        objects_remove(&j->objs, id);
    }
    free(j->objs.v);
    j->objs.v = NULL;
    j->objs.cap = 0;
    window_release(&j->win, j->b);
    j->current = -1;
}

job *job_new(backend *b, int fd, uint32_t index, char *why, size_t whylen)
{
    rig_why cwhy = { "" };
    job *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(why, whylen, "cannot start a job: no memory for its state");
        goto out;
    }
    if (conn_init(&j->c, fd, JOB_FRAME_LIMIT, &cwhy) < 0) {
        snprintf(why, whylen, "cannot start a job: %s", cwhy.text);
        goto out;
    }
    j->b = b;
    j->index = index;
    j->current = -1;
    j->last_marker_ms = deadline_now_ms();
    pthread_mutex_init(&j->send_lock, NULL);
    pthread_mutex_init(&j->output_lock, NULL);
    pthread_mutex_init(&j->q_lock, NULL);
    pthread_cond_init(&j->q_cond, NULL);
    pthread_cond_init(&j->send_cond, NULL);
    pthread_cond_init(&j->sent_cond, NULL);
    pthread_cond_init(&j->tick_cond, NULL);
    pthread_cond_init(&j->rd_cond, NULL);
    return j;
out:
    free(j);   /* the caller keeps fd */
    return NULL;
}

int job_start_threads(job *j)
{
    if (pthread_create(&j->sender, NULL, sender_main, j) != 0)
        return -1;
    if (pthread_create(&j->beater, NULL, beat_main, j) != 0 ||
        pthread_create(&j->watcher, NULL, watch_main, j) != 0) {
        pthread_mutex_lock(&j->q_lock);
        j->stopping = true;
        job_wake_all(j);
        pthread_mutex_unlock(&j->q_lock);
        return -1;
    }
    j->threads_started = true;
    return 0;
}

bool job_replay_frame(job *j, const frame *f)
{
    switch ((unsigned)f->kind) {   /* JOB_FRAME_STAGED is outside the enum */
    case FRAME_REQUEST: replay_request(j, f); break;
    case FRAME_HANDOVER:
    case JOB_FRAME_STAGED: replay_handover(j, f); break;
    case FRAME_DROP: replay_drop(j, f); break;
    case FRAME_BEAT: break;
    case FRAME_CLOSE: return true;
    case FRAME_ABORT: {
        wire_reader r = wire_reader_init(f->payload, f->len);
        const uint8_t *s;
        size_t n = wire_get_string(&r, &s, JOB_REASON_MAX);
        /* The controller's text, made safe to log and pass on to peers. */
        char cause[JOB_REASON_MAX + 1] = "";
        if (!r.err)
            text_printable(cause, sizeof cause, s, n, false);
        job_fail(j, "controller aborted: %s", cause);
        break;
    }
    default:
        job_fail(j, "controller: sent a %s message, which controllers never send", frame_kind_name(f->kind));
    }
    return false;
}

typedef struct inbox_item {
    struct inbox_item *next;
    frame f;
} inbox_item;

/* What the inbox may hold before the reader stops reading (and TCP makes
 * the controller wait). */
#define JOB_INBOX_MAX ((uint64_t)256 << 20)

/* Frames of at least JOB_BULK_FRAME bytes come in bursts (copies, full
 * batches): the job thread that read one itself calls the reader in, so
 * the next frame crosses the network while this one is replayed. */
#define JOB_BULK_FRAME ((uint64_t)64 << 10)
/* The reader takes over when the job thread has been replaying one frame
 * (held by the driver) for READER_TAKEOVER_MS; it looks that often while
 * the job thread replays, and every READER_IDLE_MS otherwise. */
#define READER_TAKEOVER_MS 20
#define READER_IDLE_MS 250
/* The reader hands the socket back to the job thread after this long
 * without a byte. */
#define READER_HOLD_MS 2

static bool reader_may_read(job *j)
{
    if (j->reading || j->in_bytes > JOB_INBOX_MAX)
        return false;
    if (j->failed || j->reader_wanted)
        return true;
    return j->busy_since_ms && deadline_now_ms() - j->busy_since_ms >= READER_TAKEOVER_MS;
}

/* Fails the job for a read that ended the connection's frames (the caller
 * does not hold q_lock); true when the reader must drain what follows. */
static bool read_failed(job *j, int rc, const rig_why *why)
{
    if (rc == RIG_E_TIMEOUT)
        job_fail(j, "controller: silent for %d s", JOB_SILENCE_MS / 1000);
    else if (rc == RIG_E_NOMEM)
        job_fail(j, "agent: %s", why->text);   /* ours, not the controller's fault */
    else
        job_fail(j, "controller: %s", rc == RIG_E_CLOSED ? "closed its connection" : why->text);
    /* Bytes no frame can be made of (a corrupted stream): read on and
     * discard until the controller closes, so closing here cannot reset
     * the connection under the abort it is sent. */
    return rc != RIG_E_CLOSED;
}

/* The reader: takes frames off the connection into the inbox while the job
 * thread cannot read them itself (the driver holds it, or a burst comes),
 * so the controller's sends keep moving and its silence is noticed. After
 * a failure it reads on and discards, so the controller's close cannot
 * reset the abort away. */
static void *reader_main(void *arg)
{
    job *j = arg;
    rig_why why = { "" };
    bool drain = false;
    pthread_mutex_lock(&j->q_lock);
    while (!j->read_over) {
        if (!reader_may_read(j)) {
            struct timespec ts = deadline_timespec_in(j->busy_since_ms ? READER_TAKEOVER_MS : READER_IDLE_MS);
            pthread_cond_timedwait(&j->rd_cond, &j->q_lock, &ts);
            continue;
        }
        bool discard = j->failed;
        /* While bytes keep coming (a large frame) the reader reads on. */
        int hold = discard ? JOB_SILENCE_MS : j->busy_since_ms ? 50 : READER_HOLD_MS;
        j->reading = true;
        pthread_mutex_unlock(&j->q_lock);
        frame f = { 0 };
        int rc = handover_recv(j, &f, deadline_after(-1), hold, false, &why);
        bool quiet = rc == RIG_E_TIMEOUT && deadline_now_ms() - j->c.last_recv_ms < JOB_SILENCE_MS;
        if (rc < 0 && !quiet)
            drain = read_failed(j, rc, &why);
        inbox_item *it = rc < 0 || discard ? NULL : malloc(sizeof *it);
        if (rc == 0 && !it) {
            handover_frame_release(j, &f);
            if (!discard)
                job_fail(j, "agent: out of memory for a frame of %llu bytes", (unsigned long long)f.len);
        }
        pthread_mutex_lock(&j->q_lock);
        j->reading = false;
        if (quiet && j->busy_since_ms) {
            /* Nothing to read while the driver holds the job thread. */
            struct timespec ts = deadline_timespec_in(READER_TAKEOVER_MS);
            pthread_cond_timedwait(&j->rd_cond, &j->q_lock, &ts);
            continue;
        }
        if (quiet) {
            /* The burst is over: the job thread reads again. */
            j->reader_wanted = false;
            if (j->job_waiting)
                pthread_cond_broadcast(&j->q_cond);
            continue;
        }
        if (rc < 0) {
            j->read_over = true;
            break;
        }
        if (!it)
            continue;
        it->next = NULL;
        it->f = f;
        if (j->in_tail)
            j->in_tail->next = it;
        else
            j->in_head = it;
        j->in_tail = it;
        j->in_bytes += f.len + sizeof *it;
        pthread_cond_broadcast(&j->q_cond);
        if (f.kind == FRAME_CLOSE)
            j->read_over = true;
    }
    j->drain = j->drain || drain;
    drain = j->drain;
    pthread_mutex_unlock(&j->q_lock);
    if (drain)
        conn_drain(&j->c, deadline_after(10000));
    pthread_mutex_lock(&j->q_lock);
    j->reader_done = true;
    pthread_cond_broadcast(&j->q_cond);
    pthread_mutex_unlock(&j->q_lock);
    return NULL;
}

/* The next frame for the job thread: the inbox's oldest, else one it reads
 * off the socket itself when no one else is reading, so a request is
 * answered without waking another thread (docs/design.md, "Threads").
 * false when the job failed or the controller's frames ended. The caller
 * holds q_lock. */
static bool next_frame(job *j, frame *out)
{
    rig_why why = { "" };
    j->busy_since_ms = 0;
    for (;;) {
        if (j->failed)
            return false;
        if (j->in_head) {
            inbox_item *it = j->in_head;
            j->in_head = it->next;
            if (!j->in_head)
                j->in_tail = NULL;
            bool full = j->in_bytes > JOB_INBOX_MAX;
            j->in_bytes -= it->f.len + sizeof *it;
            *out = it->f;
            free(it);
            if (full && j->in_bytes <= JOB_INBOX_MAX)
                pthread_cond_broadcast(&j->rd_cond);   /* room in the inbox again */
            break;
        }
        if (j->read_over)
            return false;
        if (j->reading || !j->reader_started) {
            j->job_waiting = true;
            pthread_cond_wait(&j->q_cond, &j->q_lock);
            j->job_waiting = false;
            continue;
        }
        j->reading = true;
        pthread_mutex_unlock(&j->q_lock);
        /* Bounded, so a failure found by another thread is seen soon. */
        int rc = handover_recv(j, out, deadline_after(READER_IDLE_MS), JOB_SILENCE_MS, true, &why);
        bool quiet = rc == RIG_E_TIMEOUT && deadline_now_ms() - j->c.last_recv_ms < JOB_SILENCE_MS;
        bool drain = rc < 0 && !quiet && read_failed(j, rc, &why);
        pthread_mutex_lock(&j->q_lock);
        j->reading = false;
        if (quiet)
            continue;
        if (rc < 0) {
            j->read_over = true;
            j->drain = drain;
            pthread_cond_broadcast(&j->rd_cond);
            return false;
        }
        if (out->kind == FRAME_CLOSE)
            j->read_over = true;
        if (j->failed) {
            handover_frame_release(j, out);
            return false;
        }
        if (out->len >= JOB_BULK_FRAME) {
            j->reader_wanted = true;
            pthread_cond_broadcast(&j->rd_cond);
        }
        break;
    }
    j->busy_since_ms = deadline_now_ms();
    return true;
}

/* Replays the controller's frames in order until its close or a failure;
 * true for a close with nothing failed. */
static bool serve_frames(job *j)
{
    pthread_mutex_lock(&j->q_lock);
    for (;;) {
        frame f = { 0 };
        if (!next_frame(j, &f))
            break;
        pthread_mutex_unlock(&j->q_lock);
        bool closed = job_replay_frame(j, &f);
        handover_frame_release(j, &f);
        if (closed)
            return !job_failed(j);
        pthread_mutex_lock(&j->q_lock);
    }
    j->busy_since_ms = 0;
    pthread_mutex_unlock(&j->q_lock);
    return false;
}

void job_free(job *j)
{
    /* Streams waiting for a peer's signal drain; the mesh stays until the
     * devices are done, since host functions behind rail work post to it. */
    rail_release(j);
    pthread_mutex_lock(&j->q_lock);
    j->stopping = true;
    job_wake_all(j);
    pthread_mutex_unlock(&j->q_lock);
    if (j->threads_started) {
        pthread_join(j->sender, NULL);
        pthread_join(j->beater, NULL);
        pthread_join(j->watcher, NULL);
    }
    /* No marker may run once the job is gone. */
    for (int d = 0; d < j->b->device_count; d++) {
        j->b->drv.fn_cuCtxSetCurrent(j->b->primary[d]);
        j->b->drv.fn_cuCtxSynchronize();
    }
    mesh_free(j);
    rail_free(j);
    /* Queued notes, and those of markers a failed context will never run. */
    while (j->live) {
        note *n = j->live;
        if (n->staging)
            staging_put(j->b, n->staging, n->len);
        note_free(j, n);
    }
    job_cleanup(j);
    conn_close(&j->c);
    free(j->packed_out);
    free(j->packed_in);
    pthread_mutex_destroy(&j->send_lock);
    pthread_mutex_destroy(&j->output_lock);
    pthread_mutex_destroy(&j->q_lock);
    pthread_cond_destroy(&j->q_cond);
    pthread_cond_destroy(&j->send_cond);
    pthread_cond_destroy(&j->sent_cond);
    pthread_cond_destroy(&j->tick_cond);
    pthread_cond_destroy(&j->rd_cond);
    free(j);
}

void job_end(job *j, bool closed)
{
    pthread_mutex_lock(&j->q_lock);
    bool already = j->end_started;
    j->end_started = true;
    pthread_mutex_unlock(&j->q_lock);
    if (already)
        return;
    if (j->hooks && j->hooks->ending)
        j->hooks->ending(j->hooks->ctx);
    char line[sizeof j->cause + 32];
    if (closed) {
        /* The program has ended: what it left queued can no longer be seen,
         * and the process's exit frees it (as a GPU frees a context whose
         * process has gone). */
        mesh_end(j, NULL);
        job_send(j, FRAME_CLOSE, NULL, 0);
        snprintf(line, sizeof line, "job closed");
    } else {
        job_send_abort(j);
        pthread_mutex_lock(&j->q_lock);
        snprintf(line, sizeof line, "job failed: %s", j->cause);
        /* The reader discards until the controller ends its side (at most
         * 10 s), so closing cannot reset the connection under the abort. */
        int64_t until = deadline_after(10000);
        while (j->reader_started && !j->reader_done && deadline_now_ms() < until) {
            struct timespec ts = deadline_timespec_in(100);
            pthread_cond_timedwait(&j->q_cond, &j->q_lock, &ts);
        }
        pthread_mutex_unlock(&j->q_lock);
    }
    if (j->hooks && j->hooks->ended)
        j->hooks->ended(j->hooks->ctx, line);
}

void job_serve(backend *b, int fd, uint32_t index, const rig_key *key, const job_hooks *hooks)
{
    char why[200];
    job *j = job_new(b, fd, index, why, sizeof why);
    if (!j) {
        close(fd);
        if (hooks->ending)
            hooks->ending(hooks->ctx);
        if (hooks->ended)
            hooks->ended(hooks->ctx, why);
        return;
    }
    j->hooks = hooks;
    j->key = key;
    pthread_t reader;
    if (job_start_threads(j) < 0 || pthread_create(&reader, NULL, reader_main, j) != 0)
        job_fail(j, "agent: cannot start the job's threads");
    else
        j->reader_started = true;
    bool closed = !job_failed(j) && serve_frames(j);
    job_end(j, closed);
    /* Another thread may be ending the job (it found the failure while this
     * one was held by the driver): its hooks end the process. */
    for (;;)
        pause();
}
