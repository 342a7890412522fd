/* The bench's loopback TCP; see tcp.h. */
#include "bench/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/common.h"
#include "proto/net.h"

void tcp_put_all(int fd, const void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("tcp: write: %s", strerror(errno));
        off += (size_t)w;
    }
}

void tcp_get_all(int fd, void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t r = read(fd, (char *)p + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("tcp: read: %s", r ? strerror(errno) : "closed");
        off += (size_t)r;
    }
}

void tcp_peer(int fd)
{
    /* What it sends is random and never overwritten by what it sinks: it
     * may land in the bench program's own buffer (tcp_transfer_whole),
     * which rig copies next and must not find compressible (the 2s of a
     * stream sunk into one shared buffer made 6 GiB of 1 GiB and 4 GiB
     * copies go compressed). */
    uint8_t *buf = malloc(TCP_STREAM_WRITE), *sink = malloc(TCP_STREAM_WRITE);
    if (!buf || !sink)
        _exit(1);
    fill_random(buf, TCP_STREAM_WRITE, 0x7e57);
    for (;;) {
        uint8_t cmd;
        if (read(fd, &cmd, 1) != 1)
            _exit(0);
        if (cmd == 'p') {
            uint32_t count;
            tcp_get_all(fd, &count, sizeof count);
            uint8_t m[TCP_MSG];
            for (uint32_t i = 0; i < count; i++) {
                tcp_get_all(fd, m, TCP_MSG);
                tcp_put_all(fd, m, TCP_MSG);
            }
        } else if (cmd == 's') {
            uint64_t total;
            tcp_get_all(fd, &total, sizeof total);
            for (uint64_t got = 0; got < total;) {
                ssize_t r = read(fd, sink, TCP_STREAM_WRITE);
                if (r <= 0)
                    _exit(1);
                got += (uint64_t)r;
            }
            tcp_put_all(fd, "k", 1);
        } else if (cmd == 'g') {
            uint64_t total;
            tcp_get_all(fd, &total, sizeof total);
            for (uint64_t sent = 0; sent < total;) {
                size_t n = total - sent < TCP_STREAM_WRITE ? (size_t)(total - sent) : TCP_STREAM_WRITE;
                tcp_put_all(fd, buf, n);
                sent += n;
            }
        } else {
            _exit(1);
        }
    }
}

int tcp_listen(uint16_t *port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&sa, &sl))
        die("tcp: listen: %s", strerror(errno));
    *port = ntohs(sa.sin_port);
    return ls;
}

int tcp_connect(uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                              .sin_port = htons(port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
        die("tcp: connect to 127.0.0.1:%u: %s", (unsigned)port, strerror(errno));
    net_tune(fd);
    return fd;
}

double tcp_stream_once(int fd, const uint8_t *buf, uint64_t total)
{
    uint8_t cmd = 's';
    tcp_put_all(fd, &cmd, 1);
    tcp_put_all(fd, &total, sizeof total);
    double t0 = now_s();
    for (uint64_t off = 0; off < total; off += TCP_STREAM_WRITE)
        tcp_put_all(fd, buf, total - off < TCP_STREAM_WRITE ? (size_t)(total - off) : TCP_STREAM_WRITE);
    char k;
    tcp_get_all(fd, &k, 1);
    return (double)total / (now_s() - t0) / 1e9;
}

static double transfer(int fd, uint8_t *buf, uint64_t n, bool send, bool whole)
{
    uint8_t cmd = send ? 's' : 'g';
    double t0 = now_s();
    tcp_put_all(fd, &cmd, 1);
    tcp_put_all(fd, &n, sizeof n);
    for (uint64_t off = 0; off < n;) {
        size_t c = n - off < TCP_STREAM_WRITE ? (size_t)(n - off) : TCP_STREAM_WRITE;
        uint8_t *at = whole ? buf + off : buf;
        if (send)
            tcp_put_all(fd, at, c);
        else
            tcp_get_all(fd, at, c);
        off += c;
    }
    if (send) {
        char ack;
        tcp_get_all(fd, &ack, 1);
    }
    return (double)n / (now_s() - t0) / 1e9;
}

double tcp_transfer_once(int fd, uint8_t *buf, uint64_t n, bool send)
{
    return transfer(fd, buf, n, send, false);
}

double tcp_transfer_whole(int fd, uint8_t *buf, uint64_t n, bool send)
{
    return transfer(fd, buf, n, send, true);
}
