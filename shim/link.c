/* One agent's connection from the program's side. Requests are answered in
 * order, so a FIFO of waiting callers matches answers to callers; handovers
 * get consecutive timeline values per stream; a thread that waits reads the
 * socket itself (the reader baton), a receiver thread reads while none
 * waits, and a thread of their own runs host functions. */
#include "shim/link.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/copy.h"
#include "proto/deadline.h"
#include "proto/handshake.h"
#include "proto/job.h"
#include "proto/net.h"
#include "proto/records.h"
#include "proto/report.h"
#include "proto/wire.h"
#include "shim/decode.h"
#include "shim/htod.h"
#include "shim/log.h"
#include "shim/wait_spin.h"

#define UNREPORTED_LIMIT ((uint64_t)64 << 20)
/* Bytes of copies into the program asked for and not yet arrived: each
 * holds a staging buffer on the agent until sent, so a 4 GiB copy keeps
 * reusing a few (docs/design.md "One copy") instead of pinning 4 GiB. */
#define COPY_AHEAD ((uint64_t)64 << 20)
/* Handover records smaller than BATCH_RECORD are gathered into one frame;
 * the batch goes out when it reaches BATCH_FLUSH bytes, when anything needs
 * an answer or a wait, when the program submits after a pause of
 * BATCH_PAUSE_NS or after a wait (an isolated launch leaves at once, and
 * a launch-and-synchronize loop never wakes the keeper), or at the
 * keeper's next 1 ms tick. */
#define BATCH_CAP ((size_t)256 << 10)
#define BATCH_FLUSH ((size_t)128 << 10)
#define BATCH_RECORD ((size_t)16 << 10)
#define BATCH_PAUSE_NS 50000

struct pending_answer {
    pending_answer *next;
    bool done;
    frame answer;
};

struct pending_copy {
    pending_copy *next;
    uint64_t stream, value;
    void *dst;
    size_t len;
    size_t pitch, width;        /* rows of width bytes every pitch; 0: flat */
};

struct pending_host {
    pending_host *next;
    uint64_t stream, value;
    CUhostFn fn;
    void *data;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Records the job's root cause once per process and wakes every waiter. */
static void link_fail_as(agent_link *l, CUresult code, bool tell_agent, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define link_fail(l, code, ...) link_fail_as(l, code, true, __VA_ARGS__)

/* The job's first failure is reported before any link shows one: a link
 * failing after it waits for the report line, or a program exiting on that
 * link's error could end before the line (rig would not restart the job).
 * The reporter takes no lock but its own link's and this one's. */
static pthread_mutex_t reported_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reported_cond = PTHREAD_COND_INITIALIZER;
static bool reported;
/* The job's root cause, for the agents of links that did not fail: at the
 * program's end they hear it as an abort, not an orderly close. Written
 * once, before reported. */
static char job_cause[512];

static void link_fail_as(agent_link *l, CUresult code, bool tell_agent, const char *fmt, ...)
{
    static int said;
    pthread_mutex_lock(&l->lock);
    if (!l->failed) {
        l->failed = true;
        l->failure = code;
        l->abort_wanted = tell_agent;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->cause, sizeof l->cause, fmt, ap);
        va_end(ap);
        bool first = !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED);
        if (first) {
            shim_log(SHIM_LOG_ERROR, "job failed: %s", l->cause);
            report_failed(l->cause);
        }
        pthread_mutex_lock(&reported_lock);
        if (first) {
            snprintf(job_cause, sizeof job_cause, "%s", l->cause);
            reported = true;
            pthread_cond_broadcast(&reported_cond);
        }
        while (!reported)
            pthread_cond_wait(&reported_cond, &reported_lock);
        pthread_mutex_unlock(&reported_lock);
        l->cause_told = true;
    }
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
}

CUresult link_status(agent_link *l)
{
    pthread_mutex_lock(&l->lock);
    CUresult rc = l->failed ? l->failure : CUDA_SUCCESS;
    bool tell = l->failed && !l->cause_told;
    l->cause_told = l->cause_told || l->failed;
    pthread_mutex_unlock(&l->lock);
    /* A job failed without a word yet (a fork's child) says why on first use. */
    if (tell)
        shim_log(SHIM_LOG_ERROR, "job failed: %s", l->cause);
    return rc;
}

/* The sticky error an abort names ("CUDA:0: CUDA_ERROR_ILLEGAL_ADDRESS in
 * kernel k"), or device-unavailable when it names none. */
static CUresult error_in(const char *cause)
{
    const char *at = strstr(cause, "CUDA_ERROR_");
    if (!at)
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    size_t len = strspn(at, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
    for (int code = 1; code < 1000; code++) {
        const char *name = NULL;
        if (cuGetErrorName((CUresult)code, &name) == CUDA_SUCCESS && name && strlen(name) == len &&
            strncmp(name, at, len) == 0)
            return (CUresult)code;
    }
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

/* After a failure found here: the keeper sends the abort; meanwhile read and
 * discard until the agent ends its side (at most 10 s), so our close cannot
 * reset the connection under the abort. */
static void linger(agent_link *l)
{
    conn_drain(&l->c, deadline_after(10000));
}

/* ---- the keeper: beats and aborts for every link ---- */

static CUresult send_frame(agent_link *l, frame_kind kind, const struct iovec *iov, int n);
static CUresult flush_locked(agent_link *l);
static CUresult settle_posted(agent_link *l, proxy_obj *s);

static agent_link *registered[256];
static size_t registered_count;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static void send_abort(agent_link *l)
{
    uint8_t buf[JOB_REASON_MAX + 4];
    wire_writer w = wire_writer_init(buf, sizeof buf);
    pthread_mutex_lock(&l->lock);
    size_t n = strnlen(l->cause, sizeof l->cause);
    wire_put_string(&w, l->cause, n);
    pthread_mutex_unlock(&l->lock);
    struct iovec iov = { buf, w.off };
    conn_sendv(&l->c, FRAME_ABORT, &iov, 1, deadline_after(2000), NULL);
    shutdown(l->c.fd, SHUT_WR);
}

/* The keeper sleeps 100 ms at a time, or 1 ms while a batch waits to go
 * out; a submitter that leaves records behind wakes it. */
static pthread_mutex_t keeper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t keeper_wake = PTHREAD_COND_INITIALIZER;
static bool batch_waiting;

static void wake_keeper(void)
{
    pthread_mutex_lock(&keeper_lock);
    if (!batch_waiting) {
        batch_waiting = true;
        pthread_cond_signal(&keeper_wake);
    }
    pthread_mutex_unlock(&keeper_lock);
}

/* Batched records left behind by a burst go out, a beat goes on each link
 * that sent nothing for JOB_BEAT_MS, and the abort of each link that failed
 * here. A link busy sending is skipped: its bytes are its beat. */
static void *keeper_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&keeper_lock);
        if (!batch_waiting) {
            struct timespec until = deadline_timespec_in(100);
            pthread_cond_timedwait(&keeper_wake, &keeper_lock, &until);
        }
        bool waiting = batch_waiting;
        batch_waiting = false;
        pthread_mutex_unlock(&keeper_lock);
        if (waiting) {
            /* Let the burst that left records gather a little more. */
            struct timespec gather = { 0, 1000 * 1000 };
            nanosleep(&gather, NULL);
        }
        pthread_mutex_lock(&registry_lock);
        size_t n = registered_count;
        pthread_mutex_unlock(&registry_lock);
        for (size_t i = 0; i < n; i++) {
            agent_link *l = registered[i];
            pthread_mutex_lock(&l->lock);
            bool failed = l->failed, abort_now = l->failed && l->abort_wanted && !l->abort_sent;
            if (abort_now)
                l->abort_sent = true;
            pthread_mutex_unlock(&l->lock);
            if (failed && !abort_now)
                continue;
            if (pthread_mutex_trylock(&l->send_lock) != 0) {
                if (abort_now) {
                    /* A send is stuck: the abort waits for the next tick. */
                    pthread_mutex_lock(&l->lock);
                    l->abort_sent = false;
                    pthread_mutex_unlock(&l->lock);
                }
                continue;
            }
            if (abort_now)
                send_abort(l);
            else if (l->batch_len)
                flush_locked(l);   /* the records' wait for company is over */
            else if (deadline_now_ms() - l->c.last_send_ms >= JOB_BEAT_MS)
                send_frame(l, FRAME_BEAT, NULL, 0);
            pthread_mutex_unlock(&l->send_lock);
        }
    }
    return NULL;
}

static void start_keeper(void)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &attr, keeper_main, NULL);
    pthread_attr_destroy(&attr);
}

/* A child of fork shares the parent's connections but not its threads: its
 * job is failed from the start, and it never writes to them (the parent's
 * job goes on). Locks another thread held at the fork are made anew. */
static void after_fork_child(void)
{
    pthread_mutex_init(&registry_lock, NULL);
    pthread_mutex_init(&reported_lock, NULL);
    pthread_cond_init(&reported_cond, NULL);
    reported = true;   /* a fork reports nothing (proto/report.c): none to wait for */
    for (size_t i = 0; i < registered_count; i++) {
        agent_link *l = registered[i];
        pthread_mutex_init(&l->send_lock, NULL);
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->changed, NULL);
        pthread_cond_init(&l->cb_ready, NULL);
        pthread_cond_init(&l->rx_idle, NULL);
        l->reading = false;
        l->waiters = 0;
        l->cb_head = l->cb_tail = NULL;
        l->failed = true;
        l->failure = CUDA_ERROR_DEVICE_UNAVAILABLE;
        l->abort_wanted = false;
        l->cause_told = false;
        l->answers_head = l->answers_tail = NULL;
        snprintf(l->cause, sizeof l->cause, "%s: this process is a fork of the job's program; its proxies stay with the parent",
                 l->name);
    }
    registered_count = 0;
}

static void start_once(void)
{
    start_keeper();
    pthread_atfork(NULL, NULL, after_fork_child);
}

static void register_link(agent_link *l)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_mutex_lock(&registry_lock);
    if (registered_count < sizeof registered / sizeof registered[0])
        registered[registered_count++] = l;
    pthread_mutex_unlock(&registry_lock);
    pthread_once(&once, start_once);
}

/* ---- receiving ---- */

/* Counts a stream as reached up to value; the caller holds l->lock. */
static void reach_locked(agent_link *l, proxy_obj *s, uint64_t value, uint64_t bytes)
{
    timeline *t = &s->u.stream.tl;
    if (bytes > t->bytes_reported && bytes <= t->bytes_submitted) {
        uint64_t delta = bytes - t->bytes_reported;
        l->unreported_bytes -= delta < l->unreported_bytes ? delta : l->unreported_bytes;
        t->bytes_reported = bytes;
    }
    if (value > atomic_load(&t->reached))
        atomic_store(&t->reached, value);
    pthread_cond_broadcast(&l->changed);
    if (l->cb_head)
        pthread_cond_signal(&l->cb_ready);   /* a word may have waited for this one */
}

/* A wait of a stream, from value after, for stream on to reach value. */
typedef struct stream_dep {
    struct stream_dep *next;
    uint64_t after;
    proxy_obj *on;
    uint64_t value;
} stream_dep;

/* Where the oldest host function of stream id waits in l->hosts (NULL:
 * none), and the one before it. A stream's come in the order of their
 * values, so nothing past it is due earlier: a search for one due stops
 * here instead of walking thousands. Under l->lock. */
static pending_host **first_host_locked(agent_link *l, uint64_t id, pending_host **before)
{
    pending_host *prev = NULL;
    for (pending_host **pp = &l->hosts; *pp; prev = *pp, pp = &(*pp)->next)
        if ((*pp)->stream == id) {
            if (before)
                *before = prev;
            return pp;
        }
    return NULL;
}

/* Whether a host function of stream id is due at or before value. */
static bool host_due_locked(agent_link *l, uint64_t id, uint64_t value)
{
    pending_host **pp = first_host_locked(l, id, NULL);
    return pp && (*pp)->value <= value;
}

void link_stream_depends(agent_link *l, proxy_obj *s, uint64_t after, proxy_obj *on, uint64_t value)
{
    pthread_mutex_lock(&l->lock);
    /* Only a host function still to run in the program can hold on back
     * here; the agent's own ordering covers everything else. */
    bool held = on->u.stream.deferred > 0 || host_due_locked(l, on->id, value);
    stream_dep *d = held ? malloc(sizeof *d) : NULL;
    if (d) {
        *d = (stream_dep){ s->u.stream.deps, after, on, value };
        s->u.stream.deps = d;
    }
    pthread_mutex_unlock(&l->lock);
    if (held && !d)
        shim_log(SHIM_LOG_WARN, "agent %s: no memory to order a stream after a host function; it may be seen "
                 "reached early", l->name);
}

/* True when s's value must not count yet: it is at or past a wait for a
 * stream that has not got there. Waits already met are dropped. Under
 * l->lock. */
static bool held_locked(proxy_obj *s, uint64_t value)
{
    bool held = false;
    for (stream_dep **pp = &s->u.stream.deps; *pp;) {
        stream_dep *d = *pp;
        if (atomic_load(&d->on->u.stream.tl.reached) >= d->value) {
            *pp = d->next;
            free(d);
            continue;
        }
        held |= d->after <= value;
        pp = &d->next;
    }
    return held;
}

/* A word for a stream with host functions to run first. */
typedef struct completion {
    struct completion *next;
    proxy_obj *stream;
    uint64_t value, bytes;
} completion;

/* Host functions run on a thread of their own: one that waits (for
 * another stream, or for a while) must not stop the words and answers
 * behind it. A stream's words wait for its host functions, in order. */
static void *callbacks_main(void *arg)
{
    agent_link *l = arg;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        /* The first word whose stream has no earlier one queued and waits
         * for no other stream (held_locked) goes next. */
        completion **cp = NULL, *before = NULL;
        while (!cp) {
            for (completion **pp = &l->cb_head, *prev = NULL; *pp && !cp; prev = *pp, pp = &(*pp)->next) {
                bool earlier = false;
                for (completion *e = l->cb_head; e != *pp && !earlier; e = e->next)
                    earlier = e->stream == (*pp)->stream;
                if (!earlier && !held_locked((*pp)->stream, (*pp)->value)) {
                    cp = pp;
                    before = prev;
                }
            }
            if (cp || (!l->cb_head && l->cb_stop))
                break;
            pthread_cond_wait(&l->cb_ready, &l->lock);
        }
        if (!cp)
            break;   /* link_open failed */
        completion *c = *cp;
        *cp = c->next;
        if (l->cb_tail == c)
            l->cb_tail = before;
        uint64_t id = c->stream->id;
        for (;;) {
            pending_host *prev = NULL, **pp = first_host_locked(l, id, &prev), *h = pp ? *pp : NULL;
            if (!h || h->value > c->value)
                break;
            *pp = h->next;
            if (l->hosts_last == h)
                l->hosts_last = prev;
            pthread_mutex_unlock(&l->lock);
            /* What the stream's work wrote before it, the function sees. */
            shim_managed_synced(l);
            h->fn(h->data);
            free(h);
            pthread_mutex_lock(&l->lock);
        }
        reach_locked(l, c->stream, c->value, c->bytes);
        c->stream->u.stream.deferred--;
        free(c);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* The oldest value of stream id still waiting for its bytes (0: none);
 * the caller holds l->lock. */
static uint64_t first_copy_locked(agent_link *l, uint64_t id)
{
    for (pending_copy *c = l->copies; c; c = c->next)
        if (c->stream == id)
            return c->value;
    return 0;
}

static void apply_words(agent_link *l, const frame *f)
{
    rig_why why = { "" };
    size_t count;
    if (shim_decode_words(f->payload, f->len, &count, &why) < 0) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why.text);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        shim_word w = shim_word_at(f->payload, i);
        proxy_obj *s = arena_from_id(w.stream);
        if (!s || s->type != PROXY_STREAM || s->link != l) {
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: a word names stream %llu, which this job does not hold",
                      l->name, (unsigned long long)w.stream);
            return;
        }
        timeline *t = &s->u.stream.tl;
        pthread_mutex_lock(&l->lock);
        shim_stream_view v = { __atomic_load_n(&t->submitted, __ATOMIC_ACQUIRE),
                               __atomic_load_n(&t->bytes_submitted, __ATOMIC_ACQUIRE), t->word_value, t->word_bytes,
                               first_copy_locked(l, w.stream) };
        pthread_mutex_unlock(&l->lock);
        if (shim_check_word(&w, &v, &why) < 0) {
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why.text);
            return;
        }
        t->word_value = w.value;
        t->word_bytes = w.bytes;
        uint64_t id = w.stream, value = w.value, bytes = w.bytes;
        pthread_mutex_lock(&l->lock);
        /* Host functions up to this value run before the value counts as
         * reached, so a sync after it sees their effects. */
        bool defer = s->u.stream.deferred > 0 || held_locked(s, value) || host_due_locked(l, id, value);
        completion *c = defer ? malloc(sizeof *c) : NULL;
        if (defer && !c) {
            /* Reaching the value now would run ahead of its host functions. */
            pthread_mutex_unlock(&l->lock);
            link_fail(l, CUDA_ERROR_OUT_OF_MEMORY, "%s: no memory to hold stream %llu at value %llu for its host functions",
                      l->name, (unsigned long long)id, (unsigned long long)value);
            return;
        }
        if (c) {
            *c = (completion){ NULL, s, value, bytes };
            if (l->cb_tail)
                l->cb_tail->next = c;
            else
                l->cb_head = c;
            l->cb_tail = c;
            s->u.stream.deferred++;
            pthread_cond_signal(&l->cb_ready);
        } else {
            reach_locked(l, s, value, bytes);
        }
        pthread_mutex_unlock(&l->lock);
    }
}

bool link_on_softgpu(const agent_link *l)
{
    return strcmp(l->driver, "softgpu") == 0;   /* the agent's backend kind (agent/backend.c) */
}

/* The orderly end, at either side's close: every later call fails with
 * CUDA_ERROR_DEINITIALIZED, as the driver's do once torn down, and nothing
 * is reported as a failure. A failure already there stays. */
static void end_closed(agent_link *l)
{
    pthread_mutex_lock(&l->lock);
    if (!l->failed) {
        l->failed = true;
        l->failure = CUDA_ERROR_DEINITIALIZED;
        l->cause_told = true;
        snprintf(l->cause, sizeof l->cause, "%s: closed", l->name);
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->lock);
}

/* Fails the job for a receive that broke off (conn_recv's errors). */
static void recv_failed(agent_link *l, int rc, const rig_why *why)
{
    if (rc == RIG_E_CLOSED)
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: closed its connection (%s)", l->name, why->text);
    else if (rc == RIG_E_TIMEOUT)
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: silent for %d s", l->name, JOB_SILENCE_MS / 1000);
    else
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why->text);
}

/* Device printf output, for this program's stdout. */
static void write_output(agent_link *l, const uint8_t *head, size_t head_len)
{
    uint8_t buf[64 << 10];
    const uint8_t *p = head;
    size_t n = head_len;
    for (;;) {
        for (size_t off = 0; off < n;) {
            ssize_t w = write(1, p + off, n - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        uint64_t rest = conn_rest(&l->c);
        if (!rest)
            return;
        n = rest < sizeof buf ? (size_t)rest : sizeof buf;
        rig_why why = { "" };
        int rc = conn_recv_rest(&l->c, buf, n, deadline_after(-1), JOB_SILENCE_MS, &why);
        if (rc < 0) {
            recv_failed(l, rc, &why);
            return;
        }
        p = buf;
    }
}

/* The stored bytes of a compressed chunk: those in the frame's head part,
 * then the rest off the socket, into the link's buffer (kept for the next;
 * only the baton's holder reads). NULL after failing the job. */
static const uint8_t *read_packed(agent_link *l, const copy_bytes_head *b, uint64_t rest)
{
    if (l->packed_cap < b->chunk.stored) {
        uint8_t *p = realloc(l->packed, b->chunk.stored);
        if (!p) {
            link_fail(l, CUDA_ERROR_OUT_OF_MEMORY, "%s: no memory to receive %u compressed bytes", l->name,
                      b->chunk.stored);
            return NULL;
        }
        l->packed = p;
        l->packed_cap = b->chunk.stored;
    }
    memcpy(l->packed, b->data, b->data_len);
    rig_why why = { "" };
    int rc = rest ? conn_recv_rest(&l->c, l->packed + b->data_len, (size_t)rest, deadline_after(-1), JOB_SILENCE_MS,
                                   &why)
                  : 0;
    if (rc < 0) {
        recv_failed(l, rc, &why);
        return NULL;
    }
    return l->packed;
}

/* A bytes frame arrives split after its head (receiver_main): a raw
 * chunk's bytes are read from the socket straight into the program's
 * destination, no buffer and no copy between; a compressed chunk's are read into
 * the link's buffer and decoded into place. The copy ran on the device
 * before the agent sent it, so these are the bytes CUDA writes there; the
 * word of its value follows. */
static void apply_bytes(agent_link *l, const frame *f)
{
    rig_why why = { "" };
    copy_bytes_head b;
    uint64_t rest = conn_rest(&l->c);
    if (copy_bytes_read(f->payload, f->len, f->len + rest, &b, &why) < 0) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why.text);
        return;
    }
    uint64_t n = b.chunk.original;
    if (b.stream == 0) {
        write_output(l, b.data, b.data_len);
        return;
    }
    pthread_mutex_lock(&l->lock);
    pending_copy **pp = &l->copies, *c = NULL, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->next)
        if ((*pp)->stream == b.stream && (*pp)->value == b.value) {
            c = *pp;
            *pp = c->next;
            if (l->copies_last == c)
                l->copies_last = prev;
            break;
        }
    pthread_mutex_unlock(&l->lock);
    if (!c || c->len != n) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %llu bytes for stream %llu at value %llu, a copy this job %s",
                  l->name, (unsigned long long)n, (unsigned long long)b.stream, (unsigned long long)b.value,
                  c ? "expects in another size" : "did not ask for");
        free(c);
        return;
    }
    int rc = 0;
    const uint8_t *packed = NULL;
    if (b.chunk.method != COMPRESS_RAW) {
        if (!(packed = read_packed(l, &b, rest))) {
            free(c);
            return;
        }
        __atomic_add_fetch(&l->compressed_in_bytes, n, __ATOMIC_RELAXED);
        __atomic_add_fetch(&l->compressed_in_stored, b.chunk.stored, __ATOMIC_RELAXED);
    }
    if (!c->width) {
        if (packed) {
            rc = compress_body_decode(&b.chunk, packed, c->dst, c->len, &why);
        } else {
            memcpy(c->dst, b.data, b.data_len);
            if (rest)
                rc = conn_recv_rest(&l->c, (uint8_t *)c->dst + b.data_len, (size_t)rest, deadline_after(-1),
                                    JOB_SILENCE_MS, &why);
        }
    } else {
        /* Rows go through a buffer: a receive per row would cost a system
         * call each. */
        const uint8_t *from = b.data;
        uint8_t *tmp = rest || packed ? malloc(n) : NULL;
        if ((rest || packed) && !tmp) {
            link_fail(l, CUDA_ERROR_OUT_OF_MEMORY, "%s: no memory to receive %llu bytes of rows", l->name,
                      (unsigned long long)n);
            free(c);
            return;
        }
        if (packed) {
            rc = compress_body_decode(&b.chunk, packed, tmp, n, &why);
            from = tmp;
        } else if (tmp) {
            memcpy(tmp, b.data, b.data_len);
            rc = conn_recv_rest(&l->c, tmp + b.data_len, (size_t)rest, deadline_after(-1), JOB_SILENCE_MS, &why);
            from = tmp;
        }
        for (size_t off = 0, row = 0; rc == 0 && off < n; off += c->width, row++)
            memcpy((uint8_t *)c->dst + row * c->pitch, from + off, c->width);
        free(tmp);
    }
    if (rc < 0) {
        if (packed)   /* the agent's chunk would not decode */
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: bytes for stream %llu at value %llu: %s", l->name,
                      (unsigned long long)b.stream, (unsigned long long)b.value, why.text);
        else if (rc == RIG_E_IO)   /* EFAULT: a destination the program cannot write */
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: receiving %llu bytes for %p: %s", l->name,
                      (unsigned long long)n, c->dst, why.text);
        else
            recv_failed(l, rc, &why);
        free(c);
        return;
    }
    pthread_mutex_lock(&l->lock);
    l->copy_bytes_pending -= c->len;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->lock);
    free(c);
}

static void apply_answer(agent_link *l, frame *f)
{
    pthread_mutex_lock(&l->lock);
    pending_answer *p = l->answers_head;
    if (p) {
        l->answers_head = p->next;
        if (!l->answers_head)
            l->answers_tail = NULL;
        p->answer = *f;
        p->done = true;
        *f = (frame){ 0 };
        pthread_cond_broadcast(&l->changed);
    }
    pthread_mutex_unlock(&l->lock);
    if (!p)
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: an answer to no request", l->name);
}

/* Reads one frame and applies it; the caller holds the reading baton
 * (l->reading). 1: a frame was applied; 0: the deadline passed before a
 * whole frame came (the part read stays in the decoder for the next
 * reader); -1: the read side is over (the job failed or closed). */
static int receive_one(agent_link *l, int64_t deadline)
{
    frame f = { 0 };
    rig_why why = { "" };
    /* A bytes frame stops after its head: apply_bytes reads its data
     * straight into the copy's destination. */
    int rc = conn_recv_split(&l->c, &f, FRAME_BYTES, COPY_BYTES_HEAD, 0, deadline, JOB_SILENCE_MS, &why);
    if (rc == RIG_E_TIMEOUT && deadline_now_ms() - l->c.last_recv_ms < JOB_SILENCE_MS)
        return 0;
    if (rc < 0) {
        if (rc == RIG_E_CLOSED)
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: closed its connection", l->name);
        else if (rc == RIG_E_TIMEOUT)
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: silent for %d s", l->name, JOB_SILENCE_MS / 1000);
        else if (rc == RIG_E_NOMEM)   /* this process's memory, not the agent's fault */
            link_fail(l, CUDA_ERROR_OUT_OF_MEMORY, "receiving from %s: %s", l->name, why.text);
        else
            link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why.text);
        /* The receiver thread lingers, never a waiting program thread. */
        pthread_mutex_lock(&l->lock);
        l->rx_linger = true;
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    switch (f.kind) {
    case FRAME_ANSWER: apply_answer(l, &f); break;
    case FRAME_WORD: apply_words(l, &f); break;
    case FRAME_BYTES: apply_bytes(l, &f); break;
    case FRAME_BEAT: break;
    case FRAME_ABORT: {
        char cause[JOB_REASON_MAX + 1];
        if (shim_decode_reason(f.payload, f.len, cause, &why) < 0)
            link_fail_as(l, CUDA_ERROR_DEVICE_UNAVAILABLE, false, "%s aborted with a malformed reason: %s", l->name,
                         why.text);
        else
            link_fail_as(l, error_in(cause), false, "%s aborted: %s", l->name, cause);
        frame_release(&f);
        /* End our side too, so the agent's wait for it ends. */
        shutdown(l->c.fd, SHUT_WR);
        return -1;
    }
    case FRAME_CLOSE:
        frame_release(&f);
        end_closed(l);
        return -1;
    default:
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: sent a %s message, which agents never send", l->name,
                  frame_kind_name(f.kind));
        frame_release(&f);
        return -1;
    }
    frame_release(&f);
    pthread_mutex_lock(&l->lock);
    bool stop = l->failed;
    pthread_mutex_unlock(&l->lock);
    return stop ? -1 : 1;
}

/* The reader baton: a program thread that waits for an answer or a word
 * reads the socket itself, so the answer wakes it straight from the network
 * (one wake-up per round trip, as plain TCP). The receiver reads only while
 * no such thread waits. The caller holds l->lock; done(arg) is checked
 * under it. A waiter whose value another thread may reach (a host
 * function's stream) leaves the reading to others. */
static void wait_reading(agent_link *l, bool (*done)(agent_link *, const void *),
                         bool (*may_read)(agent_link *, const void *), const void *arg)
{
    while (!done(l, arg) && !l->failed) {
        if (l->reading || (may_read && !may_read(l, arg))) {
            pthread_cond_wait(&l->changed, &l->lock);
            continue;
        }
        l->reading = true;
        l->waiters++;
        pthread_mutex_unlock(&l->lock);
        l->c.spin_ns = shim_wait_spin_ns();   /* this thread's context's way of waiting */
        /* Bounded, so a failure found by another thread is seen soon. */
        receive_one(l, deadline_after(100));
        pthread_mutex_lock(&l->lock);
        l->waiters--;
        l->reading = false;
        /* Another waiter may take the baton over. */
        pthread_cond_broadcast(&l->changed);
    }
}

/* Reads while no program thread waits: words for streams nobody syncs,
 * bytes, beats, device output, an abort. It looks at the socket without the
 * baton and takes it only when no waiter has: a thread that starts waiting
 * meanwhile reads its answer itself. While threads wait it sleeps in steps
 * of RECEIVER_IDLE_MS rather than being woken by each one that leaves. */
#define RECEIVER_IDLE_MS 2
static void *receiver_main(void *arg)
{
    agent_link *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->failed) {
        if (l->reading || l->waiters) {
            struct timespec until = deadline_timespec_in(RECEIVER_IDLE_MS);
            pthread_cond_timedwait(&l->rx_idle, &l->lock, &until);
            continue;
        }
        /* Nobody reads, so last_recv_ms holds still. */
        int64_t silent_at = l->c.last_recv_ms + JOB_SILENCE_MS;
        bool buffered = conn_buffered(&l->c);
        pthread_mutex_unlock(&l->lock);
        int64_t left = silent_at - deadline_now_ms();
        struct pollfd p = { .fd = l->c.fd, .events = POLLIN };
        int ready = buffered ? 1 : poll(&p, 1, left <= 0 ? 0 : left > 1000 ? 1000 : (int)left);
        pthread_mutex_lock(&l->lock);
        if (l->reading || l->waiters || l->failed)
            continue;
        if (ready == 0 && deadline_now_ms() < silent_at)
            continue;
        l->reading = true;
        pthread_mutex_unlock(&l->lock);
        l->c.spin_ns = shim_wait_spin_ns();
        /* Bytes are there (or the silence is over): a short bound. */
        int r = receive_one(l, deadline_after(ready > 0 ? 100 : 0));
        pthread_mutex_lock(&l->lock);
        l->reading = false;
        pthread_cond_broadcast(&l->changed);
        if (r < 0)
            break;
    }
    /* A waiter that met the end lets the socket go before the drain. */
    while (l->rx_linger && l->reading)
        pthread_cond_wait(&l->changed, &l->lock);
    bool lingers = l->rx_linger;
    pthread_mutex_unlock(&l->lock);
    if (lingers)
        linger(l);
    return NULL;
}

/* ---- sending ---- */

static CUresult send_frame(agent_link *l, frame_kind kind, const struct iovec *iov, int n)
{
    rig_why why = { "" };
    int rc = conn_sendv(&l->c, kind, iov, n, deadline_after(JOB_STALL_MS), &why);
    if (rc == RIG_E_CLOSED) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: closed its connection", l->name);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    if (rc < 0) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, why.text);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    return CUDA_SUCCESS;
}

/* Sends the batched records; the caller holds send_lock. */
static CUresult flush_locked(agent_link *l)
{
    if (!l->batch_len)
        return CUDA_SUCCESS;
    struct iovec iov = { l->batch, l->batch_len };
    CUresult rc = send_frame(l, FRAME_HANDOVER, &iov, 1);
    __atomic_store_n(&l->batch_len, 0, __ATOMIC_RELEASE);
    l->last_flush_ns = now_ns();
    return rc;
}

CUresult link_flush(agent_link *l)
{
    if (!__atomic_load_n(&l->batch_len, __ATOMIC_ACQUIRE))
        return CUDA_SUCCESS;
    pthread_mutex_lock(&l->send_lock);
    CUresult rc = flush_locked(l);
    pthread_mutex_unlock(&l->send_lock);
    return rc;
}

/* Splits an answer payload: u8 0 + u32 result + outputs, or u8 1 + why. */
static CUresult read_answer(agent_link *l, const frame *f, const uint8_t **out, size_t *out_len)
{
    rig_why why = { "" };
    shim_answer a;
    if (shim_decode_answer(f->payload, f->len, &a, &why) < 0) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: malformed answer: %s", l->name, why.text);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    if (a.refused) {
        link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s refused a request: %s", l->name, a.why);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    *out = a.out;
    *out_len = a.out_len;
    return (CUresult)a.result;
}

CUresult link_malformed(agent_link *l, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    link_fail(l, CUDA_ERROR_DEVICE_UNAVAILABLE, "%s: %s", l->name, what);
    return CUDA_ERROR_DEVICE_UNAVAILABLE;
}

static bool answer_done(agent_link *l, const void *arg)
{
    (void)l;
    return ((const pending_answer *)arg)->done;
}

typedef struct stream_goal {
    proxy_obj *stream;
    uint64_t value;
} stream_goal;

static bool stream_done(agent_link *l, const void *arg)
{
    (void)l;
    const stream_goal *g = arg;
    return atomic_load(&g->stream->u.stream.tl.reached) >= g->value;
}

/* A value held back for host functions is reached by the host-function
 * thread, not by a frame: its waiter must not sit in a read. */
static bool stream_may_read(agent_link *l, const void *arg)
{
    const stream_goal *g = arg;
    return g->stream->u.stream.deferred == 0 && !host_due_locked(l, g->stream->id, g->value);
}

CUresult link_request(agent_link *l, const struct iovec *iov, int n, frame *answer, const uint8_t **out,
                      size_t *out_len)
{
    pending_answer p = { 0 };
    *answer = (frame){ 0 };
    *out = NULL;
    *out_len = 0;
    int64_t start = now_ns();
    CUresult failed = settle_posted(l, NULL);
    if (failed)
        return failed;
    pthread_mutex_lock(&l->send_lock);
    pthread_mutex_lock(&l->lock);
    if (l->failed) {
        CUresult rc = l->failure;
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->send_lock);
        return rc;
    }
    if (l->answers_tail)
        l->answers_tail->next = &p;
    else
        l->answers_head = &p;
    l->answers_tail = &p;
    l->calls++;
    l->round_trips++;
    pthread_mutex_unlock(&l->lock);
    CUresult rc = flush_locked(l);
    if (rc == CUDA_SUCCESS)
        rc = send_frame(l, FRAME_REQUEST, iov, n);
    pthread_mutex_unlock(&l->send_lock);

    pthread_mutex_lock(&l->lock);
    wait_reading(l, answer_done, NULL, &p);
    if (!p.done) {
        /* Take our entry out so the receiver never touches this frame again. */
        pending_answer **pp = &l->answers_head, *prev = NULL;
        for (; *pp; prev = *pp, pp = &(*pp)->next)
            if (*pp == &p) {
                *pp = p.next;
                if (l->answers_tail == &p)
                    l->answers_tail = prev;
                break;
            }
        rc = l->failure;
    }
    l->wait_ns += (uint64_t)(now_ns() - start);
    pthread_mutex_unlock(&l->lock);
    __atomic_store_n(&l->waited, true, __ATOMIC_RELAXED);   /* the agent read all before the request */
    if (!p.done)
        return rc ? rc : CUDA_ERROR_DEVICE_UNAVAILABLE;
    *answer = p.answer;
    return read_answer(l, answer, out, out_len);
}

bool link_may_post(agent_link *l, proxy_obj *s)
{
    timeline *t = &s->u.stream.tl;
    pthread_mutex_lock(&l->lock);
    bool only_posted = l->posted_stream == s && __atomic_load_n(&t->submitted, __ATOMIC_ACQUIRE) == l->posted_value &&
                       l->unreported_bytes == __atomic_load_n(&t->bytes_submitted, __ATOMIC_ACQUIRE) - t->bytes_reported;
    bool may = !l->failed && (l->unreported_bytes == 0 || only_posted);
    pthread_mutex_unlock(&l->lock);
    return may;
}

CUresult link_post(agent_link *l, proxy_obj *s, uint64_t value)
{
    pthread_mutex_lock(&l->lock);
    l->posted_stream = s;
    l->posted_value = value;
    pthread_mutex_unlock(&l->lock);
    return link_flush(l);
}

/* Waits for the posted copy unless s is its stream (whose later work is
 * ordered after it anyway); then the job's error, if it failed. */
static CUresult settle_posted(agent_link *l, proxy_obj *s)
{
    pthread_mutex_lock(&l->lock);
    proxy_obj *p = l->posted_stream;
    uint64_t v = l->posted_value;
    pthread_mutex_unlock(&l->lock);
    if (!p || p == s)
        return link_status(l);
    CUresult rc = link_wait(l, p, v);
    pthread_mutex_lock(&l->lock);
    if (rc == CUDA_SUCCESS && l->posted_stream == p && l->posted_value == v)
        l->posted_stream = NULL;
    pthread_mutex_unlock(&l->lock);
    return rc;
}

bool link_reached(proxy_obj *stream, uint64_t value)
{
    if (atomic_load(&stream->u.stream.tl.reached) >= value) {
        shim_managed_synced(stream->link);   /* the program is ordered after it */
        return true;
    }
    /* Whoever asks is about to wait or poll: what they wait for must leave. */
    link_flush(stream->link);
    return false;
}

CUresult link_wait(agent_link *l, proxy_obj *stream, uint64_t value)
{
    if (link_reached(stream, value))
        return link_status(l);
    int64_t start = now_ns();
    pthread_mutex_lock(&l->lock);
    stream_goal goal = { stream, value };
    wait_reading(l, stream_done, stream_may_read, &goal);
    CUresult rc = l->failed ? l->failure : CUDA_SUCCESS;
    l->wait_ns += (uint64_t)(now_ns() - start);
    pthread_mutex_unlock(&l->lock);
    __atomic_store_n(&l->waited, true, __ATOMIC_RELAXED);   /* the agent has caught up */
    if (rc == CUDA_SUCCESS)
        shim_managed_synced(l);
    return rc;
}

CUresult link_wait_program_writes(agent_link *l, proxy_obj *s)
{
    uint64_t pw = __atomic_load_n(&s->u.stream.tl.program_writes, __ATOMIC_ACQUIRE);
    return pw && !link_reached(s, pw) ? link_wait(l, s, pw) : CUDA_SUCCESS;
}

/* Waits until a copy of len bytes into the program fits under COPY_AHEAD
 * (one always fits when none is pending). Records still batched are what
 * brings the bytes, so they go first. */
static CUresult wait_copy_room(agent_link *l, size_t len)
{
    pthread_mutex_lock(&l->lock);
    bool full = l->copy_bytes_pending && l->copy_bytes_pending + len > COPY_AHEAD;
    pthread_mutex_unlock(&l->lock);
    if (!full)
        return CUDA_SUCCESS;
    CUresult rc = link_flush(l);
    if (rc)
        return rc;
    pthread_mutex_lock(&l->lock);
    while (l->copy_bytes_pending && l->copy_bytes_pending + len > COPY_AHEAD && !l->failed)
        pthread_cond_wait(&l->changed, &l->lock);
    pthread_mutex_unlock(&l->lock);
    return CUDA_SUCCESS;
}

CUresult link_handover(agent_link *l, const handover *h, uint64_t *value)
{
    proxy_obj *s = h->stream;
    /* The bytes read now must be the ones CUDA would read: earlier work on
     * this stream that writes program memory goes first. */
    if (s && h->reads_program) {
        CUresult rc = link_wait_program_writes(l, s);
        if (rc)
            return rc;
    }
    size_t record = h->body_len + h->data_len;
    CUresult failed = settle_posted(l, s);
    if (failed)
        return failed;
    /* The records the receiver needs, before anything is counted or sent. */
    pending_copy *c = h->dst ? malloc(sizeof *c) : NULL;
    pending_host *hp = h->host_fn ? malloc(sizeof *hp) : NULL;
    if ((h->dst && !c) || (h->host_fn && !hp)) {
        free(c);
        free(hp);
        shim_log(SHIM_LOG_ERROR, "agent %s: no memory to record a %s of stream work", l->name,
                 h->dst ? "copy into the program" : "host function");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (h->dst && (failed = wait_copy_room(l, h->dst_len))) {
        free(c);
        free(hp);
        return failed;
    }
    /* A piece after a quiet one goes on: the word that reports its copy's
     * quiet pieces comes only after a later piece (at most COPY_QUIET_RUN
     * bytes of each copy in progress wait for it). */
    pthread_mutex_lock(&l->lock);
    while (!h->after_quiet && l->unreported_bytes > UNREPORTED_LIMIT && !l->failed)
        pthread_cond_wait(&l->changed, &l->lock);
    pthread_mutex_unlock(&l->lock);

    pthread_mutex_lock(&l->send_lock);
    uint64_t v = 0;
    if (s) {
        timeline *t = &s->u.stream.tl;
        /* Atomic: the receiver reads both to judge the agent's words. */
        v = __atomic_add_fetch(&t->submitted, 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&t->bytes_submitted, record, __ATOMIC_RELEASE);
        if (h->dst || h->host_fn)
            __atomic_store_n(&t->program_writes, v, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&l->lock);
    if (l->failed) {
        CUresult rc = l->failure;
        pthread_mutex_unlock(&l->lock);
        pthread_mutex_unlock(&l->send_lock);
        free(c);
        free(hp);
        return rc;
    }
    if (c) {
        /* Appended: values grow in this order on each stream. */
        *c = (pending_copy){ NULL, s->id, v, h->dst, h->dst_len, h->dst_pitch, h->dst_width };
        if (l->copies_last)
            l->copies_last->next = c;
        else
            l->copies = c;
        l->copies_last = c;
        l->copy_bytes_pending += h->dst_len;
    }
    if (hp) {
        *hp = (pending_host){ NULL, s->id, v, h->host_fn, h->host_data };
        /* Appended, so host functions of one stream run in order. */
        if (l->hosts_last)
            l->hosts_last->next = hp;
        else
            l->hosts = hp;
        l->hosts_last = hp;
    }
    if (s)
        l->unreported_bytes += record;
    l->calls++;
    pthread_mutex_unlock(&l->lock);

    uint8_t head[rec_record_head_size];
    wire_writer w = wire_writer_init(head, sizeof head);
    rec_record_head_put(&w, &(rec_record_head){ .op = h->op, .length = (uint32_t)record, .stream = s ? s->id : h->object,
                                                .value = v });
    CUresult rc;
    if (record >= BATCH_RECORD || !l->batch) {
        /* Large: straight from the caller's memory, no copy. */
        rc = flush_locked(l);
        struct iovec iov[3] = { { head, sizeof head }, { (void *)h->body, h->body_len }, { (void *)h->data, h->data_len } };
        if (rc == CUDA_SUCCESS)
            rc = send_frame(l, FRAME_HANDOVER, iov, h->data_len ? 3 : 2);
        l->last_flush_ns = now_ns();
    } else {
        if (l->batch_len + sizeof head + record > BATCH_CAP)
            flush_locked(l);
        uint8_t *at = l->batch + l->batch_len;
        memcpy(at, head, sizeof head);
        if (h->body_len)
            memcpy(at + sizeof head, h->body, h->body_len);
        if (h->data_len)
            memcpy(at + sizeof head + h->body_len, h->data, h->data_len);
        __atomic_store_n(&l->batch_len, l->batch_len + sizeof head + record, __ATOMIC_RELEASE);
        rc = CUDA_SUCCESS;
        if (l->batch_len >= BATCH_FLUSH || now_ns() - l->last_flush_ns > BATCH_PAUSE_NS ||
            __atomic_exchange_n(&l->waited, false, __ATOMIC_RELAXED))
            rc = flush_locked(l);
        else if (l->batch_len == sizeof head + record)
            wake_keeper();   /* the first record left waiting */
    }
    pthread_mutex_unlock(&l->send_lock);
    if (value)
        *value = v;
    return rc;
}

CUresult link_drop(agent_link *l, uint32_t op, uint64_t object)
{
    uint8_t body[rec_drop_size];
    wire_writer w = wire_writer_init(body, sizeof body);
    rec_drop_put(&w, &(rec_drop){ .op = op, .object = object });
    struct iovec iov = { body, sizeof body };
    CUresult rc = settle_posted(l, NULL);
    if (rc)
        return rc;
    pthread_mutex_lock(&l->send_lock);
    rc = link_status(l);
    if (!rc)
        rc = flush_locked(l);
    if (!rc)
        rc = send_frame(l, FRAME_DROP, &iov, 1);
    pthread_mutex_unlock(&l->send_lock);
    return rc;
}

/* ---- opening ---- */

/* Reserves [base, base + size) here so no host pointer can ever land in it. */
static bool reserve_here(uint64_t base, uint64_t size)
{
    void *p = mmap((void *)(uintptr_t)base, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    if ((uint64_t)(uintptr_t)p != base) {
        munmap(p, size);
        return false;
    }
    return true;
}

/* The next window candidate not yet used by any agent of this process. */
static uint64_t next_candidate = JOB_WINDOW_FIRST;
static pthread_mutex_t candidate_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t take_candidate(void)
{
    pthread_mutex_lock(&candidate_lock);
    uint64_t c = next_candidate;
    if (c < JOB_WINDOW_LAST)
        next_candidate += JOB_WINDOW_SIZE;
    pthread_mutex_unlock(&candidate_lock);
    return c < JOB_WINDOW_LAST ? c : 0;
}

/* One synchronous request/answer before the receiver runs, within one
 * HS_TIMEOUT_MS however many beats the agent sends first. */
static int open_request(agent_link *l, uint64_t base, frame *f, rig_why *why)
{
    uint8_t body[24];
    wire_writer w = wire_writer_init(body, sizeof body);
    wire_put_u32(&w, JOB_OP_OPEN);
    wire_put_u32(&w, l->index);
    wire_put_u64(&w, base);
    wire_put_u64(&w, JOB_WINDOW_SIZE);
    int64_t deadline = deadline_after(HS_TIMEOUT_MS);
    int rc = conn_send(&l->c, FRAME_REQUEST, body, w.off, deadline, why);
    if (rc < 0)
        return rc;
    for (;;) {
        rc = conn_recv(&l->c, f, deadline, -1, why);
        if (rc < 0)
            return rc;
        if (f->kind == FRAME_ANSWER)
            return 0;
        if (f->kind == FRAME_ABORT) {
            char cause[JOB_REASON_MAX + 1];
            rig_why bad = { "" };
            if (shim_decode_reason(f->payload, f->len, cause, &bad) < 0)
                rc = why_set(why, RIG_E_MALFORMED, "aborted with a malformed reason: %s", bad.text);
            else
                rc = why_set(why, RIG_E_REFUSED, "aborted: %s", cause);
            frame_release(f);
            return rc;
        }
        if (f->kind != FRAME_BEAT && f->kind != FRAME_BYTES) {
            rc = why_set(why, RIG_E_MALFORMED, "sent a %s message before answering open", frame_kind_name(f->kind));
            frame_release(f);
            return rc;
        }
        frame_release(f);
    }
}

/* Makes the decoded devices the agent's proxies in the program's table. */
static void adopt_devices(agent_link *l, const shim_open_info *o, shim_device *devs)
{
    l->driver_version = o->driver_version;
    snprintf(l->driver, sizeof l->driver, "%s", o->driver);
    for (uint32_t i = 0; i < o->count; i++) {
        shim_device *d = &devs[i];
        d->proxy = true;
        d->link = l;
        d->remote_ordinal = (int)i;
        snprintf(d->label, sizeof d->label, "CUDA:%u@%s", i, l->name);
    }
    l->device_count = (int)o->count;
}

int link_open(agent_link *l, const char *name, const names_address *addr, uint32_t index, const rig_key *key,
              shim_device *devs, int room, rig_why *why)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->addr = *addr;
    l->index = index;
    l->c.fd = -1;
    pthread_mutex_init(&l->send_lock, NULL);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->changed, NULL);
    pthread_cond_init(&l->cb_ready, NULL);
    pthread_cond_init(&l->rx_idle, NULL);

    /* What a failure gives back at out: the socket before the connection
     * owns it, the window reserved here, the host-function thread. */
    int fd = -1;
    uint64_t base = 0;
    pthread_t callbacks;
    bool callbacks_started = false;
    int rc = net_connect(addr, HS_TIMEOUT_MS, &fd, why);
    if (rc < 0) {
        why_prefix(why, rc, "agent %s", name);
        goto out;
    }
    hs_config cfg = { .key = key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
    rc = hs_dial(fd, &cfg, 0, index, why);
    if (rc < 0) {
        why_prefix(why, rc, "agent %s", name);
        goto out;
    }
    rc = conn_init(&l->c, fd, JOB_FRAME_LIMIT, why);
    if (rc < 0) {
        why_prefix(why, rc, "agent %s", name);
        goto out;
    }
    fd = -1;   /* the connection's now */
    l->batch = malloc(BATCH_CAP);
    if (!l->batch)   /* slower, not wrong: every record goes alone */
        shim_log(SHIM_LOG_WARN, "agent %s: no memory for a %zu-byte handover batch; records go one by one", name,
                 BATCH_CAP);

    for (;;) {
        base = take_candidate();
        if (!base) {
            rc = why_set(why, RIG_E_NOMEM, "agent %s: no free pointer window found on both ends", name);
            goto out;
        }
        if (!reserve_here(base, JOB_WINDOW_SIZE)) {
            base = 0;
            continue;
        }
        frame f = { 0 };
        rc = open_request(l, base, &f, why);
        if (rc < 0) {
            why_prefix(why, rc, "agent %s", name);
            goto out;
        }
        shim_open_info o;
        rc = shim_decode_open(f.payload, f.len, devs, room, &o, why);
        frame_release(&f);
        if (rc < 0) {
            why_prefix(why, rc, "agent %s: malformed answer to open", name);
            goto out;
        }
        if (o.result != CUDA_SUCCESS) {
            rc = why_set(why, RIG_E_REFUSED, "agent %s: opening its devices failed with CUDA error %u", name,
                         o.result);
            goto out;
        }
        if (!o.taken) {
            munmap((void *)(uintptr_t)base, JOB_WINDOW_SIZE);
            base = 0;
            continue;
        }
        l->window_base = base;
        l->window_size = JOB_WINDOW_SIZE;
        adopt_devices(l, &o, devs);
        break;
    }
    if (pthread_create(&callbacks, NULL, callbacks_main, l) != 0) {
        rc = why_set(why, RIG_E_IO, "agent %s: cannot start a host-function thread", name);
        goto out;
    }
    callbacks_started = true;
    if (pthread_create(&l->receiver, NULL, receiver_main, l) != 0) {
        rc = why_set(why, RIG_E_IO, "agent %s: cannot start a receiver thread", name);
        goto out;
    }
    pthread_detach(callbacks);
    l->receiver_started = true;
    register_link(l);
    return 0;

out:
    if (callbacks_started) {
        pthread_mutex_lock(&l->lock);
        l->cb_stop = true;
        pthread_cond_broadcast(&l->cb_ready);
        pthread_mutex_unlock(&l->lock);
        pthread_join(callbacks, NULL);
    }
    for (int i = 0; i < l->device_count; i++) {
        devs[i].proxy = false;
        devs[i].link = NULL;
    }
    l->device_count = 0;
    if (base)
        munmap((void *)(uintptr_t)base, JOB_WINDOW_SIZE);
    l->window_base = l->window_size = 0;
    if (fd >= 0)
        close(fd);
    conn_close(&l->c);   /* the agent ends its side of the job */
    free(l->batch);
    l->batch = NULL;
    return rc;
}

void link_close(agent_link *l)
{
    pthread_mutex_lock(&reported_lock);
    bool job_failed = reported;
    pthread_mutex_unlock(&reported_lock);
    pthread_mutex_lock(&l->send_lock);
    if (!link_status(l) && flush_locked(l) == CUDA_SUCCESS) {
        if (job_failed) {
            /* Another agent failed the job: this one ends with its cause. */
            uint8_t buf[JOB_REASON_MAX + 4];
            wire_writer w = wire_writer_init(buf, sizeof buf);
            wire_put_string(&w, job_cause, strnlen(job_cause, sizeof job_cause));
            struct iovec iov = { buf, w.off };
            send_frame(l, FRAME_ABORT, &iov, 1);
        } else {
            struct iovec none = { NULL, 0 };
            send_frame(l, FRAME_CLOSE, &none, 0);
        }
        /* Ended here, as when the agent's close comes: what the runtime's
         * own exit handlers free after ours (a library, say) is not sent to
         * a job the agent is ending, and a later call is told so. */
        end_closed(l);
    }
    pthread_mutex_unlock(&l->send_lock);
}
