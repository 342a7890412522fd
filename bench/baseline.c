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
 *   baseline --serve     only the peer, on the port it prints, for the bench
 *                        program's streams beside its copies (bench/tcp.h)
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
#include "bench/tcp.h"
#include "proto/net.h"

#define STREAM_TOTAL ((size_t)512 << 20)
#define RELAY_STREAM_TOTAL ((size_t)64 << 20)

static void measure_rtt(int fd)
{
    enum { N = 4000, WARM = 500 };
    static double t[N];
    uint8_t m[TCP_MSG] = { 0 };
    uint8_t cmd = 'p';
    uint32_t count = N + WARM;
    tcp_put_all(fd, &cmd, 1);
    tcp_put_all(fd, &count, sizeof count);
    for (int i = 0; i < N + WARM; i++) {
        double t0 = now_s();
        tcp_put_all(fd, m, TCP_MSG);
        tcp_get_all(fd, m, TCP_MSG);
        if (i >= WARM)
            t[i - WARM] = (now_s() - t0) * 1e6;
    }
    fig_print("tcp_rtt", "us", t, N);
}

static void measure_stream(int fd, uint64_t stream_total)
{
    enum { REPS = 5 };
    double gbs[REPS];
    uint8_t *buf = malloc(TCP_STREAM_WRITE);
    memset(buf, 2, TCP_STREAM_WRITE);
    for (int rep = -1; rep < REPS; rep++) {
        double r = tcp_stream_once(fd, buf, stream_total);
        if (rep >= 0)
            gbs[rep] = r;
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
    uint8_t *buf = malloc(TCP_STREAM_WRITE);
    memset(buf, 5, TCP_STREAM_WRITE);
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
                double r = tcp_transfer_once(fd, buf, n, !dir);
                if (i >= 0)
                    gbs[got++] = r;
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
    uint16_t port;
    int ls = tcp_listen(&port);
    if (argc == 2 && strcmp(argv[1], "--serve") == 0) {
        /* The bench program's peer: one connection, served until it closes. */
        printf("listening on 127.0.0.1:%u\n", (unsigned)port);
        fflush(stdout);
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            die("baseline: accept: %s", strerror(errno));
        close(ls);
        net_tune(fd);
        tcp_peer(fd);
    }
    bool relay = argc > 1;
    pid_t pid = fork();
    if (pid < 0)
        die("baseline: fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            _exit(1);
        net_tune(fd);
        close(ls);
        tcp_peer(fd);
    }
    close(ls);
    pid_t relay_pid = 0;
    if (relay)
        port = start_relay(argv + 1, argc - 1, port, &relay_pid);
    int fd = tcp_connect(port);
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
