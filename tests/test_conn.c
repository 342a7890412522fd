/* Framed connections: frames of every size arrive whole, including one
 * larger than the read buffer that is the last thing sent (it must not wait
 * for bytes that never come), and a peer's end is told apart from silence. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/conn.h"
#include "proto/deadline.h"
#include "tests/support.h"

/* A loopback TCP pair, as a job's connections are. */
static void pair(conn *a, conn *b)
{
    uint16_t port;
    int l = support_listen(&port);
    int s = support_connect(port);
    int t = accept(l, NULL, NULL);
    cr_assert_geq(t, 0);
    close(l);
    cr_assert_eq(conn_init(a, s, 1 << 24, NULL), 0);
    cr_assert_eq(conn_init(b, t, 1 << 24, NULL), 0);
}

Test(conn, frames_of_every_size, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    size_t sizes[] = { 0, 1, 9, 4096, CONN_READ_BUF - 1, CONN_READ_BUF, CONN_READ_BUF + 1, 3 * CONN_READ_BUF + 7,
                       4 << 20 };
    uint8_t *data = malloc(sizes[8]);
    for (size_t i = 0; i < sizes[8]; i++)
        data[i] = (uint8_t)(i * 7 + 3);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        /* Sent from a child so a large frame can fill the socket buffer. */
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            _exit(conn_send(&a, FRAME_BYTES, data, sizes[k], deadline_after(5000), NULL) == 0 ? 0 : 1);
        frame f;
        rig_why why = { "" };
        /* Let the whole frame arrive first, so one read can finish it. */
        usleep(100 * 1000);
        /* The frame is the last thing sent: it must come out whole now. */
        cr_assert_eq(conn_recv(&b, &f, deadline_after(5000), -1, &why), 0, "size %zu: %s", sizes[k], why.text);
        cr_assert_eq(f.kind, FRAME_BYTES);
        cr_assert_eq(f.len, sizes[k]);
        cr_assert(sizes[k] == 0 || memcmp(f.payload, data, sizes[k]) == 0, "size %zu", sizes[k]);
        frame_release(&f);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    free(data);
    conn_close(&a);
    conn_close(&b);
}

Test(conn, silence_and_close_are_told_apart, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    frame f;
    rig_why why = { "" };
    cr_assert_eq(conn_recv(&b, &f, deadline_after(-1), 200, &why), RIG_E_TIMEOUT, "%s", why.text);
    /* Half a frame, then the end: closed mid-frame. */
    uint8_t head[5] = { 100, 0, 0, 0, 0 };
    cr_assert_eq(write(a.fd, head, sizeof head), (ssize_t)sizeof head);
    shutdown(a.fd, SHUT_WR);
    cr_assert_eq(conn_recv(&b, &f, deadline_after(2000), -1, &why), RIG_E_CLOSED);
    cr_assert(strstr(why.text, "middle of a frame"), "%s", why.text);
    conn_close(&a);
    conn_close(&b);
}

/* A blocking socket's reads step (SO_RCVTIMEO) instead of polling first:
 * a frame that comes after a step has run out still arrives, a silent peer
 * still ends the wait at its bound, not a step later or never, and a
 * non-blocking descriptor is polled (stepping it would spin). */
static void *send_late(void *arg)
{
    conn *a = arg;
    usleep(3 * CONN_READ_STEP_MS * 1000);
    conn_send(a, FRAME_WORD, "late", 4, deadline_after(2000), NULL);
    return NULL;
}

Test(conn, stepped_reads_keep_their_bounds, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    cr_assert(b.read_steps, "a loopback TCP socket should take SO_RCVTIMEO");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, send_late, &a), 0);
    frame f;
    rig_why why = { "" };
    cr_assert_eq(conn_recv(&b, &f, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert(f.kind == FRAME_WORD && f.len == 4 && memcmp(f.payload, "late", 4) == 0);
    frame_release(&f);
    pthread_join(t, NULL);
    int64_t t0 = deadline_now_ms();
    cr_assert_eq(conn_recv(&b, &f, deadline_after(6 * CONN_READ_STEP_MS), -1, &why), RIG_E_TIMEOUT, "%s", why.text);
    int64_t took = deadline_now_ms() - t0;
    cr_assert(took >= 6 * CONN_READ_STEP_MS - 5 && took < 6 * CONN_READ_STEP_MS + 500, "a %d ms bound took %lld ms",
              6 * CONN_READ_STEP_MS, (long long)took);
    conn_close(&a);
    conn_close(&b);

    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    conn c;
    cr_assert_eq(conn_init(&c, sv[1], 1 << 20, NULL), 0);
    cr_assert_not(c.read_steps, "a non-blocking descriptor must be polled");
    t0 = deadline_now_ms();
    cr_assert_eq(conn_recv(&c, &f, deadline_after(4 * CONN_READ_STEP_MS), -1, &why), RIG_E_TIMEOUT, "%s", why.text);
    took = deadline_now_ms() - t0;
    cr_assert(took >= 4 * CONN_READ_STEP_MS - 5, "a non-blocking wait ended after %lld ms", (long long)took);
    conn_close(&c);
    close(sv[0]);
}

/* Split frames (how copies arrive straight in place): the head comes back
 * as a frame, the rest goes where the caller says, other kinds and short
 * frames come whole, the next frame waits for the rest to be taken, and a
 * peer that ends mid-rest is told as an end in the middle of a frame. */
Test(conn, split_frames_put_the_rest_in_place, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    size_t big = 3 * CONN_READ_BUF + 5;
    uint8_t *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (uint8_t)(i * 13 + 1);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int ok = conn_send(&a, FRAME_BYTES, data, big, deadline_after(5000), NULL) == 0 &&
                 conn_send(&a, FRAME_WORD, data, 40, deadline_after(5000), NULL) == 0 &&
                 conn_send(&a, FRAME_BYTES, data, 16, deadline_after(5000), NULL) == 0 &&
                 conn_send(&a, FRAME_BYTES, data, 100, deadline_after(5000), NULL) == 0;
        /* Then a frame that announces more than it carries. */
        uint8_t head[FRAME_HEADER_SIZE];
        frame_header_encode(head, FRAME_BYTES, 1000);
        ok = ok && write(a.fd, head, sizeof head) == (ssize_t)sizeof head && write(a.fd, data, 500) == 500;
        _exit(ok ? 0 : 1);
    }
    rig_why why = { "" };
    frame f;
    /* With the socket's buffer full, the head's read still takes little
     * of the rest: that goes where the caller puts it, uncopied. */
    int waiting = 0, before = -1;
    for (int i = 0; i < 500 && waiting != before; i++) {
        before = waiting;
        usleep(10000);
        cr_assert_eq(ioctl(b.fd, FIONREAD, &waiting), 0);
    }
    cr_assert_gt(waiting, 4 * CONN_SPLIT_FIRST_READ);
    cr_assert_eq(conn_recv_split(&b, &f, FRAME_BYTES, 16, 0, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(f.kind, FRAME_BYTES);
    cr_assert_eq(f.len, 16);
    cr_assert_eq(memcmp(f.payload, data, 16), 0);
    cr_assert_eq(conn_rest(&b), big - 16);
    cr_assert_leq(b.rlen - b.roff, CONN_SPLIT_FIRST_READ);
    frame_release(&f);
    /* The next frame may not begin before the rest is taken. */
    cr_assert_lt(conn_recv(&b, &f, deadline_after(5000), -1, &why), 0);
    uint8_t *got = malloc(big);
    cr_assert_eq(conn_recv_rest(&b, got, 7, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(conn_recv_rest(&b, got + 7, big - 16 - 7, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(memcmp(got, data + 16, big - 16), 0);
    cr_assert_eq(conn_rest(&b), 0);
    cr_assert_lt(conn_recv_rest(&b, got, 1, deadline_after(5000), -1, &why), 0, "no rest is left to take");
    /* Another kind, a frame no longer than the head, and one under the
     * threshold: whole. */
    cr_assert_eq(conn_recv_split(&b, &f, FRAME_BYTES, 16, 0, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert(f.kind == FRAME_WORD && f.len == 40 && conn_rest(&b) == 0);
    frame_release(&f);
    cr_assert_eq(conn_recv_split(&b, &f, FRAME_BYTES, 16, 0, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert(f.kind == FRAME_BYTES && f.len == 16 && conn_rest(&b) == 0);
    frame_release(&f);
    cr_assert_eq(conn_recv_split(&b, &f, FRAME_BYTES, 16, 100, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert(f.kind == FRAME_BYTES && f.len == 100 && conn_rest(&b) == 0);
    cr_assert_eq(memcmp(f.payload, data, 100), 0);
    frame_release(&f);
    /* Short: the head arrives, the rest breaks off. */
    cr_assert_eq(conn_recv_split(&b, &f, FRAME_BYTES, 16, 0, deadline_after(5000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(conn_rest(&b), 1000 - 16);
    frame_release(&f);
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    conn_close(&a);
    cr_assert_eq(conn_recv_rest(&b, got, 1000 - 16, deadline_after(5000), -1, &why), RIG_E_CLOSED);
    cr_assert(strstr(why.text, "in the middle of a frame"), "%s", why.text);
    free(got);
    free(data);
    conn_close(&b);
}

/* Two frames in one write arrive as two whole frames, in order; a piece
 * count past the limit is refused before anything is sent; an idle socket
 * has room for a small frame. */
Test(conn, two_frames_in_one_write, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    cr_assert_geq(conn_send_room(&a), 4096);
    uint8_t head[16], data[100], word[24];
    memset(head, 1, sizeof head);
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)i;
    memset(word, 9, sizeof word);
    struct iovec first[2] = { { head, sizeof head }, { data, sizeof data } }, second = { word, sizeof word };
    rig_why why = { "" };
    cr_assert_eq(conn_sendv2(&a, FRAME_BYTES, first, 2, FRAME_WORD, &second, 1, deadline_after(2000), &why), 0, "%s",
                 why.text);
    frame f;
    cr_assert_eq(conn_recv(&b, &f, deadline_after(2000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(f.kind, FRAME_BYTES);
    cr_assert_eq(f.len, sizeof head + sizeof data);
    cr_assert(memcmp(f.payload + sizeof head, data, sizeof data) == 0);
    frame_release(&f);
    cr_assert_eq(conn_recv(&b, &f, deadline_after(2000), -1, &why), 0, "%s", why.text);
    cr_assert_eq(f.kind, FRAME_WORD);
    cr_assert_eq(f.len, sizeof word);
    cr_assert(memcmp(f.payload, word, sizeof word) == 0);
    frame_release(&f);
    cr_assert_eq(a.frames_sent, 2);
    struct iovec many[CONN_IOV_MAX];
    for (int i = 0; i < CONN_IOV_MAX; i++)
        many[i] = second;
    cr_assert_eq(conn_sendv2(&a, FRAME_BYTES, first, 2, FRAME_WORD, many, CONN_IOV_MAX - 3, deadline_after(2000), &why),
                 RIG_E_INVALID);
    cr_assert_eq(a.frames_sent, 2);
    conn_close(&a);
    conn_close(&b);
}

/* A gather holds CONN_GATHER_FRAMES frames at most; they arrive in the
 * order added, each whole, and an empty gather sends nothing. */
Test(conn, gathered_frames_arrive_in_order, .timeout = 20)
{
    conn a, b;
    pair(&a, &b);
    conn_gather *g = malloc(sizeof *g);
    conn_gather_init(g);
    rig_why why = { "" };
    cr_assert_eq(conn_gather_send(&a, g, deadline_after(2000), &why), 0);
    cr_assert_eq(a.frames_sent, 0);
    static uint8_t data[CONN_GATHER_FRAMES][300];
    uint8_t head[CONN_GATHER_FRAMES][4];
    for (int k = 0; k < CONN_GATHER_FRAMES; k++) {
        memset(head[k], k, sizeof head[k]);
        for (size_t i = 0; i < sizeof data[k]; i++)
            data[k][i] = (uint8_t)(i * 3 + (size_t)k);
        /* Lengths differ, so a frame read against the wrong header shows. */
        struct iovec iov[2] = { { head[k], sizeof head[k] }, { data[k], sizeof data[k] - (size_t)k } };
        cr_assert(conn_gather_add(g, k % 2 ? FRAME_WORD : FRAME_BYTES, iov, k == 5 ? 1 : 2), "frame %d", k);
    }
    struct iovec one = { data[0], 1 };
    cr_assert_not(conn_gather_add(g, FRAME_BYTES, &one, 1), "a frame past CONN_GATHER_FRAMES");
    cr_assert_eq(conn_gather_send(&a, g, deadline_after(2000), &why), 0, "%s", why.text);
    cr_assert_eq(a.frames_sent, CONN_GATHER_FRAMES);
    for (int k = 0; k < CONN_GATHER_FRAMES; k++) {
        frame f;
        cr_assert_eq(conn_recv(&b, &f, deadline_after(2000), -1, &why), 0, "%s", why.text);
        cr_assert_eq(f.kind, k % 2 ? FRAME_WORD : FRAME_BYTES, "frame %d", k);
        size_t want = sizeof head[k] + (k == 5 ? 0 : sizeof data[k] - (size_t)k);
        cr_assert_eq(f.len, want, "frame %d: %zu bytes", k, (size_t)f.len);
        cr_assert(memcmp(f.payload, head[k], sizeof head[k]) == 0, "frame %d", k);
        cr_assert(k == 5 || memcmp(f.payload + sizeof head[k], data[k], want - sizeof head[k]) == 0, "frame %d", k);
        frame_release(&f);
    }
    /* Emptied: it takes frames again. */
    cr_assert_eq(g->frames, 0);
    cr_assert(conn_gather_add(g, FRAME_BYTES, &one, 1));
    free(g);
    conn_close(&a);
    conn_close(&b);
}

/* The peer of conn_link_rate's test: reads what it is sent at about rate
 * bytes/s, in 64 KiB steps, until it has total bytes. */
typedef struct slow_reader {
    conn *c;
    double rate;
    uint64_t total;
} slow_reader;

static void *read_slowly(void *arg)
{
    slow_reader *r = arg;
    uint8_t *buf = malloc(64 << 10);
    int64_t start = deadline_now_ms();
    for (uint64_t got = 0; got < r->total;) {
        ssize_t n = read(r->c->fd, buf, 64 << 10);
        if (n <= 0)
            break;
        got += (uint64_t)n;
        int64_t due = start + (int64_t)((double)got * 1000.0 / r->rate);
        int64_t now = deadline_now_ms();
        if (due > now)
            usleep((useconds_t)(due - now) * 1000);
    }
    free(buf);
    return NULL;
}

/* The peer of the next test: reads a frame's bytes, then tells the sender. */
typedef struct lockstep_reader {
    conn *c;
    int frames;
    size_t frame;
    int told;                  /* the pipe it writes a byte to per frame */
} lockstep_reader;

static void *read_in_lockstep(void *arg)
{
    lockstep_reader *r = arg;
    uint8_t *buf = malloc(r->frame + FRAME_HEADER_SIZE);
    for (int f = 0; f < r->frames; f++) {
        for (size_t got = 0; got < r->frame + FRAME_HEADER_SIZE;) {
            ssize_t n = read(r->c->fd, buf + got, r->frame + FRAME_HEADER_SIZE - got);
            /* The connection's reads time out in steps: a pause between
             * frames is no failure. */
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                continue;
            if (n <= 0) {
                /* Told, so the sender fails instead of waiting for ever. */
                (void)!write(r->told, "!", 1);
                goto out;
            }
            got += (size_t)n;
        }
        if (write(r->told, "", 1) != 1)
            break;
    }
out:
    free(buf);
    return NULL;
}

/* Sends frames of 1 MiB from a to b, each once b has read the last (into
 * an emptied socket) and gap_us after. */
static void send_in_lockstep(conn *a, conn *b, int frames, useconds_t gap_us)
{
    enum { FRAME = 1 << 20 };
    int told[2];
    cr_assert_eq(pipe(told), 0);
    lockstep_reader r = { b, frames, FRAME, told[1] };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, read_in_lockstep, &r), 0);
    uint8_t *data = calloc(1, FRAME);
    for (int i = 0; i < frames; i++) {
        cr_assert_eq(conn_send(a, FRAME_BYTES, data, FRAME, deadline_after(10000), NULL), 0);
        char one;
        cr_assert_eq(read(told[0], &one, 1), 1);   /* the socket is empty again */
        cr_assert_eq(one, '\0', "the reader could not read frame %d", i);
        if (gap_us)
            usleep(gap_us);
    }
    pthread_join(t, NULL);
    free(data);
    close(told[0]);
    close(told[1]);
}

/* Before any send waits on a full socket, the rate is this end's own pace
 * into it (what sending raw costs on a link that never fills): large
 * writes into an empty socket measure it, and it stays until sends wait. */
Test(conn, link_rate_before_any_wait_is_the_pace_of_large_writes, .timeout = 30)
{
    conn a, b;
    pair(&a, &b);
    enum { FRAMES = 8 };
    send_in_lockstep(&a, &b, FRAMES, 0);
    cr_assert_eq(a.drains, 0, "%u sends waited on an emptied socket", a.drains);
    cr_assert_geq(a.puts, 3, "%u writes of 256 KiB or more in %d sends of 1 MiB", a.puts, FRAMES);
    double rate = (double)conn_link_rate(&a);
    cr_assert(rate > 1e7, "the pace of large writes measured %.3g bytes/s", rate);
    conn_close(&a);
    conn_close(&b);
}

/* A link that takes 8 MB/s, behind a small socket buffer: large sends wait
 * on it and measure about that rate (a loaded machine only slows the
 * reader); before three such sends the rate is unknown (0). */
Test(conn, link_rate_is_what_the_peer_takes, .timeout = 30)
{
    conn a, b;
    pair(&a, &b);
    int small = 64 << 10;
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(b.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    enum { FRAME = 1 << 20, FRAMES = 6 };
    slow_reader r = { &b, 8e6, (uint64_t)FRAMES * (FRAME + FRAME_HEADER_SIZE) };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, read_slowly, &r), 0);
    uint8_t *data = calloc(1, FRAME);
    cr_assert_eq(conn_link_rate(&a), 0);
    for (int i = 0; i < FRAMES; i++) {
        cr_assert_eq(conn_send(&a, FRAME_BYTES, data, FRAME, deadline_after(10000), NULL), 0);
        if (i < 2)
            cr_assert_eq(conn_link_rate(&a), 0, "a rate after %d sends", i + 1);
    }
    pthread_join(t, NULL);
    double rate = (double)conn_link_rate(&a);
    cr_assert(rate > 4e6 && rate < 12e6, "measured %.3g bytes/s of a link of 8e6", rate);
    free(data);
    conn_close(&a);
    conn_close(&b);
}

/* Sends through a socket that a reader empties at rate bytes/s; the
 * reader's thread is joined before it returns. */
static void send_through_slow_reader(conn *a, conn *b, double rate, int frames)
{
    enum { FRAME = 1 << 20 };
    slow_reader r = { b, rate, (uint64_t)frames * (FRAME + FRAME_HEADER_SIZE) };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, read_slowly, &r), 0);
    uint8_t *data = calloc(1, FRAME);
    for (int i = 0; i < frames; i++)
        cr_assert_eq(conn_send(a, FRAME_BYTES, data, FRAME, deadline_after(10000), NULL), 0);
    pthread_join(t, NULL);
    free(data);
}

/* A drain rate stands through a pause (a slow link fills its socket again
 * at the next large send), through fewer bytes sent without a wait than
 * twice the socket's buffer, and through such a stretch that took over
 * 2 s (the pause in it) at no more than twice the rate. It is dropped, the
 * rate the pace of large writes again, once such a stretch went in within
 * 2 s while no send had waited for longer (a sender slowed by compressing
 * never shows the link's pace: softgpu's first copies into fresh memory
 * drained slowly, and later ones, LZ4-compressed, never waited), or at
 * over twice the rate; drains after that are measured afresh. */
Test(conn, a_drain_rate_stands_until_sends_stop_waiting, .timeout = 60)
{
    conn a, b;
    pair(&a, &b);
    /* Buffers set before any byte moves (a receive buffer shrunk later
     * may drop what the window let in); the send buffer changes later. */
    int small = 64 << 10, big = 4 << 20;
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(b.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    /* First the pace of large writes, into a socket emptied after each. */
    send_in_lockstep(&a, &b, 4, 0);
    uint64_t put = a.put_link_bps;
    /* Far above the slow links below, so the rates cannot be taken for
     * each other. */
    cr_assert_gt(put, 1e8, "writes of 256 KiB or more into an emptied socket measured %.3g bytes/s", (double)put);
    /* Then a slow link behind small buffers. */
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    send_through_slow_reader(&a, &b, 16e6, 10);
    double slow = (double)conn_link_rate(&a);
    cr_assert(slow > 8e6 && slow < 32e6, "measured %.3g bytes/s of a link of 16e6", slow);
    cr_assert_eq(a.put_link_bps, put, "writes measured while sends waited");
    usleep(2500 * 1000);
    cr_assert_eq((double)conn_link_rate(&a), slow, "a pause of 2.5 s dropped the drain rate");
    /* The send buffer as large as it was for the writes: each frame goes
     * in whole without a wait. */
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    int sndbuf = 0;
    socklen_t len = sizeof sndbuf;
    cr_assert_eq(getsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len), 0);
    send_in_lockstep(&a, &b, 2, 0);
    cr_assert_eq((double)conn_link_rate(&a), slow, "2 MiB without a wait (the send buffer %d bytes) dropped it",
                 sndbuf);
    /* A stretch past twice the buffer that took longer than 2 s (the
     * pause), at a pace it keeps low. */
    int frames = 2 * sndbuf / (1 << 20) + 1;
    send_in_lockstep(&a, &b, frames, 0);
    cr_assert_eq((double)conn_link_rate(&a), slow, "%d MiB without a wait after a pause of 2.5 s dropped it",
                 frames + 2);
    /* Then one within 2 s at under 13 MB/s, below twice the rate, with no
     * wait for over 2 s. */
    send_in_lockstep(&a, &b, frames + 1, 80 * 1000);
    cr_assert_eq(conn_link_rate(&a), a.put_link_bps, "%d MiB at 13 MB/s with no wait for over 2 s left the drain rate",
                 frames + 1);
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    send_through_slow_reader(&a, &b, 4e6, 6);
    double again = (double)conn_link_rate(&a);
    cr_assert(again > 2e6 && again < 8e6, "measured %.3g bytes/s of a link of 4e6 after one of 16e6", again);
    /* Right after a wait, a stretch at the pace of large writes. */
    setsockopt(a.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    send_in_lockstep(&a, &b, frames + 1, 0);
    cr_assert_gt(conn_link_rate(&a), 1e8, "%d MiB without a wait at once left the drain rate: %.3g bytes/s",
                 frames + 1, (double)conn_link_rate(&a));
    conn_close(&a);
    conn_close(&b);
}

static long voluntary_switches(void)
{
    struct rusage u;
    cr_assert_eq(getrusage(RUSAGE_THREAD, &u), 0);
    return u.ru_nvcsw;
}

/* A read that spins (conn.spin_ns, the shim's waiting threads) takes a
 * frame sent while it spins without sleeping, so no wake-up is owed; past
 * its spin it sleeps, and its bound holds either way. The same read without
 * the spin sleeps. */
Test(conn, a_spinning_read_takes_its_bytes_without_sleeping, .timeout = 30)
{
    conn a, b;
    pair(&a, &b);
    frame f;
    rig_why why = { "" };
    for (int spin = 1; spin >= 0; spin--) {
        b.spin_ns = spin ? (int64_t)10 * 1000 * 1000 * 1000 : 0;   /* far past send_late's delay */
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, send_late, &a), 0);
        long before = voluntary_switches();
        cr_assert_eq(conn_recv(&b, &f, deadline_after(5000), -1, &why), 0, "%s", why.text);
        long slept = voluntary_switches() - before;
        cr_assert(f.kind == FRAME_WORD && f.len == 4 && memcmp(f.payload, "late", 4) == 0);
        frame_release(&f);
        pthread_join(t, NULL);
        if (spin)
            cr_assert_eq(slept, 0, "a spinning read slept %ld times", slept);
        else
            cr_assert_gt(slept, 0, "a read with no spin took a late frame without sleeping");
    }
    /* A spin shorter than the bound (the read sleeps after it) and one
     * longer: the read ends at the bound. */
    for (int k = 0; k < 2; k++) {
        b.spin_ns = k ? (int64_t)10 * 1000 * 1000 * 1000 : (int64_t)20 * 1000 * 1000;
        int64_t t0 = deadline_now_ms();
        cr_assert_eq(conn_recv(&b, &f, deadline_after(3 * CONN_READ_STEP_MS), -1, &why), RIG_E_TIMEOUT, "%s",
                     why.text);
        int64_t took = deadline_now_ms() - t0;
        cr_assert(took >= 3 * CONN_READ_STEP_MS - 5 && took < 3 * CONN_READ_STEP_MS + 500,
                  "a %d ms bound with a %lld ms spin took %lld ms", 3 * CONN_READ_STEP_MS,
                  (long long)(b.spin_ns / 1000000), (long long)took);
    }
    conn_close(&a);
    conn_close(&b);
}

typedef struct delayed_send {
    conn *c;
    int delay_ms;
} delayed_send;

static void *send_after(void *arg)
{
    delayed_send *d = arg;
    usleep((useconds_t)d->delay_ms * 1000);
    conn_send(d->c, FRAME_WORD, "late", 4, deadline_after(2000), NULL);
    return NULL;
}

static double thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Receives one "late" word sent delay_ms from now: the CPU time the read
 * took and whether it slept. */
static void receive_late(conn *a, conn *b, int delay_ms, double *cpu_ms, long *slept)
{
    delayed_send d = { a, delay_ms };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, send_after, &d), 0);
    double cpu0 = thread_cpu_ms();
    long switches0 = voluntary_switches();
    frame f;
    rig_why why = { "" };
    cr_assert_eq(conn_recv(b, &f, deadline_after(5000), -1, &why), 0, "%s", why.text);
    *cpu_ms = thread_cpu_ms() - cpu0;
    *slept = voluntary_switches() - switches0;
    cr_assert(f.kind == FRAME_WORD && f.len == 4 && memcmp(f.payload, "late", 4) == 0);
    frame_release(&f);
    pthread_join(t, NULL);
}

/* The spin follows the waits: a wait longer than the spin (a slow link's
 * round trip) makes the next read sleep at once, and a short wait brings
 * the spin back. */
Test(conn, a_read_spins_only_while_waits_end_within_the_spin, .timeout = 30)
{
    conn a, b;
    pair(&a, &b);
    b.spin_ns = (int64_t)100 * 1000 * 1000;
    double cpu;
    long slept;
    receive_late(&a, &b, 250, &cpu, &slept);   /* the first wait spins, then sleeps */
    cr_assert_gt(slept, 0);
    cr_assert_gt(cpu, 30, "the first wait spun only %.1f ms of CPU", cpu);
    receive_late(&a, &b, 250, &cpu, &slept);   /* after a long wait: no spin */
    cr_assert_lt(cpu, 20, "a wait after one longer than the spin spun %.1f ms of CPU", cpu);
    receive_late(&a, &b, 0, &cpu, &slept);     /* a short wait ... */
    receive_late(&a, &b, 30, &cpu, &slept);    /* ... and the spin is back */
    cr_assert_eq(slept, 0, "after a short wait, a read slept %ld times", slept);
    conn_close(&a);
    conn_close(&b);
}
