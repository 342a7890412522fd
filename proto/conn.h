/* One connection of a job: whole frames out (header and payload pieces in
 * one writev, no copy of the payload) and whole frames in, bounded by
 * deadlines. Not thread-safe: callers serialise senders and keep one reader. */
#ifndef RIG_PROTO_CONN_H
#define RIG_PROTO_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/error.h"
#include "proto/frame.h"

#define CONN_READ_BUF (256 * 1024)
/* What conn_recv_split reads at most before it knows a frame's header. */
#define CONN_SPLIT_FIRST_READ (16 * 1024)
/* A blocking socket's reads return within this (SO_RCVTIMEO), so a wait
 * whose bound is further off reads at once instead of polling first: one
 * system call on the way of each answer rather than two. */
#define CONN_READ_STEP_MS 50
#define CONN_IOV_MAX 16

/* The last rates of each kind conn_link_rate decides from. */
#define CONN_RATE_RING 8

typedef struct conn {
    int fd;
    frame_decoder dec;
    uint8_t *rbuf;             /* bytes read but not yet decoded */
    size_t rlen, roff;
    int64_t last_send_ms;      /* CLOCK_MONOTONIC of the last byte sent */
    int64_t last_recv_ms;      /* ... and received */
    uint64_t bytes_sent, bytes_received, frames_sent, frames_received;
    /* The link's rate as the sends see it (conn_link_rate): the rates at
     * which the peer took the bytes of the last sends that waited on a
     * full socket, and before any did, the rates at which large writes put
     * their bytes into it. */
    uint64_t drain_bps[CONN_RATE_RING];
    unsigned drains;           /* sends measured so (the ring's next slot, mod the ring) */
    uint64_t link_bps;         /* atomic: read by threads that do not send */
    /* While a drain rate is published: the bytes of the stretch of sends
     * since unwaited_since (a wait's end, or the last stretch's) that did
     * not wait; past stale_after (twice SO_SNDBUF; 0: not read yet) their
     * pace, and the time since the last wait (waited_ns, its end), are
     * judged (conn_link_rate). */
    uint64_t unwaited_bytes, stale_after;
    int64_t unwaited_since, waited_ns;
    uint64_t put_bps[CONN_RATE_RING];
    unsigned puts;             /* writes measured so */
    uint64_t put_link_bps;     /* atomic, as link_bps */
    bool read_steps;           /* reads block at most CONN_READ_STEP_MS (SO_RCVTIMEO) */
    /* Before a read sleeps, the socket is polled this long (0: not at all),
     * while the last wait for bytes ended within it; set by whoever holds
     * the read side. */
    int64_t spin_ns;
    int64_t waiting_since;     /* CLOCK_MONOTONIC ns of the wait under way, 0: none */
    int64_t last_wait_ns;      /* how long the last wait for bytes took */
} conn;

/* Takes ownership of fd on success; limit is the largest payload accepted.
 * On failure c holds nothing (its fd is -1) and fd is still the caller's. */
int conn_init(conn *c, int fd, uint64_t limit, rig_why *why);
/* Closes the descriptor and frees buffers; NULL is fine. */
void conn_close(conn *c);

/* Sends one frame whose payload is the concatenation of iov[0..n) (n <=
 * CONN_IOV_MAX - 1). The deadline (deadline.h) bounds a stall: each step of
 * progress grants the same time again. */
int conn_sendv(conn *c, frame_kind kind, const struct iovec *iov, int n, int64_t deadline, rig_why *why);
int conn_send(conn *c, frame_kind kind, const void *p, size_t len, int64_t deadline, rig_why *why);
/* Two frames in one write (n1 + n2 <= CONN_IOV_MAX - 2), so the peer gets
 * them together: a copy's bytes and its word wake its reader once. */
int conn_sendv2(conn *c, frame_kind kind1, const struct iovec *iov1, int n1, frame_kind kind2,
                const struct iovec *iov2, int n2, int64_t deadline, rig_why *why);

/* Many small frames gathered for one write: a run of copies' bytes and
 * their words costs one system call, not one each. Add frames while
 * conn_gather_add says there is room (each of at most
 * CONN_GATHER_PIECES pieces), then conn_gather_send; the pieces' memory
 * must live until then. */
#define CONN_GATHER_FRAMES 64
#define CONN_GATHER_PIECES 2
typedef struct conn_gather {
    struct iovec v[CONN_GATHER_FRAMES * (CONN_GATHER_PIECES + 1)];
    uint8_t header[CONN_GATHER_FRAMES][FRAME_HEADER_SIZE];
    int at, frames;
    frame_kind last;
} conn_gather;

void conn_gather_init(conn_gather *g);
/* Adds frame (kind, iov[0..n)); false when it holds CONN_GATHER_FRAMES or
 * n is more than CONN_GATHER_PIECES. */
bool conn_gather_add(conn_gather *g, frame_kind kind, const struct iovec *iov, int n);
/* Writes the frames gathered (none: nothing) and empties g; conn_sendv's
 * results. */
int conn_gather_send(conn *c, conn_gather *g, int64_t deadline, rig_why *why);

/* Receives the next whole frame (the caller owns out->payload). RIG_E_CLOSED
 * when the peer ends the stream between frames, and also mid-frame (why says
 * which), RIG_E_MALFORMED/TOO_LONG for bad bytes, RIG_E_TIMEOUT at the
 * deadline or when no byte arrived for idle_ms (negative: no such bound;
 * each byte that arrives restarts it). */
int conn_recv(conn *c, frame *out, int64_t deadline, int idle_ms, rig_why *why);

/* Like conn_recv, but a frame of kind whose payload is longer than both
 * head and above bytes comes back holding only its first head bytes
 * (out->len == head), and conn_rest(c) says how many follow: the caller
 * takes them with conn_recv_rest, straight into memory of its choosing,
 * before receiving again. */
int conn_recv_split(conn *c, frame *out, frame_kind kind, size_t head, size_t above, int64_t deadline, int idle_ms,
                    rig_why *why);
/* Payload bytes of the last split frame not yet taken. */
uint64_t conn_rest(const conn *c);
/* Takes the next n (<= conn_rest) payload bytes into dst; errors as for
 * conn_recv (a peer that ends the stream here ended it mid-frame). */
int conn_recv_rest(conn *c, void *dst, size_t n, int64_t deadline, int idle_ms, rig_why *why);

/* After a failure: reads and discards raw bytes until the peer ends its side
 * or the deadline passes (a broken frame stream cannot be decoded, but its
 * bytes must be read so closing does not reset the connection). Returns 0
 * at the peer's end, RIG_E_TIMEOUT otherwise. */
int conn_drain(conn *c, int64_t deadline);

/* Bytes the socket's send buffer surely takes now without waiting for the
 * peer: a quarter of its size less what is queued (0 when unknown), so a
 * frame that small goes out whole at once. */
size_t conn_send_room(const conn *c);

/* The link's rate in bytes/s, measured on this connection's sends: only
 * while a send waits for the peer (a full socket) do its bytes pace the
 * link, so each large send's rate counts from its first wait to its end,
 * and the link's is the lower quartile of the last 8 (the steady rate: the
 * first sends into a deep buffer along the way drain fast; one or two
 * preempted sends do not decide it), until a stretch of more than twice
 * the send buffer went into the socket without a wait at over twice that
 * rate, or in under 2 s with no wait for over 2 s (the link took those
 * bytes as fast as they came; a pause keeps the rate). Until 3 sends were
 * measured so, and after they are dropped, the
 * median of the last 8 writes of 256 KiB or more that went into the socket
 * without a wait: a link that never filled its socket goes at the pace of
 * this end's own copy into it, which is what sending raw costs (on
 * loopback, the whole of it). 0 before either. Any thread may ask. */
uint64_t conn_link_rate(const conn *c);

/* True when bytes are buffered that conn_recv can decode without reading. */
int conn_buffered(const conn *c);

#endif
