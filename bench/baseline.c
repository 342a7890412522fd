/* make bench's baselines: what this machine and its loopback network allow,
 * measured the way rig uses them. Two processes (as the program and the
 * agent are) on one loopback TCP connection with rig's socket options
 * (proto/net.c net_tune: TCP_NODELAY, SO_KEEPALIVE):
 *   tcp_rtt        a 32-byte message and its 32-byte reply (median of single
 *                  round trips)
 *   tcp_stream     one way, 4 MiB writes, the reader reads into a buffer
 *                  (512 MiB; 64 MiB through a relay)
 *   tcp_send_SIZE  SIZE bytes one way and a 1-byte reply: what a synchronous
 *                  copy of SIZE bytes to the peer could cost at best
 *   tcp_recv_SIZE  a request, and SIZE bytes back
 *   memcpy         64 MiB between two touched buffers
 *
 *   baseline [RELAY ARG...]
 *
 * With arguments, they are a relay's command line (bench/relay.c, e.g.
 * "build/bench/relay --delay-us 100"): baseline starts it with
 * "--to 127.0.0.1:PORT" of its peer and talks through it, so rig through the
 * same relay compares like with like (no memcpy then). BENCH_BW_SIZES (e.g.
 * "64MiB") limits the sizes, as for the bench program; BENCH_FIG_S (4) the
 * seconds one size's figure takes at most.
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
#include <stdbool.h>

#include "bench/common.h"

#define MSG 32
#define STREAM_WRITE ((size_t)4 << 20)
#define STREAM_TOTAL ((size_t)512 << 20)
#define RELAY_STREAM_TOTAL ((size_t)64 << 20)

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
        } else if (cmd == 'g') {        /* source: u64 bytes, sent back */
            uint64_t total;
            get_all(fd, &total, sizeof total);
            for (uint64_t sent = 0; sent < total;) {
                size_t n = total - sent < STREAM_WRITE ? (size_t)(total - sent) : STREAM_WRITE;
                put_all(fd, buf, n);
                sent += n;
            }
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

static void measure_stream(int fd, uint64_t stream_total)
{
    enum { REPS = 5 };
    double gbs[REPS];
    uint8_t *buf = malloc(STREAM_WRITE);
    memset(buf, 2, STREAM_WRITE);
    for (int rep = -1; rep < REPS; rep++) {
        uint8_t cmd = 's';
        uint64_t total = stream_total;
        put_all(fd, &cmd, 1);
        put_all(fd, &total, sizeof total);
        double t0 = now_s();
        for (size_t off = 0; off < stream_total; off += STREAM_WRITE)
            put_all(fd, buf, STREAM_WRITE);
        char k;
        get_all(fd, &k, 1);
        if (rep >= 0)
            gbs[rep] = (double)stream_total / (now_s() - t0) / 1e9;
    }
    free(buf);
    fig_print("tcp_stream", "GB/s", gbs, REPS);
}

/* Synchronous transfers of each size, both ways, as bench.c's bw section
 * copies. */
static void measure_copies(int fd)
{
    static const struct { size_t size; const char *name; int reps; } sizes[] = {
        { (size_t)4 << 10, "4KiB", 400 },  { (size_t)64 << 10, "64KiB", 200 }, { (size_t)1 << 20, "1MiB", 60 },
        { (size_t)64 << 20, "64MiB", 7 }, { (size_t)1 << 30, "1GiB", 3 },
    };
    const double budget = getenv("BENCH_FIG_S") ? atof(getenv("BENCH_FIG_S")) : 4.0;
    const char *only = getenv("BENCH_BW_SIZES");
    uint8_t *buf = malloc(STREAM_WRITE);
    memset(buf, 5, STREAM_WRITE);
    static double gbs[400];
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        if (only && !strstr(only, sizes[k].name))
            continue;
        for (int dir = 0; dir < 2; dir++) {
            uint64_t n = sizes[k].size;
            int reps = sizes[k].reps, warm = reps > 10 ? reps / 10 : 1, got = 0;
            double t_start = 0;
            for (int i = -warm; i < reps; i++) {
                if (i == 0)
                    t_start = now_s();
                else if (i > 0 && now_s() - t_start > budget)
                    break;
                uint8_t cmd = dir ? 'g' : 's';
                double t0 = now_s();
                put_all(fd, &cmd, 1);
                put_all(fd, &n, sizeof n);
                for (uint64_t off = 0; off < n;) {
                    size_t c = n - off < STREAM_WRITE ? (size_t)(n - off) : STREAM_WRITE;
                    if (dir)
                        get_all(fd, buf, c);
                    else
                        put_all(fd, buf, c);
                    off += c;
                }
                if (!dir) {
                    char ack;
                    get_all(fd, &ack, 1);
                }
                if (i >= 0)
                    gbs[got++] = (double)n / (now_s() - t0) / 1e9;
            }
            char name[64];
            snprintf(name, sizeof name, "tcp_%s_%s", dir ? "recv" : "send", sizes[k].name);
            fig_print(name, "GB/s", gbs, (size_t)got);
        }
    }
    free(buf);
}

/* Starts the relay command argv with "--to 127.0.0.1:port" added; returns
 * the port it listens on, and its pid in *pid. */
static uint16_t start_relay(char **argv, int argc, uint16_t port, pid_t *pid)
{
    int out[2];
    if (pipe(out))
        die("baseline: pipe: %s", strerror(errno));
    char to[64];
    snprintf(to, sizeof to, "127.0.0.1:%u", (unsigned)port);
    char **args = calloc((size_t)argc + 3, sizeof *args);
    for (int i = 0; i < argc; i++)
        args[i] = argv[i];
    args[argc] = "--to";
    args[argc + 1] = to;
    *pid = fork();
    if (*pid < 0)
        die("baseline: fork: %s", strerror(errno));
    if (*pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execv(args[0], args);
        fprintf(stderr, "bench: baseline: cannot run %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    free(args);
    close(out[1]);
    char line[128];
    FILE *f = fdopen(out[0], "r");
    unsigned got = 0;
    if (!f || !fgets(line, sizeof line, f) || sscanf(line, "listening on 127.0.0.1:%u", &got) != 1 || got > 65535)
        die("baseline: the relay %s did not say where it listens", argv[0]);
    fclose(f);
    return (uint16_t)got;
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

int main(int argc, char **argv)
{
    bool relay = argc > 1;
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
    pid_t relay_pid = 0;
    if (relay)
        sa.sin_port = htons(start_relay(argv + 1, argc - 1, ntohs(sa.sin_port), &relay_pid));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
        die("baseline: connect: %s", strerror(errno));
    tune(fd);
    measure_rtt(fd);
    /* Through a relay the stream runs at its rate: 64 MiB say what it is. */
    measure_stream(fd, relay ? RELAY_STREAM_TOTAL : STREAM_TOTAL);
    measure_copies(fd);
    close(fd);
    waitpid(pid, NULL, 0);
    if (relay_pid > 0) {
        kill(relay_pid, SIGTERM);
        waitpid(relay_pid, NULL, 0);
    }
    if (!relay)
        measure_memcpy();
    return 0;
}
