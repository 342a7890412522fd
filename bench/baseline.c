/* make bench's baselines: what this machine and its loopback network allow,
 * measured the way rig uses them. Two processes (as the program and the
 * agent are) on one loopback TCP connection with rig's socket options
 * (proto/net.c net_tune: TCP_NODELAY, SO_KEEPALIVE):
 *   tcp_rtt      a 32-byte message and its 32-byte reply (median of single
 *                round trips)
 *   tcp_stream   one way, 4 MiB writes, the reader reads into a buffer
 *   memcpy       64 MiB between two touched buffers
 * Prints one "fig" line per figure (bench/common.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/common.h"

#define MSG 32
#define STREAM_WRITE ((size_t)4 << 20)
#define STREAM_TOTAL ((size_t)512 << 20)

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
}

static void put_all(int fd, const void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("baseline: write: %s", strerror(errno));
        off += (size_t)w;
    }
}

static void get_all(int fd, void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t r = read(fd, (char *)p + off, n - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("baseline: read: %s", r ? strerror(errno) : "closed");
        off += (size_t)r;
    }
}

/* The peer: answers what the parent asks, one command byte at a time. */
static void peer(int fd)
{
    uint8_t *buf = malloc(STREAM_WRITE);
    memset(buf, 1, STREAM_WRITE);
    for (;;) {
        uint8_t cmd;
        if (read(fd, &cmd, 1) != 1)
            _exit(0);
        if (cmd == 'p') {               /* ping-pong: u32 count */
            uint32_t count;
            get_all(fd, &count, sizeof count);
            uint8_t m[MSG];
            for (uint32_t i = 0; i < count; i++) {
                get_all(fd, m, MSG);
                put_all(fd, m, MSG);
            }
        } else if (cmd == 's') {        /* sink: u64 bytes, then one byte back */
            uint64_t total;
            get_all(fd, &total, sizeof total);
            for (uint64_t got = 0; got < total;) {
                ssize_t r = read(fd, buf, STREAM_WRITE);
                if (r <= 0)
                    _exit(1);
                got += (uint64_t)r;
            }
            put_all(fd, "k", 1);
        }
    }
}

static void measure_rtt(int fd)
{
    enum { N = 4000, WARM = 500 };
    static double t[N];
    uint8_t m[MSG] = { 0 };
    uint8_t cmd = 'p';
    uint32_t count = N + WARM;
    put_all(fd, &cmd, 1);
    put_all(fd, &count, sizeof count);
    for (int i = 0; i < N + WARM; i++) {
        double t0 = now_s();
        put_all(fd, m, MSG);
        get_all(fd, m, MSG);
        if (i >= WARM)
            t[i - WARM] = (now_s() - t0) * 1e6;
    }
    fig_print("tcp_rtt", "us", t, N);
}

static void measure_stream(int fd)
{
    enum { REPS = 5 };
    double gbs[REPS];
    uint8_t *buf = malloc(STREAM_WRITE);
    memset(buf, 2, STREAM_WRITE);
    for (int rep = -1; rep < REPS; rep++) {
        uint8_t cmd = 's';
        uint64_t total = STREAM_TOTAL;
        put_all(fd, &cmd, 1);
        put_all(fd, &total, sizeof total);
        double t0 = now_s();
        for (size_t off = 0; off < STREAM_TOTAL; off += STREAM_WRITE)
            put_all(fd, buf, STREAM_WRITE);
        char k;
        get_all(fd, &k, 1);
        if (rep >= 0)
            gbs[rep] = (double)STREAM_TOTAL / (now_s() - t0) / 1e9;
    }
    free(buf);
    fig_print("tcp_stream", "GB/s", gbs, REPS);
}

static void measure_memcpy(void)
{
    enum { REPS = 11 };
    size_t n = (size_t)64 << 20;
    uint8_t *a = malloc(n), *b = malloc(n);
    memset(a, 3, n);
    memset(b, 4, n);
    double gbs[REPS];
    for (int rep = -1; rep < REPS; rep++) {
        double t0 = now_s();
        memcpy(rep & 1 ? a : b, rep & 1 ? b : a, n);
        if (rep >= 0)
            gbs[rep] = (double)n / (now_s() - t0) / 1e9;
    }
    fig_print("memcpy", "GB/s", gbs, REPS);
    free(a);
    free(b);
}

int main(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&sa, &sl))
        die("baseline: listen: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die("baseline: fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            _exit(1);
        tune(fd);
        close(ls);
        peer(fd);
        _exit(0);
    }
    close(ls);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
        die("baseline: connect: %s", strerror(errno));
    tune(fd);
    measure_rtt(fd);
    measure_stream(fd);
    close(fd);
    waitpid(pid, NULL, 0);
    measure_memcpy();
    return 0;
}
