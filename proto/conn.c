/* Framed sending and receiving on one socket. */
#include "proto/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proto/deadline.h"

int conn_init(conn *c, int fd, uint64_t limit, rig_why *why)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->rbuf = malloc(CONN_READ_BUF);
    if (!c->rbuf) {
        c->fd = -1;
        return why_set(why, RIG_E_NOMEM, "no memory for a connection buffer");
    }
    frame_decoder_init(&c->dec, limit);
    c->last_send_ms = c->last_recv_ms = deadline_now_ms();
    /* Only a blocking socket: a read on a non-blocking one would return
     * at once and the wait would spin. */
    struct timeval step = { 0, CONN_READ_STEP_MS * 1000 };
    int flags = fcntl(fd, F_GETFL);
    c->read_steps = flags >= 0 && !(flags & O_NONBLOCK) &&
                    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &step, sizeof step) == 0;
    return 0;
}

void conn_close(conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    frame_decoder_reset(&c->dec);
    free(c->rbuf);
    c->rbuf = NULL;
}

static int wait_fd(int fd, short events, int64_t deadline, const char *what, rig_why *why)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int rc = poll(&p, 1, deadline_poll_ms(deadline));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return why_set(why, RIG_E_IO, "poll while %s: %s", what, strerror(errno));
        if (rc == 0)
            return why_set(why, RIG_E_TIMEOUT, "no progress for too long while %s", what);
        return 0;
    }
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls fd without sleeping for up to ns, and not past bound (ms): true
 * once it is readable. A thread that stays on its CPU needs no wake-up when
 * the bytes come. */
static bool spin_until_readable(int fd, int64_t ns, int64_t bound)
{
    if (bound != INT64_MAX && (bound - deadline_now_ms()) * 1000000 < ns)
        ns = (bound - deadline_now_ms()) * 1000000;
    int64_t until = now_ns() + ns;
    do {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 0) > 0)
            return true;
    } while (now_ns() < until);
    return false;
}

/* A read brought bytes: the wait that came before it, if any, is over. */
static void wait_ended(conn *c)
{
    if (c->waiting_since) {
        c->last_wait_ns = now_ns() - c->waiting_since;
        c->waiting_since = 0;
    }
}

/* Before a read that may block until bound: a socket whose reads return
 * within CONN_READ_STEP_MS is read at once when the bound is further off;
 * else, and after a read that said EAGAIN (its step ran out, or the
 * descriptor became non-blocking, which would spin), poll first, which
 * honours the bound exactly. */
static int wait_readable(conn *c, int64_t bound, bool read_said_again, rig_why *why)
{
    if (c->spin_ns > 0) {
        /* Once per wait, and only while waits end within the spin: where
         * each takes longer (a slow link's round trip, a long kernel) the
         * spin would only keep a CPU from whoever brings the bytes. */
        int64_t now = now_ns();
        if (!c->waiting_since)
            c->waiting_since = now;
        if (now - c->waiting_since < c->spin_ns && c->last_wait_ns <= c->spin_ns &&
            spin_until_readable(c->fd, c->spin_ns - (now - c->waiting_since), bound))
            return 0;
    }
    if (c->read_steps && !read_said_again && bound - deadline_now_ms() >= CONN_READ_STEP_MS)
        return 0;
    return wait_fd(c->fd, POLLIN, bound, "receiving", why);
}

/* Sends that paced fewer bytes than this say little of the link. */
#define LINK_RATE_SEND_MIN ((uint64_t)256 << 10)
#define LINK_RATE_TRUST 3
/* A drain rate stands until the sends show the link is faster: a stretch
 * of more bytes than this many send buffers went into the socket without
 * a wait, either at more than LINK_RATE_STALE_PACE times that rate (the
 * link took them as fast as they came) or within LINK_RATE_QUIET_NS while
 * no send has waited for longer (a sender throttled by its own compressing
 * never shows the link's pace, but a link that pushed back would have made
 * it wait). A pause says nothing: a slow link fills its socket again at
 * the next large send (64 MiB byte masks on a 1 Gbit/s link went LZ4 at
 * 0.27 s each after pauses of 3 s, raw at 0.54 s when a drain expired
 * with time alone). A program's first copies into fresh device memory on
 * softgpu drained at 0.23-0.34 GB/s on loopback, and later sends never
 * waited. */
#define LINK_RATE_STALE_BUFFERS 2
#define LINK_RATE_STALE_DEFAULT ((uint64_t)16 << 20)   /* when SO_SNDBUF is unknown */
#define LINK_RATE_STALE_PACE 2
#define LINK_RATE_QUIET_NS ((int64_t)2000000000)

/* Adds bytes in ns to ring (of CONN_RATE_RING, *count so far); once it holds
 * LINK_RATE_TRUST, publishes the value at quantile num/den of it. */
static void note_rate(uint64_t *ring, unsigned *count, uint64_t *published, uint64_t bytes, int64_t ns, unsigned num,
                      unsigned den)
{
    ring[(*count)++ % CONN_RATE_RING] = (uint64_t)((double)bytes * 1e9 / (double)(ns > 0 ? ns : 1));
    unsigned n = *count < CONN_RATE_RING ? *count : CONN_RATE_RING;
    if (n < LINK_RATE_TRUST)
        return;
    uint64_t sorted[CONN_RATE_RING];
    memcpy(sorted, ring, n * sizeof sorted[0]);
    for (unsigned i = 1; i < n; i++)
        for (unsigned k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
            uint64_t t = sorted[k];
            sorted[k] = sorted[k - 1];
            sorted[k - 1] = t;
        }
    __atomic_store_n(published, sorted[n * num / den], __ATOMIC_RELAXED);
}

uint64_t conn_link_rate(const conn *c)
{
    uint64_t drained = __atomic_load_n(&c->link_bps, __ATOMIC_RELAXED);
    return drained ? drained : __atomic_load_n(&c->put_link_bps, __ATOMIC_RELAXED);
}

/* Writes the pieces v[0..left) (frames whose last is of kind, for
 * messages) in as few writes as the socket allows. */
static int send_pieces(conn *c, frame_kind kind, struct iovec *v, int left, int frames, int64_t deadline, rig_why *why)
{
    struct iovec *cur = v;
    /* The deadline bounds a stall, not the whole frame: each step forward
     * grants the same time again, so a slow link that keeps moving is not a
     * failure. */
    int64_t stall = deadline - deadline_now_ms();
    /* From the first wait on: the peer's pace (conn_link_rate). */
    int64_t waited_at = 0;
    uint64_t after_wait = 0;
    /* Until then, each large write's own pace (the clock read only for a
     * frame that may make one). */
    uint64_t total = 0;
    for (int i = 0; i < left; i++)
        total += v[i].iov_len;
    bool time_puts = total >= LINK_RATE_SEND_MIN;
    while (left > 0) {
        struct msghdr m = { .msg_iov = cur, .msg_iovlen = (size_t)left };
        int64_t put_at = time_puts && !waited_at ? now_ns() : 0;
        ssize_t put = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put_at && put >= (ssize_t)LINK_RATE_SEND_MIN)
            note_rate(c->put_bps, &c->puts, &c->put_link_bps, (uint64_t)put, now_ns() - put_at, 1, 2);
        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!waited_at)
                waited_at = now_ns();
            int rc = wait_fd(c->fd, POLLOUT, deadline, "sending", why);
            if (rc < 0)
                return rc;
            continue;
        }
        if (put < 0) {
            if (errno == EPIPE || errno == ECONNRESET)
                return why_set(why, RIG_E_CLOSED, "connection closed while sending a %s frame",
                               frame_kind_name(kind));
            return why_set(why, RIG_E_IO, "sending a %s frame: %s", frame_kind_name(kind), strerror(errno));
        }
        c->bytes_sent += (uint64_t)put;
        if (waited_at)
            after_wait += (uint64_t)put;
        if (put > 0 && stall > 0 && deadline != INT64_MAX)
            deadline = deadline_after(stall);
        size_t done = (size_t)put;
        while (left > 0 && done >= cur->iov_len) {
            done -= cur->iov_len;
            cur++;
            left--;
        }
        if (left > 0) {
            cur->iov_base = (uint8_t *)cur->iov_base + done;
            cur->iov_len -= done;
        }
        c->last_send_ms = deadline_now_ms();
    }
    c->frames_sent += (uint64_t)frames;
    if (waited_at) {
        c->unwaited_bytes = 0;
        c->unwaited_since = c->waited_ns = now_ns();
        c->stale_after = 0;   /* the send buffer is read once bytes pass it */
        if (after_wait >= LINK_RATE_SEND_MIN)
            note_rate(c->drain_bps, &c->drains, &c->link_bps, after_wait, c->unwaited_since - waited_at, 1, 4);
    } else if (c->link_bps && (c->unwaited_bytes += total) > c->stale_after) {
        /* Read again each time a stretch passes the last bound: the kernel
         * grows a send buffer as the link needs. */
        int size = 0;
        socklen_t len = sizeof size;
        c->stale_after = getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, &len) == 0 && size > 0
                             ? LINK_RATE_STALE_BUFFERS * (uint64_t)size
                             : LINK_RATE_STALE_DEFAULT;
        if (c->unwaited_bytes > c->stale_after) {
            int64_t now = now_ns(), took = now > c->unwaited_since ? now - c->unwaited_since : 1;
            double pace = (double)c->unwaited_bytes * 1e9 / (double)took;
            if (pace > LINK_RATE_STALE_PACE * (double)c->link_bps ||
                (took < LINK_RATE_QUIET_NS && now - c->waited_ns > LINK_RATE_QUIET_NS)) {
                /* The ring starts again: a rate of old and new drains is neither. */
                c->drains = 0;
                __atomic_store_n(&c->link_bps, 0, __ATOMIC_RELAXED);
            }
            c->unwaited_bytes = 0;   /* the next stretch */
            c->unwaited_since = now;
        }
    }
    return 0;
}

/* Puts frame (kind, iov[0..n)) after the pieces v[0..*at) of an array of
 * cap, its header in header. */
static int add_frame(struct iovec *v, int cap, int *at, uint8_t *header, frame_kind kind, const struct iovec *iov,
                     int n, rig_why *why)
{
    if (n < 0 || *at + n + 1 > cap)
        return why_set(why, RIG_E_INVALID, "a frame of %d pieces", n);
    uint64_t len = 0;
    v[(*at)++] = (struct iovec){ header, FRAME_HEADER_SIZE };
    for (int i = 0; i < n; i++) {
        v[(*at)++] = iov[i];
        len += iov[i].iov_len;
    }
    frame_header_encode(header, kind, len);
    return 0;
}

int conn_sendv(conn *c, frame_kind kind, const struct iovec *iov, int n, int64_t deadline, rig_why *why)
{
    uint8_t header[FRAME_HEADER_SIZE];
    struct iovec v[CONN_IOV_MAX];
    int at = 0;
    int rc = add_frame(v, CONN_IOV_MAX, &at, header, kind, iov, n, why);
    return rc < 0 ? rc : send_pieces(c, kind, v, at, 1, deadline, why);
}

void conn_gather_init(conn_gather *g)
{
    g->at = g->frames = 0;
    g->last = FRAME_BYTES;
}

bool conn_gather_add(conn_gather *g, frame_kind kind, const struct iovec *iov, int n)
{
    rig_why why;
    if (g->frames == CONN_GATHER_FRAMES || n > CONN_GATHER_PIECES ||
        add_frame(g->v, (int)(sizeof g->v / sizeof g->v[0]), &g->at, g->header[g->frames], kind, iov, n, &why) < 0)
        return false;
    g->frames++;
    g->last = kind;
    return true;
}

int conn_gather_send(conn *c, conn_gather *g, int64_t deadline, rig_why *why)
{
    int rc = g->frames ? send_pieces(c, g->last, g->v, g->at, g->frames, deadline, why) : 0;
    conn_gather_init(g);
    return rc;
}

int conn_sendv2(conn *c, frame_kind kind1, const struct iovec *iov1, int n1, frame_kind kind2,
                const struct iovec *iov2, int n2, int64_t deadline, rig_why *why)
{
    uint8_t header1[FRAME_HEADER_SIZE], header2[FRAME_HEADER_SIZE];
    struct iovec v[CONN_IOV_MAX];
    int at = 0;
    int rc = add_frame(v, CONN_IOV_MAX, &at, header1, kind1, iov1, n1, why);
    if (rc == 0)
        rc = add_frame(v, CONN_IOV_MAX, &at, header2, kind2, iov2, n2, why);
    return rc < 0 ? rc : send_pieces(c, kind2, v, at, 2, deadline, why);
}

int conn_send(conn *c, frame_kind kind, const void *p, size_t len, int64_t deadline, rig_why *why)
{
    struct iovec v = { (void *)p, len };
    return conn_sendv(c, kind, &v, len ? 1 : 0, deadline, why);
}

size_t conn_send_room(const conn *c)
{
    int size = 0, queued = 0;
    socklen_t len = sizeof size;
    /* SO_SNDBUF counts the kernel's overhead too (twice the payload): a
     * quarter of it is payload room with a wide margin. */
    if (getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &size, &len) < 0 || ioctl(c->fd, TIOCOUTQ, &queued) < 0)
        return 0;
    return size / 4 > queued ? (size_t)(size / 4 - queued) : 0;
}

int conn_buffered(const conn *c)
{
    return c->roff < c->rlen;
}

/* The earlier of the deadline and idle_ms after the last byte received. */
static int64_t recv_bound(const conn *c, int64_t deadline, int idle_ms)
{
    if (idle_ms < 0)
        return deadline;
    int64_t idle = c->last_recv_ms + idle_ms;
    return idle < deadline ? idle : deadline;
}

int conn_recv(conn *c, frame *out, int64_t deadline, int idle_ms, rig_why *why)
{
    return conn_recv_split(c, out, 0, 0, 0, deadline, idle_ms, why);
}

uint64_t conn_rest(const conn *c)
{
    return c->dec.rest;
}

int conn_recv_rest(conn *c, void *dst, size_t n, int64_t deadline, int idle_ms, rig_why *why)
{
    if (n > c->dec.rest)
        return why_set(why, RIG_E_INVALID, "%zu bytes asked of a split frame with %llu left", n,
                       (unsigned long long)c->dec.rest);
    uint8_t *p = dst;
    size_t have = c->rlen - c->roff < n ? c->rlen - c->roff : n;
    memcpy(p, c->rbuf + c->roff, have);
    c->roff += have;
    while (have < n) {
        /* Read first, wait only when nothing is there: a large copy's
         * bytes are mostly waiting already, and a poll each time is a
         * system call for nothing. */
        ssize_t got = recv(c->fd, p + have, n - have, MSG_DONTWAIT);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Polled: this read does not wait, so it cannot take the
             * poll's place. */
            int rc = wait_readable(c, recv_bound(c, deadline, idle_ms), true, why);
            if (rc < 0) {
                c->dec.rest -= have;
                return rc;
            }
            continue;
        }
        if (got <= 0) {
            c->dec.rest -= have;
            if (got < 0 && errno != ECONNRESET)
                return why_set(why, RIG_E_IO, "receiving: %s", strerror(errno));
            return why_set(why, RIG_E_CLOSED, "connection %s in the middle of a frame",
                           got < 0 ? "reset" : "closed");
        }
        have += (size_t)got;
        wait_ended(c);
        c->bytes_received += (uint64_t)got;
        c->last_recv_ms = deadline_now_ms();
    }
    c->dec.rest -= n;
    return 0;
}

int conn_recv_split(conn *c, frame *out, frame_kind kind, size_t head, size_t above, int64_t deadline, int idle_ms,
                    rig_why *why)
{
    int err = 0;
    if (c->dec.rest)
        return why_set(why, RIG_E_INVALID, "%llu bytes of a split frame not yet taken",
                       (unsigned long long)c->dec.rest);
    /* The settings of the call in which a header completes decide. */
    c->dec.split_kind = kind;
    c->dec.split_head = head;
    c->dec.split_above = above;
    bool again = false;   /* the last read said EAGAIN */
    for (;;) {
        if (c->roff < c->rlen) {
            size_t used;
            int rc = frame_decoder_feed(&c->dec, c->rbuf + c->roff, c->rlen - c->roff, &used, out, why);
            c->roff += used;
            if (rc < 0)
                return rc;
            if (rc == 1) {
                c->frames_received++;
                return 0;
            }
        }
        /* A large payload goes straight into its buffer, not through rbuf. */
        frame_decoder *d = &c->dec;
        if (d->header_have == FRAME_HEADER_SIZE && d->current.len - d->payload_have > CONN_READ_BUF) {
            int rc = wait_readable(c, recv_bound(c, deadline, idle_ms), again, why);
            if (rc < 0)
                return rc;
            ssize_t got = read(c->fd, d->current.payload + d->payload_have,
                               (size_t)(d->current.len - d->payload_have));
            again = got < 0 && errno == EAGAIN;
            if (got < 0 && (errno == EINTR || errno == EAGAIN))
                continue;
            if (got <= 0) {
                err = got < 0 ? errno : 0;
                goto ended;
            }
            d->payload_have += (uint64_t)got;
            wait_ended(c);
            c->bytes_received += (uint64_t)got;
            c->last_recv_ms = deadline_now_ms();
            if (d->payload_have == d->current.len) {
                /* The payload is whole: hand it over now, not when the next
                 * bytes happen to arrive. */
                size_t used;
                int rc = frame_decoder_feed(d, c->rbuf, 0, &used, out, why);
                if (rc < 0)
                    return rc;
                if (rc == 1) {
                    c->frames_received++;
                    return 0;
                }
            }
            continue;
        }
        c->roff = c->rlen = 0;
        int rc = wait_readable(c, recv_bound(c, deadline, idle_ms), again, why);
        if (rc < 0)
            return rc;
        /* Before a header is known, a read that may split takes little: a
         * split frame's data then goes straight where it belongs (the
         * caller's conn_recv_rest), not through rbuf and a copy. */
        size_t room = kind && d->header_have < FRAME_HEADER_SIZE ? CONN_SPLIT_FIRST_READ : CONN_READ_BUF;
        ssize_t got = read(c->fd, c->rbuf, room);
        again = got < 0 && errno == EAGAIN;
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0) {
            err = got < 0 ? errno : 0;
            goto ended;
        }
        c->rlen = (size_t)got;
        wait_ended(c);
        c->bytes_received += (uint64_t)got;
        c->last_recv_ms = deadline_now_ms();
    }
ended:
    if (err && err != ECONNRESET)
        return why_set(why, RIG_E_IO, "receiving: %s", strerror(err));
    if (err == ECONNRESET)
        return why_set(why, RIG_E_CLOSED, "connection reset");
    if (frame_decoder_idle(&c->dec))
        return why_set(why, RIG_E_CLOSED, "connection closed");
    return why_set(why, RIG_E_CLOSED, "connection closed in the middle of a frame");
}

int conn_drain(conn *c, int64_t deadline)
{
    for (;;) {
        if (wait_fd(c->fd, POLLIN, deadline, "draining", NULL) < 0)
            return RIG_E_TIMEOUT;
        ssize_t got = read(c->fd, c->rbuf, CONN_READ_BUF);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0)
            return 0;
    }
}
