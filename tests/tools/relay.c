/* rig-relay: a fault-injecting TCP relay for the fault tests. It accepts
 * controllers and dials the agent for each, passes bytes both ways, and on
 * command stalls, slows, cuts or corrupts them. It follows the job's wire
 * (docs/wire.md: the handshake, then u64 length + u8 kind + payload
 * frames) in each direction so a flip can aim at one byte of one frame.
 *
 *   rig-relay --to HOST:PORT [--listen HOST:PORT]
 *
 * Prints "listening on HOST:PORT" on stdout, then reads one command a line
 * on stdin and answers each with one line on stdout ("ok ..." or
 * "error: ..."). It exits when stdin ends. DIR is up (controller to agent),
 * down (agent to controller) or both; commands apply to every connection,
 * present and future:
 *
 *   pass                      forward everything again (ends stall/slow)
 *   stall DIR                 stop moving bytes that way (the sender's
 *                             buffers fill and its sends stop progressing)
 *   slow DIR BYTES_PER_S      move at most that many bytes a second
 *   cut [rst]                 close every connection at both ends (FIN, or
 *                             a reset with rst)
 *   flip DIR header|payload OFFSET [MASK [KIND]]
 *                             once, XOR byte OFFSET of the header (0..8) or
 *                             payload of the next frame going that way
 *                             (of kind KIND, a number, if given) with MASK
 *                             (default 0xff); bytes of the handshake never
 *   stats                     "ok links N up F B down F B flips N cuts N"
 *   quit                      exit
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RELAY_BUF (256 * 1024)
#define RELAY_LINKS 64
#define RELAY_FLIPS 8
#define HEADER_SIZE 9
/* The relay's receive windows: small and fixed, so what it holds back stays
 * held at the sender (whose send then stops progressing) rather than in a
 * window that loopback autotuning grows to tens of MiB. */
#define RELAY_SOCKBUF (256 * 1024)

enum { UP, DOWN };
static const char *const dir_names[] = { "up", "down" };

/* Where a direction's parser is in the stream. */
enum phase { PH_HANDSHAKE, PH_HEADER, PH_PAYLOAD, PH_OPAQUE };

typedef struct flip {
    bool armed;
    int dir;
    bool header;
    uint64_t offset;
    uint8_t mask;
    int kind;               /* 0: any */
} flip;

typedef struct direction {
    int src, dst;
    uint8_t *buf;
    size_t len;             /* bytes read, not yet written */
    size_t ready;           /* buf[0..ready) may be written */
    size_t parsed;          /* buf[0..parsed) seen by the parser */
    bool eof, shut;
    enum phase phase;
    uint64_t stream_off;    /* stream offset of buf[parsed] */
    uint64_t payload_left, payload_off;
    int aim;                /* index of the flip aimed at this frame, or -1 */
    int aim_kind;
} direction;

typedef struct relay_link {
    bool used;
    direction d[2];
} relay_link;

static relay_link links[RELAY_LINKS];
static flip flips[RELAY_FLIPS];
static bool stalled[2];
static uint64_t rate[2];            /* bytes a second; 0: unlimited */
static double allowance[2];
static double last_refill;
static uint64_t frames_seen[2], bytes_seen[2], flips_done, cuts_done;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon - s >= 64)
        return -1;
    char host[64];
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &a->sin_addr) != 1)
        return -1;
    return 0;
}

/* Ends a connection at both ends: a reset when rst, else an orderly close. */
static void link_close(relay_link *l, bool rst)
{
    int fds[2] = { l->d[UP].src, l->d[DOWN].src };
    for (int i = 0; i < 2; i++) {
        if (rst) {
            struct linger lg = { 1, 0 };
            setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(fds[i]);
        free(l->d[i].buf);
    }
    memset(l, 0, sizeof *l);
}

static void dir_init(direction *d, int src, int dst)
{
    memset(d, 0, sizeof *d);
    d->src = src;
    d->dst = dst;
    d->buf = malloc(RELAY_BUF);
    d->phase = PH_HANDSHAKE;
    d->aim = -1;
}

/* The handshake's bytes (proto/handshake.h): the agent sends 45 (status at
 * offset 12) and then 33 (status at 45); the controller sends 72. A refusal
 * (status 1) leaves the rest of the stream opaque. */
static void parse_handshake_byte(direction *d, int which, uint8_t b)
{
    uint64_t off = d->stream_off;
    if (which == DOWN && (off == 12 || off == 45) && b != 0)
        d->phase = PH_OPAQUE;
    uint64_t end = which == DOWN ? 78 : 72;
    if (d->phase == PH_HANDSHAKE && off + 1 == end)
        d->phase = PH_HEADER;
}

static void parse(direction *d, int which)
{
    while (d->parsed < d->len) {
        switch (d->phase) {
        case PH_OPAQUE:
            d->stream_off += d->len - d->parsed;
            d->parsed = d->ready = d->len;
            break;
        case PH_HANDSHAKE:
            parse_handshake_byte(d, which, d->buf[d->parsed]);
            d->parsed++;
            d->stream_off++;
            d->ready = d->parsed;
            break;
        case PH_HEADER: {
            if (d->len - d->parsed < HEADER_SIZE)
                return;            /* held back until whole, so any byte can be aimed at */
            uint8_t *h = d->buf + d->parsed;
            uint64_t len = 0;
            for (int i = 7; i >= 0; i--)
                len = len << 8 | h[i];
            int kind = h[8];
            frames_seen[which]++;
            d->aim = -1;
            for (int i = 0; i < RELAY_FLIPS; i++) {
                flip *f = &flips[i];
                if (!f->armed || f->dir != which || (f->kind && f->kind != kind))
                    continue;
                if (f->header && f->offset < HEADER_SIZE) {
                    uint8_t was = h[f->offset];
                    h[f->offset] ^= f->mask;
                    f->armed = false;
                    flips_done++;
                    fprintf(stderr, "rig-relay: flipped %s header byte %llu (0x%02x -> 0x%02x) of a kind %d frame of %llu bytes\n",
                            dir_names[which], (unsigned long long)f->offset, was, h[f->offset], kind,
                            (unsigned long long)len);
                    break;
                }
                if (!f->header && f->offset < len) {
                    d->aim = i;
                    d->aim_kind = kind;
                    f->armed = false;
                    break;
                }
            }
            d->parsed += HEADER_SIZE;
            d->stream_off += HEADER_SIZE;
            d->ready = d->parsed;
            /* The sender's own length keeps us on its frame boundaries. */
            d->payload_left = len;
            d->payload_off = 0;
            d->phase = len ? PH_PAYLOAD : PH_HEADER;
            break;
        }
        case PH_PAYLOAD: {
            size_t n = d->len - d->parsed;
            if (n > d->payload_left)
                n = (size_t)d->payload_left;
            if (d->aim >= 0) {
                flip *f = &flips[d->aim];
                if (f->offset >= d->payload_off && f->offset < d->payload_off + n) {
                    uint8_t *b = &d->buf[d->parsed + (f->offset - d->payload_off)];
                    uint8_t was = *b;
                    *b ^= f->mask;
                    flips_done++;
                    fprintf(stderr, "rig-relay: flipped %s payload byte %llu (0x%02x -> 0x%02x) of a kind %d frame\n",
                            dir_names[which], (unsigned long long)f->offset, was, *b, d->aim_kind);
                    d->aim = -1;
                }
            }
            d->parsed += n;
            d->stream_off += n;
            d->payload_off += n;
            d->payload_left -= n;
            d->ready = d->parsed;
            if (!d->payload_left)
                d->phase = PH_HEADER;
            break;
        }
        }
    }
}

static void accept_one(int lfd, const struct sockaddr_in *to)
{
    int c = accept(lfd, NULL, NULL);
    if (c < 0)
        return;
    int a = socket(AF_INET, SOCK_STREAM, 0);
    int small = RELAY_SOCKBUF;
    if (a >= 0)
        setsockopt(a, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    if (a < 0 || connect(a, (const struct sockaddr *)to, sizeof *to) < 0) {
        fprintf(stderr, "rig-relay: cannot reach the agent: %s\n", strerror(errno));
        if (a >= 0)
            close(a);
        close(c);
        return;
    }
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblock(c);
    set_nonblock(a);
    for (int i = 0; i < RELAY_LINKS; i++) {
        if (links[i].used)
            continue;
        links[i].used = true;
        dir_init(&links[i].d[UP], c, a);
        dir_init(&links[i].d[DOWN], a, c);
        return;
    }
    fprintf(stderr, "rig-relay: too many connections\n");
    close(a);
    close(c);
}

static void refill(void)
{
    double t = now_s();
    for (int w = 0; w < 2; w++) {
        if (!rate[w])
            continue;
        allowance[w] += (t - last_refill) * (double)rate[w];
        if (allowance[w] > (double)rate[w] / 10)
            allowance[w] = (double)rate[w] / 10;   /* bursts of at most 100 ms */
    }
    last_refill = t;
}

/* Moves what it can one way; false when the connection must end. */
static bool pump(relay_link *l, int which, short src_ev, short dst_ev)
{
    direction *d = &l->d[which];
    if (stalled[which])
        return true;
    if ((src_ev & (POLLIN | POLLHUP | POLLERR)) && !d->eof && d->len < RELAY_BUF) {
        ssize_t n = read(d->src, d->buf + d->len, RELAY_BUF - d->len);
        if (n > 0) {
            d->len += (size_t)n;
            parse(d, which);
        } else if (n == 0) {
            d->eof = true;
            d->ready = d->len;       /* an unfinished header goes out as it is */
        } else if (errno != EAGAIN && errno != EINTR) {
            return false;            /* reset: pass it on as a reset */
        }
    }
    if (d->ready && (dst_ev & (POLLOUT | POLLERR | POLLHUP))) {
        size_t want = d->ready;
        if (rate[which]) {
            if (allowance[which] < 1)
                want = 0;
            else if ((double)want > allowance[which])
                want = (size_t)allowance[which];
        }
        if (want) {
            ssize_t n = send(d->dst, d->buf, want, MSG_NOSIGNAL);
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                return false;
            if (n > 0) {
                bytes_seen[which] += (uint64_t)n;
                if (rate[which])
                    allowance[which] -= (double)n;
                memmove(d->buf, d->buf + n, d->len - (size_t)n);
                d->len -= (size_t)n;
                d->ready -= (size_t)n;
                d->parsed -= (size_t)n;
            }
        }
    }
    if (d->eof && !d->len && !d->shut) {
        shutdown(d->dst, SHUT_WR);
        d->shut = true;
    }
    return true;
}

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static int parse_dir(const char *s, int *lo, int *hi)
{
    if (!s)
        return -1;
    if (!strcmp(s, "up"))
        *lo = *hi = UP;
    else if (!strcmp(s, "down"))
        *lo = *hi = DOWN;
    else if (!strcmp(s, "both"))
        *lo = UP, *hi = DOWN;
    else
        return -1;
    return 0;
}

/* One command line; false on quit. */
static bool command(char *line)
{
    char *save = NULL;
    char *verb = strtok_r(line, " \t\r\n", &save);
    char *a1 = strtok_r(NULL, " \t\r\n", &save), *a2 = strtok_r(NULL, " \t\r\n", &save);
    char *a3 = strtok_r(NULL, " \t\r\n", &save), *a4 = strtok_r(NULL, " \t\r\n", &save);
    char *a5 = strtok_r(NULL, " \t\r\n", &save);
    int lo, hi;
    if (!verb) {
        reply("error: empty command");
    } else if (!strcmp(verb, "quit")) {
        reply("ok");
        return false;
    } else if (!strcmp(verb, "pass")) {
        stalled[UP] = stalled[DOWN] = false;
        rate[UP] = rate[DOWN] = 0;
        reply("ok");
    } else if (!strcmp(verb, "stall") && parse_dir(a1, &lo, &hi) == 0) {
        for (int w = lo; w <= hi; w++)
            stalled[w] = true;
        reply("ok");
    } else if (!strcmp(verb, "slow") && parse_dir(a1, &lo, &hi) == 0 && a2 && atoll(a2) > 0) {
        refill();
        for (int w = lo; w <= hi; w++) {
            rate[w] = (uint64_t)atoll(a2);
            allowance[w] = 0;
        }
        reply("ok");
    } else if (!strcmp(verb, "cut") && (!a1 || !strcmp(a1, "rst"))) {
        int n = 0;
        for (int i = 0; i < RELAY_LINKS; i++)
            if (links[i].used) {
                link_close(&links[i], a1 != NULL);
                n++;
            }
        cuts_done += (uint64_t)n;
        reply("ok %d", n);
    } else if (!strcmp(verb, "flip") && parse_dir(a1, &lo, &hi) == 0 && lo == hi && a2 &&
               (!strcmp(a2, "header") || !strcmp(a2, "payload")) && a3) {
        flip f = { .armed = true, .dir = lo, .header = !strcmp(a2, "header"),
                   .offset = strtoull(a3, NULL, 0), .mask = a4 ? (uint8_t)strtoul(a4, NULL, 0) : 0xff,
                   .kind = a5 ? atoi(a5) : 0 };
        int i = 0;
        while (i < RELAY_FLIPS && flips[i].armed)
            i++;
        if (i == RELAY_FLIPS || (f.header && f.offset >= HEADER_SIZE) || !f.mask) {
            reply("error: cannot arm that flip");
        } else {
            flips[i] = f;
            reply("ok");
        }
    } else if (!strcmp(verb, "stats")) {
        int n = 0;
        for (int i = 0; i < RELAY_LINKS; i++)
            n += links[i].used;
        reply("ok links %d up %llu %llu down %llu %llu flips %llu cuts %llu", n,
              (unsigned long long)frames_seen[UP], (unsigned long long)bytes_seen[UP],
              (unsigned long long)frames_seen[DOWN], (unsigned long long)bytes_seen[DOWN],
              (unsigned long long)flips_done, (unsigned long long)cuts_done);
    } else {
        reply("error: unknown command or arguments: %s", verb);
    }
    return true;
}

static const char usage[] = "Usage: rig-relay --to HOST:PORT [--listen HOST:PORT]\n";

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "to", required_argument, NULL, 't' },
        { "listen", required_argument, NULL, 'l' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *to_s = NULL, *listen_s = "127.0.0.1:0";
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 't': to_s = optarg; break;
        case 'l': listen_s = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 1;
        }
    }
    struct sockaddr_in to, at;
    if (!to_s || parse_addr(to_s, &to) < 0 || parse_addr(listen_s, &at) < 0 || optind < argc) {
        fputs(usage, stderr);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int small = RELAY_SOCKBUF;       /* accepted sockets inherit it */
    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    socklen_t sl = sizeof at;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&at, sizeof at) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&at, &sl) < 0) {
        fprintf(stderr, "rig-relay: cannot listen on %s: %s\n", listen_s, strerror(errno));
        return 1;
    }
    char host[64];
    inet_ntop(AF_INET, &at.sin_addr, host, sizeof host);
    reply("listening on %s:%u", host, (unsigned)ntohs(at.sin_port));
    last_refill = now_s();

    char line[512];
    size_t have = 0;
    for (;;) {
        struct pollfd p[2 + 2 * RELAY_LINKS];
        int idx[RELAY_LINKS];
        int n = 0;
        p[n++] = (struct pollfd){ .fd = 0, .events = POLLIN };
        p[n++] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        bool throttled = false;
        for (int i = 0; i < RELAY_LINKS; i++) {
            idx[i] = -1;
            relay_link *l = &links[i];
            if (!l->used)
                continue;
            idx[i] = n;
            /* p[n]: the controller's socket, p[n+1]: the agent's. */
            for (int w = 0; w < 2; w++) {
                direction *d = &l->d[w], *o = &l->d[!w];
                short ev = 0;
                if (!stalled[w] && !d->eof && d->len < RELAY_BUF)
                    ev |= POLLIN;
                if (!stalled[!w] && o->ready) {
                    if (rate[!w] && allowance[!w] < 1)
                        throttled = true;
                    else
                        ev |= POLLOUT;
                }
                p[n + w] = (struct pollfd){ .fd = d->src, .events = ev };
            }
            n += 2;
        }
        if (poll(p, (nfds_t)n, throttled ? 10 : 1000) < 0 && errno != EINTR)
            return 1;
        refill();
        if (p[1].revents & POLLIN)
            accept_one(lfd, &to);
        for (int i = 0; i < RELAY_LINKS; i++) {
            if (idx[i] < 0 || !links[i].used)
                continue;
            short ctl = p[idx[i]].revents, agt = p[idx[i] + 1].revents;
            if ((ctl | agt) & POLLERR) {
                link_close(&links[i], true);     /* a reset at one end resets the other */
                continue;
            }
            if (!pump(&links[i], UP, ctl, agt) || !pump(&links[i], DOWN, agt, ctl)) {
                link_close(&links[i], true);
                continue;
            }
            relay_link *l = &links[i];
            if (l->d[UP].shut && l->d[DOWN].shut)
                link_close(l, false);
        }
        if (p[0].revents & (POLLIN | POLLHUP)) {
            ssize_t r = read(0, line + have, sizeof line - 1 - have);
            if (r <= 0)
                return 0;
            have += (size_t)r;
            line[have] = '\0';
            char *nl;
            while ((nl = strchr(line, '\n'))) {
                *nl = '\0';
                if (!command(line))
                    return 0;
                size_t rest = have - (size_t)(nl + 1 - line);
                memmove(line, nl + 1, rest + 1);
                have = rest;
            }
            if (have == sizeof line - 1)
                have = 0;            /* a line too long: dropped */
        }
    }
}
