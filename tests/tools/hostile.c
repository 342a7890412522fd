/* rig-hostile: what an agent on an open port meets besides its controllers,
 * for the service tests (issue 12). Every mode is bounded by a count and a
 * time, prints one "hostile: ready ..." line on stdout once its connections
 * are up (idle, drip) and one "hostile: done ..." line at its end, and
 * exits 0 unless it could not do what it was asked (a usage error, no
 * connection at all).
 *
 *   rig-hostile idle  --to HOST:PORT [--count N] [--seconds T] [--record FILE]
 *       N connections (default 20) that never send a byte, held T seconds
 *       (default 30) or until standard input ends.
 *   rig-hostile drip  --to HOST:PORT [--seconds T] [--record FILE]
 *       one connection that sends one byte every 2 s.
 *   rig-hostile flood --to HOST:PORT [--seconds T] [--hold N]
 *       connects as fast as it can for T seconds (default 3), holding the
 *       latest N (default 400) open and closing older ones; a connect that
 *       takes over 100 ms is given up and counted.
 *   rig-hostile controller --to HOST:PORT --key-file FILE [--jobs N]
 *                          [--seconds T] [--seed S]
 *       N jobs (default 12) with the job key: each proves the key (as
 *       process 0, to agent 1), opens the job with a valid open request,
 *       then sends one hostile frame (the kinds below, in turn; random
 *       contents from the seed) and reads until the agent aborts or closes
 *       (5 s at most), then closes. One line per job:
 *       "hostile: job I: KIND: aborted: WHY" | "answered CUresult N" |
 *       "closed" | "no answer within 5 s" | "not admitted: WHY".
 *
 * --record FILE appends every byte the agent sends on the idle or drip
 * connections (to a stranger, before any proof) to FILE, and writes the
 * local port of each connection to FILE.ports, one a line, so a test can
 * check that nothing a stranger receives names an address. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/conn.h"
#include "proto/cuda_ops.h"
#include "proto/deadline.h"
#include "proto/frame.h"
#include "proto/handshake.h"
#include "proto/job.h"
#include "proto/key.h"
#include "proto/wire.h"

#define IDLE_MAX 1000
#define JOB_WAIT_MS 5000

static const char usage[] =
    "Usage: rig-hostile idle|drip|flood|controller --to HOST:PORT [options]\n"
    "  --count N        idle: connections to hold (default 20)\n"
    "  --seconds T      how long the mode lasts at most\n"
    "  --record FILE    idle, drip: append what the agent sends to FILE\n"
    "  --hold N         flood: connections held open at once (default 400)\n"
    "  --key-file FILE  controller: the job key\n"
    "  --jobs N         controller: hostile jobs (default 12)\n"
    "  --seed S         controller: the random contents' seed\n";

static struct sockaddr_in target;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int parse_to(const char *s)
{
    char host[64];
    unsigned port;
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host || sscanf(colon + 1, "%u", &port) != 1 || port > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)port);
    return inet_pton(AF_INET, host, &target.sin_addr) == 1 ? 0 : -1;
}

/* A connection to the target within timeout_ms, or -1 (errno set). */
static int dial(int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&target, sizeof target) < 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct pollfd p = { fd, POLLOUT, 0 };
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
            close(fd);
            errno = err ? err : ETIMEDOUT;
            return -1;
        }
    }
    return fd;
}

static unsigned local_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    return getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : 0;
}

/* ---- strangers: idle and drip ---- */

typedef struct stranger {
    int fd;
    bool closed;            /* the agent ended its side */
    size_t received;
} stranger;

/* Reads what is there on each open stranger, appending it to rec. */
static void strangers_read(stranger *s, int n, FILE *rec, int timeout_ms)
{
    struct pollfd p[IDLE_MAX];
    int np = 0, map[IDLE_MAX];
    for (int i = 0; i < n; i++)
        if (!s[i].closed) {
            p[np] = (struct pollfd){ s[i].fd, POLLIN, 0 };
            map[np++] = i;
        }
    if (np == 0) {
        poll(NULL, 0, timeout_ms);
        return;
    }
    if (poll(p, (nfds_t)np, timeout_ms) <= 0)
        return;
    for (int k = 0; k < np; k++) {
        if (!p[k].revents)
            continue;
        stranger *t = &s[map[k]];
        uint8_t buf[4096];
        ssize_t got = read(t->fd, buf, sizeof buf);
        if (got <= 0) {
            t->closed = true;
            continue;
        }
        t->received += (size_t)got;
        if (rec) {
            fwrite(buf, 1, (size_t)got, rec);
            fflush(rec);
        }
    }
}

static bool stdin_ended(void)
{
    struct pollfd p = { 0, POLLIN, 0 };
    if (poll(&p, 1, 0) <= 0)
        return false;
    char c;
    return read(0, &c, 1) <= 0;
}

static int strangers_main(bool drip, int count, double seconds, const char *record)
{
    FILE *rec = NULL, *ports = NULL;
    if (record) {
        char path[600];
        snprintf(path, sizeof path, "%s.ports", record);
        rec = fopen(record, "a");
        ports = fopen(path, "a");
        if (!rec || !ports) {
            fprintf(stderr, "rig-hostile: cannot write %s: %s\n", record, strerror(errno));
            return 1;
        }
    }
    if (drip)
        count = 1;
    static stranger s[IDLE_MAX];
    int n = 0;
    for (; n < count; n++) {
        s[n].fd = dial(2000);
        if (s[n].fd < 0) {
            fprintf(stderr, "rig-hostile: connection %d: %s\n", n, strerror(errno));
            break;
        }
        if (ports) {
            fprintf(ports, "%u\n", local_port(s[n].fd));
            fflush(ports);
        }
    }
    if (n == 0)
        return 1;
    printf("hostile: ready %s %d connection%s\n", drip ? "drip" : "idle", n, n == 1 ? "" : "s");
    fflush(stdout);
    double start = now_s(), next_drip = start;
    unsigned dripped = 0;
    while (now_s() - start < seconds && !stdin_ended()) {
        if (drip && now_s() >= next_drip && !s[0].closed) {
            uint8_t b = (uint8_t)('a' + dripped % 26);
            if (send(s[0].fd, &b, 1, MSG_NOSIGNAL) == 1)
                dripped++;
            else
                s[0].closed = true;
            next_drip += 2.0;
        }
        strangers_read(s, n, rec, 100);
    }
    size_t bytes = 0;
    int closed = 0;
    for (int i = 0; i < n; i++) {
        bytes += s[i].received;
        closed += s[i].closed;
        close(s[i].fd);
    }
    printf("hostile: done %s %d connection%s held %.1f s, %u byte%s sent, %zu received, %d closed by the agent\n",
           drip ? "drip" : "idle", n, n == 1 ? "" : "s", now_s() - start, dripped, dripped == 1 ? "" : "s", bytes,
           closed);
    if (rec)
        fclose(rec);
    if (ports)
        fclose(ports);
    return 0;
}

/* ---- flood ---- */

static int flood_main(double seconds, int hold)
{
    int *held = calloc((size_t)hold, sizeof *held);
    if (!held)
        return 1;
    for (int i = 0; i < hold; i++)
        held[i] = -1;
    unsigned long made = 0, failed = 0, next = 0;
    double start = now_s();
    printf("hostile: ready flood\n");
    fflush(stdout);
    while (now_s() - start < seconds) {
        int fd = dial(100);
        if (fd < 0) {
            failed++;
            if (errno == EMFILE || errno == ENFILE)
                poll(NULL, 0, 10);
            continue;
        }
        made++;
        int slot = (int)(next++ % (unsigned long)hold);
        if (held[slot] >= 0)
            close(held[slot]);
        held[slot] = fd;
    }
    for (int i = 0; i < hold; i++)
        if (held[i] >= 0)
            close(held[i]);
    free(held);
    printf("hostile: done flood %.1f s, %lu connections made, %lu failed or gave up\n", now_s() - start, made,
           failed);
    return made ? 0 : 1;
}

/* ---- a hostile controller ---- */

static uint64_t rng;

static uint64_t next64(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return rng ^ (rng >> 29);
}

static void random_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(next64() >> 24);
}

/* The hostile frames, one per job in turn. */
static const char *const kinds[] = {
    "request: random op and bytes",
    "request: truncated op",
    "request: allocation with one bit flipped",
    "request: frame cut short, then closed",
    "handover: random bytes",
    "handover: record longer than its frame",
    "handover: mark on a stream the job does not hold",
    "drop: an object the job does not hold",
    "drop: truncated",
    "word: from a controller",
    "frame of unknown kind",
    "frame longer than any limit",
};
#define KINDS (sizeof kinds / sizeof kinds[0])

/* Sends raw bytes (for frames conn_send would not write); 0 or -1. */
static int send_raw(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    int64_t until = deadline_after(JOB_WAIT_MS);
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        struct pollfd p1 = { fd, POLLOUT, 0 };
        if (poll(&p1, 1, deadline_poll_ms(until)) <= 0)
            return -1;
    }
    return 0;
}

static int send_hostile(conn *c, unsigned k)
{
    rig_why why;
    int64_t dl = deadline_after(JOB_WAIT_MS);
    uint8_t body[256], hdr[FRAME_HEADER_SIZE];
    wire_writer w = wire_writer_init(body, sizeof body);
    switch (k) {
    case 0: {
        wire_put_u32(&w, 0x40000000u | (uint32_t)next64());
        size_t n = (size_t)(next64() % 64);
        uint8_t junk[64];
        random_bytes(junk, n);
        wire_put_bytes(&w, junk, n);
        return conn_send(c, FRAME_REQUEST, body, w.off, dl, &why);
    }
    case 1: return conn_send(c, FRAME_REQUEST, "\x01\x80", 2, dl, &why);
    case 2: {
        wire_put_u32(&w, CUDA_OP_cuMemAlloc_v2);
        wire_put_u32(&w, 0);
        wire_put_u64(&w, 4096);
        unsigned bit = (unsigned)(next64() % (w.off * 8));
        body[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        return conn_send(c, FRAME_REQUEST, body, w.off, dl, &why);
    }
    case 3: {
        frame_header_encode(hdr, FRAME_REQUEST, 100);
        random_bytes(body, 20);
        if (send_raw(c->fd, hdr, sizeof hdr) < 0 || send_raw(c->fd, body, 20) < 0)
            return -1;
        shutdown(c->fd, SHUT_WR);
        return 0;
    }
    case 4: {
        size_t n = 1 + (size_t)(next64() % 64);
        random_bytes(body, n);
        return conn_send(c, FRAME_HANDOVER, body, n, dl, &why);
    }
    case 5:
        wire_put_u32(&w, JOB_OP_MARK);
        wire_put_u32(&w, 1000);
        wire_put_u64(&w, 1);
        wire_put_u64(&w, 1);
        wire_put_bytes(&w, "0123456789", 10);
        return conn_send(c, FRAME_HANDOVER, body, w.off, dl, &why);
    case 6:
        wire_put_u32(&w, JOB_OP_MARK);
        wire_put_u32(&w, 0);
        wire_put_u64(&w, 12345 + next64() % 1000);
        wire_put_u64(&w, 1);
        return conn_send(c, FRAME_HANDOVER, body, w.off, dl, &why);
    case 7:
        wire_put_u32(&w, CUDA_OP_cuMemFree_v2);
        wire_put_u64(&w, 1000000 + next64() % 1000000);
        return conn_send(c, FRAME_DROP, body, w.off, dl, &why);
    case 8: return conn_send(c, FRAME_DROP, "\x07\x00\x00", 3, dl, &why);
    case 9:
        wire_put_u64(&w, 1);
        wire_put_u64(&w, 1);
        wire_put_u64(&w, 0);
        return conn_send(c, FRAME_WORD, body, w.off, dl, &why);
    case 10:
        frame_header_encode(hdr, FRAME_BEAT, 0);
        hdr[8] = (uint8_t)(0x40 + next64() % 0x80);
        return send_raw(c->fd, hdr, sizeof hdr);
    default:
        frame_header_encode(hdr, FRAME_REQUEST, 0);
        wire_store_u64(hdr, (uint64_t)1 << 40);
        return send_raw(c->fd, hdr, sizeof hdr);
    }
}

/* Opens a job on a connected, proven c: 0, or -1 with what went wrong. */
static int open_job(conn *c, char *said, size_t cap)
{
    rig_why why = { "" };
    for (uint64_t base = JOB_WINDOW_FIRST; base < JOB_WINDOW_LAST; base += JOB_WINDOW_SIZE) {
        uint8_t body[24];
        wire_writer w = wire_writer_init(body, sizeof body);
        wire_put_u32(&w, JOB_OP_OPEN);
        wire_put_u32(&w, 1);
        wire_put_u64(&w, base);
        wire_put_u64(&w, JOB_WINDOW_SIZE);
        if (conn_send(c, FRAME_REQUEST, body, w.off, deadline_after(JOB_WAIT_MS), &why) < 0) {
            snprintf(said, cap, "open: %s", why.text);
            return -1;
        }
        for (;;) {
            frame f = { 0 };
            if (conn_recv(c, &f, deadline_after(JOB_WAIT_MS), -1, &why) < 0) {
                snprintf(said, cap, "open: %s", why.text);
                return -1;
            }
            if (f.kind != FRAME_ANSWER) {
                frame_release(&f);
                continue;
            }
            wire_reader r = wire_reader_init(f.payload, f.len);
            uint8_t status = wire_get_u8(&r);
            uint32_t result = wire_get_u32(&r);
            uint8_t taken = wire_get_u8(&r);
            frame_release(&f);
            if (r.err || status || result) {
                snprintf(said, cap, "open: refused (status %u, CUresult %u)", status, result);
                return -1;
            }
            if (taken)
                return 0;
            break;
        }
    }
    snprintf(said, cap, "open: no window");
    return -1;
}

/* Reads until the agent aborts, closes or answers; what it said into said. */
static void read_verdict(conn *c, char *said, size_t cap)
{
    int64_t until = deadline_after(JOB_WAIT_MS);
    for (;;) {
        frame f = { 0 };
        rig_why why = { "" };
        int rc = conn_recv(c, &f, until, -1, &why);
        if (rc == RIG_E_TIMEOUT) {
            snprintf(said, cap, "no answer within %d s", JOB_WAIT_MS / 1000);
            return;
        }
        if (rc < 0) {
            snprintf(said, cap, "closed (%s)", why.text);
            return;
        }
        wire_reader r = wire_reader_init(f.payload, f.len);
        if (f.kind == FRAME_ABORT) {
            const uint8_t *s;
            size_t n = wire_get_string(&r, &s, JOB_REASON_MAX);
            snprintf(said, cap, "aborted: %.*s", (int)n, r.err ? "" : (const char *)s);
            frame_release(&f);
            return;
        }
        if (f.kind == FRAME_ANSWER) {
            uint8_t status = wire_get_u8(&r);
            if (status == 0)
                snprintf(said, cap, "answered CUresult %u", wire_get_u32(&r));
            else {
                const uint8_t *s;
                size_t n = wire_get_string(&r, &s, JOB_REASON_MAX);
                snprintf(said, cap, "answered with a refusal: %.*s", (int)n, r.err ? "" : (const char *)s);
            }
            frame_release(&f);
            return;
        }
        if (f.kind == FRAME_CLOSE) {
            snprintf(said, cap, "closed");
            frame_release(&f);
            return;
        }
        frame_release(&f);   /* beats, words, bytes */
    }
}

static int controller_main(const char *key_file, int jobs, double seconds, uint64_t seed)
{
    rig_key key;
    rig_why why = { "" };
    if (!key_file || key_read_file(&key, key_file, &why) < 0) {
        fprintf(stderr, "rig-hostile: %s\n", key_file ? why.text : "controller needs --key-file");
        return 1;
    }
    rng = seed;
    printf("hostile: controller seed %llu\n", (unsigned long long)seed);
    fflush(stdout);
    double start = now_s();
    int done = 0, aborted = 0, proven = 0;
    for (int i = 0; i < jobs && now_s() - start < seconds; i++) {
        unsigned k = (unsigned)i % KINDS;
        char said[JOB_REASON_MAX + 64] = "";
        int fd = dial(2000);
        if (fd < 0) {
            printf("hostile: job %d: %s: cannot connect: %s\n", i, kinds[k], strerror(errno));
            continue;
        }
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        hs_config cfg = { .key = &key, .version = HS_VERSION, .timeout_ms = HS_TIMEOUT_MS };
        if (hs_dial(fd, &cfg, 0, 1, &why) < 0) {
            printf("hostile: job %d: %s: not admitted: %s\n", i, kinds[k], why.text);
            close(fd);
            done++;
            continue;
        }
        proven++;
        conn c;
        if (conn_init(&c, fd, JOB_FRAME_LIMIT, &why) < 0) {
            close(fd);
            return 1;
        }
        if (open_job(&c, said, sizeof said) == 0) {
            if (send_hostile(&c, k) < 0)
                snprintf(said, sizeof said, "could not send it");
            else
                read_verdict(&c, said, sizeof said);
        }
        aborted += strncmp(said, "aborted: ", 9) == 0;
        printf("hostile: job %d: %s: %s\n", i, kinds[k], said);
        fflush(stdout);
        conn_close(&c);
        done++;
    }
    printf("hostile: done controller %d jobs (%d proven), %d aborted by the agent, %.1f s\n", done, proven, aborted,
           now_s() - start);
    key_wipe(&key);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "to", required_argument, NULL, 't' },      { "count", required_argument, NULL, 'n' },
        { "seconds", required_argument, NULL, 's' }, { "record", required_argument, NULL, 'r' },
        { "hold", required_argument, NULL, 'o' },    { "key-file", required_argument, NULL, 'k' },
        { "jobs", required_argument, NULL, 'j' },    { "seed", required_argument, NULL, 'e' },
        { "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
    };
    if (argc < 2) {
        fputs(usage, stderr);
        return 1;
    }
    const char *mode = argv[1], *record = NULL, *key_file = NULL;
    int count = 20, hold = 400, jobs = (int)KINDS;
    double seconds = -1;
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    bool to = false;
    optind = 2;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 't':
            if (parse_to(optarg) < 0) {
                fprintf(stderr, "rig-hostile: --to wants IPV4:PORT, not %s\n", optarg);
                return 1;
            }
            to = true;
            break;
        case 'n': count = atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'r': record = optarg; break;
        case 'o': hold = atoi(optarg); break;
        case 'k': key_file = optarg; break;
        case 'j': jobs = atoi(optarg); break;
        case 'e': seed = strtoull(optarg, NULL, 0); break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    if (!to || optind < argc || count < 1 || count > IDLE_MAX || hold < 1 || hold > 100000 || jobs < 0) {
        fputs(usage, stderr);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(mode, "idle") == 0 || strcmp(mode, "drip") == 0)
        return strangers_main(mode[0] == 'd', count, seconds < 0 ? 30 : seconds, record);
    if (strcmp(mode, "flood") == 0)
        return flood_main(seconds < 0 ? 3 : seconds, hold);
    if (strcmp(mode, "controller") == 0)
        return controller_main(key_file, jobs, seconds < 0 ? 120 : seconds, seed);
    fputs(usage, stderr);
    return 1;
}
